"""What every hook does: hand a step of captured contexts to its session."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from contextview.sdk._capture import Captured, captured_draft
from contextview.sdk._wire import StepDraft
from contextview.sdk.client import Session

Message = dict[str, Any]


def field_of(item: Any, name: str, default: Any = None) -> Any:
    """A field of a message or an action, whether a mapping or an object."""
    if isinstance(item, Mapping):
        return item.get(name, default)
    return getattr(item, name, default)


def submit(
    session: Session,
    before: Captured,
    after: Captured | None,
    ops: list[dict[str, Any]] | None,
    *,
    reason: str | None = None,
    mode: str | None = None,
    before_tokens: int | None = None,
    after_tokens: int | None = None,
    outcome: dict[str, Any] | None = None,
    obs: dict[str, Any] | None = None,
) -> int:
    """Queue a step of captured contexts; never raises (returns -1 on failure).

    The draft (copies of the messages, inferred operations when `ops` is None)
    is made on the SDK's thread.
    """
    fields = {
        "ops": ops,
        "infer": ops is None,
        "obs_extra": obs,
        "mode": mode if mode is not None else session.mode,
        "reason": reason,
        "before_tokens": before_tokens,
        "after_tokens": after_tokens,
        "outcome": outcome,
        "timestamp": time.time(),
    }
    return submit_later(session, captured_draft, before, after, fields)


def submit_later(session: Session, build: Callable[..., StepDraft], *args: Any) -> int:
    """Queue a step that `build(*args, index)` makes on the SDK's thread; never raises.

    For hooks whose captures are all the agent's thread needs to take: the
    draft, its fields and its closures are made later, off the agent's step.
    """
    try:
        index = session.next_index()
        session.client._enqueue(("step", session, partial(build, *args, index)))
        return index
    except Exception as exc:
        session.client._internal(exc, session.id)
        return -1
