"""Seed 003: an external manager that edits the agent's messages before each step.

    hook = EditHook(session)
    edits = manager(messages)                   # [{ids, role, justification, new_content}]
    messages = hook.apply(messages, edits)      # applied as the server applies them, and logged

Edits go to the server as they are (the contract takes them as operations):
empty ``new_content`` deletes, one id rewrites, several ids merge into the
first. ``justification`` becomes the operation's reason. An empty edit list
is a step where the manager left the context alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from contextview.sdk._capture import Captured
from contextview.sdk.client import Session
from contextview.sdk.hooks._common import Message, submit
from contextview.sdk.ops import apply_edits

Edit = Mapping[str, Any]


def _as_op(edit: Edit) -> dict[str, Any]:
    op: dict[str, Any] = {"ids": [str(i) for i in edit.get("ids") or []]}
    for key in ("role", "justification", "new_content"):
        if edit.get(key) is not None:
            op[key] = edit[key]
    op.setdefault("new_content", "")
    return op


class EditHook:
    def __init__(self, session: Session) -> None:
        self.session = session

    def record(
        self,
        before: Sequence[Any],
        edits: Sequence[Edit],
        *,
        after: Sequence[Any] | None = None,
        reason: str | None = None,
        before_tokens: int | None = None,
        after_tokens: int | None = None,
        outcome: dict[str, Any] | None = None,
    ) -> int:
        """Log one manager pass: the context it saw, its edits, and (optionally) the result."""
        try:
            ops = [_as_op(e) for e in edits]
            return submit(
                self.session,
                Captured.of(before),
                Captured.of(after) if after is not None else None,
                ops,
                reason=reason or ("manager pass" if ops else "manager pass: no edits"),
                before_tokens=before_tokens,
                after_tokens=after_tokens,
                outcome=outcome,
            )
        except Exception as exc:
            self.session.client._internal(exc, self.session.id)
            return -1

    def apply(
        self, before: Sequence[Message], edits: Sequence[Edit], **fields: Any
    ) -> list[Message]:
        """`before` with the edits applied (what the agent should see next); logs the step."""
        self.session.poll()
        after = apply_edits(before, edits)
        self.record(before, edits, **fields)
        return after

    def wrap(
        self, manager: Callable[[list[Message]], Sequence[Edit]]
    ) -> Callable[[list[Message]], list[Message]]:
        """A function that runs `manager` on a context and returns the edited context, logged."""

        def managed(messages: list[Message]) -> list[Message]:
            return self.apply(messages, manager(messages))

        return managed
