"""POST /v1/traces in process: encodings, answers, what is stored and read back."""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.contrib.auth.models import User
from django.test import Client
from google.protobuf import json_format
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from contextview.ingest.models import ToolRun
from contextview.ingest.schemas import StepBody
from contextview.ingest.traces import MAX_ERRORS_SHOWN
from contextview.projects.models import Membership
from contextview.projects.services import apikey_create, membership_set, project_get_or_create
from contextview.sessions.models import Session
from tests.otlp.conftest import request_of, text

PROTOBUF = "application/x-protobuf"
MS = 1_000_000


@pytest.fixture
def key(db: None) -> str:
    project, _ = project_get_or_create(slug="otlp")
    return apikey_create(project=project, name="otlp tests").secret


def post(key: str | None, body: bytes, content_type: str = PROTOBUF, **headers: str) -> Any:
    if key is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    return Client().generic("POST", "/v1/traces", body, content_type=content_type, **headers)


def answer(response: Any) -> ExportTraceServiceResponse:
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == PROTOBUF
    out = ExportTraceServiceResponse()
    out.ParseFromString(response.content)
    return out


def status(response: Any) -> status_pb2.Status:
    out = status_pb2.Status()
    if response["Content-Type"] == "application/json":
        json_format.Parse(response.content, out)
    else:
        out.ParseFromString(response.content)
    return out


