"""A compaction of 900 messages in the browser: a small first page, the rest on demand,
and a permalink to a message the first view left out still lands on it."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.api_client import Api
from tests.browser.conftest import Watched, seed_session
from tests.web.test_big_contexts import compaction_events

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _compaction_step(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> tuple[Watched, str, Any]:
    """The compaction step opened by a viewer: (the watched page, its address, the answer)."""
    session = seed_session(api, compaction_events())
    watched = open_page(api.project, "viewer")
    url = f"{live_server.url}/sessions/{session.pk}/steps/1/"
    return watched, url, watched.page.goto(url)


def test_a_900_message_compaction_reads_as_a_short_page(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    watched, url, response = _compaction_step(api, open_page, live_server)
    page = watched.page
    assert len(response.body()) < 300_000
    page.wait_for_selector("#occupancy-chart .main-svg")
    # Two steps: the step axis is marked at each step, not at 0.2, 0.4 ...
    ticks = page.evaluate(
        "() => [...document.querySelectorAll('#occupancy-chart .xtick text')]"
        ".map((t) => t.textContent)"
    )
    assert ticks == ["0", "1"]
    more = page.locator("#step-view .rows-more")
    assert "Show 891 more messages" in more.inner_text()
    page.screenshot(path=str(Path(tempfile.gettempdir()) / "contextview-compaction.png"))
    assert page.locator("#step-view .diff-row").count() < 30

    more.locator("a").focus()
    page.keyboard.press("Enter")  # keyboard works as a click does
    page.wait_for_selector("#m-t208")
    assert page.locator("#step-view .rows-more").count() == 1  # the next page of rows waits

    # A permalink to a message far down: the rows holding it are loaded and it is shown.
    page.goto(f"{url}#m-t700")
    page.wait_for_selector("#m-t700")
    page.wait_for_function(
        "() => { const m = document.getElementById('m-t700'); if (!m) return false;"
        " const r = m.getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= window.innerHeight; }"
    )
    assert watched.errors == []


def test_a_message_of_rows_loaded_later_can_be_annotated_from_its_row(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    watched, _, _ = _compaction_step(api, open_page, live_server)
    page = watched.page
    target = page.locator("#annotate select[name=message]")
    # The form lists what the first view shows, not the 900 originals.
    assert target.locator("option[value='t8']").count() == 1
    assert target.locator("option[value='t208']").count() == 0
    page.locator("#step-view .rows-more a").click()
    page.wait_for_selector("#m-t208:not(.htmx-added)")
    page.click("#m-t208 a.annotate-message")
    assert target.input_value() == "t208"
    page.fill("#annotate textarea", "The parcel the summary forgot")
    page.click("#annotate button[type=submit]")
    note = page.locator('#annotations-step li:has-text("The parcel the summary forgot")')
    note.wait_for()
    assert "t208" in note.locator(".where").inner_text()
    assert watched.errors == []
