"""POST /api/v1/import and manage.py importtranscript, through the real ingest path."""

from __future__ import annotations

import io
import json
import logging
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from contextview.projects.services import apikey_create
from contextview.sessions.models import Session, Step
from contextview.stats.services import session_stats_compute
from tests.api_client import Api
from tests.importers.test_core_importers import _resumed_pair

FIXTURES = Path(__file__).parent / "fixtures"


def upload(api: Api, *files: tuple[str, bytes], **fields: str) -> Any:
    payload: dict[str, Any] = {"file": [_named(name, data) for name, data in files], **fields}
    return api.client.post("/api/v1/import", payload, **api.auth)


def _named(name: str, data: bytes) -> io.BytesIO:
    f = io.BytesIO(data)
    f.name = name
    return f


def fixture(name: str) -> tuple[str, bytes]:
    return name, (FIXTURES / name).read_bytes()


def test_it_imports_a_claude_code_transcript_with_its_compaction(api: Api) -> None:
    response = upload(api, fixture("claude_code.jsonl"))
    assert response.status_code == 201, response.content
    assert response.json()["sessions"] == [
        {"session_id": "cc-7f3a", "format": "claude-code", "steps": 4, "operations": 1,
         "new_steps": 4},
        {"session_id": "cc-7f3a:agent-b7e1", "format": "claude-code", "steps": 1,
         "operations": 0, "new_steps": 1},
    ]  # fmt: skip
    session = api.get("/sessions/cc-7f3a").json()
    assert session["agent"] == "claude-code"
    assert session["model"] == "claude-sonnet-4-5"
    sub = api.get("/sessions/cc-7f3a:agent-b7e1").json()
    assert sub["metadata"]["parent_session"] == "cc-7f3a"

    first = api.get("/sessions/cc-7f3a/steps/0").json()
    assert first["model"] == "claude-sonnet-4-5"
    assert first["usage"]["cache_write_tokens"] == 9000
    reply = first["output"]["messages"][0]["content"]
    assert [part["type"] for part in reply] == ["thinking", "tool_use"]
    step = api.get("/sessions/cc-7f3a/steps/3").json()
    assert [m["id"] for m in step["after"]] == ["c-2", "u-4"]
    assert step["ops"][0]["op"] == "summarize"
    assert step["folds"][0]["originals"] == ["u-1", "msg_01", "u-2", "msg_02", "u-3", "msg_03"]
    archive = api.get("/sessions/cc-7f3a/archive").json()["originals"]
    assert {a["id"] for a in archive} >= {"u-1", "u-2"}
    read_log = next(a for a in archive if a["id"] == "u-2")
    assert "inventory-svc after 3 s" in read_log["message"]["content"][0]["content"]


def test_it_dates_an_imported_session_by_its_own_events_not_the_import(api: Api) -> None:
    from datetime import datetime

    name, data = fixture("codex.jsonl")
    assert upload(api, (name, data)).status_code == 201
    session = Session.objects.get(external_id="019d-codex-demo")
    stamps = [json.loads(line)["timestamp"] for line in data.splitlines() if line.strip()]
    first, last = datetime.fromisoformat(min(stamps)), datetime.fromisoformat(max(stamps))
    # Within the file's own times (the last call's), not the moment of the import.
    assert first <= session.started_at < session.last_event_at <= last


def test_it_adds_nothing_for_the_same_file_and_only_new_steps_for_a_grown_one(api: Api) -> None:
    name, data = fixture("claude_code.jsonl")
    lines = data.splitlines(keepends=True)
    first = upload(api, (name, b"".join(lines[:9])))
    assert first.status_code == 201
    assert first.json()["sessions"][0]["steps"] == 3
    grown = upload(api, (name, data))
    assert grown.status_code == 201
    assert grown.json()["sessions"][0]["new_steps"] == 1
    again = upload(api, (name, data))
    assert again.status_code == 200
    assert all(s["new_steps"] == 0 for s in again.json()["sessions"])
    assert Step.objects.filter(session__external_id="cc-7f3a").count() == 4


def test_a_long_transcript_imported_in_parts_holds_each_calls_whole_context(api: Api) -> None:
    from tests.importers.test_runs import claude_code

    data = claude_code(60, compact_at=30)
    lines = data.splitlines(keepends=True)
    first = upload(api, ("long.jsonl", b"".join(lines[:83])))  # the first 40 calls
    assert first.json()["sessions"][0]["new_steps"] == 40
    grown = upload(api, ("long.jsonl", data))
    assert grown.status_code == 201, grown.content
    assert grown.json()["sessions"][0]["new_steps"] == 20
    again = upload(api, ("long.jsonl", data))
    assert again.status_code == 200
    # Calls sent against the call before them see all that call saw and what it added.
    step = api.get("/sessions/long-cc/steps/29").json()
    assert [m["id"] for m in step["before"]] == ["u0"] + [
        f"{kind}{n}" for n in range(1, 30) for kind in ("msg_", "r")
    ]
    last = api.get("/sessions/long-cc/steps/59").json()
    assert [m["id"] for m in last["before"]][:2] == ["s30", "msg_31"]
    assert len(last["before"]) == 1 + 2 * 29
    assert last["before"][-1]["content"][0]["content"] == "line 59 of the log"


@pytest.mark.parametrize(
    ("name", "session_id", "steps", "ops"),
    [
        ("openhands.json", "openhands", 3, ["summarize"]),
        ("openhands_parallel.json", "openhands_parallel", 2, []),
        ("swe_agent.traj", "swe_agent", 3, ["truncate"]),
        ("atif.json", "atif-run-1", 2, []),
    ],
)
def test_it_imports_each_format(
    api: Api, name: str, session_id: str, steps: int, ops: list[str]
) -> None:
    response = upload(api, fixture(name))
    assert response.status_code == 201, response.content
    [summary] = response.json()["sessions"]
    assert (summary["session_id"], summary["steps"]) == (session_id, steps)
    found = [
        op["op"]
        for i in range(steps)
        for op in api.get(f"/sessions/{session_id}/steps/{i}").json()["ops"]
    ]
    assert found == ops


