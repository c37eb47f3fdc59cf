"""Statistics of stored steps and sessions, computed by the workers.

The core decides what the numbers are (``contextview.core.stats``); this module
loads a session's pending steps in index order, counts the tokens of contents no
worker has counted yet (once per distinct content and encoding, kept in
``cv_blob_info``, with their entities), and writes the results in bulk.
"""

from __future__ import annotations

import gc
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import orjson
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.db.models import F

from contextview.core.calls import is_tool_result, reply_said, said_text
from contextview.core.entities import entity_forms, extract_entities_keyed, forms_of_key
from contextview.core.infer import COMPACTED, Inferred
from contextview.core.lru import SizedLRU
from contextview.core.model import Fold as CoreFold
from contextview.core.model import Message as CoreMessage
from contextview.core.model import Operation as CoreOperation
from contextview.core.needs import LossTracker
from contextview.core.parts import Reading
from contextview.core.refs import OnBases, decode_many, held_ids
from contextview.core.session import SessionWalk, WalkedStep
from contextview.core.stats import ContextMeter, TextCache, folds_of_ops
from contextview.core.tokens import EncodingChoice, TokenCounter
from contextview.core.totals import SessionTotals
from contextview.db import binary_cursor, each_key_sql
from contextview.sessions import stats_storage, step_storage
from contextview.sessions.models import Session, Step, StepStats, fold_key
from contextview.sessions.selectors import (
    MESSAGE_COLUMNS,
    StoredMessage,
    json_value,
    message_from_row,
    messages_of_pks_sql,
    outputs_of,
)
from contextview.stats.blob_info import (
    entities_pack,
    entities_unpack,
    entity_keys_unpack,
    tokens_sql,
    tokens_write_sql,
)

# Namespace of the advisory locks that keep one worker per session.
_LOCK_NAMESPACE = 7301
# Steps read, computed and committed in one transaction: later chunks of a run have
# as many steps as took about STATS_CHUNK_MS before, within CHUNK_MIN and CHUNK. The
# first has nothing measured to go by: it takes the steps whose contexts hold about
# FIRST_CHUNK_REFS message references per second of STATS_CHUNK_MS (at most CHUNK),
# what a worker gets through in about that time when their contents are not counted
# yet (some 1,000 steps of 200-message contexts; counted, they take a quarter of it).
# Results are written WRITE_BATCH steps per statement.
FIRST_CHUNK_REFS = 400_000
CHUNK_MIN = 50
CHUNK = 2000
# A run keeps the statistics of at most this many steps for the session's sums (and
# its next run); past that, they are read back from the database.
CARRIED_STEPS = 10_000
WRITE_BATCH = 100


class SessionBusy(Exception):
    """Another worker is computing this session right now."""


@lru_cache(maxsize=8)
def token_counter(encoding: str) -> TokenCounter:
    return TokenCounter(encoding)


def session_encoding(session: Session) -> EncodingChoice:
    return session.encoding_choice()


# What this worker process read or worked out per stored content. Messages, token
# counts and entities never change once stored (content is addressed by its hash,
# ids are never reused), so the next chunk of a session reads only what is new.
# Keyed by a number made of the kind of value and the pk it is of (`_key`): a tuple key
# would be built and hashed at every look-up, and walked by the garbage collector.
_CACHE: SizedLRU[int, Any] = SizedLRU(settings.STATS_CACHE_MB << 20)
_KIND_BITS = 6
_KINDS: dict[str, int] = {}


def _kind(kind: str) -> int:
    code = _KINDS.get(kind)
    if code is None:
        if len(_KINDS) >= 1 << _KIND_BITS:
            raise RuntimeError(f"more than {1 << _KIND_BITS} kinds of cached values")
        code = _KINDS[kind] = len(_KINDS)
    return code


def _key(kind: str, n: int) -> int:
    """The cache key of the value of `kind` for pk `n`."""
    return (n << _KIND_BITS) | _kind(kind)


def caches_clear() -> None:
    """Forget what this process cached (as a new worker process would start)."""
    _CACHE.clear()
    entity_forms.cache_clear()
    forms_of_key.cache_clear()


def _cached(kind: str, keys: Iterable[int]) -> tuple[dict[int, Any], list[int]]:
    code = _kind(kind)
    found, missing = _CACHE.get_many([(key << _KIND_BITS) | code for key in keys])
    shift = _KIND_BITS
    return {key >> shift: value for key, value in found.items()}, [key >> shift for key in missing]


def messages_cached(pks: Iterable[int], *, encoding: str) -> dict[int, StoredMessage]:
    """Stored messages by pk, from this process's cache or the database.

    The token counts in `encoding` and the entities' keys (what `tokens_for_blobs`
    and `entity_keys_for_blobs` look for next) of the messages read come with them,
    in the same query, and wait in the cache, as do the entities, still packed.
    """
    found, missing = _cached("message", pks)
    if not missing:
        return found
    with binary_cursor() as cursor:
        cursor.execute(_messages_counted_sql(encoding), [sorted(missing)])
        rows = cursor.fetchall()
    tokens_kind = f"tokens:{encoding}"
    cached: list[tuple[int, Any, int]] = []
    for row in rows:
        pk, blob_pk, tokens, entities = row[0], row[1], row[-2], row[-1]
        stored = StoredMessage(pk=pk, blob_pk=blob_pk, message=message_from_row(row[2:-2]))
        found[pk] = stored
        cached.append((_key("message", pk), stored, 300 + len(stored.message.text)))
        if tokens is not None:
            cached.append((_key(tokens_kind, blob_pk), tokens, 100))
        if entities is not None:
            # Most are asked for their keys alone, all of them, right after this.
            keys = entity_keys_unpack(entities, stored.message.text)
            cached.append((_key("entity keys", blob_pk), keys, _keys_size(keys)))
            cached.append((_key("packed entities", blob_pk), entities, 100 + len(entities)))
    _CACHE.put_many(cached)
    return found


def _entities_size(keyed: tuple[list[str], list[str]]) -> int:
    """What a blob's entities and keys take in the cache, roughly."""
    return 200 + 150 * len(keyed[0])


def _keys_size(keys: list[str]) -> int:
    """What a blob's entity keys take in the cache, roughly."""
    return 100 + 80 * len(keys)


