"""Spans as current instrumentations write them, sent to POST /v1/traces in the OTLP
JSON form and read back through the API as a user sees the steps.

Each span below has the attributes and events the named instrumentation sets (its
source is named in each test), values and all."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from contextview.projects.services import apikey_create, project_get_or_create

MS = 1_000_000
T0 = 1_800_000_000 * 10**9
TRACE = "ab" * 16


@pytest.fixture
def key(db: None) -> str:
    project, _ = project_get_or_create(slug="instrumentations")
    return apikey_create(project=project, name="instrumentations").secret


def value(v: Any) -> dict[str, Any]:
    """An OTLP JSON AnyValue; dicts and lists become structured values."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": attrs(v)}}
    return {"stringValue": v}


def attrs(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": value(v)} for k, v in values.items()]


def span(
    attributes: dict[str, Any],
    *,
    n: int = 1,
    parent: int | None = None,
    events: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    name: str = "chat",
) -> dict[str, Any]:
    out = {
        "traceId": TRACE,
        "spanId": f"{n:016x}",
        "name": name,
        "startTimeUnixNano": str(T0 + n * MS),
        "endTimeUnixNano": str(T0 + n * MS + 1),
        "attributes": attrs(attributes),
        "events": [{"name": e, "attributes": attrs(a)} for e, a in events],
    }
    if parent is not None:
        out["parentSpanId"] = f"{parent:016x}"
    return out


def send(key: str, *spans: dict[str, Any], service: str = "agent-svc") -> None:
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": attrs({"service.name": service})},
                "scopeSpans": [{"spans": list(spans)}],
            }
        ]
    }
    response = Client().post(
        "/v1/traces",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 200, response.content
    assert response.json() == {}, response.json()


def step(key: str, session: str, index: int = 0) -> dict[str, Any]:
    response = Client().get(
        f"/api/v1/sessions/{session}/steps/{index}", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 200, response.content
    return response.json()


def session(key: str, session_id: str) -> dict[str, Any]:
    response = Client().get(f"/api/v1/sessions/{session_id}", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 200, response.content
    return response.json()


def contents(got: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in got["before"]]


def test_it_reads_pydantic_ai_version_2_and_3_parts(key: str) -> None:
    """pydantic/pydantic-ai, pydantic_ai_slim/pydantic_ai/_otel_messages.py and
    messages.py: ``thinking`` parts, ``tool_call_response`` with ``result``, media
    parts ``image-url`` and ``binary``; usage details in ``gen_ai.usage.details.*``."""
    messages = [
        {"role": "system", "parts": [{"type": "text", "content": "You debug orders."}]},
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "Why does SO20260101007 time out?"},
                {"type": "image-url", "url": "https://example.com/graph.png"},
                {"type": "binary", "media_type": "application/pdf", "content": "JVBERi0="},
            ],
        },
        {
            "role": "assistant",
            "parts": [
                {"type": "thinking", "content": "Check the log."},
                {"type": "tool_call", "id": "c1", "name": "read_log", "arguments": {"n": 5}},
            ],
            "finish_reason": "tool_call",
        },
        {
            "role": "user",
            "parts": [
                {"type": "tool_call_response", "id": "c1", "name": "read_log", "result": "504"}
            ],
        },
    ]
    send(
        key,
        span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "anthropic",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.input.messages": json.dumps(messages),
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [{"type": "text", "content": "A 504."}],
                            "finish_reason": "stop",
                        }
                    ]
                ),
                "gen_ai.usage.input_tokens": 1500,
                "gen_ai.usage.output_tokens": 20,
                "gen_ai.usage.details.cache_read_tokens": 1000,
                "gen_ai.usage.details.cache_write_tokens": 200,
                "gen_ai.conversation.id": "pyd-2",
            }
        ),
    )
    got = step(key, "pyd-2")
    assert contents(got) == [
        ("system", "You debug orders."),
        (
            "user",
            [
                {"type": "text", "text": "Why does SO20260101007 time out?"},
                {"type": "image", "url": "https://example.com/graph.png"},
                {"type": "file", "media_type": "application/pdf", "data": "JVBERi0="},
            ],
        ),
        (
            "assistant",
            [
                {"type": "thinking", "text": "Check the log."},
                {"type": "tool_call", "id": "c1", "name": "read_log", "arguments": {"n": 5}},
            ],
        ),
        ("user", [{"type": "tool_result", "tool_call_id": "c1", "content": "504"}]),
    ]
    # Pydantic AI's input count includes the cached tokens.
    assert got["usage"] == {
        "input_tokens": 300,
        "output_tokens": 20,
        "cache_read_tokens": 1000,
        "cache_write_tokens": 200,
    }
    assert got["output"]["messages"][0]["content"] == "A 504."


def test_it_reads_pydantic_ai_version_1_events_attribute_with_its_reply(key: str) -> None:
    """pydantic/pydantic-ai, pydantic_ai_slim/pydantic_ai/models/instrumented.py
    (``_emit_events`` in event_mode 'attributes') and messages.py (``otel_event``):
    parts spelled with ``kind``, tool calls in OpenAI's shape, the reply as a
    ``gen_ai.choice`` item; older releases leave ``event.name`` out."""
    events = [
        {"content": "You debug orders.", "role": "system", "event.name": "gen_ai.system.message"},
        {
            "content": [
                {"kind": "text", "content": "Why does SO20260101007 time out?"},
                {"kind": "image-url", "url": "https://example.com/graph.png"},
            ],
            "role": "user",
            "gen_ai.message.index": 0,
            "event.name": "gen_ai.user.message",
        },
        {
            "role": "assistant",
            "content": [{"kind": "thinking", "text": "Check the log."}],
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_log", "arguments": {"n": 5}},
                }
            ],
            "gen_ai.message.index": 1,
            "event.name": "gen_ai.assistant.message",
        },
        # a release whose items carry no event.name: the role says which
        {"content": "504", "role": "tool", "id": "c1", "name": "read_log"},
        {
            "index": 0,
            "message": {"role": "assistant", "content": "A 504 from inventory."},
            "event.name": "gen_ai.choice",
        },
    ]
    send(
        key,
        span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o",
                "events": json.dumps(events),
                "gen_ai.usage.input_tokens": 90,
                "gen_ai.usage.output_tokens": 9,
                "session.id": "pyd-1",
            }
        ),
    )
    got = step(key, "pyd-1")
    assert contents(got) == [
        ("system", "You debug orders."),
        (
            "user",
            [
                {"type": "text", "text": "Why does SO20260101007 time out?"},
                {"type": "image", "url": "https://example.com/graph.png"},
            ],
        ),
        (
            "assistant",
            [
                {"type": "thinking", "text": "Check the log."},
                {"type": "tool_call", "id": "c1", "name": "read_log", "arguments": {"n": 5}},
            ],
        ),
        ("tool", [{"type": "tool_result", "tool_call_id": "c1", "content": "504"}]),
    ]
    assert got["output"]["messages"] == [{"role": "assistant", "content": "A 504 from inventory."}]


STRANDS_CONTEXT = [
    ("gen_ai.user.message", [{"text": "Why does SO20260101007 time out?"}]),
    (
        "gen_ai.assistant.message",
        [
            {"reasoningContent": {"reasoningText": {"text": "Check the log.", "signature": "s"}}},
            {"text": "Reading the log."},
            {"toolUse": {"toolUseId": "t1", "name": "read_log", "input": {"n": 5}}},
        ],
    ),
    (
        "gen_ai.tool.message",
        [{"toolResult": {"toolUseId": "t1", "status": "success", "content": [{"text": "504"}]}}],
    ),
]
STRANDS_EXPECTED = [
    ("user", "Why does SO20260101007 time out?"),
    (
        "assistant",
        [
            {"type": "thinking", "text": "Check the log."},
            {"type": "text", "text": "Reading the log."},
            {"type": "tool_call", "id": "t1", "name": "read_log", "arguments": {"n": 5}},
        ],
    ),
    ("tool", [{"type": "tool_result", "tool_call_id": "t1", "content": "504"}]),
]


def test_it_reads_strands_agents_events_of_bedrock_blocks(key: str) -> None:
    """strands-agents/sdk-python, src/strands/telemetry/tracer.py: each message an
    event whose ``content`` is the JSON text of Bedrock content blocks, the reply a
    ``gen_ai.choice`` whose ``message`` is its blocks; Bedrock's input count leaves the
    cached tokens out; the agent's name is on the ``invoke_agent`` span around it."""
    agent = span(
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.system": "strands-agents",
            "gen_ai.agent.name": "order-debugger",
            "session.id": "strands-1",
        },
        n=1,
        name="invoke_agent order-debugger",
    )
    chat = span(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "strands-agents",
            "gen_ai.request.model": "us.anthropic.claude-sonnet-4-20250514-v1:0",
            "session.id": "strands-1",
            "gen_ai.usage.prompt_tokens": 40,
            "gen_ai.usage.input_tokens": 40,
            "gen_ai.usage.completion_tokens": 12,
            "gen_ai.usage.output_tokens": 12,
            "gen_ai.usage.total_tokens": 1352,
            "gen_ai.usage.cache_read_input_tokens": 1000,
            "gen_ai.usage.cache_write_input_tokens": 300,
        },
        n=2,
        parent=1,
        events=[
            *((name, {"content": json.dumps(blocks)}) for name, blocks in STRANDS_CONTEXT),
            (
                "gen_ai.choice",
                {"finish_reason": "end_turn", "message": json.dumps([{"text": "A 504."}])},
            ),
        ],
    )
    send(key, chat, agent)
    got = step(key, "strands-1")
    assert contents(got) == STRANDS_EXPECTED
    assert got["output"]["messages"] == [
        {"role": "assistant", "content": "A 504.", "finish_reason": "end_turn"}
    ]
    assert got["usage"] == {
        "input_tokens": 40,
        "output_tokens": 12,
        "cache_read_tokens": 1000,
        "cache_write_tokens": 300,
    }
    assert session(key, "strands-1")["agent"] == "order-debugger"