def test_it_imports_an_atif_trajectory_with_its_embedded_sub_agents(api: Api) -> None:
    response = upload(api, fixture("atif_v1_7.json"))
    assert response.status_code == 201, response.content
    found = {s["session_id"]: s["steps"] for s in response.json()["sessions"]}
    assert found == {"run-4f2a": 2, "run-4f2a:summarizer-1": 1, "run-4f2a:helper-1": 2}
    helper = api.get("/sessions/run-4f2a:helper-1").json()
    assert helper["metadata"]["parent_session"] == "run-4f2a"


def test_it_stores_and_shows_nul_bytes_and_cut_emoji_of_tool_output(api: Api) -> None:
    response = upload(api, fixture("claude_code_binary.jsonl"))
    assert response.status_code == 201, response.content
    step = api.get("/sessions/cc-binary/steps/1").json()
    shown = step["before"][2]["content"][0]["content"]
    assert "PK" in shown and "broken" in shown and "tail" in shown


def test_it_refuses_a_file_that_is_no_transcript(api: Api) -> None:
    response = upload(api, ("notes.txt", b"just some notes\nand more\n"))
    assert response.status_code == 422
    assert "not a transcript" in response.json()["error"]
    assert not Session.objects.exists()


# What `codex exec --json` prints (its JSONL mode), as Codex 0.4x writes it.
CODEX_EXEC = b"""\
{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Listing**"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"ls",\
"aggregated_output":"AGENTS.md\\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Done."}}
{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,\
"output_tokens":122}}
"""


@pytest.mark.parametrize("fields", [{}, {"format": "codex"}])
def test_it_says_where_the_transcript_of_a_codex_exec_run_is(
    api: Api, fields: dict[str, str]
) -> None:
    # The events say what the agent did, not what the model was sent: the rollout does.
    response = upload(api, ("run.jsonl", CODEX_EXEC), **fields)
    assert response.status_code == 422
    assert response.json()["error"] == (
        "run.jsonl: file: is the event stream of `codex exec --json`, which tells what the "
        "agent did but not what the model was sent at each call; import the session's "
        "rollout instead: the file whose name ends in "
        "0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl under ~/.codex/sessions"
    )
    assert not Session.objects.exists()


def test_it_names_the_broken_line_and_stores_nothing_of_the_file(api: Api) -> None:
    name, data = fixture("claude_code.jsonl")
    lines = data.splitlines(keepends=True)
    broken = b"".join(lines[:10]) + b'{"type": "user", "sessionId": \n' + b"".join(lines[10:])
    response = upload(api, (name, broken))
    assert response.status_code == 422
    assert response.json()["error"].startswith("claude_code.jsonl: line 11: is not valid JSON")
    assert not Session.objects.exists()


def test_it_imports_the_good_files_of_an_upload_and_names_the_one_it_could_not(
    api: Api,
) -> None:
    name, data = fixture("claude_code.jsonl")
    broken = data.replace(b'"type": "assistant"', b'"type": "assistant", ', 1)
    response = upload(api, ("broken.jsonl", broken), fixture("swe_agent.traj"), (name, data))
    assert response.status_code == 422
    body = response.json()
    assert body["error"].startswith("broken.jsonl: line ")
    assert [e["error"] for e in body["errors"]] == [body["error"]]
    assert body["created"] is True
    assert [(s["session_id"], s["steps"]) for s in body["sessions"]] == [
        ("swe_agent", 3),
        ("cc-7f3a", 4),
        ("cc-7f3a:agent-b7e1", 1),
    ]
    stored = sorted(Session.objects.values_list("external_id", flat=True))
    assert stored == ["cc-7f3a", "cc-7f3a:agent-b7e1", "swe_agent"]
    assert Step.objects.filter(session__external_id="cc-7f3a").count() == 4
    # The one fixed and sent again with the others: it alone is new.
    again = upload(api, (name, data), fixture("swe_agent.traj"))
    assert again.status_code == 200
    assert "errors" not in again.json()


def test_it_names_each_file_of_an_upload_it_could_not_import(api: Api) -> None:
    response = upload(api, ("notes.txt", b"just notes\n"), ("more.txt", b"more notes\n"))
    assert response.status_code == 422
    body = response.json()
    assert body["error"].startswith("notes.txt: not a transcript")
    assert body["error"].endswith("(and 1 more not imported, named in errors)")
    assert [e["error"].split(":")[0] for e in body["errors"]] == ["notes.txt", "more.txt"]
    assert body["sessions"] == []
    assert not Session.objects.exists()


