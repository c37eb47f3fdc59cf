"""Spans as real instrumentations write them, made with the official OpenTelemetry SDK.

`Agent` plays an instrumented agent: each `call` is one LLM span with the GenAI
semantic conventions' attributes (JSON strings, as the official instrumentations set
them on spans). Spans end in the SDK and go either to an in-memory exporter (for
requests built in the test) or to the real OTLP/HTTP exporter.

`model_api` is a stand-in for the model's HTTP API (test scaffolding), for tests that
run a real instrumentation of the real openai client.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode


def text(role: str, content: str) -> dict[str, Any]:
    """A GenAI input message of one text part."""
    return {"role": role, "parts": [{"type": "text", "content": content}]}


class Agent:
    """Emits LLM spans the way an OTel GenAI instrumentation does."""

    def __init__(self, exporter: SpanExporter, service: str = "support-bot") -> None:
        self.provider = TracerProvider(resource=Resource.create({"service.name": service}))
        self.provider.add_span_processor(SimpleSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("tests.otlp")

    def call(
        self,
        messages: list[dict[str, Any]],
        *,
        conversation: str | None = "conv-1",
        system: str | None = "You debug orders.",
        reply: str = "Looking.",
        start: int | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> None:
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.input.messages": json.dumps(messages),
            "gen_ai.output.messages": json.dumps(
                [{**text("assistant", reply), "finish_reason": "stop"}]
            ),
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 8,
        }
        if system is not None:
            attrs["gen_ai.system_instructions"] = json.dumps([{"type": "text", "content": system}])
        if conversation is not None:
            attrs["gen_ai.conversation.id"] = conversation
        attrs.update(attributes or {})
        span = self.tracer.start_span("chat gpt-4o", attributes=attrs, start_time=start)
        span.end(end_time=None if start is None else start + 1_000_000)

    def other(self, name: str = "execute_tool read_file") -> None:
        """A span that is not an LLM call (a tool's, as agents' SDKs write them)."""
        with self.tracer.start_as_current_span(
            name, attributes={"gen_ai.operation.name": "execute_tool"}
        ):
            pass

    def tool(
        self,
        attributes: dict[str, Any],
        *,
        start: int,
        took_ns: int,
        name: str = "execute_tool",
        error: str | None = None,
    ) -> None:
        """A tool span that ran from `start` for `took_ns`, failed with `error` if given."""
        span = self.tracer.start_span(name, attributes=attributes, start_time=start)
        if error is not None:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=start + took_ns)

    def shutdown(self) -> None:
        self.provider.shutdown()


def request_of(spans: list[ReadableSpan]) -> ExportTraceServiceRequest:
    """The ExportTraceServiceRequest the official exporter would send for `spans`."""
    return encode_spans(spans)


@pytest.fixture
def memory() -> Iterator[tuple[Agent, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    agent = Agent(exporter)
    yield agent, exporter
    agent.shutdown()


class _StandIn(BaseHTTPRequestHandler):
    """Answers every chat completion: first with a tool call, then with text; every
    Responses API call the same way (its tool call after a reasoning item); and every
    (legacy) completion with one text a prompt."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "input" in request:
            self._answer(_response(request))
            return
        if "messages" not in request:
            self._answer(_completion(request["prompt"]))
            return
        if request["messages"][-1]["role"] == "user":
            message: dict[str, Any] = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{len(request['messages'])}",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "app.log"}'},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": "Inventory answered 504 after 3 s."}
            finish = "stop"
        body = json.dumps(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 90, "completion_tokens": 12, "total_tokens": 102},
            }
        )
        self._answer(body)

    def _answer(self, text: str) -> None:
        body = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def _completion(prompt: str | list[str]) -> str:
    """A completions API answer: one choice for each prompt."""
    prompts = [prompt] if isinstance(prompt, str) else prompt
    choices = [
        {"index": n, "text": f" Retry order {n} later.", "logprobs": None, "finish_reason": "stop"}
        for n in range(len(prompts))
    ]
    return json.dumps(
        {
            "id": "cmpl-1",
            "object": "text_completion",
            "created": 0,
            "model": "gpt-3.5-turbo-instruct",
            "choices": choices,
            "usage": {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26},
        }
    )


def _response(request: dict[str, Any]) -> str:
    """A Responses API answer: a reasoning summary and a function call, or, after the
    function's output, a text."""
    items = request["input"] if isinstance(request["input"], list) else []
    if items and items[-1].get("type") == "function_call_output":
        output: list[dict[str, Any]] = [
            {
                "type": "message",
                "id": "msg_1",
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": "Inventory answered 504.", "annotations": []}
                ],
            }
        ]
    else:
        output = [
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [{"type": "summary_text", "text": "The log will say which call hung."}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": f"call_{len(items)}",
                "name": "read_file",
                "arguments": '{"path": "app.log"}',
                "status": "completed",
            },
        ]
    return json.dumps(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 0,
            "status": "completed",
            "model": "o4-mini-2025-04-16",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": request.get("tools", []),
            "usage": {
                "input_tokens": 90,
                "output_tokens": 12,
                "total_tokens": 102,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 5},
            },
        }
    )


@pytest.fixture
def model_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