def read_step(key: str, session: str, index: int) -> dict[str, Any]:
    response = Client().get(
        f"/api/v1/sessions/{session}/steps/{index}", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 200, response.content
    return response.json()


def otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """The OTLP JSON form of a request: camelCase, ids in hex (not protobuf's base64)."""
    data = json_format.MessageToDict(request)
    for resource in data["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for name in ("traceId", "spanId", "parentSpanId"):
                    if name in span:
                        span[name] = base64.b64decode(span[name]).hex()
    return data


def test_it_stores_each_llm_call_as_a_step_of_its_conversation(key: str, memory: Any) -> None:
    agent, exporter = memory
    first = [text("user", "Why does order SO20260101007 time out?")]
    agent.call(first)
    agent.call([*first, text("assistant", "Looking."), text("user", "And A12345?")])
    out = answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    assert not out.HasField("partial_success")

    step = read_step(key, "conv-1", 1)
    assert [m["content"] for m in step["before"]] == [
        "You debug orders.",
        "Why does order SO20260101007 time out?",
        "Looking.",
        "And A12345?",
    ]
    assert [m["role"] for m in step["before"]] == ["system", "user", "assistant", "user"]
    span = exporter.get_finished_spans()[1]
    assert step["obs_extra"]["trace_id"] == format(span.context.trace_id, "032x")
    assert step["obs_extra"]["span_id"] == format(span.context.span_id, "016x")
    session = Client().get("/api/v1/sessions/conv-1", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    assert session["agent"] == "support-bot"
    assert session["steps"] == 2


def test_it_takes_the_otlp_json_form_gzipped(key: str, memory: Any) -> None:
    agent, exporter = memory
    agent.call([text("user", "hello")], conversation="json-1")
    body = gzip.compress(json.dumps(otlp_json(request_of(exporter.get_finished_spans()))).encode())
    response = post(key, body, "application/json", HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {}
    assert [m["content"] for m in read_step(key, "json-1", 0)["before"]] == [
        "You debug orders.",
        "hello",
    ]


@pytest.mark.parametrize(
    "deflate",
    [zlib.compress, lambda data: zlib.compress(data)[2:-4]],
    ids=["zlib", "raw"],
)
def test_it_takes_deflate_in_the_zlib_form_and_raw(key: str, memory: Any, deflate: Any) -> None:
    agent, exporter = memory
    agent.call([text("user", "squeezed")], conversation="deflate-1")
    body = deflate(request_of(exporter.get_finished_spans()).SerializeToString())
    answer(post(key, body, HTTP_CONTENT_ENCODING="deflate"))
    assert read_step(key, "deflate-1", 0)["before"][-1]["content"] == "squeezed"


def test_it_refuses_one_bad_span_and_stores_the_others(key: str, memory: Any) -> None:
    agent, exporter = memory
    agent.call([text("user", "first")], conversation="partial")
    agent.call(
        [text("user", "first")],
        conversation="partial",
        attributes={"gen_ai.input.messages": "[{not json"},
    )
    agent.call([text("user", "first"), text("user", "second")], conversation="partial")
    bad = format(exporter.get_finished_spans()[1].context.span_id, "016x")
    out = answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    assert out.partial_success.rejected_spans == 1
    assert bad in out.partial_success.error_message
    assert "gen_ai.input.messages: is not valid JSON" in out.partial_success.error_message
    # The two good calls are steps 0 and 1: the refused one leaves no gap.
    assert read_step(key, "partial", 1)["before"][-1]["content"] == "second"


def test_it_accepts_spans_that_are_not_llm_calls_and_makes_no_step_of_them(
    key: str, memory: Any
) -> None:
    agent, exporter = memory
    agent.other()
    agent.other("agent run")
    out = answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    assert not out.HasField("partial_success")
    listed = Client().get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    assert listed["sessions"] == []


def test_it_shows_the_tools_run_after_a_call_on_its_step(key: str, memory: Any) -> None:
    """A GenAI tool span in the call's trace and an OpenInference one in another trace
    of the same session are listed on the step of the call before them."""
    agent, exporter = memory
    t0 = 1_800_000_000 * 10**9
    first = [text("user", "Why does order SO20260101007 time out?")]
    with agent.tracer.start_as_current_span("invoke_agent support-bot", start_time=t0):
        agent.call(first, conversation="tools", start=t0)
        agent.tool(
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": "call_1"},
            name="execute_tool read_file",
            start=t0 + 5 * MS,
            took_ns=120 * MS,
        )
    agent.tool(
        {"openinference.span.kind": "TOOL", "tool.name": "grep", "session.id": "tools"},
        start=t0 + 130 * MS,
        took_ns=40 * MS,
        error="exit status 2",
    )
    agent.call([*first, text("user", "and then?")], conversation="tools", start=t0 + 200 * MS)
    body = request_of(exporter.get_finished_spans()).SerializeToString()
    assert not answer(post(key, body)).HasField("partial_success")
    answer(post(key, body))  # sent again: kept once

    assert ToolRun.objects.count() == 2
    session = Session.objects.get(external_id="tools")
    assert session.step_count == 2
    user = User.objects.create_user("tools-viewer")
    membership_set(user=user, project=session.project, role=Membership.Role.VIEWER)
    client = Client()
    client.force_login(user)
    page = client.get(f"/sessions/{session.pk}/steps/0/").content.decode()
    shown = page[page.index("Tools run after this call") :]
    assert "read_file" in shown and "call_1" in shown and "120 ms" in shown
    assert "grep" in shown and "40 ms" in shown and "error: exit status 2" in shown
    assert shown.index("read_file") < shown.index("grep")
    later = client.get(f"/sessions/{session.pk}/steps/1/").content.decode()
    assert "Tools run after this call" not in later


def test_it_stores_nothing_for_a_span_sent_again(key: str, memory: Any) -> None:
    agent, exporter = memory
    agent.call([text("user", "once")], conversation="again")
    body = request_of(exporter.get_finished_spans()).SerializeToString()
    answer(post(key, body))
    agent.call([text("user", "once"), text("user", "twice")], conversation="again")
    answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    out = answer(post(key, body))
    assert not out.HasField("partial_success")
    session = Client().get("/api/v1/sessions/again", HTTP_AUTHORIZATION=f"Bearer {key}").json()
    assert session["steps"] == 2


@pytest.mark.parametrize(
    ("body", "content_type", "headers", "expected"),
    [
        (b"\xff\xff\xff", PROTOBUF, {}, 400),
        (b"[1, 2]", "application/json", {}, 400),
        (b"", "text/plain", {}, 415),
        (b"{}", "application/json; charset=latin-1", {}, 415),
        (b"", PROTOBUF, {"HTTP_CONTENT_ENCODING": "br"}, 415),
        (b"not gzip", PROTOBUF, {"HTTP_CONTENT_ENCODING": "gzip"}, 400),
        (b"not deflate", PROTOBUF, {"HTTP_CONTENT_ENCODING": "deflate"}, 400),
        (zlib.compress(b"\n\x00")[:-6], PROTOBUF, {"HTTP_CONTENT_ENCODING": "deflate"}, 400),
    ],
)  # fmt: skip
def test_it_answers_an_undecodable_body_with_a_status_naming_the_problem(
    key: str, body: bytes, content_type: str, headers: dict[str, str], expected: int
) -> None:
    response = post(key, body, content_type, **headers)
    assert response.status_code == expected
    assert status(response).message


def test_it_names_the_encodings_it_takes_when_refusing_one(key: str) -> None:
    response = post(key, b"\n\x00", HTTP_CONTENT_ENCODING="zstd")
    assert response.status_code == 415
    assert status(response).message == (
        "Content-Encoding 'zstd' is not supported; use gzip, deflate or none"
    )


def test_a_span_whose_id_is_not_hex_is_refused_alone_naming_the_field(
    key: str, memory: Any
) -> None:
    agent, exporter = memory
    agent.call([text("user", "first")], conversation="hex")
    agent.call([text("user", "first"), text("user", "second")], conversation="hex")
    data = otlp_json(request_of(exporter.get_finished_spans()))
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.insert(1, {**spans[1], "traceId": "zz", "name": "odd one"})
    spans.append({**spans[0], "spanId": "beef", "links": [{"traceId": "ab" * 16, "spanId": "x"}]})
    response = post(key, json.dumps(data).encode(), "application/json")
    assert response.status_code == 200
    out = json.loads(response.content)["partialSuccess"]
    assert out["rejectedSpans"] == "2"
    assert out["errorMessage"] == (
        "resourceSpans[0].scopeSpans[0].spans[1].traceId: 'zz' is not hex; "
        "resourceSpans[0].scopeSpans[0].spans[3].links[0].spanId: 'x' is not hex"
    )
    # The spans around them are stored, as those refused by the decoder leave others.
    assert read_step(key, "hex", 1)["before"][-1]["content"] == "second"


def test_it_refuses_only_the_spans_holding_an_unpaired_surrogate_whatever_the_form(
    key: str, memory: Any
) -> None:
    """A text cut inside an emoji, in a structured value (which protobuf cannot hold) or
    in a JSON text attribute: the span that holds it is refused, naming why."""
    agent, exporter = memory
    agent.call([text("user", "first")], conversation="cut")
    agent.call([text("user", "first"), text("user", "second")], conversation="cut")
    data = otlp_json(request_of(exporter.get_finished_spans()))
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    cut = "half an emoji \ud83d"
    bad = {
        "aa" * 8: {"kvlistValue": {"values": [{"key": "k", "value": {"stringValue": cut}}]}},
        "bb" * 8: {"arrayValue": {"values": [{"stringValue": "fine"}, {"stringValue": cut}]}},
        "cc" * 8: {"stringValue": json.dumps([{"role": "user", "content": cut}])},
    }
    for span_id, value in bad.items():
        attribute = {"key": "gen_ai.input.messages", "value": value}
        spans.append(
            {**spans[0], "spanId": span_id, "attributes": [*spans[0]["attributes"], attribute]}
        )
    response = post(key, json.dumps(data).encode(), "application/json")
    assert response.status_code == 200, response.content
    out = json.loads(response.content)["partialSuccess"]
    assert out["rejectedSpans"] == "3"
    errors = out["errorMessage"].split("; ")
    assert sorted(e.split(":")[0] for e in errors) == [f"span {span_id}" for span_id in bad]
    assert "spans[2].attributes[" in out["errorMessage"]
    assert "must not contain an unpaired surrogate (\\ud83d)" in out["errorMessage"]
    assert read_step(key, "cut", 1)["before"][-1]["content"] == "second"


def test_it_refuses_the_spans_of_a_resource_holding_an_unpaired_surrogate(key: str) -> None:
    messages = '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'
    good = json.loads(
        _span_json(("gen_ai.conversation.id", "kept"), ("gen_ai.input.messages", messages))
    )
    bad = json.loads(
        _span_json(("gen_ai.conversation.id", "lost"), ("gen_ai.input.messages", messages))
    )
    service = {"key": "service.name", "value": {"stringValue": "agent \ud83d"}}
    bad["resourceSpans"][0]["resource"] = {"attributes": [service]}
    bad["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "ef" * 8
    body = {"resourceSpans": [*good["resourceSpans"], *bad["resourceSpans"]]}
    response = post(key, json.dumps(body).encode(), "application/json")
    assert response.status_code == 200, response.content
    out = json.loads(response.content)["partialSuccess"]
    assert out["rejectedSpans"] == "1"
    assert out["errorMessage"] == (
        f"span {'ef' * 8}: resourceSpans[1].resource.attributes[0].value.stringValue: "
        "must not contain an unpaired surrogate (\\ud83d)"
    )
    assert read_step(key, "kept", 0)["before"][-1]["content"] == "hi"
    assert not Session.objects.filter(external_id="lost").exists()


def test_it_names_the_first_refused_spans_and_counts_the_rest_as_the_readme_says(
    key: str,
) -> None:
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    assert MAX_ERRORS_SHOWN == 5
    assert "counts every refused span (`rejected_spans`) and names the first five" in readme
    span = json.loads(_span_json())["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    spans = [{**span, "traceId": f"z{n}"} for n in range(MAX_ERRORS_SHOWN + 3)]
    body = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    response = post(key, json.dumps(body).encode(), "application/json")
    assert response.status_code == 200, response.content
    out = json.loads(response.content)["partialSuccess"]
    assert out["rejectedSpans"] == str(MAX_ERRORS_SHOWN + 3)
    named, rest = out["errorMessage"].rsplit("; ", 1)
    assert named.count("is not hex") == MAX_ERRORS_SHOWN
    assert rest == "and 3 more"


def test_it_refuses_a_missing_or_bad_key_and_a_read_only_one(db: None) -> None:
    assert post(None, b"").status_code == 401
    assert post("cv_nope_nope", b"").status_code == 401
    project, _ = project_get_or_create(slug="otlp")
    reader = apikey_create(project=project, name="reader")
    reader.key.can_write = False
    reader.key.save(update_fields=["can_write"])
    response = post(reader.secret, b"")
    assert response.status_code == 403
    assert "read" in status(response).message


def test_it_refuses_a_body_past_the_limit_with_413(key: str, settings: Any) -> None:
    settings.OTLP_MAX_BYTES = 1000
    response = post(key, b"\x0a" * 2000)
    assert response.status_code == 413
    small = gzip.compress(b"\x00" * 5000)
    assert len(small) < 1000
    assert post(key, small, HTTP_CONTENT_ENCODING="gzip").status_code == 413
    assert (
        post(key, zlib.compress(b"\x00" * 5000), HTTP_CONTENT_ENCODING="deflate").status_code == 413
    )


def test_it_answers_429_with_retry_after_when_rate_limited(key: str, settings: Any) -> None:
    settings.INGEST_RATE_LIMIT = 1
    empty = b"\n\x00"  # one ResourceSpans with nothing in it
    responses = [post(key, empty) for _ in range(4)]
    assert responses[0].status_code == 200
    limited = [r for r in responses if r.status_code == 429]
    assert limited, [r.status_code for r in responses]
    assert int(limited[0]["Retry-After"]) >= 1


def test_it_names_what_the_server_refused_in_a_span(key: str, memory: Any) -> None:
    agent, exporter = memory
    agent.call([text("user", "fine")], conversation="kept")
    agent.call([text("user", "too long")], conversation="x" * 300)
    agent.call([text("user", "fine"), text("user", "again")], conversation="kept")
    bad = format(exporter.get_finished_spans()[1].context.span_id, "016x")
    out = answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    assert out.partial_success.rejected_spans == 1
    assert f"span {bad}: body.session_id" in out.partial_success.error_message
    assert read_step(key, "kept", 1)["before"][-1]["content"] == "again"


def test_it_orders_interleaved_sessions_of_one_export_each_by_start_time(
    key: str, memory: Any
) -> None:
    agent, exporter = memory
    t0 = 1_800_000_000 * 10**9
    a = [text("user", "a0")]
    b = [text("user", "b0")]
    # Ended (and so exported) out of order, two sessions mixed.
    agent.call([*a, text("user", "a1")], conversation="A", start=t0 + 20 * MS)
    agent.call(b, conversation="B", start=t0 + 5 * MS)
    agent.call(a, conversation="A", start=t0 + 10 * MS)
    agent.call([*b, text("user", "b1")], conversation="B", start=t0 + 30 * MS)
    answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    for session, last in (("A", ["a0", "a1"]), ("B", ["b0", "b1"])):
        got = [read_step(key, session, i)["before"][-1]["content"] for i in range(2)]
        assert got == last


def test_it_keeps_the_compaction_a_call_reports(key: str, memory: Any) -> None:
    agent, exporter = memory
    agent.call(
        [text("user", "summary of the first hour")],
        conversation="compacted",
        attributes={"gen_ai.conversation.compacted": True},
    )
    answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    assert read_step(key, "compacted", 0)["obs_extra"]["gen_ai.conversation.compacted"] is True


def test_it_reads_back_a_context_continued_and_compacted_in_a_later_export(
    key: str, memory: Any
) -> None:
    """The later export's calls are sent against the steps stored before (runs of
    them): what a step reads back is still its whole context, in order."""
    agent, exporter = memory
    history = [text("user", f"question {i}") for i in range(6)]
    agent.call(history)
    answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    exporter.clear()
    grown = [*history, text("assistant", "Looking."), text("user", "And now?")]
    agent.call(grown)
    compacted = [text("user", "summary"), *grown[3:]]
    agent.call(compacted, attributes={"gen_ai.conversation.compacted": True})
    out = answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    assert not out.HasField("partial_success")
    for index, context in ((1, grown), (2, compacted)):
        step = read_step(key, "conv-1", index)
        expected = ["You debug orders.", *(m["parts"][0]["content"] for m in context)]
        assert [m["content"] for m in step["before"]] == expected


@pytest.mark.skipif(
    "usage" not in StepBody.model_fields, reason="needs the v1.1 step fields (model, usage, ...)"
)
def test_it_reads_back_the_calls_model_tools_usage_and_reply(key: str, memory: Any) -> None:
    agent, exporter = memory
    tools = [{"type": "function", "name": "read_file", "parameters": {"type": "object"}}]
    agent.call(
        [text("user", "hi")],
        conversation="call",
        attributes={
            "gen_ai.tool.definitions": json.dumps(tools),
            "gen_ai.usage.cache_read.input_tokens": 100,
        },
    )
    answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    step = read_step(key, "call", 0)
    [span] = exporter.get_finished_spans()
    assert step["trace_id"] == format(span.context.trace_id, "032x")
    assert step["span_id"] == format(span.context.span_id, "016x")
    assert step["model"] == "gpt-4o-2024-08-06"
    assert step["tools"] == tools
    assert step["usage"] == {"input_tokens": 20, "output_tokens": 8, "cache_read_tokens": 100}
    assert step["output"]["messages"][0]["content"] == "Looking."


@contextlib.contextmanager
def _only_slot_taken(settings: Any, *, wait_ms: int) -> Iterator[psycopg.Connection[Any]]:
    """One slot, which another connection (standing for another export) holds."""
    from django.db import connection

    from contextview.ingest.traces import SLOT_LOCKS
    from tests.conftest import database_url

    settings.OTLP_MAX_CONCURRENT = 1
    settings.OTLP_SLOT_WAIT_MS = wait_ms
    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, 1)", [SLOT_LOCKS])
        try:
            yield other
        finally:
            other.execute("SELECT pg_advisory_unlock_all()")


def _one_call(memory: Any, conversation: str) -> bytes:
    agent, exporter = memory
    agent.call([text("user", "hi")], conversation=conversation)
    return request_of(exporter.get_finished_spans()).SerializeToString()


def test_it_answers_503_when_every_slot_stays_taken_past_its_wait(
    key: str, memory: Any, settings: Any
) -> None:
    """Every slot taken (here by another connection): the exporter is told to retry."""
    body = _one_call(memory, "slots")
    with _only_slot_taken(settings, wait_ms=100):
        started = time.monotonic()
        busy = post(key, body)
        waited = time.monotonic() - started
    assert busy.status_code == 503
    assert busy["Retry-After"] == "1"
    assert "retry" in status(busy).message
    assert 0.1 <= waited < 5
    answer(post(key, body))
    assert read_step(key, "slots", 0)["before"][-1]["content"] == "hi"


def test_it_waits_a_moment_for_a_slot_another_export_frees(
    key: str, memory: Any, settings: Any
) -> None:
    from contextview.ingest.traces import SLOT_LOCKS

    body = _one_call(memory, "slot-freed")
    with _only_slot_taken(settings, wait_ms=5000) as other:
        # The other export ends a moment later, while this one waits for its slot.
        freeing = threading.Timer(
            0.3, lambda: other.execute("SELECT pg_advisory_unlock(%s, 1)", [SLOT_LOCKS])
        )
        freeing.start()
        try:
            answer(post(key, body))
        finally:
            freeing.join()
    assert read_step(key, "slot-freed", 0)["before"][-1]["content"] == "hi"


def _span_json(*attributes: tuple[str, str], trace: str = "ab" * 16) -> bytes:
    span = {
        "traceId": trace,
        "spanId": "cd" * 8,
        "name": "chat",
        "startTimeUnixNano": "1800000000000000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            *({"key": k, "value": {"stringValue": v}} for k, v in attributes),
        ],
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"[" * 100_000, 400),
        (b'{"resourceSpans": 5}', 400),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "x"}]}]}]}', 400),
        (_span_json(("gen_ai.input.messages", "[1, 2]")), 200),
        (_span_json(("gen_ai.input.messages", '[{"role": "user", "parts": "\\ud83d"}]')), 200),
        (_span_json(("gen_ai.input.messages", '[{"role": "user", "content": "\\ud83d"}]')), 200),
        (_span_json(("gen_ai.input.messages", "[" * 5000 + "]" * 5000)), 200),
        (_span_json(("gen_ai.usage.input_tokens", "99999999999999999999999")), 200),
        (_span_json(trace="ab"), 200),
        (
            _span_json(
                ("gen_ai.operation.name", "execute_tool"),
                ("gen_ai.tool.name", "cat\u0000" + "x" * 5000),
            ),
            200,
        ),
    ],
)
def test_it_never_answers_500_to_a_hostile_body(key: str, body: bytes, expected: int) -> None:
    response = post(key, body, "application/json")
    assert response.status_code == expected, response.content


