"""Alerts raised by a real beat and worker, told to a real webhook receiver."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from contextview.monitors.models import Alert
from tests.api_client import Api, step
from tests.monitors.conftest import Receiver, signed_by
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LONG = "The deployment of inventory-svc failed with status 504 after retrying. " * 7


def _at(seconds_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds_ago)).isoformat()


def _session(api: Api, sid: str, messages: list[dict[str, Any]], seconds_ago: float) -> None:
    """One session of one step, sent `seconds_ago`, with a budget of 100 tokens."""
    head = {
        "id": f"{sid}-s",
        "type": "session",
        "timestamp": _at(seconds_ago),
        "body": {"session_id": sid, "agent": "bot", "budget": {"max_tokens": 100}},
    }
    event = {**step(sid, 0, messages), "timestamp": _at(seconds_ago)}
    assert api.ingest({"batch": [head, event]}).status_code == 207


def _ready(api: Api, *sids: str) -> None:
    for sid in sids:
        wait_for(lambda s=sid: api.get(f"/sessions/{s}").json()["stats_status"] == "ready")


def _alerts(api: Api) -> list[dict[str, Any]]:
    alerts: list[dict[str, Any]] = api.get("/alerts").json()["alerts"]
    return alerts


def _monitor(api: Api, receiver: Receiver, **rule: Any) -> dict[str, Any]:
    body = {"name": "near the limit", "window_minutes": 1, "webhook_url": receiver.url, **rule}
    created = api.post("/monitors", body)
    assert created.status_code == 201, created.content
    monitor: dict[str, Any] = created.json()
    return monitor


def test_it_fires_once_then_resolves_once_when_the_session_leaves_the_window(
    api: Api, receiver: Receiver, celery_worker_process: Any, celery_beat_process: Any
) -> None:
    # 25 seconds left in a one-minute window for the hot session; the calm one stays.
    _session(api, "hot", [{"id": "m", "role": "user", "content": LONG}], seconds_ago=35)
    _session(api, "calm", [{"id": "m", "role": "user", "content": "hello"}], seconds_ago=0)
    _ready(api, "hot", "calm")
    monitor = _monitor(api, receiver, metric="peak_occupancy", threshold=0.9)

    firing = wait_for(lambda: _alerts(api), seconds=10, what="an alert")
    assert [(a["state"], a["sessions"], a["monitor_id"]) for a in firing] == [
        ("firing", ["hot"], monitor["id"])
    ]
    assert firing[0]["value"] > 0.9
    wait_for(lambda: receiver.events() == ["firing"], seconds=10, what="the firing webhook")
    assert signed_by(monitor["secret"], receiver.requests[0])
    assert json.loads(receiver.requests[0].body) == {
        "event": "firing",
        "monitor": "near the limit",
        "alert": {k: v for k, v in firing[0].items() if k != "deliveries"},
    }

    resolved = wait_for(
        lambda: [a for a in _alerts(api) if a["state"] == "resolved"], seconds=40, what="resolve"
    )
    started = datetime.fromisoformat(resolved[0]["started_at"])
    ended = datetime.fromisoformat(resolved[0]["resolved_at"])
    # Resolved within a few evaluations of the hot step leaving the window.
    assert ended - started < timedelta(seconds=35)
    wait_for(lambda: len(receiver.requests) == 2, seconds=10, what="the resolving webhook")
    assert signed_by(monitor["secret"], receiver.requests[1])
    said = json.loads(receiver.requests[1].body)
    assert said["event"] == "resolved" and said["alert"]["resolved_at"] is not None
    time.sleep(3)  # three more evaluations: nothing is said again
    assert receiver.events() == ["firing", "resolved"]
    assert len(_alerts(api)) == 1
    tampered = type(receiver.requests[1])(
        receiver.requests[1].body + b" ", receiver.requests[1].signature
    )
    assert not signed_by(monitor["secret"], tampered)


def _tool(mid: str, tool: str, words: int) -> dict[str, Any]:
    return {"id": mid, "role": "tool", "tool": tool, "content": " ".join(["result"] * words)}


def test_it_fires_for_a_tool_result_ten_times_its_tools_median(
    api: Api, receiver: Receiver, celery_worker_process: Any, celery_beat_process: Any
) -> None:
    steady = [_tool(f"s{i}", "search", 20 + i) for i in range(4)]
    _session(api, "steady", steady, seconds_ago=0)
    jumpy = [_tool(f"r{i}", "read_file", 20) for i in range(3)] + [_tool("big", "read_file", 250)]
    _session(api, "jumpy", jumpy, seconds_ago=0)
    _ready(api, "steady", "jumpy")
    monitor = _monitor(api, receiver, metric="tool_result_jump", threshold=10)

    alerts = wait_for(lambda: _alerts(api), seconds=10, what="an alert")
    assert [(a["state"], a["sessions"]) for a in alerts] == [("firing", ["jumpy"])]
    assert alerts[0]["value"] >= 10
    wait_for(lambda: receiver.events() == ["firing"], seconds=10, what="the webhook")
    assert signed_by(monitor["secret"], receiver.requests[0])


def _anthropic_call(n: int, tool: str) -> list[dict[str, Any]]:
    """A call and its result as Claude Code logs them: a ``tool_use`` block, then a
    user message of one ``tool_result`` block that names only the call's id."""
    words = 250 if n == 3 else 20
    return [
        {
            "id": f"c{n}",
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": tool, "input": {"n": n}}],
        },
        {
            "id": f"r{n}",
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": f"toolu_{n}",
                    "content": f"page {n}: " + " ".join(["row"] * words),
                }
            ],
        },
    ]


