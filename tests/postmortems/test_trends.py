from __future__ import annotations

from datetime import UTC, datetime

import pytest

from contextview.postmortems.selectors import project_trends, sessions_compare
from contextview.sessions.models import Session
from contextview.stats.services import session_stats_compute
from tests.api_client import Api, step

LOG = "upstream inventory-svc timed out after 3 s, status 504 for order SO20260101007"


def _run(api: Api, sid: str, day: str, *, mode: str, lossy: bool) -> Session:
    summary = "inventory timed out" if lossy else "SO20260101007: 504 after 3 s"
    batch = [
        {
            "id": f"{sid}-s",
            "type": "session",
            "timestamp": f"2026-11-{day}T09:00:00Z",
            "body": {
                "session_id": sid,
                "mode": mode,
                "budget": {"max_tokens": 30, "reserved_tokens": 0},
            },
        },
        step(
            sid,
            0,
            [{"id": "log", "role": "tool", "content": LOG}],
            action={
                "action": "summarize",
                "target": "log",
                "result": {"id": "sum", "role": "tool", "content": summary},
            },
        ),
        step(sid, 1, [{"id": "sum"}, {"id": "more", "role": "tool", "content": LOG}]),
        {
            "id": f"{sid}-e",
            "type": "session_end",
            "body": {"session_id": sid, "status": "failed" if lossy else "succeeded"},
        },
    ]
    assert api.ingest({"batch": batch}).status_code == 207
    session = Session.objects.get(external_id=sid)
    session_stats_compute(session_id=session.pk)
    session.refresh_from_db()
    return session


@pytest.mark.django_db
def test_it_buckets_project_trends_by_day(api: Api) -> None:
    _run(api, "a", "20", mode="sliding", lossy=True)
    _run(api, "b", "20", mode="hybrid", lossy=False)
    _run(api, "c", "21", mode="hybrid", lossy=False)
    rows = project_trends(
        project=api.project,
        start=datetime(2026, 11, 19, tzinfo=UTC),
        end=datetime(2026, 11, 22, tzinfo=UTC),
    )
    assert [r["sessions"] for r in rows] == [2, 1]
    assert rows[0]["success_rate"] == 0.5 and rows[1]["success_rate"] == 1.0
    assert rows[0]["compressions"] == 2
    assert rows[0]["entity_retention"] < rows[1]["entity_retention"] == 1.0
    assert rows[0]["budget_violations"] >= 1


@pytest.mark.django_db
def test_it_puts_two_sessions_side_by_side(api: Api) -> None:
    a = _run(api, "a", "20", mode="sliding", lossy=True)
    b = _run(api, "b", "20", mode="hybrid", lossy=False)
    both = sessions_compare(first=a, second=b)["sessions"]
    assert [s["session"]["mode"] for s in both] == ["sliding", "hybrid"]
    assert [len(s["curve"]) for s in both] == [2, 2]
    assert both[0]["lost_entities"] and not both[1]["lost_entities"]
