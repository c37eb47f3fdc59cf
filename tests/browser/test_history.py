"""The session page as one place: a step's address shows the whole page, Back and
Forward walk through the steps seen, and the chart and list stay put meanwhile."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.api_client import Api, step
from tests.browser.conftest import Watched, seed_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _long_session(sid: str = "long-run", steps: int = 40) -> list[dict[str, Any]]:
    """`steps` steps whose context grows by one sizeable message a step."""
    events: list[dict[str, Any]] = [
        {"id": f"{sid}-start", "type": "session",
         "body": {"session_id": sid, "agent": "walker", "budget": {"max_tokens": 20000}}},
    ]  # fmt: skip
    for i in range(steps):
        messages = [
            {"id": f"u{k}", "role": "user", "content": f"note {k}: " + "order SO2026 " * 40}
            if k == i
            else {"id": f"u{k}"}
            for k in range(i + 1)
        ]
        events.append(step(sid, i, messages))
    return events


@pytest.fixture
def open_long(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> Callable[[str], Watched]:
    """A viewer's page on `path` (after ``/sessions/<pk>``) of a 40-step session, drawn."""
    session = seed_session(api, _long_session())
    watched = open_page(api.project, "viewer")

    def go(path: str) -> Watched:
        watched.page.goto(f"{live_server.url}/sessions/{session.pk}{path}")
        watched.page.wait_for_selector("#occupancy-chart .main-svg")
        return watched

    return go


def _panel_step(page: Any) -> str:
    return str(page.locator("#step-view").get_attribute("data-step"))


def _wait_step(page: Any, index: int) -> None:
    page.wait_for_selector(f'#step-view[data-step="{index}"]')
    page.wait_for_function(
        "(i) => location.pathname.endsWith('/steps/' + i + '/')", arg=index, timeout=10_000
    )


def test_it_walks_back_and_forward_through_the_steps_seen(
    open_long: Callable[[str], Watched],
) -> None:
    watched = open_long("/")
    page = watched.page

    page.click('table.steps a[data-step="2"]')
    _wait_step(page, 2)
    for index in (3, 4):
        page.keyboard.press("j")
        _wait_step(page, index)

    # Back and Forward: the address and the panel always agree.
    for index in (3, 2):
        page.go_back()
        _wait_step(page, index)
        assert _panel_step(page) == str(index)
    page.go_forward()
    _wait_step(page, 3)
    assert page.locator("#occupancy-chart .main-svg").count() > 0  # never a page without it
    page.go_back()
    _wait_step(page, 2)
    page.go_back()  # the session page as first opened: no step
    page.wait_for_function("() => !location.pathname.includes('/steps/')")
    page.wait_for_selector("#occupancy-chart .main-svg")
    assert page.locator("#step-view").count() == 0
    assert watched.errors == []


def test_it_reloads_a_step_address_as_the_whole_session_page(
    open_long: Callable[[str], Watched],
) -> None:
    watched = open_long("/steps/7/")
    page = watched.page
    assert _panel_step(page) == "7"
    page.keyboard.press("j")
    _wait_step(page, 8)
    page.reload()
    page.wait_for_selector("#occupancy-chart .main-svg")
    assert _panel_step(page) == "8"
    assert page.locator("tr#step-row-8.current").count() == 1
    assert watched.errors == []


def test_it_keeps_the_chart_and_the_list_in_place_while_the_panel_changes(
    open_long: Callable[[str], Watched],
) -> None:
    watched = open_long("/")
    page = watched.page
    page.click('table.steps a[data-step="30"]')
    _wait_step(page, 30)
    page.screenshot(path=str(_shot("split-pane.png")))
    chart_top = page.locator("#occupancy-chart").bounding_box()["y"]
    scrolled = page.evaluate("() => window.scrollY")
    for index in (31, 32, 33):
        page.keyboard.press("j")
        _wait_step(page, index)
    # The page did not scroll and the chart did not move; both it and the current row
    # (the list scrolls in its own box) are in view beside the panel.
    assert page.evaluate("() => window.scrollY") == scrolled
    chart = page.locator("#occupancy-chart").bounding_box()
    assert chart["y"] == chart_top and chart["y"] >= 0
    assert chart["y"] + chart["height"] <= page.viewport_size["height"]
    current = page.locator("#step-row-33").bounding_box()
    box = page.locator("#steps").bounding_box()
    assert box["y"] <= current["y"] <= box["y"] + box["height"] - current["height"]
    assert current["y"] + current["height"] <= page.viewport_size["height"]
    # The panel is in view and scrolls on its own; the steps table fits its column.
    sizes = page.evaluate(
        """() => {
            const panel = document.getElementById("step-panel");
            const box = panel.getBoundingClientRect();
            const table = document.querySelector("table.steps");
            return {top: box.top, bottom: box.bottom, inner: innerHeight,
                    scrolls: panel.scrollHeight > panel.clientHeight,
                    overflow: getComputedStyle(panel).overflowY,
                    table: table.scrollWidth, column: table.parentElement.clientWidth};
        }"""
    )
    assert 0 <= sizes["top"] and sizes["bottom"] <= sizes["inner"] + 1, sizes
    assert sizes["scrolls"] and sizes["overflow"] == "auto", sizes
    assert sizes["table"] <= sizes["column"], sizes

    assert watched.errors == []


