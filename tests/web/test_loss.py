"""The step page's "What was lost" panel and the session list's loss filters."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from contextview.sessions.models import Session
from tests.stats.test_loss import amnesia_session, waste_session

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


def test_it_lists_amnesia_refetches_and_re_billed_results_on_the_session_page(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    forgetful = seed(amnesia_session("forgetful"))
    wasteful = seed(waste_session("wasteful"))
    client = login("viewer")
    page = client.get(f"/sessions/{forgetful.pk}/").content.decode()
    assert "What was lost and needed later" in page
    step_2 = f'href="/sessions/{forgetful.pk}/steps/2/"'
    # SO20260101007: lost at step 2, asked for at step 5; the search fetched again at 6.
    amnesia = page[page.index('class="amnesia-list"') : page.index('class="refetch-list"')]
    assert "SO20260101007" in amnesia and step_2 in amnesia
    assert f'href="/sessions/{forgetful.pk}/steps/5/"' in amnesia and "asked" in amnesia
    refetches = page[page.index('class="refetch-list"') :]
    assert "search_orders" in refetches[: refetches.index("</table>")]
    assert f'href="/sessions/{forgetful.pk}/steps/6/"' in refetches
    assert "Carried for nothing" not in page

    page = client.get(f"/sessions/{wasteful.pk}/").content.decode()
    assert "What was lost and needed later" not in page
    aggregates = wasteful.aggregates
    assert f"Re-billed tokens: <strong>{aggregates['rebilled_tokens']:,}</strong>" in page
    duplicates = page[
        page.index('class="duplicate-list"') : page.index('class="unreferenced-list"')
    ]
    assert f'href="/sessions/{wasteful.pk}/steps/2/#m-t1"' in duplicates
    unreferenced = page[page.index('class="unreferenced-list"') :]
    assert "read_log" in unreferenced and "search_orders" not in unreferenced.split("</table>")[0]
