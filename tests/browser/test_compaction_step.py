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
         "content": f"line {k}: order SO2026010{k:04d} shipped as TRK-{400000 + k}"}
        for k in range(RESULTS)
    ]  # fmt: skip
    summary = {"id": "compacted", "role": "user", "content": "Read many orders; none failed."}
    wanted = ", ".join(f"SO2026010{k:04d} (TRK-{400000 + k})" for k in range(RESULTS))
    asks = {"id": "asks", "role": "user", "content": f"Where are {wanted}?"}
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
            # The call that follows the compaction, as the provider counted it: the
            # summary, and a system prompt and tools the log does not hold.
            usage={"input_tokens": 5000},
        ),
        step("compacted-run", 2, [task, summary, asks]),
    ]


@pytest.fixture
def compaction_step(api: Api, open_page: Callable[..., Watched], live_server: Any) -> Watched:
    """A viewer's page on the compaction step (step 1)."""
    session = seed_session(api, compaction_events())
    watched = open_page(api.project, "viewer")
    watched.page.goto(f"{live_server.url}/sessions/{session.pk}/steps/1/")
    return watched


def test_it_counts_a_summary_s_originals_instead_of_listing_every_id(
    compaction_step: Watched,
) -> None:
    page = compaction_step.page
    label = page.locator(".diff-row[data-kind='summary'] .row-label")
    assert "summarized from 30 messages (summarize)" in label.inner_text()
    assert "result-17" not in label.inner_text()
    # The ids are one click away, each original with its content.
    label.locator("a.open-fold").click()
    page.wait_for_selector("#fold-panel .fold-view")
    assert "shipped as TRK-400017" in page.locator("#fold-panel").inner_text()
    assert compaction_step.errors == []


def test_it_lists_what_later_steps_needed_one_line_per_original_the_rest_behind_more(
    compaction_step: Watched,
) -> None:
    page = compaction_step.page
    lost = page.locator(".what-was-lost")
    # Step 2 asked for an order and its parcel from each of the 30 results: one line
    # each, ten in view, the section no taller than the window.
    shown = lost.locator(":scope > ul.needed-later > li")
    assert shown.count() == 10
    first = shown.first.inner_text()
    assert "SO20260100000" in first and "TRK-400000" in first
    assert "step 2 (asked), from tool result: “line 0: order SO20260100000" in first
    assert shown.first.locator("a.lost-source").get_attribute("title").endswith(": result-0")
    assert lost.bounding_box()["height"] < 800
    more = lost.locator("details.more-needed")
    assert more.locator("summary").inner_text() == "20 more needed later"
    more.locator("summary").focus()
    page.keyboard.press("Enter")
    assert more.locator("li", has_text="“line 29: order SO20260100029").is_visible()
    assert compaction_step.errors == []


def test_it_names_each_message_an_annotation_can_be_on_by_its_role_and_words(
    compaction_step: Watched,
) -> None:
    page = compaction_step.page
    target = page.locator("#annotate select[name=message]")
    task = target.locator("option[value='task']").inner_text()
    assert task == "user · Find why order SO20260101042 fails."
    result = target.locator("option[value='result-7']").inner_text()
    assert result == "tool · line 7: order SO20260100007 shipped as…"
    # Picked from the list, the note is on that message.
    target.select_option(label=result)
    assert target.input_value() == "result-7"
    assert compaction_step.errors == []


def test_it_puts_the_providers_count_on_the_context_the_call_was_made_with(
    compaction_step: Watched,
) -> None:
    rows = compaction_step.page.locator("table.tokens-table tbody tr")
    before, after = rows.nth(0), rows.nth(1)
    # The call after a compaction sees the compacted context; what the provider counts
    # beyond the log (system prompt, tools) is no error of anyone's.
    assert "5,000" in after.inner_text() and "provider" in after.inner_text()
    assert "5,000" not in before.inner_text()
    assert "%" not in before.inner_text() + after.inner_text()
    assert compaction_step.errors == []