def test_it_refuses_a_span_whose_messages_nest_past_what_ingest_takes(key: str) -> None:
    deep = "[" * 150 + "]" * 150
    messages = f'[{{"role": "user", "parts": [{{"type": "x", "value": {deep}}}]}}]'
    body = _span_json(("gen_ai.input.messages", messages), ("gen_ai.conversation.id", "deep"))
    response = post(key, body, "application/json")
    assert response.status_code == 200, response.content
    rejected = response.json()["partialSuccess"]
    assert rejected["rejectedSpans"] == "1"
    assert "body.obs.messages: nested deeper than 100 levels" in rejected["errorMessage"]
    assert not Session.objects.filter(external_id="deep").exists()


@pytest.mark.parametrize("attribute", ["gen_ai.conversation.id", "session.id"])
def test_it_refuses_the_span_of_a_session_id_holding_a_nul_naming_why(
    key: str, attribute: str
) -> None:
    messages = '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'
    body = _span_json((attribute, "order\u0000debug"), ("gen_ai.input.messages", messages))
    response = post(key, body, "application/json")
    assert response.status_code == 200, response.content
    refused = json.loads(response.content)["partialSuccess"]
    assert refused["rejectedSpans"] == "1"
    assert "cannot contain NUL" in refused["errorMessage"]
    assert not Session.objects.exists()


