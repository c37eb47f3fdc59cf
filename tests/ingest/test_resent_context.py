"""A context resent in full, in any order, is stored once: what a session has recorded
is written only when it changes."""

from __future__ import annotations

import random

from django.db import connection

from tests.api_client import Api, results, step


def _context(size: int) -> list[dict[str, str]]:
    return [
        {"id": f"m{i}", "role": "tool" if i % 2 else "user", "content": f"log line {i} " * 40}
        for i in range(size)
    ]


def _recorded(api: Api, session: str) -> dict[str, tuple[str, int]]:
    """Message id -> (row version, seq) of what the session has recorded."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sm.msg_id, sm.xmin::text, sm.seq FROM cv_session_message sm "
            "JOIN cv_session s ON s.id = sm.session_id "
            "WHERE s.project_id = %s AND s.external_id = %s",
            [api.project.pk, session],
        )
        return {mid: (xmin, seq) for mid, xmin, seq in cursor.fetchall()}


def test_a_context_resent_in_full_rewrites_nothing_already_recorded(api: Api) -> None:
    context = _context(30)
    first = [step("full", i, context[: 10 + i]) for i in range(5)]
    assert {r["status"] for r in results(api.ingest({"batch": first}))} == {201}
    before = _recorded(api, "full")
    assert len(before) == 14

    later = [step("full", i, context[: 10 + i]) for i in range(5, 15)]
    random.Random(3).shuffle(later)
    assert {r["status"] for r in results(api.ingest({"batch": later}))} == {201}
    after = _recorded(api, "full")
    assert len(after) == 24
    assert {mid: after[mid] for mid in before} == before


def test_an_id_that_changes_back_stands_for_its_latest_content(api: Api) -> None:
    def x(content: str) -> dict[str, str]:
        return {"id": "x", "role": "user", "content": content}

    by_id = {"id": "x"}
    for index, message in enumerate([x("A"), x("B"), x("A")]):
        assert results(api.ingest({"batch": [step("flip", index, [message])]}))[0]["status"] == 201
    # Within one batch too: B, then A again, then x by id alone.
    batch = [step("flip", 3, [x("B")]), step("flip", 4, [x("A")]), step("flip", 5, [by_id])]
    assert [r["status"] for r in results(api.ingest({"batch": batch}))] == [201, 201, 201]
    assert results(api.ingest({"batch": [step("flip", 6, [by_id])]}))[0]["status"] == 201

    for index in (5, 6):
        got = api.get(f"/sessions/flip/steps/{index}").json()
        assert [m["content"] for m in got["before"]] == ["A"]
