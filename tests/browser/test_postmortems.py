"""Issue 6 in a real browser: annotating, permalinks, the offline report, comparing
sessions, the project overview and the dataset download."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from contextview.core.stats import OVER_70, OVER_90
from contextview.demo.scenarios import cm_order_timeout, mode_customer_chat
from contextview.postmortems.services import annotation_create
from tests.api_client import Api
from tests.browser.conftest import Watched, open_session, seed_session
from tests.web.conftest import order_session_events

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _settled(page: Any, selector: str) -> None:
    """Wait for `selector` and for htmx to have taken over what was swapped in: until
    then its links and forms would act as plain HTML."""
    page.wait_for_selector(f"{selector}:not(.htmx-added)")


def _clean(watched: Watched) -> None:
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_it_annotates_and_shares_a_link_to_a_message(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    session = seed_session(api, order_session_events())
    colleague = User.objects.create_user("colleague")
    annotation_create(session=session, author=colleague, step_index=0, body="Not mine to delete")
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    open_session(page, "order-debug-42")

    # A viewer annotates the session, in markdown.
    form = page.locator("#annotations-section form.annotate-form")
    form.locator("select[name=label]").select_option("root-cause")
    form.locator("textarea").fill("Step 0 lost **SO20260101007**")
    form.locator("button[type=submit]").click()
    page.wait_for_selector('#annotations-session strong:text-is("SO20260101007")')
    assert form.locator("textarea").input_value() == ""

    # On a step: someone else's note can be read, not changed.
    page.click('table.steps a[data-step="0"]')
    _settled(page, '#step-view[data-step="0"]')
    theirs = page.locator('#annotations-step li:has-text("Not mine to delete")')
    assert theirs.locator(".edit-note, .delete-note").count() == 0

    # A message: its "note" link aims the form at it.
    page.click("#m-sum_1 a.annotate-message")
    assert page.locator("#annotate select[name=message]").input_value() == "sum_1"
    page.fill("#annotate textarea", "This summary is where it went")
    page.click("#annotate button[type=submit]")
    mine = page.locator('#annotations-step li:has-text("This summary is where it went")')
    mine.wait_for()
    _settled(page, "#annotations-step")
    assert "sum_1" in mine.locator(".where").inner_text()
    # The session's list hears of it too.
    page.wait_for_selector('#annotations-session li:has-text("This summary is where it went")')

    # Its author starts an edit and thinks better of it (Escape), then edits it and
    # deletes it.
    mine.locator(".edit-note").click()
    _settled(page, "#annotations-step li.editing")
    page.press("#annotations-step li.editing textarea", "Escape")
    page.wait_for_selector("#annotations-step li.editing", state="detached")
    _settled(page, "#annotations-step")
    mine.locator(".edit-note").click()
    _settled(page, "#annotations-step li.editing")
    page.fill("#annotations-step li.editing textarea", "Edited: the summary")
    page.click("#annotations-step li.editing button[type=submit]")
    page.wait_for_selector('#annotations-step li:has-text("Edited: the summary")')
    _settled(page, "#annotations-step")
    delete = page.locator(
        '#annotations-step li:has-text("Edited: the summary") .delete-note button'
    )
    # Asked first (one click deleted it): answered no, the note stays.
    delete.click()
    page.wait_for_timeout(300)
    assert watched.dialogs == ["Delete this note? It cannot be undone."], watched.dialogs
    assert page.locator('#annotations-step li:has-text("Edited: the summary")').count() == 1
    watched.dialogs.clear()
    page.remove_listener("dialog", watched._dialog)
    page.once("dialog", lambda dialog: dialog.accept())
    delete.click()
    page.wait_for_selector('#annotations-step li:has-text("Edited: the summary")', state="detached")
    page.on("dialog", watched._dialog)
    assert theirs.count() == 1

    # Copy a message's permalink, open it: the page lands on that message, highlighted.
    page.click("#m-u1 a.copy-link")
    page.wait_for_selector("#m-u1 a.copy-link.copied")
    link = page.evaluate("navigator.clipboard.readText()")
    assert link == f"{live_server.url}/p/acme/order-debug-42/0/#m-u1"
    page.goto(link)
    page.wait_for_url(f"**/sessions/{session.pk}/steps/0/#m-u1")
    target = page.locator(".cell:target")
    assert target.get_attribute("id") == "m-u1"
    assert target.evaluate("el => getComputedStyle(el).outlineStyle") == "solid"
    _clean(watched)


def test_it_downloads_a_report_that_opens_offline(
    api: Api, open_page: Callable[..., Watched], browser: Any, tmp_path: Path
) -> None:
    session = seed_session(api, cm_order_timeout())
    watched = open_page(api.project, "editor")
    page = watched.page
    page.click("text=cm-order-timeout")
    page.wait_for_selector("#occupancy-chart .main-svg")

    # An editor marks the session as an incident.
    page.click("#incident summary")
    page.fill("#incident input[name=title]", "Order id lost in a summary")
    page.select_option("#incident select[name=severity]", "sev2")
    page.click("#incident .incident-form button[type=submit]")
    page.wait_for_selector('#incident .incident-title:text-is("Order id lost in a summary")')
    editor = User.objects.get(username="editor-in-browser")
    annotation_create(session=session, author=editor, step_index=3, label="root-cause",
                      body="The grep summary lost the order")  # fmt: skip

    with page.expect_download() as download:
        page.click(".reports a:text-is('HTML')")
    report = tmp_path / "report.html"
    download.value.save_as(report)
    _clean(watched)

    # Opened with no network at all, from the file: everything is inside it.
    offline = browser.new_context(offline=True, viewport={"width": 1300, "height": 900})
    try:
        reader = Watched(offline.new_page())
        requested: list[str] = []
        reader.page.on("request", lambda r: requested.append(r.url))
        reader.page.goto(report.as_uri())
        reader.page.wait_for_selector("#occupancy-chart svg polygon.band")
        assert requested == [report.as_uri()]
        reader.page.locator("#occupancy-chart").screenshot(
            path=str(Path(tempfile.gettempdir()) / "contextview-report-chart.png")
        )
        text = reader.page.inner_text("body")
        assert "Incident: Order id lost in a summary" in text
        assert "The grep summary lost the order" in text
        assert reader.page.locator('#flagged-3 .lost-entity:text-is("SO20260101007")').count()
        _clean(reader)
    finally:
        offline.close()


def test_it_compares_sessions_draws_trends_and_downloads_the_dataset(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    seed_session(api, cm_order_timeout())
    seed_session(api, mode_customer_chat())
    watched = open_page(api.project, "viewer")
    page = watched.page

    # Pick two sessions from the list and compare them.
    page.check('input[name=s][value="cm-order-timeout"]')
    page.check('input[name=s][value="mode-customer-chat"]')
    page.click("text=Compare the two checked sessions")
    page.wait_for_selector("#compare-chart .main-svg")
    names = page.evaluate("document.getElementById('compare-chart').data.map((t) => t.name)")
    assert {"cm-order-timeout", "mode-customer-chat"} <= set(names)
    # Both have budgets: occupancy, with the budget, 90% and 70% lines the server gives.
    lines = page.evaluate("document.getElementById('compare-chart').layout.shapes.map((s) => s.y0)")
    assert lines == [1.0, OVER_90, OVER_70]

    # The overview, for a range of one's own.
    page.goto(f"{live_server.url}/projects/acme/overview/")
    page.fill("input[name=since]", "2026-11-01")
    assert page.locator("#range-select").input_value() == "custom"
    page.fill("input[name=until]", "2026-11-30")
    page.click(".range-picker button[type=submit]")
    page.wait_for_selector("#trends .trend:nth-child(6) .main-svg")
    assert page.locator("#trends .main-svg").count() >= 6
    assert "order-debug-bot" in page.locator("table.agent-modes").inner_text()

    # The dataset of the sessions listed with a filter.
    page.goto(f"{live_server.url}/?status=failed")
    with page.expect_download() as download:
        page.click("a.export-link")
    rows = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines()]
    assert {r["session_id"] for r in rows} == {"mode-customer-chat"} and len(rows) == 20
    _clean(watched)


def test_it_says_why_a_note_was_refused(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    seed_session(api, order_session_events())
    watched = open_page(api.project, "viewer")
    page = watched.page
    open_session(page, "order-debug-42")
    form = page.locator("#annotations-section form.annotate-form")
    form.locator("textarea").fill("pasted from a binary \x00 file")
    form.locator("button[type=submit]").click()
    error = page.locator("#request-error")
    error.wait_for(state="visible")
    assert "must not contain a NUL character" in error.inner_text()
    # The live session's page polls for new steps: a request nobody made leaves it.
    polled = page.wait_for_event("requestfinished", lambda r: "/live/" in r.url)
    assert polled.response().status == 200
    page.wait_for_timeout(200)
    assert error.is_visible()
    # The next request clears it, and the note goes in once it can be stored.
    form.locator("textarea").fill("pasted, cleaned")
    form.locator("button[type=submit]").click()
    page.wait_for_selector('#annotations-session li:has-text("pasted, cleaned")')
    assert error.is_hidden()
    # The browser's and htmx's own console lines about the 400; nothing else.
    assert watched.errors and all("400" in e for e in watched.errors), watched.errors


def test_an_incident_titled_without_spaces_leaves_its_state_in_view_at_800_px(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    from contextview.postmortems.services import incident_mark

    session = seed_session(api, order_session_events())
    watched = open_page(api.project, "viewer")
    title = "https://shop.example.com/api/v1/orders/SO20260101007/checkout?" + "retry=1&" * 16
    incident_mark(session=session, user=User.objects.get(), title=title, severity="sev2")
    page = watched.page
    page.set_viewport_size({"width": 800, "height": 900})
    page.goto(f"{live_server.url}/projects/{api.project.slug}/incidents/")
    state = page.locator("table.incidents tbody tr td").last.bounding_box()
    assert state is not None and state["x"] + state["width"] <= 800
    _clean(watched)