@lru_cache(maxsize=8)
def _messages_counted_sql(encoding: str) -> str:
    return messages_of_pks_sql(
        f"m.id, b.id, {MESSAGE_COLUMNS}, {tokens_sql(encoding)}, i.entities",
        "LEFT JOIN cv_blob_info i ON i.blob_id = b.id",
    )


def tokens_for_blobs(
    *, blobs: dict[int, Reading | str], encoding: str, entities: bool = True
) -> dict[int, int]:
    """Tokens per blob pk: read the counted ones, count and store the rest.

    A blob is given as its text, or as a `Reading` when it has parts counted by rule.
    The entities of a blob first seen are extracted with its tokens, and stored in
    the same row (unless `entities` is false: tool definitions have none to read).
    """
    if not blobs:
        return {}
    known, pks = _cached(f"tokens:{encoding}", blobs)
    if pks:
        known.update(_tokens_stored(blobs, sorted(pks), encoding, entities))
    return known


def _tokens_stored(
    blobs: dict[int, Reading | str], pks: list[int], encoding: str, entities: bool
) -> dict[int, int]:
    with binary_cursor() as cursor:
        cursor.execute(
            each_key_sql(
                "%b::bigint[]",
                f"SELECT i.blob_id, {tokens_sql(encoding)}, i.entities IS NOT NULL "
                "FROM cv_blob_info i WHERE i.blob_id = x.k",
            ),
            [pks],
        )
        rows = cursor.fetchall()
        known: dict[int, int] = {pk: tokens for pk, tokens, _ in rows if tokens is not None}
        extracted = {pk for pk, _, has in rows if has}
        missing = [pk for pk in pks if pk not in known]
        if missing:
            counts = token_counter(encoding).count_readings([blobs[pk] for pk in missing])
            packed: list[bytes | None] = []
            for pk in missing:
                if not entities or pk in extracted:
                    packed.append(None)
                    continue
                text = _text_of(blobs[pk])
                keyed = extract_entities_keyed(text)
                _CACHE.put(_key("entities", pk), keyed, _entities_size(keyed))
                packed.append(entities_pack(*keyed, text))
            _info_write(cursor, missing, packed, (encoding, counts))
            known.update(zip(missing, counts, strict=True))
    for pk, tokens in known.items():
        _CACHE.put(_key(f"tokens:{encoding}", pk), tokens, 100)
    return known


def _text_of(blob: Reading | str) -> str:
    return blob if type(blob) is str else blob.text


def _info_write(
    cursor: Any,
    pks: list[int],
    packed: Sequence[bytes | None],
    tokens: tuple[str, Sequence[int]] | None = None,
) -> None:
    """Store the packed entities (None: not extracted) of blobs and, when given,
    their tokens in an encoding: (encoding, counts). What a blob's row already
    holds is kept: another worker may have written it."""
    columns, values = "blob_id, entities", "x.b, x.e"
    assign = "entities = coalesce(cv_blob_info.entities, EXCLUDED.entities)"
    arrays = "unnest(%b::bigint[], %b::bytea[]) AS x(b, e)"
    params: list[Any] = [pks, list(packed)]
    if tokens is not None:
        column, value, kept = tokens_write_sql(tokens[0], "x.t")
        columns, values, assign = f"{columns}, {column}", f"{values}, {value}", f"{assign}, {kept}"
        arrays = "unnest(%b::bigint[], %b::bytea[], %b::int[]) AS x(b, e, t)"
        params.append(list(tokens[1]))
    cursor.execute(
        f"INSERT INTO cv_blob_info ({columns}) SELECT {values} FROM {arrays} "
        f"ON CONFLICT (blob_id) DO UPDATE SET {assign}",
        params,
    )


def entities_for_blobs(
    *, blobs: Mapping[int, str], pks: Iterable[int] | None = None
) -> dict[int, tuple[list[str], list[str]]]:
    """Key entities per blob pk (of `pks`, or of every blob in `blobs`, which gives
    their texts), with their keys (``entity_key``).

    Reads the extracted ones, extracts and stores the rest.
    """
    known, missing = _entities_in_cache(blobs, blobs if pks is None else pks)
    if missing:
        stored = _entities_stored(blobs, sorted(missing))
        for pk, keyed in stored.items():
            _CACHE.put(_key("entities", pk), keyed, _entities_size(keyed))
        known.update(stored)
    return known


def _entities_in_cache(
    blobs: Mapping[int, str], pks: Iterable[int]
) -> tuple[dict[int, tuple[list[str], list[str]]], list[int]]:
    """(the entities of `pks` this process's cache holds, unpacked or packed as
    `messages_cached` read them; the pks it holds neither of)."""
    known, missing = _cached("entities", pks)
    if missing:
        packed, missing = _cached("packed entities", missing)
        # Their keys were cut with the message (`messages_cached`): not cut again.
        cut, _ = _cached("entity keys", packed)
        for pk, data in packed.items():
            keyed = known[pk] = entities_unpack(data, blobs[pk], cut.get(pk))
            _CACHE.put(_key("entities", pk), keyed, _entities_size(keyed))
    return known, missing


def _entities_cached(pk: int, text: str) -> tuple[list[str], list[str]] | None:
    """`entities_for_blobs` of one blob whose text is `text`, from this process's
    cache alone; None when it holds them neither unpacked nor packed."""
    return _entities_in_cache({pk: text}, (pk,))[0].get(pk)


# The text the core reads of a content (``Message.text``) depends on the content
# alone: what a blob's text and parts give back (``message_from_row``).
_BLOB_TEXT_SQL = each_key_sql(
    "%b::bigint[]", "SELECT b.id, b.text, b.parts FROM cv_blob b WHERE b.id = x.k"
)


def entities_of_blobs(pks: Iterable[int]) -> dict[int, list[str]]:
    """The key entities of each blob pk (``extract_entities`` of its content), as the
    worker measured operations with them: what stored statistics' losses point into
    (``stats_storage.OpEntities``)."""
    return {pk: entities for pk, (entities, _) in keyed_entities_of_blobs(pks).items()}


