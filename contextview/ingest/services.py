"""Ingest of event batches (contract: POST /api/v1/ingest).

A batch is handled in three passes:

1. validate every event on its own (pydantic at the edge, the core for messages
   and operations); a bad event gets its own error and nothing else changes;
2. inside one transaction, lock the batch's sessions, load only what the batch
   refers to (messages sent by id alone, archived originals named by reloads,
   existing step indices), and derive each step's contexts with the core;
3. write everything in a handful of set-based statements (``unnest`` inserts,
   ``ON CONFLICT DO NOTHING`` for content-addressed rows), never a query per
   message.

The response is built only after the transaction commits.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import compress
from typing import Any

from django.db import transaction
from django.utils import timezone
from pydantic import BaseModel, ValidationError

from contextview.core.apply import StepResult
from contextview.core.errors import InputError
from contextview.core.layout import one_line, task_line
from contextview.core.messages import (
    blob_hash,
    canonical_json,
    message_hash,
    message_payload,
)
from contextview.core.model import Message as CoreMessage
from contextview.core.parts import tools_text
from contextview.core.refs import decode_refs, encode_refs
from contextview.core.sequences import common_prefix
from contextview.core.session import SessionWalk
from contextview.core.textsafe import written_json_needs_escape
from contextview.db import binary_cursor, each_key_sql
from contextview.ingest.body import TOO_DEEP_TO_READ, Refused, event_nesting_error
from contextview.ingest.models import KEY_BYTES, event_key
from contextview.ingest.schemas import (
    BODY_MODELS,
    EARLIEST_TIMESTAMP,
    EventHead,
    SessionBody,
    SessionEndBody,
    StepBody,
    describe_error,
)
from contextview.ingest.textrules import event_make_safe
from contextview.projects.models import Project
from contextview.sessions import step_storage
from contextview.sessions.models import Session, Step, fold_key
from contextview.sessions.selectors import (
    MESSAGE_COLUMNS,
    blob_parts,
    message_from_row,
    messages_of_pks_sql,
    step_outputs,
    stored_extra,
)
from contextview.sessions.services import directives_pending_for
from contextview.stats.scheduling import stats_schedule
from contextview.stats.services import stats_invalidate


@dataclass
class EventResult:
    id: str | None
    status: int
    error: str | None = None
    duplicate: bool = False

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "status": self.status}
        if self.error is not None:
            out["error"] = self.error
        if self.duplicate:
            out["duplicate"] = True
        return out


@dataclass
class _Event:
    position: int
    head: EventHead
    body: SessionBody | StepBody | SessionEndBody
    raw_body: dict[str, Any]
    # sha256 of the body; a step keeps its first KEY_BYTES
    body_hash: bytes
    # what tells the event from another sent under its id (KEY_BYTES)
    event_hash: bytes
    timestamp: datetime


@dataclass
class _StepRow:
    session: Session
    body: StepBody
    timestamp: datetime
    result: StepResult
    body_hash: bytes
    obs_extra: dict[str, Any] | None
    # messages whose recording changed what their id stands for
    recorded: dict[str, CoreMessage]
    # the blob hash of the tool definitions sent with the call
    tools_hash: bytes | None = None
    # an OTLP trace and span id, apart from obs_extra (``step_storage``)
    span_ids: bytes | None = None
    # the output as stored: what is left of it, and the blob hashes of its texts
    output: dict[str, Any] | None = None
    output_texts: list[bytes] | None = None


@dataclass
class _SessionState:
    session: Session
    # The core's view of the session, holding only what this batch refers to: the
    # latest messages of ids sent alone, the archived originals reloads name, and
    # the after contexts of the bases named ($base) and of the steps taken.
    walk: SessionWalk = field(default_factory=SessionWalk)
    step_hashes: dict[int, bytes] = field(default_factory=dict)
    touched: bool = False
    fields: set[str] = field(default_factory=set)
    # whether a session event changed what its steps' statistics were computed from
    stats_inputs_changed: bool = False
    # the last context looked through for a task line while the session had none
    task_scanned: Sequence[CoreMessage] = ()


def _sha(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def _validate(
    position: int, raw: Any, now: datetime, needs_escape: bool, nesting_checked: bool = False
) -> _Event | EventResult:
    if isinstance(raw, Refused):
        return EventResult(raw.event_id, 400, raw.error)
    if not isinstance(raw, dict):
        return EventResult(None, 400, f"batch[{position}]: an event must be a JSON object")
    raw_id = raw.get("id")
    event_id = raw_id if isinstance(raw_id, str) else None
    # The body is written out once, to be hashed; that text also tells whether any
    # string in it needs escaping, so a clean event is not walked string by string.
    try:
        body_text: str | None = canonical_json(raw.get("body"))
    except RecursionError:
        return EventResult(event_id, 400, f"batch[{position}]: {TOO_DEEP_TO_READ}")
    # The events of an import or an OTLP span came in no ingest body, whose parser
    # would have held them to its limit on nesting.
    deep = None if nesting_checked else event_nesting_error(raw, body_text)
    if deep is not None:
        return EventResult(event_id, 400, deep)
    if needs_escape and (
        written_json_needs_escape(body_text)
        or written_json_needs_escape(canonical_json({k: v for k, v in raw.items() if k != "body"}))
    ):
        try:
            raw = event_make_safe(raw)
        except InputError as exc:
            return EventResult(event_id, exc.status, str(exc))
        body_text = None
    try:
        head = EventHead.model_validate(raw)
    except ValidationError as exc:
        return EventResult(event_id, 400, describe_error(exc, prefix=""))
    try:
        body = BODY_MODELS[head.type].model_validate(head.body)
    except ValidationError as exc:
        return EventResult(head.id, 400, describe_error(exc, prefix="body"))
    return _Event(
        position=position,
        head=head,
        body=body,  # type: ignore[arg-type]
        raw_body=head.body,
        body_hash=(body_hash := _sha(body_text or canonical_json(head.body))),
        # The body is hashed once; the event's hash covers it and the other fields.
        event_hash=_sha(
            canonical_json({k: v for k, v in raw.items() if k not in ("id", "body")})
            + body_hash.hex()
        )[:KEY_BYTES],
        timestamp=head.timestamp or now,
    )


def _id_alone_refs(body: StepBody) -> set[str]:
    """Ids (a number as its text) a step sends without content: those must be looked
    up in the session."""
    results = [
        op["result"] for op in _raw_ops(body) if type(op) is dict and type(op.get("result")) is dict
    ]
    after = body.after.messages if body.after is not None else ()
    found: set[str] = set()
    for messages in (body.obs.messages, after, results):
        # Runs over every message of every step: kept to type checks and a
        # membership test; anything malformed is left for the core to report.
        for m in messages:
            if type(m) is dict and "content" not in m:
                mid = m.get("id")
                if type(mid) is str:
                    found.add(mid)
                elif type(mid) is int:
                    found.add(str(mid))
    return found


def _raw_ops(body: StepBody) -> list[Any]:
    if body.actions is not None:
        return list(body.actions)
    if body.action is not None:
        return [body.action]
    return []


def _reload_targets(body: StepBody) -> set[str]:
    """Ids (a number as its text) the step's reloads name: those must be looked up in
    the session's archive."""
    found: set[str] = set()
    for op in _raw_ops(body):
        if isinstance(op, dict) and op.get("action") == "reload":
            many = op.get("targets")
            for target in [op.get("target"), *(many if isinstance(many, list) else ())]:
                if isinstance(target, str | int) and not isinstance(target, bool):
                    found.add(str(target))
    return found


