"""Spans of every convention the contract lists, read into the same steps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from contextview.core.otlp import (
    LlmCall,
    align_repeats,
    decode_request,
    span_event_ids,
    step_event,
)
from tests.otlp.conftest import Agent, request_of, text


@pytest.fixture
def agent() -> Iterator[Agent]:
    exporter = InMemorySpanExporter()
    made = Agent(exporter)
    made.exporter = exporter  # type: ignore[attr-defined]
    yield made
    made.shutdown()


def calls(agent: Agent) -> list[LlmCall]:
    decoded = decode_request(request_of(agent.exporter.get_finished_spans()))  # type: ignore[attr-defined]
    assert decoded.refused == []
    return decoded.calls


def span(agent: Agent, attributes: dict[str, Any], events: list[tuple[str, dict[str, Any]]] = ()):  # type: ignore[assignment]
    s = agent.tracer.start_span("llm", attributes=attributes)
    for name, attrs in events:
        s.add_event(name, attrs)
    s.end()


def contents(call: LlmCall) -> list[tuple[str | None, Any]]:
    return [(m["role"], m["content"]) for m in call.messages]


TOOL_CALL = {"type": "tool_call", "id": "c1", "name": "read_file", "arguments": {"path": "a.log"}}
GENAI_CONTEXT = [
    text("user", "Why does SO20260101007 time out?"),
    {"role": "assistant", "parts": [TOOL_CALL]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "504"}]},
]
EXPECTED = [
    ("system", "You debug orders."),
    ("user", "Why does SO20260101007 time out?"),
    ("assistant", [TOOL_CALL]),
    ("tool", [{"type": "tool_result", "tool_call_id": "c1", "content": "504"}]),
]


def test_it_reads_genai_attributes_as_json_strings(agent: Agent) -> None:
    tools = [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}]
    agent.call(
        GENAI_CONTEXT,
        attributes={
            "gen_ai.tool.definitions": json.dumps(tools),
            "gen_ai.usage.input_tokens": 1500,
            "gen_ai.usage.cache_read.input_tokens": 1000,
            "gen_ai.agent.name": "triage",
        },
    )
    (call,) = calls(agent)
    assert contents(call) == EXPECTED
    assert call.session_id == "conv-1"
    assert call.agent == "triage"
    assert call.model == "gpt-4o-2024-08-06"
    assert call.tools == tools
    # The provider's prompt count includes cached tokens; the contract's does not.
    assert call.usage == {"input_tokens": 500, "output_tokens": 8, "cache_read_tokens": 1000}
    assert call.output == [{"role": "assistant", "content": "Looking.", "finish_reason": "stop"}]


def structured(value: Any) -> AnyValue:
    """A value as a structured OTLP AnyValue (what the SDK's span API cannot make)."""
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[structured(v) for v in value]))
    return AnyValue(
        kvlist_value=KeyValueList(
            values=[KeyValue(key=k, value=structured(v)) for k, v in value.items()]
        )
    )


