"""A report or export of a long session costs what its content costs, not its context's
length times its steps: a message resent at every call is read and written once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.api_client import Api, step

STEPS = 150
SHARED = 40


def _session(api: Api, sid: str, *, parts: int) -> None:
    """`SHARED` messages of `parts` text parts each, resent by id at every step, and one
    short new message a step: the same steps and contexts whatever `parts` is."""
    shared = [
        {
            "id": f"doc{k}",
            "role": "user",
            "content": [{"type": "text", "text": f"line {n} of doc {k}"} for n in range(parts)],
        }
        for k in range(SHARED)
    ]
    events: list[dict[str, Any]] = [
        {"id": f"{sid}-start", "type": "session", "body": {"session_id": sid, "agent": sid}}
    ]
    for i in range(STEPS):
        context = shared if i == 0 else [{"id": m["id"]} for m in shared]
        turns = [{"id": f"q{k}"} for k in range(i)]
        new = {"id": f"q{i}", "role": "user", "content": f"question {i}"}
        events.append(step(sid, i, [*context, *turns, new]))
    response = api.ingest({"batch": events})
    assert response.status_code == 207
    assert {r["status"] for r in response.json()["results"]} == {201}


def _seconds(api: Api, path: str) -> float:
    started = time.perf_counter()
    response = api.get(path)
    assert response.status_code == 200
    b"".join(response.streaming_content)
    return time.perf_counter() - started


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/sessions/{sid}/report.json", "/export/steps.jsonl?agent={sid}"])
def test_it_reads_a_message_resent_at_every_step_once(api: Api, path: str) -> None:
    _session(api, "light", parts=1)
    _session(api, "heavy", parts=60)
    light, heavy = [], []
    for _ in range(5):  # interleaved, best of five: the machine's load drifts
        light.append(_seconds(api, path.format(sid="light")))
        heavy.append(_seconds(api, path.format(sid="heavy")))
    print(f"light {min(light):.3f} s, heavy {min(heavy):.3f} s")
    # 2,400 more parts of content (1.3x the time); read at every step that holds them,
    # they were 720,000 more (7-10x).
    assert min(heavy) < 3 * min(light), (min(light), min(heavy))