def test_the_command_imports_the_good_files_and_fails_naming_the_others(
    api: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("just notes\n")
    with pytest.raises(CommandError, match="not imported:\n.*notes.txt: not a transcript"):
        call_command(
            "importtranscript", api.project.slug, str(bad), str(FIXTURES / "swe_agent.traj")
        )
    assert "swe_agent  swe-agent  3 steps (3 new), 1 operations" in capsys.readouterr().out
    assert Step.objects.filter(session__external_id="swe_agent").count() == 3


def test_it_names_a_line_of_unexpected_shape(api: Api) -> None:
    data = b'{"type": "response_item", "payload": -1}\n'
    data += b'{"type": "event_msg", "payload": {}}\n'
    response = upload(api, ("rollout.jsonl", data), format="codex")
    assert response.status_code == 422
    assert response.json()["error"] == (
        "rollout.jsonl: line 1: payload: must be an object, not a number (-1)"
    )


def _lines(*objects: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(o).encode() + b"\n" for o in objects)


_CC = {"sessionId": "cc-bad", "timestamp": "2026-11-30T09:00:00Z"}
_OH_CALL = {"tool_call_id": "c1", "function_name": "bash", "model_response": {"id": "r1"}}
# A Codex rollout's first call, up to the token_count that closes it.
_CX_CALL = (
    {"type": "session_meta", "payload": {"id": "cx-bad"}},
    {"type": "response_item", "payload": {"type": "message", "role": "user", "content": "q"}},
    {"type": "response_item", "payload": {"type": "reasoning", "summary": []}},
)
BAD_SHAPES = [
    (
        "session.jsonl",
        _lines(
            {**_CC, "type": "user", "uuid": "u1", "message": {"role": "user", "content": [None]}},
        ),
        # it was stored as a part of its own
        "line 1: message.content[0]: must be a content block (an object), not None",
    ),
    (
        "rollout.jsonl",
        _lines(
            {"type": "session_meta", "payload": {"id": "cx-bad"}},
            {"type": "response_item", "payload": {"type": "message", "role": "user", "content": 5}},
        ),
        # it was stored as the text "5"
        "line 2: content: must be a text or a list of parts, not 5",
    ),
    (
        "run.traj",
        json.dumps(
            {"trajectory": [None, {"response": "ls", "query": [{"role": "user", "content": "q"}]}]}
        ).encode(),
        # it was called no SWE-agent trajectory at all
        "trajectory[0]: must be an object (a step), not None",
    ),
    (
        "rollout.jsonl",
        _lines(
            *_CX_CALL,
            {"type": "compacted", "payload": {"message": "", "replacement_history": "oops"}},
        ),
        # the compaction was rebuilt as if Codex had logged no history, its inserts lost
        'line 4: payload.replacement_history: must be a list of items, not a string ("oops")',
    ),
    (
        "rollout.jsonl",
        _lines(*_CX_CALL, {"type": "event_msg", "payload": {"type": "token_count", "info": "x"}}),
        # the call's usage and window were dropped without a word
        "line 4: payload.info: must be an object or null, not 'x'",
    ),
    (
        "rollout.jsonl",
        _lines(
            *_CX_CALL,
            {
                "type": "event_msg",
                "payload": {
                    "type": "token_count",
                    "info": {"last_token_usage": {"input_tokens": "12"}},
                },
            },
        ),
        "line 4: payload.info.last_token_usage.input_tokens: must be a whole number of tokens, "
        "not '12'",
    ),
    (
        "session.jsonl",
        _lines(
            {**_CC, "type": "user", "uuid": "u1", "message": {"role": "user", "content": "q"}},
            {
                **_CC,
                "type": "assistant",
                "uuid": "a1",
                "message": {"id": "m1", "content": "a", "usage": {"output_tokens": -4}},
            },
        ),
        "line 2: message.usage.output_tokens: must be a whole number of tokens, not -4",
    ),
    (
        "session.jsonl",
        _lines(
            {**_CC, "type": "user", "uuid": "u1", "message": {"role": "user", "content": "q"}},
            {
                **_CC,
                "type": "assistant",
                "uuid": "a1",
                "message": {"id": "m1", "content": "a", "usage": "12 tokens"},
            },
        ),
        'line 2: message.usage: must be an object of token counts, not a string ("12 tokens")',
    ),
    (
        "events.jsonl",
        _lines(
            {"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}},
            {
                "id": 1,
                "source": "agent",
                "action": "run",
                "args": {"command": "ls"},
                "tool_call_metadata": {
                    **_OH_CALL,
                    "model_response": {"id": "r1", "usage": {"prompt_tokens": [9]}},
                },
            },
        ),
        "line 2: tool_call_metadata.model_response.usage.prompt_tokens: must be a whole number "
        "of tokens, not [9]",
    ),
    (
        "events.jsonl",
        _lines(
            {"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}},
            {"id": 1, "source": "agent", "action": {"run": "ls"}},
        ),
        "line 2: action: must be a string naming the event, not an object",
    ),
    (
        "events.jsonl",
        _lines(
            {"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}},
            {"id": 1, "source": "environment", "observation": ["run"], "content": "x"},
        ),
        "line 2: observation: must be a string naming the event, not a list",
    ),
    (
        "run.json",
        json.dumps(
            {
                "schema_version": "ATIF-v1.2",
                "session_id": "atif-bad",
                "agent": {"name": "x"},
                "steps": [
                    {"step_id": 1, "source": "user", "message": "q"},
                    {
                        "step_id": 2,
                        "source": "agent",
                        "message": "a",
                        "metrics": {"cached_tokens": "3"},
                    },
                ],
            }
        ).encode(),
        "steps[1].metrics.cached_tokens: must be a whole number of tokens, not '3'",
    ),
]


@pytest.mark.parametrize(("name", "data", "error"), BAD_SHAPES)
def test_it_names_a_field_of_the_wrong_type_and_stores_nothing(
    api: Api, name: str, data: bytes, error: str
) -> None:
    response = upload(api, (name, data))
    assert response.status_code == 422, response.content
    assert response.json()["error"] == f"{name}: {error}"
    assert not Session.objects.exists()


def _atif_with_calls_of(calls: Any) -> bytes:
    steps = [
        {"step_id": 1, "source": "user", "message": "q"},
        {"step_id": 2, "source": "agent", "message": "a", "tool_calls": calls},
    ]
    doc = {"schema_version": "ATIF-v1.4", "agent": {"name": "x"}, "steps": steps}
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("calls", "found"),
    [(True, "a boolean (true)"), (5, "a number (5)"), ({"id": "c1"}, "an object")],
)
def test_it_names_atif_tool_calls_that_are_no_list_and_logs_no_failure(
    api: Api, caplog: pytest.LogCaptureFixture, calls: Any, found: str
) -> None:
    with caplog.at_level(logging.ERROR):
        response = upload(api, ("run.json", _atif_with_calls_of(calls)))
    assert response.status_code == 422, response.content
    error = f"run.json: steps[1].tool_calls: must be a list, not {found}"
    assert response.json()["error"] == error
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not Session.objects.exists()


def _openhands_with_extras(extras: Any) -> bytes:
    events = json.loads((FIXTURES / "openhands.json").read_bytes())
    events[2]["extras"] = extras
    return json.dumps(events).encode()


@pytest.mark.parametrize(
    ("name", "data", "where"),
    [
        ("events.json", _openhands_with_extras(5), "[2]"),
    ],
)
def test_it_names_the_json_path_of_a_part_of_unexpected_shape(
    api: Api, name: str, data: bytes, where: str
) -> None:
    response = upload(api, (name, data))
    assert response.status_code == 422, response.content
    assert response.json()["error"].startswith(f"{name}: {where}: cannot be read as")
    assert not Session.objects.exists()


# Far past what Python's parser reaches, and past the 64 KiB detection reads.
NESTED_TOO_DEEP = b"[" * 100_000 + b"]" * 100_000 + b"\n"


@pytest.mark.parametrize(
    ("format", "where"),
    [
        (None, "line 1"),
        ("claude-code", "line 1"),
        ("codex", "line 1"),
        ("openhands", "file"),
        ("swe-agent", "file"),
        ("atif", "file"),
    ],
)
def test_it_refuses_a_file_nested_too_deep_naming_where(
    api: Api, format: str | None, where: str
) -> None:
    fields = {"format": format} if format else {}
    response = upload(api, ("d.json", NESTED_TOO_DEEP), **fields)
    assert response.status_code == 422, response.content
    assert response.json() == {"error": f"d.json: {where}: is nested too deep to read"}
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (b"\n" + b"[" * 2000 + b"]" * 2000, "line 2"),
        # a document of many lines, read whole to tell its format
        (b"[\n" + b"[" * 2000 + b"]" * 2000 + b"\n]", "file"),
    ],
)
def test_it_refuses_a_small_file_nested_too_deep_naming_where(
    api: Api, data: bytes, where: str
) -> None:
    response = upload(api, ("d.json", data))
    assert response.status_code == 422, response.content
    assert response.json() == {"error": f"d.json: {where}: is nested too deep to read"}


def test_it_refuses_content_nested_past_what_ingest_takes_naming_the_step(api: Api) -> None:
    # Read, but deeper than an event sent to ingest may nest: stored, no page could show it.
    name, data = fixture("claude_code.jsonl")
    deep = b'{"type": "odd", "deep": ' + b"[" * 150 + b"]" * 150 + b"}"
    data = data.replace(b'"content": [', b'"content": [' + deep + b", ", 1)
    response = upload(api, (name, data))
    assert response.status_code == 422, response.content
    assert response.json() == {
        "error": f"{name}: step 0 of session 'cc-7f3a' was refused: "
        "body.output.messages: nested deeper than 100 levels"
    }
    assert not Session.objects.exists()


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("claude_code.jsonl", "line 3: {} is not a number JSON allows"),
        ("atif.json", "file: holds {}, not a number JSON allows"),
        ("openhands.json", "file: holds {}, not a number JSON allows"),
    ],
    ids=["claude-code", "atif", "openhands"],
)
def test_it_refuses_a_number_ingest_would_refuse_naming_where(
    api: Api, name: str, where: str, number: str
) -> None:
    # Python reads these; PostgreSQL cannot store them.
    _, data = fixture(name)
    part = b'{"type": "image", "width": ' + number.encode() + b', "height": 10}'
    data = data.replace(b'"content": ', b'"content": [' + part + b'], "was": ', 1)
    response = upload(api, (name, data))
    assert response.status_code == 422, response.content
    assert response.json() == {"error": f"{name}: {where.format(number)}"}
    assert not Session.objects.exists()


