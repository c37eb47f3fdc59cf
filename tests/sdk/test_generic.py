"""record_step against a real server: what the agent did is what the server shows."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from contextview.sdk import Client
from tests.sdk.conftest import Reader

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_it_sends_an_openai_style_loop_with_its_compactions(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client]
) -> None:
    client = make_client(gunicorn_api, project_key)
    session = client.session("openai-loop", agent="plain-loop", model="gpt-4o", mode="full")
    messages = [
        {"role": "system", "content": "You debug orders."},
        {"role": "user", "content": "Why does order SO20260101007 time out?"},
    ]
    session.record_step(messages)
    messages.append({"role": "assistant", "content": "Reading the nginx error log."})
    log = "upstream timed out (110) " * 40
    messages.append({"role": "tool", "tool_call_id": "c1", "content": log})
    session.record_step(messages)
    compacted = messages[:3] + [{"role": "tool", "tool_call_id": "c1", "content": "504 after 3 s"}]
    session.record_step(messages, after=compacted, reason="over budget")
    messages = compacted + [{"role": "user", "content": "Thanks."}]
    session.record_step(messages)
    session.end("succeeded")
    assert client.flush(20), client.stats

    reader = Reader(gunicorn_api, project_key)
    steps = reader.steps("openai-loop")
    assert len(steps) == 4
    assert [len(s["before"]) for s in steps] == [2, 4, 4, 5]
    third = steps[2]
    assert [op["op"] for op in third["ops"]] == ["rewrite"]
    assert third["after"][3]["content"] == "504 after 3 s"
    assert [m["id"] for m in third["before"]] == [m["id"] for m in third["after"]]
    assert steps[3]["before"][3]["content"] == "504 after 3 s"
    assert client.stats["sent"] == 6 and client.stats["dropped"] == 0