def test_it_reads_the_inference_details_event_with_structured_values(agent: Agent) -> None:
    details = "gen_ai.client.inference.operation.details"
    span(agent, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude-sonnet-4"})
    request = request_of(agent.exporter.get_finished_spans())  # type: ignore[attr-defined]
    event = request.resource_spans[0].scope_spans[0].spans[0].events.add(name=details)
    event.attributes.add(key="gen_ai.input.messages", value=structured(GENAI_CONTEXT))
    event.attributes.add(
        key="gen_ai.system_instructions",
        value=structured([{"type": "text", "content": "You debug orders."}]),
    )
    (call,) = decode_request(request).calls
    assert contents(call) == EXPECTED
    assert call.model == "claude-sonnet-4"


def test_it_reads_the_older_per_message_events(agent: Agent) -> None:
    call_json = json.dumps(
        [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]
    )
    span(
        agent,
        {"gen_ai.operation.name": "chat", "session.id": "events-1"},
        [
            ("gen_ai.system.message", {"content": "You debug orders."}),
            ("gen_ai.user.message", {"content": "Why?"}),
            ("gen_ai.assistant.message", {"tool_calls": call_json}),
            ("gen_ai.tool.message", {"content": "504", "id": "c1"}),
            (
                "gen_ai.choice",
                {"message": json.dumps({"content": "A 504."}), "finish_reason": "stop"},
            ),
        ],
    )
    (call,) = calls(agent)
    assert call.session_id == "events-1"
    assert contents(call) == [
        ("system", "You debug orders."),
        ("user", "Why?"),
        ("assistant", [{"type": "tool_call", "id": "c1", "name": "read_file", "arguments": "{}"}]),
        ("tool", [{"type": "tool_result", "tool_call_id": "c1", "content": "504"}]),
    ]
    assert call.output == [{"role": "assistant", "content": "A 504.", "finish_reason": "stop"}]


# A Spring AI chat model span as its observation convention leaves it, every value a
# text (spring-projects/spring-ai, DefaultChatModelObservationConvention).
SPRING_SPAN = {
    "gen_ai.operation.name": "chat",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "gen_ai.request.temperature": "0.7",
    "gen_ai.response.finish_reasons": '["STOP"]',
    "gen_ai.usage.input_tokens": "120",
    "gen_ai.usage.output_tokens": "8",
    "gen_ai.usage.total_tokens": "128",
}


def test_it_reads_spring_ais_prompt_and_completion_events(agent: Agent) -> None:
    """spring-projects/spring-ai before 1.0, spring-ai-core's
    ChatModelPromptContentObservationHandler and ChatModelCompletionObservationHandler:
    each text of the prompt's messages, and of the reply's generations, in an array
    under the event's gen_ai.prompt / gen_ai.completion; no roles."""
    span(
        agent,
        SPRING_SPAN,
        [
            (
                "gen_ai.content.prompt",
                {"gen_ai.prompt": ["You debug orders.", "Why does SO20260101007 time out?"]},
            ),
            ("gen_ai.content.completion", {"gen_ai.completion": ["It waits on inventory."]}),
        ],
    )
    (call,) = calls(agent)
    assert contents(call) == [
        ("user", "You debug orders."),
        ("user", "Why does SO20260101007 time out?"),
    ]
    assert call.output == [{"role": "assistant", "content": "It waits on inventory."}]
    assert call.model == "gpt-4o-mini-2024-07-18"
    assert call.usage == {"input_tokens": 120, "output_tokens": 8}


def test_it_reads_spring_ais_prompt_and_completion_joined_in_one_attribute(agent: Agent) -> None:
    """spring-projects/spring-ai 1.0, spring-ai-model's
    ChatModelPromptContentObservationFilter and ChatModelCompletionObservationFilter: the
    texts joined in one attribute, each in quotes, nothing escaped (so no JSON)."""
    prompt = ["You debug orders.", 'Logs say "timeout"\nin C:\\new', "Why?"]
    span(
        agent,
        {
            **SPRING_SPAN,
            "gen_ai.prompt": "[" + ", ".join(f'"{t}"' for t in prompt) + "]",
            "gen_ai.completion": '["A 504 from inventory."]',
        },
    )
    (call,) = calls(agent)
    assert contents(call) == [("user", t) for t in prompt]
    assert call.output == [{"role": "assistant", "content": "A 504 from inventory."}]


def test_it_takes_no_model_from_spring_ais_none_placeholder(agent: Agent) -> None:
    """spring-projects/spring-ai, DefaultChatModelObservationConvention: a model it does
    not know (a response naming none, a request whose options name none) is written as
    Micrometer's KeyValue.NONE_VALUE, "none"."""
    span(agent, {**SPRING_SPAN, "gen_ai.response.model": "none"})
    span(agent, {**SPRING_SPAN, "gen_ai.request.model": "none", "gen_ai.response.model": "none"})
    assert {c.model for c in calls(agent)} == {"gpt-4o-mini", None}


def test_it_refuses_a_spring_ai_prompt_of_no_texts_naming_it_and_keeps_the_others(
    agent: Agent,
) -> None:
    span(agent, SPRING_SPAN, [("gen_ai.content.prompt", {"gen_ai.prompt": [1, 2]})])
    span(agent, {**SPRING_SPAN, "gen_ai.prompt": '["Still here."]'})
    decoded = decode_request(request_of(agent.exporter.get_finished_spans()))  # type: ignore[attr-defined]
    assert [r.error for r in decoded.refused] == [
        "gen_ai.prompt: must be a text or a list of texts"
    ]
    assert [contents(c) for c in decoded.calls] == [[("user", "Still here.")]]


def test_it_reads_openinference_flattened_attributes(agent: Agent) -> None:
    m = "llm.input_messages"
    span(
        agent,
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "session.id": "oi-1",
            f"{m}.0.message.role": "system",
            f"{m}.0.message.content": "You debug orders.",
            f"{m}.1.message.role": "user",
            f"{m}.1.message.contents.0.message_content.type": "text",
            f"{m}.1.message.contents.0.message_content.text": "Why does SO20260101007 time out?",
            f"{m}.2.message.role": "assistant",
            f"{m}.2.message.tool_calls.0.tool_call.id": "c1",
            f"{m}.2.message.tool_calls.0.tool_call.function.name": "read_file",
            f"{m}.2.message.tool_calls.0.tool_call.function.arguments": '{"path": "a.log"}',
            f"{m}.3.message.role": "tool",
            f"{m}.3.message.tool_call_id": "c1",
            f"{m}.3.message.content": "504",
            # Index 10 after 3: ordered by number, not as text.
            f"{m}.10.message.role": "user",
            f"{m}.10.message.content": "late",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "A 504.",
            "llm.tools.0.tool.json_schema": json.dumps(
                {"type": "function", "function": {"name": "read_file"}}
            ),
            "llm.token_count.prompt": 300,
            "llm.token_count.completion": 20,
            "llm.token_count.prompt_details.cache_read": 100,
        },
    )
    (call,) = calls(agent)
    assert call.session_id == "oi-1"
    assert call.model == "gpt-4o-mini"
    assert contents(call) == [
        ("system", "You debug orders."),
        ("user", "Why does SO20260101007 time out?"),
        (
            "assistant",
            [
                {
                    "type": "tool_call",
                    "id": "c1",
                    "name": "read_file",
                    "arguments": '{"path": "a.log"}',
                }
            ],
        ),
        ("tool", [{"type": "tool_result", "tool_call_id": "c1", "content": "504"}]),
        ("user", "late"),
    ]
    assert call.output == [{"role": "assistant", "content": "A 504."}]
    assert call.tools == [{"type": "function", "function": {"name": "read_file"}}]
    assert call.usage == {"input_tokens": 200, "output_tokens": 20, "cache_read_tokens": 100}