def test_it_reads_a_condensation_of_a_vast_range_by_the_events_it_holds(api: Api) -> None:
    call = {"tool_call_id": "c1", "function_name": "bash"}
    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}},
        {
            "id": 1,
            "source": "agent",
            "action": "run",
            "args": {"command": "ls"},
            "tool_call_metadata": {**call, "model_response": {"id": "r1"}},
        },
        {
            "id": 2,
            "source": "environment",
            "observation": "run",
            "content": "a b c",
            "tool_call_metadata": call,
        },
        {
            "id": 3,
            "source": "agent",
            "action": "condensation",
            "args": {"forgotten_events_start_id": 1, "forgotten_events_end_id": 10**10},
        },
        {
            "id": 4,
            "source": "agent",
            "action": "run",
            "args": {"command": "pwd"},
            "tool_call_metadata": {**call, "tool_call_id": "c2", "model_response": {"id": "r2"}},
        },
    ]
    response = upload(api, ("events.jsonl", _lines(*events)))
    assert response.status_code == 201, response.content
    [drop] = api.get("/sessions/events/steps/1").json()["ops"]
    assert (drop["op"], drop["targets"]) == ("drop", ["e1", "e2"])


def test_it_stores_nothing_and_answers_200_for_a_transcript_before_its_first_call(
    api: Api,
) -> None:
    name, data = fixture("claude_code.jsonl")
    prompt_only = b"".join(data.splitlines(keepends=True)[:3])  # the user's first prompt
    response = upload(api, (name, prompt_only))
    assert response.status_code == 200, response.content
    assert response.json() == {"sessions": []}
    assert not Session.objects.exists()
    assert upload(api, (name, data)).status_code == 201


_OH_LINES = _lines({"id": 0, "source": "user", "action": "message", "args": {"content": "hi"}})


@pytest.mark.parametrize(
    ("name", "data", "format", "found"),
    [
        (*fixture("codex.jsonl"), "claude-code", "line 1 has type 'session_meta'"),
        (*fixture("claude_code.jsonl"), "codex", "line 1 has type 'file-history-snapshot'"),
        (
            "events.jsonl",
            b"\n" + _OH_LINES,
            "claude-code",
            "line 2 has no type; its fields: 'id', 'source', 'action', 'args'",
        ),
    ],
    ids=["codex-as-claude-code", "claude-code-as-codex", "openhands-as-claude-code"],
)
def test_it_refuses_a_file_of_another_format_than_the_one_asked_naming_both(
    api: Api, tmp_path: Path, name: str, data: bytes, format: str, found: str
) -> None:
    response = upload(api, (name, data), format=format, session_id="x")
    assert response.status_code == 422, response.content
    error = f"is not a {format} transcript: no line of it is a {format} record ({found})"
    assert response.json() == {"error": f"{name}: file: {error}"}
    assert not Session.objects.exists()
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(CommandError) as raised:
        call_command("importtranscript", api.project.slug, str(path), "--format", format)
    assert str(raised.value) == f"{path}: file: {error}"
    assert not Session.objects.exists()


