"""The sessions list tells sessions apart at a glance: what each was asked to do and when
its agent was last heard from, beside its agent, model, status and steps, read with a
fixed number of queries whatever the page holds."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from contextview.sessions.models import Session
from tests.api_client import Api, step
from tests.web.conftest import order_session_events

pytestmark = pytest.mark.django_db

SYSTEM = {"id": "sys", "role": "system", "content": "You answer the shop's customers."}


def _row(page: str, session_id: str) -> str:
    """The list's row of `session_id`."""
    for row in re.findall(r"<tr>.*?</tr>", page, re.S):
        if f">{session_id}</a>" in row:
            return str(row)
    raise AssertionError(f"no row for {session_id}")


def _task(page: str, session_id: str) -> str | None:
    found = re.search(r'<p class="session-task" title="[^"]*">([^<]*)</p>', _row(page, session_id))
    return found.group(1) if found else None


def _post(api: Api, events: list[dict[str, Any]]) -> None:
    response = api.ingest({"batch": events})
    assert response.status_code == 207
    assert all(r["status"] < 300 for r in response.json()["results"]), response.json()


def test_it_shows_what_each_session_was_asked_and_when_it_was_last_heard_from(
    api: Api, login: Callable[..., Client]
) -> None:
    _post(api, order_session_events())
    # A label the agent gave its session wins over the question in its context.
    _post(api, [
        {"id": "r-start", "type": "session",
         "body": {"session_id": "refund-7", "agent": "support-bot",
                  "metadata": {"task": "refund stuck\n  since Monday", "ticket": 7}}},
        step("refund-7", 0, [SYSTEM, {"id": "u1", "role": "user", "content": "Where is it?"}]),
    ])  # fmt: skip
    # The first context has only tools' results: the question comes in the next step.
    read = {"type": "tool_result", "tool_use_id": "t1", "content": "200 OK"}
    results = {"id": "r1", "role": "user", "content": [read]}
    ask = {"id": "u2", "role": "user", "content": "Is order SO20260101042 shipped?"}
    _post(api, [step("late-ask", 0, [SYSTEM, results])])
    _post(api, [step("late-ask", 1, [{"id": "sys"}, {"id": "r1"}, ask])])
    # Steps sent before the session's event: the label the event brings later replaces
    # the question they gave.
    _post(api, [step("labelled-late", 0, [SYSTEM, ask])])
    label = {"session_id": "labelled-late", "metadata": {"task": "shipping check"}}
    _post(api, [{"id": "l-start", "type": "session", "body": label}])
    # Nothing asked at all.
    _post(api, [step("silent", 0, [SYSTEM])])
    Session.objects.filter(external_id="refund-7").update(
        last_event_at=timezone.now() - timedelta(hours=3, minutes=5)
    )

    page = login("viewer").get(f"/?project={api.project.slug}").content.decode()
    assert _task(page, "order-debug-42") == "Why does order SO20260101007 time out?"
    assert _task(page, "refund-7") == "refund stuck since Monday"
    assert _task(page, "late-ask") == "Is order SO20260101042 shipped?"
    assert _task(page, "labelled-late") == "shipping check"
    assert _task(page, "silent") is None
    assert "Last event</th>" in page
    refund = _row(page, "refund-7")
    assert re.search(r'<time datetime="[^"]+" title="[^"]+">3 h 5 min ago</time>', refund)
    assert "support-bot" in refund and "running" in refund


def test_it_cuts_a_long_question_to_a_line_and_keeps_the_rest_in_its_title(
    api: Api, login: Callable[..., Client]
) -> None:
    question = "Why does checkout fail? " + "The log says 504 again. " * 20
    _post(api, [step("long-ask", 0, [SYSTEM, {"id": "u1", "role": "user", "content": question}])])
    task = _task(login("viewer").get("/").content.decode(), "long-ask")
    assert task is not None and task.startswith("Why does checkout fail? The log says 504")
    assert len(task) == 200 and task.endswith("…")


def test_it_reads_a_page_of_sessions_with_as_many_queries_for_fifty_as_for_two(
    api: Api, login: Callable[..., Client]
) -> None:
    client = login("viewer")

    def queries(count: int) -> int:
        asks = [{"id": "u", "role": "user", "content": f"Ticket {n}?"} for n in range(count)]
        _post(api, [step(f"ticket-{count}-{n}", 0, [SYSTEM, ask]) for n, ask in enumerate(asks)])
        client.get(f"/?project={api.project.slug}")  # the project is remembered once
        with CaptureQueriesContext(connection) as captured:
            page = client.get(f"/?project={api.project.slug}").content.decode()
        assert _task(page, f"ticket-{count}-0") == "Ticket 0?"
        return len(captured)

    two = queries(2)
    assert queries(48) == two  # a full page of 50
    assert "Older sessions" not in client.get("/").content.decode()
    _post(api, [step("ticket-one-more", 0, [SYSTEM])])
    assert 'rel="next">Older sessions →' in client.get("/").content.decode()  # still by 50
    # Sorted by another column, the next page holds no older sessions.
    assert 'rel="next">Next page →' in client.get("/?sort=tokens").content.decode()


def test_the_migration_gives_sessions_stored_before_it_their_task(api: Api) -> None:
    _post(api, order_session_events())
    _post(api, [
        {"id": "r-start", "type": "session",
         "body": {"session_id": "refund-7", "metadata": {"task": "refund stuck"}}},
        {"id": "empty-start", "type": "session", "body": {"session_id": "no-steps"}},
    ])  # fmt: skip
    Session.objects.update(task="")
    migration = importlib.import_module("contextview.sessions.migrations.0016_session_task")
    migration.tasks_filled(None, SimpleNamespace(connection=connection))
    tasks = dict(Session.objects.values_list("external_id", "task"))
    assert tasks == {
        "order-debug-42": "Why does order SO20260101007 time out?",
        "refund-7": "refund stuck",
        "no-steps": "",
    }
