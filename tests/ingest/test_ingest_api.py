from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from contextview.sessions.models import Blob, Fold, Message, Session, Step
from contextview.stats.services import session_stats_compute
from tests.api_client import Api, results, step

SYSTEM = {"id": "sys", "role": "system", "content": "You debug orders. Answer in a table."}
QUESTION = {"id": "u1", "role": "user", "content": "Why does order SO20260101007 time out?"}
LOG = {
    "id": "tool_result_32",
    "role": "tool",
    "tool": "read_file",
    "content": "2026/01/15 10:00:03 [error] upstream timed out (110) while reading "
    "response header from upstream inventory-svc after 3 s, status 504",
}


def test_it_stores_the_contract_example_and_reads_it_back(api: Api) -> None:
    batch = [
        {
            "id": "evt-1",
            "type": "session",
            "timestamp": "2026-11-29T10:00:00Z",
            "body": {
                "session_id": "order-debug-42",
                "agent": "support-bot",
                "model": "gpt-4o",
                "mode": "summary",
                "budget": {"max_tokens": 16000, "reserved_tokens": 1200},
                "pinned": ["member id A12345"],
            },
        },
        step(
            "order-debug-42",
            0,
            [SYSTEM, QUESTION, LOG],
            action={
                "action": "summarize",
                "target": "tool_result_32",
                "reason": "log body is normal; keep error code and timeout",
                "result": {"id": "sum_1", "role": "tool", "content": "504 from inventory after 3s"},
            },
            before_tokens=5400,
            after_tokens=2100,
        ),
        {
            "id": "evt-3",
            "type": "session_end",
            "body": {"session_id": "order-debug-42", "status": "succeeded", "score": 1.0},
        },
    ]
    assert [r["status"] for r in results(api.ingest({"batch": batch}))] == [201, 201, 201]

    session = api.get("/sessions/order-debug-42").json()
    assert session["agent"] == "support-bot"
    assert session["status"] == "succeeded"
    assert session["pinned"] == ["member id A12345"]

    got = api.get("/sessions/order-debug-42/steps/0").json()
    assert [m["id"] for m in got["before"]] == ["sys", "u1", "tool_result_32"]
    assert [m["id"] for m in got["after"]] == ["sys", "u1", "sum_1"]
    assert got["after"][2]["content"] == "504 from inventory after 3s"
    assert got["before"][1]["partition"] == "question"
    assert got["folds"] == [{"op_index": 0, "result_id": "sum_1", "originals": ["tool_result_32"]}]
    assert got["ops"][0]["op"] == "summarize"
    assert got["reported"] == {"before_tokens": 5400, "after_tokens": 2100}
    assert got["stats_status"] in ("pending", "ready")

    archive = api.get("/sessions/order-debug-42/archive").json()["originals"]
    assert archive[0]["id"] == "tool_result_32"
    assert "inventory-svc after 3 s" in archive[0]["message"]["content"]
    assert archive[0]["reloaded"] is False


def test_it_gives_a_sessions_budget_back_as_sent(api: Api) -> None:
    budgets = [
        {"max_tokens": 16000},
        {"max_tokens": 16000, "partitions": {"tool": 4800}},
        {"max_tokens": 16000, "reserved_tokens": 0, "partitions": None},
        {"max_tokens": 16000, "reserved_tokens": 1200, "unit": "tokens"},
    ]
    batch = [
        {"id": f"s{n}", "type": "session", "body": {"session_id": f"s{n}", "budget": budget}}
        for n, budget in enumerate(budgets)
    ]
    assert [r["status"] for r in results(api.ingest({"batch": batch}))] == [201] * len(budgets)
    for n, budget in enumerate(budgets):
        assert api.get(f"/sessions/s{n}").json()["budget"] == budget