def _plain_key(m: CoreMessage) -> tuple[Any, ...] | None:
    """Every field that makes a message with text content what it is (None when
    its content is a list of parts or it carries extra fields)."""
    if type(m.content) is not str or m.extra is not None:
        return None
    return (m.id, m.role, m.partition, m.tool, m.pinned, m.expirable, m.content)


class _Store:
    """Content-addressed rows gathered during a batch, written in bulk at its end."""

    def __init__(self, project_id: int) -> None:
        self.project_id = project_id
        # id(message object) -> message hash; objects stay alive for the whole batch.
        self.hash_of: dict[int, bytes] = {}
        self.pk_of_hash: dict[bytes, int] = {}
        self.new_messages: dict[bytes, tuple[CoreMessage, bytes]] = {}
        self.new_blobs: dict[bytes, CoreMessage] = {}
        self._alive: list[CoreMessage] = []
        self.hash_of_plain: dict[tuple[Any, ...], bytes] = {}
        # Tool definitions sent with calls, by blob hash: a list resent with every
        # call is one blob, which each step names.
        self.tools: dict[bytes, list[dict[str, Any]]] = {}
        self.tools_pk: dict[bytes, int] = {}
        # Texts of the model's replies, by blob hash: the next call's context mostly
        # holds the same text, as the content of a message.
        self.texts: dict[bytes, str] = {}
        self.texts_pk: dict[bytes, int] = {}

    def known(self, message: CoreMessage, msg_hash: bytes, pk: int) -> None:
        self.hash_of[id(message)] = msg_hash
        self.pk_of_hash[msg_hash] = pk
        self._alive.append(message)

    def hash(self, message: CoreMessage) -> bytes:
        h = self.hash_of.get(id(message))
        if h is not None:
            return h
        # A context resent in full parses every message again, as a new object: a
        # plain text message is looked up by its fields, which costs a fraction of
        # hashing it again.
        key = _plain_key(message)
        h = None if key is None else self.hash_of_plain.get(key)
        if h is not None:
            self.hash_of[id(message)] = h
            self._alive.append(message)
            return h
        bh = blob_hash(message_payload(message))
        h = message_hash(message, blob=bh)
        if key is not None:
            self.hash_of_plain[key] = h
        self.hash_of[id(message)] = h
        self._alive.append(message)
        if h not in self.pk_of_hash and h not in self.new_messages:
            self.new_messages[h] = (message, bh)
            self.new_blobs.setdefault(bh, message)
        return h

    def hash_all(self, messages: Sequence[CoreMessage]) -> None:
        """`hash` each message not hashed yet: most of a resent context was, as the
        same objects (taken from a base run), so that costs one lookup each."""
        hashed = self.hash_of
        # Only those not hashed yet reach the loop; the others are passed over at C speed.
        for m in compress(
            messages, map(operator.not_, map(hashed.__contains__, map(id, messages)))
        ):
            self.hash(m)

    def tools_hash(self, tools: list[dict[str, Any]]) -> bytes:
        h = blob_hash(tools)
        self.tools.setdefault(h, tools)
        return h

    def text_hash(self, text: str) -> bytes:
        h = blob_hash(text)
        self.texts.setdefault(h, text)
        return h

    def flush(self, cursor: Any) -> None:
        """Insert the new blobs and messages, then learn every pk the batch needs."""
        if not self.new_messages and not self.tools and not self.texts:
            return
        pid = self.project_id
        blob_hashes = list(self.new_blobs)
        texts = [m.text for m in self.new_blobs.values()]
        parts = [blob_parts(m) for m in self.new_blobs.values()]
        for h, tools in self.tools.items():
            if h not in self.new_blobs:
                blob_hashes.append(h)
                texts.append(tools_text(tools))
                parts.append(json.dumps(tools))
        for h, text in self.texts.items():
            if h not in self.new_blobs:
                blob_hashes.append(h)
                texts.append(text)
                parts.append(None)
        cursor.execute(
            "INSERT INTO cv_blob (project_id, hash, text, parts) "
            "SELECT %s, h, t, p::jsonb FROM unnest(%b::bytea[], %b::text[], %b::text[]) "
            "AS x(h, t, p) ON CONFLICT (project_id, hash) DO NOTHING RETURNING hash, id",
            [pid, blob_hashes, texts, parts],
        )
        blob_pk = _pks_of(cursor, "cv_blob", pid, blob_hashes)
        self.tools_pk.update((h, blob_pk[h]) for h in self.tools)
        self.tools.clear()
        self.texts_pk.update((h, blob_pk[h]) for h in self.texts)
        self.texts.clear()
        if not self.new_messages:
            return
        msg_hashes = list(self.new_messages)
        rows = [self.new_messages[h] for h in msg_hashes]
        cursor.execute(
            "INSERT INTO cv_message (project_id, hash, blob_id, msg_id, role, partition, tool, "
            "pinned, expirable, extra) "
            "SELECT %s, h, b, i, r, p, t, pn, ex, e::jsonb FROM unnest("
            "%b::bytea[], %b::bigint[], %b::text[], %b::text[], %b::text[], %b::text[], "
            "%b::bool[], %b::bool[], %b::text[]) AS x(h, b, i, r, p, t, pn, ex, e) "
            "ON CONFLICT (project_id, hash) DO NOTHING RETURNING hash, id",
            [
                pid,
                msg_hashes,
                [blob_pk[bh] for _, bh in rows],
                [m.id for m, _ in rows],
                [m.role for m, _ in rows],
                [m.partition for m, _ in rows],
                [m.tool for m, _ in rows],
                [m.pinned for m, _ in rows],
                [m.expirable for m, _ in rows],
                [stored_extra(m) for m, _ in rows],
            ],
        )
        self.pk_of_hash.update(_pks_of(cursor, "cv_message", pid, msg_hashes))
        self.new_messages.clear()
        self.new_blobs.clear()

    def pks(self, messages: Sequence[CoreMessage]) -> list[int]:
        pk_of_hash = self.pk_of_hash
        hash_of = self.hash_of
        return [pk_of_hash[hash_of[id(m)]] for m in messages]


