"""The demo fleet against a real server: every agent's session arrives whole."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from contextview.demo.fleet import AGENTS, run_fleet
from contextview.sdk import Client
from tests.sdk.conftest import Reader, live_agent
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_it_runs_every_agent_through_its_hook_without_a_refusal(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client]
) -> None:
    client = make_client(gunicorn_api, project_key)
    lines: list[str] = []
    sessions = run_fleet(client, prefix="t-", pace=0, log=lines.append)
    assert client.flush(60), client.stats
    assert client.stats["rejected"] == 0, list(client.problems)
    assert not [p for p in client.problems], list(client.problems)
    reader = Reader(gunicorn_api, project_key)
    for sid in sessions:
        got = reader.get(f"/sessions/{sid}")
        assert got["steps"] > 3, sid
        assert got["status"] in ("succeeded", "failed"), sid
    assert len(sessions) == len(AGENTS)


def test_it_keeps_a_live_chat_agent_that_applies_a_mode_switch(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client]
) -> None:
    client = make_client(gunicorn_api, project_key)
    reader = Reader(gunicorn_api, project_key)
    with live_agent(client, name="chat-sliding", pace=0.05, check=False):
        # Past its 20 scripted turns, the agent lingers on the session.
        wait_for(lambda: reader.has_step("live-chat-sliding", 21))
        created = reader.post(
            "/sessions/live-chat-sliding/directives", {"type": "set_mode", "mode": "hybrid"}
        )
        assert created.status_code == 201, created.text

        def hybrid_step() -> dict[str, Any] | None:
            count = reader.get("/sessions/live-chat-sliding")["steps"]
            last = reader.get(f"/sessions/live-chat-sliding/steps/{count - 1}")
            return last if last["mode"] == "hybrid" else None

        step = wait_for(hybrid_step)
        # Hybrid mode puts the hard constraints back: the member id is in front of the model.
        assert any("A12345" in m["content"] for m in step["after"])
        assert reader.get("/sessions/live-chat-sliding")["mode"] == "hybrid"
        assert reader.get("/sessions/live-chat-sliding/control")["directives"] == []
    assert client.flush(20)
    assert client.stats["rejected"] == 0, list(client.problems)


def test_it_keeps_a_live_debugging_agent_that_reloads_a_restored_original(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client]
) -> None:
    client = make_client(gunicorn_api, project_key)
    reader = Reader(gunicorn_api, project_key)
    sid = "live-nginx-504-hunt"
    with live_agent(client, name="nginx-504-hunt", pace=0.05, check=False):
        wait_for(lambda: reader.has_step(sid, 12))
        # The access log was summarized (sum_1); an engineer restores the original.
        # Only a step stored after this count can apply the restore.
        scanned = [reader.get(f"/sessions/{sid}")["steps"]]
        created = reader.post(
            f"/sessions/{sid}/directives", {"type": "restore", "targets": ["tool_result_12"]}
        )
        assert created.status_code == 201, created.text

        def reloaded() -> dict[str, Any] | None:
            while scanned[0] < reader.get(f"/sessions/{sid}")["steps"]:
                step = reader.get(f"/sessions/{sid}/steps/{scanned[0]}")
                scanned[0] += 1
                if any(op["op"] == "reload" and op["targets"] == ["tool_result_12"]
                       for op in step["ops"]):  # fmt: skip
                    return step
            return None

        step = wait_for(reloaded)
        assert "tool_result_12" in [m["id"] for m in step["after"]]
        assert reader.get(f"/sessions/{sid}/control")["directives"] == []