def test_it_resolves_messages_sent_by_id_alone_and_marks_reloads(api: Api) -> None:
    first = step(
        "s",
        0,
        [SYSTEM, QUESTION, LOG],
        action={"action": "drop", "target": "tool_result_32", "reason": "noise"},
    )
    second = step("s", 1, [{"id": "sys"}, {"id": "u1"}])
    third = step(
        "s",
        2,
        [{"id": "sys"}, {"id": "u1"}],
        action={"action": "reload", "target": "tool_result_32", "reason": "need the log line"},
    )
    assert [r["status"] for r in results(api.ingest({"batch": [first, second]}))] == [201, 201]
    assert results(api.ingest({"batch": [third]}))[0]["status"] == 201

    after = api.get("/sessions/s/steps/2").json()["after"]
    assert [m["id"] for m in after] == ["sys", "u1", "tool_result_32"]
    assert after[2]["content"] == LOG["content"]
    archive = api.get("/sessions/s/archive").json()["originals"]
    assert archive[0]["kind"] == "drop"
    assert archive[0]["reloaded_at"] == 2


@pytest.mark.parametrize(
    "reload", [{"action": "reload", "target": 2}, {"action": "reload", "targets": [2]}]
)
def test_it_reloads_a_message_the_agent_numbered_in_a_later_batch(
    api: Api, reload: dict[str, Any]
) -> None:
    # Agents often number their messages; a number means the same id as its digits.
    numbered = [{**SYSTEM, "id": 1}, {**LOG, "id": 2}]
    drop = step("s", 0, numbered, action={"action": "drop", "target": 2})
    assert results(api.ingest({"batch": [drop]}))[0]["status"] == 201

    [result] = results(api.ingest({"batch": [step("s", 1, [{"id": 1}], action=reload)]}))
    assert result["status"] == 201, result
    after = api.get("/sessions/s/steps/1").json()["after"]
    assert [(m["id"], m["content"]) for m in after] == [
        ("1", SYSTEM["content"]),
        ("2", LOG["content"]),
    ]


def test_it_answers_each_bad_event_and_stores_the_rest(api: Api) -> None:
    good = step("s", 0, [SYSTEM, QUESTION])
    batch = [
        {"type": "step", "body": {"session_id": "s", "index": 1, "obs": {"messages": []}}},
        {"id": "no-session", "type": "step", "body": {"index": 1, "obs": {"messages": []}}},
        {
            "id": "negative",
            "type": "step",
            "body": {"session_id": "s", "index": -1, "obs": {"messages": []}},
        },
        good,
        step("s", 1, [{"id": "sys"}], action={"action": "drop", "target": "ghost"}),
        step("s", 2, [{"id": "never-recorded"}]),
        {"id": "bad-type", "type": "stepp", "body": {}},
        step("s", 3, [{"id": "u1"}]),
    ]
    got = results(api.ingest({"batch": batch}))
    assert got[0] == {"id": None, "status": 400, "error": "id: field required"}
    assert got[1]["status"] == 400 and got[1]["error"].startswith("body.session_id:")
    assert got[2]["status"] == 400 and got[2]["error"].startswith("body.index:")
    assert got[3] == {"id": "s-step-0", "status": 201}
    assert got[4]["status"] == 422
    assert got[4]["error"].startswith("body.action.target:") and "ghost" in got[4]["error"]
    assert got[5]["status"] == 422
    assert got[5]["error"].startswith("body.obs.messages[0].id:")
    assert "never-recorded" in got[5]["error"]
    assert got[6]["status"] == 400 and got[6]["error"].startswith("type:")
    assert got[7] == {"id": "s-step-3", "status": 201}
    assert sorted(Step.objects.values_list("index", flat=True)) == [0, 3]


