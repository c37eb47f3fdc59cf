"""Contract v1.1, "Messages as real agents send them", through the API."""

from __future__ import annotations

import json
from typing import Any

from contextview.core.tokens import TokenCounter
from contextview.sessions.models import Blob, Session
from contextview.stats.services import session_stats_compute
from tests.api_client import Api, results, step

SYSTEM = {"id": "sys", "role": "system", "content": "You debug orders."}
DEVELOPER = {"id": "dev", "role": "developer", "content": "Answer in a table."}
QUESTION = {"id": "u1", "role": "user", "content": "Why does order SO20260101007 time out?"}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "read_file", "arguments": '{"path": "/var/log/inventory.log"}'},
}
OPENAI_CALL = {"id": "a1", "role": "assistant", "content": None, "tool_calls": [CALL]}
OPENAI_RESULT = {
    "id": "t1",
    "role": "tool",
    "tool_call_id": "call_1",
    "content": "upstream timed out after 3 s, status 504",
}
ANTHROPIC_CALL = {
    "id": "a2",
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "The 504 points at inventory-svc.", "signature": "s"},
        {"type": "tool_use", "id": "toolu_1", "name": "grep", "input": {"q": "inventory-svc"}},
    ],
}
ANTHROPIC_RESULT = {
    "id": "t2",
    "role": "user",
    "content": [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [{"type": "text", "text": "inventory-svc: lock wait 3002 ms"}],
        }
    ],
}
OTEL_CALL = {
    "id": "a3",
    "role": "assistant",
    "content": [{"type": "tool_call", "id": "c3", "name": "ls", "arguments": {"dir": "/srv"}}],
}
SCREENSHOT = {
    "id": "u2",
    "role": "user",
    "content": [
        {"type": "text", "text": "Here is the dashboard."},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
    ],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file from the order service's host.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def computed(api: Api, session_id: str) -> None:
    session_stats_compute(session_id=Session.objects.get(external_id=session_id).pk)


def by_id(messages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in messages}


def test_it_puts_developer_messages_in_system_and_keeps_unknown_roles(api: Api) -> None:
    critic = {"id": "c1", "role": "critic", "content": "Too long."}
    assert (
        results(api.ingest({"batch": [step("s", 0, [SYSTEM, DEVELOPER, critic])]}))[0]["status"]
        == 201
    )
    got = by_id(api.get("/sessions/s/steps/0").json()["before"])
    assert (got["dev"]["role"], got["dev"]["partition"]) == ("developer", "system")
    assert (got["c1"]["role"], got["c1"]["partition"]) == ("critic", "other")


def test_it_returns_tool_calls_and_parts_as_sent_and_counts_them(api: Api) -> None:
    context = [
        SYSTEM,
        QUESTION,
        OPENAI_CALL,
        OPENAI_RESULT,
        ANTHROPIC_CALL,
        ANTHROPIC_RESULT,
        OTEL_CALL,
    ]
    assert results(api.ingest({"batch": [step("s", 0, context)]}))[0]["status"] == 201
    computed(api, "s")
    got = by_id(api.get("/sessions/s/steps/0").json()["before"])

    assert got["a1"]["content"] is None
    assert got["a1"]["tool_calls"] == [CALL]
    assert got["t1"]["tool_call_id"] == "call_1"
    assert got["a2"]["content"] == ANTHROPIC_CALL["content"]
    assert got["t2"]["content"] == ANTHROPIC_RESULT["content"]
    assert got["a3"]["content"] == OTEL_CALL["content"]

    counter = TokenCounter()
    read_file = 'read_file\n{"path": "/var/log/inventory.log"}'
    assert got["a1"]["tokens"] == counter.count(read_file)
    assert got["a2"]["tokens"] == counter.count(
        'The 504 points at inventory-svc.\ngrep\n{"q": "inventory-svc"}'
    )
    assert got["t2"]["tokens"] == counter.count("inventory-svc: lock wait 3002 ms")
    assert got["a3"]["tokens"] == counter.count('ls\n{"dir": "/srv"}')
    stats = api.get("/sessions/s/steps/0").json()["stats"]
    assert stats["tokens"]["before"] == sum(m["tokens"] for m in got.values())
    assert "estimated" not in stats


def test_it_resolves_a_tool_call_message_sent_by_id_alone(api: Api) -> None:
    first = step("s", 0, [QUESTION, OPENAI_CALL])
    second = step("s", 1, [{"id": "u1"}, {"id": "a1"}, OPENAI_RESULT])
    assert [r["status"] for r in results(api.ingest({"batch": [first, second]}))] == [201, 201]
    got = by_id(api.get("/sessions/s/steps/1").json()["before"])
    assert got["a1"]["tool_calls"] == [CALL]
    assert got["a1"]["content"] is None


def test_it_reads_a_message_in_the_otel_spelling_with_parts_and_no_content(api: Api) -> None:
    # An OTel GenAI message is {"role", "parts"}: its parts are its content, also when
    # its id was recorded before (it is not a message sent by id alone).
    first = {"id": "u1", "role": "user", "parts": [{"type": "text", "content": "Order A1?"}]}
    again = {"id": "u1", "role": "user", "parts": [{"type": "text", "content": "Order B2?"}]}
    batch = [step("s", 0, [SYSTEM, first]), step("s", 1, [{"id": "sys"}, again])]
    assert [r["status"] for r in results(api.ingest({"batch": batch}))] == [201, 201]
    computed(api, "s")
    got = by_id(api.get("/sessions/s/steps/1").json()["before"])
    assert got["u1"]["content"] == again["parts"]
    assert got["u1"]["tokens"] == TokenCounter().count("Order B2?")
    assert "parts" not in got["u1"]


def test_it_counts_an_image_by_rule_and_marks_the_step_estimated(api: Api) -> None:
    assert results(api.ingest({"batch": [step("s", 0, [SCREENSHOT])]}))[0]["status"] == 201
    computed(api, "s")
    got = api.get("/sessions/s/steps/0").json()
    assert got["before"][0]["content"] == SCREENSHOT["content"]
    text = TokenCounter().count("Here is the dashboard.")
    assert got["before"][0]["tokens"] == text + 1000
    assert got["stats"]["estimated"] is True
    assert got["stats"]["estimated_tokens"] == {"before": 1000, "after": 1000}


def test_it_keeps_the_calls_model_tools_output_and_usage(api: Api) -> None:
    session = {
        "id": "sess",
        "type": "session",
        "body": {
            "session_id": "s",
            "model": "gpt-4o",
            "encoding": "cl100k_base",
            "context_window": 128000,
        },
    }
    output = {"messages": [{"role": "assistant", "content": None, "tool_calls": [CALL]}]}
    usage = {"input_tokens": 120, "output_tokens": 30, "cache_read_tokens": 900,
             "cache_write_tokens": 0, "reasoning_tokens": 12}  # fmt: skip
    first = step("s", 0, [SYSTEM, QUESTION], tools=TOOLS, output=output, usage=usage)
    second = step(
        "s",
        1,
        [{"id": "sys"}, {"id": "u1"}],
        model="gpt-4o-mini",
        tools=TOOLS,
        context_window=1000,
        usage={"input_tokens": 40},
        before_tokens=55,
    )
    assert [r["status"] for r in results(api.ingest({"batch": [session, first, second]}))] == [
        201,
        201,
        201,
    ]
    computed(api, "s")
    got = api.get("/sessions/s/steps/0").json()
    assert got["model"] == "gpt-4o"  # the session's
    assert got["tools"] == TOOLS
    assert got["output"] == output
    assert got["usage"] == usage
    assert got["reported"]["before_tokens"] == 1020  # input + cache reads + cache writes
    assert got["context_window"] == 128000

    tools_tokens = TokenCounter().count(json.dumps(TOOLS, ensure_ascii=False))
    assert got["stats"]["partitions"]["tools"] == {"before": tools_tokens, "after": tools_tokens}
    messages = sum(m["tokens"] for m in got["before"])
    assert got["stats"]["tokens"]["before"] == messages + tools_tokens
    # With provider usage, occupancy is the provider's count against the window.
    assert got["stats"]["unseen_tokens"] == 1020 - (messages + tools_tokens)
    assert got["stats"]["occupancy"]["before"] == 1020 / 128000
    assert "token_estimate_off" not in got["stats"]["flags"]

    later = api.get("/sessions/s/steps/1").json()
    assert later["model"] == "gpt-4o-mini"
    assert later["reported"]["before_tokens"] == 55  # the agent's own count wins
    # Occupancy takes the provider's count (40 input tokens) against the step's window.
    assert later["stats"]["occupancy"]["before"] == 40 / 1000
    assert api.get("/sessions/s").json()["context_window"] == 128000
    # Definitions resent with every call are stored once.
    assert Blob.objects.filter(parts=TOOLS).count() == 1


def test_it_names_the_field_of_bad_v1_1_values(api: Api) -> None:
    batch = [
        step("s", 0, [QUESTION], usage={"input_tokens": -1}),
        step("s", 1, [QUESTION], tools={"name": "ls"}),
        step("s", 2, [QUESTION], output={"text": "hi"}),
        step("s", 3, [QUESTION], context_window=0),
        step("s", 4, [{"id": "x", "role": "user", "content": 7}]),
        step("s", 5, [{"id": "x", "role": "an-unknown-role-" * 3, "content": "hi"}]),
    ]
    got = results(api.ingest({"batch": batch}))
    assert [r["status"] for r in got] == [400, 400, 400, 400, 400, 400]
    assert got[0]["error"].startswith("body.usage.input_tokens:")
    assert got[1]["error"].startswith("body.tools:")
    assert got[2]["error"].startswith("body.output.messages:")
    assert got[3]["error"].startswith("body.context_window:")
    assert got[4]["error"].startswith("body.obs.messages[0].content:")
    assert got[5]["error"] == "body.obs.messages[0].role: must be at most 32 characters"


def test_it_ends_a_session_with_status_unknown(api: Api) -> None:
    end = {"id": "end", "type": "session_end", "body": {"session_id": "s", "status": "unknown"}}
    batch = [step("s", 0, [QUESTION]), end]
    assert [r["status"] for r in results(api.ingest({"batch": batch}))] == [201, 201]
    assert api.get("/sessions/s").json()["status"] == "unknown"
    assert api.get("/sessions", status="unknown").json()["sessions"][0]["session_id"] == "s"
