"""Ingest of OTLP traces (contract v1.1, "OTLP/HTTP ingest").

The core (`contextview.core.otlp`) turns the spans of LLM calls into step events;
this module gives each step its index, hands the events to `batch_ingest` (the one
place that stores steps, so an OTLP step is stored, deduplicated and inferred like
any other) and says which spans were refused and why.

Step indices follow start time. A session's indices stay 0, 1, 2, ... without gaps
(the server infers nothing across a gap), in the order of the calls' start times
(ties broken by span id). A call that starts after the session's last stored step,
the usual case, takes the next index. A call that arrives late, starting before
steps already stored, is put in its place: the steps after it are taken out and
stored again one index further, from what the server holds of them (their messages
by id, their model, tools, usage and reply), so the session ends exactly as if the
spans had come in order, inferred operations included (up to
``OTLP_REORDER_MAX_STEPS`` steps move; a span later than that goes at the end).
Requests touching one session are serialized by a transaction-scoped advisory lock;
one that cannot get it within ``OTLP_LOCK_TIMEOUT_MS`` is answered 503, to be retried.
At most ``OTLP_MAX_CONCURRENT`` exports are stored at once (slots, also advisory
locks, shared by every web process); past that the answer is 503 at once.

The same span sent again is the same event (its id is made of the trace and span
ids): it is recognised before any index is given and stores nothing.

Tool spans are kept as tool runs (`ToolRun`, one row per span, in the same
transaction), shown beside the step of the call before them; no step is made of them.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import psycopg
from django.conf import settings
from django.db import DatabaseError, OperationalError, connection, transaction
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from contextview.core.otlp import (
    COMPACTED,
    MAX_NAME,
    LlmCall,
    ToolRun,
    decode_request,
    span_event_id,
    span_lookup_ids,
    step_event,
    timestamp,
)
from contextview.core.refs import decode_refs
from contextview.core.textsafe import escape
from contextview.ingest.models import ToolRun as ToolRunRow
from contextview.ingest.models import event_key
from contextview.ingest.services import batch_ingest
from contextview.projects.models import Project
from contextview.sessions.models import Session, Step
from contextview.sessions.selectors import steps_as_dicts

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# How many refusals the answer spells out; the count covers them all.
MAX_ERRORS_SHOWN = 5
# Attempts at one request. Before the last, an attempt with a refused step is undone
# and the others stored again without it, so it leaves no gap in the indices.
MAX_ATTEMPTS = 3


class ServerBusy(Exception):
    """As many exports as the server takes at once are being stored: retry later."""


# Advisory lock class of the slots that bound how many exports are stored at once.
SLOT_LOCKS = 0x07C7
# How often an export waiting for a slot tries again (`_slot_taken`).
SLOT_POLL_SECONDS = 0.02


@dataclass
class TracesOutcome:
    spans: int
    rejected: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def error_message(self) -> str:
        shown = self.errors[:MAX_ERRORS_SHOWN]
        more = len(self.errors) - len(shown)
        return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


def _slot_taken(cursor: Any) -> bool:
    """One of OTLP_MAX_CONCURRENT slots, shared by every web process, held until the
    transaction ends; False when none came free within OTLP_SLOT_WAIT_MS.

    An export that finds every slot taken waits a little for one (another export ends
    within some 100 ms): an exporter told to come back (503) waits its Retry-After, a
    second, so with more senders than slots answering at once cost a third of the
    throughput. Past the wait, it is told to come back rather than left in a queue.
    """
    deadline = time.monotonic() + settings.OTLP_SLOT_WAIT_MS / 1000
    while True:
        cursor.execute(
            "SELECT s FROM generate_series(1, %s) s WHERE pg_try_advisory_xact_lock(%s, s) LIMIT 1",
            [settings.OTLP_MAX_CONCURRENT, SLOT_LOCKS],
        )
        if cursor.fetchone() is not None:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(SLOT_POLL_SECONDS)


def session_lock_key(*, project_id: int, session_id: str) -> int:
    """The advisory lock on a session's OTLP steps: a 64-bit hash of the project and
    the session id, taken here (an id may hold what PostgreSQL text cannot, a NUL)."""
    text = f"contextview-otlp:{project_id}:{session_id}"
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def traces_ingest(
    *, project: Project, request: ExportTraceServiceRequest, refused: Sequence[str] = ()
) -> TracesOutcome:
    """Store the LLM calls of an export; `refused`: why each span that could not be
    read into it was left out (counted with those refused here)."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('lock_timeout', %s, true)",
                [f"{settings.OTLP_LOCK_TIMEOUT_MS}ms"],
            )
            if settings.OTLP_MAX_CONCURRENT > 0 and not _slot_taken(cursor):
                raise ServerBusy
            # Decoded in a slot: the slots bound the memory and time of that too. Spans
            # stored already are left out before their contexts are read (`_unseen`
            # checks again once the sessions are locked).
            decoded = decode_request(request, stored=_stored(project, span_lookup_ids(request)))
            outcome = TracesOutcome(
                spans=decoded.spans + len(refused), rejected=len(refused), errors=list(refused)
            )
            for refused in decoded.refused:
                outcome.rejected += 1
                outcome.errors.append(f"span {refused.span_id}: {refused.error}")
            _tool_runs_store(project, decoded.tools)
            if not decoded.calls:
                return outcome
            for session_id in sorted({c.session_id for c in decoded.calls}):
                key = session_lock_key(project_id=project.pk, session_id=session_id)
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])
        calls = _unseen(project, decoded.calls)
        reorder = True
        for attempt in range(MAX_ATTEMPTS):
            if not calls:
                break
            # The last attempt keeps what it stored, and moves no stored step.
            last = attempt == MAX_ATTEMPTS - 1
            refused, moved_refused = _attempt_apart(
                project, calls, reorder=reorder and not last, keep=last
            )
            if moved_refused and not last:
                # A step stored before could not be stored again in its new place:
                # leave the stored steps alone and add late calls at the end instead.
                log.warning("could not reorder a session's steps; late spans go at its end")
                reorder = False
                continue
            for call, error in refused:
                outcome.rejected += 1
                outcome.errors.append(f"span {call.span_id}: {error}")
            gone = {id(call) for call, _ in refused}
            if not refused or last:
                _inner_marked(project, [c for c in calls if id(c) not in gone])
                break
            calls = [c for c in calls if id(c) not in gone]
    return outcome


