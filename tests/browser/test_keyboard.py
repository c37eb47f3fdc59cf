"""The dashboard from the keyboard alone: a skip link first on every page, every control
reached by Tab with its focus in sight, and nothing that moves a keyboard user away
from where they were going."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from contextview.projects.services import membership_set
from tests.api_client import Api
from tests.browser.conftest import Watched, seed_session
from tests.web.conftest import order_session_events
from tests.web.test_layout import layout_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Every control a keyboard user can see, numbered in the page (data-kb) for the walk below.
NUMBER_CONTROLS = """() => {
  const controls = Array.from(document.querySelectorAll(
    'a[href], button, input:not([type=hidden]), select, textarea, summary'))
    .filter((el) => !el.disabled && el.tabIndex >= 0
                    && el.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true}));
  controls.forEach((el, k) => { el.dataset.kb = String(k); });
  return controls.map((el) => el.tagName.toLowerCase() + ' '
    + (el.innerText || el.getAttribute('aria-label') || el.name || '').trim().slice(0, 40));
}"""

# The control that has the focus: its number, and whether a person sees where it is (its
# focus ring drawn, itself not transparent). A date field has the focus inside it, on the
# day, month or year the browser marks itself.
FOCUSED = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  let opacity = 1;
  for (let up = el; up; up = up.parentElement) opacity *= Number(getComputedStyle(up).opacity);
  const style = getComputedStyle(el);
  const ring = el.type === 'date'
    || (style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0);
  const box = el.getBoundingClientRect();
  const what = el.innerText || el.getAttribute('aria-label') || el.name || '';
  return {kb: el.dataset.kb ?? null,
          what: el.tagName.toLowerCase() + ' ' + what.trim().slice(0, 40),
          seen: ring && opacity > 0.5 && box.width > 0 && box.height > 0};
}"""


def _walk(page: Any) -> tuple[list[str], set[int], list[str]]:
    """Tab through the page from its top: its controls, the ones reached, and the ones
    whose focus could not be seen."""
    controls = page.evaluate(NUMBER_CONTROLS)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    reached: set[int] = set()
    unseen: list[str] = []
    for _ in range(len(controls) * 4 + 10):  # a date field takes four presses
        page.keyboard.press("Tab")
        focused = page.evaluate(FOCUSED)
        if focused is None:
            break  # past the last control: the focus went to the browser's own bar
        if focused["kb"] is not None:
            reached.add(int(focused["kb"]))
        if not focused["seen"]:
            page.wait_for_timeout(400)  # what fades in on focus (the chart's toolbar) has
            focused = page.evaluate(FOCUSED)
        if not focused["seen"] and focused["what"] not in unseen:
            unseen.append(focused["what"])
    return controls, reached, unseen


def _skip_link_leads_into_main(page: Any, *, from_top: bool = True) -> None:
    """The page's first control is the skip link, out of sight until it has the focus
    (Tab from the page's top, or `from_top` False: the page put the focus elsewhere);
    Enter then leaves the focus at the start of the page's main content."""
    assert page.evaluate(NUMBER_CONTROLS)[0] == "a Skip to main content"
    page.evaluate("() => { window.notReloaded = true; document.activeElement.blur(); }")
    link = page.locator("a.skip-link")
    hidden = link.bounding_box()
    assert hidden is not None and hidden["y"] + hidden["height"] <= 0
    if from_top:
        page.keyboard.press("Tab")
    else:
        link.focus()
    assert page.evaluate("() => document.activeElement.className") == "skip-link"
    shown = link.bounding_box()
    assert shown is not None and shown["y"] >= 0 and shown["width"] > 100
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.activeElement.id === 'main'")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.closest('main') !== null")
    # Followed where it is: the session page did reload itself for it.
    assert page.evaluate("() => window.notReloaded === true")


def test_every_page_starts_with_a_skip_link_and_tab_reaches_every_control_in_sight(
    api: Api, open_page: Callable[..., Watched], live_server: Any, browser: Any
) -> None:
    session = seed_session(api, order_session_events())
    watched = open_page(api.project, "admin")
    page = watched.page
    base, slug = live_server.url, api.project.slug
    problems: dict[str, Any] = {}
    for path in (
        f"/?project={slug}",
        f"/sessions/{session.pk}/",
        f"/sessions/{session.pk}/steps/1/",
        f"/sessions/{session.pk}/archive/",
        f"/projects/{slug}/overview/",
        f"/projects/{slug}/alerts/",
        f"/projects/{slug}/incidents/",
        f"/projects/{slug}/keys/",
        f"/projects/{slug}/members/",
        "/sessions/999999/",  # the not-found page
    ):
        page.goto(f"{base}{path}")
        page.wait_for_load_state("networkidle")
        controls, reached, unseen = _walk(page)
        missed = [c for k, c in enumerate(controls) if k not in reached]
        if missed or unseen:
            problems[path] = {"not reached": missed, "focus not seen": unseen}
        page.goto(f"{base}{path}")
        page.wait_for_load_state("networkidle")
        _skip_link_leads_into_main(page)
    assert problems == {}
    # The not-found page, opened twice, is all the console reports.
    assert (
        watched.errors
        == ["Failed to load resource: the server responded with a status of 404 (Not Found)"] * 2
    )

    signed_out = browser.new_context()
    try:
        login = signed_out.new_page()
        login.goto(f"{base}/login/")
        _skip_link_leads_into_main(login, from_top=False)  # the username has the focus
    finally:
        signed_out.close()


def test_the_project_switcher_waits_for_enter_when_changed_from_the_keyboard(
    api: Api, make_api: Callable[[str], Api], open_page: Callable[..., Watched], live_server: Any
) -> None:
    beta, gamma = make_api("beta"), make_api("gamma")
    watched = open_page(api.project, "viewer")
    user = User.objects.get(username="viewer-in-browser")
    for other in (beta, gamma):
        membership_set(user=user, project=other.project, role="viewer")
    page = watched.page
    page.goto(f"{live_server.url}/?project={api.project.slug}")
    page.focus("#project-switch")
    # On the way to gamma, beta is passed over: each arrow press changes the select.
    page.keyboard.press("ArrowDown")
    page.wait_for_timeout(500)
    assert page.locator("h1").inner_text() == f"Sessions · {api.project.name}"
    assert page.locator(".switcher button", has_text="Go").is_visible()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_url("**/?project=gamma")
    assert page.locator("h1").inner_text() == f"Sessions · {gamma.project.name}"
    # Picked with the pointer, a project opens at once, as before.
    page.select_option("#project-switch", "beta")
    page.wait_for_url("**/?project=beta")
    assert not watched.errors, watched.errors


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
