"""Picking a policy on the session page: its tokens over the chart, what it lost."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.api_client import Api
from tests.browser.conftest import Watched, seed_session
from tests.replay.sessions import growing_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_overlays_a_policy_and_lists_what_it_lost(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    session = seed_session(api, growing_session("chat"))
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.wait_for_selector("#occupancy-chart .main-svg")
    # The panel is closed until asked for, so the step list keeps its place.
    assert not page.is_visible("#replay-kind")
    page.click("#replay-section summary")
    assert "Pick a policy" in page.inner_text("#replay")

    # By keyboard: the policy, its window, then Enter.
    page.focus("#replay-kind")
    page.select_option("#replay-kind", "sliding")
    page.keyboard.press("Tab")
    page.keyboard.press("Control+A")
    page.keyboard.type("4")
    page.keyboard.press("Enter")
    page.wait_for_selector("#replay .replay-result")
    # The overlay is drawn once htmx has settled the swapped panel, a moment after
    # the panel shows.
    page.wait_for_function(
        """() => (document.getElementById('occupancy-chart').data || [])
              .filter((t) => t.meta === 'replay').map((t) => t.name).join('|')
              === 'recorded (all partitions)|replayed: sliding 4'"""
    )
    replayed = page.evaluate(
        """() => document.getElementById('occupancy-chart').data
              .find((t) => t.name === 'replayed: sliding 4').y"""
    )
    recorded = page.evaluate(
        """() => document.getElementById('occupancy-chart').data
              .find((t) => t.name === 'recorded (all partitions)').y"""
    )
    assert len(replayed) == 7 and replayed[-1] < recorded[-1]
    assert "saved" in page.inner_text(".replay-summary")

    lost = page.locator(".replay-lost li")
    assert lost.count() == 1 and "A12345" in lost.first.inner_text()
    assert page.locator(".replay-compare tr.chosen").inner_text().startswith("sliding 4")
    # The other policies' rows arrive one by one.
    page.wait_for_function("() => !document.querySelector('.replay-compare [role=status]')")
    assert page.locator(".replay-compare tbody tr").count() == 6
    page.locator("#replay-section").scroll_into_view_if_needed()
    Path(tempfile.gettempdir(), "contextview-replay.png").write_bytes(
        page.screenshot(full_page=True)
    )

    # Another policy replaces the overlay rather than adding to it.
    page.select_option("#replay-kind", "mask_observations")
    page.fill("input[name=keep_last]", "1")
    page.click(".replay-form button[type=submit]")
    page.wait_for_selector(".replay-summary:has-text('mask_observations 1')")
    page.wait_for_function(
        """() => (document.getElementById('occupancy-chart').data || [])
              .filter((t) => t.meta === 'replay').map((t) => t.name).join('|')
              === 'recorded (all partitions)|replayed: mask_observations 1'"""
    )

    # The lost entity's link opens the step that needed it in the step panel.
    page.select_option("#replay-kind", "sliding")
    page.fill("input[name=keep_last]", "4")
    page.click(".replay-form button[type=submit]")
    page.wait_for_selector(".replay-summary:has-text('sliding 4')")
    page.click(".replay-lost a[data-step='6']")
    page.wait_for_selector('#step-view[data-step="6"]')
    assert page.url.endswith(f"/sessions/{session.pk}/steps/6/")
    assert not watched.errors, watched.errors
