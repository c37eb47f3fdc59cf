"""Reads for sessions, steps, diffs and archives, shared by the API and the pages."""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any, TypeVar

from django.conf import settings
from django.db import connection
from django.db.models import Q, QuerySet

from contextview.core.blobs import pack, unpack
from contextview.core.cost import Total, summed_cost, total_cost
from contextview.core.diff import diff_contexts
from contextview.core.infer import COMPACTED, Inferred
from contextview.core.layout import message_label
from contextview.core.messages import message_payload
from contextview.core.model import REWRITING_OPS
from contextview.core.model import Message as CoreMessage
from contextview.core.model import Operation as CoreOperation
from contextview.core.parts import READ_FIELDS, split_payload
from contextview.core.refs import OnBases, decode_many, decode_refs, held_ids
from contextview.core.session import SessionWalk
from contextview.core.stats import budget_of, reported_before
from contextview.core.textsafe import restore, restore_json
from contextview.db import binary_cursor, each_key_sql
from contextview.projects.models import Project
from contextview.sessions import step_storage
from contextview.sessions.models import (
    AFTER_REFS,
    Blob,
    Message,
    Operation,
    Session,
    SessionMessage,
    Step,
    fold_key,
)
from contextview.stats.blob_info import tokens_sql

# The columns a core message is made from (cv_message m joined with cv_blob b),
# in the order message_from_row reads them.
MESSAGE_COLUMNS = (
    "m.msg_id, m.role, m.partition, m.tool, m.pinned, m.expirable, m.extra, b.text, b.parts"
)

Made = TypeVar("Made")
Key = TypeVar("Key")


def messages_of_pks_sql(columns: str, joins: str = "") -> str:
    """A query for `columns` of stored messages (m) and their blobs (b), `joins` added,
    for a list of distinct message pks: the first parameter (%b, a bigint[]), each
    looked up by its key (``each_key_sql``)."""
    return each_key_sql(
        "%b::bigint[]",
        f"SELECT {columns} FROM cv_message m JOIN cv_blob b ON b.id = m.blob_id {joins} "
        "WHERE m.id = x.k",
    )


_MESSAGE_SQL = messages_of_pks_sql(f"m.id, b.id, {MESSAGE_COLUMNS}")


@dataclass(frozen=True)
class StoredMessage:
    pk: int
    blob_pk: int
    message: CoreMessage


def json_value(value: Any) -> Any:
    """A JSON column's value: decoded when the driver returns it as text."""
    return json.loads(value) if isinstance(value, str) else value


def message_from_row(row: Sequence[Any]) -> CoreMessage:
    """A core message from the values of ``MESSAGE_COLUMNS``."""
    msg_id, role, partition, tool, pinned, expirable, extra, text, parts = row
    parts = json_value(parts)
    if parts is not None:
        parts = unpack(parts, text)
    extra = json_value(extra)
    content: Any = text
    if parts is not None:
        content, carried = split_payload(parts)
        if carried:
            extra = {**(extra or {}), **carried}
    return CoreMessage(
        id=msg_id,
        role=role,
        content=content,
        partition=partition,
        tool=tool,
        pinned=pinned,
        expirable=expirable,
        extra=extra,
    )


# How ingest writes what message_from_row reads: a blob keeps the message's text
# and, unless it is a plain string, what the model reads of it as JSON (content
# and tool calls, without the text a second time: `core.blobs`); the message row
# keeps its other fields.


def blob_parts(m: CoreMessage) -> str | None:
    value = message_payload(m)
    return None if isinstance(value, str) else json.dumps(pack(value, m.text))


def stored_extra(m: CoreMessage) -> str | None:
    if m.extra is None:
        return None
    rest = {k: v for k, v in m.extra.items() if k not in READ_FIELDS}
    return json.dumps(rest) if rest else None


def messages_by_pk(pks: Iterable[int]) -> dict[int, StoredMessage]:
    wanted = sorted(set(pks))
    if not wanted:
        return {}
    with binary_cursor() as cursor:
        cursor.execute(_MESSAGE_SQL, [wanted])
        rows = cursor.fetchall()
    return {
        row[0]: StoredMessage(pk=row[0], blob_pk=row[1], message=message_from_row(row[2:]))
        for row in rows
    }


def step_contexts(steps: Sequence[Step]) -> StepContexts:
    """Before and after contexts of several steps, loaded with one query for all messages."""
    return StepContexts(steps)