def test_it_leaves_a_half_written_last_line_of_a_live_transcript_for_later(api: Api) -> None:
    name, data = fixture("claude_code.jsonl")
    lines = data.splitlines(keepends=True)
    half = b"".join(lines[:9]) + lines[9][:40]  # no newline yet
    refused = upload(api, (name, half))
    assert refused.status_code == 422  # not live: a broken line, which says what to do
    assert refused.json()["error"].startswith(f"{name}: line 10: is not valid JSON: ")
    assert refused.json()["error"].endswith(
        "(the last line is unfinished: a transcript still being written is imported with "
        "live=1 (--live), which leaves that line for the next import)"
    )
    assert upload(api, (name, half), live="maybe").json() == {
        "error": "live: must be 1 (a transcript still being written) or 0"
    }
    assert upload(api, (name, half), live="1").status_code == 201
    assert upload(api, (name, data)).status_code == 201


def test_a_line_that_is_not_utf8_is_named_so_and_a_bom_is_passed_over(api: Api) -> None:
    name, data = fixture("claude_code.jsonl")
    lines = data.splitlines(keepends=True)
    # NUL bytes made json.loads guess UTF-32 and speak of code points.
    broken = b"".join(lines[:3]) + b"\x00" * 100 + b"\xff\xfe\n" + b"".join(lines[3:])
    refused = upload(api, (name, broken), format="claude-code")
    assert refused.status_code == 422
    assert refused.json()["error"] == (
        f"{name}: line 4: is not UTF-8 text (byte 100 of the line: invalid start byte)"
    )
    assert upload(api, (name, b"\xef\xbb\xbf" + data)).status_code == 201


def test_it_refuses_a_multipart_body_it_cannot_read_with_400_naming_it(api: Api) -> None:
    response = api.client.post(
        "/api/v1/import", b"--x\r\nnot a part", content_type="multipart/form-data", **api.auth
    )
    assert response.status_code == 400
    assert response.json()["error"].startswith("body: not a multipart form")


def test_it_refuses_an_unknown_format_naming_the_field(api: Api) -> None:
    response = upload(api, fixture("atif.json"), format="gemini")
    assert response.status_code == 400
    assert response.json()["error"].startswith("format: must be one of claude-code, codex")


def test_it_imports_into_the_session_named(api: Api) -> None:
    response = upload(api, fixture("atif.json"), session_id="incident-42")
    assert response.status_code == 201
    assert response.json()["sessions"][0]["session_id"] == "incident-42"


def _swe_run(reply: str, calls: int = 3) -> bytes:
    """A SWE-agent run of the fixture's instance whose first reply is `reply`, cut to
    its first `calls` calls (a copy of a run still going)."""
    doc = json.loads((FIXTURES / "swe_agent.traj").read_text().replace("List the files.", reply))
    return json.dumps({**doc, "trajectory": doc["trajectory"][:calls]}).encode()


def test_it_imports_another_run_named_like_a_stored_one_as_a_session_of_its_own(
    api: Api,
) -> None:
    name = "marshmallow-1867.traj"  # SWE-agent names a run's file by its instance
    assert upload(api, (name, _swe_run("List the files.", 2))).status_code == 201
    other = upload(api, (name, _swe_run("Read the issue first.", 2)))
    assert other.status_code == 201, other.content
    apart = other.json()["sessions"][0]["session_id"]
    assert apart.startswith("marshmallow-1867-")
    again = upload(api, (name, _swe_run("Read the issue first.", 2)))
    assert again.status_code == 200, again.content
    assert again.json()["sessions"][0] == {**other.json()["sessions"][0], "new_steps": 0}
    # each run grown extends its own session
    for reply, sid in (("Read the issue first.", apart), ("List the files.", "marshmallow-1867")):
        grown = upload(api, (name, _swe_run(reply)))
        assert grown.status_code == 201, grown.content
        assert grown.json()["sessions"][0]["session_id"] == sid
        assert grown.json()["sessions"][0]["new_steps"] == 1
    assert Step.objects.filter(session__external_id=apart).count() == 3
    assert Step.objects.filter(session__external_id="marshmallow-1867").count() == 3


def test_it_refuses_another_run_into_the_session_named_saying_what_to_do(api: Api) -> None:
    upload(api, ("a.traj", _swe_run("List the files.")), session_id="run-7")
    refused = upload(api, ("b.traj", _swe_run("Read the issue first.")), session_id="run-7")
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert "step 0 of session 'run-7' was refused" in error
    assert error.endswith("pass another session_id to import this one beside it")
    assert Step.objects.filter(session__external_id="run-7").count() == 3


def test_it_refuses_a_changed_transcript_of_a_session_its_log_names_saying_what_to_do(
    api: Api,
) -> None:
    _, data = fixture("claude_code.jsonl")
    name = "cc-7f3a.jsonl"  # Claude Code names a transcript's file by its session
    assert upload(api, (name, data)).status_code == 201
    changed = data.replace(b"Read the log first.", b"Read the code first.")
    refused = upload(api, (name, changed))
    assert refused.status_code == 409, refused.content
    assert refused.json()["error"].endswith(
        "pass session_id to import this one as a session of its own"
    )
    assert not Session.objects.filter(external_id__startswith="cc-7f3a-").exists()


def test_it_refuses_an_upload_past_the_import_limit(api: Api) -> None:
    with override_settings(IMPORT_MAX_BYTES=4096):
        response = upload(api, fixture("claude_code.jsonl"))
    assert response.status_code == 413
    assert "import limit of 4096 bytes" in response.json()["error"]
    assert not Session.objects.exists()


def test_it_refuses_a_read_only_key(api: Api) -> None:
    reader = apikey_create(project=api.project, name="reader", can_write=False)
    response = api.client.post(
        "/api/v1/import",
        {"file": _named(*fixture("atif.json"))},
        HTTP_AUTHORIZATION=f"Bearer {reader.secret}",
    )
    assert response.status_code == 403


