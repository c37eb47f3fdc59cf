"""A real OpenInference instrumentation of the real openai client, exporting to a real
server. Only the model's API is a stand-in (test scaffolding): a local HTTP server
that answers chat completions."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

openai = pytest.importorskip("openai")
instrumentation = pytest.importorskip("openinference.instrumentation.openai")


class _StandIn(BaseHTTPRequestHandler):
    """Answers every chat completion: first with a tool call, then with text."""

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
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
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def model_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


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
