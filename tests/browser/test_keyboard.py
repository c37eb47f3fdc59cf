"""The dashboard from the keyboard alone: a skip link first on every page, every control
reached by Tab with its focus in sight, and nothing that moves a keyboard user away
from where they were going."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.api_client import Api
from tests.browser.conftest import Watched, seed_session
from tests.web.test_layout import layout_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_link_to_a_message_within_the_step_leaves_the_panel_at_that_message(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    session = seed_session(api, layout_session("placed"))
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.set_viewport_size({"width": 1500, "height": 700})
    page.goto(f"{live_server.url}/sessions/{session.pk}/steps/2/")
    page.wait_for_selector('#step-view[data-step="2"] .composition-chart .main-svg')
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url) if "/steps/" in r.url else None)
    link = page.locator(".placements a", has_text="note")
    link.focus()
    page.keyboard.press("Enter")
    page.wait_for_function("() => location.hash === '#m-note'")
    page.wait_for_timeout(800)
    # The panel stays as it is, scrolled to the message, and is not asked for again
    # (it was, and then scrolled back to its top).
    assert asked == []
    assert page.evaluate(
        """() => { const m = document.getElementById('m-note').getBoundingClientRect();
                   const p = document.getElementById('step-panel').getBoundingClientRect();
                   return m.top >= p.top && m.top < p.bottom; }"""
    )
    assert page.evaluate("() => document.getElementById('step-panel').scrollTop") > 0
    assert not watched.errors, watched.errors
