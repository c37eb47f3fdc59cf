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


@pytest.mark.parametrize("capture", ["content", "copy", "typo"])
def test_a_message_edited_in_place_after_a_step_is_logged_as_each_step_saw_it(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client], capture: str
) -> None:
    client = make_client(gunicorn_api, project_key)
    sid = f"in-place-{capture}"
    session = client.session(sid, agent="plain-loop")
    log = "upstream timed out (110) while reading response header " * 30
    messages = [
        {"id": "u1", "role": "user", "content": "Why does order SO20260101007 time out?"},
        {"id": "t1", "role": "tool", "content": log},
    ]
    first = session.record_step(messages, capture=capture)
    messages[1]["content"] = "upstream timed out (110)"  # truncated in place
    second = session.record_step(messages, capture=capture)
    session.end("succeeded")
    assert client.flush(20), client.problems

    steps = Reader(gunicorn_api, project_key).steps(sid)
    assert (first, second) == (0, 1)
    assert steps[0]["before"][1]["content"] == log
    assert steps[1]["before"][1]["content"] == "upstream timed out (110)"
    # A name record_step does not know is reported, and the steps are taken as copies.
    assert [p.detail for p in client.problems] == (
        ["ValueError: capture must be one of content, copy, shared, not 'typo'"] * 2
        if capture == "typo"
        else []
    )
