"""A hookless agent's session in the browser: no operations reported, tool calls as
content parts, and one call whose context silently replaced many earlier messages
with a summary. The step page shows the inferred summarize, opens its fold, keeps the
unchanged messages collapsed, and shows every new tool call with its arguments."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from contextview.core.stats import OVER_70, OVER_90
from tests.api_client import Api, step
from tests.browser.conftest import Watched, seed_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SID = "hookless"
BUDGET = 4000
SYSTEM = {"id": "sys", "role": "system", "content": "You are a coding agent on the shop."}
TASK = {"id": "u0", "role": "user", "content": "Find why order SO20260101007 times out."}
SUMMARY = {
    "id": "compact-1",
    "role": "user",
    "content": "Summary of the work so far: the nginx and app logs show 504s from "
    "inventory-svc on POST /reserve; the lock wait is 3,002 ms.",
}


def call(k: int) -> dict[str, Any]:
    """The agent's k-th model turn: an assistant message that only calls a tool."""
    return {
        "id": f"a{k}",
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": f"toolu_{k}", "name": "Bash",
             "input": {"command": f"grep -n SO20260101007 /var/log/app/shard-{k}.log"}},
        ],
    }  # fmt: skip


def result(k: int) -> dict[str, Any]:
    lines = " ".join(f"shard {k} line {n}: POST /reserve 504 after 3002 ms" for n in range(12))
    return {
        "id": f"t{k}",
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": lines}],
    }


def hookless_session() -> list[dict[str, Any]]:
    """Seven model calls; the last one's context has turns 0-3 summarized, unsaid."""
    events: list[dict[str, Any]] = [
        {"id": "start", "type": "session",
         "body": {"session_id": SID, "agent": "hookless-cli", "budget": {"max_tokens": BUDGET}}},
    ]  # fmt: skip
    context = [SYSTEM, TASK]
    for k in range(6):
        context = [*context, call(k), result(k)]
        events.append(step(SID, k, context))
    compacted = [SYSTEM, TASK, SUMMARY, *context[10:], call(6), result(6)]
    events.append(step(SID, 6, compacted))
    return events


@pytest.fixture
def compaction_page(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> tuple[Watched, Any]:
    session = seed_session(api, hookless_session())
    watched = open_page(api.project, "viewer")
    watched.page.goto(f"{live_server.url}/sessions/{session.pk}/steps/6/")
    watched.page.wait_for_selector("#occupancy-chart .main-svg")
    watched.page.wait_for_selector('#step-view[data-step="6"]')
    return watched, session


def test_a_silent_compaction_shows_as_an_inferred_summarize_with_its_fold(
    compaction_page: tuple[Watched, Any], tmp_path: Path
) -> None:
    watched, _ = compaction_page
    page = watched.page
    view = page.locator("#step-view")

    # The agent reported no operation; the server inferred one summarize of turns 0-3.
    assert "No operations in this step." in view.inner_text()
    inferred = view.locator(".inferred-ops .op-summarize")
    assert inferred.count() == 1 and inferred.is_visible()
    assert "compact-1" in inferred.inner_text()
    assert all(f"a{k}" in inferred.inner_text() for k in range(4))

    # What changed since step 5: the summary in place of eight messages, two new ones.
    summary_row = view.locator('.diff-row[data-kind="summary"]')
    assert summary_row.is_visible() and "Summary of the work so far" in summary_row.inner_text()
    assert view.locator('.diff-row[data-kind="added"]').count() == 2

    # Unchanged turns 4 and 5 are collapsed, their count in view, their content not.
    collapsed = view.locator("details.unchanged-run")
    assert collapsed.count() >= 1
    assert collapsed.first.get_attribute("open") is None
    assert "4 unchanged messages" in collapsed.first.locator(":scope > summary").inner_text()
    assert not collapsed.first.locator(".diff-row").first.is_visible()

    # The new call is visible: tool name and arguments.
    new_call = view.locator('.diff-row[data-kind="added"] .part-tool-call')
    assert new_call.count() == 1 and new_call.is_visible()
    assert new_call.locator(".tool-name").inner_text() == "Bash"
    assert "/var/log/app/shard-6.log" in new_call.locator(".args").inner_text()

    inferred.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "silent-compaction-step.png"))
    new_call.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "silent-compaction-diff.png"))

    # The fold opens, with the original messages the summary replaced.
    summary_row.locator("a.open-fold").click()
    fold = page.locator("#fold-panel .fold-view")
    fold.wait_for()
    originals = fold.locator(".original")
    assert originals.count() == 8
    assert "shard 0 line 3: POST /reserve 504" in fold.inner_text()
    assert "/var/log/app/shard-2.log" in fold.inner_text()
    assert "folded at step 6 by summarize" in fold.inner_text()

    # The chart's 70% and 90% lines are where the server says the flags start.
    labels = page.locator("#occupancy-chart .annotation-text").all_text_contents()
    for at in (OVER_70, OVER_90):
        assert f"{at:.0%} {round(BUDGET * at)}" in labels, labels
    assert watched.errors == [] and watched.dialogs == []

    fold.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "silent-compaction-fold.png"))