def test_it_reads_openllmetry_flattened_attributes(agent: Agent) -> None:
    # As Traceloop's OpenAI and Anthropic instrumentations write a chat call: no
    # gen_ai.operation.name, the request type instead; a content list as JSON text.
    p, c = "gen_ai.prompt", "gen_ai.completion"
    blocks = [{"type": "tool_result", "tool_use_id": "c2", "content": "200 OK"}]
    span(
        agent,
        {
            "llm.request.type": "chat",
            "gen_ai.system": "openai",
            "gen_ai.request.model": "gpt-4o",
            "traceloop.association.properties.session_id": "tl-1",
            f"{p}.0.role": "system",
            f"{p}.0.content": "You debug orders.",
            f"{p}.1.role": "user",
            f"{p}.1.content": "Why does SO20260101007 time out?",
            f"{p}.2.role": "assistant",
            f"{p}.2.tool_calls.0.id": "c1",
            f"{p}.2.tool_calls.0.name": "read_file",
            f"{p}.2.tool_calls.0.arguments": '{"path": "a.log"}',
            f"{p}.3.role": "tool",
            f"{p}.3.tool_call_id": "c1",
            f"{p}.3.content": "504",
            f"{p}.4.role": "user",
            f"{p}.4.content": json.dumps(blocks),
            f"{p}.5.role": "user",
            f"{p}.5.content": "[not JSON, just brackets]",
            f"{c}.0.role": "assistant",
            f"{c}.0.finish_reason": "tool_calls",
            f"{c}.0.tool_calls.0.id": "c3",
            f"{c}.0.tool_calls.0.name": "read_file",
            f"{c}.0.tool_calls.0.arguments": '{"path": "b.log"}',
            "llm.request.functions.0.name": "read_file",
            "llm.request.functions.0.parameters": '{"type": "object"}',
            "gen_ai.usage.prompt_tokens": 300,
            "gen_ai.usage.completion_tokens": 20,
        },
    )
    (call,) = calls(agent)
    assert (call.session_id, call.model) == ("tl-1", "gpt-4o")
    call_part = {"type": "tool_call", "id": "c1", "name": "read_file"}
    assert contents(call) == [
        ("system", "You debug orders."),
        ("user", "Why does SO20260101007 time out?"),
        ("assistant", [{**call_part, "arguments": '{"path": "a.log"}'}]),
        ("tool", [{"type": "tool_result", "tool_call_id": "c1", "content": "504"}]),
        # Anthropic's blocks read in the contract's spelling
        ("user", [{"type": "tool_result", "tool_call_id": "c2", "content": "200 OK"}]),
        ("user", "[not JSON, just brackets]"),
    ]
    assert call.output == [
        {
            "role": "assistant",
            "content": [{**call_part, "id": "c3", "arguments": '{"path": "b.log"}'}],
            "finish_reason": "tool_calls",
        }
    ]
    assert call.tools == [{"name": "read_file", "parameters": {"type": "object"}}]
    assert call.usage == {"input_tokens": 300, "output_tokens": 20}