def test_it_imports_from_the_command_line(api: Api, capsys: pytest.CaptureFixture[str]) -> None:
    call_command("importtranscript", api.project.slug, str(FIXTURES / "swe_agent.traj"))
    assert "swe_agent  swe-agent  3 steps (3 new), 1 operations" in capsys.readouterr().out
    call_command("importtranscript", api.project.slug, str(FIXTURES / "swe_agent.traj"))
    assert "nothing new" in capsys.readouterr().out
    with pytest.raises(CommandError, match="no project 'nope'"):
        call_command("importtranscript", "nope", str(FIXTURES / "swe_agent.traj"))


def test_it_describes_the_import_in_the_openapi_document(api: Api) -> None:
    doc = api.client.get("/api/v1/openapi.json").json()
    body = doc["paths"]["/api/v1/import"]["post"]["requestBody"]["content"]
    fields = body["multipart/form-data"]["schema"]["properties"]
    assert set(fields) >= {"file", "format", "session_id"}
    assert "claude-code" in fields["format"]["enum"]


def test_it_leaves_a_reply_still_streaming_for_the_next_live_import(api: Api) -> None:
    name, data = fixture("claude_code.jsonl")
    lines = data.splitlines(keepends=True)
    mid_reply = b"".join(lines[:4])  # the first reply's thinking, not yet its tool call
    held = upload(api, (name, mid_reply), live="1")
    assert held.status_code == 200 and held.json()["sessions"] == []
    grown = upload(api, (name, data))
    assert grown.status_code == 201
    step = api.get("/sessions/cc-7f3a/steps/0").json()
    assert step["stats_status"] in ("pending", "ready")
    assert Step.objects.filter(session__external_id="cc-7f3a").count() == 4


@pytest.mark.parametrize(
    ("name", "cut", "session_id", "calls"),
    [
        # cut after the first reply's thinking, before its tool call and usage
        ("claude_code.jsonl", 4, "cc-7f3a", 4),
        ("codex.jsonl", 8, "019d-codex-demo", 3),
    ],
)
def test_it_completes_a_reply_the_first_import_caught_mid_stream(
    api: Api, name: str, cut: int, session_id: str, calls: int
) -> None:
    _, data = fixture(name)
    lines = data.splitlines(keepends=True)
    first = upload(api, (name, b"".join(lines[:cut])))
    assert first.status_code == 201, first.content
    cut_reply = api.get(f"/sessions/{session_id}/steps/0").json()
    assert "tool" not in str(cut_reply["output"]).lower()

    grown = upload(api, (name, data))
    assert grown.status_code == 201, grown.content
    summary = next(s for s in grown.json()["sessions"] if s["session_id"] == session_id)
    assert (summary["steps"], summary["new_steps"]) == (calls, calls - 1)
    step = api.get(f"/sessions/{session_id}/steps/0").json()
    parts = step["output"]["messages"][-1]["content"]
    assert parts[-1]["type"] in ("tool_use", "function_call")
    assert step["usage"]["output_tokens"] > 0
    # The statistics of the completed step are computed again, with its usage now.
    session = Session.objects.get(external_id=session_id)
    assert session.stats_status == "pending"
    session_stats_compute(session_id=session.pk)
    stats = api.get(f"/sessions/{session_id}/steps/0").json()["stats"]
    assert "unseen_tokens" in stats, stats

    again = upload(api, (name, data))
    assert again.status_code == 200
    assert Step.objects.filter(session__external_id=session_id).count() == calls
    # An older copy of the file after it: its cut reply changes nothing stored.
    older = upload(api, (name, b"".join(lines[:cut])))
    assert older.status_code == 200, older.content
    kept = api.get(f"/sessions/{session_id}/steps/0").json()
    assert (kept["output"], kept["usage"]) == (step["output"], step["usage"])


def test_it_imports_a_codex_compaction_with_its_reinjected_message(api: Api) -> None:
    response = upload(api, fixture("codex.jsonl"))
    assert response.status_code == 201, response.content
    step = api.get("/sessions/019d-codex-demo/steps/2").json()
    assert [op["op"] for op in step["ops"]] == ["summarize", "insert", "reorder"]
    after = [m["id"] for m in step["after"]]
    assert after == ["instructions", "l6", "l16.1", "l16.2", "l19"]
    assert step["model"] == "gpt-5.3-codex-mini"
    assert step["context_window"] == 200000
    archive = {a["id"] for a in api.get("/sessions/019d-codex-demo/archive").json()["originals"]}
    assert {"l2", "l3", "l8", "l9", "l11", "l12"} <= archive


def test_it_imports_a_forked_codex_sub_agent_with_only_its_own_calls(api: Api) -> None:
    """Its rollout starts with a copy of its parent's history (calls, usage, a
    compaction): that is the context its first call saw, and no call of its own."""
    child = "019cd814-fea0-7c31-8d6b-2e0a4f79c15e"
    response = upload(api, fixture("codex_forked_subagent.jsonl"))
    assert response.status_code == 201, response.content
    assert response.json()["sessions"] == [
        {"session_id": child, "format": "codex", "steps": 2, "operations": 0, "new_steps": 2}
    ]
    session = api.get(f"/sessions/{child}").json()
    assert session["metadata"]["parent_session"] == "019cd80e-22b8-71a2-8c4e-5b9d0f3a17c6"
    first = api.get(f"/sessions/{child}/steps/0").json()
    assert first["ops"] == []
    before = [m["content"] for m in first["before"]]
    assert "INV-4471 time out after 30 s" in json.dumps(before[1])
    assert "spawn_agent" in json.dumps(before[-3])
    assert "List every place the nightly export" in json.dumps(before[-1])
    usages = [api.get(f"/sessions/{child}/steps/{n}").json()["usage"] for n in (0, 1)]
    assert sum(u["input_tokens"] + u["cache_read_tokens"] for u in usages) == 11300 + 11500


