"""What every hook does: snapshot a context and hand a step to its session."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from contextview.sdk._wire import StepDraft
from contextview.sdk.client import Session

Message = dict[str, Any]


def submit(
    session: Session,
    before: tuple[list[Any], list[Message]],
    after: tuple[list[Any], list[Message]] | None,
    ops: list[dict[str, Any]] | Callable[[], list[dict[str, Any]]] | None,
    *,
    reason: str | Callable[[], str | None] | None = None,
    mode: str | None = None,
    before_tokens: int | None = None,
    after_tokens: int | Callable[[], int | None] | None = None,
    outcome: dict[str, Any] | None = None,
    obs: dict[str, Any] | Callable[[], dict[str, Any]] | None = None,
    timestamp: float | None = None,
) -> int:
    """Queue a step built from snapshots; never raises (returns -1 on failure).

    `ops`, `obs`, `reason` and `after_tokens` may be functions: they run on the SDK's
    thread, so the agent's step pays only for the snapshots.
    """
    try:
        index = session.next_index()
        session._submit(
            StepDraft.of(
                index=index,
                timestamp=time.time() if timestamp is None else timestamp,
                before=before,
                after=after,
                ops=ops,
                infer=ops is None,
                obs_extra=obs,
                mode=mode if mode is not None else session.mode,
                reason=reason,
                before_tokens=before_tokens,
                after_tokens=after_tokens,
                outcome=outcome,
            )
        )
        return index
    except Exception as exc:
        session.client._internal(exc, session.id)
        return -1


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


def text_of(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)
