"""What a hostile or careless client sends: each bad value costs its own event, nothing
it leaves behind breaks a later read, and limits hold before the work is done."""

from __future__ import annotations

import gc
import http.client
import json
import threading
import tracemalloc
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import override_settings

from contextview.projects.services import apikey_create, project_get_or_create
from contextview.sessions.models import Session, Step
from tests.api_client import Api, results, signed_in, step

SYSTEM = {"id": "sys", "role": "system", "content": "You debug orders."}
GOOD = step("good", 0, [SYSTEM])


def _session(sid: str, **body: Any) -> dict[str, Any]:
    return {"id": f"{sid}-start", "type": "session", "body": {"session_id": sid, **body}}


def _post_beside_a_good_event(api: Api, event: dict[str, Any]) -> dict[str, Any]:
    """Post `event` after a good one; the good one must be stored whatever `event` is."""
    got = results(api.ingest({"batch": [GOOD, event]}))
    assert got[0] == {"id": "good-step-0", "status": 201}
    return got[1]


# --- timestamps ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "timestamp",
    [
        "0001-01-01T00:00:00+02:00",  # .NET's DateTime.MinValue with an offset: year 0 in UTC
        "9999-12-31T23:59:59-12:00",  # year 10000 in UTC
        "0001-01-01T00:00:00Z",
        "1969-12-31T23:59:59Z",
        "3000-01-01T00:00:00Z",
    ],
)
def test_it_refuses_a_timestamp_it_could_not_read_back(api: Api, timestamp: str) -> None:
    event = {**_session("far"), "timestamp": timestamp}
    got = _post_beside_a_good_event(api, event)
    assert got["status"] == 400 and got["error"].startswith("timestamp: must be from 1970")
    assert not Session.objects.filter(external_id="far").exists()
    listing = api.get("/sessions")
    assert listing.status_code == 200
    assert [s["session_id"] for s in listing.json()["sessions"]] == ["good"]


def test_it_keeps_a_timestamp_with_an_offset_as_the_same_instant(api: Api) -> None:
    event = {**_session("tz"), "timestamp": "2026-11-29T23:30:00-05:00"}
    assert _post_beside_a_good_event(api, event)["status"] == 201
    assert api.get("/sessions/tz").json()["started_at"] == "2026-11-30T04:30:00+00:00"


@pytest.mark.parametrize("timestamp", [1764493200, "2026-11-30", "yesterday", "30/11/2026 09:00"])
def test_it_refuses_a_timestamp_that_is_not_rfc_3339(api: Api, timestamp: Any) -> None:
    got = _post_beside_a_good_event(api, {**_session("when"), "timestamp": timestamp})
    assert got["status"] == 400
    assert got["error"].startswith("timestamp: must be an RFC 3339 date-time")


# --- values of the wrong kind ----------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "error"),
    [
        ({**step("b", 0, [SYSTEM]), "body": {**step("b", 0, [SYSTEM])["body"], "index": True}},
         "body.index: must be a number, not true or false"),
        ({"id": "end", "type": "session_end",
          "body": {"session_id": "b", "status": "failed", "score": True}},
         "body.score: must be a number, not true or false"),
        (_session("b", budget={"max_tokens": 2**70}), "body.budget.max_tokens: "),
        (step("b", 0, [SYSTEM], usage={"input_tokens": "7"}),
         "body.usage.input_tokens: must be a number, not a string"),
        (_session("b", budget={"max_tokens": 100, "partitions": {"tool": False}}),
         "body.budget.partitions.tool: must be a number"),
        (_session("b", budget={"max_tokens": 100, "reserved_tokens": 120}),
         "body.budget: reserved_tokens (120) must be less than max_tokens (100)"),
        (step("b", 0, [SYSTEM], action={"action": "keep", "target": "sys"},
              actions=[{"action": "pin", "target": "sys"}]),
         "body.action: send one operation as action or a list as actions, not both"),
    ],
)  # fmt: skip
def test_it_refuses_a_value_of_the_wrong_kind_naming_it(
    api: Api, event: dict[str, Any], error: str
) -> None:
    got = _post_beside_a_good_event(api, event)
    assert got["status"] == 400, got
    assert got["error"].startswith(error), got
    assert not Step.objects.filter(session__external_id="b").exists()


# --- free text that PostgreSQL cannot hold ---------------------------------------------

CUT_EMOJI = "thumbs \ud83d"  # a string cut inside a surrogate pair
BINARY = "ELF\x00\x01\x02 read as text"
LOOKALIKES = "\u2400 and \u241b and \u241bD83D are text too"


