"""The archive of folded and dropped originals, stored one row per operation (cv_fold)."""

from __future__ import annotations

from importlib import import_module
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection

from contextview.sessions.models import Fold, Session
from contextview.stats.services import session_stats_compute
from contextview.web import selectors as web
from tests.api_client import Api, results, step

migration = import_module("contextview.sessions.migrations.0011_fold_per_operation")

SYSTEM = {"id": "sys", "role": "system", "content": "You read logs."}
NOTES = [
    {"id": f"n{k}", "role": "tool", "tool": "grep", "content": f"line {k}: 504 from SO2026{k}"}
    for k in range(5)
]
SUMMARY = {"id": "sum", "role": "assistant", "content": "three lines said the order timed out"}


def _archive(api: Api, session: str) -> list[tuple[Any, ...]]:
    return [
        (o["id"], o["kind"], o["step"], o["op_index"], o["op"], o["inferred"], o["result_id"],
         o["reloaded_at"], o["message"]["content"])
        for o in api.get(f"/sessions/{session}/archive").json()["originals"]
    ]  # fmt: skip


@pytest.fixture
def archived(api: Api) -> str:
    """A session whose step 0 summarizes three notes and drops a fourth; step 2
    reloads one summarized note, step 3 drops it again and step 4 reloads it again."""
    fold = {"action": "summarize", "targets": ["n0", "n1", "n2"], "result": SUMMARY}
    batch = [
        step("s", 0, [SYSTEM, *NOTES], actions=[fold, {"action": "drop", "target": "n4"}]),
        step("s", 1, [{"id": "sys"}, {"id": "sum"}, {"id": "n3"}]),
        step("s", 2, [{"id": "sys"}, {"id": "sum"}, {"id": "n3"}],
             action={"action": "reload", "target": "n1"}),
        step("s", 3, [{"id": "sys"}, {"id": "sum"}, {"id": "n3"}, {"id": "n1"}],
             action={"action": "drop", "target": "n1"}),
    ]  # fmt: skip
    assert [r["status"] for r in results(api.ingest({"batch": batch}))] == [201] * 4
    last = step("s", 4, [{"id": "sys"}, {"id": "sum"}, {"id": "n3"}],
                action={"action": "reload", "target": "n1"})  # fmt: skip
    assert results(api.ingest({"batch": [last]}))[0]["status"] == 201
    return "s"


def test_it_lists_each_original_in_the_order_it_left_with_its_reload(
    api: Api, archived: str
) -> None:
    assert [row[:8] for row in _archive(api, archived)] == [
        ("n0", "fold", 0, 0, "summarize", False, "sum", None),
        ("n1", "fold", 0, 0, "summarize", False, "sum", 2),
        ("n2", "fold", 0, 0, "summarize", False, "sum", None),
        ("n4", "drop", 0, 1, "drop", False, None, None),
        ("n1", "drop", 3, 0, "drop", False, None, 4),
    ]
    assert _archive(api, archived)[1][8] == NOTES[1]["content"]
    step0 = api.get(f"/sessions/{archived}/steps/0").json()
    assert step0["folds"] == [
        {"op_index": 0, "result_id": "sum", "originals": ["n0", "n1", "n2"]},
        {"op_index": 1, "result_id": None, "originals": ["n4"]},
    ]


def test_it_stores_one_row_per_operation(archived: str) -> None:
    rows = Fold.objects.filter(session__external_id=archived).order_by("step__index")
    assert [(f.op, len(f.originals), len(f.keys), f.reloaded_at) for f in rows] == [
        ("summarize", 3, 3, [None, 2, None]),
        ("drop", 1, 1, None),
        ("drop", 1, 1, [4]),
    ]


def test_it_finds_an_original_by_id_only_in_its_own_session(api: Api, archived: str) -> None:
    # Another session with the same ids, none of them archived.
    assert results(api.ingest({"batch": [step("other", 0, [SYSTEM, *NOTES])]}))[0]["status"] == 201
    restore = {"type": "restore", "targets": ["n4"]}
    assert api.post(f"/sessions/{archived}/directives", restore).status_code == 201
    refused = api.post("/sessions/other/directives", restore)
    assert refused.status_code == 422
    assert "not folded or dropped in this session: n4" in refused.text


def test_it_writes_the_originals_the_worker_inferred(api: Api) -> None:
    # The agent's context lost n0 and n1 between the calls without saying so.
    batch = [step("quiet", 0, [SYSTEM, *NOTES]), step("quiet", 1, [SYSTEM, *NOTES[2:]])]
    assert [r["status"] for r in results(api.ingest({"batch": batch}))] == [201, 201]
    session_stats_compute(session_id=Session.objects.get(external_id="quiet").pk)
    inferred = [row for row in _archive(api, "quiet") if row[5]]
    assert [(row[0], row[2], row[1]) for row in inferred] == [("n0", 1, "drop"), ("n1", 1, "drop")]


def test_it_converts_stored_rows_both_ways(api: Api, archived: str) -> None:
    before = _archive(api, archived)
    editor = SimpleNamespace(connection=connection)
    with connection.cursor() as cursor:
        cursor.execute(migration._OLD_TABLE)
        migration.one_row_per_original(None, editor)
        cursor.execute("SELECT original_msg_id, kind, reloaded_at FROM cv_fold_rows ORDER BY id")
        assert cursor.fetchall() == [
            ("n0", "fold", None), ("n1", "fold", 2), ("n2", "fold", None),
            ("n4", "drop", None), ("n1", "drop", 4),
        ]  # fmt: skip
        cursor.execute("DELETE FROM cv_fold")
        migration.group_per_operation(None, editor)
        cursor.execute("DROP TABLE cv_fold_rows")
    assert _archive(api, archived) == before


def test_the_archive_pages_go_on_where_the_last_one_stopped(archived: str) -> None:
    session = Session.objects.get(external_id=archived)
    first, after = web.archive_page(session=session, limit=3)
    assert [(o.message.id, o.step_index) for o in first] == [("n0", 0), ("n1", 0), ("n2", 0)]
    rest, last = web.archive_page(session=session, after=after, limit=3)
    assert [(o.message.id, o.step_index, o.fold.kind) for o in rest] == [
        ("n4", 0, "drop"),
        ("n1", 3, "drop"),
    ]
    assert last is None
    one, _ = web.archive_page(session=session, original="n1", step=3)
    assert [(o.step_index, o.fold.reloaded_at) for o in one] == [(3, 4)]
