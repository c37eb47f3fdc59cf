"""A running session's open page shows a step the agent sends, without a reload."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import expect

from tests.api_client import Api, step
from tests.browser.conftest import Watched, seed_session
from tests.web.conftest import order_session_events

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def send(api: Api, live_server: Any, events: list[dict[str, Any]]) -> None:
    """Post `events` as the agent does: to the ingest API of the server the page talks to."""
    sent = requests.post(
        f"{live_server.url}/api/v1/ingest",
        data=json.dumps({"batch": events}),
        headers={
            "Authorization": f"Bearer {api.issued.secret}",
            "Content-Type": "application/json",
        },  # fmt: skip
        timeout=10,
    )
    assert sent.status_code == 207, sent.text
    assert all(r["status"] == 201 for r in sent.json()["results"]), sent.json()


def test_it_shows_a_step_posted_while_the_page_is_open(
    api: Api,
    open_page: Callable[..., Watched],
    live_server: Any,
    celery_worker_process: Any,
) -> None:
    session = seed_session(api, order_session_events())
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.goto(f"{live_server.url}/sessions/{session.pk}/steps/1/")
    page.wait_for_selector("#occupancy-chart .main-svg")
    assert "Live:" in page.locator("#live-tail").inner_text()
    page.evaluate("() => { window.stillTheSamePage = true; }")

    # The agent sends step 3 through the ingest API of the server the page talks to;
    # a worker computes its statistics meanwhile.
    new_step = step("order-debug-42", 3, [{"id": "sys"}, {"id": "u1"}, {"id": "sum_1"},
                    {"id": "a2", "role": "assistant", "content": "Retrying SO20260101007 now."}],
                    mode="sliding")  # fmt: skip
    send(api, live_server, [new_step])

    row = page.locator("tr#step-row-3")
    row.wait_for(timeout=15_000)
    # Its measured tokens replace "pending" once the worker is done, and the chart
    # gains its point; the open step stays open and marked.
    page.wait_for_function(
        "() => !document.querySelector('#step-row-3').textContent.includes('pending')",
        timeout=30_000,
    )
    page.wait_for_function(
        # The live tail redraws the chart: between the swap and plotly's drawing it has
        # no data yet.
        "() => document.getElementById('occupancy-chart').data?.[0]?.x.includes(3)",
        timeout=15_000,
    )
    assert page.locator("#fact-steps").inner_text().startswith("4")
    assert page.locator('#step-view[data-step="1"]').count() == 1
    page.wait_for_selector("tr#step-row-1.current", timeout=5_000)
    assert page.evaluate("() => window.stillTheSamePage") is True
    row.evaluate("(r) => r.scrollIntoView({block: 'nearest'})")
    page.screenshot(path=str(Path(tempfile.gettempdir()) / "contextview-live-tail.png"))
    assert watched.errors == []


def test_the_last_step_open_gains_its_next_step_link_when_one_arrives(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    session = seed_session(api, order_session_events())
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.goto(f"{live_server.url}/sessions/{session.pk}/steps/2/")
    page.wait_for_selector("#live-tail")
    next_link = page.locator('#step-view a[data-key="j"]')
    assert next_link.count() == 0  # step 2 is the last one yet

    send(api, live_server, [step("order-debug-42", 3, [{"id": "sys"}, {"id": "u1"}],
                                 mode="sliding")])  # fmt: skip
    page.locator("tr#step-row-3").wait_for(timeout=15_000)
    next_link.wait_for(timeout=5_000)
    assert "step 3" in next_link.inner_text()
    assert page.locator('#step-view[data-step="2"]').count() == 1

    page.keyboard.press("j")
    page.wait_for_selector('#step-view[data-step="3"]')
    assert page.url.endswith(f"/sessions/{session.pk}/steps/3/")
    # The row is marked once htmx has settled the panel, a moment after it shows.
    page.wait_for_selector("tr#step-row-3.current", timeout=5_000)
    assert page.locator("tr.current").count() == 1
    assert watched.errors == []


def test_a_page_opened_before_any_step_gains_the_compare_form_with_the_first_steps(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    session = seed_session(api, order_session_events()[:1])
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.wait_for_selector("#live-tail")
    assert "No steps yet" in page.locator("#step-panel").inner_text()
    form = page.locator(".left-col .compare-form")
    assert form.count() == 0

    messages = [{"id": "sys", "role": "system", "content": "You help with orders."},
                {"id": "u1", "role": "user", "content": "Where is SO20260101007?"}]  # fmt: skip
    send(api, live_server, [step("order-debug-42", i, messages) for i in (0, 1)])
    page.locator("tr#step-row-1").wait_for(timeout=15_000)
    form.wait_for(timeout=5_000)
    assert page.locator('.left-col input[name="to"]').input_value() == "1"
    assert "No steps yet" not in page.locator("#step-panel").inner_text()

    page.click(".left-col .compare-form button[type=submit]")
    page.wait_for_selector('#compare-view[data-from="0"][data-to="1"]')
    assert "/compare/" in page.url
    assert watched.errors == []


def test_the_directives_panel_and_the_mode_follow_the_agent_without_a_reload(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    session = seed_session(api, order_session_events())
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.wait_for_selector("#live-tail")
    page.evaluate("() => { window.stillTheSamePage = true; }")
    panel, mode = page.locator("#directives-panel"), page.locator("#current-mode")
    assert "No directives sent" in panel.inner_text() and mode.inner_text() == "sliding"

    # A mode switch sent through the API (not from this page) shows up pending...
    auth = {"Authorization": f"Bearer {api.issued.secret}"}
    sessions = f"{live_server.url}/api/v1/sessions/order-debug-42"
    sent = requests.post(f"{sessions}/directives", json={"type": "set_mode", "mode": "hybrid"},
                         headers=auth, timeout=10)  # fmt: skip
    assert sent.status_code == 201, sent.text
    expect(panel.locator(".state-pending")).to_be_visible(timeout=15_000)
    assert "mode → hybrid" in panel.inner_text()
    # ...then applied once the agent acknowledges it, and the header follows the step
    # the agent sends in its new mode.
    acked = requests.post(f"{sessions}/control/{sent.json()['id']}/ack",
                          json={"status": "applied"}, headers=auth, timeout=10)  # fmt: skip
    assert acked.status_code == 200, acked.text
    expect(panel.locator(".state-applied")).to_be_visible(timeout=15_000)
    send(api, live_server, [step("order-debug-42", 3, [{"id": "sys"}, {"id": "u1"}],
                                 mode="hybrid")])  # fmt: skip
    expect(mode).to_have_text("hybrid", timeout=15_000)
    expect(panel).to_contain_text("at step 3", timeout=15_000)
    assert page.evaluate("() => window.stillTheSamePage") is True
    assert watched.errors == []