def _inner_marked(project: Project, stored: list[LlmCall]) -> None:
    """Note, for each stored call whose span sits in one the export did not hold, that
    that span holds a model call: should it come later and be a model call's of the
    same session, it is the same call traced twice (``decode_request``), and no step
    of its own."""
    keys = [event_key(c.inner_marker) for c in stored if c.inner_marker is not None]
    if not keys:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO cv_raw_event (project_id, event_key, type, body_hash, received_at) "
            "SELECT %s, k, 'otlp-inner', '', now() FROM unnest(%s::uuid[]) k "
            "ON CONFLICT DO NOTHING",
            [project.pk, keys],
        )


def _tool_runs_store(project: Project, runs: list[ToolRun]) -> None:
    """Keep the export's tool spans; one sent again is kept once. Texts are escaped
    for the store (core.textsafe), then cut to their columns: a tool span is never
    refused for what it says."""
    if not runs:
        return
    ToolRunRow.objects.bulk_create(
        [
            ToolRunRow(
                project=project,
                trace_id=run.trace_id,
                span_id=run.span_id,
                session_external_id=escape(run.session_id)[:MAX_NAME],
                name=escape(run.name)[:MAX_NAME],
                call_id=escape(run.call_id)[:MAX_NAME],
                started_at=_EPOCH + timedelta(microseconds=run.start_ns // 1000),
                duration_ms=(run.end_ns - run.start_ns) / 1e6,
                status=run.status,
                status_message=escape(run.status_message),
            )
            for run in runs
        ],
        ignore_conflicts=True,
    )


def _stored(project: Project, event_ids: list[str]) -> set[str]:
    """Which of these event ids the project has stored."""
    by_key = {event_key(eid): eid for eid in event_ids}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT event_key FROM cv_raw_event WHERE project_id = %s AND event_key = ANY(%s)",
            [project.pk, list(by_key)],
        )
        return {by_key[row[0]] for row in cursor.fetchall()}