def test_it_reads_strands_agents_latest_conventions(key: str) -> None:
    """strands-agents/sdk-python, src/strands/telemetry/tracer.py with
    ``gen_ai_latest_experimental``: the messages in two details events, Bedrock's
    ``toolResult`` content and reasoning kept under their block names."""
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "Why?"}]},
        {
            "role": "assistant",
            "parts": [
                {
                    "type": "reasoningContent",
                    "content": {"reasoningText": {"text": "Check the log."}},
                },
                {"type": "tool_call", "name": "read_log", "id": "t1", "arguments": {"n": 5}},
            ],
        },
        {
            "role": "user",
            "parts": [{"type": "tool_call_response", "id": "t1", "response": [{"text": "504"}]}],
        },
    ]
    details = "gen_ai.client.inference.operation.details"
    output = [{"role": "assistant", "parts": [{"type": "text", "content": "A 504."}]}]
    send(
        key,
        span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "strands-agents",
                "gen_ai.request.model": "us.anthropic.claude-sonnet-4-20250514-v1:0",
                "session.id": "strands-2",
            },
            events=[
                (details, {"gen_ai.input.messages": json.dumps(messages)}),
                (details, {"gen_ai.output.messages": json.dumps(output)}),
            ],
        ),
    )
    got = step(key, "strands-2")
    assert contents(got) == [
        ("user", "Why?"),
        (
            "assistant",
            [
                {"type": "thinking", "text": "Check the log."},
                {"type": "tool_call", "id": "t1", "name": "read_log", "arguments": {"n": 5}},
            ],
        ),
        ("user", [{"type": "tool_result", "tool_call_id": "t1", "content": "504"}]),
    ]
    assert got["output"]["messages"][0]["content"] == "A 504."


def test_it_reads_openllmetrys_anthropic_blocks_once(key: str) -> None:
    """traceloop/openllmetry, packages/opentelemetry-instrumentation-anthropic/
    opentelemetry/instrumentation/anthropic/span_utils.py and __init__.py: a content
    list is the JSON text of Anthropic blocks, whose ``tool_use`` blocks are written
    again as ``tool_calls.{j}.*``; tools with an ``input_schema`` JSON text; thinking a
    completion of role ``thinking``; the input count includes the cached tokens."""
    p = "gen_ai.prompt"
    assistant = [
        {"type": "thinking", "thinking": "Check the log.", "signature": "s"},
        {"type": "tool_use", "id": "tu1", "name": "read_log", "input": {"n": 5}},
    ]
    result = [{"type": "tool_result", "tool_use_id": "tu1", "content": "504"}]
    send(
        key,
        span(
            {
                "gen_ai.system": "Anthropic",
                "llm.request.type": "completion",
                "gen_ai.request.model": "claude-sonnet-4-5",
                f"{p}.0.content": "You debug orders.",
                f"{p}.0.role": "system",
                f"{p}.1.content": "Why does SO20260101007 time out?",
                f"{p}.1.role": "user",
                f"{p}.2.content": json.dumps(assistant),
                f"{p}.2.role": "assistant",
                f"{p}.2.tool_calls.0.id": "tu1",
                f"{p}.2.tool_calls.0.name": "read_log",
                f"{p}.2.tool_calls.0.arguments": json.dumps({"n": 5}),
                f"{p}.3.content": json.dumps(result),
                f"{p}.3.role": "user",
                "llm.request.functions.0.name": "read_log",
                "llm.request.functions.0.description": "Read the log",
                "llm.request.functions.0.input_schema": json.dumps({"type": "object"}),
                "gen_ai.completion.0.finish_reason": "end_turn",
                "gen_ai.completion.0.role": "thinking",
                "gen_ai.completion.0.content": "It is the inventory.",
                "gen_ai.completion.1.role": "assistant",
                "gen_ai.completion.1.content": "A 504.",
                "gen_ai.usage.input_tokens": 1340,
                "gen_ai.usage.output_tokens": 12,
                "gen_ai.usage.cache_read_input_tokens": 1000,
                "gen_ai.usage.cache_creation_input_tokens": 300,
                "traceloop.association.properties.session_id": "tl-anthropic",
            }
        ),
    )
    got = step(key, "tl-anthropic")
    assert contents(got) == [
        ("system", "You debug orders."),
        ("user", "Why does SO20260101007 time out?"),
        (
            "assistant",
            [
                {"type": "thinking", "text": "Check the log."},
                {"type": "tool_call", "id": "tu1", "name": "read_log", "arguments": {"n": 5}},
            ],
        ),
        ("user", [{"type": "tool_result", "tool_call_id": "tu1", "content": "504"}]),
    ]
    assert got["tools"] == [
        {"name": "read_log", "description": "Read the log", "input_schema": {"type": "object"}}
    ]
    assert [m["content"] for m in got["output"]["messages"]] == [
        [{"type": "thinking", "text": "It is the inventory."}],
        "A 504.",
    ]
    assert got["usage"] == {
        "input_tokens": 40,
        "output_tokens": 12,
        "cache_read_tokens": 1000,
        "cache_write_tokens": 300,
    }


def test_it_reads_the_openai_agents_sdk_through_openinference(key: str) -> None:
    """Arize-ai/openinference, python/instrumentation/
    openinference-instrumentation-openai-agents/src/openinference/instrumentation/
    openai_agents/_processor.py: a Responses call's input from index 1 (0 is the
    instructions), text as ``message.contents.{j}.message_content.*``, each function
    call an assistant message, each output a tool message with its call id."""
    m = "llm.input_messages"
    send(
        key,
        span(
            {
                "openinference.span.kind": "LLM",
                "llm.system": "openai",
                "llm.model_name": "gpt-4.1-2025-04-14",
                f"{m}.0.message.role": "system",
                f"{m}.0.message.content": "You debug orders.",
                f"{m}.1.message.role": "user",
                f"{m}.1.message.contents.0.message_content.type": "text",
                f"{m}.1.message.contents.0.message_content.text": "Why?",
                f"{m}.2.message.role": "assistant",
                f"{m}.2.message.tool_calls.0.tool_call.id": "call_1",
                f"{m}.2.message.tool_calls.0.tool_call.function.name": "read_log",
                f"{m}.2.message.tool_calls.0.tool_call.function.arguments": '{"n": 5}',
                f"{m}.3.message.role": "tool",
                f"{m}.3.message.tool_call_id": "call_1",
                f"{m}.3.message.content": "504",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.contents.0.message_content.type": "text",
                "llm.output_messages.0.message.contents.0.message_content.text": "A 504.",
                "llm.tools.0.tool.json_schema": json.dumps(
                    {"type": "function", "function": {"name": "read_log"}}
                ),
                "llm.token_count.prompt": 1200,
                "llm.token_count.completion": 9,
                "llm.token_count.prompt_details.cache_read": 1024,
                "session.id": "oai-agents",
            }
        ),
    )
    got = step(key, "oai-agents")
    assert contents(got) == [
        ("system", "You debug orders."),
        ("user", "Why?"),
        (
            "assistant",
            [{"type": "tool_call", "id": "call_1", "name": "read_log", "arguments": '{"n": 5}'}],
        ),
        ("tool", [{"type": "tool_result", "tool_call_id": "call_1", "content": "504"}]),
    ]
    assert got["output"]["messages"][0]["content"] == "A 504."
    assert got["tools"] == [{"type": "function", "function": {"name": "read_log"}}]
    assert got["usage"] == {"input_tokens": 176, "output_tokens": 9, "cache_read_tokens": 1024}


