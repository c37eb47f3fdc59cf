"""In the browser: the unseen band of the occupancy chart, a step's context by kind
with the position of its pinned text and task, and the pages at a phone's width and at a
laptop's."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from contextview.core.stats import FLAGS
from contextview.demo.scenarios import mode_customer_chat
from contextview.postmortems.services import annotation_create
from contextview.sessions.models import Session
from tests.api_client import Api, step
from tests.browser.conftest import Watched, open_session, seed_session
from tests.stats.test_loss import amnesia_session, waste_session
from tests.web.test_layout import PINNED, layout_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Where to keep screenshots for a person to look at (nowhere unless set).
SHOTS = os.environ.get("CV_SCREENSHOTS", "")


def _shot(element: Any, name: str) -> None:
    if SHOTS:
        element.screenshot(path=os.path.join(SHOTS, name))


def test_it_draws_unseen_tokens_and_a_steps_composition_with_position_markers(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    session = seed_session(api, layout_session("layout-browser"))
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.click("text=layout-browser")
    page.wait_for_selector("#occupancy-chart .main-svg")
    names = page.evaluate(
        "() => document.getElementById('occupancy-chart').data.map((t) => t.name)"
    )
    assert "unseen (provider only)" in names
    unseen = page.evaluate(
        """() => document.getElementById('occupancy-chart').data
                 .find((t) => t.name === 'unseen (provider only)').y"""
    )
    assert len(unseen) == 3 and all(n > 20_000 for n in unseen)
    _shot(page.locator("#overview-chart"), "occupancy-unseen.png")

    page.click('table.steps a[data-step="0"]')
    page.wait_for_selector('#step-view[data-step="0"] .composition-chart .main-svg')
    chart = page.locator(".composition-chart")
    bars = chart.evaluate(
        "(gd) => gd.data.filter((t) => t.type === 'bar').map((t) => [t.name, t.x])"
    )
    kinds = {name: x for name, x in bars}
    assert set(kinds) == {
        "unseen (provider only)", "tool definitions", "system", "messages", "tool results",
        "thinking",
    }  # fmt: skip
    assert kinds["unseen (provider only)"][0] > 20_000 and kinds["thinking"][0] > 0
    markers = chart.evaluate(
        "(gd) => { const t = gd.data.find((d) => d.name === 'position');"
        " return t.y.map((what, k) => [what, t.text[k], t.customdata[k]]); }"
    )
    assert ["task", "start", "Find why order SO20260101007 times out."] in markers
    assert ["pinned", "middle", PINNED] in markers
    # The middle third is shaded, so a marker in it reads as at risk.
    shaded = chart.evaluate("(gd) => gd.layout.shapes.filter((s) => s.type === 'rect').length")
    assert shaded == 1
    assert page.locator(".placements .where-middle").inner_text() == "middle"
    _shot(page.locator("#composition"), "composition.png")
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)
    assert session.step_count == 3


def test_it_lists_amnesia_and_re_billed_results_and_opens_the_step_that_needed_it(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    forgetful = seed_session(api, amnesia_session("forgetful-browser"))
    seed_session(api, waste_session("wasteful-browser"))
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.click("text=forgetful-browser")
    lists = page.locator("#loss-section")
    assert "SO20260101007" in lists.locator(".amnesia-list").inner_text()
    _shot(lists, "loss-lists.png")
    # The step that needed it opens in the panel beside the list.
    lists.locator(".amnesia-list a", has_text="step 5").first.click()
    page.wait_for_selector('#step-view[data-step="5"]')
    assert page.url.endswith(f"/sessions/{forgetful.pk}/steps/5/")
    assert page.locator(".flags-list .flag-amnesia").is_visible()

    page.goto(page.url.split("/sessions/")[0] + "/")
    page.click("text=wasteful-browser")
    rebilled = page.locator("#loss-section .rebilled")
    assert "Re-billed tokens" in rebilled.inner_text()
    assert page.locator(".unreferenced-list", has_text="read_log").is_visible()
    _shot(page.locator("#loss-section"), "rebilled-lists.png")
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 800}
# A swe-agent trajectory's name: one long word, with no hyphen or space to break at.
LONG_ID = "trajectories_demonstrations_replay__marshmallow_code__marshmallow_1867__function_calling"

# How far the page reaches past the window's right edge, in CSS pixels (0: it fits).
OVERFLOW = "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"


def _every_flag(session: Session) -> None:
    """As if the session's steps had raised every flag, a dozen times each."""
    aggregates = {**session.aggregates, "flag_counts": dict.fromkeys(FLAGS, 12)}
    Session.objects.filter(pk=session.pk).update(aggregates=aggregates)


