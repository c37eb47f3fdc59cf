"""A compaction step as an engineer reads it after "my agent forgot its goal"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.api_client import Api, step
from tests.browser.conftest import Watched, seed_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RESULTS = 30


def compaction_events() -> list[dict[str, Any]]:
    """A task, 30 tool results, all summarized in one operation at step 1."""
    task = {"id": "task", "role": "user", "content": "Find why order SO20260101042 fails."}
    results = [
        {"id": f"result-{k}", "role": "tool", "tool": "read_file",
         "content": f"line {k}: order SO2026010{k:04d} shipped by carrier C{k}"}
        for k in range(RESULTS)
    ]  # fmt: skip
    summary = {"id": "compacted", "role": "user", "content": "Read many orders; none failed."}
    return [
        step("compacted-run", 0, [task, *results]),
        step(
            "compacted-run",
            1,
            [task, *results],
            action={
                "action": "summarize",
                "targets": [r["id"] for r in results],
                "reason": "over budget",
                "result": summary,
            },
        ),  # fmt: skip
    ]


def test_it_counts_a_summary_s_originals_instead_of_listing_every_id(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    session = seed_session(api, compaction_events())
    watched = open_page(api.project, "viewer")
    page = watched.page
    page.goto(f"{live_server.url}/sessions/{session.pk}/steps/1/")
    label = page.locator(".diff-row[data-kind='summary'] .row-label")
    assert "summarized from 30 messages (summarize)" in label.inner_text()
    assert "result-17" not in label.inner_text()
    # The ids are one click away, each original with its content.
    label.locator("a.open-fold").click()
    page.wait_for_selector("#fold-panel .fold-view")
    assert "shipped by carrier C17" in page.locator("#fold-panel").inner_text()
    assert watched.errors == []