def contexts_by_refs(refs: Iterable[bytes]) -> dict[bytes, list[StoredMessage]]:
    """Contexts by their stored references (see ``Contexts``)."""
    contexts = Contexts(refs)
    return {data: contexts[data] for data in contexts.decoded}


class Contexts:
    """Contexts by their stored references, with one query for all their messages.

    Each distinct reference list is decoded and resolved once, and only past the
    head it shares with the list before it (``core.refs.OnBases``): consecutive
    steps mostly share one (a step's after is the next one's before), and the next
    one's holds all of it. The lists are shared by every step that has those
    references; callers only read them.
    """

    def __init__(self, refs: Iterable[bytes]) -> None:
        self.decoded = decode_many(refs)
        # every message the contexts hold, by pk
        self.stored = messages_by_pk(held_ids(self.decoded))
        self._lists = OnBases(self.decoded, lambda ids: list(map(self.stored.__getitem__, ids)))

    def __getitem__(self, refs: bytes) -> list[StoredMessage]:
        return self._lists[refs]

    def made(self, make: Callable[[StoredMessage], Made]) -> OnBases[Made]:
        """Each context as `make` of each of its messages, made for the messages past
        the head it shares with its base only (a stream that numbers them as it
        meets them asks for the contexts in its order)."""
        stored = self.stored
        return OnBases(self.decoded, lambda ids: [make(stored[pk]) for pk in ids])


class StepContexts:
    """The before and after contexts of steps, by step pk (``Contexts``)."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.refs = {s.pk: (bytes(s.before_refs), s.after_context_refs()) for s in steps}
        self.read = Contexts(r for pair in self.refs.values() for r in pair)
        self._messages = self.made(attrgetter("message"))

    def __getitem__(self, step_pk: int) -> tuple[list[StoredMessage], list[StoredMessage]]:
        before, after = self.refs[step_pk]
        return self.read[before], self.read[after]

    def values(self) -> Iterator[tuple[list[StoredMessage], list[StoredMessage]]]:
        return (self[pk] for pk in self.refs)

    def messages(self, step_pk: int) -> tuple[list[CoreMessage], list[CoreMessage]]:
        """A step's before and after as the core's messages."""
        return self._messages(step_pk)

    def made(
        self, make: Callable[[StoredMessage], Made]
    ) -> Callable[[int], tuple[list[Made], list[Made]]]:
        """Each step's before and after as `make` of each message (``Contexts.made``)."""
        lists = self.read.made(make)

        def of(step_pk: int) -> tuple[list[Made], list[Made]]:
            before, after = self.refs[step_pk]
            return lists[before], lists[after]

        return of


@dataclass(frozen=True, slots=True)
class Archived:
    """An original that an operation took out of a session's context."""

    step_id: int
    step_index: int
    op_position: int
    op: str
    inferred: bool
    result_msg_id: str | None  # what replaced it; none when it was dropped
    original_id: int  # its stored message
    original_msg_id: str
    reloaded_at: int | None  # the step index of the reload that brought it back

    @property
    def kind(self) -> str:
        return "drop" if self.result_msg_id is None else "fold"


