"""The packed storage form of step statistics (``contextview.sessions.stats_storage``)."""

from __future__ import annotations

import hashlib
import json
import uuid
from importlib import import_module
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from django.db import connection
from hypothesis import given
from hypothesis import strategies as st

from contextview.core.entities import entity_key
from contextview.sessions import stats_storage
from contextview.sessions.models import Session, Step, StepStats, stats_read
from contextview.stats.services import session_stats_compute
from tests.api_client import Api, step

migration = import_module("contextview.sessions.migrations.0007_step_stats_packed")
positions = import_module("contextview.sessions.migrations.0013_step_stats_compact")


def _jsonb(value: Any) -> Any:
    """`value` as PostgreSQL's jsonb gives it back: object keys shortest first, then bytewise."""
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
        return {k: _jsonb(value[k]) for k in keys}
    if isinstance(value, list):
        return [_jsonb(v) for v in value]
    return value


def _stored(value: Any) -> Any:
    return _jsonb(orjson.loads(orjson.dumps(value)))


_floats = st.floats(-1e6, 1e6, allow_nan=False).map(lambda f: f + 0.0)  # jsonb has no -0.0
_ints = st.integers(-(2**40), 2**40)
_scalars = st.one_of(st.none(), st.booleans(), _ints, _floats, st.text(max_size=12))
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)


def _pair(values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    unequal = st.fixed_dictionaries({"before": values, "after": values})
    return st.one_of(unequal, values.map(lambda v: {"before": v, "after": v}))


_encodings = st.one_of(st.sampled_from(stats_storage.ENCODINGS), st.text(max_size=12))
_strings = st.lists(st.text(max_size=8), max_size=3)


@st.composite
def _op_stats(draw: st.DrawFn) -> dict[str, Any]:
    """Shaped like an operation's statistics, with the values varied."""
    tokens_in, tokens_out = draw(_ints), draw(st.one_of(_ints, st.just(7)))
    lost = draw(_strings)
    total = draw(st.one_of(st.just(len(lost)), _ints))
    ratio = tokens_out / tokens_in if tokens_in else None
    op: dict[str, Any] = {
        "op": draw(st.sampled_from(["summarize", "keep", "drop", "reload"])),
        "targets": draw(_strings),
        "result_id": draw(st.one_of(st.none(), st.text(max_size=6))),
        "tokens_in": tokens_in,
        "tokens_out": draw(st.sampled_from([tokens_in, tokens_out])),
        "ratio": draw(st.one_of(st.just(ratio), st.none(), _floats, _ints)),
        "entities": {
            "total": total,
            "kept": draw(st.one_of(st.just(total - len(lost)), _ints)),
            "lost": lost,
            "needed_later": draw(st.lists(_json, max_size=2)),
        },
    }
    op.update(draw(st.dictionaries(st.sampled_from(["inferred", "x", "q", "zz"]), _json)))
    return op


@st.composite
def _step_stats(draw: st.DrawFn) -> dict[str, Any]:
    """Shaped like the statistics the worker stores, with the values varied."""
    encoding = draw(_encodings)
    reward = draw(st.one_of(st.just(0.0), _floats))
    stats: dict[str, Any] = {
        "tokens": draw(_pair(_ints)),
        "partitions": draw(st.dictionaries(st.text(max_size=8), _pair(_ints), max_size=5)),
        "occupancy": draw(_pair(st.one_of(st.none(), _floats))),
        "reported_error": draw(_pair(st.one_of(st.none(), _floats, _ints))),
        "ops": draw(st.lists(st.one_of(_op_stats(), _json), max_size=3)),
        "flags": sorted(draw(_strings)),
        "reward": reward,
        "encoding": encoding,
        "missing_pinned": draw(_strings),
        "regretted_reloads": draw(_strings),
        "new_tool": draw(st.one_of(st.none(), st.text(max_size=8))),
        "new_call": draw(st.one_of(st.none(), st.text(max_size=8))),
        "reward_base": draw(st.one_of(st.just(reward), _floats)),
    }
    if draw(st.booleans()):
        note = draw(st.text(max_size=10))
        stats["encoding_note"] = draw(
            st.sampled_from([f"{note} is not available offline; counted with {encoding}", note])
        )
    for key in ("window", "unseen_tokens", "waste", "needs", "closed", "estimated"):
        if draw(st.booleans()):
            stats[key] = draw(_json)
    stats.update(draw(st.dictionaries(st.text(max_size=3), _json, max_size=2)))
    return stats


@given(st.one_of(_step_stats(), st.dictionaries(st.text(max_size=4), _json, max_size=5)))
def test_it_gives_back_exactly_the_statistics_it_packed(stats: dict[str, Any]) -> None:
    stored = _stored(stats_storage.pack(stats))
    # Equal values, keys in the order the unpacked form's jsonb had them.
    assert json.dumps(stats_storage.unpack(stored)) == json.dumps(_stored(stats))


def _typical() -> dict[str, Any]:
    """A step's statistics as the worker computes them (of an OTLP session)."""
    return {
        "ops": [],
        "flags": [],
        "waste": {"new": [["a9c37b06a4c32db2", "", 350, "171cb9f7a84c305e5436", 1]]},
        "reward": 0.0,
        "tokens": {"after": 12756, "before": 12756},
        "window": 128000,
        "encoding": "cl100k_base",
        "new_call": None,
        "new_tool": None,
        "occupancy": {"after": 0.01921875, "before": 0.01921875},
        "partitions": {
            "tool": {"after": 10842, "before": 10842},
            "memory": {"after": 1383, "before": 1383},
            "system": {"after": 375, "before": 375},
            "question": {"after": 156, "before": 156},
        },
        "reward_base": 0.0,
        "encoding_note": "o200k_base is not available offline; counted with cl100k_base",
        "unseen_tokens": -10296,
        "missing_pinned": [],
        "reported_error": {"after": None, "before": -0.8071495766698025},
        "regretted_reloads": [],
    }


@pytest.mark.django_db
def test_it_stores_a_typical_step_in_under_half_the_space() -> None:
    stats = _typical()
    packed = orjson.dumps(stats_storage.pack(stats)).decode()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_size(%s::jsonb), pg_column_size(%s::jsonb)",
            [orjson.dumps(stats).decode(), packed],
        )
        raw_size, packed_size = cursor.fetchone()
    assert packed_size < raw_size / 2