def keyed_entities_of_blobs(pks: Iterable[int]) -> dict[int, tuple[list[str], list[str]]]:
    """`entities_of_blobs`, with their keys. Entities are stored as places in their
    text, so the texts of those not in the cache are read, in one query."""
    wanted = set(pks)
    _, uncached = _cached("entities", wanted)
    texts: dict[int, str] = {}
    if uncached:
        with binary_cursor() as cursor:
            cursor.execute(_BLOB_TEXT_SQL, [sorted(uncached)])
            for pk, text, parts in cursor.fetchall():
                row = (None, None, "", None, False, False, None, text, parts)
                texts[pk] = message_from_row(row).text
    return entities_for_blobs(blobs=texts, pks=wanted)


def entity_keys_for_blobs(*, blobs: dict[int, str]) -> dict[int, list[str]]:
    """The keys (``entity_key``) of each blob's key entities, without the entities:
    what waste tracking matches tool results by."""
    if not blobs:
        return {}
    known, pks = _cached("entity keys", blobs)
    if pks:
        for pk, (_, keys) in entities_for_blobs(blobs={pk: blobs[pk] for pk in pks}).items():
            known[pk] = keys
            _CACHE.put(_key("entity keys", pk), keys, _keys_size(keys))
    return known


def _entities_stored(
    blobs: dict[int, str], pks: list[int]
) -> dict[int, tuple[list[str], list[str]]]:
    with binary_cursor() as cursor:
        cursor.execute(
            each_key_sql(
                "%b::bigint[]",
                "SELECT i.blob_id, i.entities FROM cv_blob_info i "
                "WHERE i.blob_id = x.k AND i.entities IS NOT NULL",
            ),
            [pks],
        )
        known = {pk: entities_unpack(data, blobs[pk]) for pk, data in cursor.fetchall()}
        missing = [pk for pk in pks if pk not in known]
        if missing:
            found = [extract_entities_keyed(blobs[pk]) for pk in missing]
            packed = [
                entities_pack(*keyed, blobs[pk]) for pk, keyed in zip(missing, found, strict=True)
            ]
            _info_write(cursor, missing, packed)
            known.update(zip(missing, found, strict=True))
    return known


def session_stats_compute(*, session_id: int) -> int:
    """Compute every pending step of a session, in index order; returns how many.

    The run holds the session's lock throughout and commits chunk by chunk, each
    marking its steps ready: a worker killed mid-session loses only the chunk it
    was in, and the next run starts from the first step still pending.
    """
    with _session_lock(session_id), _cyclic_gc_paused():
        # What the run built is freed when _compute_chunks returns, before collection
        # resumes: the collection that follows walks what outlives the run (the
        # caches), not the run's statistics and trackers too (some 10 ms a session).
        return _compute_chunks(session_id)


@dataclass(slots=True)
class _Run:
    """What a statistics run carries from chunk to chunk: every step it stored, by
    index (the session's sums need not read them back), and what the session lost
    so far. When the run ends, this process keeps it for the session's next run (a
    live agent's next step): that run starts from it, and not from every earlier
    step's stored statistics, when no other run changed the session in between
    (``epoch``, the session's ``stats_epoch`` as this run's last chunk left it)."""

    computed: dict[int, dict[str, Any]] = field(default_factory=dict)
    tracker: LossTracker = field(default_factory=LossTracker)
    epoch: int | None = None
    # the session's totals over the steps before ``totals.next_index``, as they are
    # stored; None when they are to be summed from every step again
    totals: SessionTotals | None = None
    # the ids folded or dropped by the steps before ``tracker.next_index``
    folded: set[str] | None = None
    # whether the totals' needs are to be settled on every step: statistics read
    # back may hold needs that a recomputation took away
    resettle: bool = False


def _compute_chunks(session_id: int) -> int:
    total = 0
    run = _CACHE.pop(_key("run", session_id)) or _Run()
    carried = True  # whether the next run may start from this one
    size = CHUNK
    refs: int | None = FIRST_CHUNK_REFS * settings.STATS_CHUNK_MS // 1000
    while True:
        started = time.perf_counter()
        done, more = _compute_chunk(session_id, size, run, refs=refs)
        refs = None
        total += done
        if not more:
            if carried and run.epoch is not None:
                _CACHE.put(_key("run", session_id), run, _run_size(run))
            return total
        size = _chunk_size(done, time.perf_counter() - started)
        if len(run.computed) > CARRIED_STEPS:
            # A long session's sums read its stats back instead, and so does its next
            # run; the loss tracker goes on from chunk to chunk.
            run.computed.clear()
            run.totals = None
            carried = False


def _run_size(run: _Run) -> int:
    """What a run's statistics and losses take in the cache, roughly."""
    tracker = run.tracker
    return 2000 * len(run.computed) + 200 * (len(tracker.open) + len(tracker.linked))


def _steps_within(steps: Sequence[tuple[Any, ...]], refs: int) -> int:
    """How many of `steps` (rows of ``_STEPS_SQL``), from the first, hold about `refs`
    message references in their contexts (at least one step)."""
    held = 0
    for n, row in enumerate(steps):
        # Stored references take a byte each, but for a long jump between ids.
        held += len(row[2]) + len(row[3])
        if held > refs:
            return max(1, n)
    return len(steps)


def _chunk_size(done: int, seconds: float) -> int:
    """Steps for the next chunk, so that it takes about STATS_CHUNK_MS."""
    wanted = done * settings.STATS_CHUNK_MS / 1000 / max(seconds, 1e-3)
    return min(CHUNK, max(CHUNK_MIN, round(wanted)))


