"""The live tail: a running session's page learns of new steps by polling, says when
its agent went quiet, and shows a silent session as stale and its directives expired."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from html import unescape

from django.test import Client, override_settings
from django.utils import timezone

from contextview.sessions.models import Session
from tests.api_client import Api, step
from tests.web.conftest import compute_stats, live_url

HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "steps"}


def _silence(session: Session, **ago: float) -> None:
    Session.objects.filter(pk=session.pk).update(last_event_at=timezone.now() - timedelta(**ago))


def test_it_polls_and_answers_with_only_the_bar_while_nothing_is_new(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    page = client.get(f"/sessions/{order_session.pk}/").content.decode()
    assert "Live: new steps appear here" in page
    poll = client.get(live_url(page), **HTMX)
    assert poll["HX-Retarget"] == "#live-tail"
    body = poll.content.decode()
    assert 'id="live-tail"' in body and "step-row-" not in body


def test_it_sends_a_new_step_with_the_list_chart_and_count(
    api: Api, login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    url = live_url(client.get(f"/sessions/{order_session.pk}/").content.decode())
    api.ingest({"batch": [step("order-debug-42", 3, [{"id": "sys"}, {"id": "u1"}])]})
    poll = client.get(url, **HTMX)
    assert "HX-Retarget" not in poll
    body = poll.content.decode()
    assert 'id="step-row-3"' in body and 'id="step-row-0"' in body
    assert 'id="overview-chart" hx-swap-oob="true"' in body and "[3, " in unescape(body)
    assert re.search(r'<dd id="fact-steps" hx-swap-oob="true">4\b', body)
    # The next poll knows it has seen step 3: nothing new again.
    assert client.get(live_url(body), **HTMX)["HX-Retarget"] == "#live-tail"


def test_it_brings_the_new_cost_and_figures_of_a_computed_step(
    api: Api, login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    page = client.get(f"/sessions/{order_session.pk}/").content.decode()
    assert '<dd id="session-cost"><span class="muted" title="no call of this session' in page
    usage = {"input_tokens": 1000, "cache_read_tokens": 2000, "output_tokens": 500}
    api.ingest({"batch": [step("order-debug-42", 3, [{"id": "sys"}], usage=usage)]})
    compute_stats(api.project, "order-debug-42")
    body = client.get(live_url(page), **HTMX).content.decode()
    # The header follows the session: its cost (gpt-4o: $0.01) and its sums.
    assert '<dd id="session-cost" hx-swap-oob="true">$0.0100</dd>' in body
    assert re.search(r'<dd id="fact-peak" hx-swap-oob="true">\d+%</dd>', body)
    assert '<dd id="fact-saved" hx-swap-oob="true">' in body


def test_it_says_when_the_agent_went_quiet(
    login: Callable[..., Client], order_session: Session
) -> None:
    _silence(order_session, minutes=3)
    page = login("viewer").get(f"/sessions/{order_session.pk}/").content.decode()
    assert "The agent has gone quiet: no event for 3 min" in page
    assert "status-stale" not in page


@override_settings(SESSION_STALE_AFTER_SECONDS=600)
def test_it_shows_a_silent_session_as_stale_and_its_directive_as_expired(
    api: Api, login: Callable[..., Client], order_session: Session
) -> None:
    editor = login("editor")
    url = live_url(editor.get(f"/sessions/{order_session.pk}/").content.decode())
    editor.post(f"/sessions/{order_session.pk}/mode/", {"mode": "hybrid"})
    _silence(order_session, minutes=11)
    # A page left open says so at its next poll.
    body = editor.get(url, **HTMX).content.decode()
    assert "Stale:" in body and "state-expired" in body[body.index('id="directives-panel"') :]
    listing = editor.get(f"/?project={api.project.slug}").content.decode()
    assert re.search(r"order-debug-42.*?status-running.*?status-stale", listing, re.S)
    page = editor.get(f"/sessions/{order_session.pk}/").content.decode()
    assert "Stale:" in page and "stale after 10 min" in page
    assert "state-expired" in page and "no event from the agent for 11 min" in page


def test_it_expires_a_pending_directive_when_the_session_ends(
    api: Api, login: Callable[..., Client], order_session: Session
) -> None:
    editor = login("editor")
    url = live_url(editor.get(f"/sessions/{order_session.pk}/").content.decode())
    editor.post(f"/sessions/{order_session.pk}/mode/", {"mode": "hybrid"})
    end = {"id": "end", "type": "session_end",
           "body": {"session_id": "order-debug-42", "status": "failed"}}  # fmt: skip
    api.ingest({"batch": [end]})
    poll = editor.get(url, **HTMX)
    assert poll["HX-Trigger"] == "session-ended"
    assert 'id="live-tail"' not in poll.content.decode()  # polling stops
    page = editor.get(f"/sessions/{order_session.pk}/").content.decode()
    assert "the session ended (failed) before the agent answered" in page
    assert "status-stale" not in page and 'id="live-tail"' not in page


def test_it_brings_a_directive_sent_elsewhere_its_answer_and_the_new_mode(
    api: Api, login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    url = live_url(client.get(f"/sessions/{order_session.pk}/").content.decode())
    # Sent through the API while the page is open: the page's next poll shows it.
    sent = api.post("/sessions/order-debug-42/directives", {"type": "set_mode", "mode": "hybrid"})
    assert sent.status_code == 201, sent.text
    body = client.get(url, **HTMX).content.decode()
    panel = body[body.index('id="directives-panel" hx-swap-oob="true"') :]
    assert "mode → hybrid" in panel and "state-pending" in panel
    # The agent answers: the next poll shows it applied.
    directive = sent.json()["id"]
    acked = api.post(f"/sessions/order-debug-42/control/{directive}/ack", {"status": "applied"})
    assert acked.status_code == 200, acked.text
    body = client.get(live_url(body), **HTMX).content.decode()
    assert "state-applied" in body[body.index('id="directives-panel"') :]
    # The agent reports its new mode: the header's mode follows.
    mode = {
        "id": "mode",
        "type": "session",
        "body": {"session_id": "order-debug-42", "mode": "hybrid"},
    }
    api.ingest({"batch": [mode]})
    body = client.get(live_url(body), **HTMX).content.decode()
    assert '<dd id="current-mode" hx-swap-oob="true">hybrid</dd>' in body
    # Nothing new since: only the live bar again.
    assert client.get(live_url(body), **HTMX)["HX-Retarget"] == "#live-tail"


def test_it_brings_the_task_line_the_first_step_gave(
    api: Api, login: Callable[..., Client]
) -> None:
    """A session opened before its agent's first call learns what it was asked with it."""
    api.ingest({"batch": [{"id": "w-start", "type": "session", "body": {"session_id": "w"}}]})
    session = Session.objects.get(external_id="w")
    client = login("viewer")
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert re.search(r'<p id="session-asked" class="session-asked"[^>]*hidden', page)
    asked = {"id": "u1", "role": "user", "content": "Why is SO20260101007 stuck?"}
    api.ingest({"batch": [step("w", 0, [asked])]})
    body = client.get(live_url(page), **HTMX).content.decode()
    line = re.search(r'<p id="session-asked"[^>]*hx-swap-oob="true"[^>]*>([^<]*)</p>', body)
    assert line is not None and line.group(1) == "Why is SO20260101007 stuck?"