def test_it_recognises_duplicates_and_conflicting_reuse(api: Api) -> None:
    event = step("s", 0, [SYSTEM, QUESTION])
    changed = step("s", 0, [SYSTEM])
    same_index_new_id = dict(step("s", 0, [SYSTEM, QUESTION]), id="retry-with-new-id")
    got = results(api.ingest({"batch": [event, event, changed]}))
    assert [r["status"] for r in got] == [201, 200, 409]
    assert got[1]["duplicate"] is True
    assert "different content" in got[2]["error"]

    again = results(api.ingest({"batch": [event, same_index_new_id]}))
    assert again[0] == {"id": "s-step-0", "status": 200, "duplicate": True}
    assert again[1]["status"] == 200 and again[1]["duplicate"] is True

    other_index = dict(step("s", 1, [{"id": "sys"}]), id="s-step-0")
    conflict = results(api.ingest({"batch": [other_index]}))[0]
    assert conflict["status"] == 409 and conflict["error"].startswith("id:")
    assert Step.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"this is not json", "not JSON"),
        (b"[1, 2]", "not a JSON array"),
        (b'{"events": []}', "batch: field required"),
        (b'{"batch": {"id": 1}}', "batch: must be a list"),
    ],
)
def test_it_rejects_a_body_that_is_not_an_envelope(api: Api, body: bytes, needle: str) -> None:
    response = api.ingest(None, raw=body)
    assert response.status_code == 400
    assert needle in response.json()["error"]


def test_it_needs_a_valid_key(api: Api) -> None:
    response = api.client.post(
        "/api/v1/ingest",
        b'{"batch": []}',
        content_type="application/json",
        HTTP_AUTHORIZATION="Bearer cv_deadbeef_wrong",
    )
    assert response.status_code == 401
    assert (
        api.client.post("/api/v1/ingest", b"{}", content_type="application/json").status_code == 401
    )


def test_it_refuses_other_content_types_and_encodings(api: Api) -> None:
    plain = api.client.generic(
        "POST", "/api/v1/ingest", b"batch", content_type="text/plain", **api.auth
    )
    assert plain.status_code == 415
    brotli = api.ingest({"batch": []}, HTTP_CONTENT_ENCODING="br")
    assert brotli.status_code == 415
    # JSON is UTF-8: a body declared in another charset is refused as such, not
    # read as UTF-8 and called "not JSON".
    latin = api.client.generic(
        "POST",
        "/api/v1/ingest",
        '{"batch": []}'.encode("latin-1"),
        content_type="application/json; charset=latin-1",
        **api.auth,
    )
    assert latin.status_code == 415
    assert latin.json()["error"] == "charset must be utf-8, not 'latin-1': JSON is UTF-8"
    for charset in ("utf-8", "UTF-8", '"utf-8"'):
        sent = api.client.generic(
            "POST",
            "/api/v1/ingest",
            b'{"batch": []}',
            content_type=f"application/json; charset={charset}",
            **api.auth,
        )
        assert sent.status_code == 207, charset


def test_it_takes_gzip(api: Api) -> None:
    got = results(api.ingest_gzip({"batch": [step("s", 0, [SYSTEM])]}))
    assert got == [{"id": "s-step-0", "status": 201}]


def test_it_refuses_an_encoding_other_than_gzip_with_415(api: Api) -> None:
    # The contract: gzip is accepted, another encoding is a 415 (deflate is OTLP's).
    data = zlib.compress(json.dumps({"batch": [step("s", 0, [SYSTEM])]}).encode())
    answer = api.ingest(None, raw=data, HTTP_CONTENT_ENCODING="deflate")
    assert answer.status_code == 415
    assert answer.json()["error"] == "Content-Encoding 'deflate' is not supported; use gzip or none"


@override_settings(INGEST_MAX_BYTES=64 * 1024)
def test_it_refuses_a_body_over_the_limit_plain_and_as_a_gzip_bomb(api: Api) -> None:
    big = {"batch": [step("s", 0, [{"id": "x", "role": "user", "content": "a" * 70_000}])]}
    assert api.ingest(big).status_code == 413
    bomb = gzip.compress(b'{"batch": [' + b" " * (50 * 1024 * 1024) + b"]}")
    assert len(bomb) < 64 * 1024
    response = api.ingest(None, raw=bomb, HTTP_CONTENT_ENCODING="gzip")
    assert response.status_code == 413
    assert "inflates past the limit" in response.json()["error"]
    assert not Session.objects.exists()


@override_settings(INGEST_MAX_EVENTS=3)
def test_it_refuses_a_batch_with_too_many_events(api: Api) -> None:
    batch = [step("s", i, [SYSTEM]) for i in range(4)]
    response = api.ingest({"batch": batch})
    assert response.status_code == 413
    assert "limit is 3" in response.json()["error"]