def _pks_of(cursor: Any, table: str, project_id: int, hashes: list[bytes]) -> dict[bytes, int]:
    """The pks of content-addressed rows just inserted ``ON CONFLICT DO NOTHING
    RETURNING hash, id`` (on `cursor`): those it returned, and the others (stored
    before) looked up, only when there are some, which new content mostly is not."""
    found = {bytes(h): pk for h, pk in cursor.fetchall()}
    if len(found) < len(hashes):
        cursor.execute(
            each_key_sql(
                "%b::bytea[]", f"SELECT hash, id FROM {table} WHERE project_id = %s AND hash = x.k"
            ),
            [[h for h in hashes if h not in found], project_id],
        )
        found.update((bytes(h), pk) for h, pk in cursor.fetchall())
    return found


# The latest recording of each id a batch sends alone, and the latest archived
# original of each id a reload names: both looked up per (session, id), the
# archive through the key of each (`fold_key`, w.k).
_LATEST_FROM = (
    "JOIN cv_session_message x ON x.session_id = w.s AND x.msg_id = w.i "
    "JOIN cv_message m ON m.id = x.message_id",
    "x.seq DESC",
)
_ARCHIVED_FROM = (
    "JOIN cv_fold x ON x.keys @> ARRAY[w.k] AND x.session_id = w.s "
    "JOIN cv_step st ON st.id = x.step_id "
    "CROSS JOIN LATERAL unnest(x.originals, x.keys) WITH ORDINALITY AS u(pk, k, n) "
    "JOIN cv_message m ON m.id = u.pk AND u.k = w.k AND m.msg_id = w.i",
    "st.index DESC, x.inferred DESC, x.op_position DESC, u.n DESC",
)


def _load_by_id(
    cursor: Any, store: _Store, wanted: dict[int, set[str]], source: tuple[str, str]
) -> dict[int, dict[str, CoreMessage]]:
    out: dict[int, dict[str, CoreMessage]] = defaultdict(dict)
    pairs = [(sid, mid) for sid, ids in wanted.items() for mid in ids]
    if not pairs:
        return out
    joins, newest = source
    cursor.execute(
        f"SELECT DISTINCT ON (w.s, w.i) w.s, m.id, m.hash, {MESSAGE_COLUMNS} "
        f"FROM unnest(%b::bigint[], %b::text[], %b::int[]) AS w(s, i, k) {joins} "
        f"JOIN cv_blob b ON b.id = m.blob_id ORDER BY w.s, w.i, {newest}",
        [
            [sid for sid, _ in pairs],
            [mid for _, mid in pairs],
            [fold_key(sid, mid) for sid, mid in pairs],
        ],
    )
    for row in cursor.fetchall():
        message = message_from_row(row[3:])
        store.known(message, bytes(row[2]), row[1])
        out[row[0]][message.id] = message
    return out


def _lock_sessions(project: Project, external_ids: set[str], now: datetime) -> tuple[dict, set]:
    """Create missing sessions, then lock all of them in id order (no deadlocks)."""
    ids = sorted(external_ids)
    with binary_cursor() as cursor:
        cursor.execute(
            "INSERT INTO cv_session (project_id, external_id, agent, model, encoding, mode, "
            "pinned, metadata, status, declared, started_at, last_event_at, created_at, "
            "step_count, record_seq, stats_status) "
            "SELECT %s, e, '', '', '', '', '[]'::jsonb, '{}'::jsonb, 'running', false, %s, %s, "
            "%s, 0, 0, 'pending' FROM unnest(%b::text[]) AS x(e) "
            "ON CONFLICT (project_id, external_id) DO NOTHING RETURNING id",
            [project.pk, now, now, now, ids],
        )
        created = {row[0] for row in cursor.fetchall()}
    sessions = (
        Session.objects.select_for_update()
        .filter(project=project, external_id__in=ids)
        .order_by("id")
    )
    return {s.external_id: s for s in sessions}, created


@dataclass
class IngestOutcome:
    results: list[EventResult]
    directives: list[dict[str, Any]]
    # pks of stored steps, for the statistics workers
    step_ids: list[int]

    def as_dict(self) -> dict[str, Any]:
        return {
            "results": [r.as_dict() for r in self.results],
            "directives": self.directives,
        }


def batch_ingest(
    *,
    project: Project,
    batch: list[Any],
    needs_escape: bool = True,
    nesting_checked: bool = False,
) -> IngestOutcome:
    """Store a batch of events (each a decoded event, or ``body.Refused``).

    `needs_escape` False says that no string of the batch holds what
    ``core.textsafe`` escapes (the body parser tells from the raw bytes), so the
    events need not be walked for it; `nesting_checked` True that the body parser
    already refused the events nested too deep.
    """
    now = timezone.now()
    results: list[EventResult | None] = [None] * len(batch)
    events: list[_Event] = []
    for position, raw in enumerate(batch):
        checked = _validate(position, raw, now, needs_escape, nesting_checked)
        if isinstance(checked, EventResult):
            results[position] = checked
        else:
            events.append(checked)

    step_ids: list[int] = []
    directives: list[dict[str, Any]] = []
    with transaction.atomic():
        # Duplicates count too: their sessions' directives go back in the response.
        session_ids = {e.body.session_id for e in events}
        states: dict[str, _SessionState] = {}
        created: set[int] = set()
        if session_ids:
            sessions, created = _lock_sessions(project, session_ids, now)
            states = {ext: _SessionState(session=s) for ext, s in sessions.items()}
            for st in states.values():
                if st.session.pk in created:
                    # Its last event is the latest its events say (an imported
                    # transcript's are old), not the moment the row was made.
                    st.session.last_event_at = EARLIEST_TIMESTAMP
        # After the locks: a sender of the same batch at the same moment has
        # committed by now, and its events are answered as duplicates, not stored twice.
        todo = _dedupe(project, events, results)
        store = _Store(project.pk)
        step_rows: list[_StepRow] = []
        if todo:
            step_rows = _process(project, todo, states, store, results, now)
            step_ids = _write(project, states, store, step_rows, todo, results, now)
        _save_sessions(states)
        # A step may come before its session's event, and a session may be sent again:
        # steps computed before it are computed again from what it says now.
        restated = [
            st.session.pk
            for st in states.values()
            if st.stats_inputs_changed and st.session.pk not in created
        ]
        if restated:
            stats_invalidate(session_ids=restated)
        # Sessions created only for events that then failed would be empty shells.
        unused = [
            st.session.pk for st in states.values() if st.session.pk in created and not st.touched
        ]
        if unused:
            Session.objects.filter(pk__in=unused).delete()
        if states:
            live = [st.session for st in states.values() if st.session.pk not in unused]
            # What the stored steps show done is marked applied, not sent back.
            stored = [
                (r.session, r.body.index, r.body.mode or "", r.result.reloaded, r.result.before)
                for r in step_rows
            ]
            directives = directives_pending_for(sessions=live, steps=stored)
        changed = sorted(st.session.pk for st in states.values() if st.touched)
        if changed:
            transaction.on_commit(lambda: stats_schedule(session_ids=changed))
    final = [r if r is not None else EventResult(None, 500, "not processed") for r in results]
    return IngestOutcome(results=final, directives=directives, step_ids=step_ids)