def test_it_stores_nul_and_cut_characters_in_free_text_and_gives_them_back(api: Api) -> None:
    session = _session(
        "bin",
        metadata={"task": BINARY, "key \ud83d": [CUT_EMOJI, {"x": "\x00"}]},
        pinned=[CUT_EMOJI, LOOKALIKES],
    )
    messages = [
        SYSTEM,
        {"id": "t1", "role": "tool", "tool": "read_file", "content": BINARY, "name": "x\x00"},
        {"id": "t2", "role": "user", "content": [{"type": "text", "text": CUT_EMOJI}]},
        {"id": "t3", "role": "user", "content": LOOKALIKES},
    ]
    first = step(
        "bin",
        0,
        messages,
        reason="over budget \x00",
        outcome={"note": CUT_EMOJI},
        action={
            "action": "summarize",
            "target": "t1",
            "reason": "binary \x00",
            "params": {"why \ud83d": "\x00"},
            "result": {"id": "s1", "role": "tool", "content": "an ELF file \x00"},
        },
    )
    first["body"]["obs"]["used_tokens\x00"] = BINARY
    first["body"]["tools"] = [{"type": "function", "name": "read\x00", "description": CUT_EMOJI}]
    first["body"]["output"] = {
        "messages": [{"role": "assistant", "content": [{"type": "text", "text": BINARY}]}]
    }
    second = step("bin", 1, [{"id": "sys"}, {"id": "s1"}, {"id": "t2"}, {"id": "t3"}])
    got = results(api.ingest({"batch": [session, first, second]}))
    assert [r["status"] for r in got] == [201, 201, 201], got

    read = api.get("/sessions/bin").json()
    assert read["metadata"] == {"task": BINARY, "key \ud83d": [CUT_EMOJI, {"x": "\x00"}]}
    assert read["pinned"] == [CUT_EMOJI, LOOKALIKES]
    got_step = api.get("/sessions/bin/steps/0").json()
    contents = {m["id"]: m["content"] for m in got_step["before"]}
    assert contents["t1"] == BINARY
    assert contents["t2"] == [{"type": "text", "text": CUT_EMOJI}]
    assert contents["t3"] == LOOKALIKES
    assert got_step["before"][1]["name"] == "x\x00"
    assert got_step["reason"] == "over budget \x00"
    assert got_step["outcome"] == {"note": CUT_EMOJI}
    assert got_step["obs_extra"] == {"used_tokens\x00": BINARY}
    assert got_step["tools"] == first["body"]["tools"]
    assert got_step["output"] == first["body"]["output"]
    assert got_step["ops"][0]["reason"] == "binary \x00"
    assert got_step["ops"][0]["params"] == {"why \ud83d": "\x00"}
    # Sent by id alone in the next step: the same content.
    later = api.get("/sessions/bin/steps/1").json()
    assert [m["content"] for m in later["before"]][1:] == [
        "an ELF file \x00",
        [{"type": "text", "text": CUT_EMOJI}],
        LOOKALIKES,
    ]
    archive = api.get("/sessions/bin/archive").json()["originals"]
    assert archive[0]["message"]["content"] == BINARY
    diff = api.get("/sessions/bin/diff", **{"from": 0, "to": 0}).json()
    assert [m["content"] for m in diff["removed"]] == [BINARY]

    # Reports and the dataset write a cut emoji out too (as JSON's \ud83d).
    def body(path: str) -> bytes:
        answer = api.get(path)
        assert answer.status_code == 200, path
        return b"".join(answer.streaming_content) if answer.streaming else answer.content

    report = json.loads(body("/sessions/bin/report.json"))
    assert CUT_EMOJI in json.dumps(report, ensure_ascii=False)
    assert "thumbs \\ud83d" in body("/sessions/bin/report.md").decode()
    rows = [json.loads(line) for line in body("/export/steps.jsonl").splitlines()]
    assert any(CUT_EMOJI in json.dumps(r, ensure_ascii=False) for r in rows)


def test_it_shows_nul_readably_on_the_pages(api: Api) -> None:
    batch = [step("bin", 0, [SYSTEM, {"id": "t1", "role": "tool", "content": BINARY + CUT_EMOJI}])]
    assert results(api.ingest({"batch": batch}))[0]["status"] == 201
    session = Session.objects.get(external_id="bin")
    client = signed_in(api)
    for path in (f"/sessions/{session.pk}/", f"/sessions/{session.pk}/steps/0/"):
        page = client.get(path)
        assert page.status_code == 200, path
    html = page.content.decode()
    # The step page shows the context: NUL as the symbol for it.
    assert "ELF\u2400\x01\x02 read as text" in html
    assert "thumbs \u241bD83D" in html


