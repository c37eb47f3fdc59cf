"""The step page's "What was lost" panel and the session list's loss filters."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from contextview.sessions.models import Session
from tests.stats.test_loss import amnesia_session

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_shows_what_was_lost_and_which_later_step_needed_it(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    session = seed(amnesia_session("forgetful"))
    fine = seed(
        [
            {"type": "session", "id": "fine-start", "body": {"session_id": "fine"}},
            {
                "id": "fine-0",
                "type": "step",
                "body": {
                    "session_id": "fine",
                    "index": 0,
                    "obs": {"messages": [{"id": "u", "role": "user", "content": "hello"}]},
                },
            },
        ]
    )
    client = login("viewer")
    page = client.get(f"/sessions/{session.pk}/steps/2/").content.decode()
    assert "What was lost" in page
    assert f'href="/sessions/{session.pk}/steps/5/">step 5</a> (asked)' in page
    assert '<mark class="lost-entity needed">SO20260101007</mark>' in page
    asking = client.get(f"/sessions/{session.pk}/steps/5/").content.decode()
    assert "amnesia" in asking and "needs something an earlier operation lost" in asking

    def listed(query: str) -> bool:
        return "forgetful" in client.get(f"/?{query}").content.decode()

    assert listed("flag=amnesia") and listed("flag=refetch_after_fold")
    fine_link = f'href="/sessions/{fine.pk}/"'
    assert fine_link in client.get("/").content.decode()
    assert fine_link not in client.get("/?flag=amnesia").content.decode()