def test_it_reads_an_openllmetry_completion_request(agent: Agent) -> None:
    span(
        agent,
        {
            "llm.request.type": "completion",
            "gen_ai.prompt.0.user": "Summarize the log.",
            "gen_ai.completion.0.content": "A 504 from inventory-svc.",
        },
    )
    (call,) = calls(agent)
    assert contents(call) == [("user", "Summarize the log.")]
    assert call.output == [{"role": "assistant", "content": "A 504 from inventory-svc."}]


def test_it_reads_openinferences_completions_call_in_its_older_list_form(agent: Agent) -> None:
    # Before its conventions nested them (llm.prompts.{i}.prompt.text), OpenInference
    # wrote a completions API call's prompts as one list of texts.
    span(
        agent,
        {
            "openinference.span.kind": "LLM",
            "llm.prompts": ["Summarize the log.", "Name the failing service."],
            "llm.choices.0.completion.text": "A 504 from inventory-svc.",
        },
    )
    (call,) = calls(agent)
    assert contents(call) == [("user", "Summarize the log."), ("user", "Name the failing service.")]
    assert call.output == [{"role": "assistant", "content": "A 504 from inventory-svc."}]


def test_it_reads_logfires_request_and_response_data(agent: Agent) -> None:
    # Logfire's OpenAI integration before it wrote the GenAI conventions: the request
    # and the reply as JSON text, no operation named (its chat span).
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    request = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You debug orders."},
            {"role": "user", "content": "Why does SO20260101007 time out?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "a.log"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "504"},
        ],
        "tools": tools,
    }
    usage = {"prompt_tokens": 1500, "completion_tokens": 8,
             "prompt_tokens_details": {"cached_tokens": 1000}}  # fmt: skip
    span(
        agent,
        {
            "logfire.msg_template": "Chat Completion with {request_data[model]!r}",
            "request_data": json.dumps(request),
            "async": False,
            "response_data": json.dumps(
                {
                    "message": {"role": "assistant", "content": "Inventory answered 504."},
                    "usage": usage,
                }  # fmt: skip
            ),
        },
    )
    (call,) = calls(agent)
    assert contents(call) == [
        ("system", "You debug orders."),
        ("user", "Why does SO20260101007 time out?"),
        ("assistant", [{**TOOL_CALL, "arguments": '{"path": "a.log"}'}]),
        ("tool", [{"type": "tool_result", "tool_call_id": "c1", "content": "504"}]),
    ]
    assert call.output == [{"role": "assistant", "content": "Inventory answered 504."}]
    assert (call.model, call.tools) == ("gpt-4o", tools)
    assert call.usage == {
        "input_tokens": 500,
        "output_tokens": 8,
        "cache_read_tokens": 1000,
        "cache_write_tokens": 0,
    }