def test_it_names_the_agent_by_its_service_when_its_own_name_holds_a_nul(key: str) -> None:
    messages = '[{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]'
    body = json.loads(
        _span_json(
            ("gen_ai.agent.name", "bot\u0000"),
            ("gen_ai.conversation.id", "named"),
            ("gen_ai.input.messages", messages),
        )
    )
    service = {"key": "service.name", "value": {"stringValue": "shop-agent"}}
    body["resourceSpans"][0]["resource"] = {"attributes": [service]}
    response = post(key, json.dumps(body).encode(), "application/json")
    assert response.status_code == 200 and json.loads(response.content) == {}
    assert Session.objects.get(external_id="named").agent == "shop-agent"


def test_it_stores_an_export_larger_than_an_ingest_batch(
    key: str, memory: Any, settings: Any
) -> None:
    settings.INGEST_MAX_EVENTS = 2
    agent, exporter = memory
    context: list[dict[str, Any]] = []
    for i in range(5):
        context = [*context, text("user", f"turn {i}")]
        agent.call(context, conversation="chunked")
    answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    assert [m["content"] for m in read_step(key, "chunked", 4)["before"]][-1] == "turn 4"


def _late_after_three(key: str, memory: Any, conversation: str) -> bytes:
    """Three calls of `conversation` posted one export each, in order; the export of a
    fourth that started between the first two (a late span), not posted."""
    agent, exporter = memory
    t0 = 1_800_000_000 * 10**9
    for i, start in enumerate((t0, t0 + 20 * MS, t0 + 30 * MS)):
        agent.call([text("user", f"on time {i}")], conversation=conversation, start=start)
        answer(post(key, request_of(exporter.get_finished_spans()[-1:]).SerializeToString()))
    agent.call([text("user", "late")], conversation=conversation, start=t0 + 10 * MS)
    return bytes(request_of(exporter.get_finished_spans()[-1:]).SerializeToString())


