"""What the context lost and whether it mattered, through ingest and a real worker."""

from __future__ import annotations

import json
from typing import Any

import pytest

from contextview.core.tokens import load_encoding
from tests.api_client import Api, step
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SYS = {"id": "sys", "role": "system", "content": "You look after an online shop's orders."}
ASK = {"id": "u0", "role": "user", "content": "Which orders are stuck?"}
RESULT = "SO20260101007 stuck for 48h; SO20260101042 has a wrong address"


def call(n: int) -> dict[str, Any]:
    return {
        "id": f"call-{n}",
        "role": "assistant",
        "content": "Searching the orders.",
        "tool_calls": [
            {
                "id": f"c{n}",
                "type": "function",
                "function": {"name": "search_orders", "arguments": '{"state": "stuck"}'},
            }
        ],
    }


def result(n: int) -> dict[str, Any]:
    return {
        "id": f"t{n}",
        "role": "tool",
        "tool": "search_orders",
        "tool_call_id": f"c{n}",
        "content": RESULT,
    }


def say(mid: str, role: str, content: str) -> dict[str, Any]:
    return {"id": mid, "role": role, "content": content}


def amnesia_session(name: str = "loss") -> list[dict[str, Any]]:
    """A summary loses SO20260101007 at step 2, the user asks for it at step 5, and
    step 6 fetches again what the summary folded."""
    head = [SYS, ASK, call(1), result(1)]
    summary = say("s1", "tool", "Two orders have problems.")
    folded = [SYS, ASK, call(1), summary, say("a2", "assistant", "Looking closer.")]
    later = [*folded, say("u4", "user", "Thanks, go on."), say("u5", "user", "And SO20260101007?")]
    return [
        {"type": "session", "id": f"{name}-start", "body": {"session_id": name}},
        step(name, 0, head),
        step(name, 1, [*head, say("a2", "assistant", "Looking closer.")]),
        step(
            name,
            2,
            [*head, say("a2", "assistant", "Looking closer.")],
            action={"action": "summarize", "target": "t1", "result": summary},
        ),
        step(name, 3, folded),
        step(name, 4, [*folded, say("u4", "user", "Thanks, go on.")]),
        step(name, 5, later),
        step(name, 6, [*later, call(2), result(2)]),
    ]


def test_it_links_what_a_summary_lost_to_the_steps_that_needed_it(
    api: Api, celery_worker_process: Any
) -> None:
    assert api.ingest({"batch": amnesia_session()}).status_code == 207
    wait_for(lambda: api.get("/sessions/loss").json()["stats_status"] == "ready")

    lost_at = api.get("/sessions/loss/steps/2").json()["stats"]
    entities = lost_at["ops"][0]["entities"]
    assert {"text": "SO20260101007", "step": 5, "how": "asked"} in entities["needed_later"]
    assert {"text": "SO20260101042", "step": 6, "how": "refetched"} in entities["needed_later"]
    # What was needed later is listed first.
    assert entities["lost"][0] in {"SO20260101007", "SO20260101042"}

    asked = api.get("/sessions/loss/steps/5").json()["stats"]
    assert "amnesia" in asked["flags"]
    assert "amnesia" not in api.get("/sessions/loss/steps/4").json()["stats"]["flags"]

    refetch = api.get("/sessions/loss/steps/6").json()["stats"]
    assert "refetch_after_fold" in refetch["flags"]

    aggregates = api.get("/sessions/loss").json()["aggregates"]
    assert {"text": "SO20260101007", "lost_at": 2, "needed_at": 5, "how": "asked"} in aggregates[
        "amnesia"
    ]
    tokens = len(load_encoding("cl100k_base").encode_ordinary(RESULT))
    assert aggregates["refetches"] == [
        {"tool": "search_orders", "lost_at": 2, "refetched_at": 6, "tokens": tokens}
    ]
    # Losing what step 5 asked for costs the summary its reward.
    assert lost_at["reward"] < 0


