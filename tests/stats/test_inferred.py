"""Operations the server infers between steps, through a real server and a real worker."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from contextview.core.tokens import load_encoding
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SYS = {"id": "sys", "role": "system", "content": "You debug orders."}
U1 = {"id": "u1", "role": "user", "content": "Why does order SO20260101007 time out?"}
A1 = {"id": "a1", "role": "assistant", "content": "Reading the inventory log."}
T1 = {
    "id": "t1",
    "role": "tool",
    "tool": "read_file",
    "content": "POST /api/inventory/lock 504 after 3 s; upstream inventory-svc timed out",
}
U2 = {"id": "u2", "role": "user", "content": "My member id is A12345, does that matter?"}
LOOP = [SYS, U1, A1, T1, U2]
SUMMARY = {"id": "summary", "role": "user", "content": "The user asks why an order times out."}


class Server:
    def __init__(self, url: str, key: str) -> None:
        self.http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"})

    def post(self, path: str, payload: Any) -> httpx.Response:
        return self.http.post(f"/api/v1{path}", json=payload, timeout=30)

    def get(self, path: str) -> Any:
        response = self.http.get(f"/api/v1{path}", timeout=30)
        assert response.status_code == 200, (path, response.status_code, response.text[:300])
        return response.json()

    def send(self, *events: dict[str, Any]) -> None:
        response = self.post("/ingest", {"batch": list(events)})
        assert response.status_code == 207, response.text
        assert all(r["status"] == 201 for r in response.json()["results"]), response.text

    def ready(self, session_id: str) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            found = self.get(f"/sessions/{session_id}")
            return found if found["stats_status"] == "ready" else None

        return wait_for(done, what=f"the statistics of {session_id}")

    def step(self, session_id: str, index: int) -> Any:
        return self.get(f"/sessions/{session_id}/steps/{index}")


@pytest.fixture
def server(
    transactional_db: None, gunicorn_api: str, celery_worker_process: Any
) -> Iterator[Server]:
    from contextview.projects.services import apikey_create, project_get_or_create

    project, _ = project_get_or_create(slug="infer")
    client = Server(gunicorn_api, apikey_create(project=project, name="infer tests").secret)
    yield client
    client.http.close()


def session(session_id: str, **body: Any) -> dict[str, Any]:
    return {"id": f"{session_id}-s", "type": "session", "body": {"session_id": session_id, **body}}


def step(session_id: str, index: int, messages: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"session_id": session_id, "index": index, "obs": {"messages": messages}}
    return {"id": f"{session_id}-{index}", "type": "step", "body": body}


def inferred_stats(step: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for op in step["stats"]["ops"] if op.get("inferred")]


def test_it_infers_a_silent_compaction_with_folds_stats_and_an_archive(server: Server) -> None:
    server.send(
        session("compact", pinned=["A12345"], encoding="cl100k_base"),
        step("compact", 0, LOOP),
        step("compact", 1, [SYS, SUMMARY]),
    )
    server.ready("compact")
    first, second = server.step("compact", 0), server.step("compact", 1)
    assert first["inferred_ops"] == [] and inferred_stats(first) == []

    [op] = second["inferred_ops"]
    assert op == {
        "op": "summarize",
        "form": "named",
        "targets": ["u1", "a1", "t1", "u2"],
        "result_id": "summary",
        "reason": None,
        "params": {},
        "inferred": True,
    }
    assert second["ops"] == []
    assert {"op_index": 0, "result_id": "summary", "originals": ["u1", "a1", "t1", "u2"],
            "inferred": True} in second["folds"]  # fmt: skip

    [stats] = inferred_stats(second)
    assert (stats["op"], stats["result_id"]) == ("summarize", "summary")
    assert stats["tokens_in"] > stats["tokens_out"] > 0
    assert stats["ratio"] == pytest.approx(stats["tokens_out"] / stats["tokens_in"])
    assert "SO20260101007" in stats["entities"]["lost"]
    assert {"entity_loss", "pinned_missing"} <= set(second["stats"]["flags"])
    aggregates = server.get("/sessions/compact")["aggregates"]
    assert aggregates["ops_by_type"] == {"summarize": 1}

    archived = server.get("/sessions/compact/archive")["originals"]
    by_id = {entry["id"]: entry for entry in archived}
    assert set(by_id) == {"u1", "a1", "t1", "u2"}
    assert by_id["t1"]["message"]["content"] == T1["content"]
    assert by_id["t1"]["message"]["tokens"] == len(
        load_encoding("cl100k_base").encode(T1["content"])
    )
    assert (by_id["t1"]["step"], by_id["t1"]["inferred"]) == (1, True)
    restore = server.post("/sessions/compact/directives", {"type": "restore", "targets": ["t1"]})
    assert restore.status_code == 201, restore.text


def test_it_marks_the_inferred_fold_a_later_step_reloaded(server: Server) -> None:
    later = step("again", 2, [SYS, SUMMARY])
    later["body"]["action"] = {"action": "reload", "targets": ["t1"]}
    later["body"]["after"] = {"messages": [SYS, SUMMARY, T1]}
    server.send(step("again", 0, LOOP), step("again", 1, [SYS, SUMMARY]), later)
    server.ready("again")
    archived = server.get("/sessions/again/archive")["originals"]
    reloaded = {entry["id"]: entry["reloaded"] for entry in archived if entry["inferred"]}
    assert reloaded == {"u1": False, "a1": False, "t1": True, "u2": False}


def test_it_infers_a_rewrite_a_drop_and_an_insert(server: Server) -> None:
    masked = {**T1, "content": "[tool output omitted]"}
    note = {"id": "note", "role": "system", "content": "Answer in a table."}
    server.send(
        step("edits", 0, LOOP),
        step("edits", 1, [SYS, U1, A1, masked, U2]),
        step("edits", 2, [SYS, A1, masked, U2]),
        step("edits", 3, [SYS, note, A1, masked, U2, {"id": "a2", "role": "assistant",
                                                      "content": "Checking."}]),
    )  # fmt: skip
    server.ready("edits")
    shapes = []
    for index in (1, 2, 3):
        found = server.step("edits", index)
        shapes.append([(op["op"], op["targets"], op["result_id"]) for op in found["inferred_ops"]])
        assert [op["op"] for op in inferred_stats(found)] == [op[0] for op in shapes[-1]]
    assert shapes == [
        [("rewrite", ["t1"], "t1")],
        [("drop", ["u1"], None)],
        [("insert", [], "note")],
    ]
    insert = server.step("edits", 3)["inferred_ops"][0]
    assert insert["params"] == {"position": 1}
    archived = server.get("/sessions/edits/archive")["originals"]
    t1 = next(entry for entry in archived if entry["id"] == "t1")
    assert t1["message"]["content"] == T1["content"] and t1["inferred"] is True


def test_it_infers_nothing_across_a_gap(server: Server) -> None:
    server.send(step("gap", 0, LOOP), step("gap", 2, [SYS, SUMMARY]))
    server.ready("gap")
    assert server.step("gap", 2)["inferred_ops"] == []


def _session_steps() -> list[list[dict[str, Any]]]:
    u3 = {"id": "u3", "role": "user", "content": "And now?"}
    return [
        LOOP[:3],
        LOOP,
        [SYS, SUMMARY],
        [SYS, SUMMARY, u3],
        [SYS, {**SUMMARY, "content": "An order times out."}, u3],
        [SYS, u3],
    ]


def _seen(server: Server, session_id: str, count: int) -> list[Any]:
    server.ready(session_id)
    steps = [server.step(session_id, i) for i in range(count)]
    archived = server.get(f"/sessions/{session_id}/archive")["originals"]
    return [
        [(s["inferred_ops"], s["folds"], inferred_stats(s), s["stats"]["flags"]) for s in steps],
        sorted((e["id"], e["step"], e["op"], e["inferred"]) for e in archived),
    ]


def test_it_infers_the_same_whatever_order_the_steps_arrive_in(server: Server) -> None:
    contexts = _session_steps()
    server.send(*[step("ordered", i, c) for i, c in enumerate(contexts)])
    expected = _seen(server, "ordered", len(contexts))
    assert any(ops for ops, *_ in expected[0])

    order = list(range(len(contexts)))
    random.Random(12).shuffle(order)
    # One step per batch, each computed before the next arrives: late steps recompute.
    for i in order:
        server.send(step("shuffled", i, contexts[i]))
        server.ready("shuffled")
    assert _seen(server, "shuffled", len(contexts)) == expected


def test_it_takes_a_compaction_part_or_a_compacted_call_as_the_summary(server: Server) -> None:
    compaction = {
        "id": "c1",
        "role": "assistant",
        "content": [{"type": "compaction", "text": "The user asks why an order times out."}],
    }
    u3 = {"id": "u3", "role": "user", "content": "Go on."}
    compacted = step("parts", 2, [SYS, U2, u3])
    compacted["body"]["obs"]["gen_ai.conversation.compacted"] = True
    server.send(
        step("parts", 0, LOOP),
        # The summary stands after the message that stayed, not where the others were.
        step("parts", 1, [SYS, U2, compaction]),
        step("parts", 3, [SYS, U2, compaction]),
        step("parts", 4, [SYS, U2]),
    )
    server.ready("parts")
    first = server.step("parts", 1)
    assert [(op["op"], op["targets"], op["result_id"]) for op in first["inferred_ops"]][0] == (
        "summarize",
        ["u1", "a1", "t1"],
        "c1",
    )
    assert first["before"][2]["content"] == compaction["content"]
    # A message that left with nothing in its place is dropped.
    dropped = server.step("parts", 4)["inferred_ops"]
    assert [(op["op"], op["targets"]) for op in dropped] == [("drop", ["c1"])]
    # Step 2 arrives late; its call says the history was compacted: u3 is the summary.
    server.send(compacted)
    server.ready("parts")
    late = server.step("parts", 2)["inferred_ops"]
    assert (late[0]["op"], late[0]["targets"], late[0]["result_id"]) == ("summarize", ["c1"], "u3")
    # Step 3 now follows step 2: what changed is inferred against it.
    after_late = server.step("parts", 3)["inferred_ops"]
    assert [(op["op"], op["result_id"]) for op in after_late][0] == ("summarize", "c1")