def test_it_reads_logfires_anthropic_and_streamed_calls_but_no_embedding(agent: Agent) -> None:
    anthropic = {
        "model": "claude-sonnet-4-5",
        "system": "You debug orders.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Which order?"}]}],
    }
    span(
        agent,
        {
            "request_data": json.dumps(anthropic),
            "response_data": json.dumps(
                {"combined_chunk_content": "SO20260101007.", "chunk_count": 3}
            ),  # fmt: skip
        },
    )
    span(agent, {"request_data": json.dumps({"model": "text-embedding-3", "input": "a"})})
    span(agent, {"request_data": "GET /orders"})  # another library's attribute
    (call,) = calls(agent)
    assert contents(call) == [("system", "You debug orders."), ("user", "Which order?")]
    assert call.output == [{"role": "assistant", "content": "SO20260101007."}]
    assert call.model == "claude-sonnet-4-5"


def test_it_reads_the_vercel_ai_sdks_provider_call_spans(agent: Agent) -> None:
    # As the AI SDK (version 5) writes a generateText step; its outer ai.generateText
    # span, which wraps the provider calls, is not a call of its own.
    messages = [
        {"role": "system", "content": "You debug orders."},
        {"role": "user", "content": [{"type": "text", "text": "Why does SO20260101007 fail?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "reasoning", "text": "Read the log first."},
                {"type": "tool-call", "toolCallId": "c1", "toolName": "read_file",
                 "input": {"path": "a.log"}},
            ],
        },
        {
            "role": "tool",
            "content": [{"type": "tool-result", "toolCallId": "c1", "toolName": "read_file",
                         "output": {"type": "text", "value": "504"}}],
        },
        {"role": "user", "content": [{"type": "image", "image": "https://x.test/a.png",
                                      "mediaType": "image/png"}]},
    ]  # fmt: skip
    span(agent, {"ai.operationId": "ai.generateText", "ai.prompt": "{}"})
    span(
        agent,
        {
            "ai.operationId": "ai.generateText.doGenerate",
            "operation.name": "ai.generateText.doGenerate orders",
            "ai.model.id": "claude-sonnet-4",
            "ai.telemetry.metadata.sessionId": "ai-1",
            "ai.prompt.messages": json.dumps(messages),
            "ai.prompt.tools": [json.dumps({"type": "function", "name": "read_file"})],
            "ai.response.text": "Checking the log.",
            "ai.response.toolCalls": json.dumps(
                [
                    {
                        "toolCallType": "function",
                        "toolCallId": "c2",
                        "toolName": "read_file",
                        "input": '{"path": "b.log"}',
                    }
                ]  # fmt: skip
            ),
            "ai.response.finishReason": "tool-calls",
            "ai.usage.inputTokens": 300,
            "ai.usage.outputTokens": 20,
            "ai.usage.cachedInputTokens": 100,
        },
    )
    (call,) = calls(agent)
    assert (call.session_id, call.model) == ("ai-1", "claude-sonnet-4")
    assert contents(call) == [
        ("system", "You debug orders."),
        ("user", "Why does SO20260101007 fail?"),
        (
            "assistant",
            [
                {"type": "thinking", "text": "Read the log first."},
                {"type": "tool_call", "id": "c1", "name": "read_file",
                 "arguments": {"path": "a.log"}},
            ],
        ),
        ("tool", [{"type": "tool_result", "tool_call_id": "c1", "content": "504"}]),
        ("user", [{"type": "image", "media_type": "image/png", "url": "https://x.test/a.png"}]),
    ]  # fmt: skip
    assert call.output == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking the log."},
                {"type": "tool_call", "id": "c2", "name": "read_file",
                 "arguments": '{"path": "b.log"}'},
            ],
            "finish_reason": "tool-calls",
        }
    ]  # fmt: skip
    assert call.tools == [{"type": "function", "name": "read_file"}]
    assert call.usage == {"input_tokens": 200, "output_tokens": 20, "cache_read_tokens": 100}