def test_it_reports_unseen_tokens_from_a_steps_provider_usage(
    api: Api, celery_worker_process: Any
) -> None:
    usage = {"input_tokens": 900, "output_tokens": 20, "cache_read_tokens": 100}
    first = step("usage", 0, [SYS, ASK], usage=usage, model="claude-sonnet-4-5")
    assert api.ingest({"batch": [first]}).status_code == 207
    wait_for(lambda: api.get("/sessions/usage/steps/0").json()["stats_status"] == "ready")
    stats = api.get("/sessions/usage/steps/0").json()["stats"]
    assert stats["unseen_tokens"] == 1000 - stats["tokens"]["before"]
    assert "token_estimate_off" not in stats["flags"]
    # Occupancy is the provider's 1,000 tokens in Claude's 200,000-token window.
    assert stats["occupancy"]["before"] == pytest.approx(1000 / 200_000)
    wait_for(lambda: api.get("/sessions/usage").json()["stats_status"] == "ready")
    assert api.get("/sessions/usage").json()["aggregates"]["window"] == 200_000


def test_it_measures_unseen_tokens_against_the_context_a_compaction_left(
    api: Api, celery_worker_process: Any
) -> None:
    """The call after a compaction read the summary, not what it replaced."""
    log = say("log", "tool", "retry " * 3000)
    summary = {"id": "sum", "role": "memory", "content": "The log shows retries."}
    compact = {"action": "summarize", "target": "log", "result": summary}
    usage = {"input_tokens": 400}
    first = step("compact", 0, [SYS, ASK, log], action=compact, usage=usage)
    assert api.ingest({"batch": [first]}).status_code == 207
    wait_for(lambda: api.get("/sessions/compact/steps/0").json()["stats_status"] == "ready")
    stats = api.get("/sessions/compact/steps/0").json()["stats"]
    assert stats["tokens"]["before"] > 3000 > stats["tokens"]["after"]
    assert stats["unseen_tokens"] == 400 - stats["tokens"]["after"]
    assert stats["unseen_tokens"] > 0


def waste_session(name: str) -> list[dict[str, Any]]:
    """The order search is answered twice from step 2 on; a log read at step 0 is never
    referred to again, yet carried to the end; the order it found is."""
    log = {"id": "log", "role": "tool", "tool": "read_log", "content": "GET /api/lock 504 3002ms"}
    context = [SYS, ASK, log, call(1), result(1)]
    steps = [step(name, 0, context)]
    for k in range(1, 9):
        # The agent writes about the order it found, never about the log.
        text = "SO20260101007 needs a new carrier." if k == 3 else f"Working, part {k}."
        context = [*context, say(f"a{k}", "assistant", text)]
        if k == 2:
            context = [*context, call(2), result(2)]
        steps.append(step(name, k, context))
    return steps


def test_it_sums_the_tokens_re_billed_for_duplicate_and_unreferenced_results(
    api: Api, celery_worker_process: Any
) -> None:
    tokens = len(load_encoding("cl100k_base").encode_ordinary(RESULT))
    assert api.ingest({"batch": waste_session("waste")}).status_code == 207
    # The same session again, in two batches: the second run resumes mid-session.
    split = waste_session("waste-resumed")
    assert api.ingest({"batch": split[:5]}).status_code == 207
    wait_for(lambda: api.get("/sessions/waste-resumed").json()["stats_status"] == "ready")
    assert api.ingest({"batch": split[5:]}).status_code == 207
    for name in ("waste", "waste-resumed"):
        wait_for(
            lambda name=name: (
                api.get(f"/sessions/{name}").json()["stats_status"] == "ready"
                and api.get(f"/sessions/{name}").json()["aggregates"]["steps"] == 9
            )
        )
    aggregates = api.get("/sessions/waste").json()["aggregates"]
    # The second answer is billed for nothing at steps 2 to 8.
    assert aggregates["duplicate_results"] == [
        {"tool": "search_orders", "message": "t1", "first_at": 2, "copies": 2, "tokens": 7 * tokens}
    ]
    [log] = aggregates["unreferenced_results"]
    assert (log["message"], log["added_at"], log["steps"]) == ("log", 0, 9)
    assert aggregates["rebilled_tokens"] == 7 * tokens + log["tokens"]
    assert api.get("/sessions/waste/steps/3").json()["stats"]["waste"]["duplicate_tokens"] == tokens
    resumed = api.get("/sessions/waste-resumed").json()["aggregates"]
    for key in ("duplicate_results", "unreferenced_results", "rebilled_tokens"):
        assert resumed[key] == aggregates[key], key


def _openai_call(n: int, path: str) -> list[dict[str, Any]]:
    args = json.dumps({"p": path})
    return [
        {
            "id": f"a{n}",
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"c{n}", "type": "function", "function": {"name": "read", "arguments": args}}
            ],
        },
        {"id": f"t{n}", "role": "tool", "tool_call_id": f"c{n}", "content": f"contents of {path}"},
    ]