def test_it_refuses_a_body_with_a_surrogate_written_raw_as_not_utf8(api: Api) -> None:
    raw = json.dumps({"batch": [GOOD]}).replace("debug", "\ud83d").encode("utf-8", "surrogatepass")
    response = api.ingest(None, raw=raw)
    assert response.status_code == 400
    assert response.json()["error"].startswith("body is not JSON: 'utf-8' codec can't decode")


# --- identifiers -----------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud83d"])
@pytest.mark.parametrize(
    ("field", "event"),
    [
        ("id", lambda v: {**_session("s"), "id": v}),
        ("body.session_id", lambda v: {**step(v, 0, [SYSTEM]), "id": "e"}),
        ("body.agent", lambda v: _session("s", agent=v)),
        ("body.mode", lambda v: step("s", 0, [SYSTEM], mode=v)),
        ("body.obs.messages[0].id", lambda v: step("s", 0, [{**SYSTEM, "id": v}])),
        ("body.obs.messages[0].role", lambda v: step("s", 0, [{**SYSTEM, "role": v}])),
        ("body.obs.messages[0].tool", lambda v: step("s", 0, [{**SYSTEM, "tool": v}])),
        ("body.obs.messages[0].partition", lambda v: step("s", 0, [{**SYSTEM, "partition": v}])),
        (
            "body.action.targets[0]",
            lambda v: step("s", 0, [SYSTEM], action={"action": "drop", "targets": [v]}),
        ),
    ],
)
def test_it_refuses_an_identifier_with_nul_or_a_cut_character(
    api: Api, field: str, event: Callable[[str], dict[str, Any]], bad: str
) -> None:
    got = _post_beside_a_good_event(api, event(bad))
    assert got["status"] == 400
    assert got["error"].startswith(f"{field}: must not contain"), got
    assert Session.objects.count() == 1


@pytest.mark.parametrize(
    ("field", "event"),
    [
        ("body.obs.messages[0].role", step("s", 0, [{**SYSTEM, "role": "r" * 33}])),
        ("body.obs.messages[0].id", step("s", 0, [{**SYSTEM, "id": "m" * 201}])),
        ("body.obs.messages[0].tool", step("s", 0, [{**SYSTEM, "tool": "t" * 201}])),
        (
            "body.action.result.id",
            step(
                "s",
                0,
                [SYSTEM],
                action={"action": "summarize", "target": "sys", "result": {"id": "r" * 201}},
            ),
        ),
        ("body.before_tokens", step("s", 0, [SYSTEM], before_tokens=2**63)),
        ("body.after_tokens", step("s", 0, [SYSTEM], after_tokens=10**30)),
    ],
)
def test_it_refuses_a_value_too_long_or_too_large_for_its_column(
    api: Api, field: str, event: dict[str, Any]
) -> None:
    got = _post_beside_a_good_event(api, event)
    assert got["status"] == 400 and got["error"].startswith(f"{field}:"), got


# --- numbers JSON does not have, nesting -----------------------------------------------


@pytest.mark.parametrize(
    ("field", "raw_event"),
    [
        (
            "body.score",
            '{"id": "end", "type": "session_end", '
            '"body": {"session_id": "s", "status": "failed", "score": NaN}}',
        ),
        ("body.before_tokens", json.dumps(step("s", 0, [SYSTEM], before_tokens=0))[:-2]
         .replace('"before_tokens": 0', '"before_tokens": Infinity') + "}}"),
        ("body.metadata.x[1]", '{"id": "m", "type": "session", '
         '"body": {"session_id": "s", "metadata": {"x": [1, -Infinity]}}}'),
        ("body.metadata.big", '{"id": "m", "type": "session", '
         '"body": {"session_id": "s", "metadata": {"big": 1e400}}}'),
    ],
)  # fmt: skip
def test_it_refuses_nan_and_infinity_anywhere(api: Api, field: str, raw_event: str) -> None:
    raw = ('{"batch": [' + json.dumps(GOOD) + ", " + raw_event + "]}").encode()
    got = results(api.ingest(None, raw=raw))
    assert got[0]["status"] == 201
    assert got[1]["status"] == 400 and got[1]["error"].startswith(f"{field}: "), got
    assert "not a number JSON allows" in got[1]["error"]
    assert b"NaN" not in api.get("/sessions").content