def test_it_adds_a_span_too_late_to_reorder_at_the_end(
    key: str, memory: Any, settings: Any
) -> None:
    settings.OTLP_REORDER_MAX_STEPS = 1
    out = answer(post(key, _late_after_three(key, memory, "cap")))
    assert not out.HasField("partial_success")
    got = [read_step(key, "cap", i)["before"][-1]["content"] for i in range(4)]
    assert got == ["on time 0", "on time 1", "on time 2", "late"]


def test_it_refuses_only_the_session_whose_values_the_database_cannot_hold(
    key: str, memory: Any
) -> None:
    agent, exporter = memory
    agent.call([text("user", "fine")], conversation="good")
    agent.call([text("r" * 60, "a role longer than any")], conversation="odd")
    odd = format(exporter.get_finished_spans()[1].context.span_id, "016x")
    response = post(key, request_of(exporter.get_finished_spans()).SerializeToString())
    out = answer(response)
    assert out.partial_success.rejected_spans == 1
    assert f"span {odd}" in out.partial_success.error_message
    assert read_step(key, "good", 0)["before"][-1]["content"] == "fine"


@pytest.mark.parametrize(
    ("name", "kept"),
    [("cat\u0000" + "x" * 5000, "cat\u0000" + "x" * 196), ("\u2400" * 300, "\u2400" * 100)],
)
def test_it_keeps_a_tool_span_whatever_its_name_holds(key: str, name: str, kept: str) -> None:
    from contextview.core.textsafe import restore

    body = _span_json(("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", name))
    response = post(key, body, "application/json")
    assert response.status_code == 200
    assert json.loads(response.content) == {}
    [run] = ToolRun.objects.all()
    assert restore(run.name) == kept