def test_it_reads_anthropic_blocks_as_openinferences_litellm_instrumentation_writes_them(
    key: str,
) -> None:
    """Arize-ai/openinference, python/instrumentation/
    openinference-instrumentation-litellm/src/openinference/instrumentation/litellm/
    _anthropic_messages_attributes.py: each block of a message is a
    ``message.contents.{j}`` item, a thinking block typed ``reasoning`` (its signature
    beside it), a tool_use block typed ``tool_use`` with its call's fields and written
    again under ``message.tool_calls``; a tool_result block is the user message's
    ``message.content`` with its call's id as ``message.tool_call_id``."""
    m = "llm.input_messages"
    c = f"{m}.2.message.contents"
    send(
        key,
        span(
            {
                "openinference.span.kind": "LLM",
                "llm.model_name": "claude-sonnet-4-5",
                "session.id": "litellm-anthropic",
                f"{m}.0.message.role": "system",
                f"{m}.0.message.content": "You debug orders.",
                f"{m}.1.message.role": "user",
                f"{m}.1.message.content": "Why does SO20260101007 time out?",
                f"{m}.2.message.role": "assistant",
                f"{c}.0.message_content.type": "reasoning",
                f"{c}.0.message_content.text": "The log says which call hung.",
                f"{c}.0.message_content.signature": "sig-1",
                f"{c}.1.tool_call.id": "toolu_1",
                f"{c}.1.tool_call.function.name": "read_log",
                f"{c}.1.tool_call.function.arguments": '{"n": 5}',
                f"{c}.1.message_content.type": "tool_use",
                f"{m}.2.message.tool_calls.0.tool_call.id": "toolu_1",
                f"{m}.2.message.tool_calls.0.tool_call.function.name": "read_log",
                f"{m}.2.message.tool_calls.0.tool_call.function.arguments": '{"n": 5}',
                f"{m}.3.message.role": "user",
                f"{m}.3.message.tool_call_id": "toolu_1",
                f"{m}.3.message.content": "504 from inventory",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.contents.0.message_content.type": "reasoning",
                "llm.output_messages.0.message.contents.0.message_content.data": "redacted",
                "llm.output_messages.0.message.contents.1.message_content.type": "text",
                "llm.output_messages.0.message.contents.1.message_content.text": "A 504.",
            }
        ),
    )
    got = step(key, "litellm-anthropic")
    assert contents(got) == [
        ("system", "You debug orders."),
        ("user", "Why does SO20260101007 time out?"),
        (
            "assistant",
            [
                {"type": "thinking", "text": "The log says which call hung."},
                {"type": "tool_call", "id": "toolu_1", "name": "read_log", "arguments": '{"n": 5}'},
            ],
        ),
        ("user", [{"type": "tool_result", "tool_call_id": "toolu_1",
                   "content": "504 from inventory"}]),
    ]  # fmt: skip
    assert got["output"]["messages"][0]["content"] == [
        {"type": "thinking", "text": ""},
        {"type": "text", "text": "A 504."},
    ]


ADK_REQUEST = {
    "model": "gemini-2.5-flash",
    "config": {
        "system_instruction": "You debug orders.",
        "tools": [
            {
                "function_declarations": [
                    {"name": "read_log", "parameters": {"type": "OBJECT"}},
                ]
            }
        ],
    },
    "contents": [
        {"role": "user", "parts": [{"text": "Why does SO20260101007 time out?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Check the log.", "thought": True},
                {"function_call": {"id": "f1", "name": "read_log", "args": {"n": 5}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "function_response": {
                        "id": "f1",
                        "name": "read_log",
                        "response": {"result": "504"},
                    }
                }
            ],
        },
    ],
}
ADK_RESPONSE = {
    "content": {"role": "model", "parts": [{"text": "A 504 from inventory."}]},
    "finish_reason": "STOP",
    "usage_metadata": {"prompt_token_count": 1200, "candidates_token_count": 9},
}


def test_it_reads_google_adks_call_llm_span_once(key: str) -> None:
    """google/adk-python, src/google/adk/telemetry/tracing.py (``trace_call_llm``,
    ``_build_llm_request_for_trace``, ``use_generate_content_span``): the call_llm
    span names no operation and carries the request and response as JSON; the
    ``generate_content`` span inside it (messages sent as logs) is the same call."""
    agent = span(
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "order_agent",
            "gen_ai.conversation.id": "adk-1",
        },
        n=1,
        name="invoke_agent order_agent",
    )
    call = span(
        {
            "gen_ai.system": "gcp.vertex.agent",
            "gen_ai.request.model": "gemini-2.5-flash",
            "gcp.vertex.agent.invocation_id": "e-1",
            "gcp.vertex.agent.session_id": "adk-1",
            "gcp.vertex.agent.event_id": "ev-1",
            "gcp.vertex.agent.llm_request": json.dumps(ADK_REQUEST),
            "gcp.vertex.agent.llm_response": json.dumps(ADK_RESPONSE),
            "gen_ai.usage.input_tokens": 1200,
            "gen_ai.usage.output_tokens": 9,
            "gen_ai.response.finish_reasons": ["stop"],
        },
        n=2,
        parent=1,
        name="call_llm",
    )
    inner = span(
        {
            "gen_ai.system": "gemini",
            "gen_ai.operation.name": "generate_content",
            "gen_ai.request.model": "gemini-2.5-flash",
            "gen_ai.agent.name": "order_agent",
            "gen_ai.conversation.id": "adk-1",
            "gcp.vertex.agent.invocation_id": "e-1",
            "gcp.vertex.agent.event_id": "ev-1",
            "gen_ai.usage.input_tokens": 1200,
        },
        n=3,
        parent=2,
        name="generate_content gemini-2.5-flash",
    )
    send(key, inner, call, agent)
    assert session(key, "adk-1")["steps"] == 1
    assert session(key, "adk-1")["agent"] == "order_agent"
    got = step(key, "adk-1")
    assert contents(got) == [
        ("system", "You debug orders."),
        ("user", "Why does SO20260101007 time out?"),
        (
            "assistant",
            [
                {"type": "thinking", "text": "Check the log."},
                {"type": "tool_call", "id": "f1", "name": "read_log", "arguments": {"n": 5}},
            ],
        ),
        ("user", [{"type": "tool_result", "tool_call_id": "f1", "content": {"result": "504"}}]),
    ]
    assert got["model"] == "gemini-2.5-flash"
    assert got["tools"] == [{"name": "read_log", "parameters": {"type": "OBJECT"}}]
    assert got["output"]["messages"] == [
        {"role": "assistant", "content": "A 504 from inventory.", "finish_reason": "STOP"}
    ]
    assert got["usage"] == {"input_tokens": 1200, "output_tokens": 9}


def test_it_reads_google_adks_cached_tokens_from_its_response(key: str) -> None:
    """google/adk-python, src/google/adk/telemetry/tracing.py (``trace_call_llm``): the
    span's ``gen_ai.usage.input_tokens`` is Gemini's ``prompt_token_count``, which
    includes the cached tokens; how many were cached is only in the response's
    ``usage_metadata`` (as are all the counts, in versions that set no usage
    attributes)."""
    usage = {
        "prompt_token_count": 1200,
        "candidates_token_count": 9,
        "cached_content_token_count": 1000,
        "total_token_count": 1209,
    }
    response = json.dumps({**ADK_RESPONSE, "usage_metadata": usage})
    common = {
        "gen_ai.system": "gcp.vertex.agent",
        "gen_ai.request.model": "gemini-2.5-flash",
        "gcp.vertex.agent.llm_request": json.dumps(ADK_REQUEST),
        "gcp.vertex.agent.llm_response": response,
    }
    send(
        key,
        span(
            {
                **common,
                "gcp.vertex.agent.session_id": "adk-cached",
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.output_tokens": 9,
            },
            n=1,
            name="call_llm",
        ),
        span({**common, "gcp.vertex.agent.session_id": "adk-older"}, n=2, name="call_llm"),
    )
    expected = {"input_tokens": 200, "output_tokens": 9, "cache_read_tokens": 1000}
    assert step(key, "adk-cached")["usage"] == expected
    assert step(key, "adk-older")["usage"] == expected


def test_it_reads_the_older_events_content_as_a_json_list_of_parts(key: str) -> None:
    """An older GenAI event whose ``content`` is the JSON text of a list of typed
    parts (as OpenLLMetry writes content lists); the ``gen_ai.choice`` message's
    ``tool_calls`` carry ``function.name`` and ``function.arguments``."""
    send(
        key,
        span(
            {"gen_ai.operation.name": "chat", "session.id": "events-list"},
            events=[
                (
                    "gen_ai.user.message",
                    {"content": json.dumps([{"type": "text", "text": "Why?"}])},
                ),
                (
                    "gen_ai.choice",
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": json.dumps(
                            {
                                "role": "assistant",
                                "tool_calls": [
                                    {
                                        "id": "c9",
                                        "type": "function",
                                        "function": {"name": "grep", "arguments": '{"q": 1}'},
                                    }
                                ],
                            }
                        ),
                    },
                ),
            ],
        ),
    )
    got = step(key, "events-list")
    assert contents(got) == [("user", "Why?")]
    assert got["output"]["messages"] == [
        {
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "c9", "name": "grep", "arguments": '{"q": 1}'}],
            "finish_reason": "tool_calls",
        }
    ]


def test_a_tools_json_output_that_lists_typed_objects_stays_the_text_it_is(key: str) -> None:
    """A tool result (an older GenAI event) whose text is a JSON list of objects with a
    ``type`` of their own is the tool's output, not message parts."""
    found = json.dumps([{"type": "issue", "id": 7, "title": "SO20260101007 times out"}])
    send(
        key,
        span(
            {"gen_ai.operation.name": "chat", "session.id": "tool-json"},
            events=[
                ("gen_ai.user.message", {"content": "Which issues mention the order?"}),
                ("gen_ai.tool.message", {"id": "c1", "content": found}),
            ],
        ),
    )
    got = step(key, "tool-json")
    assert got["before"][1]["role"] == "tool"
    assert got["before"][1]["content"] == [
        {"type": "tool_result", "tool_call_id": "c1", "content": found}
    ]