def test_it_refuses_an_event_nested_too_deep_and_stores_the_rest(api: Api) -> None:
    deep = '{"id": "deep", "type": "session", "body": {"session_id": "s", "metadata": {"x": '
    too_deep_for_python = deep + "[" * 5000 + "]" * 5000 + "}}}"
    too_deep_for_us = deep + "[" * 120 + "]" * 120 + "}}}"
    huge_number = deep + "1" * 5000 + "}}}"
    later = step("good", 1, [{"id": "sys"}])
    raw = (
        '{"batch": ['
        + ", ".join(
            [json.dumps(GOOD), too_deep_for_python, too_deep_for_us, huge_number, json.dumps(later)]
        )
        + "]}"
    ).encode()
    got = results(api.ingest(None, raw=raw))
    assert [r["status"] for r in got] == [201, 400, 400, 400, 201]
    assert got[1]["error"] == "batch[1]: nested too deep to read"
    assert got[2] == {
        "id": "deep",
        "status": 400,
        "error": "body.metadata.x: nested deeper than 100 levels",
    }
    error = "batch[3]: a number has too many digits"
    assert got[3] == {"id": "deep", "status": 400, "error": error}
    assert not Session.objects.filter(external_id="s").exists()


def test_an_event_of_sixty_thousand_nested_objects_costs_that_event_alone(api: Api) -> None:
    # 400 KB, far under the body's limit: it was refused with the whole batch.
    levels = 66_700
    deep = '{"id": "deeper", "type": "session", "body": {"session_id": "s", "metadata": '
    deep += '{"a": ' * levels + "1" + "}" * levels + "}}"
    later = step("good", 1, [{"id": "sys"}])
    raw = '{"batch": [' + ", ".join([json.dumps(GOOD), deep, json.dumps(later)]) + "]}"
    got = results(api.ingest(None, raw=raw.encode()))
    assert [r["status"] for r in got] == [201, 400, 201], got
    assert got[1] == {"id": "deeper", "status": 400, "error": "batch[1]: nested too deep to read"}


# --- refused events record nothing -----------------------------------------------------


def test_it_resolves_an_id_alone_to_what_was_recorded_not_to_a_refused_event(api: Api) -> None:
    def refused(index: int) -> dict[str, Any]:
        other = {**SYSTEM, "content": f"refused system prompt {index}"}
        return step("s", index, [other], action={"action": "drop", "target": "ghost"})

    batch = [step("s", 0, [SYSTEM]), refused(1), refused(2), refused(3)]
    batch.append(step("s", 4, [{"id": "sys"}]))
    got = results(api.ingest({"batch": batch}))
    assert [r["status"] for r in got] == [201, 422, 422, 422, 201], got
    content = api.get("/sessions/s/steps/4").json()["before"][0]["content"]
    assert content == SYSTEM["content"]


def test_it_judges_a_copy_of_a_refused_event_again(api: Api) -> None:
    refused = step("s", 1, [{"id": "later"}])  # "later" is not recorded yet
    records = step("s", 0, [{"id": "later", "role": "user", "content": "now it is"}])
    got = results(api.ingest({"batch": [refused, refused, records, refused]}))
    assert [r["status"] for r in got] == [422, 422, 201, 201], got
    assert not any(r.get("duplicate") for r in got[:3])
    # Refused in one batch, then stored in the next: it was never a duplicate.
    lone = step("t", 0, [{"id": "x"}])
    assert results(api.ingest({"batch": [lone]}))[0]["status"] == 422
    again = results(api.ingest({"batch": [step("t", 1, [SYSTEM | {"id": "x"}]), lone]}))
    assert [r["status"] for r in again] == [201, 201]
    stored = Step.objects.filter(session__external_id="t").values_list("index", flat=True)
    assert sorted(stored) == [0, 1]


# --- limits before work ----------------------------------------------------------------