def _unseen(project: Project, calls: list[LlmCall]) -> list[LlmCall]:
    """The calls not stored yet: a span sent again, or twice in one request, is one."""
    stored = _stored(project, [c.event_id for c in calls])
    out: list[LlmCall] = []
    for call in calls:
        if call.event_id not in stored:
            stored.add(call.event_id)
            out.append(call)
    return out


@dataclass
class _Session:
    pk: int | None = None
    agent: str = ""
    model: str = ""
    # the last stored step: its index and order key (start microsecond, span id)
    last_index: int = -1
    last_order: tuple[int, str] | None = None
    # the message ids of the last stored step's context, when it came from a span:
    # the export's first call is sent against it, as the calls after are against the
    # call before them
    last_ids: list[str] | None = None


def _micros(ts: datetime) -> int:
    return (ts - _EPOCH) // timedelta(microseconds=1)


def _sessions(project: Project, ids: list[str]) -> dict[str, _Session]:
    found: dict[str, _Session] = defaultdict(_Session)
    refs: dict[str, list[int]] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT s.external_id, s.id, s.agent, s.model, t.index, t.timestamp, "
            f"{_SPAN_ID.format(t='t.')}, {_AFTER.format(t='t.')} "
            "FROM cv_session s LEFT JOIN LATERAL ("
            "SELECT index, timestamp, obs_extra, span_ids, before_refs, after_refs FROM cv_step "
            "WHERE session_id = s.id ORDER BY index DESC LIMIT 1) t ON true "
            "WHERE s.project_id = %s AND s.external_id = ANY(%s)",
            [project.pk, ids],
        )
        for external_id, pk, agent, model, index, ts, span_id, after in cursor.fetchall():
            session = found[external_id]
            session.pk, session.agent, session.model = pk, agent, model
            if index is not None:
                session.last_index = index
                session.last_order = (_micros(ts), span_id or "")
                if span_id:
                    refs[external_id] = decode_refs(bytes(after))
        for external_id, ids_of in _message_ids(cursor, refs).items():
            found[external_id].last_ids = ids_of
    return found


Key = TypeVar("Key")

# A stored step's span id (when it came from a span) and its after context's references.
_SPAN_ID = "coalesce(encode(substring({t}span_ids FROM 17), 'hex'), {t}obs_extra ->> 'span_id')"
_AFTER = "coalesce({t}after_refs, {t}before_refs)"


def _message_ids(cursor: Any, refs: dict[Key, list[int]]) -> dict[Key, list[str]]:
    """The message ids of contexts given as their stored messages' pks, in one query."""
    wanted = sorted({pk for pks in refs.values() for pk in pks})
    if not wanted:
        return {key: [] for key in refs}
    cursor.execute("SELECT id, msg_id FROM cv_message WHERE id = ANY(%s)", [wanted])
    msg_ids = dict(cursor.fetchall())
    return {key: [msg_ids[pk] for pk in pks] for key, pks in refs.items()}


class _Undo(Exception):
    def __init__(self, refused: list[tuple[LlmCall, str]], moved_refused: bool) -> None:
        self.refused = refused
        self.moved_refused = moved_refused


def _attempt_apart(
    project: Project, calls: list[LlmCall], *, reorder: bool, keep: bool
) -> tuple[list[tuple[LlmCall, str]], bool]:
    """`_attempt`; when the database refuses a statement of it (a value that does not
    fit a column), each session again on its own, so only that session's spans are
    refused. A database that cannot be reached is not refusing: that goes up (503)."""
    try:
        return _attempt(project, calls, reorder=reorder, keep=keep)
    except (OperationalError, psycopg.OperationalError):
        raise
    except (DatabaseError, psycopg.DatabaseError) as exc:
        by_session: dict[str, list[LlmCall]] = defaultdict(list)
        for call in calls:
            by_session[call.session_id].append(call)
        if len(by_session) == 1:
            log.warning("OTLP spans the database refused: %s", exc)
            reason = f"the database could not store it ({str(exc).splitlines()[0]})"
            return [(call, reason) for call in calls], False
        try:
            with transaction.atomic():
                refused: list[tuple[LlmCall, str]] = []
                moved_refused = False
                for group in by_session.values():
                    some, moved = _attempt_apart(project, group, reorder=reorder, keep=True)
                    refused.extend(some)
                    moved_refused = moved_refused or moved
                # Undone as a whole unless kept, as `_attempt` is: a moved step
                # refused in its new place must be found where it was.
                if (refused or moved_refused) and not keep:
                    raise _Undo(refused, moved_refused)
                return refused, moved_refused
        except _Undo as undo:
            return undo.refused, undo.moved_refused


