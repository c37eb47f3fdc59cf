"""A compaction of 900 messages: its step's page stays small and readable, and the
rest of the messages come when asked for."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape
from typing import Any

from django.test import Client

from contextview.sessions.models import Session
from tests.api_client import step

MESSAGES = 900
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": "step-panel"}


def _text(k: int) -> str:
    return (f"tool output {k}: order SO2026{k:05d} shipped from warehouse W{k % 7}; "
            + "the carrier reports the parcel in transit, no exception raised. " * 8)  # fmt: skip


def compaction_events(sid: str = "compacting") -> list[dict[str, Any]]:
    """A context of 900 tool results and a system prompt, then one summary for all of them."""
    system = {"id": "sys", "role": "system", "content": "You track parcels."}
    results = [{"id": f"t{k}", "role": "tool", "content": _text(k)} for k in range(MESSAGES)]
    summary = {"id": "sum", "role": "assistant", "content": "900 parcels, all in transit."}
    return [
        {"id": f"{sid}-start", "type": "session", "body": {"session_id": sid, "model": "gpt-4o"}},
        step(sid, 0, [system, *results]),
        step(sid, 1, [{"id": "sys"}, *({"id": f"t{k}"} for k in range(MESSAGES))],
             action={"action": "summarize", "targets": [f"t{k}" for k in range(MESSAGES)],
                     "result": summary, "reason": "context full"}),
    ]  # fmt: skip


def _more_links(html: str) -> list[str]:
    return [unescape(u) for u in re.findall(r'class="rows-more".*?href="([^"]+)"', html, re.S)]


def test_it_keeps_a_900_message_compaction_step_under_300_kb(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    session = seed(compaction_events())
    client = login("viewer")
    for index in (0, 1):
        page = client.get(f"/sessions/{session.pk}/steps/{index}/").content
        assert len(page) < 300_000, (index, len(page))
        assert len(client.get(f"/sessions/{session.pk}/steps/{index}/", **HTMX).content) < 300_000
    page = client.get(f"/sessions/{session.pk}/steps/1/").content.decode()
    # The first rows of the compaction, then one line for the rest, with its count.
    assert 'id="m-t0"' in page and 'id="m-t8"' in page and 'id="m-t9"' not in page
    assert "Show 891 more messages" in page and "891 folded; rows 11–901" in page
    assert "900 parcels, all in transit." in page


def test_it_keeps_the_step_of_a_context_of_thousands_small_and_lists_what_it_shows(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    # An agent that resends a context of 6,000 messages and adds two at its next call.
    history = [
        {"id": f"m{k}", "role": ("user", "assistant")[k % 2], "content": f"message {k}"}
        for k in range(6000)
    ]
    start = {"id": "long-start", "type": "session", "body": {"session_id": "long"}}
    grown = [{"id": m["id"]} for m in history[:5998]] + history[5998:]
    session = seed([start, step("long", 0, history[:5998]), step("long", 1, grown)])
    page = login("viewer").get(f"/sessions/{session.pk}/steps/1/").content.decode()
    assert len(page) < 300_000, len(page)
    # The annotation form offers the messages the page shows (the two new ones among
    # them), not all 6,000: a row loaded later adds its own when its link is used.
    form = page[
        page.index('<select name="message"') : page.index(
            "</select>", page.index('<select name="message"')
        )
    ]
    assert 'value="m5999"' in form and 'value="m5998"' in form
    assert form.count("<option") < 50


def test_it_loads_the_rest_of_a_long_run_a_page_at_a_time(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    session = seed(compaction_events())
    client = login("viewer")
    links = _more_links(client.get(f"/sessions/{session.pk}/steps/1/").content.decode())
    seen: list[str] = []
    while links:
        (link,) = links
        fragment = client.get(link, HTTP_HX_REQUEST="true").content.decode()
        ids = re.findall(r'id="m-(t\d+)"', fragment)
        assert 0 < len(ids) <= 200
        seen += ids
        links = _more_links(fragment)
    assert seen == [f"t{k}" for k in range(9, MESSAGES)]


def test_it_keeps_the_fold_of_900_originals_and_a_comparison_small(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    session = seed(compaction_events())
    client = login("viewer")
    fold = client.get(f"/sessions/{session.pk}/steps/1/fold/?result=sum").content.decode()
    assert len(fold) < 300_000, len(fold)
    # Every original can still be restored; the first 20 show their content.
    assert fold.count('type="checkbox" name="id"') == MESSAGES
    assert fold.count("original-content") == 20 and "The other 880 originals" in fold
    compare = client.get(f"/sessions/{session.pk}/compare/?from=0&to=1").content
    assert len(compare) < 300_000
    (link,) = _more_links(compare.decode())
    assert link.startswith(f"/sessions/{session.pk}/compare/rows/?from=0&to=1&start=")
    rows = client.get(link, HTTP_HX_REQUEST="true").content.decode()
    assert rows.count('class="diff-row') == 200 and len(_more_links(rows)) == 1