def step_reply_complete(*, project: Project, event: Any) -> str | None:
    """Store the grown reply of a step sent again under its event id: a transcript
    imported while a call was still being written, then imported again once it grew.

    An importer makes a step's id from its call (the session, index, context and
    operations), not from the reply, so the same id with other content is that call
    with more, or less, of its reply. ``"grown"``: the stored reply was a beginning
    of this one, which replaces it (output, usage, context window), and the
    statistics of the step and those after it are computed again. ``"held"``: this
    reply is a beginning of the stored one (an older copy of the file), and nothing
    changes. None, changing nothing: no step was stored under this id, or the two
    replies differ otherwise.
    """
    checked = _validate(0, event, timezone.now(), True)
    if isinstance(checked, EventResult) or not isinstance(checked.body, StepBody):
        return None
    body, key = checked.body, event_key(checked.head.id)
    with transaction.atomic(), binary_cursor() as cursor:
        found = _step_stored_under(cursor, project, body, key, lock=True)
        if found is None:
            return None
        step_id, session_pk = found
        output = None if body.output is None else body.output.model_dump(exclude_unset=True)
        relation = _reply_against_stored(step_id, output)
        if relation != "grown":
            return relation
        split = step_storage.output_split(output)
        store = _Store(project.pk)
        texts = None if split is None else [store.text_hash(t) for t in split[1]]
        kept = output if split is None else split[0]
        store.flush(cursor)
        packed, usage_text = _usage(body.usage)
        cursor.execute(
            "UPDATE cv_step SET output = %s::jsonb, output_blobs = %b, usage = coalesce(%b, "
            "convert_to(%s::jsonb::text, 'UTF8')), context_window = %s, body_hash = %b "
            "WHERE id = %s",
            [
                None if kept is None else json.dumps(kept),
                None if texts is None else encode_refs(store.texts_pk[h] for h in texts),
                packed,
                usage_text,
                body.context_window,
                checked.body_hash[:KEY_BYTES],
                step_id,
            ],
        )
        cursor.execute(
            "UPDATE cv_raw_event SET body_hash = %b WHERE project_id = %s AND event_key = %s",
            [checked.event_hash, project.pk, key],
        )
        # Pending again, as a late step is: the worker computes from the first pending
        # step on, and starts its sums and losses over from there.
        cursor.execute("DELETE FROM cv_step_stats WHERE step_id = %s", [step_id])
        cursor.execute("UPDATE cv_session SET stats_status = 'pending' WHERE id = %s", [session_pk])
    transaction.on_commit(lambda: stats_schedule(session_ids=[session_pk]))
    return "grown"


def step_is_stored(*, project: Project, event: Any) -> bool | None:
    """Whether the step `event` is the one its session holds at its index, for an
    import to tell a transcript that grew from another one named the same: None when
    the session holds no step there (or there is no such session); True when that
    step was stored from this event (its call) with this reply, or with one of which
    either is a beginning (a copy of the transcript taken earlier or later); False
    when it is another call, or the same call with another reply."""
    checked = _validate(0, event, timezone.now(), True)
    if isinstance(checked, EventResult) or not isinstance(checked.body, StepBody):
        return None
    body = checked.body
    held = Step.objects.filter(
        session__project=project, session__external_id=body.session_id, index=body.index
    ).exists()
    if not held:
        return None
    with binary_cursor() as cursor:
        found = _step_stored_under(cursor, project, body, event_key(checked.head.id), lock=False)
    if found is None:
        return False
    output = None if body.output is None else body.output.model_dump(exclude_unset=True)
    return _reply_against_stored(found[0], output) is not None


def _step_stored_under(
    cursor: Any, project: Project, body: StepBody, key: Any, *, lock: bool
) -> tuple[int, int] | None:
    """The step (its pk, and its session's) stored from the event `key` at `body`'s
    index of its session; `lock`: locked for an update of it."""
    cursor.execute(
        "SELECT st.id, st.session_id FROM cv_raw_event r JOIN cv_session s "
        "ON s.project_id = r.project_id AND s.external_id = %s "
        "JOIN cv_step st ON st.session_id = s.id AND st.index = %s "
        "WHERE r.project_id = %s AND r.event_key = %s AND r.type = 'step'"
        + (" FOR UPDATE OF r, s, st" if lock else ""),
        [body.session_id, body.index, project.pk, key],
    )
    found = cursor.fetchone()
    return None if found is None else (found[0], found[1])


def _reply_against_stored(step_id: int, output: dict[str, Any] | None) -> str | None:
    """How a reply sent again for the stored step `step_id` stands to the one it holds:
    ``"grown"`` (the stored one is a beginning of it, or the same), ``"held"`` (it is
    a beginning of the stored one), None (they differ otherwise)."""
    stored = step_outputs([Step.objects.get(pk=step_id)])[step_id]
    said, sent = step_storage.output_parts(stored), step_storage.output_parts(output)
    if sent[: len(said)] != said:
        return "held" if said[: len(sent)] == sent else None
    return "grown"


