from __future__ import annotations

import pytest

from contextview.sessions.models import Session
from contextview.stats.selectors import agent_mode_table
from contextview.stats.services import session_stats_compute
from tests.api_client import Api, step

LOG = "upstream inventory-svc timed out after 3 s, status 504 for order SO20260101007"


def _session(api: Api, sid: str, *, agent: str, mode: str, status: str, lossy: bool) -> None:
    summary = "inventory-svc timed out" if lossy else "SO20260101007: 504 after 3 s"
    batch = [
        {
            "id": f"{sid}-s",
            "type": "session",
            "body": {
                "session_id": sid,
                "agent": agent,
                "mode": mode,
                "budget": {"max_tokens": 40, "reserved_tokens": 0},
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
        {"id": f"{sid}-e", "type": "session_end", "body": {"session_id": sid, "status": status}},
    ]
    assert api.ingest({"batch": batch}).status_code == 207
    session_stats_compute(session_id=Session.objects.get(external_id=sid).pk)


@pytest.mark.django_db
def test_it_compares_agents_and_modes_across_sessions(api: Api) -> None:
    _session(api, "a", agent="support", mode="sliding", status="failed", lossy=True)
    _session(api, "b", agent="support", mode="sliding", status="succeeded", lossy=False)
    _session(api, "c", agent="support", mode="hybrid", status="succeeded", lossy=False)
    rows = {(r["agent"], r["mode"]): r for r in api.get("/stats/agents").json()["rows"]}
    sliding = rows[("support", "sliding")]
    assert sliding["sessions"] == 2
    assert sliding["success_rate"] == 0.5
    assert 0 < sliding["entity_retention"] < 1
    assert rows[("support", "hybrid")]["entity_retention"] == 1.0
    assert rows[("support", "hybrid")]["success_rate"] == 1.0
    assert sliding["mean_tokens_per_step"] > 0


@pytest.mark.django_db
def test_it_limits_the_comparison_to_a_time_range(api: Api) -> None:
    from datetime import UTC, datetime

    _session(api, "a", agent="support", mode="sliding", status="failed", lossy=True)
    now = datetime.now(UTC)
    assert agent_mode_table(project_id=api.project.pk, end=datetime(2020, 1, 1, tzinfo=UTC)) == []
    rows = agent_mode_table(
        project_id=api.project.pk, start=datetime(2020, 1, 1, tzinfo=UTC), end=now
    )
    assert [r["sessions"] for r in rows] == [1]


@pytest.mark.django_db
def test_it_prices_each_agent_and_mode_from_the_usage_its_sessions_reported(api: Api) -> None:
    usage = {"input_tokens": 1000, "cache_read_tokens": 2000, "output_tokens": 500}
    hello = [{"id": "u1", "role": "user", "content": "Where is order SO20260101007?"}]
    for sid, model in (("p1", "gpt-4o"), ("p2", "gpt-4o"), ("p3", "house-llm-7b")):
        start = {"id": f"{sid}-s", "type": "session",
                 "body": {"session_id": sid, "agent": "support", "mode": "sliding"}}  # fmt: skip
        calls = [step(sid, n, hello, usage=usage, model=model) for n in range(2)]
        assert api.ingest({"batch": [start, *calls]}).status_code == 207
        session_stats_compute(session_id=Session.objects.get(external_id=sid).pk)
    (row,) = api.get("/stats/agents").json()["rows"]
    # gpt-4o: 1,000 x 2.50 + 2,000 x 1.25 + 500 x 10.00 per million = $0.01 a call.
    assert row["cost_usd"] == pytest.approx(0.04)
    assert (row["calls_priced"], row["calls_unpriced"]) == (4, 2)
