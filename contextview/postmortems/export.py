"""The training dataset export: one JSON line per step (seed 000 section 5, seed 003 3.2).

Each line is ``(obs, operations, after, step reward, session outcome)``, with its
messages by number (a run of consecutive numbers as ``[first, last]``,
``core.distinct.ranged``): a session's lines come in step order, and each distinct
message is written once, in the first line of its session that holds it
(``messages``). Rows are produced a chunk of steps at a time, keyset-paginated, so a
project of a million steps streams in constant memory.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from django.db.models import QuerySet

from contextview.core.distinct import Distinct, Ranged
from contextview.projects.models import Project
from contextview.sessions.models import Operation, Session, Step
from contextview.sessions.selectors import (
    StoredMessage,
    made_once,
    message_as_dict,
    sessions_filtered,
    step_contexts,
)

CHUNK = 200


def _message(stored: StoredMessage) -> dict[str, Any]:
    """A message as the read API gives it (its pinned and expirable marks, the fields it
    was sent with, contents as sent), without its tokens: a training row reads the same
    context as the step endpoint, and a pin or expire shows in the after context."""
    out = message_as_dict(stored)
    del out["tokens"]
    return out


def sessions_rows(sessions: QuerySet[Session]) -> Iterator[dict[str, Any]]:
    """The rows of every step of `sessions` (any filtered queryset), session by session,
    a hundred sessions and a chunk of steps at a time."""
    last_session = 0
    while True:
        batch = list(sessions.filter(pk__gt=last_session).order_by("pk")[:100])
        if not batch:
            return
        for session in batch:
            yield from _session_rows(session)
        last_session = batch[-1].pk


def _session_rows(session: Session) -> Iterator[dict[str, Any]]:
    # A transcript read by an import ran to its end; without the verdict its log may
    # give, its outcome is not known (what session_end's "unknown" says), not "running".
    status = session.status
    if status == Session.Status.RUNNING and session.imported_from:
        status = Session.Status.UNKNOWN
    outcome = {"status": status, "score": session.score}
    # Each distinct message once per session: `obs` and `after` are numbers, and a row
    # carries the messages first used in it under `messages`.
    table = Distinct()
    numbered: Callable[[StoredMessage], int] = made_once(
        lambda stored: table.ref(_message(stored)), key=lambda stored: stored.pk
    )
    ranged = Ranged()  # the session's contexts, in step order
    last_index = -1
    while True:
        steps = list(
            Step.objects.filter(session=session, index__gt=last_index)
            .with_stats()
            .order_by("index")[:CHUNK]
        )
        if not steps:
            return
        contexts = step_contexts(steps).made(numbered)
        ops: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for op in (
            Operation.objects.filter(step__in=steps).select_related("result").order_by("position")
        ):
            ops[op.step_id].append(
                {
                    "op": op.op,
                    "targets": op.targets,
                    "reason": op.reason or None,
                    "params": op.params or {},
                    "result_id": op.result.msg_id if op.result else None,
                }
            )
        for step in steps:
            before, after = contexts(step.pk)
            stats = step.stats if step.stats_status == "ready" else None
            yield {
                "session_id": session.external_id,
                "agent": session.agent or None,
                "mode": step.mode or session.mode or None,
                "index": step.index,
                "obs": ranged(before),
                "operations": ops.get(step.pk, []),
                "after": ranged(after),
                "messages": table.new(),
                "reward": stats["reward"] if stats else None,
                "flags": stats["flags"] if stats else None,
                "outcome": outcome,
            }
        last_index = steps[-1].index


def dataset_jsonl(
    *,
    project: Project,
    agent: str | None = None,
    mode: str | None = None,
    status: str | None = None,
) -> Iterator[str]:
    """JSON lines of every step of the project's sessions, with the read API's filters."""
    return sessions_jsonl(sessions_filtered(project=project, agent=agent, mode=mode, status=status))


def sessions_jsonl(sessions: QuerySet[Session]) -> Iterator[str]:
    """JSON lines of every step of `sessions` (any filtered queryset)."""
    for row in sessions_rows(sessions):
        line = json.dumps(row, ensure_ascii=False)
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # an unpaired surrogate: written as JSON's \ud83d
            line = json.dumps(row)
        yield line + "\n"