def _dedupe(project: Project, events: list[_Event], results: list[EventResult | None]) -> list:
    """Answer event ids already stored (200 duplicate or 409).

    Repeats within the batch are answered as they come (``_repeat``): a copy of
    an event the batch refused is judged again.
    """
    keys = [event_key(e.head.id) for e in events]
    with binary_cursor() as cursor:
        cursor.execute(
            "SELECT event_key, body_hash FROM cv_raw_event "
            "WHERE project_id = %s AND event_key = ANY(%b::uuid[])",
            [project.pk, keys],
        )
        stored = {k: bytes(h) for k, h in cursor.fetchall()}
    todo: list[_Event] = []
    for e, key in zip(events, keys, strict=True):
        previous = stored.get(key)
        if previous is not None:
            results[e.position] = _repeat(e, previous)
            continue
        todo.append(e)
    return todo


def _repeat(e: _Event, stored_hash: bytes) -> EventResult:
    """The answer to an event whose id was stored (by an earlier batch or event)."""
    if stored_hash == e.event_hash:
        return EventResult(e.head.id, 200, duplicate=True)
    message = f"id: event id {e.head.id!r} was already used for different content"
    return EventResult(e.head.id, 409, message)


# The messages of stored steps' contexts, with the hash each is stored under.
_STORED_MESSAGES_SQL = messages_of_pks_sql(f"m.id, m.hash, {MESSAGE_COLUMNS}")


def _load_bases(
    cursor: Any, store: _Store, wanted: set[tuple[int, int]]
) -> dict[tuple[int, int], list[CoreMessage]]:
    """The stored after contexts of (session pk, step index) pairs; absent ones left out."""
    if not wanted:
        return {}
    pairs = sorted(wanted)
    cursor.execute(
        "SELECT s.session_id, s.index, coalesce(s.after_refs, s.before_refs) FROM cv_step s "
        "JOIN unnest(%b::bigint[], %b::int[]) AS w(s, i) ON s.session_id = w.s AND s.index = w.i",
        [[pk for pk, _ in pairs], [index for _, index in pairs]],
    )
    refs = {(pk, index): decode_refs(bytes(data)) for pk, index, data in cursor.fetchall()}
    wanted_pks = sorted({pk for ids in refs.values() for pk in ids})
    if not wanted_pks:
        return {key: [] for key in refs}
    cursor.execute(_STORED_MESSAGES_SQL, [wanted_pks])
    by_pk: dict[int, CoreMessage] = {}
    for row in cursor.fetchall():
        message = message_from_row(row[2:])
        store.known(message, bytes(row[1]), row[0])
        by_pk[row[0]] = message
    return {key: [by_pk[pk] for pk in ids] for key, ids in refs.items()}


def _process(
    project: Project,
    todo: list[_Event],
    states: dict[str, _SessionState],
    store: _Store,
    results: list[EventResult | None],
    now: datetime,
) -> list[_StepRow]:
    steps = [e for e in todo if isinstance(e.body, StepBody)]
    with binary_cursor() as cursor:
        if steps:
            sids = [states[e.body.session_id].session.pk for e in steps]
            cursor.execute(
                "SELECT session_id, index, body_hash FROM cv_step "
                "WHERE session_id = ANY(%b::bigint[]) AND index = ANY(%b::int[])",
                [sorted(set(sids)), sorted({e.body.index for e in steps})],  # type: ignore[union-attr]
            )
            by_pk = {st.session.pk: st for st in states.values()}
            for sid, index, h in cursor.fetchall():
                by_pk[sid].step_hashes[index] = bytes(h)
            wanted_latest: dict[int, set[str]] = defaultdict(set)
            wanted_archive: dict[int, set[str]] = defaultdict(set)
            for e in steps:
                pk = states[e.body.session_id].session.pk
                wanted_latest[pk] |= _id_alone_refs(e.body)  # type: ignore[arg-type]
                reloads = _reload_targets(e.body)  # type: ignore[arg-type]
                wanted_archive[pk] |= reloads
                # what left the context silently is reloadable before its fold is stored
                wanted_latest[pk] |= reloads
            for pk, latest in _load_by_id(cursor, store, wanted_latest, _LATEST_FROM).items():
                by_pk[pk].walk.latest.update(latest)
            for pk, archive in _load_by_id(cursor, store, wanted_archive, _ARCHIVED_FROM).items():
                by_pk[pk].walk.archive.update(archive)
            # The bases named, but for a step this batch stores: its after is worked out
            # before the steps sent against it.
            named: set[tuple[int, int]] = set()
            new: set[tuple[int, int]] = set()
            for body in (e.body for e in steps):
                if isinstance(body, StepBody):
                    pk = states[body.session_id].session.pk
                    if body.index not in by_pk[pk].step_hashes:
                        new.add((pk, body.index))
                    if body.obs.base is not None:
                        named.add((pk, body.obs.base))
            bases = named - new
            for (pk, index), context in _load_bases(cursor, store, bases).items():
                by_pk[pk].walk.afters[index] = context

    rows: list[_StepRow] = []
    # Event ids this batch stored so far, and their hashes.
    stored: dict[str, bytes] = {}
    for e in todo:
        previous = stored.get(e.head.id)
        if previous is not None:
            results[e.position] = _repeat(e, previous)
            continue
        result = _process_one(e, states[e.body.session_id], store, rows)
        results[e.position] = result
        # A refused event recorded nothing: a copy of it is judged again.
        if result.status == 201 or result.duplicate:
            stored[e.head.id] = e.event_hash
    return rows


def _process_one(
    e: _Event, state: _SessionState, store: _Store, rows: list[_StepRow]
) -> EventResult:
    body = e.body
    if isinstance(body, SessionBody):
        _apply_session_event(state, body, e)
        return EventResult(e.head.id, 201)
    if isinstance(body, SessionEndBody):
        s = state.session
        s.status, s.score, s.ended_at = body.status, body.score, e.timestamp
        state.fields |= {"status", "score", "ended_at"}
        _note_event(state, e)
        return EventResult(e.head.id, 201)
    row = _derive_or_refuse(state, e, body, store)
    if isinstance(row, EventResult):
        return row
    rows.append(row)
    _note_event(state, e)
    _note_task(state, context=row.result.before)
    return EventResult(e.head.id, 201)


def _note_event(state: _SessionState, e: _Event) -> None:
    state.touched = True
    s = state.session
    if e.timestamp > s.last_event_at:
        s.last_event_at = e.timestamp
        state.fields.add("last_event_at")
    if not s.declared and e.timestamp < s.started_at:
        s.started_at = e.timestamp
        state.fields.add("started_at")


