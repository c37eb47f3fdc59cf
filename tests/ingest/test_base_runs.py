"""The `$base` extension: a context sent as runs of an earlier step's after context."""

from __future__ import annotations

from typing import Any

from tests.api_client import Api, results, step

SYSTEM = {"id": "sys", "role": "system", "content": "You read logs and answer in a table."}
TASK = {"id": "u1", "role": "user", "content": "Why does order SO20260101007 time out?"}


def tool(n: int) -> dict[str, Any]:
    return {"id": f"t{n}", "role": "tool", "tool": "grep", "content": f"line {n}: 504 after 3 s"}


def on_base(session: str, index: int, base: int, messages: list[Any], **body: Any) -> dict:
    event = step(session, index, messages, **body)
    event["body"]["obs"]["$base"] = base
    return event


def before_of(api: Api, session: str, index: int) -> list[dict[str, Any]]:
    got = api.get(f"/sessions/{session}/steps/{index}")
    assert got.status_code == 200, got.content
    return [{k: m[k] for k in ("id", "role", "content")} for m in got.json()["before"]]


def test_a_context_sent_as_runs_is_stored_as_the_same_context_sent_in_full(api: Api) -> None:
    first = [SYSTEM, TASK, tool(1), tool(2), tool(3)]
    # Step 0 drops t1; step 1 is step 0's after (sys, u1, t2, t3) plus t4.
    batch = [
        step("runs", 0, first, action={"action": "drop", "target": "t1"}),
        on_base("runs", 1, 0, [{"$run": [0, 4]}, tool(4)]),
        step("full", 0, first, action={"action": "drop", "target": "t1"}),
        step("full", 1, [SYSTEM, TASK, tool(2), tool(3), tool(4)]),
    ]
    assert [r["status"] for r in results(api.ingest({"batch": batch}))] == [201] * 4
    assert before_of(api, "runs", 1) == before_of(api, "full", 1)
    assert [m["id"] for m in before_of(api, "runs", 1)] == ["sys", "u1", "t2", "t3", "t4"]


def test_a_base_stored_by_an_earlier_request_is_read_from_the_database(api: Api) -> None:
    assert (
        results(api.ingest({"batch": [step("s", 0, [SYSTEM, TASK, tool(1)])]}))[0]["status"] == 201
    )
    # Runs need not be in order, nor cover everything: here t1 moves ahead of u1.
    later = on_base("s", 1, 0, [{"$run": [0, 1]}, {"$run": [2, 1]}, {"$run": [1, 1]}, tool(2)])
    assert results(api.ingest({"batch": [later]}))[0]["status"] == 201
    assert [m["id"] for m in before_of(api, "s", 1)] == ["sys", "t1", "u1", "t2"]


def test_runs_read_the_agents_own_after_when_it_was_given(api: Api) -> None:
    given_after = {"messages": [SYSTEM, {"id": "sum_1", "role": "tool", "content": "504 x3"}]}
    batch = [
        step("s", 0, [SYSTEM, tool(1)], after=given_after),
        on_base("s", 1, 0, [{"$run": [0, 2]}]),
    ]
    assert [r["status"] for r in results(api.ingest({"batch": batch}))] == [201, 201]
    assert [m["id"] for m in before_of(api, "s", 1)] == ["sys", "sum_1"]


def test_a_base_never_recorded_costs_that_event_only(api: Api) -> None:
    batch = [
        on_base("s", 1, 7, [{"$run": [0, 1]}]),
        step("s", 2, [SYSTEM, TASK]),
    ]
    got = results(api.ingest({"batch": batch}))
    assert got[0]["status"] == 422
    assert got[0]["error"] == "body.obs.$base: step 7 was never recorded for this session"
    assert got[1]["status"] == 201


def test_malformed_runs_are_refused_naming_the_element(api: Api) -> None:
    api.ingest({"batch": [step("s", 0, [SYSTEM, TASK])]})
    cases = {
        "outside": ([{"$run": [1, 5]}], "body.obs.messages[0].$run: [1, 5] is outside"),
        "shape": ([TASK, {"$run": [0]}], "body.obs.messages[1].$run: must be [start, count]"),
        "types": ([{"$run": ["0", 1]}], "body.obs.messages[0].$run: must be [start, count]"),
        "empty": ([{"$run": [0, 0]}], "body.obs.messages[0].$run: [0, 0] is outside"),
    }
    for n, (messages, error) in enumerate(cases.values(), start=1):
        got = results(api.ingest({"batch": [on_base("s", n, 0, messages)]}))[0]
        assert got["status"] == 400 and got["error"].startswith(error), got


def test_a_run_without_a_base_and_a_bad_base_are_refused(api: Api) -> None:
    no_base = step("s", 0, [{"$run": [0, 1]}])
    bad_base = on_base("s", 1, -1, [SYSTEM])
    got = results(api.ingest({"batch": [no_base, bad_base]}))
    assert got[0]["status"] == 400
    assert got[0]["error"].startswith("body.obs.messages[0].$run:")
    assert got[1]["status"] == 400
    assert got[1]["error"].startswith("body.obs.$base:")