def test_it_fits_every_page_in_a_phones_width(
    api: Api, open_page: Callable[..., Watched], browser: Any, live_server: Any, tmp_path: Path
) -> None:
    forgetful = seed_session(api, amnesia_session("forgetful-phone"))
    seed_session(api, layout_session(LONG_ID))
    watched = open_page(api.project, "admin")
    # A note of one long word (a URL, a hash) ran past its card and widened the page.
    annotation_create(
        session=forgetful,
        author=User.objects.get(username="admin-in-browser"),
        body=f"see {LONG_ID * 3}",
        step_index=2,
    )
    page = watched.page
    page.set_viewport_size(PHONE)
    base, slug = live_server.url, api.project.slug
    wide: dict[str, int] = {}

    def measure(name: str, path: str) -> None:
        page.goto(f"{base}{path}")
        page.wait_for_load_state("networkidle")
        if (overflow := page.evaluate(OVERFLOW)) > 1:
            wide[name] = overflow
        # The top bar's controls are all within the window.
        for control in page.locator("header.top a, header.top button:visible").all():
            box = control.bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], (
                name, control.inner_text(),
            )  # fmt: skip

    measure("sessions", f"/?project={slug}")
    measure("session", f"/sessions/{forgetful.pk}/steps/2/")
    measure("overview", f"/projects/{slug}/overview/")
    measure("alerts", f"/projects/{slug}/alerts/")
    measure("incidents", f"/projects/{slug}/incidents/")
    measure("keys", f"/projects/{slug}/keys/")
    measure("members", f"/projects/{slug}/members/")
    report = tmp_path / "report.html"
    report.write_text(
        page.context.request.get(f"{base}/sessions/{forgetful.pk}/report.html").text()
    )
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)

    # Signed out, and the report as the file it downloads as.
    phone = browser.new_context(viewport=PHONE)
    try:
        other = phone.new_page()
        for name, url in (("login", f"{base}/login/"), ("report", report.as_uri())):
            other.goto(url)
            if (overflow := other.evaluate(OVERFLOW)) > 1:
                wide[name] = overflow
    finally:
        phone.close()
    assert wide == {}, f"pages that scroll sideways (by px): {wide}"