def test_it_reads_tools_from_openinferences_invocation_parameters(key: str) -> None:
    """Arize-ai/openinference, python/instrumentation/openinference-instrumentation-
    langchain/src/openinference/instrumentation/langchain/_tracer.py
    (``_invocation_parameters``): versions before ``llm.tools.*`` write the call's
    tools only inside ``llm.invocation_parameters``, the JSON of LangChain's
    ``invocation_params`` (``tools`` once bound, ``functions`` in the older API)."""
    tool = {
        "type": "function",
        "function": {
            "name": "read_log",
            "description": "Read the log",
            "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
        },
    }
    function = tool["function"]
    base = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "Why does SO20260101007 time out?",
    }
    send(
        key,
        span(
            {
                **base,
                "session.id": "oi-tools",
                "llm.invocation_parameters": json.dumps(
                    {"model_name": "gpt-4o", "temperature": 0.0, "tools": [tool]}
                ),
            },
            n=1,
            name="ChatOpenAI",
        ),
        span(
            {
                **base,
                "session.id": "oi-functions",
                "llm.invocation_parameters": json.dumps(
                    {"model_name": "gpt-4o", "functions": [function]}
                ),
            },
            n=2,
            name="ChatOpenAI",
        ),
        span(
            {
                **base,
                "session.id": "oi-no-tools",
                "llm.invocation_parameters": json.dumps({"model_name": "gpt-4o"}),
            },
            n=3,
            name="ChatOpenAI",
        ),
    )
    assert step(key, "oi-tools")["tools"] == [tool]
    assert step(key, "oi-functions")["tools"] == [function]
    assert step(key, "oi-no-tools")["tools"] is None


def test_it_reads_system_instructions_written_as_messages(key: str) -> None:
    """Some agent frameworks write ``gen_ai.system_instructions`` as a list of system
    messages rather than of parts: their contents are the instructions."""
    instructions = [{"role": "system", "content": "You triage orders; answer in a table."}]
    send(
        key,
        span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.conversation.id": "sys-messages",
                "gen_ai.system_instructions": json.dumps(instructions),
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "Order A1?"}]}]
                ),
            }
        ),
    )
    got = step(key, "sys-messages")
    assert contents(got) == [
        ("system", "You triage orders; answer in a table."),
        ("user", "Order A1?"),
    ]


def test_it_reads_pydantic_ais_system_prompt_once(key: str) -> None:
    """pydantic/pydantic-ai, pydantic_ai_slim/pydantic_ai/models/instrumented.py
    (``InstrumentationSettings.handle_messages``, versions 2 and 3): the agent's
    ``instructions`` and then the text of each ``SystemPromptPart`` go to
    ``gen_ai.system_instructions``, and ``messages_to_otel_messages`` also keeps those
    parts in ``gen_ai.input.messages`` as a ``system`` message (messages.py,
    ``SystemPromptPart.otel_message_parts``): the system prompt is one message."""

    def text(role: str, content: str) -> dict[str, Any]:
        return {"role": role, "parts": [{"type": "text", "content": content}]}

    def call(n: int, session: str, instructions: list[str], history: list[Any]) -> dict[str, Any]:
        return span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.input.messages": json.dumps(history),
                "gen_ai.output.messages": json.dumps([text("assistant", f"Reply {n}.")]),
                "gen_ai.system_instructions": json.dumps(
                    [{"type": "text", "content": t} for t in instructions]
                ),
                "gen_ai.conversation.id": session,
            },
            n=n,
            name="chat gpt-4o",
        )

    first = [text("system", "You debug orders."), text("user", "Why does A1 time out?")]
    second = [*first, text("assistant", "Reply 1."), text("user", "And A2?")]
    both = ["Answer in a table.", "You debug orders."]
    send(
        key,
        call(1, "pyd-system", ["You debug orders."], first),
        call(2, "pyd-system", ["You debug orders."], second),
        call(3, "pyd-both", both, first),
        call(4, "pyd-both", both, second),
    )
    assert contents(step(key, "pyd-system", 0)) == [
        ("system", "You debug orders."),
        ("user", "Why does A1 time out?"),
    ]
    assert contents(step(key, "pyd-system", 1)) == [
        ("system", "You debug orders."),
        ("user", "Why does A1 time out?"),
        ("assistant", "Reply 1."),
        ("user", "And A2?"),
    ]
    # The agent's instructions are only in gen_ai.system_instructions: kept, first.
    assert contents(step(key, "pyd-both", 1)) == [
        ("system", "Answer in a table."),
        ("system", "You debug orders."),
        ("user", "Why does A1 time out?"),
        ("assistant", "Reply 1."),
        ("user", "And A2?"),
    ]


def litellm_span(call_type: str, n: int, **more: Any) -> dict[str, Any]:
    """A span of LiteLLM's OpenTelemetry callback for one call: BerriAI/litellm,
    litellm/integrations/opentelemetry.py (``OpenTelemetry.set_attributes``), which
    names the call by LiteLLM's call type (litellm/types/utils.py, ``CallTypes``) in
    ``llm.request.type`` and, but for ``completion`` (``chat``), in
    ``gen_ai.operation.name``; its messages in the GenAI conventions' spelling, its
    tool calls and results as OpenAI's ``tool_calls`` and ``tool_call_id`` beside the
    parts."""
    return span(
        {
            "metadata.user_api_key_alias": "support-bot",
            "gen_ai.request.model": "gpt-4o",
            "llm.request.type": call_type,
            "gen_ai.system": "openai",
            "llm.is_streaming": "False",
            "gen_ai.response.id": "chatcmpl-1",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.usage.total_tokens": 130,
            "gen_ai.usage.output_tokens": 10,
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.operation.name": "chat" if call_type == "completion" else call_type,
            **more,
        },
        n=n,
        name="litellm_request",
    )


def test_it_reads_litellms_async_calls_and_leaves_its_other_calls_out(key: str) -> None:
    """LiteLLM's proxy and async SDK call ``acompletion``: its spans are model calls as
    ``completion``'s are; an embedding's span is none."""
    messages = [
        {"role": "system", "parts": [{"type": "text", "content": "You debug orders."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Why does A1 time out?"}]},
    ]
    reply = [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "A 504."}],
            "finish_reason": "stop",
        }
    ]
    send(
        key,
        litellm_span(
            "acompletion",
            1,
            **{
                "gen_ai.input.messages": json.dumps(messages),
                "gen_ai.output.messages": json.dumps(reply),
                "gen_ai.response.finish_reasons": '["stop"]',
            },
        ),
        litellm_span("aembedding", 2),
    )
    got = step(key, TRACE)
    assert contents(got) == [("system", "You debug orders."), ("user", "Why does A1 time out?")]
    assert got["model"] == "gpt-4o-2024-08-06"
    assert got["usage"] == {"input_tokens": 120, "output_tokens": 10}
    assert got["output"]["messages"][0]["content"] == "A 504."
    assert session(key, TRACE)["steps"] == 1