def _stats_row(step: Step) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT stats::text FROM cv_step_stats WHERE step_id = %s", [step.pk])
        (text,) = cursor.fetchone()
    return json.loads(text)


@pytest.fixture
def computed_step(api: Api) -> Step:
    log = {"id": "log", "role": "tool", "tool": "grep", "content": "504 from SO20260101007"}
    summary = {"id": "sum", "role": "assistant", "content": "the order timed out"}
    system = {"id": "sys", "role": "system", "content": "You read logs."}
    batch = [
        step("packed", 0, [system, log]),
        step("packed", 1, [{"id": "sys"}, {"id": "log"}],
             action={"action": "summarize", "target": "log", "result": summary}),
    ]  # fmt: skip
    assert api.ingest({"batch": batch}).status_code == 207
    session_stats_compute(session_id=Session.objects.get(external_id="packed").pk)
    return Step.objects.get(session__external_id="packed", index=1)


def test_it_reads_through_the_orm_what_was_computed(computed_step: Step) -> None:
    stored = _stats_row(computed_step)
    stats = Step.objects.with_stats().get(pk=computed_step.pk).stats
    assert "t" in stored and "tokens" not in stored
    assert json.dumps(stats) == json.dumps(_stored(stats_read(stored)))
    assert stats["tokens"]["after"] > 0 and stats["encoding"]


def test_it_converts_stored_rows_both_ways(computed_step: Step) -> None:
    stats = Step.objects.with_stats().get(pk=computed_step.pk).stats
    editor = SimpleNamespace(connection=connection)
    positions.lists_rows(None, editor)
    migration.unpack_rows(None, editor)
    assert json.dumps(_stats_row(computed_step)) == json.dumps(stats)
    migration.pack_rows(None, editor)
    packed = _stats_row(computed_step)
    assert "t" in packed
    migration.pack_rows(None, editor)  # a second time changes nothing
    assert _stats_row(computed_step) == packed
    positions.positions_rows(None, editor)
    assert json.dumps(Step.objects.with_stats().get(pk=computed_step.pk).stats) == json.dumps(stats)


def test_it_stores_what_sql_does_not_read_as_text_and_reads_it_back_in_jsonb_order() -> None:
    stats = _typical()
    stats["waste"] = {"new": [["ab12", "grep", 10, "t1", 1]], "gone": ["cd34"]}
    stats["needs"] = [{"text": "SO1", "lost_at": 3, "op": 0, "how": "asked"}]
    packed = stats_storage.pack(stats)
    assert set(packed) <= {"t", "flags", "u", "z"}
    assert json.dumps(stats_storage.unpack(_stored(packed))) == json.dumps(_stored(stats))


def test_it_stores_lost_entities_as_where_they_are_in_the_originals(computed_step: Step) -> None:
    stats = Step.objects.with_stats().get(pk=computed_step.pk).stats
    assert stats["ops"][0]["entities"]["lost"] == ["504", "SO20260101007"]
    row = _stats_row(computed_step)
    assert row.keys() == {"t", "flags", "z"}  # what SQL reads, then the rest as text
    stored = orjson.loads(row["z"])["ops"][0]["entities"]
    assert "lost" not in stored and len(stored["of"]) == 1 and "at" not in stored  # all of them

    editor = SimpleNamespace(connection=connection)
    positions.lists_rows(None, editor)
    assert _stats_row(computed_step)["ops"][0]["entities"]["lost"] == ["504", "SO20260101007"]
    assert json.dumps(Step.objects.with_stats().get(pk=computed_step.pk).stats) == json.dumps(stats)
    positions.positions_rows(None, editor)
    positions.positions_rows(None, editor)  # a second time changes nothing
    assert _stats_row(computed_step) == row
    assert json.dumps(Step.objects.with_stats().get(pk=computed_step.pk).stats) == json.dumps(stats)