@override_settings(INGEST_RATE_LIMIT=2)
def test_it_rate_limits_with_retry_after(api: Api) -> None:
    statuses = [api.ingest({"batch": []}).status_code for _ in range(5)]
    assert 429 in statuses
    limited = api.ingest({"batch": []})
    if limited.status_code == 429:
        assert int(limited["Retry-After"]) >= 1


def test_it_never_shows_another_projects_session(make_api) -> None:
    mine, theirs = make_api("mine"), make_api("theirs")
    results(theirs.ingest({"batch": [step("secret-session", 0, [SYSTEM])]}))
    for path in (
        "/sessions/secret-session",
        "/sessions/secret-session/steps/0",
        "/sessions/secret-session/archive",
        "/sessions/secret-session/control",
    ):
        response = mine.get(path)
        assert response.status_code == 404
        assert "You debug orders" not in response.content.decode()
    assert mine.get("/sessions").json()["sessions"] == []
    # Another project may use the same session id for a session of its own.
    assert (
        results(mine.ingest({"batch": [step("secret-session", 0, [QUESTION])]}))[0]["status"] == 201
    )


def test_it_stores_resent_contexts_once(api: Api) -> None:
    """A session resending its whole growing context costs storage per distinct message."""
    context: list[dict] = [SYSTEM, QUESTION]
    batch = []
    for i in range(120):
        context = [*context, {"id": f"obs-{i}", "role": "tool", "content": f"line {i} " * 40}]
        batch.append(step("long", i, list(context)))
    assert {r["status"] for r in results(api.ingest({"batch": batch}))} == {201}

    assert Blob.objects.count() == 122
    assert Message.objects.count() == 122
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT sum(length(before_refs) + coalesce(length(after_refs), 0)) FROM cv_step"
        )
        (ref_bytes,) = cursor.fetchone()
    references = sum(len(b["body"]["obs"]["messages"]) for b in batch)
    # Each reference costs about a byte, not a copy of the message; an after that
    # is the before costs nothing.
    assert ref_bytes < references * 1.5


def test_it_lists_sessions_with_filters_and_a_cursor(api: Api) -> None:
    batch = []
    for i in range(5):
        agent = "a" if i % 2 else "b"
        batch.append(
            {
                "id": f"sess-{i}",
                "type": "session",
                "timestamp": f"2026-11-29T10:0{i}:00Z",
                "body": {"session_id": f"s{i}", "agent": agent},
            }
        )
    results(api.ingest({"batch": batch}))
    first = api.get("/sessions", limit=2).json()
    assert [s["session_id"] for s in first["sessions"]] == ["s4", "s3"]
    second = api.get("/sessions", limit=2, cursor=first["next_cursor"]).json()
    assert [s["session_id"] for s in second["sessions"]] == ["s2", "s1"]
    last = api.get("/sessions", limit=2, cursor=second["next_cursor"]).json()
    assert [s["session_id"] for s in last["sessions"]] == ["s0"]
    assert last["next_cursor"] is None
    only_a = api.get("/sessions", agent="a").json()["sessions"]
    assert {s["session_id"] for s in only_a} == {"s1", "s3"}
    assert api.get("/sessions", cursor="garbage!").status_code == 400


def test_it_diffs_two_steps_word_by_word(api: Api) -> None:
    rewritten = {
        "ids": ["u1"],
        "role": "user",
        "justification": "shorter",
        "new_content": "Why does SO20260101007 time out after 3 s?",
    }
    results(
        api.ingest(
            {
                "batch": [
                    step("s", 0, [SYSTEM, QUESTION, LOG]),
                    step(
                        "s",
                        1,
                        [{"id": "sys"}, {"id": "u1"}, {"id": "tool_result_32"}],
                        actions=[rewritten, {"ids": ["tool_result_32"], "new_content": ""}],
                    ),
                ]
            }
        )
    )
    diff = api.get("/sessions/s/diff", **{"from": 0, "to": 1}).json()
    assert [m["id"] for m in diff["removed"]] == ["tool_result_32"]
    assert diff["changed"][0]["id"] == "u1"
    inserted = [text for tag, text in diff["changed"][0]["words"] if tag == "insert"]
    assert inserted == [" after 3 s"]
    assert diff["unchanged"] == 1
    assert api.get("/sessions/s/diff", **{"from": 0, "to": 7}).status_code == 404