def _note_task(
    state: _SessionState, *, said: Any = None, context: Sequence[CoreMessage] = ()
) -> None:
    """Keep what the session was asked to do (``Session.task``): the "task" its metadata
    says, which wins, or else the task or question of the first context that has one."""
    s = state.session
    if isinstance(said, str) and said.strip():
        line = one_line(said)
    elif not s.task:
        # What the last context looked through shares with this one held no task and
        # no question: only the rest is read.
        start = common_prefix(state.task_scanned, context)
        state.task_scanned = context
        line = task_line(context[start:])
    else:
        return
    if line and line != s.task:
        s.task = line
        state.fields.add("task")


# The session's fields that its steps' statistics are computed from: tokens (encoding,
# or the model it derives from), occupancy (budget, window) and the pinned texts.
STATS_INPUTS = ("model", "encoding", "context_window", "budget", "pinned")


def _apply_session_event(state: _SessionState, body: SessionBody, e: _Event) -> None:
    s = state.session
    sent = body.model_fields_set
    inputs_before = [getattr(s, name) for name in STATS_INPUTS]
    for name in ("agent", "model", "encoding", "mode"):
        if name in sent:
            setattr(s, name, getattr(body, name) or "")
            state.fields.add(name)
    if "context_window" in sent:
        s.context_window = body.context_window
        state.fields.add("context_window")
    if "budget" in sent:
        # As sent (contract: the session's fields as sent), no default filled in.
        s.budget = body.budget.model_dump(exclude_unset=True) if body.budget else None
        state.fields.add("budget")
    if "pinned" in sent:
        s.pinned = body.pinned or []
        state.fields.add("pinned")
    if "metadata" in sent:
        s.metadata = body.metadata or {}
        state.fields.add("metadata")
        _note_task(state, said=s.metadata.get("task"))
    if not s.declared:
        s.declared = True
        s.started_at = e.timestamp
        state.fields |= {"declared", "started_at"}
    if [getattr(s, name) for name in STATS_INPUTS] != inputs_before:
        state.stats_inputs_changed = True
    _note_event(state, e)


def _derive_or_refuse(
    state: _SessionState, e: _Event, body: StepBody, store: _Store
) -> _StepRow | EventResult:
    body_hash = e.body_hash[:KEY_BYTES]
    existing = state.step_hashes.get(body.index)
    if existing is not None:
        if existing == body_hash:
            return EventResult(e.head.id, 200, duplicate=True)
        return EventResult(
            e.head.id,
            409,
            f"body.index: step {body.index} of session {body.session_id!r} "
            "was already stored with different content",
        )
    if body.action is not None and body.actions is not None:
        return EventResult(
            e.head.id,
            400,
            "body.action: send one operation as action or a list as actions, not both",
        )
    walk = state.walk
    try:
        result = walk.derive(
            body.index,
            obs=body.obs.messages,
            base=body.obs.base,
            ops_raw=body.actions if body.actions is not None else body.action,
            ops_field="body.actions" if body.actions is not None else "body.action",
            after_raw=body.after.messages if body.after is not None else None,
        )
    except InputError as exc:
        return EventResult(e.head.id, exc.status, str(exc))
    store.hash_all(result.before)
    if not _same_objects(result.after, result.before):
        store.hash_all(result.after)
    for op in result.ops:
        if op.result is not None:
            store.hash(op.result)
    for fold in result.folds:
        store.hash_all(fold.originals)
    # Only a recording that changes what an id stands for needs writing.
    # Most of them are what their ids stood for already, the very objects: those are
    # passed over at C speed.
    hash_of = store.hash
    recorded = result.recorded
    others = map(operator.is_not, map(walk.latest.get, recorded), recorded.values())
    changed = {
        mid: m
        for mid, m in compress(recorded.items(), others)
        if (old := walk.latest.get(mid)) is None or hash_of(old) != hash_of(m)
    }
    walk.record(body.index, result)
    state.step_hashes[body.index] = body_hash
    obs_extra, span_ids = step_storage.span_ids_split(body.obs.model_extra or None)
    output = None if body.output is None else body.output.model_dump(exclude_unset=True)
    # The reply's texts go to the blob store as soon as they are sent: the context of
    # the next call, mostly in the same export, holds them too.
    split = step_storage.output_split(output)
    return _StepRow(
        session=state.session,
        body=body,
        timestamp=e.timestamp,
        result=result,
        body_hash=body_hash,
        obs_extra=obs_extra,
        recorded=changed,
        tools_hash=None if body.tools is None else store.tools_hash(body.tools),
        span_ids=span_ids,
        output=output if split is None else split[0],
        output_texts=None if split is None else [store.text_hash(t) for t in split[1]],
    )


def _write(
    project: Project,
    states: dict[str, _SessionState],
    store: _Store,
    rows: list[_StepRow],
    todo: list[_Event],
    results: list[EventResult | None],
    now: datetime,
) -> list[int]:
    # Stored events, and duplicates of a step index under a new event id, whose
    # retries must be recognised too.
    kept = [
        e
        for e in todo
        if (r := results[e.position]) is not None
        and (r.status == 201 or (r.duplicate and isinstance(e.body, StepBody)))
    ]
    with binary_cursor() as cursor:
        store.flush(cursor)
        _record_session_messages(cursor, states, store, rows)
        step_ids = _insert_steps(cursor, project, store, rows, now) if rows else []
        if kept:
            cursor.execute(
                "INSERT INTO cv_raw_event (project_id, event_key, type, body_hash, received_at) "
                "SELECT %s, k, t, h, %s FROM unnest(%b::uuid[], %b::text[], %b::bytea[]) "
                "AS x(k, t, h) ON CONFLICT (project_id, event_key) DO NOTHING",
                [
                    project.pk,
                    now,
                    [event_key(e.head.id) for e in kept],
                    [e.head.type for e in kept],
                    [e.event_hash for e in kept],
                ],
            )
    return step_ids