def archived_originals(
    *,
    session_id: int,
    steps: Sequence[int] | None = None,
    step_index: int | None = None,
    up_to: int | None = None,
    after: int | None = None,
    ids: Iterable[str] | None = None,
    result_id: str | None = None,
    explicit: bool = False,
    inferred: bool = False,
    ops: Sequence[str] | None = None,
    newest_first: bool = False,
    offset: int = 0,
    limit: int | None = None,
) -> list[Archived]:
    """The originals a session's operations took out, in the order they left (by
    step, the step's own operations before those inferred, in operation order);
    of the steps with pks `steps`, of step `step_index`, of the steps up to
    `up_to` and after `after`, those with message ids `ids` (found through the
    keys' index), those `result_id` replaced, of the steps' own operations only
    (`explicit`) or of inferred ones only (`inferred`), of the operations `ops`."""
    where = ["f.session_id = %s"]
    params: list[Any] = [session_id]
    if steps is not None:
        where.append("f.step_id = ANY(%s)")
        params.append(list(steps))
    if step_index is not None:
        where.append("st.index = %s")
        params.append(step_index)
    if up_to is not None:
        where.append("st.index <= %s")
        params.append(up_to)
    if after is not None:
        where.append("st.index > %s")
        params.append(after)
    if ids is not None:
        wanted = sorted(set(ids))
        keys = [fold_key(session_id, i) for i in wanted]
        # The index finds the operations; the keys and ids pick their originals.
        where.append("f.keys && %s::int[] AND u.k = ANY(%s::int[]) AND m.msg_id = ANY(%s)")
        params += [keys, keys, wanted]
    if result_id is not None:
        where.append("f.result_msg_id = %s")
        params.append(result_id)
    if explicit:
        where.append("NOT f.inferred")
    if inferred:
        where.append("f.inferred")
    if ops is not None:
        where.append("f.op = ANY(%s)")
        params.append(list(ops))
    order = " DESC" if newest_first else ""
    page = ""
    if limit is not None:
        page = " LIMIT %s OFFSET %s"
        params += [limit, offset]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT f.step_id, st.index, f.op_position, f.op, f.inferred, f.result_msg_id, "
            "u.pk, m.msg_id, f.reloaded_at[u.n] FROM cv_fold f "
            "JOIN cv_step st ON st.id = f.step_id "
            "CROSS JOIN LATERAL unnest(f.originals, f.keys) WITH ORDINALITY AS u(pk, k, n) "
            f"JOIN cv_message m ON m.id = u.pk WHERE {' AND '.join(where)} "
            f"ORDER BY st.index{order}, f.inferred{order}, f.op_position{order}, u.n{order}" + page,
            params,
        )
        return [Archived(*row) for row in cursor.fetchall()]


@dataclass(frozen=True)
class StepChange:
    """What changed between the previous step's after and a step's before, unsaid."""

    # the previous step's after; None when that step is missing (no inference then)
    previous: list[StoredMessage] | None
    inferred: Inferred


def left_the_context(*, session: Session, ids: Iterable[str]) -> set[str]:
    """Of `ids`, those the session recorded that its last step's after context does
    not hold: what left the context, whether or not an operation saying so is stored
    yet (the statistics worker writes the folds of inferred operations)."""
    wanted = sorted(set(ids))
    if not wanted:
        return set()
    recorded = set(
        SessionMessage.objects.filter(session_id=session.pk, msg_id__in=wanted)
        .values_list("msg_id", flat=True)
        .distinct()
    )
    last = Step.objects.filter(session=session).order_by("-index").first()
    if last is None or not recorded:
        return recorded
    # Which of them the after context holds, read from its references: no content.
    refs = last.after_context_refs()
    (pks, _, _) = decode_many([refs])[refs]
    held = Message.objects.filter(pk__in=set(pks), msg_id__in=recorded)
    return recorded - set(held.values_list("msg_id", flat=True))


def step_changes(
    *, session: Session, steps: Sequence[Step], contexts: StepContexts
) -> dict[int, StepChange]:
    """The inferred operations of each step (by pk), from its predecessor's stored after.

    `contexts` are the steps' own before and after (``step_contexts``). A predecessor
    among `steps` lends its after, so only the others are read; and a context resent
    whole then holds the very message objects of the after it extends, which the
    inference compares at C speed rather than field by field.

    The statistics worker infers the same from the same stored contexts
    (``contextview.core.session.SessionWalk``), so what a step shows and what its
    stats measure agree, whatever order the steps arrived in.
    """
    afters = {st.index: contexts[st.pk][1] for st in steps}
    said = {st.index: contexts.messages(st.pk)[1] for st in steps}
    missing = {st.index - 1 for st in steps if st.index > 0} - afters.keys()
    if missing:
        refs = {
            index: bytes(refs)
            for index, refs in Step.objects.filter(session=session, index__in=missing).values_list(
                "index", AFTER_REFS
            )
        }
        read = contexts_by_refs(refs.values())
        afters.update((index, read[r]) for index, r in refs.items())
        said.update((index, [s.message for s in read[r]]) for index, r in refs.items())
    previous = {st.index - 1: afters[st.index - 1] for st in steps if st.index - 1 in afters}
    walk = SessionWalk(afters={index: said[index] for index in previous})
    out: dict[int, StepChange] = {}
    for st in steps:
        inferred = walk.infer(
            st.index,
            contexts.messages(st.pk)[0],
            compacted=(st.obs_extra or {}).get(COMPACTED) is True,
        )
        out[st.pk] = StepChange(previous=previous.get(st.index - 1), inferred=inferred)
    return out


