"""The one error the core raises for bad input, naming the field at fault, the
phrase its answers share for what a session never recorded, and how an error shows
the value at fault."""

from __future__ import annotations

from typing import Any

# What an answer says of an id or a base step the session does not have; the SDK
# looks for this phrase to send the content again.
NEVER_RECORDED = "was never recorded"


class InputError(Exception):
    """Input the core cannot use.

    `status` is 400 for malformed input and 422 for input that is well formed but
    cannot apply (a target not in the context, an id never recorded), so the API
    can answer per event without knowing which check failed.
    """

    def __init__(self, field: str, message: str, status: int = 400) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.status = status

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def short_repr(value: Any) -> str:
    """A value as an error shows what the input held: its repr, cut to 40 characters."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."