def _record_session_messages(
    cursor: Any,
    states: dict[str, _SessionState],
    store: _Store,
    rows: list[_StepRow],
) -> None:
    """Note each newly recorded message for its session; the highest seq is the latest.

    A context resent in full records its unchanged messages again: a row is written
    only for a message the session never recorded, or for one that becomes the
    latest of its id again (an id that went A, B, A), so resending, in any order,
    costs no rewrite.
    """
    # per session, per id: the messages recorded, in order, each once (its last time)
    order: dict[int, dict[str, dict[int, None]]] = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        recorded = order[row.session.pk]
        for message in row.recorded.values():
            pks = recorded[message.id]
            pk = store.pk_of_hash[store.hash_of[id(message)]]
            pks.pop(pk, None)
            pks[pk] = None
    if not any(order.values()):
        return
    # Both lists as arrays, not (session, id) pairs: the planner then walks the
    # session_latest index for them (pairs from unnest got a scan of the table).
    cursor.execute(
        "SELECT x.session_id, x.msg_id, x.message_id FROM cv_session_message x "
        "WHERE x.session_id = ANY(%b::bigint[]) AND x.msg_id = ANY(%b::text[]) ORDER BY x.seq",
        [sorted(order), sorted({mid for ids in order.values() for mid in ids})],
    )
    stored: set[tuple[int, int]] = set()
    latest: dict[tuple[int, str], int] = {}
    for sid, mid, pk in cursor.fetchall():
        if mid in order[sid]:
            stored.add((sid, pk))
            latest[(sid, mid)] = pk
    by_pk = {st.session.pk: st for st in states.values()}
    sess, msgs, ids, seqs = [], [], [], []
    for sid, recorded in order.items():
        session = by_pk[sid].session
        for mid, pks in recorded.items():
            new = [pk for pk in pks if (sid, pk) not in stored]
            final = next(reversed(pks))
            if not new and latest.get((sid, mid)) == final:
                continue
            for pk in pks:
                if pk == final or (sid, pk) not in stored:
                    session.record_seq += 1
                    sess.append(sid)
                    msgs.append(pk)
                    ids.append(mid)
                    seqs.append(session.record_seq)
            by_pk[sid].fields.add("record_seq")
    if not sess:
        return
    cursor.execute(
        "INSERT INTO cv_session_message (session_id, msg_id, message_id, seq) "
        "SELECT s, i, m, q FROM unnest(%b::bigint[], %b::bigint[], %b::text[], "
        "%b::bigint[]) AS x(s, m, i, q) ON CONFLICT (session_id, msg_id, message_id) "
        "DO UPDATE SET seq = EXCLUDED.seq",
        [sess, msgs, ids, seqs],
    )


class _ContextRefs:
    """The stored references of a batch's contexts (message pks, encoded), each made
    on the last context of its session where it extends that one.

    A step's before is mostly the after of the step before it with the reply and a
    tool result added, the same message objects (taken from the base a run named):
    checked at C speed, its references are that context's and those of what was
    added, so a session's steps cost what they add, not their context's length each.
    """

    def __init__(self, store: _Store) -> None:
        self._store = store
        # per session pk: the last context, its pks and their encoding
        self._last: dict[int, tuple[Sequence[CoreMessage], list[int], bytes]] = {}

    def of(self, session_pk: int, context: Sequence[CoreMessage]) -> tuple[list[int], bytes]:
        last = self._last.get(session_pk)
        if last is not None and last[0]:
            held, pks, data = last
            if _starts_with(context, held):
                if len(context) > len(held):
                    added = self._store.pks(context[len(held) :])
                    data += encode_refs(added, after=pks[-1])
                    pks = pks + added
                self._last[session_pk] = (context, pks, data)
                return pks, data
        pks = self._store.pks(context)
        data = encode_refs(pks)
        self._last[session_pk] = (context, pks, data)
        return pks, data

    def step(self, row: _StepRow) -> tuple[bytes, bytes | None]:
        """A step's before and after as stored references; an after that is the
        before (no operation changed it, the usual case) is None."""
        session = row.session.pk
        before, before_data = self.of(session, row.result.before)
        if _same_objects(row.result.after, row.result.before):
            return before_data, None
        after, after_data = self.of(session, row.result.after)
        return before_data, None if after == before else after_data


def _usage(usage: BaseModel | None) -> tuple[bytes | None, str | None]:
    """The call's usage as sent (the fields it set, and any others): packed, or else
    as JSON text, which PostgreSQL writes as jsonb would give it (``step_storage``)."""
    if usage is None:
        return None, None
    sent = usage.model_dump(exclude_unset=True)
    packed = step_storage.usage_packed(sent)
    return packed, None if packed is not None else json.dumps(sent)


def _output_blobs(store: _Store, row: _StepRow) -> bytes | None:
    if row.output_texts is None:
        return None
    return encode_refs(store.texts_pk[h] for h in row.output_texts)


def _same_objects(a: Sequence[CoreMessage], b: Sequence[CoreMessage]) -> bool:
    """Whether two contexts are the same message objects, compared at C speed: a
    step without operations has its before as its after."""
    return len(a) == len(b) and _starts_with(a, b)


def _starts_with(context: Sequence[CoreMessage], head: Sequence[CoreMessage]) -> bool:
    """Whether `context` starts with the very message objects of `head` (C speed)."""
    return context is head or (len(context) >= len(head) and all(map(operator.is_, context, head)))


def _insert_steps(
    cursor: Any, project: Project, store: _Store, rows: list[_StepRow], now: datetime
) -> list[int]:
    refs = _ContextRefs(store)
    contexts = [refs.step(r) for r in rows]
    usages = [_usage(r.body.usage) for r in rows]
    cursor.execute(
        "INSERT INTO cv_step (project_id, session_id, index, timestamp, received_at, mode, "
        "reason, reported_before, reported_after, obs_extra, outcome, before_refs, after_refs, "
        "after_given, after_mismatch, body_hash, model, tools_blob_id, output, "
        "usage, context_window, span_ids, output_blobs) "
        "SELECT %s, s, i, ts, %s, md, rs, rb, ra, oe::jsonb, oc::jsonb, br, ar, ag, am, bh, "
        "mo, tb, op::jsonb, coalesce(up, convert_to(us::jsonb::text, 'UTF8')), cw, si, ob "
        "FROM unnest(%b::bigint[], %b::int[], %b::timestamptz[], %b::text[], %b::text[], "
        "%b::bigint[], %b::bigint[], %b::text[], %b::text[], %b::bytea[], %b::bytea[], "
        "%b::bool[], %b::bool[], %b::bytea[], %b::text[], %b::bigint[], %b::text[], "
        "%b::bytea[], %b::text[], %b::int[], %b::bytea[], %b::bytea[]) AS x(s, i, ts, md, rs, "
        "rb, ra, oe, oc, br, ar, ag, am, bh, mo, tb, op, up, us, cw, si, ob) "
        "RETURNING id",
        [
            project.pk,
            now,
            [r.session.pk for r in rows],
            [r.body.index for r in rows],
            [r.timestamp for r in rows],
            [r.body.mode or "" for r in rows],
            [r.body.reason or "" for r in rows],
            [r.body.before_tokens for r in rows],
            [r.body.after_tokens for r in rows],
            [None if r.obs_extra is None else json.dumps(r.obs_extra) for r in rows],
            [None if r.body.outcome is None else json.dumps(r.body.outcome) for r in rows],
            [refs[0] for refs in contexts],
            [refs[1] for refs in contexts],
            [r.result.after_given for r in rows],
            [r.result.after_mismatch for r in rows],
            [r.body_hash for r in rows],
            [r.body.model or "" for r in rows],
            [None if r.tools_hash is None else store.tools_pk[r.tools_hash] for r in rows],
            [None if r.output is None else json.dumps(r.output) for r in rows],
            [packed for packed, _ in usages],
            [text for _, text in usages],
            [r.body.context_window for r in rows],
            [r.span_ids for r in rows],
            [_output_blobs(store, r) for r in rows],
        ],
    )
    # RETURNING of an INSERT ... SELECT comes back in the order rows were inserted.
    step_ids = [row[0] for row in cursor.fetchall()]
    _insert_ops_and_folds(cursor, project, store, rows, step_ids, now)
    for row in rows:
        s = row.session
        s.step_count += 1
        if row.body.mode:
            s.mode = row.body.mode
    return step_ids