@pytest.mark.parametrize(
    "lost",
    [
        ["a", "b", "c", "d"],
        ["d", "a", "b", "c"],
        ["c", "pinned text", "a"],
        ["b", "c"],
        ["a"],
        ["d", "c", "b", "a"],
        ["b", "d"],
        ["-", "a"],
    ],
)
def test_it_gives_back_the_lost_entities_in_their_order(lost: list[str]) -> None:
    pool = ["a", "b", "c", "a", "d"]
    op = {
        "op": "drop", "targets": ["m1", "m2"], "result_id": None, "tokens_in": 9,
        "tokens_out": 0, "ratio": None,
        "entities": stats_storage.OpEntities(
            {"kept": 0, "lost": lost, "total": len(lost), "needed_later": []},
            of=[7, 8], pool=pool,
        ),
    }  # fmt: skip
    packed = stats_storage._pack_op(op)
    assert packed is not None
    assert ("lost" in packed["entities"]) == (lost[0] == "-")  # a leading "-" stays a list
    back = stats_storage.unpack_entities(_stored(packed["entities"]))
    keys = [f"key of {entity}" for entity in pool]
    stats_storage.resolve(
        stats_storage.unresolved({"ops": [{"entities": back}]}),
        {7: pool[:3], 8: pool[3:]},
        {7: keys[:3], 8: keys[3:]},
    )
    assert back == {"kept": 0, "lost": lost, "total": len(lost), "needed_later": []}
    # With the keys stored with the originals' entities: each lost one's, from where it
    # is in them (the key of an entity written out with the list is worked out). A
    # list kept as it is has none to resolve.
    if lost[0] == "-":
        return
    assert back.lost_keys == [
        f"key of {entity}" if entity in pool else entity_key(entity) for entity in lost
    ]


def test_it_keeps_a_failed_steps_error_as_it_is(computed_step: Step) -> None:
    StepStats.objects.filter(step=computed_step).update(status="failed", stats={"error": "boom"})
    assert _stats_row(computed_step) == {"error": "boom"}
    assert Step.objects.with_stats().get(pk=computed_step.pk).stats == {"error": "boom"}


def _toast_bytes(table: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_total_relation_size(reltoastrelid) FROM pg_class WHERE relname = %s",
            [table],
        )
        (size,) = cursor.fetchone()
    return int(size)


def test_it_keeps_a_large_compactions_statistics_in_the_row(api: Api) -> None:
    # A summary of 90 messages: its statistics list their ids (36 characters each,
    # which do not compress), some 4 kB, more than PostgreSQL keeps in a row unless
    # the table says otherwise.
    ids = [str(uuid.UUID(bytes=hashlib.sha256(b"%d" % n).digest()[:16])) for n in range(90)]
    history = [{"id": i, "role": "user", "content": f"note {n}"} for n, i in enumerate(ids)]
    summary = {"id": "sum", "role": "assistant", "content": "ninety notes, all read"}
    batch = [
        step("inline", 0, history),
        step("inline", 1, [{"id": m["id"]} for m in history],
             action={"action": "summarize", "targets": [m["id"] for m in history],
                     "result": summary}),
    ]  # fmt: skip
    assert api.ingest({"batch": batch}).status_code == 207
    toast_before = _toast_bytes("cv_step_stats")
    session_stats_compute(session_id=Session.objects.get(external_id="inline").pk)
    compaction = Step.objects.with_stats().get(session__external_id="inline", index=1)
    assert len(compaction.stats["ops"][0]["targets"]) == 90
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_size(stats) FROM cv_step_stats WHERE step_id = %s", [compaction.pk]
        )
        (stored,) = cursor.fetchone()
    assert stored > 3000
    assert _toast_bytes("cv_step_stats") == toast_before


def test_it_keeps_a_sessions_sums_of_a_few_kilobytes_in_its_row(api: Api) -> None:
    # The sums list the session's unreferenced results, amnesia links and refetches
    # by message id: a few kB that do not compress to under 2 kB.
    batch = [step("sums", 0, [{"id": "sys", "role": "system", "content": "You debug."}])]
    assert api.ingest({"batch": batch}).status_code == 207
    ids = [str(uuid.UUID(bytes=hashlib.sha256(b"%d" % n).digest()[:16])) for n in range(80)]
    sums = {"unreferenced_results": [{"message_id": i, "tokens": 900} for i in ids]}
    toast_before = _toast_bytes("cv_session")
    Session.objects.filter(external_id="sums").update(aggregates=sums)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_size(aggregates) FROM cv_session WHERE external_id = 'sums'"
        )
        (stored,) = cursor.fetchone()
    assert stored > 2500
    assert _toast_bytes("cv_session") == toast_before
    assert Session.objects.get(external_id="sums").aggregates == sums