def test_it_diffs_a_message_inferred_rewritten_under_a_new_id_as_changed(api: Api) -> None:
    # Ids that follow content (OTLP, imports) change with it: the server infers the
    # cut, and the diff shows the message changed, not one removed and one added.
    cut = {**LOG, "id": "log-v2", "content": LOG["content"][:60]}
    results(api.ingest({"batch": [step("s", 0, [SYSTEM, LOG]), step("s", 1, [SYSTEM, cut])]}))
    step_one = api.get("/sessions/s/steps/1").json()
    assert [op["op"] for op in step_one["inferred_ops"]] == ["truncate"]
    session_stats_compute(session_id=Session.objects.get(external_id="s").pk)

    diff = api.get("/sessions/s/diff", **{"from": 0, "to": 1}).json()
    assert (diff["added"], diff["removed"]) == ([], [])
    (changed,) = diff["changed"]
    assert (changed["id"], changed["before"]["id"], changed["after"]["id"]) == (
        "log-v2",
        "tool_result_32",
        "log-v2",
    )
    assert "".join(text for tag, text in changed["words"] if tag != "delete") == cut["content"]
    assert diff["unchanged"] == 1
    # A message an agent's own operation replaced by one of another id stays removed
    # and added: the agent named what it did.
    summary = {"id": "sum", "role": "assistant", "content": "The log said: upstream timeout."}
    folded = {"action": "summarize", "targets": ["log-v2"], "result": summary}
    results(
        api.ingest({"batch": [step("s", 2, [{"id": "sys"}, {"id": "log-v2"}], actions=[folded])]})
    )
    session_stats_compute(session_id=Session.objects.get(external_id="s").pk)
    later = api.get("/sessions/s/diff", **{"from": 1, "to": 2}).json()
    assert ([m["id"] for m in later["removed"]], [m["id"] for m in later["added"]]) == (
        ["log-v2"],
        ["sum"],
    )


def test_it_publishes_an_openapi_document(api: Api) -> None:
    doc = api.client.get("/api/v1/openapi.json").json()
    paths = doc["paths"]
    for path in (
        "/api/v1/ingest",
        "/api/v1/sessions",
        "/api/v1/sessions/{session_id}",
        "/api/v1/sessions/{session_id}/steps/{index}",
        "/api/v1/sessions/{session_id}/diff",
        "/api/v1/sessions/{session_id}/archive",
        "/api/v1/sessions/{session_id}/control",
        "/api/v1/sessions/{session_id}/control/{directive_id}/ack",
        "/api/v1/sessions/{session_id}/directives",
    ):
        assert path in paths
    assert "batch" in json.dumps(paths["/api/v1/ingest"]["post"]["requestBody"])


def test_it_keeps_a_folded_original_when_an_edit_merges(api: Api) -> None:
    notes = [
        {"id": "n1", "role": "assistant", "content": "Hop 1: the paper was published in 2019."},
        {
            "id": "n2",
            "role": "assistant",
            "content": "Hop 2: its first author moved to ETH Zurich.",
        },
    ]
    merge = {
        "ids": ["n1", "n2"],
        "role": "assistant",
        "justification": "merge hops",
        "new_content": "The 2019 paper's first author moved to ETH Zurich.",
    }
    results(api.ingest({"batch": [step("r", 0, [SYSTEM, *notes], actions=[merge])]}))
    got = api.get("/sessions/r/steps/0").json()
    assert [m["id"] for m in got["after"]] == ["sys", "n1"]
    assert got["folds"] == [{"op_index": 0, "result_id": "n1", "originals": ["n1", "n2"]}]
    assert [len(f.originals) for f in Fold.objects.all()] == [2]