def _input_tokens(api: Api) -> dict[str, int]:
    """The input tokens each session's calls were charged, as the API shows them."""
    out: dict[str, int] = {}
    for session in Session.objects.order_by("external_id"):
        steps = Step.objects.filter(session=session).count()
        out[session.external_id] = sum(
            api.get(f"/sessions/{session.external_id}/steps/{i}").json()["usage"]["input_tokens"]
            for i in range(steps)
        )
    return out


@pytest.mark.parametrize("split", ["together", "first-then-resumed", "resumed-then-first", "zip"])
def test_it_counts_the_calls_a_resumed_claude_code_session_copied_once(
    api: Api, split: str
) -> None:
    """`claude --resume` (1.0) writes a new session whose transcript opens with a copy
    of the one it resumed: its calls are the first session's steps only, and the
    resumed one's first step starts from them."""
    first, again = _resumed_pair(keep_ids=False)
    files = [("cc-first.jsonl", first), ("cc-again.jsonl", again)]
    if split == "resumed-then-first":
        files.reverse()
    if split == "zip":
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as archive:
            for name, data in files:
                archive.writestr(f"-home-murphy-temp/{name}", data)
        files = [("-home-murphy-temp.zip", out.getvalue())]
    sends = [files] if split in ("together", "zip") else [[f] for f in files]
    for send in sends:
        response = upload(api, *send)
        assert response.status_code == 201, response.content
    assert _input_tokens(api) == {"cc-again": 1400, "cc-first": 1200 + 1300}
    step = api.get("/sessions/cc-again/steps/0").json()
    assert [m["id"] for m in step["before"]] == ["u-1", "msg_1", "u-2", "msg_2", "u-3"]
    for send in sends:
        again_response = upload(api, *send)
        assert again_response.status_code == 200, again_response.content
    assert Step.objects.count() == 3


def test_it_shows_an_openhands_replys_usage_and_the_arguments_the_model_wrote(
    api: Api,
) -> None:
    from tests.importers.test_core_importers import _oh_session

    response = upload(api, ("oh-run.json", json.dumps(_oh_session()).encode()))
    assert response.status_code == 201, response.content
    first = api.get("/sessions/oh-run/steps/0").json()
    call = first["output"]["messages"][0]["content"][1]
    assert call["arguments"] == {"command": "grep -rn TIMEOUT ."}
    reply = api.get("/sessions/oh-run/steps/1").json()
    assert reply["usage"] == {"input_tokens": 300, "cache_read_tokens": 5000, "output_tokens": 40}


def test_it_imports_an_openhands_delegate_as_a_session_of_its_own(api: Api) -> None:
    """CodeActAgent hands a question to BrowsingAgent, whose events OpenHands logs in
    the same stream until its answer comes back."""
    response = upload(api, fixture("openhands_delegate.json"))
    assert response.status_code == 201, response.content
    found = {s["session_id"]: s["steps"] for s in response.json()["sessions"]}
    assert found == {"openhands_delegate": 3, "openhands_delegate:delegate-7": 2}
    delegate = api.get("/sessions/openhands_delegate:delegate-7").json()
    assert delegate["metadata"]["parent_session"] == "openhands_delegate"
    assert delegate["metadata"]["parent_tool_call_id"] == "toolu_d1"
    assert delegate["status"] == "succeeded"
    first = api.get("/sessions/openhands_delegate:delegate-7/steps/0").json()
    assert [m["content"] for m in first["before"]] == [
        "TASK: Find the latest httpx release on https://pypi.org/project/httpx/ and report "
        "its version number."
    ]
    last = api.get("/sessions/openhands_delegate/steps/2").json()
    assert [m["role"] for m in last["before"]] == [
        "system", "user", "assistant", "tool", "assistant", "tool"]  # fmt: skip
    assert last["before"][-1]["content"] == (
        "The latest httpx release is 0.28.1 (released 2024-12-06)."
    )
    assert last["usage"]["input_tokens"] == 6900
    again = upload(api, fixture("openhands_delegate.json"))
    assert again.status_code == 200, again.content
    assert all(s["new_steps"] == 0 for s in again.json()["sessions"])
    assert Step.objects.count() == 5


def test_it_links_atif_results_that_name_no_call_to_the_calls_of_their_step(api: Api) -> None:
    # As a Harbor agent writes them: one call a step, its result without source_call_id.
    def step(n: int, call: str, command: str, output: str) -> dict[str, Any]:
        return {"step_id": n, "timestamp": f"2026-02-09T08:20:0{n}+00:00", "source": "agent",
                "model_name": "gemini/gemini-3-flash-preview", "message": "",
                "tool_calls": [{"tool_call_id": call, "function_name": "bash",
                                "arguments": {"command": command}}],
                "observation": {"results": [{"content": output}]},
                "metrics": {"prompt_tokens": 2600 + 100 * n, "completion_tokens": 10}}  # fmt: skip

    doc = {"schema_version": "ATIF-v1.6", "session_id": "nav-1",
           "agent": {"name": "navigator", "version": "0.1.0"},
           "steps": [{"step_id": 1, "source": "user", "message": "Why is checkout down?"},
                     step(2, "call_a", "tail -n 50 app.log", "pool exhausted"),
                     step(3, "call_b", "tail -n 50 app.log", "pool exhausted"),
                     {"step_id": 4, "source": "agent", "message": "The DB pool.",
                      "metrics": {"prompt_tokens": 3000, "completion_tokens": 5}}]}  # fmt: skip
    response = upload(api, ("trajectory.json", json.dumps(doc).encode()))
    assert response.status_code == 201, response.content
    last = api.get("/sessions/nav-1/steps/2").json()
    results = [m for m in last["before"] if m["role"] == "tool"]
    assert [m["content"] for m in results] == ["pool exhausted", "pool exhausted"]
    session_stats_compute(session_id=Session.objects.get(external_id="nav-1").pk)
    # the same command again: its result now counts for the tool that made it
    flags = api.get("/sessions/nav-1/steps/2").json()["stats"]["flags"]
    assert "repeated_tool_call" in flags


