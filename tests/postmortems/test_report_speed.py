"""A report or export of a long session costs what its content costs, not its context's
length times its steps: a message resent at every call, and the tool list sent with
every call, are read and written once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.api_client import Api, step

STEPS = 150
SHARED = 40


def _session(api: Api, sid: str, *, parts: int = 1, tools: int = 1) -> None:
    """`SHARED` messages of `parts` text parts each, resent by id at every step, and one
    short new message a step, each call sent with the same `tools` tool definitions: the
    same steps and contexts whatever `parts` and `tools` are."""
    shared = [
        {
            "id": f"doc{k}",
            "role": "user",
            "content": [{"type": "text", "text": f"line {n} of doc {k}"} for n in range(parts)],
        }
        for k in range(SHARED)
    ]
    definitions = [
        {
            "type": "function",
            "function": {
                "name": f"lookup_{n}",
                "description": f"Looks up record kind {n} by its id.",
                "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
            },
        }
        for n in range(tools)
    ]
    events: list[dict[str, Any]] = [
        {"id": f"{sid}-start", "type": "session", "body": {"session_id": sid, "agent": sid}}
    ]
    for i in range(STEPS):
        context = shared if i == 0 else [{"id": m["id"]} for m in shared]
        turns = [{"id": f"q{k}"} for k in range(i)]
        new = {"id": f"q{i}", "role": "user", "content": f"question {i}"}
        events.append(step(sid, i, [*context, *turns, new], tools=definitions))
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
@pytest.mark.parametrize(
    ("path", "heavy"),
    [
        # 2,400 more parts of content (1.3x the time); read at every step's before and
        # after, they were 720,000 more (7-10x).
        ("/sessions/{sid}/report.json", {"parts": 60}),
        ("/export/steps.jsonl?agent={sid}", {"parts": 60}),
        # 150 tool definitions more, sent with every call: 22,500 more when the list was
        # read and numbered at every step.
        ("/sessions/{sid}/report.json", {"tools": 150}),
    ],
    ids=["report-messages", "export-messages", "report-tools"],
)
def test_it_reads_what_every_step_resends_once(api: Api, path: str, heavy: Any) -> None:
    _session(api, "light")
    _session(api, "heavy", **heavy)
    light, heavier = [], []
    for _ in range(5):  # interleaved, best of five: the machine's load drifts
        light.append(_seconds(api, path.format(sid="light")))
        heavier.append(_seconds(api, path.format(sid="heavy")))
    print(f"light {min(light):.3f} s, heavy {min(heavier):.3f} s")
    assert min(heavier) < 3 * min(light), (min(light), min(heavier))