def _shot(name: str) -> Any:
    import tempfile
    from pathlib import Path

    return Path(tempfile.gettempdir()) / f"contextview-{name}"


def test_it_gives_a_comparison_an_address_that_reloads_and_walks_back(
    open_long: Callable[[str], Watched],
) -> None:
    watched = open_long("/steps/3/")
    page = watched.page
    page.fill('.left-col input[name="from"]', "2")
    page.fill('.left-col input[name="to"]', "9")
    page.click(".left-col .compare-form button[type=submit]")
    page.wait_for_selector('#compare-view[data-from="2"][data-to="9"]')
    page.wait_for_function("() => location.search === '?from=2&to=9'")
    assert "/compare/" in page.url and "Step 9 after" in page.locator("#step-panel").inner_text()

    page.reload()  # the whole page, the comparison open beside the chart
    page.wait_for_selector("#occupancy-chart .main-svg")
    assert page.locator('#compare-view[data-from="2"][data-to="9"]').count() == 1
    page.go_back()
    _wait_step(page, 3)
    assert page.locator("#compare-view").count() == 0
    page.go_forward()
    page.wait_for_selector('#compare-view[data-to="9"]')
    assert "/compare/" in page.url
    assert page.locator("#occupancy-chart .main-svg").count() > 0
    assert watched.errors == []


def test_it_gives_an_open_fold_an_address_that_reloads_and_walks_back(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    from tests.web.conftest import order_session_events

    session = seed_session(api, order_session_events("folding"))
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.goto(f"{live_server.url}/sessions/{session.pk}/steps/0/")
    page.wait_for_selector("#occupancy-chart .main-svg")
    page.click("#step-view a.open-fold")
    page.wait_for_selector("#fold-panel .fold-view")
    page.wait_for_function("() => location.pathname.endsWith('/steps/0/fold/')")
    assert "upstream timed out" in page.locator("#fold-panel").inner_text()

    page.reload()
    page.wait_for_selector("#occupancy-chart .main-svg")
    assert _panel_step(page) == "0"
    assert "upstream timed out" in page.locator("#fold-panel").inner_text()
    page.go_back()  # the step as it was, fold closed
    page.wait_for_function("() => location.pathname.endsWith('/steps/0/')")
    page.wait_for_selector("#step-view")
    page.wait_for_function("() => !document.querySelector('#fold-panel .fold-view')")
    page.go_forward()
    page.wait_for_selector("#fold-panel .fold-view")
    assert page.url.endswith("/steps/0/fold/?result=sum_1")
    assert watched.errors == []


def _row_in_view(page: Any, index: int) -> dict[str, Any]:
    """Where step `index`'s row is, within the step list's box and the window."""
    return dict(page.evaluate(
        """(i) => {
            const row = document.getElementById("step-row-" + i).getBoundingClientRect();
            const list = document.getElementById("steps");
            const box = list.getBoundingClientRect();
            const head = list.querySelector("thead").getBoundingClientRect().bottom;  // sticky
            return {row: [row.top, row.bottom], box: [box.top, box.bottom], head: head,
                    inner: innerHeight,
                    ok: row.top >= Math.max(head, 0) - 1 && row.bottom <= box.bottom + 1
                        && row.bottom <= innerHeight + 1};
        }""",
        index,
    ))  # fmt: skip


def test_an_open_replay_panel_and_the_live_bar_leave_the_current_row_in_view(
    open_long: Callable[[str], Watched],
) -> None:
    watched = open_long("/steps/30/")
    page = watched.page
    page.set_viewport_size({"width": 1280, "height": 800})
    page.reload()  # drawn for this window
    page.wait_for_selector("#occupancy-chart .main-svg")
    assert page.locator("#live-tail").count() == 1  # a running session: the live bar shows
    # By keyboard: the page keeps the current row in view as it settles, and a click
    # aimed while it scrolls the list can land beside its target.
    page.focus("#replay-section > summary")
    page.keyboard.press("Enter")
    page.focus(".replay-form button[type=submit]")
    page.keyboard.press("Enter")
    page.wait_for_selector("#replay .replay-summary")
    for index in (31, 32):
        page.keyboard.press("j")
        _wait_step(page, index)
    assert _row_in_view(page, 32)["ok"], _row_in_view(page, 32)  # scrolled down to the replay
    # Back at the top, to see the replay drawn over the chart: the list is below it.
    page.evaluate("() => { scrollTo(0, 0); document.querySelector('.left-col').scrollTop = 0; }")
    page.keyboard.press("j")
    _wait_step(page, 33)
    page.screenshot(path=str(_shot("split-pane-replay.png")))
    assert _row_in_view(page, 33)["ok"], _row_in_view(page, 33)
    assert watched.errors == []


def test_a_step_opened_from_the_list_by_keyboard_takes_the_focus_into_its_panel(
    open_long: Callable[[str], Watched],
) -> None:
    watched = open_long("/")
    page = watched.page
    page.focus('table.steps a[data-step="5"]')
    page.keyboard.press("Enter")
    _wait_step(page, 5)
    # Tab goes on into the step, not through the 34 step links below it in the list.
    page.wait_for_function("() => document.activeElement.closest('#step-view') !== null")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.closest('#step-view') !== null")
    # The page stays where it was: the list and the chart in view beside the panel.
    assert page.locator("tr#step-row-5.current").is_visible()
    page.keyboard.press("j")
    _wait_step(page, 6)
    assert watched.errors == []
