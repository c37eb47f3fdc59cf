from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from contextview.sessions.models import Session
from contextview.stats.services import session_stats_compute
from tests.api_client import Api, step

LOG = "upstream inventory-svc timed out after 3 s, status 504 for order SO20260101007"


def _ingest(api: Api, sid: str, status: str) -> None:
    batch = [
        {"id": f"{sid}-s", "type": "session", "body": {"session_id": sid, "agent": "ops"}},
        step(
            sid,
            0,
            [{"id": "log", "role": "tool", "tool": "grep", "content": LOG}],
            action={
                "action": "summarize",
                "target": "log",
                "reason": "long log",
                "result": {"id": "sum", "role": "tool", "content": "inventory timed out"},
            },
        ),
        step(sid, 1, [{"id": "sum"}, {"id": "q", "role": "user", "content": "Which order?"}]),
        {
            "id": f"{sid}-e",
            "type": "session_end",
            "body": {"session_id": sid, "status": status, "score": 0.0},
        },
    ]
    assert api.ingest({"batch": batch}).status_code == 207
    session_stats_compute(session_id=Session.objects.get(external_id=sid).pk)


@pytest.mark.django_db
def test_it_exports_each_step_with_obs_operations_after_reward_and_outcome(api: Api) -> None:
    _ingest(api, "lossy", "failed")
    response = api.get("/export/steps.jsonl")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    rows = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    assert [(r["session_id"], r["index"]) for r in rows] == [("lossy", 0), ("lossy", 1)]
    # Messages come by number, each written once, in the first line that holds it.
    messages = {n: m for r in rows for n, m in r["messages"].items()}
    first = rows[0]
    obs = [messages[str(n)] for n in first["obs"]]
    assert [m["id"] for m in obs] == ["log"]
    assert obs[0]["content"] == LOG
    assert first["operations"][0]["op"] == "summarize"
    assert first["operations"][0]["result_id"] == "sum"
    assert [messages[str(n)]["content"] for n in first["after"]] == ["inventory timed out"]
    second = rows[1]
    assert second["obs"][0] == first["after"][0]  # the summary, by number
    assert [m["id"] for m in second["messages"].values()] == ["q"]
    assert "entity_loss" in first["flags"]
    assert first["reward"] == 1.0  # halved the tokens, lost nothing a later step needed
    assert first["outcome"] == {"status": "failed", "score": 0.0}


@pytest.mark.django_db
def test_it_filters_the_export_like_the_sessions_list(api: Api) -> None:
    _ingest(api, "good", "succeeded")
    _ingest(api, "bad", "failed")
    out = StringIO()
    call_command("exportdataset", "acme", "--status", "succeeded", stdout=out, stderr=StringIO())
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {r["session_id"] for r in rows} == {"good"}


@pytest.mark.django_db
def test_it_exports_messages_as_the_read_api_gives_them(api: Api) -> None:
    messages = [
        {"id": "u1", "role": "user", "name": "alice", "content": "Order A12345?", "pinned": True},
        {"id": "t1", "role": "tool", "tool_call_id": "call_7", "content": "shipped"},
    ]
    batch = [step("marks", 0, messages, action={"action": "expire", "target": "t1"})]
    assert api.ingest({"batch": batch}).status_code == 207
    session_stats_compute(session_id=Session.objects.get(external_id="marks").pk)
    (row,) = [
        json.loads(line)
        for line in b"".join(api.get("/export/steps.jsonl").streaming_content).splitlines()
    ]
    read = api.get("/sessions/marks/steps/0").json()
    for side, given in (("obs", "before"), ("after", "after")):
        exported = [row["messages"][str(n)] for n in row[side]]
        assert exported == [{k: v for k, v in m.items() if k != "tokens"} for m in read[given]]
    # The pin, the name the message was sent with, and what the expire changed.
    obs = [row["messages"][str(n)] for n in row["obs"]]
    after = [row["messages"][str(n)] for n in row["after"]]
    assert obs[0]["pinned"] is True and obs[0]["name"] == "alice"
    assert "expirable" not in obs[1] and after[1]["expirable"] is True
