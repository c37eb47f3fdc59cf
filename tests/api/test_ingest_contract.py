"""What POST /api/v1/ingest owes a client that reads the contract literally."""

from __future__ import annotations

import pytest

from tests.api_client import Api, step


def _session_at(session: str, timestamp: str) -> dict[str, object]:
    return {
        "id": f"{session}-start",
        "type": "session",
        "timestamp": timestamp,
        "body": {"session_id": session},
    }


@pytest.mark.parametrize(
    ("timestamp", "started_at"),
    [
        # RFC 3339 allows a leap second; Python's datetime has no second 60.
        ("2016-12-31T23:59:60Z", "2016-12-31T23:59:59.999999+00:00"),
        ("2016-12-31T18:59:60.5-05:00", "2016-12-31T23:59:59.999999+00:00"),
        # and a fraction of a second of any length (time-secfrac = "." 1*DIGIT).
        ("2026-11-30T09:00:00.1234567891Z", "2026-11-30T09:00:00.123456+00:00"),
    ],
)
def test_it_takes_every_rfc_3339_timestamp(api: Api, timestamp: str, started_at: str) -> None:
    answer = api.ingest({"batch": [_session_at("leap", timestamp)]})
    assert answer.json()["results"] == [{"id": "leap-start", "status": 201}]
    assert api.get("/sessions/leap").json()["started_at"] == started_at


def test_it_takes_a_message_without_content_that_is_more_than_an_id(api: Api) -> None:
    """Only a message sent with its id alone refers to what the session recorded; an
    assistant message that only calls tools may leave `content` out, as OpenAI's API
    allows, and is a message of its own."""
    calls = [{"id": "call_7", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    question = {"id": "q", "role": "user", "content": "What is in the folder?"}
    asks = {"id": "a1", "role": "assistant", "tool_calls": calls}
    answer = api.ingest({"batch": [step("tools", 0, [question, asks])]})
    assert answer.json()["results"] == [{"id": "tools-step-0", "status": 201}]
    got = api.get("/sessions/tools/steps/0").json()["before"][1]
    assert (got["id"], got["role"], got["partition"]) == ("a1", "assistant", "memory")
    assert got["content"] is None and got["tool_calls"] == calls
    # An id alone that the session never recorded is still an error for its event.
    unknown = api.ingest({"batch": [step("tools", 1, [question, {"id": "a2"}])]})
    assert unknown.json()["results"][0]["status"] == 422
    assert "id 'a2' was never recorded" in unknown.json()["results"][0]["error"]


def test_a_session_read_adds_its_task_line_and_keeps_the_fields_as_sent(api: Api) -> None:
    """`task` is a field the contract leaves the server to add: the session's fields as
    sent stay as they were, its metadata's task among them."""
    label = {"session_id": "labelled", "metadata": {"task": "refund stuck\n  since Monday"}}
    question = {"id": "q", "role": "user", "content": "Is order SO20260101042 shipped?"}
    api.ingest({"batch": [
        {"id": "l-start", "type": "session", "body": label},
        step("asked", 0, [question]),
        {"id": "s-start", "type": "session", "body": {"session_id": "silent"}},
    ]})  # fmt: skip
    labelled = api.get("/sessions/labelled").json()
    assert labelled["task"] == "refund stuck since Monday"
    assert labelled["metadata"] == {"task": "refund stuck\n  since Monday"}
    assert api.get("/sessions/asked").json()["task"] == "Is order SO20260101042 shipped?"
    assert api.get("/sessions/silent").json()["task"] is None
    listed = {s["session_id"]: s["task"] for s in api.get("/sessions").json()["sessions"]}
    assert listed["labelled"] == "refund stuck since Monday"
