"""A real OpenInference instrumentation of the real openai client, exporting to a real
server. Only the model's API is a stand-in (`model_api`, test scaffolding)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

openai = pytest.importorskip("openai")
instrumentation = pytest.importorskip("openinference.instrumentation.openai")


def test_it_shows_an_openinference_instrumented_agent(
    gunicorn_api: str, model_api: str, transactional_db: None
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from contextview.projects.services import apikey_create, project_get_or_create

    project, _ = project_get_or_create(slug="oi")
    key = apikey_create(project=project, name="oi").secret
    provider = TracerProvider(resource=Resource.create({"service.name": "order-agent"}))
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(
                endpoint=f"{gunicorn_api}/v1/traces", headers={"Authorization": f"Bearer {key}"}
            )
        )
    )
    instrumentor = instrumentation.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        client = openai.OpenAI(base_url=model_api, api_key="stand-in")
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "read_file",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                },
            }
        ]
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": "You debug orders."},
            {"role": "user", "content": "Why does order SO20260101007 time out?"},
        ]
        from openinference.instrumentation import using_session

        with using_session("order-42"):
            first = client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, tools=tools
            )
            call = first.choices[0].message.tool_calls[0]
            messages.append(first.choices[0].message.model_dump(exclude_none=True))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "504 Gateway"})
            client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=tools)
        provider.force_flush()
    finally:
        instrumentor.uninstrument()
        provider.shutdown()

    with httpx.Client(
        base_url=f"{gunicorn_api}/api/v1", headers={"Authorization": f"Bearer {key}"}
    ) as api:
        session = api.get("/sessions/order-42").json()
        assert session["agent"] == "order-agent"
        assert session["steps"] == 2
        step = api.get("/sessions/order-42/steps/1").json()
    roles = [m["role"] for m in step["before"]]
    assert roles == ["system", "user", "assistant", "tool"]
    assert step["before"][2]["content"] == [
        {
            "type": "tool_call",
            "id": call.id,
            "name": "read_file",
            "arguments": '{"path": "app.log"}',
        }
    ]
    assert step["before"][3]["content"] == [
        {"type": "tool_result", "tool_call_id": call.id, "content": "504 Gateway"}
    ]