def test_it_stacks_the_session_pages_panes_on_a_phone(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    seed_session(api, amnesia_session("forgetful-stack"))
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.set_viewport_size(PHONE)
    open_session(page, "forgetful-stack")
    page.click('table.steps a[data-step="2"]')
    page.wait_for_selector('#step-view[data-step="2"]')
    steps, view = page.locator("#steps").bounding_box(), page.locator("#step-view").bounding_box()
    assert steps and view
    # The step view is below the list, not beside it, and both fit in the window.
    assert view["y"] >= steps["y"] + steps["height"]
    for box in (steps, view):
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], box
    # Right under it: the rest of the left pane (what the session lost, its notes) follows.
    losses = page.locator("#loss-section").bounding_box()
    assert losses and view["y"] + view["height"] <= losses["y"], (view, losses)
    assert page.evaluate(OVERFLOW) <= 1
    _shot(page, "session-phone.png")
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_a_steps_address_opened_in_a_narrow_window_shows_the_step(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    # A link to a step (Copy link, a teammate's message) opened in a window too narrow
    # for two columns: the step, under the header, the chart and the list, is in view.
    session = seed_session(api, amnesia_session("forgetful-link"))
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.set_viewport_size({"width": 800, "height": 700})
    page.goto(f"{live_server.url}/sessions/{session.pk}/steps/5/")
    page.wait_for_selector("#occupancy-chart .main-svg")
    heading = page.locator("#step-view h2").bounding_box()
    assert heading and 0 <= heading["y"] < 700, heading
    # The session page itself still opens at its top.
    page.goto(f"{live_server.url}/sessions/{session.pk}/")
    page.wait_for_selector("#occupancy-chart .main-svg")
    assert page.evaluate("window.scrollY") == 0
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_it_fits_the_sessions_list_in_a_laptops_width_with_every_flag_readable(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    _every_flag(seed_session(api, layout_session(LONG_ID)))
    seed_session(api, amnesia_session("forgetful-laptop"))
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.set_viewport_size(LAPTOP)
    page.reload()
    table = page.locator("table.sessions").bounding_box()
    assert table and table["x"] + table["width"] <= LAPTOP["width"], table
    assert page.evaluate(OVERFLOW) <= 1
    flags = page.locator("table.sessions tr", has_text=LONG_ID).locator(".flag")
    assert flags.count() == len(FLAGS)
    for flag in flags.all():
        # Whole: inside the window, and nothing of its name cut off inside its box.
        box = flag.bounding_box()
        assert box and box["x"] + box["width"] <= LAPTOP["width"], flag.inner_text()
        assert flag.evaluate("(el) => el.scrollWidth <= el.clientWidth"), flag.inner_text()
    assert "token_estimate_off 12" in flags.all_inner_texts()
    _shot(page, "sessions-laptop.png")
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


@pytest.mark.parametrize("width", [800, 1280])
def test_it_fits_the_sessions_list_in_its_box_with_the_ids_readable(
    api: Api, open_page: Callable[..., Watched], width: int
) -> None:
    _every_flag(seed_session(api, layout_session(LONG_ID)))
    seed_session(api, [{"type": "session", "id": "moded-start",
                        "body": {"session_id": "0f9d7c52-3b1e-4a8e-9d2c-5e6f7a8b9c0d",
                                 "agent": "support-bot", "model": "claude-opus-4-6",
                                 "mode": "sliding"}},
                       step("0f9d7c52-3b1e-4a8e-9d2c-5e6f7a8b9c0d", 0,
                            [{"id": "u1", "role": "user", "content": "Hello"}])])  # fmt: skip
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.set_viewport_size({"width": width, "height": 900})
    page.reload()
    # Nothing to scroll sideways: not the page, not the list in its box.
    assert page.evaluate(OVERFLOW) <= 1
    box = page.locator(".scroll-x:has(table.sessions)")
    assert box.evaluate("(el) => el.scrollWidth - el.clientWidth") <= 1
    # The session ids stand in a column wide enough to read, not a sliver.
    for cell in page.locator("td.session-id").all():
        cell_box = cell.bounding_box()
        assert cell_box and cell_box["width"] >= 140, (width, cell_box)
    # What a narrow window leaves out of its own columns is still said in the row.
    shown = page.locator("table.sessions tr", has_text="0f9d7c52").inner_text()
    assert "claude-opus-4-6" in shown and "sliding" in shown, (width, shown)
    _shot(page, f"sessions-{width}.png")
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_it_fits_the_step_list_and_its_flags_in_a_laptops_width(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    seed_session(api, mode_customer_chat())
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.set_viewport_size(LAPTOP)
    open_session(page, "mode-customer-chat")
    steps = page.locator("#steps")
    # The list scrolls down in its own box, never sideways: its flags column is whole.
    assert steps.evaluate("(el) => el.scrollWidth <= el.clientWidth")
    box = steps.bounding_box()
    assert box
    right = box["x"] + box["width"]
    flags = steps.locator(".flag")
    assert flags.count()
    for flag in flags.all():
        box = flag.bounding_box()
        assert box and box["x"] + box["width"] <= right, flag.inner_text()
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_it_breaks_long_message_and_tool_call_ids_in_a_phones_width(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    # Provider ids as real agents write them: no hyphen or space to break at.
    call_id = "toolu_" + "0" * 10 + "ReadTheOrderLogPlease"
    asked = {"id": "msg_" + "0" * 10 + "AssistantAskedForTheLog", "role": "assistant",
             "content": [{"type": "text", "text": "Reading the log."},
                         {"type": "tool_use", "id": call_id, "name": "read_file",
                          "input": {"path": "orders.log"}}]}  # fmt: skip
    result = {"type": "tool_result", "tool_use_id": call_id, "content": "ok"}
    answered = {"id": "tool-answer", "role": "user", "content": [result]}
    ask = {"id": "u1", "role": "user", "content": "Why did order SO20260101042 fail?"}
    session = seed_session(
        api, [step("long-ids", 0, [ask]), step("long-ids", 1, [ask, asked, answered])]
    )
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.set_viewport_size(PHONE)
    page.goto(f"{live_server.url}/sessions/{session.pk}/steps/1/")
    page.wait_for_selector(".part-tool-call")
    assert page.evaluate(OVERFLOW) <= 1
    assert not watched.errors, watched.errors


def test_a_laptop_window_shows_the_step_list_and_the_budget_lines_labels_apart(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    seed_session(api, mode_customer_chat())
    # A loop far over its budget: the chart's scale puts its lines a few pixels apart.
    budget = {"max_tokens": 6000, "reserved_tokens": 500}
    start = {"id": "lines", "type": "session", "body": {"session_id": "lines", "budget": budget}}
    logs = [
        {"id": f"log{n}", "role": "tool", "content": f"GET /orders {n} 504 " * 900}
        for n in range(4)
    ]
    seed_session(api, [start, *(step("lines", n, logs[: n + 1]) for n in range(4))])
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.set_viewport_size(LAPTOP)
    open_session(page, "mode-customer-chat")
    # Opened at the top: the first step's row is whole in the window, not below it.
    first = page.locator("table.steps tbody tr").first.bounding_box()
    assert first and first["y"] + first["height"] <= LAPTOP["height"], first
    # The budget, its limit and the 90% and 70% lines sit a few percent apart: each
    # label is drawn clear of the others.
    page.go_back()
    open_session(page, "lines")
    labels = page.locator("#occupancy-chart .annotation-text")
    boxes = [
        (label.text_content() or "", label.bounding_box())
        for label in labels.all()
        if (label.text_content() or "").split(" ")[0] in ("budget", "limit", "90%", "70%")
    ]
    assert len(boxes) >= 3, boxes
    for k, (name, a) in enumerate(boxes):
        for other, b in boxes[k + 1 :]:
            assert a and b
            apart = (
                a["x"] + a["width"] <= b["x"]
                or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"]
                or b["y"] + b["height"] <= a["y"]
            )
            assert apart, (name, a, other, b)
    _shot(page, "session-laptop.png")
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_a_phone_reads_the_session_charts_steps_and_legend(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    seed_session(api, mode_customer_chat())
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.set_viewport_size(PHONE)
    open_session(page, "mode-customer-chat")
    chart = page.locator("#occupancy-chart")
    # The step ticks ran together ("02468101214...") in a plot some 60 px wide.
    ticks = [t.bounding_box() for t in chart.locator(".xtick text").all()]
    ticks = [t for t in ticks if t]
    assert len(ticks) >= 3
    for a, b in zip(ticks, ticks[1:], strict=False):
        assert a["x"] + a["width"] < b["x"], (a, b)
    plot = chart.locator(".nsewdrag").first.bounding_box()
    legend = chart.locator(".legend").bounding_box()
    assert plot and legend and plot["width"] > 220, plot
    assert legend["y"] >= plot["y"] + plot["height"], (legend, plot)  # under it
    _shot(chart, "chart-phone.png")
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_a_page_of_the_step_list_goes_into_the_address_with_the_open_step(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    turns = [{"id": f"m{n}", "role": "user", "content": f"turn {n}"} for n in range(230)]
    seed_session(api, [step("long-run", n, turns[: n + 1]) for n in range(230)])
    watched = open_page(api.project, "viewer")
    page = watched.page
    open_session(page, "long-run")
    page.click('table.steps a[data-step="5"]')
    page.wait_for_selector('#step-view[data-step="5"]')
    page.click(".pager >> text=Later steps")
    page.wait_for_selector("#step-row-100")
    # Paged away from the open step on purpose: not brought back to its page.
    page.wait_for_timeout(500)
    assert page.locator("#step-row-100").count() == 1 and page.locator("#step-row-5").count() == 0
    # It paged without a word in the address: a reload or a shared link lost the page.
    page.wait_for_url("**/steps/5/?after=99")
    page.reload()
    page.wait_for_selector('#step-view[data-step="5"]')
    assert page.locator("#step-row-100").count() == 1 and page.locator("#step-row-0").count() == 0
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)
