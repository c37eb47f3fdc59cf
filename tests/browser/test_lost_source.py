"""From a lost entity on a step to the original it was in, the entity in view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.api_client import Api, step
from tests.browser.conftest import Watched, seed_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_opens_the_original_a_lost_entity_came_from_with_the_entity_in_view(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    # A long log whose one order number sits near its end, far below the fold.
    lines = [f"10:{i // 60:02d}:{i % 60:02d} GET /healthz 200 2 ms" for i in range(400)]
    lines.insert(390, "10:06:30 POST /api/orders/SO20260101042/checkout 504 after 3 s")
    log = {"id": "log", "role": "tool", "tool": "read_file", "content": "\n".join(lines)}
    ask = {"id": "u1", "role": "user", "content": "Why do checkouts fail?"}
    summary = {"id": "sum", "role": "tool", "content": "Health checks pass; one checkout failed."}
    again = {"id": "u2", "role": "user", "content": "And order SO20260101042?"}
    session = seed_session(
        api,
        [
            step("long-log", 0, [ask, log]),
            step(
                "long-log",
                1,
                [ask, log],
                action={"action": "summarize", "target": "log", "result": summary},
            ),
            step("long-log", 2, [ask, summary, again]),
        ],  # fmt: skip
    )
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.goto(f"{live_server.url}/sessions/{session.pk}/steps/1/")
    # Needed again at step 2: listed first, and linked to where it was.
    needed = page.locator(".needed-later li", has_text="SO20260101042")
    assert "step 2" in needed.inner_text()
    # The original (log) named by what it is and its first line, its id in the title.
    assert "from tool result: “10:00:00 GET /healthz" in needed.inner_text()
    assert needed.locator("a.lost-source").get_attribute("title").endswith(": log")
    needed.locator("a.lost-source").click()
    page.wait_for_selector(".archive-one")
    assert page.url.endswith("&id=log&mark=SO20260101042")
    marked = page.locator(".archive pre mark.lost-entity")
    assert marked.count() == 1 and marked.inner_text() == "SO20260101042"
    # Brought into view, though it is line 391 of the original.
    page.wait_for_function(
        """() => {
            const m = document.querySelector('.archive pre mark.lost-entity');
            const r = m.getBoundingClientRect();
            const box = m.closest('pre').getBoundingClientRect();
            return r.top >= Math.max(box.top, 0)
                && r.bottom <= Math.min(box.bottom, window.innerHeight);
        }"""
    )
    assert watched.errors == []