def _anthropic_call(n: int, path: str) -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": f"c{n}", "name": "read", "input": {"p": path}}
    answer = {"type": "tool_result", "tool_use_id": f"c{n}", "content": f"contents of {path}"}
    return [
        {"id": f"a{n}", "role": "assistant", "content": [use]},
        {"id": f"t{n}", "role": "user", "content": [answer]},
    ]


@pytest.mark.parametrize("spelling", [_openai_call, _anthropic_call])
def test_a_repeated_call_is_seen_whatever_the_providers_spelling(
    api: Api, spelling: Any, celery_worker_process: Any
) -> None:
    # Step 0 reads x, step 1 reads x again, step 2 reads y: no message names its tool
    # but the call it answers.
    name = f"calls-{spelling.__name__.strip('_')}"
    context: list[dict[str, Any]] = [SYS, ASK]
    events = []
    for n, path in enumerate(["x", "x", "y"]):
        context = [*context, *spelling(n, path)]
        events.append(step(name, n, context))
    assert api.ingest({"batch": events}).status_code == 207
    wait_for(lambda: api.get(f"/sessions/{name}").json()["stats_status"] == "ready")
    steps = [api.get(f"/sessions/{name}/steps/{n}").json()["stats"] for n in range(3)]
    assert [s["new_tool"] for s in steps] == ["read", "read", "read"]
    assert ["repeated_tool_call" in s["flags"] for s in steps] == [False, True, False]
    # The waste tracker follows their results under the tool's name too.
    followed = [new[1] for s in steps for new in (s.get("waste") or {}).get("new", [])]
    assert followed == ["read", "read"]  # x's result, then y's (x's again is a copy)


@pytest.mark.parametrize(
    "second",
    [
        [{"id": "q4", "content": "hi"}],  # a new message with no role
        [{"id": "q4", "role": None, "content": "hi"}],
        [{"id": "q3", "content": "changed"}],  # the same id, new content, no role
    ],
)
def test_a_message_without_a_role_is_measured_like_any_other(
    api: Api, second: list[dict[str, Any]], celery_worker_process: Any
) -> None:
    name = f"roleless-{second[0]['id']}-{second[0]['content']}"
    events = [step(name, 0, [{"id": "q3", "role": "user", "content": "x"}]), step(name, 1, second)]
    answer = api.ingest({"batch": events})
    assert answer.status_code == 207
    assert [r["status"] for r in answer.json()["results"]] == [201, 201]
    wait_for(lambda: api.get(f"/sessions/{name}").json()["stats_status"] != "pending")
    session = api.get(f"/sessions/{name}").json()
    assert session["stats_status"] == "ready"
    assert api.get(f"/sessions/{name}/steps/1").json()["stats"]["tokens"]["before"] > 0


def test_it_links_what_the_agent_writes_in_a_reply_to_the_step_that_wrote_it(api: Api) -> None:
    """A reply that names what a summary lost needed it at its own call, the session's
    last reply too; the same reply read back in the next call's context is no second link."""
    from contextview.sessions.models import Session
    from contextview.stats.services import session_stats_compute

    head = [SYS, ASK, call(1), result(1)]
    summary = say("s1", "tool", "Two orders have problems.")
    folded = [SYS, ASK, call(1), summary]
    answer = "Order SO20260101007 has been stuck for two days."
    reply = {"messages": [{"role": "assistant", "content": answer}]}
    batch = [
        step("told", 0, head),
        step("told", 1, head, action={"action": "summarize", "target": "t1", "result": summary}),
        step("told", 2, folded, output=reply),
    ]
    assert api.ingest({"batch": batch}).status_code == 207

    def amnesia() -> list[dict[str, Any]]:
        session = Session.objects.get(external_id="told")
        session_stats_compute(session_id=session.pk)
        return api.get("/sessions/told").json()["aggregates"]["amnesia"]

    link = {"text": "SO20260101007", "lost_at": 1, "needed_at": 2, "how": "mentioned"}
    assert link in amnesia()
    assert "amnesia" in api.get("/sessions/told/steps/2").json()["stats"]["flags"]
    # The next call holds the reply: still the one link, at the step that wrote it.
    said = say("a3", "assistant", answer)
    nxt = step("told", 3, [*folded, said, say("u3", "user", "Thanks.")])
    assert api.ingest({"batch": [nxt]}).status_code == 207
    assert [a for a in amnesia() if a["text"] == "SO20260101007"] == [link]