def test_it_reads_litellms_tool_calls_and_results_beside_the_parts(key: str) -> None:
    """BerriAI/litellm, litellm/integrations/opentelemetry.py
    (``_transform_messages_to_otel_semantic_conventions``): a message keeps OpenAI's
    ``tool_calls`` and ``tool_call_id`` beside its ``parts`` (none for a reply that is
    only calls), in the context and in the reply alike."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_log", "arguments": '{"n": 5}'},
    }
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "Why does A1 time out?"}]},
        {"role": "assistant", "parts": [], "tool_calls": [call]},
        {"role": "tool", "parts": [{"type": "text", "content": "504"}], "tool_call_id": "call_1"},
    ]
    second = {**call, "id": "call_2", "function": {"name": "read_log", "arguments": '{"n": 50}'}}
    reply = [
        {"role": "assistant", "parts": [], "tool_calls": [second], "finish_reason": "tool_calls"}
    ]
    send(
        key,
        litellm_span(
            "acompletion",
            1,
            **{
                "gen_ai.input.messages": json.dumps(messages),
                "gen_ai.output.messages": json.dumps(reply),
            },
        ),
    )
    got = step(key, TRACE)
    assert contents(got) == [
        ("user", "Why does A1 time out?"),
        (
            "assistant",
            [{"type": "tool_call", "id": "call_1", "name": "read_log", "arguments": '{"n": 5}'}],
        ),
        ("tool", [{"type": "tool_result", "tool_call_id": "call_1", "content": "504"}]),
    ]
    assert [(m["content"], m.get("tool_calls")) for m in got["output"]["messages"]] == [
        (
            [{"type": "tool_call", "id": "call_2", "name": "read_log", "arguments": '{"n": 50}'}],
            None,
        )
    ]


def test_it_reads_system_instructions_sent_as_plain_text(key: str) -> None:
    """BerriAI/litellm, litellm/integrations/opentelemetry.py
    (``OpenTelemetry.set_attributes``): a system prompt given as one text (the
    ``system`` of an Anthropic Messages call, the ``instructions`` of a Responses call)
    is written to ``gen_ai.system_instructions`` as that text, not as JSON."""
    messages = [{"role": "user", "parts": [{"type": "text", "content": "Why does A1 time out?"}]}]
    send(
        key,
        litellm_span(
            "anthropic_messages",
            1,
            **{
                "gen_ai.system_instructions": "You debug orders.",
                "gen_ai.input.messages": json.dumps(messages),
            },
        ),
        litellm_span(
            "aresponses",
            2,
            **{
                "gen_ai.system_instructions": "[Orders] Answer in a table.",
                "gen_ai.input.messages": json.dumps(messages),
                "gen_ai.conversation.id": "litellm-responses",
            },
        ),
    )
    assert contents(step(key, TRACE)) == [
        ("system", "You debug orders."),
        ("user", "Why does A1 time out?"),
    ]
    assert contents(step(key, "litellm-responses")) == [
        ("system", "[Orders] Answer in a table."),
        ("user", "Why does A1 time out?"),
    ]


def test_it_reads_pydantic_ais_tools_from_its_request_parameters(key: str) -> None:
    """pydantic/pydantic-ai, pydantic_ai_slim/pydantic_ai/models/instrumented.py
    (``InstrumentedModel._instrument``): releases before ``gen_ai.tool.definitions``
    write the call's tools only in ``model_request_parameters``, the JSON of its
    ``ModelRequestParameters`` (models/__init__.py): ``function_tools`` and
    ``result_tools``, later ``output_tools``, each a ``ToolDefinition``."""
    read_log = {
        "name": "read_log",
        "description": "Read the log",
        "parameters_json_schema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "outer_typed_dict_key": None,
        "strict": None,
    }
    final = {
        "name": "final_result",
        "description": "The final response",
        "parameters_json_schema": {"type": "object"},
        "outer_typed_dict_key": None,
        "strict": None,
        "kind": "output",
    }
    events = [{"content": "Why?", "role": "user", "event.name": "gen_ai.user.message"}]
    base = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o",
        "events": json.dumps(events),
    }
    send(
        key,
        span(
            {
                **base,
                "model_request_parameters": json.dumps(
                    {"function_tools": [read_log], "allow_text_result": True, "result_tools": []}
                ),
                "session.id": "pyd-tools-old",
            },
            n=1,
        ),
        span(
            {
                **base,
                "model_request_parameters": json.dumps(
                    {
                        "function_tools": [read_log],
                        "builtin_tools": [],
                        "output_mode": "tool",
                        "output_object": None,
                        "output_tools": [final],
                        "allow_text_output": False,
                    }
                ),
                "session.id": "pyd-tools",
            },
            n=2,
        ),
    )
    tool = {
        "type": "function",
        "name": "read_log",
        "description": "Read the log",
        "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
    }
    assert step(key, "pyd-tools-old")["tools"] == [tool]
    assert step(key, "pyd-tools")["tools"] == [
        tool,
        {
            "type": "function",
            "name": "final_result",
            "description": "The final response",
            "parameters": {"type": "object"},
        },
    ]


def _oi_llm(n: int, model: str, *, parent: int | None = None, **more: Any) -> dict[str, Any]:
    """An OpenInference LLM span of a two-message context (as both its LangChain and
    its OpenAI instrumentors write one: python/instrumentation/openinference-
    instrumentation-langchain/.../_tracer.py, ...-openai/.../_request_attributes_extractor.py)."""
    return span(
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": model,
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "You debug orders.",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "Why does SO20260101007 time out?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "A 504 from inventory.",
            "llm.token_count.prompt": 30,
            "llm.token_count.completion": 6,
            **more,
        },
        n=n,
        parent=parent,
        name="ChatOpenAI" if parent is None else "ChatCompletion",
    )


def test_a_call_traced_by_a_framework_and_its_model_client_is_one_step(key: str) -> None:
    """Phoenix's ``register(auto_instrument=True)`` turns on every OpenInference
    instrumentor installed: a LangChain chat model's call is a LangChain LLM span
    (with the session from its metadata) and, inside it, the OpenAI client's."""
    chain = span({"openinference.span.kind": "CHAIN", "session.id": "lc-1"}, n=1, name="Agent")
    outer = _oi_llm(2, "gpt-4o", parent=1, **{"session.id": "lc-1"})
    inner = _oi_llm(3, "gpt-4o-2024-08-06", parent=2)
    send(key, inner, outer, chain)
    assert session(key, "lc-1")["steps"] == 1
    got = step(key, "lc-1")
    assert contents(got) == [
        ("system", "You debug orders."),
        ("user", "Why does SO20260101007 time out?"),
    ]
    assert got["model"] == "gpt-4o"
    # The client's span made no session of its own (its trace id would name it).
    response = Client().get(f"/api/v1/sessions/{TRACE}", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 404


def test_of_two_spans_of_one_call_the_one_holding_the_context_is_the_step(key: str) -> None:
    wrapper = span(
        {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o", "session.id": "wrap-1"},
        n=1,
        name="llm",
    )
    inner = _oi_llm(2, "gpt-4o-2024-08-06", parent=1, **{"session.id": "wrap-1"})
    send(key, wrapper, inner)
    assert session(key, "wrap-1")["steps"] == 1
    got = step(key, "wrap-1")
    assert contents(got)[1] == ("user", "Why does SO20260101007 time out?")
    assert got["model"] == "gpt-4o-2024-08-06"


@pytest.mark.parametrize("order", ["client first", "framework first"])
def test_a_call_traced_twice_and_sent_in_two_exports_is_one_step(key: str, order: str) -> None:
    """Phoenix's ``register()`` exports each span as it ends (a SimpleSpanProcessor):
    the client's span, which ends first, comes alone, then the framework's."""
    outer = _oi_llm(2, "gpt-4o", parent=1, **{"session.id": "lc-2"})
    inner = _oi_llm(3, "gpt-4o", parent=2, **{"session.id": "lc-2"})
    first, second = (inner, outer) if order == "client first" else (outer, inner)
    send(key, first)
    send(key, second)
    send(key, first)  # and one sent again
    assert session(key, "lc-2")["steps"] == 1
    assert contents(step(key, "lc-2"))[1] == ("user", "Why does SO20260101007 time out?")


def _chat(n: int, conversation: str, question: str, *, parent: int | None = None) -> Any:
    """A GenAI ``chat`` span of conversation `conversation`."""
    messages = [{"role": "user", "parts": [{"type": "text", "content": question}]}]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.conversation.id": conversation,
        "gen_ai.input.messages": json.dumps(messages),
    }
    return span(attributes, n=n, parent=parent)


def test_it_keeps_a_call_of_another_session_inside_a_call_as_a_step_of_its_own(key: str) -> None:
    """A sub-agent's conversation run from inside a call of the main one: the inner
    span names another conversation, so it is no second trace of the outer call."""
    outer = _chat(1, "main-1", "Why does SO20260101007 time out?")
    inner = _chat(2, "sub-1", "Read the inventory log.", parent=1)
    send(key, outer, inner)
    assert session(key, "main-1")["steps"] == 1
    assert session(key, "sub-1")["steps"] == 1
    assert contents(step(key, "sub-1")) == [("user", "Read the inventory log.")]


def test_it_keeps_a_call_of_another_session_sent_before_the_one_around_it(key: str) -> None:
    """Each span exported as it ends: the inner call first, then the outer, which is
    not the inner's second trace."""
    send(key, _chat(2, "sub-2", "Read the inventory log.", parent=1))
    send(key, _chat(1, "main-2", "Why does SO20260101007 time out?"))
    assert session(key, "main-2")["steps"] == 1
    assert session(key, "sub-2")["steps"] == 1


def test_a_tool_span_around_a_stored_model_call_is_still_kept(key: str) -> None:
    """An agent used as a tool: its model call ends (and is sent) before the tool's
    span; the tool run is kept as any other."""
    call = _oi_llm(2, "gpt-4o", parent=1, **{"session.id": "tool-1"})
    tool = span(
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "ask_expert",
            "gen_ai.tool.call.id": "call_9",
            "session.id": "tool-1",
        },
        n=1,
        name="execute_tool ask_expert",
    )
    send(key, call)
    send(key, tool)
    assert session(key, "tool-1")["steps"] == 1
    from contextview.ingest.models import ToolRun

    assert list(ToolRun.objects.values_list("name", flat=True)) == ["ask_expert"]


def test_spans_whose_parents_loop_are_no_nesting_and_each_call_is_a_step(key: str) -> None:
    # Ids no SDK writes, but a hand-made exporter can: a span its own parent, and two
    # model calls each the other's parent. Nothing sits inside anything there.
    send(key, _oi_llm(1, "gpt-4o", parent=1, **{"session.id": "loop-1"}))
    assert session(key, "loop-1")["steps"] == 1
    first = _oi_llm(2, "gpt-4o", parent=3, **{"session.id": "loop-2"})
    second = _oi_llm(3, "gpt-4o", parent=2, **{"session.id": "loop-2"})
    send(key, first, second)
    assert session(key, "loop-2")["steps"] == 2


