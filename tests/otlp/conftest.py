"""Spans as real instrumentations write them, made with the official OpenTelemetry SDK.

`Agent` plays an instrumented agent: each `call` is one LLM span with the GenAI
semantic conventions' attributes (JSON strings, as the official instrumentations set
them on spans). Spans end in the SDK and go either to an in-memory exporter (for
requests built in the test) or to the real OTLP/HTTP exporter.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


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