def op_as_dict(
    *,
    op: str,
    form: str,
    targets: Sequence[str],
    result_id: str | None,
    reason: str | None,
    params: dict[str, Any] | None,
    inferred: bool = False,
) -> dict[str, Any]:
    """An operation in the read API's normalized form."""
    out: dict[str, Any] = {
        "op": op,
        "form": form,
        "targets": list(targets),
        "result_id": result_id,
        "reason": reason or None,
        "params": params or {},
    }
    if inferred:
        out["inferred"] = True
    return out


def inferred_op_as_dict(op: CoreOperation) -> dict[str, Any]:
    return op_as_dict(
        op=op.op,
        form=op.form,
        targets=op.targets,
        result_id=op.result.id if op.result is not None else None,
        reason=op.reason,
        params=op.params,
        inferred=True,
    )


def session_get(*, project: Project, external_id: str) -> Session | None:
    return Session.objects.filter(project=project, external_id=external_id).first()


def step_get(*, session: Session, index: int) -> Step | None:
    return Step.objects.filter(session=session, index=index).with_stats().first()


# --- sessions list ---------------------------------------------------------------------


def encode_cursor(started_at: datetime, pk: int) -> str:
    raw = f"{started_at.isoformat()}|{pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int] | None:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        when, pk = raw.rsplit("|", 1)
        return datetime.fromisoformat(when), int(pk)
    except (ValueError, UnicodeDecodeError):
        return None


def sessions_filtered(
    *,
    project: Project,
    agent: str | None = None,
    mode: str | None = None,
    status: str | None = None,
) -> QuerySet[Session]:
    """A project's sessions with the filters of the read API (each optional)."""
    qs = Session.objects.filter(project=project)
    if agent:
        qs = qs.filter(agent=agent)
    if mode:
        qs = qs.filter(mode=mode)
    if status:
        qs = qs.filter(status=status)
    return qs


def session_list(
    *,
    project: Project,
    agent: str | None = None,
    mode: str | None = None,
    status: str | None = None,
    after: tuple[datetime, int] | None = None,
    limit: int = 50,
) -> tuple[list[Session], str | None]:
    """A page of sessions, newest first, and the cursor of the next page (None at the end)."""
    qs = sessions_filtered(project=project, agent=agent, mode=mode, status=status)
    return sessions_page(qs, after=after, limit=limit)