def test_it_accepts_a_tool_span_with_ids_of_the_wrong_length_and_keeps_nothing(key: str) -> None:
    body = _span_json(("gen_ai.operation.name", "execute_tool"), trace="ab")
    response = post(key, body, "application/json")
    assert response.status_code == 200
    assert json.loads(response.content) == {}  # no partial success: it is not refused
    assert not ToolRun.objects.exists()


HOSTILE_FORMS: list[dict[str, Any]] = [
    # OpenLLMetry's flattened form with values of every wrong kind
    {"llm.request.type": "chat", "gen_ai.prompt.0.content": 7, "gen_ai.prompt.0.role": 3},
    {"llm.request.type": "chat", "gen_ai.prompt.0.content": "[1, 2]",
     "gen_ai.prompt.0.tool_calls.0.arguments": "{", "gen_ai.completion.0.content": ["a"]},
    {"llm.request.type": "completion", "gen_ai.prompt.0.user": "", "gen_ai.prompt.x.role": "u",
     "llm.request.functions.0.parameters": "{not json"},
    {"llm.request.type": "chat", "gen_ai.prompt.0.role": "tool",
     "gen_ai.prompt.0.tool_call_id": "c", "gen_ai.prompt.0.content": '[{"type": 5}]'},
    # the Vercel AI SDK's form, its JSON texts broken or of the wrong shape
    {"ai.operationId": "ai.generateText.doGenerate", "ai.prompt.messages": "{"},
    {"ai.operationId": "ai.streamText.doStream", "ai.prompt.messages": '{"role": "user"}'},
    {"ai.operationId": "ai.generateText.doGenerate", "ai.prompt.messages": "[1, null]"},
    {"ai.operationId": "ai.generateText.doGenerate",
     "ai.prompt.messages": '[{"role": 5, "content": [1, {"type": "tool-result"},'
                           ' {"type": "image", "image": 3}]}]',
     "ai.prompt.tools": ["{", "1"], "ai.response.toolCalls": '[1, {"toolName": []}]',
     "ai.usage.inputTokens": -4, "ai.usage.outputTokens": "x"},
    {"ai.operationId": "ai.generateObject.doGenerate", "ai.prompt.messages": "[]",
     "ai.prompt.tools": "[3]", "ai.response.toolCalls": "{}"},
    # ADK's call_llm span, its JSON broken or of the wrong shape
    {"gcp.vertex.agent.llm_request": "{not", "gcp.vertex.agent.llm_response": "<not serializable>"},
    {"gcp.vertex.agent.llm_request": '{"contents": 5, "config": []}'},
    {"gcp.vertex.agent.llm_request": '{"contents": [1, {"role": 2, "parts": 3}]}'},
    {"gcp.vertex.agent.llm_request":
         '{"config": {"system_instruction": 5, "tools": [1, {"function_declarations": 3}]},'
         ' "contents": [{"role": "model", "parts": [1, {"function_call": 2},'
         ' {"function_response": {"response": []}}, {"file_data": {}}]}]}',
     "gcp.vertex.agent.llm_response": '{"content": {"parts": "x"}, "finish_reason": 1}'},
    # Pydantic AI's events attribute and Strands' Bedrock blocks, of the wrong shape
    {"gen_ai.operation.name": "chat",
     "events": '[1, {"message": 5}, {"role": 3}, {"event.name": "gen_ai.choice", "message": "x"},'
               ' {"event.name": "gen_ai.user.message", "content": [{"kind": 1}, {"toolUse": 5},'
               ' {"toolResult": {"content": 7}}, {"reasoningContent": {"reasoningText": 1}}]}]'},
    {"gen_ai.operation.name": "chat", "gen_ai.system": "strands-agents",
     "gen_ai.usage.input_tokens": 5, "gen_ai.usage.cache_write_input_tokens": "x",
     "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "reasoningContent",'
                              ' "content": {"image": {"format": 5}}}, {"type": "binary"},'
                              ' {"type": "tool_call_response", "result": [{"text": 1}]}]}]'},
]  # fmt: skip


