"""The official OTLP/HTTP exporter (protobuf, gzip) against a real gunicorn."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from contextview.ingest.traces import session_lock_key
from tests.conftest import database_url
from tests.otlp.conftest import Agent, text

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SECOND = 1_000_000_000


@pytest.fixture
def project(transactional_db: None) -> Any:
    from contextview.projects.services import apikey_create, project_get_or_create

    project, _ = project_get_or_create(slug="otlp")
    project.secret = apikey_create(project=project, name="otlp").secret
    return project


@pytest.fixture
def agent(gunicorn_api: str, project: Any) -> Iterator[Agent]:
    exporter = OTLPSpanExporter(
        endpoint=f"{gunicorn_api}/v1/traces",
        headers={"Authorization": f"Bearer {project.secret}"},
        compression=Compression.Gzip,
    )
    made = Agent(exporter)
    yield made
    made.shutdown()


@pytest.fixture
def read(gunicorn_api: str, project: Any) -> Iterator[Any]:
    with httpx.Client(
        base_url=f"{gunicorn_api}/api/v1", headers={"Authorization": f"Bearer {project.secret}"}
    ) as client:

        def get(path: str) -> Any:
            response = client.get(path)
            assert response.status_code == 200, response.text
            return response.json()

        yield get


def test_it_stores_a_resent_context_once(agent: Agent, read: Any, project: Any) -> None:
    from contextview.sessions.models import Message

    context = [text("user", "Why does order SO20260101007 time out?")]
    for i in range(6):
        agent.call(context, reply=f"reply {i}")
        context = [*context, text("assistant", f"reply {i}"), text("user", f"more {i}")]
    assert read("/sessions/conv-1")["steps"] == 6
    last = read("/sessions/conv-1/steps/5")
    assert len(last["before"]) == 1 + 1 + 2 * 5
    assert last["before"][-1]["content"] == "more 4"
    # system + the first question + two new messages per call after it: each once.
    assert Message.objects.filter(project=project).count() == 2 + 2 * 5


def test_it_takes_what_the_exporter_sends_with_deflate(
    gunicorn_api: str, project: Any, read: Any
) -> None:
    made = Agent(
        OTLPSpanExporter(
            endpoint=f"{gunicorn_api}/v1/traces",
            headers={"Authorization": f"Bearer {project.secret}"},
            compression=Compression.Deflate,
        )
    )
    made.call([text("user", "sent with deflate")], conversation="deflated")
    made.shutdown()
    assert read("/sessions/deflated/steps/0")["before"][-1]["content"] == "sent with deflate"


def test_it_puts_a_late_span_in_its_place(agent: Agent, read: Any) -> None:
    t0 = time.time_ns()
    one = [text("user", "one")]
    two = [*one, text("user", "two")]
    three = [*two, text("user", "three")]
    agent.call(one, start=t0, conversation="late")
    agent.call(three, start=t0 + 3 * SECOND, conversation="late")
    agent.call(two, start=t0 + 2 * SECOND, conversation="late")  # arrives last
    steps = [read(f"/sessions/late/steps/{i}") for i in range(3)]
    assert [s["before"][-1]["content"] for s in steps] == ["one", "two", "three"]
    assert [s["timestamp"] for s in steps] == sorted(s["timestamp"] for s in steps)
    assert read("/sessions/late")["steps"] == 3
    # What the moved step carried came along.
    assert steps[2]["obs_extra"]["span_id"]


def test_it_ignores_spans_that_are_not_llm_calls(agent: Agent, read: Any) -> None:
    agent.other()
    agent.call([text("user", "hi")], conversation="mixed")
    agent.other("invoke_agent support-bot")
    assert read("/sessions/mixed")["steps"] == 1
    assert [s["session_id"] for s in read("/sessions")["sessions"]] == ["mixed"]


def test_it_retries_through_a_503_while_another_request_holds_the_session(
    agent: Agent, read: Any, project: Any, caplog: Any
) -> None:
    """The server answers 503 with Retry-After past its lock timeout; the exporter
    waits that long, sends again, and the span is stored once."""
    from django.db import connection

    key = session_lock_key(project_id=project.pk, session_id="busy")
    with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", [key])
        release = threading.Timer(2.5, lambda: holder.execute("SELECT pg_advisory_unlock_all()"))
        release.start()
        with caplog.at_level(logging.WARNING):
            started = time.monotonic()
            agent.call([text("user", "are you there?")], conversation="busy")
            took = time.monotonic() - started
        release.join()
    assert "503" in caplog.text or "Service Unavailable" in caplog.text
    assert took > 2
    assert read("/sessions/busy")["steps"] == 1


def test_it_orders_one_session_sent_by_two_exporters_at_once(
    gunicorn_api: str, project: Any, read: Any
) -> None:
    """Two processes of one agent export the same conversation at the same time, their
    calls interleaved in time: the session ends in start order, without gaps."""
    t0 = time.time_ns()
    agents = [
        Agent(
            OTLPSpanExporter(
                endpoint=f"{gunicorn_api}/v1/traces",
                headers={"Authorization": f"Bearer {project.secret}"},
            )
        )
        for _ in range(2)
    ]

    def send(which: int) -> None:
        for n in range(which, 12, 2):
            agents[which].call(
                [text("user", f"call {n}")], conversation="shared", start=t0 + n * SECOND
            )

    threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for agent in agents:
        agent.shutdown()
    assert read("/sessions/shared")["steps"] == 12
    got = [read(f"/sessions/shared/steps/{i}")["before"][-1]["content"] for i in range(12)]
    assert got == [f"call {n}" for n in range(12)]
