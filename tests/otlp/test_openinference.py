"""A real OpenInference instrumentation of the real openai client, exporting to a real
server. Only the model's API is a stand-in (`model_api`, test scaffolding)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

openai = pytest.importorskip("openai")
instrumentation = pytest.importorskip("openinference.instrumentation.openai")


@contextmanager
def _instrumented(gunicorn_api: str, slug: str) -> Iterator[str]:
    """The real openai client instrumented by OpenInference, its spans exported to the
    server by the official exporter under a new project's key (given); flushed after."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from contextview.projects.services import apikey_create, project_get_or_create

    project, _ = project_get_or_create(slug=slug)
    key = apikey_create(project=project, name=slug).secret
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
        yield key
        provider.force_flush()
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def _api(gunicorn_api: str, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"{gunicorn_api}/api/v1", headers={"Authorization": f"Bearer {key}"}
    )


def test_it_shows_an_openinference_instrumented_agent(
    gunicorn_api: str, model_api: str, transactional_db: None
) -> None:
    with _instrumented(gunicorn_api, "oi") as key:
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

    with _api(gunicorn_api, key) as api:
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


def test_it_shows_a_completions_api_call_of_an_openinference_instrumented_agent(
    gunicorn_api: str, model_api: str, transactional_db: None
) -> None:
    # OpenInference writes a completions API call's prompts as llm.prompts.{i}.prompt.text
    # and its choices as llm.choices.{i}.completion.text: texts, without roles.
    prompt = "Order SO20260101007 timed out at the inventory service. Next step:"
    with _instrumented(gunicorn_api, "oi-completions") as key:
        from openinference.instrumentation import using_session

        client = openai.OpenAI(base_url=model_api, api_key="stand-in")
        with using_session("order-43"):
            client.completions.create(model="gpt-3.5-turbo-instruct", prompt=prompt)
            client.completions.create(
                model="gpt-3.5-turbo-instruct", prompt=[prompt, "Summarize the incident:"]
            )

    with _api(gunicorn_api, key) as api:
        assert api.get("/sessions/order-43").json()["steps"] == 2
        first = api.get("/sessions/order-43/steps/0").json()
        second = api.get("/sessions/order-43/steps/1").json()
    assert [(m["role"], m["content"]) for m in first["before"]] == [("user", prompt)]
    assert [m["content"] for m in first["output"]["messages"]] == [" Retry order 0 later."]
    assert [(m["role"], m["content"]) for m in second["before"]] == [
        ("user", prompt),
        ("user", "Summarize the incident:"),
    ]
    assert [m["content"] for m in second["output"]["messages"]] == [
        " Retry order 0 later.",
        " Retry order 1 later.",
    ]


def test_it_shows_a_responses_api_calls_reasoning_as_thinking(
    gunicorn_api: str, model_api: str, transactional_db: None
) -> None:
    # OpenInference writes a reasoning item (its summary) as a message whose content
    # is typed "reasoning", with the summary as message_content.text: the model's
    # thinking, not its answer.
    with _instrumented(gunicorn_api, "oi-responses") as key:
        from openinference.instrumentation import using_session

        client = openai.OpenAI(base_url=model_api, api_key="stand-in")
        tools = [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}]
        items: list[Any] = [{"role": "user", "content": "Why does order SO20260101007 time out?"}]
        with using_session("order-44"):
            first = client.responses.create(
                model="o4-mini", instructions="You debug orders.", input=items, tools=tools
            )
            items += [item.model_dump(exclude_none=True) for item in first.output]
            call_id = first.output[1].call_id  # type: ignore[union-attr]
            items.append({"type": "function_call_output", "call_id": call_id, "output": "504"})
            client.responses.create(
                model="o4-mini", instructions="You debug orders.", input=items, tools=tools
            )

    with _api(gunicorn_api, key) as api:
        assert api.get("/sessions/order-44").json()["steps"] == 2
        first_step = api.get("/sessions/order-44/steps/0").json()
        second = api.get("/sessions/order-44/steps/1").json()
    thinking = {"type": "thinking", "text": "The log will say which call hung."}
    assert [m["content"] for m in first_step["output"]["messages"]] == [
        [thinking],
        [{"type": "tool_call", "id": call_id, "name": "read_file",
          "arguments": '{"path": "app.log"}'}],
    ]  # fmt: skip
    assert [(m["role"], m["content"]) for m in second["before"]] == [
        ("system", "You debug orders."),
        ("user", "Why does order SO20260101007 time out?"),
        ("assistant", [thinking]),
        ("assistant", first_step["output"]["messages"][1]["content"]),
        ("tool", [{"type": "tool_result", "tool_call_id": call_id, "content": "504"}]),
    ]