def _attempt(
    project: Project, calls: list[LlmCall], *, reorder: bool, keep: bool
) -> tuple[list[tuple[LlmCall, str]], bool]:
    """Store the calls; those refused, with the reason, and whether a moved step was
    among them. Unless `keep`, an attempt with refusals stores nothing."""
    by_session: dict[str, list[LlmCall]] = defaultdict(list)
    for call in calls:
        by_session[call.session_id].append(call)
    sessions = _sessions(project, sorted(by_session))
    try:
        with transaction.atomic():
            events, owners, moved = _plan(project, by_session, sessions, reorder=reorder)
            refused = _run(project, events, owners)
            moved_refused = any(id(call) in moved for call, _ in refused)
            if refused and not keep:
                raise _Undo(refused, moved_refused)
            return [r for r in refused if id(r[0]) not in moved], moved_refused
    except _Undo as undo:
        return undo.refused, undo.moved_refused


def _plan(
    project: Project,
    by_session: dict[str, list[LlmCall]],
    sessions: dict[str, _Session],
    *,
    reorder: bool,
) -> tuple[list[dict[str, Any]], list[LlmCall | None], set[int]]:
    """The events that store the calls: per session, a `session` event when there is
    something new to say about it, then its steps in start order, with their indices.
    Also the ids of the stored steps' calls that had to move."""
    events: list[dict[str, Any]] = []
    owners: list[LlmCall | None] = []
    moved: set[int] = set()
    for session_id, new in by_session.items():
        new.sort(key=lambda c: c.order)
        state = sessions[session_id]
        start = state.last_index + 1
        steps = list(new)
        # the message ids of the stored step before the first to store, when it was a span's
        before_first = state.last_ids
        if reorder and state.last_order is not None and new[0].order < state.last_order:
            again = _take_out_after(project, state, session_id, new[0].order)
            if again is not None:
                start, stored, before_first = again
                moved.update(id(c) for c in stored)
                steps = sorted([*new, *stored], key=lambda c: c.order)
        session_event = _session_event(session_id, new[0], state)
        if session_event is not None:
            events.append(session_event)
            owners.append(None)
        previous: LlmCall | None = None
        for offset, call in enumerate(steps):
            index = start + offset
            base: tuple[int, list[str]] | None = None
            if previous is not None:
                base = (index - 1, previous.message_ids())
            elif before_first is not None:
                base = (index - 1, before_first)
            if base is not None:
                call.aligned_with(base[1])
            events.append(step_event(call, index, base=base))
            owners.append(call)
            previous = call
    return events, owners, moved


def _session_event(session_id: str, first: LlmCall, state: _Session) -> dict[str, Any] | None:
    body: dict[str, Any] = {"session_id": session_id}
    if first.agent and first.agent != state.agent:
        body["agent"] = first.agent
    if first.model and not state.model:
        body["model"] = first.model
    if len(body) == 1 and state.pk is not None:
        return None
    when = timestamp(first.start_ns)
    digest = hashlib.sha256(f"{sorted(body.items())}{when}".encode()).hexdigest()[:32]
    return {"id": f"otlp-session-{digest}", "type": "session", "timestamp": when, "body": body}


