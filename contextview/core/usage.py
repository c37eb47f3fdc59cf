"""A model call's token usage, read from what its provider reported.

Usage comes in the contract's names (``input_tokens`` without cached tokens,
``cache_read_tokens``, ``cache_write_tokens``, ``output_tokens``), in Anthropic's
(``cache_read_input_tokens``, ``cache_creation_input_tokens``) or in OpenAI's
(``prompt_tokens`` including cached ones, with ``prompt_tokens_details.cached_tokens``,
and ``completion_tokens``). One reading serves the reported context size and cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class UsageCounts:
    input: int  # input tokens not read from a cache
    cache_read: int
    cache_write: int
    output: int

    @property
    def context(self) -> int:
        """The tokens the call's context came to."""
        return self.input + self.cache_read + self.cache_write

    def as_usage(self) -> dict[str, int]:
        """The counts in the contract's names (a step's ``usage``)."""
        return {
            "input_tokens": self.input,
            "output_tokens": self.output,
            "cache_read_tokens": self.cache_read,
            "cache_write_tokens": self.cache_write,
        }


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return None
    return int(value)


def _first(usage: Mapping[str, Any], *names: str) -> int:
    return next((n for n in (_count(usage.get(name)) for name in names) if n is not None), 0)


def usage_counts(usage: Mapping[str, Any] | None) -> UsageCounts | None:
    """The call's counts; None without usage or without any input count."""
    if not isinstance(usage, Mapping) or not usage:
        return None
    output = _first(usage, "output_tokens", "completion_tokens")
    given = _count(usage.get("input_tokens"))
    if given is not None:
        return UsageCounts(
            input=given,
            cache_read=_first(usage, "cache_read_tokens", "cache_read_input_tokens"),
            cache_write=_first(usage, "cache_write_tokens", "cache_creation_input_tokens"),
            output=output,
        )
    prompt = _count(usage.get("prompt_tokens"))
    if prompt is None:
        return None
    details = usage.get("prompt_tokens_details")
    cached = _first(details, "cached_tokens") if isinstance(details, Mapping) else 0
    cached = min(cached, prompt)
    return UsageCounts(input=prompt - cached, cache_read=cached, cache_write=0, output=output)