def test_no_span_of_the_forms_beyond_the_contract_costs_another_or_a_500(
    key: str, memory: Any
) -> None:
    agent, exporter = memory
    for n, attributes in enumerate(HOSTILE_FORMS):
        span = agent.tracer.start_span(f"hostile {n}", attributes=attributes)
        span.end()
    agent.call([text("user", "still here")], conversation="hostile")
    response = post(key, request_of(exporter.get_finished_spans()).SerializeToString())
    out = answer(response)
    # Each hostile span is stored or refused naming what is wrong; the good call is stored.
    assert out.partial_success.rejected_spans <= len(HOSTILE_FORMS)
    assert read_step(key, "hostile", 0)["before"][-1]["content"] == "still here"


def test_it_refuses_a_spring_ai_span_whose_prompt_holds_no_texts_and_keeps_the_others(
    key: str, memory: Any
) -> None:
    agent, exporter = memory
    call = {"gen_ai.operation.name": "chat", "gen_ai.system": "openai"}
    bad = agent.tracer.start_span("chat gpt-4o-mini", attributes=call)
    bad.add_event("gen_ai.content.prompt", {"gen_ai.prompt": [1.5, 2.5]})
    bad.end()
    good = agent.tracer.start_span("chat gpt-4o-mini", attributes=call)
    good.add_event("gen_ai.content.prompt", {"gen_ai.prompt": ["You debug orders.", "Why?"]})
    good.end()
    out = answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    assert out.partial_success.rejected_spans == 1
    assert format(bad.context.span_id, "016x") in out.partial_success.error_message
    assert "gen_ai.prompt: must be a text or a list of texts" in out.partial_success.error_message
    got = read_step(key, format(good.context.trace_id, "032x"), 0)
    assert [(m["role"], m["content"]) for m in got["before"]] == [
        ("user", "You debug orders."),
        ("user", "Why?"),
    ]


def test_it_keeps_a_part_whose_type_is_no_name_as_given(key: str) -> None:
    odd = {"type": {"not": "a name"}, "content": "x"}
    messages = [{"role": "user", "parts": [{"type": "text", "content": "hello"}, odd]}]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": "odd-part",
        "gen_ai.input.messages": json.dumps(messages),
    }
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "chat",
        "startTimeUnixNano": "1700000000000000000",
        "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
    }
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    response = post(key, body, "application/json")
    assert response.status_code == 200, response.content
    assert json.loads(response.content) == {}
    content = read_step(key, "odd-part", 0)["before"][0]["content"]
    assert content == [{"type": "text", "text": "hello"}, odd]


def _stats_of(session: Session) -> list[tuple[int, str]]:
    from contextview.sessions.models import Step

    steps = Step.objects.with_stats().filter(session=session).order_by("index")
    return [(s.index, s.stats_status) for s in steps]


