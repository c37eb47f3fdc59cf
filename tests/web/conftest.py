"""Fixtures for the dashboard tests: users with roles, and a realistic session.

Data goes in through the real ingest API (as an agent would send it), and
statistics are computed by the same service the Celery worker runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from contextview.projects.models import Membership, Project
from contextview.projects.services import membership_set
from contextview.sessions.models import Session
from contextview.stats.services import SessionBusy, session_stats_compute
from tests.api_client import Api, step
from tests.waiting import wait_for

NGINX_504 = "\n".join(
    [
        "2026/01/15 10:00:01 [info] 1234#0: *87 client 10.0.0.7 GET /api/cart 200 0.012s",
        "2026/01/15 10:00:03 [error] 1234#0: *88 upstream timed out (110: Connection timed out) "
        'while reading response header from upstream, request: "GET /api/orders/SO20260101007 '
        'HTTP/1.1", upstream: "http://inventory-svc:8080/reserve", status 504 after 3 s',
        "2026/01/15 10:00:04 [info] 1234#0: *89 client 10.0.0.9 GET /healthz 200 0.001s",
    ]
)
SYSTEM = {"id": "sys", "role": "system", "content": "You debug checkout problems for the shop."}
QUESTION = {"id": "u1", "role": "user", "content": "Why does order SO20260101007 time out?"}
LOG = {"id": "tool_result_32", "role": "tool", "tool": "read_file", "content": NGINX_504}
SUMMARY = {"id": "sum_1", "role": "tool", "content": "504 from inventory-svc after 3 s"}


def live_url(page: str) -> str:
    """The address a session page (or a live tail's answer) polls next."""
    match = re.search(r'id="live-tail"[^>]*hx-get="([^"]+)"', page)
    assert match, "no live tail on the page"
    return unescape(match.group(1))


THOUGHT = {
    "id": "a1",
    "role": "assistant",
    "content": "Member id A12345 asked; checking inventory.",
}


def order_session_events(session_id: str = "order-debug-42") -> list[dict[str, Any]]:
    """Three steps: a lossy summary, a rewrite and a drop, then a reload in sliding mode."""
    return [
        {
            "id": f"{session_id}-start",
            "type": "session",
            "body": {
                "session_id": session_id,
                "agent": "support-bot",
                "model": "gpt-4o",
                "encoding": "cl100k_base",
                "mode": "summary",
                "budget": {"max_tokens": 400, "reserved_tokens": 40},
                "pinned": ["member id A12345"],
            },
        },
        step(session_id, 0, [SYSTEM, QUESTION, LOG], mode="summary",
             action={"action": "summarize", "target": "tool_result_32", "result": SUMMARY,
                     "reason": "log body is normal; keep error code and timeout"},
             reason="occupancy over 80%", before_tokens=160, after_tokens=60),
        step(session_id, 1, [{"id": "sys"}, {"id": "u1"}, {"id": "sum_1"}, THOUGHT],
             mode="summary",
             actions=[
                 {"ids": ["u1"], "role": "user", "justification": "add what the customer said",
                  "new_content": "Why does order SO20260101007 time out at checkout since Monday?"},
                 {"action": "drop", "target": "a1", "reason": "stale thought"},
             ]),
        step(session_id, 2, [{"id": "sys"}, {"id": "u1"}, {"id": "sum_1"}], mode="sliding",
             action={"action": "reload", "target": "tool_result_32",
                     "reason": "need the upstream URL again"}),
    ]  # fmt: skip


def compute_stats(project: Project, session_id: str) -> Session:
    """Compute the session's statistics here and now.

    A Celery worker that another test started may be computing the same session
    (the ingest queued it): then wait for its lock and compute after it.
    """
    session = Session.objects.get(project=project, external_id=session_id)

    def computed() -> bool:
        try:
            session_stats_compute(session_id=session.pk)
        except SessionBusy:
            return False
        return True

    wait_for(computed, what=f"the statistics lock of {session_id}")
    session.refresh_from_db()
    return session


@pytest.fixture
def seed(api: Api) -> Callable[..., Session]:
    """Post a list of events through the API, compute statistics, return the session."""

    def post(events: list[dict[str, Any]], *, stats: bool = True) -> Session:
        response = api.ingest({"batch": events})
        assert response.status_code == 207, response.content
        failed = [r for r in response.json()["results"] if r["status"] >= 300]
        assert not failed, failed
        session_id = next(e["body"]["session_id"] for e in events)
        if stats:
            return compute_stats(api.project, session_id)
        return Session.objects.get(project=api.project, external_id=session_id)

    return post


@pytest.fixture
def order_session(seed: Callable[..., Session]) -> Session:
    return seed(order_session_events())


@pytest.fixture
def login(api: Api) -> Callable[..., Client]:
    """A signed-in test client for a new user with `role` in the `api` project."""

    def make(role: str = Membership.Role.EDITOR, username: str | None = None) -> Client:
        user = User.objects.create_user(username or f"{role}-user", password="pw-for-tests")
        membership_set(user=user, project=api.project, role=role)
        client = Client()
        client.force_login(user)
        return client

    return make