def test_it_names_the_tool_of_a_result_that_only_names_its_call(
    api: Api, receiver: Receiver, celery_worker_process: Any, celery_beat_process: Any
) -> None:
    # Read's results stay small; Grep's fourth is ten times its earlier ones. Neither
    # result message says its tool: the jump is Grep's only through the calls.
    calls = [m for n in range(4) for m in _anthropic_call(n, "Grep")]
    reads = [m for n in range(3) for m in _anthropic_call(n, "Read")]
    _session(api, "grep", calls, seconds_ago=0)
    _session(api, "read", reads, seconds_ago=0)
    _ready(api, "grep", "read")
    _monitor(api, receiver, metric="tool_result_jump", threshold=10)

    alerts = wait_for(lambda: _alerts(api), seconds=10, what="an alert")
    assert [(a["state"], a["sessions"]) for a in alerts] == [("firing", ["grep"])]
    assert alerts[0]["value"] >= 10


def test_it_stays_quiet_when_no_tool_result_jumps(
    api: Api, receiver: Receiver, celery_worker_process: Any, celery_beat_process: Any
) -> None:
    _session(api, "steady", [_tool(f"s{i}", "search", 20 + 5 * i) for i in range(5)], 0)
    _ready(api, "steady")
    _monitor(api, receiver, metric="tool_result_jump", threshold=10)
    time.sleep(3)
    assert _alerts(api) == [] and receiver.requests == []


def test_it_retries_a_failing_receiver_and_still_resolves_on_time(
    api: Api, receiver: Receiver, celery_worker_process: Any, celery_beat_process: Any
) -> None:
    receiver.statuses = [500, 500]
    _session(api, "hot", [{"id": "m", "role": "user", "content": LONG}], seconds_ago=45)
    _ready(api, "hot")
    monitor = _monitor(api, receiver, metric="peak_occupancy", threshold=0.9)

    wait_for(lambda: _alerts(api), seconds=10, what="an alert")
    # The hot step leaves the window while the firing webhook is still being retried.
    resolved = wait_for(
        lambda: [a for a in _alerts(api) if a["state"] == "resolved"], seconds=30, what="resolve"
    )
    started = datetime.fromisoformat(resolved[0]["started_at"])
    assert datetime.fromisoformat(resolved[0]["resolved_at"]) - started < timedelta(seconds=25)
    wait_for(lambda: sorted(receiver.events()) == ["firing", "resolved"], seconds=40, what="both")
    assert receiver.answered.count(500) == 2
    assert all(signed_by(monitor["secret"], r) for r in receiver.requests)
    attempts = Alert.objects.get().deliveries.order_by("at", "id")
    firing = [(d.attempt, d.status_code) for d in attempts if d.event == "firing"]
    assert firing == [(1, 500), (2, 500), (3, 200)]
    shown = api.get("/alerts").json()["alerts"][0]["deliveries"]
    assert [d["status_code"] for d in shown if d["event"] == "firing"] == [500, 500, 200]
