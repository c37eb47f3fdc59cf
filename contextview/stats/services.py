"""Statistics of stored steps and sessions, computed by the workers.

The core decides what the numbers are (``contextview.core.stats``); this module
loads a session's pending steps in index order, counts the tokens of contents no
worker has counted yet (once per distinct content and encoding, kept in
``cv_token_count``), and writes the results in bulk.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from django.db import connection, transaction

from contextview.core.entities import extract_entities
from contextview.core.model import Fold as CoreFold
from contextview.core.model import Message as CoreMessage
from contextview.core.model import Operation as CoreOperation
from contextview.core.stats import StepInput, TextCache, session_aggregates, step_stats
from contextview.core.tokens import EncodingChoice, TokenCounter, resolve_encoding
from contextview.db import binary_cursor
from contextview.sessions.models import Fold, Operation, Session, Step
from contextview.sessions.selectors import StoredMessage, messages_by_pk, step_contexts

# Namespace of the advisory locks that keep one worker per session.
_LOCK_NAMESPACE = 7301
CHUNK = 500


class SessionBusy(Exception):
    """Another worker is computing this session right now."""


@lru_cache(maxsize=8)
def _counter(encoding: str) -> TokenCounter:
    return TokenCounter(encoding)


def session_encoding(session: Session) -> EncodingChoice:
    return resolve_encoding(encoding=session.encoding or None, model=session.model or None)


def tokens_for_blobs(*, blobs: dict[int, str], encoding: str) -> dict[int, int]:
    """Tokens per blob pk: read the counted ones, count and store the rest."""
    if not blobs:
        return {}
    pks = sorted(blobs)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT blob_id, tokens FROM cv_token_count "
            "WHERE encoding = %s AND blob_id = ANY(%s::bigint[])",
            [encoding, pks],
        )
        known: dict[int, int] = dict(cursor.fetchall())
        missing = [pk for pk in pks if pk not in known]
        if missing:
            counts = _counter(encoding).count_many([blobs[pk] for pk in missing])
            cursor.execute(
                "INSERT INTO cv_token_count (blob_id, encoding, tokens) "
                "SELECT b, %s, t FROM unnest(%s::bigint[], %s::int[]) AS x(b, t) "
                "ON CONFLICT (blob_id, encoding) DO NOTHING",
                [encoding, missing, counts],
            )
            known.update(zip(missing, counts, strict=True))
    return known


def entities_for_blobs(*, blobs: dict[int, str]) -> dict[int, list[str]]:
    """Key entities per blob pk: read the extracted ones, extract and store the rest."""
    if not blobs:
        return {}
    pks = sorted(blobs)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT blob_id, entities FROM cv_blob_entities WHERE blob_id = ANY(%s::bigint[])",
            [pks],
        )
        known = {pk: json.loads(e) if isinstance(e, str) else e for pk, e in cursor.fetchall()}
        missing = [pk for pk in pks if pk not in known]
        if missing:
            found = [extract_entities(blobs[pk]) for pk in missing]
            cursor.execute(
                "INSERT INTO cv_blob_entities (blob_id, entities) "
                "SELECT b, e::jsonb FROM unnest(%s::bigint[], %s::text[]) AS x(b, e) "
                "ON CONFLICT (blob_id) DO NOTHING",
                [missing, [json.dumps(f) for f in found]],
            )
            known.update(zip(missing, found, strict=True))
    return known


def session_stats_compute(*, session_id: int) -> int:
    """Compute every pending step of a session, in index order; returns how many."""
    total = 0
    while True:
        done, more = _compute_chunk(session_id)
        total += done
        if not more:
            return total


@transaction.atomic
def _compute_chunk(session_id: int) -> tuple[int, bool]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", [_LOCK_NAMESPACE, session_id])
        if not cursor.fetchone()[0]:
            raise SessionBusy(f"session {session_id} is being computed by another worker")
    session = Session.objects.filter(pk=session_id).first()
    if session is None:
        return 0, False
    first = (
        Step.objects.filter(session=session, stats_status="pending")
        .order_by("index")
        .values_list("index", flat=True)
        .first()
    )
    if first is None:
        if session.stats_status != "ready":
            _aggregate(session)
        return 0, False
    # A late step changes what later steps' statistics say (reload regret, repeated
    # tool calls), so everything after the first pending step is computed again.
    steps = list(Step.objects.filter(session=session, index__gte=first).order_by("index")[:CHUNK])
    previous = Step.objects.filter(session=session, index__lt=first).order_by("-index").first()
    _compute_steps(session, steps, previous)
    more = Step.objects.filter(session=session, index__gt=steps[-1].index).exists()
    if not more:
        _aggregate(session)
    return len(steps), more


def _compute_steps(session: Session, steps: Sequence[Step], previous: Step | None) -> None:
    choice = session_encoding(session)
    contexts = step_contexts([*steps, *([previous] if previous else [])])
    step_pks = [s.pk for s in steps]

    op_rows = list(Operation.objects.filter(step_id__in=step_pks).order_by("step_id", "position"))
    folds_all = list(
        Fold.objects.filter(session=session)
        .values_list(
            "step__index",
            "step_id",
            "op_position",
            "op",
            "kind",
            "result_msg_id",
            "original_id",
            "original_msg_id",
        )
        .order_by("step__index", "op_position", "id")
    )
    in_chunk = set(step_pks)
    chunk_folds = [f for f in folds_all if f[1] in in_chunk]
    extra = messages_by_pk(
        [op.result_id for op in op_rows if op.result_id] + [f[6] for f in chunk_folds]
    )

    # Tokens of every content this chunk shows, keyed by the message object.
    distinct = {s.pk: s for b, a in contexts.values() for s in (*b, *a)}
    stored: list[StoredMessage] = [*distinct.values(), *extra.values()]
    blobs = {s.blob_pk: s.message.text for s in stored}
    counts = tokens_for_blobs(blobs=blobs, encoding=choice.name)
    tokens: dict[int, int] = {id(s.message): counts[s.blob_pk] for s in stored}

    def tokens_of(message: CoreMessage) -> int:
        return tokens[id(message)]

    ops_by_step: dict[int, list[CoreOperation]] = defaultdict(list)
    for op in op_rows:
        ops_by_step[op.step_id].append(
            CoreOperation(
                op=op.op,
                targets=tuple(op.targets),
                form=op.form,
                result=extra[op.result_id].message if op.result_id else None,
                reason=op.reason or None,
                params=op.params or {},
            )
        )
    grouped: dict[int, dict[tuple[int, str, str, str | None], list[CoreMessage]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for _, step_pk, position, op_name, kind, result_id, original_pk, _ in chunk_folds:
        grouped[step_pk][(position, op_name, kind, result_id)].append(extra[original_pk].message)

    first_index = steps[0].index
    folded_earlier = {f[7] for f in folds_all if f[0] < first_index}
    prev_ids = None
    prev_new_tool = None
    if previous is not None:
        prev_ids = {s.message.id for s in contexts[previous.pk][0]}
        prev_new_tool = (previous.stats or {}).get("new_tool")

    cache = TextCache()
    # Entities are only read from what operations took in: the folded originals.
    originals = {extra[f[6]].blob_pk: extra[f[6]].message.text for f in chunk_folds}
    for pk, found in entities_for_blobs(blobs=originals).items():
        cache.prime(originals[pk], found)
    results: list[str] = []
    for step in steps:
        before, after = contexts[step.pk]
        folds = [
            CoreFold(
                op_index=pos, op=op_name, kind=kind, result_id=result_id, originals=tuple(originals)
            )
            for (pos, op_name, kind, result_id), originals in grouped[step.pk].items()
        ]
        ops = ops_by_step[step.pk]
        stats = step_stats(
            StepInput(
                before=[s.message for s in before],
                after=[s.message for s in after],
                ops=ops,
                folds=folds,
                reloaded=[t for op in ops if op.op == "reload" for t in op.targets],
                folded_earlier=frozenset(folded_earlier),
                prev_new_tool=prev_new_tool,
                prev_ids=prev_ids,
                budget=session.budget,
                pinned=session.pinned or (),
                reported_before=step.reported_before,
                reported_after=step.reported_after,
                after_mismatch=step.after_mismatch,
                encoding=choice.name,
            ),
            tokens_of=tokens_of,
            cache=cache,
        )
        if choice.note:
            stats["encoding_note"] = choice.note
        results.append(json.dumps(stats))
        folded_earlier.update(m.id for f in folds for m in f.originals)
        prev_ids = {s.message.id for s in before}
        prev_new_tool = stats.get("new_tool")

    with binary_cursor() as cursor:
        cursor.execute(
            "UPDATE cv_step SET stats = x.s::jsonb, stats_status = 'ready' "
            "FROM unnest(%b::bigint[], %b::text[]) AS x(i, s) WHERE cv_step.id = x.i",
            [step_pks, results],
        )


def _aggregate(session: Session) -> None:
    rows = (
        Step.objects.filter(session=session).order_by("index").values_list("stats", "stats_status")
    )
    stats = [s for s, status in rows if status == "ready" and s is not None]
    aggregates: dict[str, Any] = session_aggregates(stats)
    choice = session_encoding(session)
    aggregates["encoding"] = choice.name
    if choice.note:
        aggregates["encoding_note"] = choice.note
    pending = any(status != "ready" for _, status in rows)
    Session.objects.filter(pk=session.pk).update(
        aggregates=aggregates, stats_status="pending" if pending else "ready"
    )


def stats_recompute(*, session_ids: Sequence[int]) -> int:
    """Mark sessions' steps pending again and compute them now (management command)."""
    Step.objects.filter(session_id__in=session_ids).update(stats_status="pending")
    Session.objects.filter(pk__in=session_ids).update(stats_status="pending")
    return sum(session_stats_compute(session_id=sid) for sid in session_ids)


def stats_mark_failed(*, session_id: int, error: str) -> None:
    """Give up on a session's pending steps, saying why; a recompute starts them again."""
    Step.objects.filter(session_id=session_id, stats_status="pending").update(
        stats_status="failed", stats={"error": error[:2000]}
    )
    Session.objects.filter(pk=session_id).update(stats_status="failed")