@pytest.mark.parametrize(
    ("trajectory", "error"),
    [
        ({"steps": {"1": {"source": "user"}}}, "t.json: steps: must be a list, not an object"),
        ({"steps": "x"}, 't.json: steps: must be a list, not a string ("x")'),
        ({"subagent_trajectories": [{"trajectory_id": "helper"}]},
         "t.json: subagent_trajectories[0].steps: field required"),
    ],
)  # fmt: skip
def test_it_refuses_an_atif_trajectory_without_a_list_of_steps_naming_it(
    api: Api, trajectory: dict[str, Any], error: str
) -> None:
    doc = {"schema_version": "ATIF-v1.7", "session_id": "t", "agent": {"name": "a"},
           "steps": [{"step_id": 1, "source": "user", "message": "Go."},
                     {"step_id": 2, "source": "agent", "message": "Done."}]}  # fmt: skip
    response = upload(api, ("t.json", json.dumps({**doc, **trajectory}).encode()))
    assert response.status_code == 422
    assert response.json()["error"].startswith(error)
    assert not Session.objects.exists()


def _harbor_openhands_trajectory() -> dict[str, Any]:
    """A trajectory Harbor converted from OpenHands' events: a step per action, each
    action's message OpenHands' own description of it, its metrics how much the
    running total of tokens grew since the action before. The model's first call made
    two tool calls: the second action's step grew the total by nothing (``{}``), and
    carries the arguments of the response's first call, as Harbor takes them."""
    grep = {"command": "grep -rn timeout config/"}
    return {
        "schema_version": "ATIF-v1.5", "session_id": "harbor-oh-7",
        "agent": {"name": "openhands", "version": "0.59.0", "model_name": "claude-sonnet-4-5",
                  "extra": {"agent_class": "CodeActAgent"}},
        "steps": [
            {"step_id": 1, "timestamp": "2026-01-12T10:00:00", "source": "system",
             "message": "You are OpenHands agent, a helpful AI assistant."},
            {"step_id": 2, "timestamp": "2026-01-12T10:00:01", "source": "user",
             "message": "Why does order SO20260101007 time out?"},
            {"step_id": 3, "timestamp": "2026-01-12T10:00:09", "source": "agent",
             "message": "Running command: grep -rn timeout config/",
             "tool_calls": [{"tool_call_id": "toolu_01", "function_name": "execute_bash",
                             "arguments": grep}],
             "observation": {"results": [{"source_call_id": "toolu_01",
                                          "content": "config/prod.exs:12: timeout: 3000"}]},
             "metrics": {"prompt_tokens": 5200, "completion_tokens": 140,
                         "cost_usd": 0.0177}},
            {"step_id": 4, "timestamp": "2026-01-12T10:00:10", "source": "agent",
             "message": "Reading file: /workspace/lib/inventory.ex",
             "tool_calls": [{"tool_call_id": "toolu_02", "function_name": "str_replace_editor",
                             "arguments": grep}],
             "observation": {"results": [{"source_call_id": "toolu_02",
                                          "content": "88\\t  timeout: 3000"}]},
             "metrics": {}},
            {"step_id": 5, "timestamp": "2026-01-12T10:00:15", "source": "agent",
             "message": "The inventory call waits 3 s (config/prod.exs:12).",
             "tool_calls": [{"tool_call_id": "toolu_03", "function_name": "finish",
                             "arguments": {"message": "inventory-svc times out after 3 s"}}],
             "metrics": {"prompt_tokens": 5600, "completion_tokens": 60, "cached_tokens": 5100,
                         "cost_usd": 0.0042}},
        ],
        "final_metrics": {"total_prompt_tokens": 10800, "total_completion_tokens": 200},
    }  # fmt: skip


def test_it_reads_the_parallel_tool_calls_harbor_split_over_steps_as_one_call(api: Api) -> None:
    data = json.dumps(_harbor_openhands_trajectory(), indent=2).encode()
    response = upload(api, ("trajectory.json", data))
    assert response.status_code == 201, response.content
    assert response.json()["sessions"][0]["steps"] == 2
    first = api.get("/sessions/harbor-oh-7/steps/0").json()
    [reply] = first["output"]["messages"]
    calls = [p["id"] for p in reply["content"] if p["type"] == "tool_call"]
    assert calls == ["toolu_01", "toolu_02"]
    assert first["usage"]["input_tokens"] == 5200
    last = api.get("/sessions/harbor-oh-7/steps/1").json()
    assert [m["role"] for m in last["before"]] == ["system", "user", "assistant", "tool", "tool"]
    assert last["usage"] == {"input_tokens": 500, "cache_read_tokens": 5100, "output_tokens": 60}
    again = upload(api, ("trajectory.json", data))
    assert again.status_code == 200, again.content


def test_it_keeps_steps_whose_metrics_say_nothing_as_calls_of_their_own(api: Api) -> None:
    doc = _harbor_openhands_trajectory()
    for step in doc["steps"]:
        step.pop("metrics", None)  # a converter that reports no usage
    response = upload(api, ("trajectory.json", json.dumps(doc).encode()))
    assert response.status_code == 201, response.content
    assert response.json()["sessions"][0]["steps"] == 3


def test_an_empty_file_is_called_empty(api: Api) -> None:
    refused = upload(api, ("blank.jsonl", b" \n\n"))
    assert refused.status_code == 422
    assert refused.json()["error"] == (
        "blank.jsonl: the file is empty, so its format cannot be told; pass format to say it"
    )
    # With its format, an empty transcript is one with no call yet: nothing to add.
    assert upload(api, ("blank.jsonl", b""), format="claude-code").json() == {"sessions": []}


def test_json_lines_sent_as_a_one_document_format_are_told_apart(api: Api) -> None:
    name, data = fixture("claude_code.jsonl")
    refused = upload(api, (name, data), format="swe-agent")
    assert refused.status_code == 422
    assert refused.json()["error"].endswith(
        "(column 1): a value follows the first one, where this format is one JSON document "
        "(JSON lines are another format's)"
    )