def sessions_page(
    qs: QuerySet[Session], *, after: tuple[datetime, int] | None, limit: int
) -> tuple[list[Session], str | None]:
    """Newest first, keyset-paginated on (started_at, id) along the ``session_recent``
    index, so a late page costs what the first does; and the next page's cursor."""
    if after is not None:
        started, pk = after
        qs = qs.filter(Q(started_at__lt=started) | Q(started_at=started, pk__lt=pk))
    page = list(qs.order_by("-started_at", "-pk")[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return page, (encode_cursor(page[-1].started_at, page[-1].pk) if more and page else None)


def session_budget(session: Session) -> tuple[int | None, int | None]:
    """The session's max_tokens and limit, by the rule the statistics use. Without a
    budget or a window of its own, the window that provider-counted occupancy was
    measured against (``aggregates.window``)."""
    aggregates = session.aggregates if isinstance(session.aggregates, dict) else {}
    window = session.context_window or aggregates.get("window")
    if not isinstance(window, int) or isinstance(window, bool):
        window = None
    budget = budget_of(session.budget if isinstance(session.budget, dict) else None, window)
    return budget.max_tokens, budget.limit


def limit_name(session: Session) -> str:
    """What a session's occupancy is a fraction of: its budget when it declares one
    (``max_tokens``), else the model's context window (``session_budget``)."""
    declared = budget_of(session.budget if isinstance(session.budget, dict) else None)
    return "budget" if declared.max_tokens is not None else "context window"


def message_labels(session: Session, ids: set[str]) -> dict[str, str]:
    """What a reader knows each of the session's messages `ids` by (``message_label``):
    its latest recording under that id."""
    latest = (
        SessionMessage.objects.filter(session=session, msg_id__in=ids)
        .order_by("msg_id", "-seq")
        .distinct("msg_id")
        .values_list("msg_id", "message_id")
    )
    pks = dict(latest)
    stored = messages_by_pk(pks.values())
    return {mid: message_label(stored[pk].message) for mid, pk in pks.items() if pk in stored}


def rebilled_results(session: Session) -> dict[str, Any]:
    """The tool results the session carried for nothing (``core.waste``): ``tokens``
    re-billed, ``duplicates`` and ``unreferenced`` as its aggregates list them, each
    with the name a reader knows its message by (``label``, "" if none): a
    transcript's ids are often uuids. The session page and the reports list these."""
    aggregates = session.aggregates if isinstance(session.aggregates, dict) else {}

    def listed(name: str) -> list[dict[str, Any]]:
        value = aggregates.get(name)
        return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []

    duplicates, unreferenced = listed("duplicate_results"), listed("unreferenced_results")
    labels = message_labels(session, {str(e.get("message")) for e in duplicates + unreferenced})
    return {
        "tokens": aggregates.get("rebilled_tokens") or 0,
        "duplicates": [{**e, "label": labels.get(str(e.get("message")), "")}
                       for e in duplicates],
        "unreferenced": [{**e, "label": labels.get(str(e.get("message")), "")}
                         for e in unreferenced],
    }  # fmt: skip


def session_as_dict(session: Session) -> dict[str, Any]:
    return {
        "session_id": session.external_id,
        "agent": session.agent or None,
        "model": session.model or None,
        "encoding": session.encoding or None,
        "mode": session.mode or None,
        "budget": session.budget,
        "context_window": session.context_window,
        "pinned": restore_json(session.pinned),
        "metadata": restore_json(session.metadata),
        "task": session.task or None,
        "status": session.status,
        "score": session.score,
        "started_at": session.started_at.isoformat(),
        "ended_at": session.ended_at.isoformat() if session.ended_at else None,
        "last_event_at": session.last_event_at.isoformat(),
        "steps": session.step_count,
        "aggregates": session.aggregates,
        "stats_status": session.stats_status,
        "stats_steps_done": session.stats_steps_done,
    }


# --- one step --------------------------------------------------------------------------


def message_as_dict(stored: StoredMessage, tokens: dict[int, int] | None = None) -> dict[str, Any]:
    """A message as the read API gives it: free text as it was sent (core.textsafe)."""
    m = stored.message
    out: dict[str, Any] = {
        "id": m.id,
        "role": m.role,
        "partition": m.partition,
        "content": restore_json(m.content),
        "tokens": tokens.get(stored.blob_pk) if tokens is not None else None,
    }
    if m.tool:
        out["tool"] = m.tool
    if m.pinned:
        out["pinned"] = True
    if m.expirable:
        out["expirable"] = True
    if m.extra:
        out.update({k: v for k, v in restore_json(m.extra).items() if k not in out})
    return out


def token_counts(*, blob_pks: Iterable[int], encoding: str) -> dict[int, int]:
    """Measured tokens per blob in an encoding, for those the workers have counted."""
    wanted = sorted(set(blob_pks))
    if not wanted or not encoding:
        return {}
    tokens = tokens_sql(encoding)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT i.blob_id, {tokens} FROM cv_blob_info i "
            f"WHERE i.blob_id = ANY(%s::bigint[]) AND {tokens} IS NOT NULL",
            [wanted],
        )
        return dict(cursor.fetchall())


def step_as_dict(*, session: Session, step: Step) -> dict[str, Any]:
    return steps_as_dicts(session=session, steps=[step])[0]


def made_once(make: Callable[[Key], Made], key: Callable[[Key], Hashable]) -> Callable[[Key], Made]:
    """`make`, made once per distinct `key` (a stored message's pk, a tool list's blob)
    and given again after that.

    A context is resent at every step, so a stream of steps meets each message in the
    contexts of many of them (and each tool list in many calls): made at every one, a
    session's report or export cost its context's length times its steps, not its
    content. What is given again is the same value; callers only read it.
    """
    made: dict[Hashable, Made] = {}

    def once(value: Key) -> Made:
        k = key(value)
        if k not in made:
            made[k] = make(value)
        return made[k]

    return once


def steps_as_dicts(*, session: Session, steps: Sequence[Step]) -> list[dict[str, Any]]:
    """Steps as the read API gives them, with a fixed number of queries for any count."""
    return list(steps_shown(session=session, steps=steps))


def steps_shown(
    *,
    session: Session,
    steps: Sequence[Step],
    message: Callable[[StoredMessage, dict[int, int]], Any] = message_as_dict,
    tool_list: Callable[[Any], Any] = lambda tools: tools,
) -> Iterator[dict[str, Any]]:
    """``steps_as_dicts``, a step at a time, with `message` of each message of their
    contexts (given its token counts by blob) and `tool_list` of the tools their calls
    were sent with, each made once per distinct message or list, when the first step
    that holds it is made (a stream that numbers them names each new one in that step)."""
    contexts = StepContexts(steps)
    # Token counts exist per encoding; a session's steps are counted in one.
    encoding = session.encoding_choice().name
    tokens = token_counts(
        blob_pks=(s.blob_pk for s in contexts.read.stored.values()), encoding=encoding
    )
    shown = contexts.made(
        made_once(lambda stored: message(stored, tokens), key=lambda stored: stored.pk)
    )
    ops: dict[int, list[Operation]] = defaultdict(list)
    for op in (
        Operation.objects.filter(step__in=steps).select_related("result").order_by("position")
    ):
        ops[op.step_id].append(op)
    grouped: dict[int, dict[tuple[int, str | None], list[str]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for a in archived_originals(session_id=session.pk, steps=[s.pk for s in steps], explicit=True):
        grouped[a.step_id][(a.op_position, a.result_msg_id)].append(a.original_msg_id)
    changes = step_changes(session=session, steps=steps, contexts=contexts)
    tool_lists = step_tools(steps)
    tools: Callable[[int], Any] = made_once(
        lambda blob: tool_list(tool_lists[blob]), key=lambda blob: blob
    )
    outputs = step_outputs(steps)
    for step in steps:
        before, after = shown(step.pk)
        inferred = changes[step.pk].inferred
        obs_extra = restore_json(step.obs_fields())
        yield (
            {
                "session_id": session.external_id,
                "index": step.index,
                "timestamp": step.timestamp.isoformat(),
                "mode": step.mode or None,
                "reason": restore(step.reason) or None,
                "obs_extra": obs_extra,
                # contract v1.1: a step from an OTLP span carries its ids
                "trace_id": _text_field(obs_extra, step_storage.TRACE_ID),
                "span_id": _text_field(obs_extra, step_storage.SPAN_ID),
                "outcome": restore_json(step.outcome),
                "before": before,
                "after": after,
                "after_given": step.after_given,
                "ops": [
                    op_as_dict(
                        op=op.op,
                        form=op.form,
                        targets=op.targets,
                        result_id=op.result.msg_id if op.result else None,
                        reason=restore(op.reason),
                        params=restore_json(op.params),
                    )
                    for op in ops[step.pk]
                ],
                "inferred_ops": [inferred_op_as_dict(op) for op in inferred.ops],
                "folds": [
                    {"op_index": position, "result_id": result_id, "originals": originals}
                    for (position, result_id), originals in grouped[step.pk].items()
                ]
                + [
                    {
                        "op_index": fold.op_index,
                        "result_id": fold.result_id,
                        "originals": [m.id for m in fold.originals],
                        "inferred": True,
                    }
                    for fold in inferred.folds
                ],
                "reported": {
                    "before_tokens": reported_before(step.reported_before, step.usage),
                    "after_tokens": step.reported_after,
                },
                # contract v1.1: the call the context was sent with, as sent
                "model": restore(step.model or session.model) or None,
                "tools": tools(step.tools_blob_id)
                if tool_lists.get(step.tools_blob_id) is not None
                else None,
                "output": restore_json(outputs[step.pk]),
                "usage": restore_json(step.usage),
                "context_window": step.context_window or session.context_window,
                "stats": step.stats,
                "stats_status": step.stats_status,
            }
        )


def _text_field(fields: dict[str, Any] | None, name: str) -> str | None:
    value = (fields or {}).get(name)
    return value if isinstance(value, str) else None


def step_outputs(steps: Sequence[Step]) -> dict[int, dict[str, Any] | None]:
    """The model's reply of each step (by pk) as it was sent, with one query for the
    texts of all of them kept as blobs (``step_storage``)."""
    return outputs_of((s.pk, s.output, s.output_blobs) for s in steps)


def outputs_of(
    rows: Iterable[tuple[int, Any, bytes | memoryview | None]],
) -> dict[int, dict[str, Any] | None]:
    """`step_outputs` of rows (step pk, ``output``, ``output_blobs``) read already."""
    rows = list(rows)
    wanted = {pk: decode_refs(bytes(refs)) for pk, _, refs in rows if refs is not None}
    texts: dict[int, str] = {}
    if wanted:
        pks = {pk for pks in wanted.values() for pk in pks}
        texts = dict(Blob.objects.filter(pk__in=pks).values_list("pk", "text"))
    return {
        pk: json_value(output)
        if pk not in wanted
        else step_storage.output_joined(json_value(output), [texts[b] for b in wanted[pk]])
        for pk, output, _ in rows
    }


def step_tools(steps: Sequence[Step]) -> dict[int, Any]:
    """The tool definitions sent with steps' calls, as sent, by the pk of the blob that
    keeps them: a list is stored once however many calls were sent with it."""
    wanted = {s.tools_blob_id for s in steps if s.tools_blob_id is not None}
    if not wanted:
        return {}
    # A list of tools that is also a message's content is that message's blob.
    return {
        pk: restore_json(unpack(json_value(value), text))
        for pk, value, text in Blob.objects.filter(pk__in=wanted).values_list("pk", "parts", "text")
    }


# --- diff and archive ------------------------------------------------------------------


def steps_diff(*, session: Session, start: Step, end: Step) -> dict[str, Any]:
    contexts = step_contexts([start, end])
    before = [s.message for s in contexts[start.pk][0]]
    after = [s.message for s in contexts[end.pk][1]]
    out = diff_contexts(before, after, replaced=_rewritten_between(session, start, end)).as_dict()
    # Contents as they were sent (core.textsafe); ids are never escaped.
    for m in (*out["added"], *out["removed"]):
        m["content"] = restore_json(m["content"])
    for c in out["changed"]:
        c["before"]["content"] = restore_json(c["before"]["content"])
        c["after"]["content"] = restore_json(c["after"]["content"])
        c["words"] = [[tag, restore(text)] for tag, text in c["words"]]
    out.update({"session_id": session.external_id, "from": start.index, "to": end.index})
    return out


def _rewritten_between(session: Session, start: Step, end: Step) -> dict[str, str]:
    """Messages the statistics worker inferred were rewritten or truncated under a new
    id after step `start` and up to `end`: each such id by the id it replaced at
    `start` (a message rewritten twice in between, by the first). A session whose
    messages are addressed by content (OTLP, imports) changes a message's id with its
    content, and the diff shows it changed, as the inferred operation says, rather
    than removed and added."""
    replaced: dict[str, str] = {}
    for f in archived_originals(
        session_id=session.pk, after=start.index, up_to=end.index, inferred=True, ops=REWRITING_OPS
    ):
        if f.result_msg_id is not None and f.result_msg_id != f.original_msg_id:
            replaced[f.result_msg_id] = replaced.pop(f.original_msg_id, f.original_msg_id)
    return replaced


def session_archive(*, session: Session) -> list[dict[str, Any]]:
    folds = archived_originals(session_id=session.pk)
    stored = messages_by_pk(f.original_id for f in folds)
    tokens = token_counts(
        blob_pks=(s.blob_pk for s in stored.values()), encoding=session.encoding_choice().name
    )
    return [
        {
            "id": f.original_msg_id,
            "kind": f.kind,
            "step": f.step_index,
            "op_index": f.op_position,
            "op": f.op,
            "inferred": f.inferred,
            "result_id": f.result_msg_id,
            "reloaded": f.reloaded_at is not None,
            "reloaded_at": f.reloaded_at,
            "message": message_as_dict(stored[f.original_id], tokens),
        }
        for f in folds
    ]


def session_cost(*, session: Session) -> Total | None:
    """What the session's calls cost by the price table; None when none reported usage.

    From the usage the statistics worker summed by model (``usage_by_model`` of the
    aggregates), as of the steps computed so far; aggregates written before it summed
    them are read the long way, every call's usage."""
    by_model = (session.aggregates or {}).get("usage_by_model")
    if isinstance(by_model, dict):
        return summed_cost(by_model, settings.MODEL_PRICES)
    calls = Step.objects.filter(session=session, usage__isnull=False).values_list("model", "usage")
    return total_cost([(model or session.model, usage) for model, usage in calls],
                      settings.MODEL_PRICES)  # fmt: skip