def _take_out_after(
    project: Project, state: _Session, session_id: str, order: tuple[int, str]
) -> tuple[int, list[LlmCall], list[str] | None] | None:
    """Take out the stored steps that start after `order`, and return them as calls to
    store again with the index the first of them had, and the message ids of the step
    before that one (None unless it came from a span); None (nothing taken out) when
    they cannot move: steps that did not come as spans."""
    assert state.pk is not None
    since = _EPOCH + timedelta(microseconds=order[0])
    steps = list(
        Step.objects.filter(session_id=state.pk, timestamp__gte=since)
        .with_stats()
        .order_by("index")
    )
    later: list[Step] = []
    for step in steps:
        extra = step.obs_fields() or {}
        span_id = extra.get("span_id")
        if not isinstance(span_id, str) or not isinstance(extra.get("trace_id"), str):
            return None
        if (_micros(step.timestamp), span_id) > order:
            later.append(step)
    if not later or later[0].index + len(later) - 1 != state.last_index:
        return None
    if len(later) > settings.OTLP_REORDER_MAX_STEPS:
        # Storing that many steps again for one late span would let a client make the
        # server redo a session's whole history on every request.
        return None
    session = Session.objects.get(pk=state.pk)
    calls: list[LlmCall] = []
    for step, shown in zip(later, steps_as_dicts(session=session, steps=later), strict=True):
        extra = dict(step.obs_fields() or {})
        trace_id, span_id = extra.pop("trace_id"), extra.pop("span_id")
        output = shown.get("output")
        calls.append(
            LlmCall(
                trace_id=trace_id,
                span_id=span_id,
                session_id=session_id,
                agent=None,
                start_ns=_micros(step.timestamp) * 1000,
                model=shown.get("model"),
                # Ids are digests of the content: alone, they stand for just that.
                messages=[{"id": m["id"]} for m in shown["before"]],
                stored=[{k: v for k, v in m.items() if k != "tokens"} for m in shown["before"]],
                tools=shown.get("tools"),
                usage=shown.get("usage"),
                output=output.get("messages") if isinstance(output, dict) else None,
                compacted=extra.pop(COMPACTED, False) is True,
                extra=extra or None,
            )
        )
    ids = [s.pk for s in later]
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM cv_fold WHERE session_id = %s AND step_id = ANY(%s)", [state.pk, ids]
        )
        cursor.execute("DELETE FROM cv_operation WHERE step_id = ANY(%s)", [ids])
        cursor.execute("DELETE FROM cv_step_stats WHERE step_id = ANY(%s)", [ids])
        cursor.execute("DELETE FROM cv_step WHERE id = ANY(%s)", [ids])
        cursor.execute(
            "DELETE FROM cv_raw_event WHERE project_id = %s AND event_key = ANY(%s)",
            [project.pk, [event_key(span_event_id(c.trace_id, c.span_id)) for c in calls]],
        )
        cursor.execute(
            "UPDATE cv_session SET step_count = step_count - %s WHERE id = %s",
            [len(later), state.pk],
        )
    return later[0].index, calls, _span_step_ids(state.pk, later[0].index - 1)


def _span_step_ids(session_pk: int, index: int) -> list[str] | None:
    """The message ids of a stored step's context, when the step came from a span."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {_SPAN_ID.format(t='')}, {_AFTER.format(t='')} FROM cv_step "
            "WHERE session_id = %s AND index = %s",
            [session_pk, index],
        )
        row = cursor.fetchone()
        if row is None or not row[0]:
            return None
        return _message_ids(cursor, {index: decode_refs(bytes(row[1]))})[index]


def _run(
    project: Project, events: list[dict[str, Any]], owners: list[LlmCall | None]
) -> list[tuple[LlmCall, str]]:
    """Ingest the events; the calls whose step was refused, with the server's reason."""
    # In batches of the size the ingest API takes, so one large export costs no more
    # memory at a time than the largest ingest request.
    size = max(1, settings.INGEST_MAX_EVENTS)
    results = []
    for start in range(0, len(events), size):
        results.extend(batch_ingest(project=project, batch=events[start : start + size]).results)
    refused: list[tuple[LlmCall, str]] = []
    for result, owner in zip(results, owners, strict=True):
        if result.status < 300:
            continue
        if owner is None:
            log.warning("OTLP session event refused: %s", result.error)
            continue
        refused.append((owner, f"{result.error} (status {result.status})"))
    return refused