def _spring_chat(n: int, prompt: list[str], completion: list[str]) -> dict[str, Any]:
    """A chat model span of Spring AI inside its ChatClient's (span 1), its values the
    texts its Micrometer observation writes, with its prompt and completion events."""
    return span(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.usage.input_tokens": str(100 * n),
            "gen_ai.usage.output_tokens": "12",
        },
        n=n,
        parent=1,
        name="chat gpt-4o-mini",
        events=[
            ("gen_ai.content.prompt", {"gen_ai.prompt": prompt}),
            ("gen_ai.content.completion", {"gen_ai.completion": completion}),
        ],
    )


def test_it_reads_a_spring_ai_chat_client_run_with_a_tool_call(key: str) -> None:
    """spring-projects/spring-ai: the ChatClient's span (spring.ai.kind chat_client,
    operation framework) around two chat model calls and the tool call between them.
    A prompt's texts carry no roles (spring-ai-core's
    ChatModelObservationContentProcessor.prompt: each message's getText), and a message
    with no text (the assistant's tool call, the tool's response) is an empty text; a
    reply of tool calls alone writes no completion text."""
    system, question = "You debug orders.", "Why does SO20260101007 time out?"
    framework = {"gen_ai.operation.name": "framework", "gen_ai.system": "spring_ai"}
    send(
        key,
        span({**framework, "spring.ai.kind": "chat_client"}, n=1, name="spring_ai chat_client"),
        _spring_chat(2, [system, question], []),
        span(
            {**framework, "spring.ai.kind": "tool_call", "spring.ai.tool.definition.name": "logs"},
            n=3,
            parent=1,
            name="tool_call logs",
        ),
        _spring_chat(4, [system, question, "", ""], ["Inventory answered 504 after 3 s."]),
    )
    first, second = step(key, TRACE, 0), step(key, TRACE, 1)
    assert contents(first) == [("user", system), ("user", question)]
    assert first["output"] is None
    assert contents(second) == [("user", system), ("user", question), ("user", ""), ("user", "")]
    assert second["output"]["messages"] == [
        {"role": "assistant", "content": "Inventory answered 504 after 3 s."}
    ]
    assert second["model"] == "gpt-4o-mini-2024-07-18"
    assert second["usage"] == {"input_tokens": 400, "output_tokens": 12}
    assert session(key, TRACE)["steps"] == 2


def test_it_reads_a_semantic_kernel_chat_completion_with_its_events(key: str) -> None:
    """microsoft/semantic-kernel, dotnet/src/InternalUtilities/src/Diagnostics/
    ModelDiagnostics.cs: the span's operation is ``chat.completions``; each message is
    an event whose ``gen_ai.event.content`` is the JSON text of the whole body, the
    reply's (``gen_ai.choice``) holding the message under ``message``."""
    body = {"gen_ai.system": "openai"}
    call = {
        "id": "call_7",
        "function": {"arguments": {"order": "SO20260101007"}, "name": "orders-Lookup"},
        "type": "function",
    }
    send(
        key,
        span(
            {
                "gen_ai.operation.name": "chat.completions",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 80,
                "gen_ai.usage.output_tokens": 6,
                "session.id": "sk-chat",
            },
            events=[
                (
                    "gen_ai.user.message",
                    {"gen_ai.event.content": '{"role": "user", "content": "Where is it?"}', **body},
                ),
                (
                    "gen_ai.assistant.message",
                    {
                        "gen_ai.event.content": json.dumps(
                            {"role": "assistant", "content": None, "tool_calls": [call]}
                        ),
                        **body,
                    },
                ),
                (
                    "gen_ai.tool.message",
                    {"gen_ai.event.content": '{"role": "tool", "content": "shipped"}', **body},
                ),
                (
                    "gen_ai.choice",
                    {
                        "gen_ai.event.content": json.dumps(
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": "It shipped."},
                                "tool_calls": [],
                                "finish_reason": "Stop",
                            }
                        )
                    },
                ),
            ],
            name="chat.completions gpt-4o-mini",
        ),
    )
    got = step(key, "sk-chat")
    assert contents(got) == [
        ("user", "Where is it?"),
        (
            "assistant",
            [
                {
                    "type": "tool_call",
                    "id": "call_7",
                    "name": "orders-Lookup",
                    "arguments": {"order": "SO20260101007"},
                }
            ],
        ),
        ("tool", "shipped"),
    ]
    assert got["model"] == "gpt-4o-mini"
    assert got["usage"] == {"input_tokens": 80, "output_tokens": 6}
    assert got["output"]["messages"] == [
        {"role": "assistant", "content": "It shipped.", "finish_reason": "Stop"}
    ]


def test_it_reads_openllmetrys_responses_api_spans(key: str) -> None:
    """traceloop/openllmetry: its OpenAI instrumentation's span of a Responses API
    call (packages/opentelemetry-instrumentation-openai/.../v1/responses_wrappers.py,
    ``openai.response``) names no request type nor operation; its OpenAI Agents SDK
    instrumentation's (.../openai_agents/_hooks.py) names ``response``. Both flatten
    the prompt and the reply; an embedding's span, typed, is no call."""
    p, c = "gen_ai.prompt", "gen_ai.completion"
    common = {
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4.1",
        "gen_ai.usage.input_tokens": 60,
        "gen_ai.usage.output_tokens": 9,
        f"{p}.0.content": "You debug orders.",
        f"{p}.0.role": "system",
        f"{p}.1.content": "Why does SO20260101007 time out?",
        f"{p}.1.role": "user",
        f"{c}.0.role": "assistant",
    }
    send(
        key,
        span(
            {
                **common,
                f"{c}.0.content": "A 504 from inventory.",
                "traceloop.association.properties.session_id": "tl-responses",
            },
            name="openai.response",
        ),
        span(
            {
                **common,
                "llm.request.type": "response",
                "gen_ai.operation.name": "response",
                f"{c}.0.finish_reason": "tool_calls",
                f"{c}.0.tool_calls.0.name": "read_log",
                f"{c}.0.tool_calls.0.arguments": '{"n": 5}',
                f"{c}.0.tool_calls.0.id": "call_1",
                "traceloop.association.properties.session_id": "tl-agents",
            },
            n=2,
            name="openai.response",
        ),
        span(
            {
                "llm.request.type": "embedding",
                f"{p}.0.content": "SO20260101007",
                "traceloop.association.properties.session_id": "tl-responses",
            },
            n=3,
            name="openai.embeddings",
        ),
    )
    for session_id in ("tl-responses", "tl-agents"):
        got = step(key, session_id)
        assert contents(got) == [
            ("system", "You debug orders."),
            ("user", "Why does SO20260101007 time out?"),
        ]
        assert got["model"] == "gpt-4.1"
        assert got["usage"] == {"input_tokens": 60, "output_tokens": 9}
        assert session(key, session_id)["steps"] == 1
    assert step(key, "tl-responses")["output"]["messages"] == [
        {"role": "assistant", "content": "A 504 from inventory."}
    ]
    assert step(key, "tl-agents")["output"]["messages"] == [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": "call_1", "name": "read_log", "arguments": '{"n": 5}'}
            ],
            "finish_reason": "tool_calls",
        }
    ]


