"""Pages reached with awkward parameters: a NUL in a filter, a session id with a slash."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from contextview.sessions.models import Session
from tests.web.conftest import order_session_events


@pytest.mark.parametrize("name", ["agent", "mode", "status", "flag", "since", "q", "cursor"])
def test_it_answers_a_nul_in_a_filter_with_400_naming_it(
    login: Callable[..., Client], order_session: Session, name: str
) -> None:
    response = login().get("/", {name: "support\x00bot"})
    assert response.status_code == 400
    assert response.content.decode().startswith(f"{name}: must not contain a NUL")


def test_it_answers_a_nul_in_a_project_page_address_with_400(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login()
    slug = order_session.project.slug
    assert client.get(f"/projects/{slug}/overview/", {"agent": "\x00"}).status_code == 400
    assert client.get(f"/p/{slug}/a%00b/").status_code == 400


def test_it_opens_the_pages_of_a_session_whose_id_holds_a_slash(
    login: Callable[..., Client], seed: Callable[..., Any]
) -> None:
    session = seed(order_session_events("team/agent-7"))
    client = login()
    listing = client.get("/").content.decode()
    assert f'href="/sessions/{session.pk}/">team/agent-7</a>' in listing
    assert "team/agent-7" in client.get(f"/sessions/{session.pk}/").content.decode()
    assert client.get(f"/sessions/{session.pk}/steps/1/").status_code == 200
    # The permalink, by the id the agent chose, raw or encoded.
    opened = client.get(f"/p/{session.project.slug}/team/agent-7/", follow=True)
    assert opened.redirect_chain[-1][0] == f"/sessions/{session.pk}/"
    step = client.get(f"/p/{session.project.slug}/team%2Fagent-7/1/", follow=True)
    assert step.redirect_chain[-1][0] == f"/sessions/{session.pk}/steps/1/"
    assert step.status_code == 200


def test_it_answers_a_nul_in_a_form_field_with_400_naming_it(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login()
    note = client.post(f"/sessions/{order_session.pk}/notes/", {"body": "a\x00b"})
    assert note.status_code == 400 and note.content.decode().startswith("body: must not")
    mode = client.post(f"/sessions/{order_session.pk}/mode/", {"mode": "rag\x00"})
    assert mode.status_code == 400 and mode.content.decode().startswith("mode: must not")


def test_it_says_why_it_refused_a_form_too_large_to_read(
    login: Callable[..., Client], order_session: Session, settings: Any
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    client = login()
    url = f"/sessions/{order_session.pk}/notes/"
    page = client.post(url, {"body": "a pasted log " * 2_000})
    assert page.status_code == 400
    assert "The form sent more than 10,000 bytes" in page.content.decode()
    htmx = client.post(url, {"body": "x" * 20_000}, HTTP_HX_REQUEST="true")
    assert htmx.status_code == 400 and htmx["Content-Type"] == "text/plain"
    assert htmx.content.decode().startswith("The form sent more than 10,000 bytes")
    fields = client.post(url, {"body": "x", **{f"f{n}": "1" for n in range(1_001)}})
    assert fields.status_code == 400
    assert "The form sent more than 1,000 fields" in fields.content.decode()


def test_it_reads_a_date_at_the_end_of_the_calendar_as_the_last_day_there_is(
    login: Callable[..., Client], order_session: Session
) -> None:
    # The day after 9999-12-31, or 30 days before 0001-01-01, is no date: each was a 500.
    client = login()
    slug = order_session.project.slug
    listed = client.get("/", {"until": "9999-12-31"})
    assert listed.status_code == 200
    assert 'aria-label="compare order-debug-42"' in listed.content.decode()
    export = client.get(f"/projects/{slug}/export/steps.jsonl", {"until": "9999-12-31"})
    assert export.status_code == 200
    assert b'"session_id": "order-debug-42"' in b"".join(export.streaming_content)
    for page in ("overview", "overview/replay"):
        for query in ({"until": "9999-12-31"}, {"range": "custom", "until": "0001-01-01"}):
            assert client.get(f"/projects/{slug}/{page}/", query).status_code == 200, (page, query)


def test_it_reads_a_number_past_a_bigint_in_an_address_as_none_given(
    login: Callable[..., Client], order_session: Session
) -> None:
    # OFFSET 999...9 (30 nines) was a 500: the archive opens at its first page.
    client = login()
    archive = client.get(f"/sessions/{order_session.pk}/archive/", {"after": "9" * 30})
    assert archive.status_code == 200 and "tool_result_32" in archive.content.decode()
    assert client.get(f"/sessions/{order_session.pk}/archive/", {"after": "²"}).status_code == 200


def test_it_shows_the_sessions_notes_for_a_step_scope_without_a_step_index(
    login: Callable[..., Client], order_session: Session
) -> None:
    # A step of -1 has no address: the redirect to it was a 500.
    notes = f"/sessions/{order_session.pk}/notes/"
    response = login().get(notes, {"scope": "step", "step": "-1"})
    assert response.status_code == 302
    assert response["Location"] == f"/sessions/{order_session.pk}/#annotations"