def test_it_refuses_twenty_mib_of_empty_events_without_building_them(api: Api) -> None:
    body = b'{"batch": [' + b"{}," * (20 * 1024 * 1024 // 3 - 10) + b"{}]}"
    assert len(body) <= 20 * 1024 * 1024
    gc.collect()
    tracemalloc.start()
    try:
        response = api.ingest(None, raw=body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 413, response.content[:200]
    assert "the limit is 1000" in response.json()["error"]
    # The body, its copy as read and its text: no seven million dicts (+500 MiB).
    assert peak < 100 * 1024 * 1024, f"{peak / 2**20:.0f} MiB"


def test_it_reads_past_other_envelope_fields_but_not_past_a_flood_of_them(api: Api) -> None:
    with_extra = b'{"sent_at": "2026-11-29T10:00:00Z", "sdk": {"v": [1, "]"]}, "batch": ['
    got = results(api.ingest(None, raw=with_extra + json.dumps(GOOD).encode() + b"]}"))
    assert got == [{"id": "good-step-0", "status": 201}]
    flood = b'{"x": [' + b"{}," * 1_000_000 + b'{}], "batch": []}'
    response = api.ingest(None, raw=flood)
    assert response.status_code == 400
    assert response.json()["error"] == "x: a field other than batch is too large to read past"


@pytest.mark.django_db(transaction=True)
def test_it_refuses_a_chunked_body_over_the_limit(gunicorn_api: str) -> None:
    project, _ = project_get_or_create(slug="chunked")
    key = apikey_create(project=project, name="test").secret
    url = urlsplit(gunicorn_api)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    piece = b" " * (1024 * 1024)

    def body() -> Any:
        yield b'{"batch": ['
        for _ in range(21):
            yield piece
        yield b"]}"

    connection.request("POST", "/api/v1/ingest", body=body(), headers=headers, encode_chunked=True)
    response = connection.getresponse()
    assert response.status == 413, response.read()[:200]
    assert "over the limit" in json.loads(response.read())["error"]
    # And one under it, chunked too, is read whole.
    small = json.dumps({"batch": [GOOD]}).encode()
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    connection.request("POST", "/api/v1/ingest", body=iter([small]), headers=headers,
                       encode_chunked=True)  # fmt: skip
    response = connection.getresponse()
    assert response.status == 207
    assert json.loads(response.read())["results"] == [{"id": "good-step-0", "status": 201}]


@pytest.mark.django_db(transaction=True)
def test_it_tells_one_of_five_senders_of_the_same_batch_that_it_stored_it(live_api: str) -> None:
    project, _ = project_get_or_create(slug="five")
    key = apikey_create(project=project, name="test").secret
    batch = [_session("same", agent="bot")]
    batch += [step("same", i, [SYSTEM, {"id": f"u{i}", "role": "user", "content": "hi"}])
              for i in range(5)]  # fmt: skip
    end = {"session_id": "same", "status": "failed"}
    batch.append({"id": "same-end", "type": "session_end", "body": end})
    body = json.dumps({"batch": batch}).encode()
    url = urlsplit(live_api)
    answers: list[list[dict[str, Any]]] = []
    start = threading.Barrier(5)

    def send() -> None:
        connection = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
        start.wait()
        connection.request(
            "POST",
            "/api/v1/ingest",
            body=body,
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
        )
        response = connection.getresponse()
        assert response.status == 207
        answers.append(json.loads(response.read())["results"])

    with override_settings(INGEST_RATE_LIMIT=1000):
        senders = [threading.Thread(target=send) for _ in range(5)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(60)
    assert len(answers) == 5
    for position, event in enumerate(batch):
        statuses = sorted(a[position]["status"] for a in answers)
        assert statuses == [200, 200, 200, 200, 201], (event["id"], statuses)
        assert all(a[position].get("duplicate") for a in answers if a[position]["status"] == 200)
    assert Step.objects.filter(session__external_id="same").count() == 5


# --- shapes the readers of content must survive ------------------------------------------


def test_it_keeps_parts_of_any_type_and_tool_calls_of_any_shape_and_computes_them(
    api: Api,
) -> None:
    """A part whose type is no name is read as text, a tool_calls that is no list as
    no calls: stored, shown and computed like any other, never a 500 for the batch."""
    from contextview.stats.services import session_stats_compute

    odd = [
        {"id": "p1", "role": "user", "content": [{"type": ["text"], "text": "hi"}]},
        {"id": "p2", "role": "assistant", "content": None, "tool_calls": 1},
        {"id": "p3", "role": "tool", "content": [
            {"type": "tool_result", "content": [{"type": {"x": 1}, "text": "nested"}]},
        ]},
        {"id": "p4", "role": "assistant", "content": "ok", "tool_calls": [7, {"name": "grep"}]},
    ]  # fmt: skip
    got = _post_beside_a_good_event(api, step("shapes", 0, [SYSTEM, *odd]))
    assert got["status"] == 201, got
    shown = api.get("/sessions/shapes/steps/0").json()
    assert [m["content"] for m in shown["before"][1:]] == [m["content"] for m in odd]
    assert session_stats_compute(session_id=Session.objects.get(external_id="shapes").pk) == 1
    stats = api.get("/sessions/shapes/steps/0").json()
    assert stats["stats_status"] == "ready" and stats["stats"]["tokens"]["before"] > 0