def test_it_reads_a_responses_api_content_list_as_its_parts(key: str) -> None:
    """traceloop/openllmetry, packages/opentelemetry-instrumentation-openai/.../v1/
    responses_wrappers.py: a Responses API message given a content list is written as
    the JSON text of its parts (``input_text``, ``input_image``, the ``output_text`` of
    an earlier reply)."""
    p = "gen_ai.prompt"
    image = {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"}
    send(
        key,
        span(
            {
                "gen_ai.system": "openai",
                f"{p}.0.content": json.dumps([{"type": "input_text", "text": "What is this?"}]),
                f"{p}.0.role": "user",
                f"{p}.1.content": json.dumps(
                    [{"type": "output_text", "text": "A chart.", "annotations": []}]
                ),
                f"{p}.1.role": "assistant",
                f"{p}.2.content": json.dumps([{"type": "input_text", "text": "And this?"}, image]),
                f"{p}.2.role": "user",
                "gen_ai.completion.0.role": "assistant",
                "traceloop.association.properties.session_id": "tl-parts",
            },
            name="openai.response",
        ),
    )
    assert contents(step(key, "tl-parts")) == [
        ("user", "What is this?"),
        ("assistant", "A chart."),
        ("user", [{"type": "text", "text": "And this?"}, image]),
    ]


def lc_message(kind: str, **kwargs: Any) -> dict[str, Any]:
    """A LangChain message as ``dumpd`` serializes it."""
    name = {"system": "SystemMessage", "human": "HumanMessage", "ai": "AIMessage"}.get(kind)
    return {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", name or "ToolMessage"],
        "kwargs": {"type": kind, **kwargs},
    }


def test_it_reads_langsmiths_llm_runs_and_leaves_its_prompt_runs_out(key: str) -> None:
    """langchain-ai/langsmith-sdk, python/langsmith/_internal/otel/_otel_exporter.py:
    a run's span names its run type (``langsmith.span.kind``) and the operation ``chat``
    for ``llm`` and ``prompt`` runs alike; the run's inputs and outputs are JSON text in
    ``gen_ai.prompt`` and ``gen_ai.completion`` (LangChain's: a batch of serialized
    messages, and generations); the thread is the run's metadata."""
    call = {"name": "read_log", "args": {"n": 5}, "id": "call_1", "type": "tool_call"}
    context = [
        lc_message("system", content="You debug orders."),
        lc_message("human", content="Why does SO20260101007 time out?"),
        lc_message("ai", content="", tool_calls=[call]),
        lc_message("tool", content="504 after 3 s", tool_call_id="call_1", name="read_log"),
    ]
    reply = lc_message("ai", content="Inventory answered 504.")
    common = {"gen_ai.operation.name": "chat", "langsmith.metadata.thread_id": "ls-thread"}
    send(
        key,
        span(
            {**common, "langsmith.span.kind": "prompt", "gen_ai.prompt": '{"question": "Why?"}'},
            name="ChatPromptTemplate",
        ),
        span(
            {
                **common,
                "langsmith.span.kind": "llm",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.prompt": json.dumps({"messages": [context]}),
                "gen_ai.completion": json.dumps(
                    {
                        "generations": [[{"text": "Inventory answered 504.", "message": reply}]],
                        "type": "LLMResult",
                    }
                ),
                "gen_ai.usage.input_tokens": 70,
                "gen_ai.usage.output_tokens": 6,
            },
            n=2,
            name="ChatOpenAI",
        ),
    )
    got = step(key, "ls-thread")
    assert contents(got) == [
        ("system", "You debug orders."),
        ("user", "Why does SO20260101007 time out?"),
        (
            "assistant",
            [{"type": "tool_call", "id": "call_1", "name": "read_log", "arguments": {"n": 5}}],
        ),
        ("tool", [{"type": "tool_result", "tool_call_id": "call_1", "content": "504 after 3 s"}]),
    ]
    assert got["output"]["messages"] == [
        {"role": "assistant", "content": "Inventory answered 504."}
    ]
    assert got["model"] == "gpt-4o-mini"
    assert got["usage"] == {"input_tokens": 70, "output_tokens": 6}
    assert session(key, "ls-thread")["steps"] == 1


def test_it_reads_a_model_clients_request_and_reply_traced_by_langsmith(key: str) -> None:
    """langchain-ai/langsmith-sdk, python/langsmith/wrappers/_openai.py: a wrapped
    client's run has the request's ``messages`` and ``tools`` as inputs and the
    completion (``choices``) as outputs; no thread named: the trace is the session."""
    request = {
        "messages": [{"role": "user", "content": "Read the log."}],
        "model": "gpt-4o-mini",
        "tools": [{"type": "function", "function": {"name": "read_log"}}],
    }
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "read_log", "arguments": "{}"},
            }
        ],
    }
    send(
        key,
        span(
            {
                "langsmith.span.kind": "llm",
                "gen_ai.operation.name": "chat",
                "gen_ai.prompt": json.dumps(request),
                "gen_ai.completion": json.dumps(
                    {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
                ),
            },
            name="ChatOpenAI",
        ),
    )
    got = step(key, TRACE)
    assert contents(got) == [("user", "Read the log.")]
    assert got["tools"] == request["tools"]
    assert got["output"]["messages"] == [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": "call_9", "name": "read_log", "arguments": "{}"}
            ],
            "finish_reason": "tool_calls",
        }
    ]


def _ls_cached_call(details: dict[str, Any], *, usage: dict[str, int]) -> dict[str, Any]:
    """The attributes LangSmith sets on a wrapped client's run whose outputs carry
    LangChain's ``usage_metadata``, but for its token details, which callers add as
    each SDK writes them."""
    reply = {"role": "assistant", "content": "Inventory answered 504."}
    outputs = {
        "choices": [{"index": 0, "message": reply, "finish_reason": "stop"}],
        "model": "gpt-4o-mini-2024-07-18",
        "usage_metadata": {**usage, "input_token_details": details},
    }
    return {
        "langsmith.span.kind": "llm",
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.prompt": json.dumps({"messages": [{"role": "user", "content": "Why 504?"}]}),
        "gen_ai.completion": json.dumps(outputs),
        "gen_ai.usage.input_tokens": usage["input_tokens"],
        "gen_ai.usage.output_tokens": usage["output_tokens"],
        "gen_ai.usage.total_tokens": usage["input_tokens"] + usage["output_tokens"],
        "langsmith.metadata.thread_id": "ls-cached",
    }


@pytest.mark.parametrize(
    "written",
    [
        # python/langsmith/_internal/otel/_otel_exporter.py: str() of the dict
        lambda details: str(details),
        # js/src/experimental/otel/translator.ts: JSON.stringify of it
        lambda details: json.dumps(details, separators=(",", ":")),
    ],
    ids=["python-sdk", "js-sdk"],
)
def test_it_reads_the_cached_tokens_langsmith_writes_as_text(key: str, written: Any) -> None:
    """LangSmith's exporters write LangChain's ``input_token_details`` only as text in
    ``gen_ai.usage.input_token_details``: the Python SDK as Python prints a dict, the JS
    SDK as JSON. LangChain's ``input_tokens`` counts the cached tokens in."""
    details = {"audio": 0, "cache_read": 1024, "cache_creation": 100}
    attributes = _ls_cached_call(details, usage={"input_tokens": 1300, "output_tokens": 9})
    attributes["gen_ai.usage.input_token_details"] = written(details)
    attributes["gen_ai.usage.output_token_details"] = written({"audio": 0, "reasoning": 0})
    send(key, span(attributes, name="ChatOpenAI"))
    got = step(key, "ls-cached")
    assert got["usage"] == {
        "input_tokens": 176,
        "output_tokens": 9,
        "cache_read_tokens": 1024,
        "cache_write_tokens": 100,
    }
    assert got["output"]["messages"] == [
        {"role": "assistant", "content": "Inventory answered 504.", "finish_reason": "stop"}
    ]


@pytest.mark.parametrize(
    "text",
    [
        "{'cache_read': 1024.5}",
        "{'cache_read': 1024, 'cache_read': __import__('os').getpid()}",
        "{'cache_read': -5}",
        "cache_read=1024",
        "{" + "'audio': 0, " * 5000 + "'cache_read': 1024}",
    ],
    ids=["fraction", "code", "negative", "not-a-dict", "too-long"],
)
def test_it_reads_no_cached_tokens_from_details_it_cannot_read_as_numbers(
    key: str, text: str
) -> None:
    attributes = _ls_cached_call({}, usage={"input_tokens": 1300, "output_tokens": 9})
    attributes["gen_ai.usage.input_token_details"] = text
    send(key, span(attributes, name="ChatOpenAI"))
    assert step(key, "ls-cached")["usage"] == {"input_tokens": 1300, "output_tokens": 9}


def test_it_reads_langchains_usage_the_js_sdk_writes_whole(key: str) -> None:
    """js/src/experimental/otel/translator.ts: a run whose usage LangChain put in its
    metadata has it as JSON in ``langsmith.usage_metadata`` alone, no ``gen_ai.usage.*``
    (those come from the run's outputs)."""
    attributes = _ls_cached_call({}, usage={"input_tokens": 1300, "output_tokens": 9})
    for name in ("input_tokens", "output_tokens", "total_tokens"):
        del attributes[f"gen_ai.usage.{name}"]
    usage = {
        "input_tokens": 1300,
        "output_tokens": 9,
        "total_tokens": 1309,
        "input_token_details": {"cache_read": 1024},
    }
    attributes["langsmith.usage_metadata"] = json.dumps(usage)
    send(key, span(attributes, name="ChatOpenAI"))
    assert step(key, "ls-cached")["usage"] == {
        "input_tokens": 276,
        "output_tokens": 9,
        "cache_read_tokens": 1024,
    }


def ai_sdk_call(session_id: str, **more: Any) -> dict[str, Any]:
    """An AI SDK provider call span (``ai.generateText.doGenerate``) of a Claude model."""
    return span(
        {
            "ai.operationId": "ai.generateText.doGenerate",
            "ai.model.provider": "anthropic.messages",
            "ai.model.id": "claude-sonnet-4-5",
            "gen_ai.system": "anthropic.messages",
            "ai.telemetry.metadata.sessionId": session_id,
            "ai.prompt.messages": json.dumps(
                [{"role": "user", "content": [{"type": "text", "text": "Why the 504?"}]}]
            ),
            "ai.response.text": "Inventory timed out.",
            "ai.response.finishReason": "stop",
            **more,
        }
    )


def test_it_reads_the_reasoning_of_an_ai_sdk_call(key: str) -> None:
    """vercel/ai, packages/ai/src/generate-text/generate-text.ts (and stream-text.ts):
    the provider call's span holds the reply's reasoning, its texts joined, in
    ``ai.response.reasoning`` beside ``ai.response.text`` and ``ai.response.toolCalls``."""
    send(key, ai_sdk_call("ai-reasoning", **{"ai.response.reasoning": "Check inventory."}))
    assert step(key, "ai-reasoning")["output"]["messages"] == [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": "Check inventory."},
                {"type": "text", "text": "Inventory timed out."},
            ],
            "finish_reason": "stop",
        }
    ]