def test_it_reads_the_ai_sdks_version_4_spelling(agent: Agent) -> None:
    messages = [
        {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "c1",
                                           "toolName": "grep", "args": {"q": "504"}}]},
        {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "c1",
                                      "toolName": "grep", "result": {"lines": 3}}]},
    ]  # fmt: skip
    span(
        agent,
        {
            "ai.operationId": "ai.streamText.doStream",
            "ai.prompt.messages": json.dumps(messages),
            "ai.usage.promptTokens": 50,
            "ai.usage.completionTokens": 5,
        },
    )
    (call,) = calls(agent)
    assert contents(call) == [
        (
            "assistant",
            [{"type": "tool_call", "id": "c1", "name": "grep", "arguments": {"q": "504"}}],
        ),
        ("tool", [{"type": "tool_result", "tool_call_id": "c1", "content": {"lines": 3}}]),
    ]
    assert call.usage == {"input_tokens": 50, "output_tokens": 5}


def test_it_gives_a_message_the_same_id_while_it_stays_the_same(agent: Agent) -> None:
    first = [text("user", "a"), text("user", "ok"), text("assistant", "b")]
    agent.call(first)
    agent.call([*first, text("user", "ok")])  # the same text again: its own id
    agent.call([text("user", "summary of a and ok"), *first[2:], text("user", "ok")])
    one, two, three = calls(agent)
    ids = [[m["id"] for m in c.messages] for c in (one, two, three)]
    assert ids[1][:4] == ids[0]
    assert len(set(ids[1])) == len(ids[1])
    # After a compaction moved everything, what stayed keeps its id.
    assert ids[2][0] == ids[0][0]  # the system prompt
    assert ids[2][2] == ids[0][3]  # "b"


def test_it_takes_the_session_from_the_trace_and_the_agent_from_the_service(
    agent: Agent,
) -> None:
    agent.call([text("user", "hi")], conversation=None)
    (call,) = calls(agent)
    assert call.session_id == call.trace_id
    assert call.agent == "support-bot"


def test_it_marks_a_call_whose_history_was_compacted(agent: Agent) -> None:
    agent.call([text("user", "hi")], attributes={"gen_ai.conversation.compacted": True})
    (call,) = calls(agent)
    assert step_event(call, 0)["body"]["obs"]["gen_ai.conversation.compacted"] is True


def test_it_refuses_a_span_with_messages_that_are_not_a_list(agent: Agent) -> None:
    agent.call([], attributes={"gen_ai.input.messages": '{"role": "user"}'})
    decoded = decode_request(request_of(agent.exporter.get_finished_spans()))  # type: ignore[attr-defined]
    assert decoded.calls == []
    assert "gen_ai.input.messages: must be a list" in decoded.refused[0].error


def test_it_sends_what_a_context_shares_with_the_step_before_as_a_run(agent: Agent) -> None:
    context = [text("user", f"message {i}") for i in range(6)]
    agent.call(context)
    agent.call([*context, text("user", "new")])
    one, two = calls(agent)
    event = step_event(two, 8, base=(7, [m["id"] for m in one.messages]))
    obs = event["body"]["obs"]
    assert obs["$base"] == 7
    assert obs["messages"][0] == {"$run": [0, 7]}
    assert [m["content"] for m in obs["messages"][1:]] == ["new"]