def _insert_ops_and_folds(
    cursor: Any,
    project: Project,
    store: _Store,
    rows: list[_StepRow],
    step_ids: list[int],
    now: datetime,
) -> None:
    op_cols: dict[str, list[Any]] = defaultdict(list)
    fold_cols: dict[str, list[Any]] = defaultdict(list)
    reloads: list[tuple[int, str, int]] = []
    for row, step_id in zip(rows, step_ids, strict=True):
        for position, op in enumerate(row.result.ops):
            op_cols["step"].append(step_id)
            op_cols["position"].append(position)
            op_cols["op"].append(op.op)
            op_cols["form"].append(op.form)
            op_cols["targets"].append(json.dumps(list(op.targets)))
            op_cols["result"].append(
                None if op.result is None else store.pk_of_hash[store.hash_of[id(op.result)]]
            )
            op_cols["reason"].append(op.reason or "")
            op_cols["params"].append(json.dumps(op.params) if op.params else None)
        for fold in row.result.folds:
            for original in fold.originals:
                fold_cols["session"].append(row.session.pk)
                fold_cols["step"].append(step_id)
                fold_cols["op_position"].append(fold.op_index)
                fold_cols["op"].append(fold.op)
                fold_cols["result"].append(fold.result_id)
                fold_cols["original"].append(store.pk_of_hash[store.hash_of[id(original)]])
                fold_cols["key"].append(fold_key(row.session.pk, original.id))
        for msg_id in row.result.reloaded:
            reloads.append((row.session.pk, msg_id, row.body.index))
    if op_cols:
        cursor.execute(
            "INSERT INTO cv_operation (project_id, step_id, position, op, form, targets, "
            "result_id, reason, params, created_at) SELECT %s, s, p, o, f, t::jsonb, r, rs, "
            "pa::jsonb, %s FROM unnest(%b::bigint[], %b::int[], %b::text[], %b::text[], "
            "%b::text[], %b::bigint[], %b::text[], %b::text[]) AS x(s, p, o, f, t, r, rs, pa)",
            [
                project.pk,
                now,
                op_cols["step"],
                op_cols["position"],
                op_cols["op"],
                op_cols["form"],
                op_cols["targets"],
                op_cols["result"],
                op_cols["reason"],
                op_cols["params"],
            ],
        )
    if fold_cols:
        # One row per operation, its originals in the order they were in.
        cursor.execute(
            "INSERT INTO cv_fold (session_id, step_id, inferred, op_position, op, "
            "result_msg_id, originals, keys) SELECT s, st, false, p, min(o), min(r), "
            "array_agg(og ORDER BY n), array_agg(k ORDER BY n) FROM unnest(%b::bigint[], "
            "%b::bigint[], %b::int[], %b::text[], %b::text[], %b::bigint[], %b::int[]) "
            "WITH ORDINALITY AS x(s, st, p, o, r, og, k, n) GROUP BY s, st, p",
            [
                fold_cols["session"],
                fold_cols["step"],
                fold_cols["op_position"],
                fold_cols["op"],
                fold_cols["result"],
                fold_cols["original"],
                fold_cols["key"],
            ],
        )
    if reloads:
        _mark_reloaded(cursor, reloads)


def _mark_reloaded(cursor: Any, reloads: list[tuple[int, str, int]]) -> None:
    """Mark the archived originals that reloads (session pk, id, step index) brought
    back: each of that id folded at or before the reload and not reloaded yet, with
    the first such reload after it."""
    at: dict[tuple[int, str], list[int]] = defaultdict(list)
    for session_pk, msg_id, index in reloads:
        at[(session_pk, msg_id)].append(index)
    keys = [fold_key(s, i) for s, i in at]
    cursor.execute(
        "SELECT f.session_id, f.step_id, f.inferred, f.op_position, st.index, u.n, m.msg_id, "
        "f.reloaded_at, cardinality(f.originals) FROM cv_fold f "
        "JOIN cv_step st ON st.id = f.step_id "
        "CROSS JOIN LATERAL unnest(f.originals, f.keys) WITH ORDINALITY AS u(pk, k, n) "
        "JOIN cv_message m ON m.id = u.pk WHERE f.keys && %b::int[] AND u.k = ANY(%b::int[])",
        [keys, keys],
    )
    rows = cursor.fetchall()
    marked: dict[tuple[int, int, bool, int], list[int | None]] = {}
    for session_pk, step_pk, inferred, position, folded_at, n, msg_id, stored, size in rows:
        later = [i for i in at.get((session_pk, msg_id), ()) if i >= folded_at]
        op_key = (session_pk, step_pk, inferred, position)
        marks = marked.get(op_key) or list(stored or [None] * size)
        if later and marks[n - 1] is None:
            marks[n - 1] = min(later)
            marked[op_key] = marks
    if marked:
        cursor.executemany(
            "UPDATE cv_fold SET reloaded_at = %b::int[] WHERE session_id = %b AND step_id = %b "
            "AND inferred = %b AND op_position = %b",
            [(marks, *op_key) for op_key, marks in marked.items()],
        )


def _save_sessions(states: dict[str, _SessionState]) -> None:
    for state in states.values():
        if not state.touched and not state.fields:
            continue
        fields = set(state.fields)
        if state.touched:
            fields |= {"step_count", "mode", "stats_status"}
            state.session.stats_status = "pending"
        state.session.save(update_fields=sorted(fields))