def test_it_reads_the_ai_sdk_6_cache_counts(key: str) -> None:
    """vercel/ai (AI SDK 6), packages/ai/src/generate-text/generate-text.ts: the input
    count is the total (``inputTokens.total``, also ``gen_ai.usage.input_tokens``),
    its parts under ``ai.usage.inputTokenDetails.*``: ``noCacheTokens``,
    ``cacheReadTokens`` (also ``ai.usage.cachedInputTokens``) and
    ``cacheWriteTokens``."""
    send(
        key,
        ai_sdk_call(
            "ai-6-cache",
            **{
                "ai.usage.inputTokens": 1300,
                "ai.usage.inputTokenDetails.noCacheTokens": 200,
                "ai.usage.inputTokenDetails.cacheReadTokens": 1000,
                "ai.usage.inputTokenDetails.cacheWriteTokens": 100,
                "ai.usage.cachedInputTokens": 1000,
                "ai.usage.outputTokens": 20,
                "gen_ai.usage.input_tokens": 1300,
                "gen_ai.usage.output_tokens": 20,
            },
        ),
    )
    assert step(key, "ai-6-cache")["usage"] == {
        "input_tokens": 200,
        "output_tokens": 20,
        "cache_read_tokens": 1000,
        "cache_write_tokens": 100,
    }


def test_it_reads_the_ai_sdk_5_cache_counts_of_an_anthropic_call(key: str) -> None:
    """vercel/ai (AI SDK 5), packages/anthropic/src/anthropic-messages-language-model.ts:
    its ``inputTokens`` is Anthropic's ``input_tokens``, which leaves the cached
    tokens out (``cachedInputTokens`` is ``cache_read_input_tokens``); the cache
    writes are only in the provider metadata (``cacheCreationInputTokens``)."""
    send(
        key,
        ai_sdk_call(
            "ai-5-cache",
            **{
                "ai.usage.inputTokens": 200,
                "ai.usage.cachedInputTokens": 1000,
                "ai.usage.outputTokens": 20,
                "gen_ai.usage.input_tokens": 200,
                "gen_ai.usage.output_tokens": 20,
                "ai.response.providerMetadata": json.dumps(
                    {"anthropic": {"usage": {}, "cacheCreationInputTokens": 100}}
                ),
            },
        ),
    )
    assert step(key, "ai-5-cache")["usage"] == {
        "input_tokens": 200,
        "output_tokens": 20,
        "cache_read_tokens": 1000,
        "cache_write_tokens": 100,
    }


def test_it_reads_the_genai_conventions_server_tool_calls(key: str) -> None:
    """open-telemetry/semantic-conventions, docs/gen-ai/gen-ai-input-messages.json and
    gen-ai-output-messages.json: a tool the provider ran (web search, code execution)
    is a ``server_tool_call`` part (``id``, ``name``, its details under
    ``server_tool_call``) and its result a ``server_tool_call_response`` part (``id``,
    the details under ``server_tool_call_response``)."""
    search = {"type": "web_search", "query": "SO20260101007 504"}
    found = {"type": "web_search", "results": ["status page: inventory degraded"]}
    messages = [
        {"role": "user", "parts": [{"type": "text", "content": "Is inventory down?"}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "server_tool_call", "id": "srv_1", "name": "web_search",
                 "server_tool_call": search},
                {"type": "server_tool_call_response", "id": "srv_1",
                 "server_tool_call_response": found},
                {"type": "text", "content": "Inventory is degraded."},
            ],
        },
        {"role": "user", "parts": [{"type": "text", "content": "Since when?"}]},
    ]  # fmt: skip
    send(
        key,
        span(
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.conversation.id": "server-tools",
                "gen_ai.input.messages": json.dumps(messages),
            }
        ),
    )
    assert contents(step(key, "server-tools"))[1] == (
        "assistant",
        [
            {"type": "tool_call", "id": "srv_1", "name": "web_search", "arguments": search},
            {"type": "tool_result", "tool_call_id": "srv_1", "content": found},
            {"type": "text", "text": "Inventory is degraded."},
        ],
    )


def _logfire_responses_span(events: list[dict[str, Any]], **attributes: Any) -> Any:
    """A Responses API call's span as Logfire writes it: the exchange in its ``events``
    attribute, with the call's other `attributes`."""
    return span(
        {
            "logfire.msg_template": "Responses API with {gen_ai.request.model!r}",
            "logfire.span_type": "span",
            "gen_ai.system": "openai",
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4.1",
            "gen_ai.response.model": "gpt-4.1-2025-04-14",
            **attributes,
            "events": json.dumps(events),
        },
        name="Responses API with 'gpt-4.1'",
    )


def test_it_reads_the_reply_and_usage_of_logfires_openai_agents_responses_span(key: str) -> None:
    """pydantic/logfire, logfire/_internal/integrations/openai_agents.py
    (``attributes_from_span_data`` for a ``ResponseSpanData``, before it wrote
    ``gen_ai.usage.*``): the whole exchange in one ``events`` attribute, the input's
    messages (``inputs_to_events``) then one ``gen_ai.assistant.message`` item per part
    of the reply (``responses_output_events``), beside the ``response`` object, whose
    usage only it holds."""
    response = {
        "id": "resp_67ccd2bed1ec8190b14f964abc054267", "object": "response",
        "created_at": 1741476542, "status": "completed", "model": "gpt-4.1-2025-04-14",
        "instructions": "You debug orders.",
        "output": [
            {"id": "msg_67ccd2bf17f0", "type": "message", "role": "assistant",
             "status": "completed",
             "content": [{"type": "output_text", "text": "Reading the log.",
                          "annotations": []}]},
            {"id": "fc_67ccd2bf6d8c", "type": "function_call", "call_id": "call_a",
             "name": "read_log", "arguments": "{\"n\":5}", "status": "completed"},
        ],
        "usage": {"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 1024},
                  "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 1240},
        "tools": [], "parallel_tool_calls": True, "tool_choice": "auto",
    }  # fmt: skip
    events = [
        {"event.name": "gen_ai.system.message", "content": "You debug orders.",
         "role": "system"},
        {"event.name": "gen_ai.user.message", "content": "Why does SO20260101007 time out?",
         "role": "user"},
        {"event.name": "gen_ai.assistant.message", "content": "Reading the log.",
         "role": "assistant"},
        {"event.name": "gen_ai.assistant.message", "role": "assistant",
         "tool_calls": [{"id": "call_a", "type": "function",
                         "function": {"name": "read_log", "arguments": "{\"n\":5}"}}]},
    ]  # fmt: skip
    raw_input = [{"role": "user", "content": "Why does SO20260101007 time out?"}]
    send(
        key,
        _logfire_responses_span(
            events, response=json.dumps(response), raw_input=json.dumps(raw_input)
        ),
    )
    got = step(key, TRACE)
    assert contents(got) == [
        ("system", "You debug orders."),
        ("user", "Why does SO20260101007 time out?"),
    ]
    assert got["output"]["messages"] == [
        {"role": "assistant", "content": "Reading the log."},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_call", "id": "call_a", "name": "read_log", "arguments": '{"n":5}'}
            ],
        },
    ]
    assert got["usage"] == {"input_tokens": 176, "cache_read_tokens": 1024, "output_tokens": 40}


def test_it_reads_the_reply_of_a_responses_call_logfires_openai_integration_traced(
    key: str,
) -> None:
    """pydantic/logfire, logfire/_internal/integrations/llm_providers/openai.py before
    it wrote ``gen_ai.input.messages``: a ``/responses`` call's span keeps the request's
    model alone in ``request_data``, the input as events (``inputs_to_events``) in the
    ``events`` attribute, to which the reply's are added (``responses_output_events``),
    and the usage as ``gen_ai.usage.*``; there is no ``response`` object."""
    events = [
        {"event.name": "gen_ai.system.message", "content": "You debug orders.",
         "role": "system"},
        {"event.name": "gen_ai.user.message", "content": "Why does SO20260101007 time out?",
         "role": "user"},
        {"event.name": "gen_ai.assistant.message", "role": "assistant",
         "tool_calls": [{"id": "call_a", "type": "function",
                         "function": {"name": "read_log", "arguments": "{\"n\":5}"}}]},
        {"event.name": "gen_ai.tool.message", "role": "tool", "id": "call_a",
         "content": "504 upstream timeout after 3 s", "name": "read_log"},
        {"event.name": "gen_ai.assistant.message", "content": "The gateway times out.",
         "role": "assistant"},
        {"event.name": "gen_ai.assistant.message", "role": "assistant",
         "tool_calls": [{"id": "call_b", "type": "function",
                         "function": {"name": "retry", "arguments": "{}"}}]},
    ]  # fmt: skip
    send(
        key,
        _logfire_responses_span(
            events,
            request_data=json.dumps({"model": "gpt-4.1", "stream": False}),
            **{"gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 40},
        ),
    )
    got = step(key, TRACE)
    # The reply is not part of what the model saw.
    assert [role for role, _ in contents(got)] == ["system", "user", "assistant", "tool"]
    assert got["output"]["messages"] == [
        {"role": "assistant", "content": "The gateway times out."},
        {
            "role": "assistant",
            "content": [{"type": "tool_call", "id": "call_b", "name": "retry", "arguments": "{}"}],
        },
    ]
    assert got["usage"] == {"input_tokens": 1200, "output_tokens": 40}