def test_it_sends_what_a_compacted_context_keeps_of_the_step_before_as_runs(
    agent: Agent,
) -> None:
    """A compaction replaces the head by a summary: the kept tail still goes as a run,
    so a long context is not sent (and stored) again in full."""
    context = [text("user", f"message {i}") for i in range(8)]
    agent.call(context)
    agent.call([text("user", "summary"), *context[4:], text("user", "new")])
    one, two = calls(agent)
    event = step_event(two, 3, base=(2, [m["id"] for m in one.messages]))
    obs = event["body"]["obs"]
    assert obs["$base"] == 2
    # the system prompt (base position 0) alone, the summary, the kept tail, the new one
    system, summary, run, new = obs["messages"]
    assert run == {"$run": [5, 4]}
    assert [system["role"], summary["content"], new["content"]] == ["system", "summary", "new"]


def test_it_leaves_out_the_spans_stored_already_and_counts_them(agent: Agent) -> None:
    context = [text("user", "start")]
    agent.call(context)
    agent.call([*context, text("user", "more")])
    request = request_of(agent.exporter.get_finished_spans())  # type: ignore[attr-defined]
    ids = span_event_ids(request)
    decoded = decode_request(request, stored={ids[0]})
    assert decoded.spans == 2
    assert [c.event_id for c in decoded.calls] == [ids[1]]
    # read alone, the second call's context is the one it has when read after the first
    assert decoded.calls[0].messages == decode_request(request).calls[1].messages


def test_it_ignores_spans_that_are_not_llm_calls(agent: Agent) -> None:
    agent.other()
    decoded = decode_request(request_of(agent.exporter.get_finished_spans()))  # type: ignore[attr-defined]
    assert decoded.spans == 1
    assert decoded.calls == [] and decoded.refused == []


def test_it_reads_a_context_the_same_whether_or_not_the_call_before_is_known(
    agent: Agent,
) -> None:
    """Contexts decoded against the previous call's (only what is new is read) equal
    contexts decoded alone, through growth, repeats, odd spacing and a compaction."""
    history = [text("user", "start")]
    texts: list[str] = []
    for i in range(8):
        if i == 5:
            history = [text("user", "summary"), *history[4:]]
        history = [*history, text("assistant", f"r{i}"), text("user", "ok")]
        body = json.dumps(history, separators=(", ", ": ") if i >= 3 else (",", ":"))
        texts.append(body)
        agent.call([], attributes={"gen_ai.input.messages": body})
    together = calls(agent)
    alone = []
    for span in agent.exporter.get_finished_spans():  # type: ignore[attr-defined]
        (call,) = decode_request(request_of([span])).calls
        alone.append(call.messages)
    assert [c.messages for c in together] == alone
    assert [m["content"] for m in together[-1].messages][-2:] == ["r7", "ok"]


def test_it_reads_message_events_written_as_one_attribute(agent: Agent) -> None:
    events = [
        {"event.name": "gen_ai.user.message", "role": "user", "content": "Where is order 4?"},
        {"event.name": "gen_ai.assistant.message", "role": "assistant", "content": "Shipped."},
    ]
    span(agent, {"gen_ai.operation.name": "chat", "events": json.dumps(events)})
    (call,) = calls(agent)
    assert contents(call) == [("user", "Where is order 4?"), ("assistant", "Shipped.")]


def test_it_numbers_repeats_against_the_call_before() -> None:
    # "go" twice, then the first one leaves and a reply comes: the second keeps its id.
    assert align_repeats(["sys", "go", "step", "go.1"], ["sys", "step", "go", "y"]) == [
        "sys",
        "step",
        "go.1",
        "y",
    ]
    # A window that slides over "continue" prompts: the oldest pair leaves, the new
    # "continue" takes a number neither context has.
    was = ["s", "c", "a0", "c.1", "a1", "c.2", "a2", "c.3"]
    now = ["s", "c", "a1", "c.1", "a2", "c.2", "a3", "c.3"]
    assert align_repeats(was, now) == ["s", "c", "a1", "c.2", "a2", "c.3", "a3", "c.4"]
    # Nothing repeats, or the repeats stay where they were: nothing to rename.
    assert align_repeats(["s", "u", "a"], ["s", "u", "a", "b"]) is None
    assert align_repeats(["s", "c", "a", "c.1"], ["s", "c", "a", "c.1", "b"]) is None
