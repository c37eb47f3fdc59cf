"""A stored session replayed under another policy (``contextview.core.replay``).

The steps are read in chunks, in index order, so a session of any length
replays in bounded memory and its first steps can be sent before the last are
read. Tokens come from the stored counts (``cv_token_count``) and entities from
the stored index (``cv_blob_entities``), through the same functions the
statistics workers use, which count and store what no worker has yet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, fields
from itertools import tee
from typing import Any

import orjson
from django.db import connection

from contextview.core.model import Message
from contextview.core.parts import Reading
from contextview.core.replay import (
    Policy,
    RecordedStep,
    Replay,
    ReplayedStep,
    Totals,
    policy_from_json,
)
from contextview.core.stats import TextCache
from contextview.sessions.models import Session
from contextview.sessions.selectors import contexts_by_refs
from contextview.stats.models import ReplayTotals
from contextview.stats.services import (
    entities_for_blobs,
    session_encoding,
    token_counter,
    tokens_for_blobs,
)

CHUNK = 500

_STEPS_SQL = (
    "SELECT index, before_refs, coalesce(after_refs, before_refs) FROM cv_step "
    "WHERE session_id = %s AND index > %s ORDER BY index LIMIT %s"
)


class _ChunkTokens:
    """Tokens of the messages of the chunk being read: the core asks for a message's
    tokens in the step it arrives, which is in the chunk just read."""

    def __init__(self) -> None:
        self.by_object: dict[int, int] = {}

    def __call__(self, m: Message) -> int:
        return self.by_object[id(m)]


def session_replay(*, session: Session, policy: Policy) -> tuple[Replay, Iterator[ReplayedStep]]:
    """A replay of `session` under `policy` and its steps; ``totals`` is whole after them."""
    (run,), steps = session_replays(session=session, policies=[policy])
    return run, (step for (step,) in steps)


def session_replays(
    *, session: Session, policies: Sequence[Policy]
) -> tuple[list[Replay], Iterator[tuple[ReplayedStep, ...]]]:
    """Replays of `session` under several policies at once, reading its steps once:
    each item holds one step under every policy, in the order of `policies`."""
    tokens = _ChunkTokens()
    cache = TextCache()
    count = token_counter(session_encoding(session).name).count
    pinned = tuple(session.pinned or ())
    runs = [Replay(p, tokens, count, cache, pinned) for p in policies]
    # Driven in step (zip), the copies of the recorded steps never run ahead.
    feeds = tee(_recorded(session, tokens, cache), len(runs))
    return runs, zip(*(run.steps(feed) for run, feed in zip(runs, feeds, strict=True)), strict=True)


# Moved on whenever what a replay sums changes: totals kept before are then not read.
REPLAY_VERSION = 1
_TOTALS_FIELDS = frozenset(f.name for f in fields(Totals))


def replay_totals(*, session: Session, policies: Sequence[Mapping[str, Any]]) -> list[Totals]:
    """The totals of `session` replayed under each of `policies` (JSON objects that
    ``policy_from_json`` reads): `sessions_replay_totals` of one session."""
    return sessions_replay_totals(sessions=[session], policies=policies)[session.pk]


def sessions_replay_totals(
    *, sessions: Sequence[Session], policies: Sequence[Mapping[str, Any]]
) -> dict[int, list[Totals]]:
    """By session pk, the totals of each of `sessions` replayed under each of
    `policies`, as kept for the session as it is now (``ReplayTotals``, all read at
    once); a session with any not kept is replayed under all of them (its steps read
    once), and what the replays summed is kept, in one write."""
    keys = [_policy_key(p) for p in policies]
    kept: dict[tuple[int, str], Any] = {}
    by_pk = {s.pk: s for s in sessions}
    rows = ReplayTotals.objects.filter(session_id__in=list(by_pk), policy__in=keys).values_list(
        "session_id", "policy", "step_count", "stats_epoch", "totals"
    )
    for pk, key, step_count, epoch, totals in rows:
        session = by_pk[pk]
        # Kept for the session as it is now: no step new or late, none computed again.
        if (step_count, epoch) == (session.step_count, session.stats_epoch):
            kept[pk, key] = totals
    found: dict[int, list[Totals]] = {}
    computed: list[ReplayTotals] = []
    parsed: list[Policy] | None = None
    for session in sessions:
        mine = [kept.get((session.pk, k)) for k in keys]
        if all(isinstance(t, dict) and t.keys() == _TOTALS_FIELDS for t in mine):
            found[session.pk] = [Totals(**t) for t in mine]
            continue
        if parsed is None:
            parsed = [policy_from_json(p) for p in policies]
        runs, steps = session_replays(session=session, policies=parsed)
        for _ in steps:
            pass
        found[session.pk] = [run.totals for run in runs]
        # As the session was read before the replay: a step stored meanwhile moves the
        # session on, and the next look replays it again.
        computed += [
            ReplayTotals(
                session=session,
                policy=key,
                step_count=session.step_count,
                stats_epoch=session.stats_epoch,
                totals=asdict(run.totals),
            )
            for key, run in zip(keys, runs, strict=True)
        ]
    if computed:
        ReplayTotals.objects.bulk_create(
            computed,
            update_conflicts=True,
            unique_fields=["session", "policy"],
            update_fields=["step_count", "stats_epoch", "totals"],
        )
    return found


def _policy_key(policy: Mapping[str, Any]) -> str:
    return f"{REPLAY_VERSION}:" + orjson.dumps(policy, option=orjson.OPT_SORT_KEYS).decode()


def _recorded(
    session: Session, tokens_of: _ChunkTokens, cache: TextCache
) -> Iterator[RecordedStep]:
    encoding = session_encoding(session).name
    last = -1
    while True:
        with connection.cursor() as cursor:
            cursor.execute(_STEPS_SQL, [session.pk, last, CHUNK])
            rows = cursor.fetchall()
        if not rows:
            return
        contexts = contexts_by_refs(bytes(r) for row in rows for r in (row[1], row[2]))
        stored = {id(s.message): s for context in contexts.values() for s in context}
        texts = {s.blob_pk: s.message.text for s in stored.values()}
        readings: dict[int, Reading | str] = {
            s.blob_pk: s.message.reading if type(s.message.content) is list else s.message.text
            for s in stored.values()
        }
        counts = tokens_for_blobs(blobs=readings, encoding=encoding)
        tokens = {key: counts[s.blob_pk] for key, s in stored.items()}
        for pk, (found, keys) in entities_for_blobs(blobs=texts).items():
            cache.prime(texts[pk], found, keys)
        tokens_of.by_object = tokens
        for index, before_refs, after_refs in rows:
            before = [s.message for s in contexts[bytes(before_refs)]]
            after = [s.message for s in contexts[bytes(after_refs)]]
            recorded = sum(tokens[id(m)] for m in after)
            yield RecordedStep(index=index, before=before, after=after, tokens=recorded)
        last = rows[-1][0]
        if len(rows) < CHUNK:
            return


def replay_json_chunks(*, session: Session, policy: Policy) -> Iterator[bytes]:
    """The contract's answer as JSON, a step at a time: totals come last."""
    run, steps = session_replay(session=session, policy=policy)
    yield b'{"policy":' + orjson.dumps(policy.as_dict()) + b',"steps":['
    separator = b""
    batch: list[bytes] = []
    for step in steps:
        batch.append(separator + orjson.dumps(step.as_dict()))
        separator = b","
        if len(batch) == 200:
            yield b"".join(batch)
            batch = []
    yield b"".join(batch) + b'],"totals":' + orjson.dumps(run.totals.as_dict()) + b"}"