@contextmanager
def _session_lock(session_id: int) -> Iterator[None]:
    """One worker per session for a whole run; a killed worker's lock ends with its connection."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_LOCK_NAMESPACE, session_id])
        if not cursor.fetchone()[0]:
            raise SessionBusy(f"session {session_id} is being computed by another worker")
    try:
        yield
    finally:
        # A connection that broke took the lock with it.
        with suppress(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_NAMESPACE, session_id])


_STEPS_SQL = (
    "SELECT id, index, before_refs, coalesce(after_refs, before_refs), reported_before, "
    "reported_after, after_mismatch, "
    f"coalesce(obs_extra -> '{COMPACTED}' = 'true'::jsonb, false), "
    "tools_blob_id, usage, context_window, model, output, output_blobs "
    "FROM cv_step WHERE session_id = %s AND index >= %s ORDER BY index LIMIT %s"
)
_PREVIOUS_SQL = (
    "SELECT s.before_refs, (t.stats ->> 'z')::jsonb ->> 'new_tool', "
    "coalesce(s.after_refs, s.before_refs), s.index, (t.stats ->> 'z')::jsonb ->> 'new_call' "
    "FROM cv_step s LEFT JOIN cv_step_stats t ON t.step_id = s.id "
    "WHERE s.session_id = %s AND s.index < %s ORDER BY s.index DESC LIMIT 1"
)
_OPS_SQL = (
    each_key_sql(
        "%b::bigint[]",
        "SELECT step_id, op, targets, form, result_id, reason, params, position FROM cv_operation "
        "WHERE step_id = x.k",
    )
    + " ORDER BY r.step_id, r.position"
)
# Folds of the steps from a first index (0: every earlier one too) up to the chunk's
# end: later ones say nothing about it. One row per original, its message's id read
# with it.
_FOLDS_SQL = (
    "SELECT s.index, f.step_id, f.op_position, f.op, "
    "CASE WHEN f.result_msg_id IS NULL THEN 'drop' ELSE 'fold' END, f.result_msg_id, u.pk, "
    "m.msg_id, f.inferred FROM cv_fold f JOIN cv_step s ON s.id = f.step_id "
    "CROSS JOIN LATERAL unnest(f.originals) WITH ORDINALITY AS u(pk, n) "
    "JOIN cv_message m ON m.id = u.pk WHERE f.session_id = %s AND s.index >= %s "
    "AND s.index <= %s "
    "ORDER BY s.index, f.inferred, f.op_position, u.n"
)


_RESTATS_SQL = (
    "UPDATE cv_step_stats t SET stats = x.s::jsonb FROM unnest(%b::int[], %b::text[]) AS x(i, s) "
    "WHERE t.session_id = %b::bigint AND t.index = x.i AND t.stats IS DISTINCT FROM x.s::jsonb"
)
# A step computed again (a late step came before it) keeps its row when nothing in
# its statistics changed: no new row version, nothing for vacuum. A step that is gone
# gets none: a late span stores the steps after it again, under new ids, maybe while
# a worker computes the old ones.
_WRITE_SQL = (
    "INSERT INTO cv_step_stats (step_id, session_id, index, status, stats) "
    "SELECT x.i, %b::bigint, x.n, 'ready', x.s::jsonb "
    "FROM unnest(%b::bigint[], %b::int[], %b::text[]) AS x(i, n, s) "
    "WHERE EXISTS (SELECT 1 FROM cv_step st WHERE st.id = x.i) "
    "ON CONFLICT (step_id) DO UPDATE SET status = 'ready', stats = excluded.stats "
    "WHERE cv_step_stats.status <> 'ready' OR cv_step_stats.stats IS DISTINCT FROM excluded.stats"
)
# Before it, the rows at those indices of steps that are gone: a worker that wrote a
# moved step's statistics as the move committed left them there.
_GONE_SQL = (
    "DELETE FROM cv_step_stats t USING unnest(%b::bigint[], %b::int[]) AS x(i, n) "
    "WHERE t.session_id = %b::bigint AND t.index = x.n AND t.step_id <> x.i "
    "AND EXISTS (SELECT 1 FROM cv_step st WHERE st.id = x.i)"
)


# A step is pending while it has no statistics row (``StepStats``), for step `s`.
_PENDING = "NOT EXISTS (SELECT 1 FROM cv_step_stats t WHERE t.step_id = s.id)"
_FIRST_PENDING_SQL = f"SELECT min(s.index) FROM cv_step s WHERE s.session_id = %s AND {_PENDING}"
_STALE_SQL = "DELETE FROM cv_step_stats WHERE session_id = %s AND index > %s AND status = 'ready'"
_PROGRESS_SQL = (
    "UPDATE cv_session SET stats_epoch = stats_epoch + 1, stats_steps_done = (SELECT count(*) "
    "FROM cv_step_stats WHERE session_id = %s AND status = 'ready') WHERE id = %s"
)
_FAILED_SQL = (
    "INSERT INTO cv_step_stats (step_id, session_id, index, status, stats) "
    "SELECT s.id, s.session_id, s.index, 'failed', %s::jsonb FROM cv_step s "
    f"WHERE s.session_id = %s AND {_PENDING} ON CONFLICT DO NOTHING"
)


@transaction.atomic
def _compute_chunk(
    session_id: int,
    size: int,
    run: _Run,
    *,
    refs: int | None = None,
) -> tuple[int, bool]:
    """Compute and commit up to `size` steps from the first pending one; (how many, more?).

    With `refs`, fewer when their contexts hold more message references than that.
    Every chunk that stores statistics counts one more in the session's
    ``stats_epoch``, committed with them.
    """
    with connection.cursor() as cursor:
        # Statistics are derived: a commit lost to a crash leaves its steps pending,
        # to be computed again, so the chunk need not wait for its WAL to be flushed.
        cursor.execute("SET LOCAL synchronous_commit = off")
    session = Session.objects.filter(pk=session_id).first()
    if session is None:
        return 0, False
    if run.epoch != session.stats_epoch:
        # Another run changed the session's statistics since this one's were taken
        # (or there are none): what is stored says what the session lost.
        run.computed.clear()
        run.tracker.clear()
        run.totals = None
        run.folded = None
    computed = run.computed
    with connection.cursor() as cursor:
        cursor.execute(_FIRST_PENDING_SQL, [session_id])
        (first,) = cursor.fetchone()
    if first is None:
        if session.stats_status != "ready":
            _aggregate(session, run if computed else None)
            session.stats_epoch += 1
        run.epoch = session.stats_epoch
        return 0, False
    # A late step changes what later steps' statistics say (reload regret, repeated
    # tool calls), so everything after the first pending step is computed again.
    with binary_cursor() as cursor:
        cursor.execute(_STEPS_SQL, [session_id, first, size + 1])
        steps = cursor.fetchall()
        cursor.execute(_PREVIOUS_SQL, [session_id, first])
        previous = cursor.fetchone()
        if refs is not None:
            size = min(size, _steps_within(steps, refs))
        more = len(steps) > size
        del steps[size:]
        if more:
            # Steps after this chunk wait for a later one: pending, they are where
            # the next run starts if this one is killed.
            cursor.execute(_STALE_SQL, [session_id, steps[-1][1]])
    if run.totals is not None and first < run.totals.next_index:
        run.totals = None  # steps it summed are computed again
    if previous is not None and run.tracker.next_index != first:
        _stored_taken(run, session, first)
    computed.update(_compute_steps(session, steps, previous, run))
    if more:
        with connection.cursor() as cursor:
            cursor.execute(_PROGRESS_SQL, [session_id, session_id])
    else:
        _aggregate(session, run)
    run.epoch = session.stats_epoch + 1
    return len(steps), more


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a session is computed.

    A chunk builds some hundred thousand short-lived objects (rows, messages,
    stats) that hold no reference cycles, so reference counting frees them
    all; meanwhile each collection the allocations trigger would walk
    everything the worker holds, costing about a fifth of the computation.
    What outlives the run is frozen (`_survivors_frozen`) before collection
    resumes.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            _survivors_frozen()
            gc.enable()


# Objects frozen since the last full collection, at most, before the next one
# (`_survivors_frozen`): more than the caches of some sessions hold. And runs at most:
# a live agent's steps are a run each (a full collection every thousand of them
# costs each about a tenth of a millisecond).
FROZEN_GROWTH = 500_000
FULL_EVERY_RUNS = 1000
# Whether this process freezes what its runs leave (decided at its first run), and
# how many objects and runs its runs froze since the last full collection.
_freezing: bool | None = None
_frozen_since = 0
_runs_since = 0


def _survivors_frozen() -> None:
    """Freeze what a run leaves alive: the new entries of this process's caches.

    They hold no reference cycles (a full collection after a run finds no garbage)
    and are freed by reference counting when evicted. Left to the collector, the
    first collection after the run walked them all (10-20 ms a 1,000-step session,
    some 5% of a warm run), and the older generations again later. Frozen objects
    are never looked at for cycles, so should any form after all, a full
    collection runs once the runs froze FROZEN_GROWTH objects more than they freed
    since the last (the collector's own count of new objects, read at no cost;
    counting the frozen ones walks them all), and every FULL_EVERY_RUNS runs: what
    the process did between runs (its broker's client, a failed task's traceback)
    may have left garbage in cycles, which a freeze keeps too. Only in a process
    that froze what it started with (a worker process, ``contextview.celery``):
    elsewhere (a shell, the tests) the collector runs as usual.
    """
    global _freezing, _frozen_since, _runs_since
    if _freezing is None:
        _freezing = gc.get_freeze_count() > 0
    if not _freezing:
        return
    _frozen_since += gc.get_count()[0]
    _runs_since += 1
    if _frozen_since > FROZEN_GROWTH or _runs_since >= FULL_EVERY_RUNS:
        gc.unfreeze()
        gc.collect()
        _frozen_since = _runs_since = 0
    gc.freeze()


def _replies_said(steps: Sequence[tuple[Any, ...]]) -> dict[int, list[str]]:
    """What the reply of each of `steps` (rows of ``_STEPS_SQL``) says, by step pk,
    for those that kept one (``core.calls.reply_said``)."""
    kept = [(row[0], row[12], row[13]) for row in steps if row[12] is not None or row[13]]
    if not kept:
        return {}
    return {pk: reply_said(output) for pk, output in outputs_of(kept).items()}


@dataclass(slots=True)
class _Chunk:
    """What a chunk of steps is computed from, read in bulk."""

    # each distinct context (by its stored references), made when first asked for
    # and shared by its steps
    contexts: OnBases[CoreMessage]
    tokens_of: Callable[[CoreMessage], int]
    ops: dict[int, list[CoreOperation]]  # by step pk
    folds: dict[int, list[CoreFold]]  # by step pk
    # ids folded or dropped by steps before the chunk
    folded_before: set[str]
    # primed with the entities of every folded original
    texts: TextCache
    # the stored pk of each message object of the chunk, by id()
    pk_of: dict[int, int]
    # the pk of its content (blob), by id() of the message object
    blob_of: dict[int, int]
    # tokens of the tool definitions sent with the chunk's calls, by blob pk
    tools_tokens: dict[int, int]
    # tokens counted by rule (images, files) by id() of the message, where any
    estimated: dict[int, int]
    # the keys of what the chunk's messages say: all that a reference to a tool result
    # can name, and so all the waste tracker indexes results by (`WasteTracker.expect`)
    said_keys: set[str]


def _compute_steps(
    session: Session,
    steps: Sequence[tuple[Any, ...]],
    previous: tuple[Any, ...] | None,
    run: _Run,
) -> dict[int, dict[str, Any]]:
    """Compute and store the stats of `steps` (rows of ``_STEPS_SQL``); by step index."""
    choice = session_encoding(session)
    tracker = run.tracker
    # What earlier steps folded is read when the run does not know it already.
    folded = run.folded if tracker.next_index == steps[0][1] else None
    chunk = _chunk_read(session, steps, previous, choice.name, whole=folded is None)
    walk = SessionWalk(
        encoding=choice.name,
        encoding_note=choice.note,
        budget=session.budget,
        pinned=session.pinned or (),
        context_window=session.context_window,
        folded=chunk.folded_before if folded is None else folded,
        tracker=tracker,
    )
    if tracker.next_index != steps[0][1]:
        tracker.clear()  # a new run, or steps were computed again in between
    tracker.waste.expect(chunk.said_keys)
    if previous is not None:
        walk.resume(
            index=previous[3],
            before=chunk.contexts[bytes(previous[0])],
            after=chunk.contexts[bytes(previous[2])],
            new_tool=previous[1],
            new_call=previous[4],
        )
        if tracker.next_index != steps[0][1]:
            # From the statistics stored before the chunk, which the run just read,
            # their lost entities' keys as stored with them.
            earlier = [(i, run.computed[i]) for i in sorted(run.computed) if i < steps[0][1]]
            for _, stats in earlier:
                for op in stats.get("ops") or ():
                    entities = op["entities"]
                    if type(entities) is stats_storage.OpEntities and entities.lost_keys:
                        chunk.texts.prime_keys_of(entities["lost"], entities.lost_keys)
            walk.restore_losses(earlier, chunk.texts)
    unsaid: dict[int, Inferred] = {}  # inferred operations, by step pk
    # What each step's reply says, where the step kept its reply.
    replies = _replies_said(steps)

    meter = ContextMeter(chunk.tokens_of)
    estimates = chunk.estimated
    estimate_meter = ContextMeter(lambda m: estimates.get(id(m), 0)) if estimates else None
    no_ops: list[CoreOperation] = []
    no_folds: list[CoreFold] = []
    computed: dict[int, dict[str, Any]] = {}
    written: list[int] = []
    indexes: list[int] = []
    results: list[dict[str, Any]] = []
    losses: list[tuple[dict[str, Any], list[int], dict[int, str]]] = []
    # Pipelined: the database stores one batch of results while the next is computed.
    with binary_cursor() as cursor, cursor.connection.pipeline():
        for row in steps:
            pk, index, before_refs, after_refs, own_before, reported_after, mismatch = row[:7]
            compacted, tools_pk, usage, window, model = row[7:12]
            inferred, stats = walk.measure(
                WalkedStep(
                    index=index,
                    before=chunk.contexts[bytes(before_refs)],
                    after=chunk.contexts[bytes(after_refs)],
                    ops=chunk.ops.get(pk, no_ops),
                    folds=chunk.folds.get(pk, no_folds),
                    compacted=compacted,
                    before_tokens=own_before,
                    after_tokens=reported_after,
                    after_mismatch=mismatch,
                    usage=step_storage.usage_unpacked(usage),
                    context_window=window,
                    tools_tokens=chunk.tools_tokens.get(tools_pk, 0),
                    model=model or session.model,
                    said=replies.get(pk, ()),
                ),
                tokens_of=chunk.tokens_of,
                cache=chunk.texts,
                meter=meter,
                estimate_meter=estimate_meter,
            )
            if inferred.ops:
                unsaid[pk] = inferred
            computed[index] = stats
            written.append(pk)
            indexes.append(index)
            results.append(stats)
            _losses_found(losses, stats, chunk.folds.get(pk, no_folds), inferred, chunk.blob_of)
            if len(written) == WRITE_BATCH:
                _losses_pointed(losses)
                _stats_write(cursor, session.pk, written, indexes, results)
                written, indexes, results = [], [], []
        if written:
            _losses_pointed(losses)
            _stats_write(cursor, session.pk, written, indexes, results)
        _write_inferred_folds(cursor, session, steps, unsaid, chunk.pk_of)
    run.folded = walk.folded
    return computed


def _stats_write(
    cursor: Any,
    session_pk: int,
    steps: list[int],
    indexes: list[int],
    results: list[dict[str, Any]],
) -> None:
    """Store the statistics of steps (pks) at their indexes, packed."""
    cursor.execute(_GONE_SQL, [steps, indexes, session_pk])
    packed = list(map(stats_storage.packed_json, results))
    cursor.execute(_WRITE_SQL, [session_pk, steps, indexes, packed])


def _losses_found(
    losses: list[tuple[dict[str, Any], list[int], dict[int, str]]],
    stats: dict[str, Any],
    folds: Sequence[CoreFold],
    inferred: Inferred,
    blob_of: dict[int, int],
) -> None:
    """Note the operations of `stats` that lost entities of the originals they folded:
    (the operation's stats, the originals' blob pks, their texts by blob pk)."""
    ops = stats["ops"]
    if not any(op["entities"]["lost"] for op in ops):
        return
    for op, fold in zip(ops, folds_of_ops(ops, folds, inferred.folds), strict=True):
        if fold is None or not op["entities"]["lost"]:
            continue
        originals = [(blob_of.get(id(m)), m.text) for m in fold.originals]
        if all(pk is not None for pk, _ in originals):
            texts = {pk: text for pk, text in originals if pk is not None}
            losses.append((op, [pk for pk, _ in originals if pk is not None], texts))


def _losses_pointed(losses: list[tuple[dict[str, Any], list[int], dict[int, str]]]) -> None:
    """Let the operations noted by `_losses_found` be stored with their lost entities
    as positions in their originals' entities (``stats_storage.OpEntities``): a drop
    of ten tool results lost some 500 entities, 9 KB a step stored a second time."""
    if not losses:
        return
    texts: dict[int, str] = {}
    for _, _, found in losses:
        texts.update(found)
    # The originals' entities as stored (what a reader gets back), stored now if not.
    pools = entities_for_blobs(blobs=texts)
    for op, of, _ in losses:
        pool = [entity for pk in of for entity in pools[pk][0]]
        op["entities"] = stats_storage.OpEntities(op["entities"], of=of, pool=pool)
    losses.clear()


# The statistics of the steps before one, as the worker rebuilds a run from them.
_STORED_SQL = (
    "SELECT index, stats::text FROM cv_step_stats "
    "WHERE session_id = %s AND index < %s AND status = 'ready' ORDER BY index"
)


def _stored_taken(run: _Run, session: Session, first: int) -> None:
    """Start `run` from what is stored of the session's steps before `first`: their
    statistics (what the loss tracker is rebuilt from, and what the session's sums
    add up) and their totals, to be settled on every step."""
    with connection.cursor() as cursor:
        cursor.execute(_STORED_SQL, [session.pk, first])
        rows = cursor.fetchall()
    computed = run.computed
    computed.clear()
    todo: list[stats_storage.OpEntities] = []
    for index, text in rows:
        stats = stats_storage.unpack(orjson.loads(text), ordered=False)
        computed[index] = stats
        todo += stats_storage.unresolved(stats)
    if todo:
        keyed = keyed_entities_of_blobs(stats_storage.blobs_of(todo))
        stats_storage.resolve(
            todo,
            {pk: entities for pk, (entities, _) in keyed.items()},
            {pk: keys for pk, (_, keys) in keyed.items()},
        )
    totals = SessionTotals()
    for index, stats in computed.items():
        totals.add(index, stats)
    run.totals = totals
    run.resettle = True


def _write_inferred_folds(
    cursor: Any,
    session: Session,
    steps: Sequence[tuple[Any, ...]],
    unsaid: dict[int, Inferred],
    pk_of: dict[int, int],
) -> None:
    """Store the originals of the chunk's inferred operations, in place of earlier ones.

    They join the archive (opened, restored and reloaded like any other), so a
    step that arrives late, which changes what its successor's inference says,
    replaces them as the steps from it on are computed again.
    """
    cursor.execute(
        "DELETE FROM cv_fold WHERE session_id = %b AND step_id = ANY(%b) AND inferred",
        [session.pk, [row[0] for row in steps]],
    )
    index_of = {row[0]: row[1] for row in steps}
    cols: dict[str, list[Any]] = defaultdict(list)
    for step_pk, inferred in unsaid.items():
        for fold in inferred.folds:
            for original in fold.originals:
                cols["step"].append(step_pk)
                cols["index"].append(index_of[step_pk])
                cols["position"].append(fold.op_index)
                cols["op"].append(fold.op)
                cols["result"].append(fold.result_id)
                cols["original"].append(pk_of[id(original)])
                cols["key"].append(fold_key(session.pk, original.id))
                cols["id"].append(original.id)
    if not cols:
        return
    # One row per operation. What a later step reloaded was brought back from here
    # (as ingest marks its folds): the first reload of it at or after the fold,
    # written with the row (an UPDATE after would leave a dead copy of each).
    cursor.execute(
        "WITH reloads AS MATERIALIZED (SELECT s.index, o.targets FROM cv_step s "
        "JOIN cv_operation o ON o.step_id = s.id WHERE s.session_id = %b AND s.index >= %b "
        "AND o.op = 'reload') "
        "INSERT INTO cv_fold (session_id, step_id, inferred, op_position, op, result_msg_id, "
        "originals, keys, reloaded_at) SELECT %b, st, true, p, min(o), min(r), "
        "array_agg(og ORDER BY n), array_agg(k ORDER BY n), "
        "CASE WHEN count(at) > 0 THEN array_agg(at ORDER BY n) END FROM (SELECT x.*, "
        "(SELECT min(rl.index) FROM reloads rl WHERE rl.index >= x.idx AND rl.targets ? x.i) "
        "AS at FROM unnest(%b::bigint[], %b::int[], %b::int[], %b::text[], %b::text[], "
        "%b::bigint[], %b::int[], %b::text[]) WITH ORDINALITY "
        "AS x(st, idx, p, o, r, og, k, i, n)) x GROUP BY st, p",
        [
            session.pk,
            min(cols["index"]),
            session.pk,
            cols["step"],
            cols["index"],
            cols["position"],
            cols["op"],
            cols["result"],
            cols["original"],
            cols["key"],
            cols["id"],
        ],
    )


def _chunk_read(
    session: Session,
    steps: Sequence[tuple[Any, ...]],
    previous: tuple[Any, ...] | None,
    encoding: str,
    *,
    whole: bool = True,
) -> _Chunk:
    """Operations, folds, contexts, token counts and entities of a chunk of steps;
    the ids folded before it (``folded_before``) only with `whole`."""
    first_index = steps[0][1]
    with binary_cursor() as ops, binary_cursor() as folds, ops.connection.pipeline():
        ops.execute(_OPS_SQL, [[row[0] for row in steps]])
        folds.execute(_FOLDS_SQL, [session.pk, 0 if whole else first_index, steps[-1][1]])
        # Pipelined: the database reads operations and folds while this decodes.
        refs = [bytes(r) for row in steps for r in (row[2], row[3])]
        if previous is not None:
            refs += (bytes(previous[0]), bytes(previous[2]))
        decoded = decode_many(refs)
        op_rows = ops.fetchall()
        fold_rows = folds.fetchall()

    # The inferred folds of the chunk's steps are worked out again.
    chunk_folds = [f for f in fold_rows if f[0] >= first_index and not f[8]]
    wanted = {op[4] for op in op_rows if op[4]} | {f[6] for f in chunk_folds}
    wanted |= held_ids(decoded)
    stored = messages_cached(wanted, encoding=encoding)

    # Tokens of every content this chunk shows, keyed by the message object.
    estimated: dict[int, int] = {}
    blobs: dict[int, Reading | str] = {}
    for s in stored.values():
        m = s.message
        if type(m.content) is list:
            # Only parts can hold images and files.
            seen = blobs[s.blob_pk] = m.reading
            if seen.estimated_tokens:
                estimated[id(m)] = seen.estimated_tokens
        else:
            blobs[s.blob_pk] = m.text
    counts = tokens_for_blobs(blobs=blobs, encoding=encoding)
    tokens = {id(s.message): counts[s.blob_pk] for s in stored.values()}
    counter = token_counter(encoding)

    def tokens_of(message: CoreMessage) -> int:
        found = tokens.get(id(message))
        if found is None:
            # A message the core made from a stored one (an inferred operation's
            # result sent without a role takes its target's): counted as it reads.
            content = message.reading if type(message.content) is list else message.text
            return counter.count_readings([content])[0]
        return found

    message_of = {pk: s.message for pk, s in stored.items()}.__getitem__
    contexts = OnBases(decoded, lambda pks: list(map(message_of, pks)))

    ops_by_step: dict[int, list[CoreOperation]] = defaultdict(list)
    for step_pk, op_name, targets, form, result_id, reason, params, _ in op_rows:
        ops_by_step[step_pk].append(
            CoreOperation(
                op=op_name,
                targets=tuple(json_value(targets)),
                form=form,
                result=message_of(result_id) if result_id else None,
                reason=reason or None,
                params=json_value(params) or {},
            )
        )
    grouped: dict[int, dict[tuple[int, str, str, str | None], list[CoreMessage]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for _, step_pk, position, op_name, kind, result_id, original_pk, *_ in chunk_folds:
        grouped[step_pk][(position, op_name, kind, result_id)].append(message_of(original_pk))
    folds_by_step = {
        step_pk: [
            CoreFold(op_index=pos, op=op, kind=kind, result_id=result, originals=tuple(originals))
            for (pos, op, kind, result), originals in groups.items()
        ]
        for step_pk, groups in grouped.items()
    }

    # Entities are read from what operations took in: the folded originals; and,
    # for what inferred operations take in, from what the messages were read with.
    blob_by_text = {s.message.text: s.blob_pk for s in stored.values()}
    texts = TextCache(
        stored=lambda text: (
            None if (pk := blob_by_text.get(text)) is None else _entities_cached(pk, text)
        )
    )
    originals = {stored[f[6]].blob_pk: stored[f[6]].message.text for f in chunk_folds}
    for pk, (found, keys) in entities_for_blobs(blobs=originals).items():
        texts.prime(originals[pk], found, keys)
    # Waste tracking (``core.waste``) matches tool results by their entities' keys,
    # and looks up what the other messages say by theirs, as losses (``core.needs``)
    # do: read once per content, not extracted again by every new worker process.
    # (Tool calls' arguments are said too: such messages' keys are worked out.)
    said = {
        s.blob_pk: text
        for s in stored.values()
        if (text := s.message.text) and (is_tool_result(s.message) or said_text(s.message) == text)
    }
    for pk, keys in entity_keys_for_blobs(blobs=said).items():
        texts.prime_keys(said[pk], keys)
    said_keys: set[str] = set()
    for s in stored.values():
        if not is_tool_result(s.message):
            said_keys.update(texts.text_keys(said_text(s.message)))
    return _Chunk(
        contexts=contexts,
        tokens_of=tokens_of,
        ops=ops_by_step,
        folds=folds_by_step,
        folded_before={f[7] for f in fold_rows if f[0] < first_index},
        texts=texts,
        pk_of={id(s.message): pk for pk, s in stored.items()},
        blob_of={id(s.message): s.blob_pk for s in stored.values()},
        tools_tokens=_tools_tokens({row[8] for row in steps if row[8]}, encoding),
        estimated=estimated,
        said_keys=said_keys,
    )


def _tools_tokens(pks: set[int], encoding: str) -> dict[int, int]:
    """Tokens of tool-definition blobs; their text is read only when not yet counted."""
    if not pks:
        return {}
    known, missing = _cached(f"tokens:{encoding}", pks)
    if missing:
        with binary_cursor() as cursor:
            cursor.execute("SELECT id, text FROM cv_blob WHERE id = ANY(%b)", [sorted(missing)])
            texts: dict[int, Reading | str] = dict(cursor.fetchall())
        known.update(tokens_for_blobs(blobs=texts, encoding=encoding, entities=False))
    return known


def _aggregate(session: Session, run: _Run | None = None) -> None:
    """Sum the session's step stats; `run` holds those this run stored (and those of
    the runs of this process before it that it carries, with their totals)."""
    by_index: dict[int, dict[str, Any]] | None = None
    # A step without statistics keeps the session pending; one the worker gave up on
    # (``stats_mark_failed``) makes it failed, not pending for ever.
    pending = failed = False
    if run is not None:
        # Statuses alone are cheap to read: when the ready steps are exactly the
        # ones the run holds, their stats need not be read back and parsed.
        computed = run.computed
        with binary_cursor() as cursor:
            cursor.execute(
                "SELECT s.index, t.status = 'ready' FROM cv_step s "
                "LEFT JOIN cv_step_stats t ON t.step_id = s.id "
                "WHERE s.session_id = %s ORDER BY s.index",
                [session.pk],
            )
            rows = cursor.fetchall()
        ready = [index for index, is_ready in rows if is_ready]
        if len(ready) == len(computed) and all(index in computed for index in ready):
            by_index = {index: computed[index] for index in ready}
            pending = any(is_ready is None for _, is_ready in rows)
            failed = any(is_ready is False for _, is_ready in rows)
    totals = run.totals if run is not None and by_index is not None else None
    if by_index is None:
        rows = (
            Step.objects.filter(session=session)
            .with_stats()
            .order_by("index")
            .values_list("stats", "stats_status", "index")
        )
        by_index = {i: s for s, status, i in rows if status == "ready" and s is not None}
        pending = any(status == "pending" for _, status, _ in rows)
        failed = any(status == "failed" for _, status, _ in rows)
    if totals is not None:
        # Only the steps after those the totals hold: they were computed from them on.
        for index in sorted(i for i in by_index if i >= totals.next_index):
            totals.add(index, by_index[index])
        changed = totals.settle(by_index, every=run is not None and run.resettle)
    else:
        totals, changed = SessionTotals.of(by_index)
    if run is not None:
        run.resettle = False
    if run is not None:
        run.totals = totals if run.computed else None
    if changed:
        with binary_cursor() as cursor:
            cursor.execute(
                _RESTATS_SQL,
                [
                    changed,
                    [stats_storage.packed_json(by_index[i]) for i in changed],
                    session.pk,
                ],
            )
    aggregates = totals.aggregates()
    choice = session_encoding(session)
    aggregates["encoding"] = choice.name
    if choice.note:
        aggregates["encoding_note"] = choice.note
    Session.objects.filter(pk=session.pk).update(
        aggregates=aggregates,
        stats_status="pending" if pending else "failed" if failed else "ready",
        stats_steps_done=len(by_index),
        stats_epoch=F("stats_epoch") + 1,
    )


def stats_invalidate(*, session_ids: Sequence[int]) -> None:
    """Mark sessions' steps pending again, for their next run to compute them all.

    The epoch moves on, so a run this process kept (`_Run`) is not taken up again:
    what it summed was computed from what the sessions said before.
    """
    StepStats.objects.filter(session_id__in=session_ids).delete()
    Session.objects.filter(pk__in=session_ids).update(
        stats_status="pending", stats_steps_done=0, stats_epoch=F("stats_epoch") + 1
    )


def stats_recompute(*, session_ids: Sequence[int]) -> int:
    """Mark sessions' steps pending again and compute them now (management command)."""
    stats_invalidate(session_ids=session_ids)
    return sum(session_stats_compute(session_id=sid) for sid in session_ids)


def stats_mark_failed(*, session_id: int, error: str) -> None:
    """Give up on a session's pending steps, saying why; a recompute starts them again."""
    with connection.cursor() as cursor:
        cursor.execute(_FAILED_SQL, [orjson.dumps({"error": error[:2000]}).decode(), session_id])
    Session.objects.filter(pk=session_id).update(
        stats_status="failed", stats_epoch=F("stats_epoch") + 1
    )
