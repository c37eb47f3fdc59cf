"""One rule decides a session's encoding: the statistics worker, the read API and the
step page count and show a session's tokens with the same one, whether the session
declares a model, an encoding, or neither."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.test import Client

from contextview.core.tokens import TokenCounter
from contextview.sessions.models import Session
from tests.api_client import Api, step

HTMX = {"HTTP_HX_REQUEST": "true"}
MESSAGES = [
    {"id": "sys", "role": "system", "content": "You answer questions about invoices."},
    {"id": "u1", "role": "user", "content": "Why was invoice INV-2026-0042 charged twice?"},
    {
        "id": "t1",
        "role": "tool",
        "tool": "billing_lookup",
        "content": "charge ch_1 at 10:02 captured; charge ch_2 at 10:02 captured; "
        "idempotency key missing on the retry after a gateway timeout of 30 s",
    },
]
SUMMARY = {"id": "t1_sum", "role": "tool", "content": "two captures, retry had no idempotency key"}


@pytest.mark.parametrize(
    "declared",
    [{"model": "gpt-4o"}, {"encoding": "o200k_base"}, {}],
    ids=["model", "encoding", "neither"],
)
def test_the_worker_the_api_and_the_page_count_with_one_encoding(
    declared: dict[str, str],
    api: Api,
    seed: Callable[..., Session],
    login: Callable[..., Client],
) -> None:
    session = seed(
        [
            {"id": "s", "type": "session", "body": {"session_id": "inv", **declared}},
            step("inv", 0, MESSAGES),
            step(
                "inv",
                1,
                [{"id": "sys"}, {"id": "u1"}, {"id": "t1"}],
                action={"action": "summarize", "target": "t1", "result": SUMMARY},
            ),
        ]
    )
    chosen = session.encoding_choice().name
    counter = TokenCounter(chosen)
    expected = [counter.count(m["content"]) for m in MESSAGES]

    assert session.aggregates["encoding"] == chosen
    got = api.get("/sessions/inv/steps/0").json()
    assert got["stats"]["encoding"] == chosen
    assert [m["tokens"] for m in got["before"]] == expected
    assert got["stats"]["tokens"]["before"] == sum(expected)

    client = login("viewer")
    fragment = client.get(f"/sessions/{session.pk}/steps/0/", **HTMX).content.decode()
    shown = re.findall(r'title="measured tokens">([\d,]+) tok<', fragment)
    assert shown, "the step page shows no measured tokens"
    assert {int(n.replace(",", "")) for n in shown} == set(expected)
    # The archive page counts the folded original in the same encoding.
    archive = client.get(f"/sessions/{session.pk}/archive/").content.decode()
    assert f'<td class="num">{expected[2]:,}</td>' in archive
    # The session's header names that encoding, also when none was sent.
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    [shown_encoding] = re.findall(r"<dt>Encoding</dt><dd[^>]*>([\w-]+)", page)
    assert shown_encoding == chosen
    assert ("(derived)" in page) == ("encoding" not in declared)
    # So does the HTML report: it said "Encoding —" for a session that sent none.
    report = client.get(f"/sessions/{session.pk}/report.html").content.decode()
    [reported] = re.findall(r"<dt>Encoding</dt><dd[^>]*>([\w—-]+)", report)
    assert reported == chosen
    assert ("(derived)" in report) == ("encoding" not in declared)
