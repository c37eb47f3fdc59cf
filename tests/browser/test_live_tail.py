"""A running session's open page shows a step the agent sends, without a reload."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.api_client import Api, step
from tests.browser.conftest import Watched, seed_session
from tests.web.conftest import order_session_events

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


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
    sent = requests.post(
        f"{live_server.url}/api/v1/ingest",
        data=json.dumps({"batch": [new_step]}),
        headers={
            "Authorization": f"Bearer {api.issued.secret}",
            "Content-Type": "application/json",
        },  # fmt: skip
        timeout=10,
    )
    assert sent.status_code == 207 and sent.json()["results"][0]["status"] == 201

    row = page.locator("tr#step-row-3")
    row.wait_for(timeout=15_000)
    # Its measured tokens replace "pending" once the worker is done, and the chart
    # gains its point; the open step stays open and marked.
    page.wait_for_function(
        "() => !document.querySelector('#step-row-3').textContent.includes('pending')",
        timeout=30_000,
    )
    page.wait_for_function(
        "() => document.getElementById('occupancy-chart').data[0].x.includes(3)", timeout=15_000
    )
    assert page.locator("#fact-steps").inner_text().startswith("4")
    assert page.locator('#step-view[data-step="1"]').count() == 1
    assert page.locator("tr#step-row-1.current").count() == 1
    assert page.evaluate("() => window.stillTheSamePage") is True
    row.evaluate("(r) => r.scrollIntoView({block: 'nearest'})")
    page.screenshot(path=str(Path(tempfile.gettempdir()) / "contextview-live-tail.png"))
    assert watched.errors == []