def test_statistics_computed_while_a_late_span_moved_their_steps_do_not_stick(
    key: str, memory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A late span stores the steps after it again, under new ids, while a worker may be
    # computing the old ones: what it then writes must not stand in the way of the
    # statistics of the steps now at those indices (they were pending for ever, each
    # run failing on the index already taken).
    from contextview.sessions.models import Step, StepStats
    from contextview.stats import services

    late = _late_after_three(key, memory, "race")
    session = Session.objects.get(external_id="race")
    read = services._chunk_read

    def read_then_the_late_span_comes(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(services, "_chunk_read", read)
        chunk = read(*args, **kwargs)
        answer(post(key, late))  # the steps just read are stored again, moved
        return chunk

    monkeypatch.setattr(services, "_chunk_read", read_then_the_late_span_comes)
    services.session_stats_compute(session_id=session.pk)
    # Nothing was stored for the steps that are gone (the progress counts those rows).
    assert not StepStats.objects.filter(session_id=session.pk).exclude(
        step_id__in=Step.objects.filter(session=session).values("pk")
    )
    services.session_stats_compute(session_id=session.pk)
    assert _stats_of(session) == [(0, "ready"), (1, "ready"), (2, "ready"), (3, "ready")]
    session.refresh_from_db()
    assert (session.stats_status, session.stats_steps_done) == ("ready", 4)
    assert read_step(key, "race", 1)["before"][-1]["content"] == "late"


def test_statistics_left_by_a_step_that_is_gone_give_way_to_the_one_at_its_index(
    key: str, memory: Any
) -> None:
    # What a worker wrote for a step that a late span moved, committed just after the
    # move, is in the way of the step now at that index until it is written.
    from django.db import connection

    from contextview.stats import services

    agent, exporter = memory
    for i in range(2):
        agent.call([text("user", f"call {i}")], conversation="gone", start=(i + 1) * 10**9)
    answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    session = Session.objects.get(external_id="gone")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO cv_step_stats (step_id, session_id, index, status, stats) "
            "VALUES (%s, %s, 1, 'ready', '{}')",
            [10**12, session.pk],
        )
    services.session_stats_compute(session_id=session.pk)
    assert _stats_of(session) == [(0, "ready"), (1, "ready")]


@pytest.mark.parametrize(
    "attributes",
    [
        # an OpenInference message at an index that is a digit to str.isdigit alone
        {
            "openinference.span.kind": "LLM",
            "session.id": "odd-index",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "hi",
            "llm.input_messages.².message.role": "user",
            "llm.input_messages.².message.content": "never read",
        },
    ],
)
def test_it_reads_no_number_from_digits_int_refuses(key: str, attributes: dict[str, str]) -> None:
    # It was answered 500 and the export lost.
    body = _span_json(*attributes.items())
    response = post(key, body, "application/json")
    assert response.status_code == 200, response.content
    assert json.loads(response.content) == {}
    step = read_step(key, "odd-index", 0)
    assert [m["content"] for m in step["before"]] == ["hi"]


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        # a digit to str.isdigit alone (it was answered 500 and the export lost)
        ("gen_ai.usage.input_tokens", "²", "'²'"),
        ("gen_ai.usage.output_tokens", "lots", "'lots'"),
        ("llm.token_count.prompt", "-5", "'-5'"),
    ],
)
def test_a_token_count_that_is_no_count_refuses_its_span_naming_it(
    key: str, name: str, value: Any, shown: str
) -> None:
    # Read as no usage, the step lost its usage and no one was told.
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": "odd-count",
        "gen_ai.input.messages": json.dumps([text("user", "hi")]),
        name: value,
    }
    response = post(key, _span_json(*attributes.items()), "application/json")
    assert response.status_code == 200, response.content
    refused = json.loads(response.content)["partialSuccess"]
    assert refused["rejectedSpans"] == "1"
    assert refused["errorMessage"].endswith(
        f"{name}: must be a whole number of tokens, not {shown}"
    )


def test_a_message_whose_parts_are_no_list_refuses_its_span(key: str) -> None:
    # Read as a message of no content, its text was lost without a word.
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": "odd-parts",
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": "notalist"}]),
    }
    response = post(key, _span_json(*attributes.items()), "application/json")
    refused = json.loads(response.content)["partialSuccess"]
    assert refused["rejectedSpans"] == "1"
    assert refused["errorMessage"].endswith(
        "gen_ai.input.messages: a message's parts must be a list, not 'notalist'"
    )


def _window_calls(agent: Any, conversation: str) -> None:
    """An agent that prompts "continue" after every reply and keeps the last three
    exchanges: from the fourth call on, the oldest reply and "continue" leave."""
    history: list[dict[str, Any]] = []
    t0 = 1_800_000_000 * 10**9
    for n in range(6):
        history = [*history, text("assistant", f"part {n} of the report"), text("user", "continue")]
        agent.call(history[-6:], conversation=conversation, start=t0 + n * MS)


def _ops_and_ids(key: str, session: str) -> list[tuple[list[str], list[str]]]:
    steps = [read_step(key, session, i) for i in range(6)]
    return [([op["op"] for op in s["inferred_ops"]], [m["id"] for m in s["before"]]) for s in steps]


def test_it_reads_a_window_sliding_over_repeated_prompts_as_drops(key: str, memory: Any) -> None:
    agent, exporter = memory
    _window_calls(agent, "window")
    answer(post(key, request_of(exporter.get_finished_spans()).SerializeToString()))
    got = _ops_and_ids(key, "window")
    # Each slide drops the oldest reply and its "continue"; nothing moves or is rewritten.
    assert [ops for ops, _ in got] == [[], [], [], ["drop"], ["drop"], ["drop"]]
    assert len(read_step(key, "window", 3)["inferred_ops"][0]["targets"]) == 2
    # The same calls exported one at a time, the last two swapped: the same steps.
    exporter.clear()
    _window_calls(agent, "late")
    spans = list(exporter.get_finished_spans())
    for n in (0, 1, 2, 3, 5, 4):
        answer(post(key, request_of([spans[n]]).SerializeToString()))
    assert _ops_and_ids(key, "late") == got
