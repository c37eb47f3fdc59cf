"""An operation's reason as the pages show it: the counts it writes read in thousands,
while the text stored (and returned by the API, and found again by a re-import) is the
one that was sent."""

from __future__ import annotations

from collections.abc import Callable

from django.test import Client

from contextview.sessions.models import Session
from tests.api_client import Api, step
from tests.web.conftest import LOG, QUESTION, SUMMARY, SYSTEM

REASON = "compaction (trigger: auto, 167731 tokens reported before), order SO20260101007"
SHOWN = "compaction (trigger: auto, 167,731 tokens reported before), order SO20260101007"


def test_it_shows_the_counts_of_a_reason_in_thousands_and_stores_it_as_sent(
    api: Api, login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    session = seed([
        {"id": "compacted-start", "type": "session",
         "body": {"session_id": "compacted", "budget": {"max_tokens": 400}}},
        step("compacted", 0, [SYSTEM, QUESTION, LOG], reason=REASON,
             action={"action": "summarize", "target": LOG["id"], "result": SUMMARY,
                     "reason": REASON}),
    ])  # fmt: skip
    client = login("viewer")
    page = client.get(f"/sessions/{session.pk}/steps/0/").content.decode()
    assert f'<p class="reason">Reason: {SHOWN}</p>' in page  # the step's
    assert f'<div class="reason">Reason: {SHOWN}</div>' in page  # its operation's
    assert "167731" not in page
    report = client.get(f"/sessions/{session.pk}/report.html").content.decode()
    assert f'<p class="reason">Reason: {SHOWN}</p>' in report
    markdown = client.get(f"/sessions/{session.pk}/report.md").content.decode()
    assert "167,731 tokens" in markdown and "167731" not in markdown

    stored = api.get("/sessions/compacted/steps/0").json()
    assert [op["reason"] for op in stored["ops"]] == [REASON]
