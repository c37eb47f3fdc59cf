"""The step page's "What the context holds": kinds of tokens and where pinned texts sit."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from contextview.core.tokens import load_encoding
from contextview.sessions.models import Session, Step
from tests.api_client import step

pytestmark = pytest.mark.django_db(transaction=True)

PINNED = "member id A12345"
LOG = "\n".join(f"2026-01-15 10:00:{k:02d} GET /api/cart/{k} 200 0.012s" for k in range(40))
THOUGHT = "The cart calls look normal, so the timeout is elsewhere."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_log",
            "description": "Read the shop's access log.",
            "parameters": {"type": "object", "properties": {"lines": {"type": "integer"}}},
        },
    }
]


def layout_session(name: str = "layout") -> list[dict[str, Any]]:
    """Three steps: the task at the start, the pinned text in the middle of two logs, and
    a model that read 20,000 tokens more than the log holds."""
    messages = [
        {"id": "sys", "role": "system", "content": "You debug checkout problems."},
        {"id": "task", "role": "user", "partition": "task",
         "content": "Find why order SO20260101007 times out."},
        {"id": "log1", "role": "tool", "tool": "read_log", "content": LOG},
        {"id": "note", "role": "assistant", "content": f"Noted: the customer's {PINNED}."},
        {"id": "log2", "role": "tool", "tool": "read_log", "content": LOG.replace("cart", "cat")},
        {"id": "think", "role": "assistant", "content": [
            {"type": "thinking", "thinking": THOUGHT},
            {"type": "text", "text": "Next I read the inventory log."}]},
    ]  # fmt: skip
    return [
        {"type": "session", "id": f"{name}-start",
         "body": {"session_id": name, "pinned": [PINNED], "model": "gpt-4o"}},
        step(name, 0, messages, tools=TOOLS, usage={"input_tokens": 24_000}),
        step(name, 1, [*messages, {"id": "u1", "role": "user", "content": "Go on."}],
             tools=TOOLS, usage={"input_tokens": 25_000}),
        step(name, 2, [*messages, {"id": "u1", "role": "user", "content": "Go on."},
                       {"id": "a2", "role": "assistant", "content": "Reading it."}],
             tools=TOOLS, usage={"input_tokens": 26_000}),
    ]  # fmt: skip


def test_it_shows_the_context_by_kind_and_where_the_pinned_text_and_task_sit(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    session = seed(layout_session())
    page = login("viewer").get(f"/sessions/{session.pk}/steps/0/").content.decode()
    assert "What the context holds" in page and 'data-chart="composition"' in page
    stats = Step.objects.with_stats().get(session=session, index=0).stats
    table = page[
        page.index('class="composition-table"') : page.index(
            "</table>", page.index('class="composition-table"')
        )
    ]
    unseen = stats["unseen_tokens"]
    assert unseen > 20_000 and f"{unseen:,}" in table
    thinking = len(load_encoding("cl100k_base").encode_ordinary(THOUGHT))
    row = table[table.index('class="kind-thinking"') :].split("</tr>")[0]
    assert f'<td class="num">{thinking}</td>' in row
    for kind in ("tool definitions", "system", "tool results", "messages"):
        assert f"<th>{kind}</th>" in table, kind
    places = page[page.index('class="placements"') :].split("</ul>")[0]
    assert '<span class="where where-start">start</span> task' in places
    assert f'<span class="where where-middle">middle</span> pinned <q>{PINNED}</q>' in places
    assert 'href="#m-note"' in places


def test_the_step_list_shows_the_unseen_tokens_its_occupancy_counts(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    # The list read "36 → 36 13%": the occupancy counts what the provider saw, the
    # tokens only what the log holds, and nothing said so.
    session = seed(layout_session())
    stats = Step.objects.with_stats().get(session=session, index=0).stats
    client = login("viewer")
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    row = page[page.index('id="step-row-0"') :].split("</tr>")[0]
    assert f"+{stats['unseen_tokens']:,} unseen</span>" in row
    seen = stats["tokens"]["after"] + stats["unseen_tokens"]
    assert f"{round(100 * seen / 128_000)}%" in row  # gpt-4o's window
    # And so does the HTML report's timeline.
    report = client.get(f"/sessions/{session.pk}/report.html").content.decode()
    row = report[report.index('id="step-0"') :].split("</tr>")[0]
    assert f"+{stats['unseen_tokens']:,} unseen</span>" in row
    markdown = client.get(f"/sessions/{session.pk}/report.md").content.decode()
    row = markdown[markdown.index("\n| 0 |") :].split("\n")[1]
    assert f"(+{stats['unseen_tokens']:,} unseen)" in row


def _unseen_row(page: str) -> tuple[str, str]:
    table = page[page.index('class="composition-table"') :].split("</table>")[0]
    row = table[table.index('class="kind-unseen"') :].split("</tr>")[0]
    before, after = row.split('<td class="num">')[1:3]
    return before.split("</td>")[0], after.split("</td>")[0]


@pytest.mark.parametrize("reported_before", [90_000, None])
def test_a_compactions_before_shows_what_was_reported_before_it_not_the_after(
    login: Callable[..., Client], seed: Callable[..., Session], reported_before: int | None
) -> None:
    # The provider read the call after the compaction: 30,000 tokens where the log
    # holds a few hundred. Before it, Claude Code reports its own count (preTokens).
    logs = [{"id": f"log{k}", "role": "tool", "content": LOG} for k in range(3)]
    summary = {"id": "sum", "role": "user", "content": "Three logs of cart calls, all 200."}
    ask = {"id": "u1", "role": "user", "content": "Why does SO20260101007 time out?"}
    compact = {"action": "summarize", "targets": ["log0", "log1", "log2"], "result": summary}
    extra = {} if reported_before is None else {"before_tokens": reported_before}
    session = seed([
        {"type": "session", "id": "cmp-start", "body": {"session_id": "cmp", "model": "gpt-4o"}},
        step("cmp", 0, [ask, *logs], action=compact, usage={"input_tokens": 30_000}, **extra),
    ])  # fmt: skip
    stats = Step.objects.with_stats().get(session=session, index=0).stats
    assert stats["tokens"]["after"] < stats["tokens"]["before"]
    page = login("viewer").get(f"/sessions/{session.pk}/steps/0/").content.decode()
    before, after = _unseen_row(page)
    assert after == f"{stats['unseen_tokens']:,}"
    if reported_before is None:
        assert before == "—"  # not known; the after's was shown
        # Nor is the usage, a count of the after, the before's reported count.
        assert stats["reported_error"]["before"] is None
    else:
        assert before == f"{reported_before - stats['tokens']['before']:,}"


def test_a_summary_the_provider_encrypted_shows_no_ratio_and_says_why(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    logs = [{"id": f"log{k}", "role": "tool", "content": LOG} for k in range(2)]
    item = {
        "id": "cmp",
        "role": "user",
        "content": [{"type": "compaction", "encrypted_content": "gAAAAB-opaque"}],
    }
    compact = {"action": "summarize", "targets": ["log0", "log1"], "result": item}
    session = seed([step("enc", 0, logs, action=compact)])  # fmt: skip
    page = login("viewer").get(f"/sessions/{session.pk}/steps/0/").content.decode()
    stats = page[page.index('class="op-stats"') :].split("</div>")[0]
    # It read "19,631 → 0 tokens · ratio 0.00", and the step was flagged ratio_aggressive.
    assert "→ 0 tokens" in stats and "ratio 0" not in stats
    assert "as a summary the provider encrypted: no ratio" in stats
    assert "ratio_aggressive" not in page


def test_the_reports_head_the_sessions_cost_as_its_page_does(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    # The page said "Cost $0.19"; neither report had a cost.
    session = seed(layout_session("priced"))
    client = login("viewer")
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    shown = re.search(r'<dd id="session-cost">(\$[0-9.,]+)', page)
    assert shown, "the page shows a cost"
    html = client.get(f"/sessions/{session.pk}/report.html").content.decode()
    assert f'<dt>Cost</dt><dd id="session-cost">{shown.group(1)}' in html
    markdown = client.get(f"/sessions/{session.pk}/report.md").content.decode()
    assert f"\n- cost: {shown.group(1)}\n" in markdown


def test_with_no_step_open_the_panel_says_where_to_look_first(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    from tests.stats.test_loss import amnesia_session

    session = seed(amnesia_session("first-look"))
    aggregates = Session.objects.get(pk=session.pk).aggregates
    first = aggregates["amnesia"][0]
    client = login("viewer")
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    panel = page[page.index('id="step-panel"') :].split("</section>")[0]
    # The panel held a hint alone: what was lost and needed later sat far below the list.
    assert "Where to look first" in panel
    assert f'the first at <a href="/sessions/{session.pk}/steps/{first["lost_at"]}/"' in panel
    assert f">step {first['needed_at']}</a> ({first['how']})" in panel
    steps = Step.objects.with_stats().filter(session=session).order_by("index")
    flagged = next(s.index for s in steps if s.stats and s.stats["flags"])
    assert f'Its first flagged step: <a href="/sessions/{session.pk}/steps/{flagged}/"' in panel
    opened = client.get(f"/sessions/{session.pk}/steps/0/").content.decode()
    assert "Where to look first" not in opened
