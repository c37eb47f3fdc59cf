"""One rule computes a session's budget limit and one list its thresholds: the lines the
page draws are where the statistics flag budget_exceeded, over_70 and over_90, with or
without a declared budget."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from contextview.sessions.models import Session
from tests.api_client import Api, step

WORDS = " ".join(f"word{k}" for k in range(170))


def _meta(page: str) -> Any:
    match = re.search(r'data-meta="([^"]*)"', page)
    assert match
    return json.loads(html.unescape(match.group(1)))


@pytest.mark.parametrize(
    ("declared", "budget"),
    [
        ({"budget": {"max_tokens": 400, "reserved_tokens": 40}}, {"max_tokens": 400, "limit": 360}),
        (
            {"budget": {"reserved_tokens": 40}, "context_window": 300},
            {"max_tokens": 300, "limit": 260},
        ),
        ({"context_window": 280}, {"max_tokens": 280, "limit": 280}),
        ({}, {"max_tokens": None, "limit": None}),
    ],
    ids=["budget", "reserved-only", "window-only", "neither"],
)
def test_the_page_draws_the_limit_the_statistics_flag_against(
    declared: dict[str, Any],
    budget: dict[str, int | None],
    api: Api,
    seed: Callable[..., Session],
    login: Callable[..., Client],
) -> None:
    session = seed(
        [
            {"id": "s", "type": "session", "body": {"session_id": "b", **declared}},
            step("b", 0, [{"id": "u1", "role": "user", "content": WORDS}]),
        ]
    )
    page = login("viewer").get(f"/sessions/{session.pk}/").content.decode()
    meta = _meta(page)
    assert meta["budget"] == budget

    stats = api.get("/sessions/b/steps/0").json()["stats"]
    after = stats["tokens"]["after"]
    limit = budget["limit"]
    assert limit is None or abs(after - limit) < 100, "the context should sit near the limit"
    assert ("budget_exceeded" in stats["flags"]) == (limit is not None and after > limit)
    # The 70% and 90% lines drawn are where the statistics raise over_70 and over_90.
    drawn = {line["flag"]: line["at"] for line in meta["lines"]}
    assert drawn.keys() == {"budget", "over_70", "over_90"}
    for flag in ("over_70", "over_90"):
        top = budget["max_tokens"]
        assert (flag in stats["flags"]) == (top is not None and after > top * drawn[flag]), flag
