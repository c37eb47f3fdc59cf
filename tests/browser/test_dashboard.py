from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from playwright.sync_api import expect

from contextview.postmortems.services import annotation_create, incident_mark
from contextview.sessions.models import Session
from tests.api_client import Api, step
from tests.browser.conftest import Watched, open_session, seed_session
from tests.web.conftest import order_session_events

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _click_chart_step(page: Any, index: int, trace: str = "op") -> None:
    """Click the chart where step `index`'s point of a trace is drawn: its operation
    marker (`trace` "op"), or its point on the first line that has one ("")."""
    x, y = page.evaluate(
        """([index, meta]) => {
            const gd = document.getElementById("occupancy-chart");
            const marker = gd.data.find((t) => (!meta || t.meta === meta) && t.x.includes(index)
                                              && typeof t.y[t.x.indexOf(index)] === "number");
            const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
            const box = gd.getBoundingClientRect();
            const value = marker.y[marker.x.indexOf(index)];
            return [box.left + xa._offset + xa.l2p(index), box.top + ya._offset + ya.l2p(value)];
        }""",
        [index, trace],
    )
    page.mouse.move(x, y)
    page.mouse.click(x, y)


def test_it_walks_through_a_session_in_the_browser(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    session = seed_session(api, order_session_events())
    watched = open_page(api.project, "editor")
    page = watched.page

    open_session(page, "order-debug-42")

    # A step from the chart.
    _click_chart_step(page, 1)
    page.wait_for_selector('#step-view[data-step="1"]')
    assert page.url.endswith(f"/sessions/{session.pk}/steps/1/")

    # A step from the list: what its summary lost stands out, first as needed later.
    page.click('table.steps a[data-step="0"]')
    page.wait_for_selector('#step-view[data-step="0"]')
    assert page.locator('.lost-entity:text-is("SO20260101007")').first.is_visible()
    assert page.locator(".needed-later", has_text="SO20260101007").is_visible()

    # Step 1 (j): a dropped message and a word-level change.
    page.keyboard.press("j")
    page.wait_for_selector('#step-view[data-step="1"]')
    dropped = page.locator(".cell.left.k-dropped")
    assert "Member id A12345" in dropped.inner_text()
    inserted = page.locator(".cell.right.k-changed ins")
    assert inserted.inner_text().strip() == "at checkout since Monday"
    assert inserted.evaluate("el => getComputedStyle(el).backgroundColor") != "rgba(0, 0, 0, 0)"

    # Keyboard: ] and [ between flagged steps.
    page.keyboard.press("]")
    page.wait_for_selector('#step-view[data-step="2"]')
    page.keyboard.press("[")
    page.wait_for_selector('#step-view[data-step="1"]:not(.htmx-request)')

    # Open the fold of step 0: the original log it replaced.
    page.keyboard.press("k")
    page.wait_for_selector('#step-view[data-step="0"]')
    page.click("a.open-fold")
    page.wait_for_selector(".fold-view")
    assert "upstream timed out" in page.locator(".fold-view .original-content").inner_text()

    # Preview restoring it, then send it to the agent.
    page.click(".fold-view button[type=submit]")
    page.wait_for_selector(".restore-view")
    assert page.locator(".preview li.restored").count() == 1
    assert "of the budget (400 tokens)" in page.locator(".restore-view").inner_text()
    page.click(".restore-send button[type=submit]")
    page.wait_for_selector("#directives-panel .state-pending")
    assert "restore tool_result_32 at step 0" in page.locator("#directives-panel").inner_text()

    control = api.get("/sessions/order-debug-42/control").json()["directives"]
    assert [(d["type"], d["targets"], d["step"]) for d in control] == [
        ("restore", ["tool_result_32"], 0)
    ]
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_a_step_opened_from_the_chart_beyond_the_lists_page_brings_that_page(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    messages: list[dict[str, Any]] = [{"id": "sys", "role": "system", "content": "Be brief."}]
    events = []
    for n in range(150):  # the list shows 100 steps a page
        messages = [*messages, {"id": f"u{n}", "role": "user", "content": f"Question {n}?"}]
        events.append(step("long-walk", n, messages))
    seed_session(api, events)
    watched = open_page(api.project, "viewer")
    page = watched.page
    open_session(page, "long-walk")
    assert page.locator("#step-row-140").count() == 0  # not on the first page

    _click_chart_step(page, 140, trace="")
    page.wait_for_selector('#step-view[data-step="140"]')
    row = page.wait_for_selector("#step-row-140.current")
    assert row.is_visible()
    # In view within the list's own box.
    inside = page.evaluate(
        """() => {
            const row = document.getElementById("step-row-140").getBoundingClientRect();
            const list = document.getElementById("steps").getBoundingClientRect();
            return row.top >= list.top && row.bottom <= list.bottom;
        }"""
    )
    assert inside
    assert not watched.errors


def test_it_shows_a_mode_switch_pending_then_applied(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    seed_session(api, order_session_events())
    watched = open_page(api.project, "editor")
    page = watched.page
    open_session(page, "order-debug-42")

    page.select_option("#mode-select", "hybrid")
    page.click(".mode-form button[type=submit]")
    page.wait_for_selector("#directives-panel .state-pending")
    assert "mode → hybrid" in page.locator("#directives-panel").inner_text()
    assert api.get("/sessions/order-debug-42/control").json()["directives"][0]["mode"] == "hybrid"

    # The agent posts a step in the new mode: the page shows it applied, on the timeline too.
    api.ingest({"batch": [step("order-debug-42", 3, [{"id": "sys"}, {"id": "u1"}], mode="hybrid")]})
    page.wait_for_selector("#directives-panel .state-applied", timeout=15_000)
    assert "at step 3" in page.locator("#directives-panel").inner_text()
    page.wait_for_selector('#occupancy-chart .annotation-text:has-text("mode → hybrid")')
    assert page.locator("#current-mode").inner_text() == "hybrid"
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_it_says_beside_the_mode_switch_what_became_of_the_directive(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    # The directives panel is at the bottom of the left pane: out of view, it was the
    # only answer to "Send to agent", which seemed to do nothing.
    session = seed_session(api, order_session_events())
    watched = open_page(api.project, "editor")
    page = watched.page
    open_session(page, "order-debug-42")
    page.select_option("#mode-select", "hybrid")
    page.click(".mode-form button[type=submit]")
    note = page.locator(".mode-form #directive-sent")
    expect(note).to_contain_text("Sent mode → hybrid: pending")
    assert note.is_visible() and note.bounding_box()["y"] < 1000

    # An agent silent for a day (an imported transcript) never takes it: said at once.
    Session.objects.filter(pk=session.pk).update(last_event_at=timezone.now() - timedelta(days=1))
    page.reload()
    page.wait_for_selector("#occupancy-chart .main-svg")
    page.select_option("#mode-select", "sliding")
    page.click(".mode-form button[type=submit]")
    expect(note).to_contain_text("Sent mode → sliding: expired at once, no event from the agent")
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_a_restore_previewed_on_its_own_page_is_sent_and_shown_under_directives(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    # The archive's "Preview restoring the checked originals" opens the preview as a page
    # of its own, where no Directives panel is: its Send to agent did nothing.
    session = seed_session(api, order_session_events())
    watched = open_page(api.project, "editor")
    page = watched.page
    page.goto(f"{live_server.url}/sessions/{session.pk}/steps/2/restore/?id=a1")
    page.click(".restore-send button[type=submit]")
    page.wait_for_url(f"{live_server.url}/sessions/{session.pk}/#directives")
    expect(page.locator("#directives-panel")).to_contain_text("restore")
    directives = api.get("/sessions/order-debug-42/control").json()["directives"]
    assert [d["type"] for d in directives] == ["restore"]
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_it_lets_a_viewer_look_but_not_switch_or_restore(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    session = seed_session(api, order_session_events())
    page = open_page(api.project, "viewer").page
    open_session(page, "order-debug-42")
    assert page.locator("#mode-select").count() == 0
    assert "need an editor" in page.locator(".session-actions").inner_text()
    # No step open yet: j opens the first one.
    page.keyboard.press("j")
    page.wait_for_selector('#step-view[data-step="0"]')
    page.keyboard.press("j")
    page.wait_for_selector('#step-view[data-step="1"]')
    page.wait_for_function("() => document.title.startsWith('Step 1 · order-debug-42')")
    page.keyboard.press("k")
    page.wait_for_selector('#step-view[data-step="0"]')
    page.click("a.open-fold")
    page.click(".fold-view button[type=submit]")
    page.wait_for_selector(".restore-view")
    assert page.locator(".restore-send").count() == 0
    # Nor can it post around the page.
    status = page.evaluate(
        """async (url) => (await fetch(url, {
              method: "POST", body: new URLSearchParams({mode: "rag"}),
              headers: {"X-CSRFToken": document.cookie.match(/csrftoken=([^;]+)/)[1]}})).status""",
        f"/sessions/{session.pk}/mode/",
    )
    assert status == 403


HOSTILE = [
    '<script>window.__pwned = "script"; alert("script")</script>',
    "<img src=x onerror=\"window.__pwned='img'; alert('img')\">",
    "\"><svg onload=\"window.__pwned='svg'; alert('svg')\">",
    "</script><script>window.__pwned='json'</script>",
    '<a href="javascript:alert(1)">click me</a> <b hx-get="/logout/" hx-trigger="load">x</b>',
    "{{ request.user }} {% csrf_token %} <style>body{display:none}</style>",
]


def _hostile_events() -> list[dict[str, Any]]:
    sid = "<img src=x onerror=alert('sid')>"
    messages = [
        {"id": "sys", "role": "system", "content": HOSTILE[0]},
        {
            "id": "<b onmouseover=alert(1)>u1</b>",
            "role": "user<script>",
            "content": HOSTILE[1],
            "partition": "</script><script>window.__pwned='partition'</script>",
        },
        {"id": "t1", "role": "tool", "tool": "<svg onload=alert(2)>", "content": HOSTILE[2]},
        {"id": "t2", "role": "tool", "content": HOSTILE[3] + "\n" + HOSTILE[4] + "\n" + HOSTILE[5]},
    ]
    return [
        {"id": "x-start", "type": "session",
         "body": {"session_id": sid, "agent": HOSTILE[1], "model": HOSTILE[0], "mode": HOSTILE[2],
                  "budget": {"max_tokens": 4000}, "pinned": [HOSTILE[3]],
                  "metadata": {"task": HOSTILE[4]}}},
        step(sid, 0, messages, mode="</script><b>mode</b>", reason=HOSTILE[4],
             action={"action": "summarize", "targets": ["t1", "t2"], "reason": HOSTILE[1],
                     "result": {"id": "<i>sum</i>", "role": "tool", "content": HOSTILE[2]}}),
        step(sid, 1, [{"id": "sys"}, {"id": "<i>sum</i>"}], mode=HOSTILE[0],
             actions=[{"ids": ["<i>sum</i>"], "justification": HOSTILE[5],
                       "new_content": HOSTILE[0] + " rewritten " + HOSTILE[1]}]),
    ]  # fmt: skip


def test_it_runs_nothing_an_agent_sent(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    session = seed_session(api, _hostile_events())
    watched = open_page(api.project, "editor")
    page = watched.page
    base = f"{live_server.url}/sessions/{session.pk}"
    page.goto(f"{live_server.url}/?q=script")
    assert "<img src=x onerror=alert('sid')>" in page.locator("table.sessions").inner_text()
    page.click("table.sessions tbody a")  # (the header's links sort the list)
    page.wait_for_selector("#occupancy-chart .main-svg")
    assert HOSTILE[0] in page.locator(".session-header").inner_text()
    page.click('table.steps a[data-step="0"]')
    page.wait_for_selector('#step-view[data-step="0"]')
    page.click("a.open-fold")
    page.wait_for_selector(".fold-view")
    assert HOSTILE[2] in page.locator(".fold-view").inner_text()
    page.click(".fold-view button[type=submit]")
    page.wait_for_selector(".restore-view")
    page.click('table.steps a[data-step="1"]')
    page.wait_for_selector('#step-view[data-step="1"]')
    # The postmortem pages show the same content: an incident, the comparison, the overview.
    user = User.objects.get(username="editor-in-browser")
    incident_mark(session=session, user=user, title=HOSTILE[1], severity="sev1")
    annotation_create(session=session, author=user, body=HOSTILE[4], step_index=0,
                      message_id="<b onmouseover=alert(1)>u1</b>")  # fmt: skip
    sid = quote(session.external_id)
    project = f"{live_server.url}/projects/{session.project.slug}"
    for url in [f"{base}/steps/1/", f"{base}/compare/?from=0&to=1", f"{base}/archive/",
                f"{base}/steps/0/fold/?result=%3Ci%3Esum%3C%2Fi%3E", f"{base}/steps/0/",
                f"{project}/compare/?s={sid}&s={sid}", f"{project}/overview/",
                f"{project}/incidents/"]:  # fmt: skip
        page.goto(url)
        page.wait_for_load_state("load")
    page.goto(f"{base}/")
    page.wait_for_selector("#occupancy-chart .main-svg")
    page.hover("#occupancy-chart .legend")
    assert page.evaluate("window.__pwned === undefined")
    assert page.locator("#step-panel").is_visible()  # no injected style hid the page
    assert not watched.dialogs, watched.dialogs
    assert not watched.errors, watched.errors


def test_the_charts_toolbar_has_named_buttons_only_and_sends_nothing_away(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    seed_session(api, order_session_events())
    page = open_page(api.project, "viewer").page
    open_session(page, "order-debug-42")
    # What a keyboard reaches in the toolbar: each button says what it does.
    buttons = page.evaluate(
        """() => Array.from(document.querySelectorAll("#occupancy-chart .modebar-btn"))
                 .filter((b) => b.tabIndex >= 0).map((b) => b.getAttribute("aria-label"))"""
    )
    assert buttons and all(name and name.strip() for name in buttons), buttons
    # Nothing that sends the chart to plotly's cloud (the product runs air-gapped), nor
    # selection tools that select nothing here: fewer stops on the way to the steps.
    assert "Share chart..." not in buttons
    assert "Box Select" not in buttons and "Lasso Select" not in buttons
    assert {"Download plot as a PNG", "Reset axes"} <= set(buttons)


def test_the_step_axis_labels_whole_steps_however_far_one_zooms(
    api: Api, open_page: Callable[..., Watched]
) -> None:
    messages = [{"id": "sys", "role": "system", "content": "You help with orders."}]
    head = {"id": "long-start", "type": "session", "body": {"session_id": "long-run"}}
    seed_session(api, [head] + [
        step("long-run", i, [*messages, {"id": f"u{i}", "role": "user", "content": f"Order {i}?"}])
        for i in range(30)
    ])  # fmt: skip
    watched = open_page(api.project, "viewer")
    page = watched.page
    open_session(page, "long-run")
    ticks = """() => Array.from(document.querySelectorAll("#occupancy-chart .xtick text"))
                     .map((t) => t.textContent)"""
    labels = page.evaluate(ticks)
    assert all(t.isdigit() for t in labels) and len(set(labels)) == len(labels) > 2, labels
    # Zoomed in on a few steps: a label per step, none at a half step (was 3, 4, 4).
    shown = page.locator("#occupancy-chart .xtick text")
    for steps, want in (([3, 4.2], ["3", "4"]), ([3, 6], ["3", "4", "5", "6"])):
        page.evaluate("(r) => Plotly.relayout('occupancy-chart', {'xaxis.range': r})", steps)
        expect(shown).to_have_text(want, timeout=3_000)
    page.evaluate("() => Plotly.relayout('occupancy-chart', {'xaxis.autorange': true})")
    expect(shown).to_have_text(labels, timeout=3_000)
    assert watched.errors == []
