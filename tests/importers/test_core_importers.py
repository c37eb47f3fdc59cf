"""The importers on small transcripts written for these tests, replayed with the core
exactly as ingest derives each step's contexts."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from contextview.core.importers import HEAD_BYTES, TranscriptError, detect, read
from contextview.core.session import SessionWalk

FIXTURES = Path(__file__).parent / "fixtures"


def events_of(name: str, **kwargs: Any) -> list[dict[str, Any]]:
    data = (FIXTURES / name).read_bytes()
    fmt = detect(data[:HEAD_BYTES], whole=len(data) <= HEAD_BYTES)
    assert fmt is not None
    return list(read(io.BytesIO(data), format=fmt, fallback=Path(name).stem, **kwargs))


def replay(events: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Each session's steps as the core derives them: (body, StepResult)."""
    walks: dict[str, SessionWalk] = {}
    out: dict[str, list[Any]] = {}
    for event in events:
        if event["type"] != "step":
            continue
        body = event["body"]
        sid = body["session_id"]
        result = walks.setdefault(sid, SessionWalk()).take(
            body["index"],
            obs=body["obs"]["messages"],
            base=body["obs"].get("$base"),
            ops_raw=body.get("actions"),
        )
        out.setdefault(sid, []).append((body, result))
    return out


def ids(messages: list[Any]) -> list[str]:
    return [m.id for m in messages]


def test_it_detects_each_format_from_its_content() -> None:
    found = {}
    for path in sorted(p for p in FIXTURES.iterdir() if p.is_file()):
        data = path.read_bytes()
        found[path.name] = detect(data[:HEAD_BYTES], whole=True)
    assert found == {
        "atif.json": "atif",
        "atif_v1_7.json": "atif",
        "claude_code.jsonl": "claude-code",
        "claude_code_binary.jsonl": "claude-code",
        "codex.jsonl": "codex",
        "codex_forked_subagent.jsonl": "codex",
        "openhands.json": "openhands",
        "openhands_delegate.json": "openhands",
        "openhands_parallel.json": "openhands",
        "swe_agent.traj": "swe-agent",
    }
    assert detect(b'{"hello": "world"}\n{"a": 1}\n') is None
    assert detect(b"plain text, not a transcript", whole=True) is None


def test_it_makes_one_step_per_claude_code_model_call() -> None:
    steps = replay(events_of("claude_code.jsonl"))["cc-7f3a"]
    assert [body["index"] for body, _ in steps] == [0, 1, 2, 3]
    # call 1 saw the question; its reply, streamed as two entries, is one message
    first_body, first = steps[0]
    assert ids(first.before) == ["u-1"]
    reply = first_body["output"]["messages"][0]
    assert reply["id"] == "msg_01"
    assert [b["type"] for b in reply["content"]] == ["thinking", "tool_use"]
    assert first_body["model"] == "claude-sonnet-4-5"
    assert first_body["usage"] == {
        "input_tokens": 3,
        "output_tokens": 40,
        "cache_read_tokens": 0,
        "cache_write_tokens": 9000,
    }
    # call 3 saw everything before it, each message in the order it was logged
    assert ids(steps[2][1].before) == ["u-1", "msg_01", "u-2", "msg_02", "u-3"]
    assert steps[2][1].before[2].partition == "tool"


def test_it_turns_a_claude_code_compaction_into_a_summary_of_what_left() -> None:
    body, after_compaction = replay(events_of("claude_code.jsonl"))["cc-7f3a"][3]
    assert ids(after_compaction.before) == [
        "u-1",
        "msg_01",
        "u-2",
        "msg_02",
        "u-3",
        "msg_03",
        "u-4",
    ]
    assert ids(after_compaction.after) == ["c-2", "u-4"]
    [op] = after_compaction.ops
    assert op.op == "summarize"
    assert "SO20260101007" in after_compaction.after[0].text
    [fold] = after_compaction.folds
    assert fold.result_id == "c-2"
    assert ids(list(fold.originals)) == ["u-1", "msg_01", "u-2", "msg_02", "u-3", "msg_03"]
    assert "trigger: auto" in body["reason"] and "167731" in body["reason"]


def test_it_imports_a_claude_code_sub_agent_as_its_own_session() -> None:
    events = events_of("claude_code.jsonl")
    sessions = {e["body"]["session_id"]: e["body"] for e in events if e["type"] == "session"}
    assert sessions["cc-7f3a:agent-b7e1"]["metadata"]["parent_session"] == "cc-7f3a"
    assert "parent_session" not in sessions["cc-7f3a"]["metadata"]
    [(body, sub)] = replay(events)["cc-7f3a:agent-b7e1"]
    assert ids(sub.before) == ["t-1"]
    assert body["model"] == "claude-haiku-4-5"


def test_it_keeps_nul_bytes_and_cut_emoji_of_tool_output_as_written() -> None:
    _, step = replay(events_of("claude_code_binary.jsonl"))["cc-binary"][1]
    result = step.before[2].content[0]["content"]
    assert "\x00" in result and "\ud83d" in result


def test_it_sends_each_message_once_and_then_by_id_alone() -> None:
    events = [e for e in events_of("claude_code.jsonl") if e["type"] == "step"]
    with_content = [m["id"] for e in events for m in e["body"]["obs"]["messages"] if "content" in m]
    assert len(with_content) == len(set(with_content))
    assert events[2]["body"]["obs"]["messages"][0] == {"id": "u-1"}


def test_it_gives_the_same_events_for_the_same_file_and_more_for_a_grown_one() -> None:
    data = (FIXTURES / "claude_code.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    whole = list(read(io.BytesIO(data), format="claude-code"))
    again = list(read(io.BytesIO(data), format="claude-code"))
    assert whole == again
    # the file as it was before its last main-session call was logged
    cut = b"".join(lines[:13])
    earlier = list(read(io.BytesIO(cut), format="claude-code"))
    earlier_ids = {e["id"] for e in earlier}
    assert earlier_ids < {e["id"] for e in whole}


def test_it_reads_codex_calls_usage_and_context_window() -> None:
    events = events_of("codex.jsonl")
    steps = [e["body"] for e in events if e["type"] == "step"]
    assert len(steps) == 3
    assert steps[0]["model"] == "gpt-5.3-codex"
    assert steps[0]["usage"] == {
        "input_tokens": 10000,
        "cache_read_tokens": 2000,
        "output_tokens": 150,
    }
    assert steps[0]["context_window"] == 258400
    assert [m["content"][0]["type"] for m in steps[0]["output"]["messages"]] == [
        "reasoning",
        "function_call",
    ]
    first = [m.get("content") for m in steps[0]["obs"]["messages"]]
    assert first[0] == "You are Codex, a coding agent."
    assert steps[2]["model"] == "gpt-5.3-codex-mini"


def test_it_turns_codex_compacted_into_a_summary_and_the_reinjected_messages_into_inserts() -> None:
    steps = [e["body"] for e in events_of("codex.jsonl") if e["type"] == "step"]
    compacted = steps[2]
    ops = compacted["actions"]
    assert [op["action"] for op in ops] == ["summarize", "insert", "reorder"]
    summary = ops[0]["result"]
    assert summary["content"][0]["type"] == "compaction"
    # the question survives as the very message it was; the instructions stay too
    assert "l6" not in ops[0]["targets"] and "instructions" not in ops[0]["targets"]
    assert {"l2", "l8", "l9", "l11", "l12"} <= set(ops[0]["targets"])
    assert "zsh" in ops[1]["result"]["content"][0]["text"]
    order = ops[2]["params"]["order"]
    assert order[:4] == ["instructions", "l6", ops[1]["result"]["id"], summary["id"]]
    assert order[-1] == "l19"  # the prompt logged after the compaction comes last
    assert "12400 tokens reported before" in compacted["reason"]


def test_a_codex_sessions_task_is_what_its_user_message_event_says() -> None:
    # A text Codex injects that no known prefix names came first and was the task.
    def item(text: str) -> dict[str, Any]:
        content = [{"type": "input_text", "text": text}]
        return {
            "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": content},
        }  # noqa: E501

    lines = [
        {"type": "session_meta", "payload": {"id": "cx-task"}},
        item("<collaboration_mode>default</collaboration_mode>"),
        item("Why does order SO20260101007 time out?"),
        {
            "type": "event_msg",
            "payload": {
                "type": "user_message",
                "message": "Why does order SO20260101007 time out?",
            },
        },  # noqa: E501
        {"type": "response_item", "payload": {"type": "reasoning", "summary": []}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "and the next one?"}},  # noqa: E501
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    events = list(read(io.BytesIO(data), format="codex"))
    [session] = [e["body"] for e in events if e["type"] == "session"]
    assert session["metadata"]["task"] == "Why does order SO20260101007 time out?"


def test_it_makes_openhands_condensation_a_summary_of_the_forgotten_events() -> None:
    events = events_of("openhands.json")
    steps = replay(events)["openhands"]
    assert len(steps) == 3
    body, condensed = steps[2]
    assert ids(condensed.after) == ["e0", "e1", "cond-e3"]
    assert ids(list(condensed.folds[0].originals)) == ["e3", "e4", "e5", "e6"]
    assert steps[1][0]["usage"] == {
        "input_tokens": 200,
        "cache_read_tokens": 5000,
        "output_tokens": 40,
    }
    assert events[-1]["type"] == "session_end" and events[-1]["body"]["status"] == "succeeded"


def test_it_makes_one_openhands_call_of_the_tool_calls_of_one_response() -> None:
    # OpenHands runs the calls of one response one at a time and logs each result
    # before the next call: run, its output, read, its output, all of one response.
    events = events_of("openhands_parallel.json")
    steps = replay(events)["openhands_parallel"]
    assert len(steps) == 2
    (first, call), (second, after) = steps
    assert ids(call.before) == ["e0", "e1"]
    assert [m["id"] for m in first["output"]["messages"]] == ["e3", "e5"]
    assert first["usage"] == {"input_tokens": 6200, "cache_read_tokens": 0, "output_tokens": 95}
    assert ids(after.before) == ["e0", "e1", "e3", "e4", "e5", "e6"]
    assert second["usage"]["cache_read_tokens"] == 6200
    # the system message's tools are what each call was sent
    names = [t["function"]["name"] for t in first["tools"]]
    assert names == ["execute_bash", "str_replace_editor", "finish"]
    assert second["tools"] == first["tools"]


def test_it_makes_elided_swe_agent_observations_truncates() -> None:
    events = events_of("swe_agent.traj")
    steps = replay(events)["swe_agent"]
    assert [len(r.before) for _, r in steps] == [2, 4, 6]
    _, third = steps[2]
    [op] = third.ops
    assert op.op == "truncate" and op.targets == ("m3",)
    assert third.after[3].text == "Old environment output: (4 lines omitted)"
    assert "src/" in third.folds[0].originals[0].text
    assert events[0]["body"]["metadata"]["model_stats"]["api_calls"] == 3
    assert events[-1]["body"]["status"] == "succeeded"


def test_it_reads_the_demonstration_in_a_swe_agent_history_as_context_not_calls() -> None:
    # put_demos_in_history: a worked example's messages, marked is_demo, come first.
    def said(role: str, text: str, **more: Any) -> dict[str, Any]:
        return {"role": role, "content": text, "agent": "primary", **more}

    history = [
        said("system", "You are an autonomous programmer."),
        said("user", "ISSUE: an example bug", is_demo=True),
        said("assistant", "DISCUSSION\n```\nls\n```", is_demo=True),
        said("user", "example.py", is_demo=True),
        said("user", "ISSUE: the date parser drops the zone"),
        said("assistant", "DISCUSSION\n```\nsubmit\n```"),
    ]
    doc = {"history": history, "info": {"exit_status": "submitted"}}
    events = list(read(io.BytesIO(json.dumps(doc).encode()), format="swe-agent", fallback="d"))
    [(body, call)] = replay(events)["d"]
    assert ids(call.before) == ["m0", "m1", "m2", "m3", "m4"]
    assert body["output"]["messages"][0]["id"] == "m5"


def test_it_reads_atif_agent_steps_as_calls() -> None:
    steps = replay(events_of("atif.json"))["atif-run-1"]
    assert len(steps) == 2
    body, second = steps[1]
    assert ids(second.before) == ["s1", "s2", "s3", "s3.r0"]
    assert body["usage"] == {"input_tokens": 100, "cache_read_tokens": 800, "output_tokens": 12}
    parts = steps[0][0]["output"]["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["thinking", "text", "tool_call"]


def test_it_reads_an_atif_continuation_from_its_copied_context() -> None:
    steps = replay(events_of("atif_v1_7.json"))["run-4f2a"]
    # the copied steps are where this run starts from, not calls it made
    assert len(steps) == 2
    (first, call), (second, _) = steps
    assert ids(call.before) == ["s1", "s2", "s2.r0", "s3", "s3.r0", "s4"]
    # a system step's observation is context too, and so is an image the user sent
    assert "00:05 UTC" in call.before[4].text
    assert call.before[5].content[1]["source"]["path"] == "images/cron_dashboard.png"
    assert [t["function"]["name"] for t in first["tools"]] == ["bash_command", "delegate"]
    assert second["tools"] == first["tools"]


def test_it_keeps_atif_cache_writes_apart_from_the_prompt() -> None:
    [first, _] = [e["body"] for e in events_of("atif_v1_7.json") if e["type"] == "step"][:2]
    assert first["usage"] == {
        "input_tokens": 200,
        "cache_read_tokens": 3900,
        "cache_write_tokens": 1100,
        "output_tokens": 85,
    }


def test_it_imports_embedded_atif_sub_agents_as_sessions_of_their_own() -> None:
    events = events_of("atif_v1_7.json")
    sessions = {e["body"]["session_id"]: e["body"] for e in events if e["type"] == "session"}
    assert set(sessions) == {"run-4f2a", "run-4f2a:summarizer-1", "run-4f2a:helper-1"}
    helper = sessions["run-4f2a:helper-1"]
    assert helper["metadata"] == {
        "parent_session": "run-4f2a",
        "parent_tool_call_id": "toolu_b7",
        "task": "Find exports that select current_date",
    }
    assert helper["model"] == "anthropic/claude-haiku-4-5"
    assert sessions["run-4f2a:summarizer-1"]["metadata"] == {
        "parent_session": "run-4f2a",
        "task": "Summarize the work so far.",
    }
    steps = replay(events)
    assert [ids(r.before) for _, r in steps["run-4f2a:helper-1"]] == [
        ["s1"],
        ["s1", "s2", "s2.r0"],
    ]


def test_it_names_the_line_of_broken_json() -> None:
    good = {
        "type": "user",
        "sessionId": "s",
        "uuid": "u",
        "message": {"role": "user", "content": "hi"},
    }
    bad = json.dumps(good).encode() + b'\n{"type": "assist\n'
    with pytest.raises(TranscriptError) as caught:
        list(read(io.BytesIO(bad), format="claude-code"))
    assert str(caught.value).startswith("line 2: is not valid JSON")


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"message": -1}, "line 2: message: must be an object, not a number (-1)"),
        ({"message": "hi"}, 'line 2: message: must be an object, not a string ("hi")'),
        ({}, "line 2: message: field required, an object"),
    ],
)
def test_it_names_the_line_of_an_entry_of_unexpected_shape(
    message: dict[str, Any], error: str
) -> None:
    bad = json.dumps({"type": "user", "sessionId": "s", "uuid": "u", **message}).encode()
    with pytest.raises(TranscriptError) as caught:
        list(read(io.BytesIO(b"\n" + bad + b"\n"), format="claude-code"))
    assert str(caught.value) == error


def test_it_reads_a_mini_swe_agent_trajectory_from_its_messages() -> None:
    doc = {
        "info": {
            "exit_status": "Submitted",
            "model_stats": {"instance_cost": 0.02, "api_calls": 2},
        },
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the failing test in tests/test_io.py"},
            {"role": "assistant", "content": "THOUGHT: run it\n```bash\npytest -x\n```"},
            {"role": "user", "content": "<returncode>1</returncode><output>1 failed</output>"},
            {"role": "assistant", "content": "THOUGHT: done\n```bash\necho SUBMIT\n```"},
        ],
        "trajectory_format": "mini-swe-agent-1",
    }
    data = json.dumps(doc).encode()
    assert detect(data, whole=True) == "swe-agent"
    events = list(read(io.BytesIO(data), format="swe-agent", fallback="run-7"))
    steps = replay(events)["run-7"]
    assert [ids(r.before) for _, r in steps] == [["m0", "m1"], ["m0", "m1", "m2", "m3"]]
    assert events[-1]["body"]["status"] == "succeeded"
    assert events[0]["body"]["agent"] == "mini-swe-agent"
    assert "model" not in events[0]["body"]  # its configuration was not saved


def test_it_shows_the_thinking_of_a_mini_swe_agent_reply_once() -> None:
    # mini-swe-agent 2 keeps each reply as LiteLLM gave it: an Anthropic model's
    # thinking as blocks and again as their text, tool calls beside no content.
    call = {"id": "toolu_1", "type": "function",
            "function": {"name": "bash", "arguments": '{"command": "pytest -x"}'}}  # fmt: skip
    reply = {"role": "assistant", "content": None, "tool_calls": [call],
             "reasoning_content": "Run the tests first.",
             "thinking_blocks": [{"type": "thinking", "thinking": "Run the tests first.",
                                  "signature": "c2ln"}],
             "extra": {"actions": [{"command": "pytest -x"}]}}  # fmt: skip
    doc = {
        "info": {"mini_version": "2.0.0", "exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the failing test"},
            reply,
            {"role": "tool", "tool_call_id": "toolu_1", "content": "1 failed"},
            {"role": "assistant", "content": "Fixed."},
            {"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}},
        ],
        "trajectory_format": "mini-swe-agent-1.1",
    }
    events = list(read(io.BytesIO(json.dumps(doc).encode()), format="swe-agent", fallback="r"))
    (first, _), (second, _) = replay(events)["r"]
    said = first["output"]["messages"][0]
    assert said["content"] == [{"type": "thinking", "thinking": "Run the tests first."}]
    assert said["tool_calls"] == [call]
    assert second["output"]["messages"][0]["content"] == "Fixed."


def test_it_takes_a_mini_swe_agent_sessions_model_from_its_configuration() -> None:
    doc = {
        "info": {
            "exit_status": "Submitted",
            "mini_version": "1.17.3",
            "config": {"agent": {"step_limit": 250}, "model": {"model_name": "openai/gpt-5"}},
        },
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the failing test in tests/test_io.py"},
            {"role": "assistant", "content": "THOUGHT: done\n```bash\necho SUBMIT\n```"},
        ],
    }
    events = list(read(io.BytesIO(json.dumps(doc).encode()), format="swe-agent", fallback="r"))
    assert (events[0]["type"], events[0]["body"]["agent"]) == ("session", "mini-swe-agent")
    assert events[0]["body"]["model"] == "openai/gpt-5"


def test_it_detects_jsonl_openhands_and_a_claude_code_summary_line() -> None:
    event = {"id": 1, "source": "user", "action": "message", "args": {"content": "hi"}}
    assert detect((json.dumps(event) + "\n" + json.dumps(event) + "\n").encode()) == "openhands"
    summary = {"type": "summary", "summary": "Fix timeout", "leafUuid": "u-9"}
    assert detect((json.dumps(summary) + "\n" + json.dumps(summary) + "\n").encode()) == (
        "claude-code"
    )


def test_it_keeps_what_claude_code_logs_between_a_boundary_and_its_summary() -> None:
    lines = (FIXTURES / "claude_code.jsonl").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"compact_boundary"' in line)
    meta = json.loads(lines[at + 1])
    meta.update(uuid="m-1", isCompactSummary=False, isMeta=True)
    meta["message"] = {"role": "user", "content": "Caveat: the messages below were generated..."}
    lines.insert(at + 1, json.dumps(meta))
    data = ("\n".join(lines) + "\n").encode()
    events = list(read(io.BytesIO(data), format="claude-code"))
    _, step = replay(events)["cc-7f3a"][3]
    assert ids(step.after) == ["c-2", "m-1", "u-4"]
    assert "m-1" not in ids(list(step.folds[0].originals))


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ({"trigger": "manual"}, "compaction (trigger: manual)"),
        (None, "compaction (trigger: unknown)"),
        (
            {"trigger": "auto", "preTokens": 167731},
            "compaction (trigger: auto, 167731 tokens reported before)",
        ),
    ],
)
def test_a_claude_code_compaction_gives_the_tokens_before_it_where_the_log_does(
    meta: dict[str, Any] | None, reason: str
) -> None:
    # A boundary without preTokens was "None tokens reported before".
    lines = (FIXTURES / "claude_code.jsonl").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"compact_boundary"' in line)
    boundary = json.loads(lines[at])
    boundary.pop("compactMetadata", None)
    if meta is not None:
        boundary["compactMetadata"] = meta
    lines[at] = json.dumps(boundary)
    data = ("\n".join(lines) + "\n").encode()
    steps = [e["body"] for e in read(io.BytesIO(data), format="claude-code") if e["type"] == "step"]
    assert [s["reason"] for s in steps if s.get("reason")] == [reason]


def _inline(agent: str, inner: dict[str, Any]) -> dict[str, Any]:
    """A sub-agent's entry as Claude Code 2.1 logs it inside its parent's transcript."""
    return {
        "type": "progress",
        "sessionId": "cc-main",
        "uuid": f"p-{inner['uuid']}",
        "parentToolUseID": "toolu_task",
        "data": {"type": "agent_progress", "agentId": agent, "message": inner, "prompt": "..."},
    }


def test_it_imports_claude_code_sub_agents_logged_inline_as_sessions_of_their_own() -> None:
    def reply(uuid: str, mid: str, block: dict[str, Any]) -> dict[str, Any]:
        message = {"id": mid, "model": "claude-haiku-4-5", "content": [block]}
        return {"type": "assistant", "uuid": uuid, "message": message}

    def said(uuid: str, content: Any) -> dict[str, Any]:
        return {"type": "user", "uuid": uuid, "message": {"role": "user", "content": content}}

    use = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "mix.exs"}}
    result = [{"type": "tool_result", "tool_use_id": "t1", "content": "defp deps"}]
    entries = [
        {"sessionId": "cc-main", **said("u-1", "add credo")},
        {"sessionId": "cc-main", **reply("a-1", "m-1", {"type": "text", "text": "delegating"})},
        _inline("afb9", said("s-1", "Draft the setup for credo")),
        _inline("afb9", reply("s-2", "sm-1", use)),
        _inline("afb9", said("s-3", result)),
        _inline("afb9", said("s-3", result)),  # logged twice
        _inline("afb9", reply("s-4", "sm-2", {"type": "text", "text": "done"})),
        {"type": "progress", "sessionId": "cc-main", "data": {"type": "hook_progress"}},
    ]
    data = "".join(json.dumps(e) + "\n" for e in entries).encode()
    assert detect(data) == "claude-code"
    events = list(read(io.BytesIO(data), format="claude-code"))
    sessions = {e["body"]["session_id"]: e["body"] for e in events if e["type"] == "session"}
    sub = sessions["cc-main:agent-afb9"]
    assert sub["metadata"]["parent_session"] == "cc-main"
    assert sub["metadata"]["parent_tool_use_id"] == "toolu_task"
    assert sub["model"] == "claude-haiku-4-5"
    steps = replay(events)
    assert len(steps["cc-main"]) == 1
    assert [ids(result.before) for _, result in steps["cc-main:agent-afb9"]] == [
        ["s-1"],
        ["s-1", "sm-1", "s-3"],
    ]


def test_it_reads_a_codex_rollout_written_before_the_envelope() -> None:
    meta = {"id": "0195-legacy", "timestamp": "2025-04-20T10:00:00Z", "instructions": "Be terse."}

    def said(role: str, text: str) -> dict[str, Any]:
        kind = "output_text" if role == "assistant" else "input_text"
        return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}

    call = {
        "type": "function_call",
        "name": "shell",
        "arguments": '{"cmd": ["ls"]}',
        "call_id": "c1",
    }
    lines = [
        meta,
        said("user", "list the files"),
        {"record_type": "state"},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
        call,
        {"type": "function_call_output", "call_id": "c1", "output": "README.md"},
        {"record_type": "state"},
        said("assistant", "One file: README.md."),
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    assert detect(data) == "codex"
    events = list(read(io.BytesIO(data), format="codex"))
    [session] = [e["body"] for e in events if e["type"] == "session"]
    assert session["session_id"] == "0195-legacy"
    steps = replay(events)["0195-legacy"]
    assert len(steps) == 2
    first, second = steps
    assert [m.role for m in first[1].before] == ["system", "user"]
    assert first[0]["output"]["messages"][-1]["content"][0]["name"] == "shell"
    called = ["system", "user", "assistant", "assistant", "tool"]  # reasoning, call, output
    assert [m.role for m in second[1].before] == called


def _typescript_rollout(instructions: str = "Always run the tests.") -> dict[str, Any]:
    """A session as the TypeScript Codex CLI (2025) saved it: one JSON document."""
    call = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_1",
        "name": "shell",
        "arguments": '{"command": ["pytest", "-q"]}',
    }
    return {
        "session": {
            "timestamp": "2025-05-02T10:11:12.345Z",
            "id": "6f1c2d3e-0000-4000-8000-0123456789ab",
            "instructions": instructions,
        },
        "items": [
            {
                "id": "msg_1",
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "fix the failing test in utils"}],
            },
            {"id": "rs_1", "type": "reasoning", "summary": []},
            call,
            {"type": "function_call_output", "call_id": "call_1", "output": "1 failed"},
            {
                "id": "msg_2",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Fixed it.", "annotations": []}],
            },
        ],
    }


@pytest.mark.parametrize("form", ["indented", "one line", "past the head"])
def test_it_reads_a_codex_rollout_the_typescript_cli_saved_as_one_document(form: str) -> None:
    instructions = "Always run the tests. " * (HEAD_BYTES // 10 if form == "past the head" else 1)
    doc = _typescript_rollout(instructions)
    data = json.dumps(doc, indent=None if form == "one line" else 2).encode()
    assert detect(data[:HEAD_BYTES], whole=len(data) <= HEAD_BYTES) == "codex"
    events = list(read(io.BytesIO(data), format="codex"))
    steps = replay(events)["6f1c2d3e-0000-4000-8000-0123456789ab"]
    assert len(steps) == 2
    first, second = steps
    assert [m.role for m in first[1].before] == ["system", "user"]
    assert first[1].before[0].text == instructions
    assert first[0]["output"]["messages"][-1]["content"][0]["name"] == "shell"
    called = ["system", "user", "assistant", "assistant", "tool"]  # reasoning, call, output
    assert [m.role for m in second[1].before] == called
    assert second[0]["output"]["messages"][0]["content"][0]["text"] == "Fixed it."


def test_a_document_that_is_not_a_rollout_is_refused_naming_what_it_holds() -> None:
    data = json.dumps({"session": {"id": "x"}, "entries": []}, indent=2).encode()
    with pytest.raises(TranscriptError, match="items"):
        list(read(io.BytesIO(data), format="codex"))
    doc = _typescript_rollout()
    doc["items"][1] = 7
    with pytest.raises(TranscriptError, match=r"^items\[1\]: must be a JSON object, not a number"):
        list(read(io.BytesIO(json.dumps(doc, indent=2).encode()), format="codex"))
    doc = _typescript_rollout()
    doc["items"][0]["content"] = {"text": "not a list of parts"}
    # A content that is neither text nor parts was stored as its JSON, without a word.
    with pytest.raises(
        TranscriptError,
        match=r"^items\[0\]: content: must be a text or a list of parts, not \{'text'",
    ):
        list(read(io.BytesIO(json.dumps(doc).encode()), format="codex"))


def _sdk_events() -> list[dict[str, Any]]:
    """A conversation of the OpenHands software agent SDK (V1) as it stores its events."""
    at = "2026-11-30T10:00:0{}.000000"
    text = lambda t: {"type": "text", "text": t}  # noqa: E731

    def action(n: int, response: str, call: str, command: str, thought: str = "") -> dict:
        return {
            "kind": "ActionEvent", "id": f"a{n}", "timestamp": at.format(n), "source": "agent",
            "thought": [text(thought)] if thought else [], "tool_name": "terminal",
            "tool_call_id": call, "llm_response_id": response,
            "tool_call": {"id": call, "name": "terminal",
                          "arguments": json.dumps({"command": command})},
            "action": {"kind": "TerminalAction", "command": command},
        }  # fmt: skip

    def seen(n: int, call: str, output: str) -> dict:
        return {
            "kind": "ObservationEvent", "id": f"o{n}", "timestamp": at.format(n),
            "source": "environment", "tool_name": "terminal", "tool_call_id": call,
            "action_id": f"a{n - 1}",
            "observation": {"kind": "TerminalObservation", "content": [text(output)]},
        }  # fmt: skip

    return [
        {"kind": "SystemPromptEvent", "id": "s0", "timestamp": at.format(0), "source": "agent",
         "system_prompt": text("You are OpenHands."),
         "tools": [{"name": "terminal", "description": "Run a command"}]},
        {"kind": "MessageEvent", "id": "u1", "timestamp": at.format(1), "source": "user",
         "llm_message": {"role": "user", "content": [text("Why does SO20260101007 time out?")]}},
        action(2, "resp-1", "c1", "tail app.log", thought="Check the log."),
        action(3, "resp-1", "c2", "ls"),
        seen(4, "c1", "upstream timed out after 3 s"),
        seen(5, "c2", "app.log"),
        {"kind": "Condensation", "id": "k6", "timestamp": at.format(6), "source": "environment",
         "forgotten_event_ids": ["a2", "a3", "o4", "o5"], "summary": "Log: timeout after 3 s.",
         "llm_response_id": "resp-c"},
        {"kind": "MessageEvent", "id": "m7", "timestamp": at.format(7), "source": "agent",
         "llm_response_id": "resp-2",
         "llm_message": {"role": "assistant", "content": [text("inventory-svc times out.")]}},
        {"kind": "ConversationStateUpdateEvent", "id": "x8", "timestamp": at.format(8),
         "source": "environment", "key": "execution_status", "value": "finished"},
    ]  # fmt: skip


def test_it_reads_the_openhands_sdks_typed_events() -> None:
    data = json.dumps(_sdk_events()).encode()
    assert detect(data, whole=True) == "openhands"
    events = list(read(io.BytesIO(data), format="openhands", fallback="oh-v1"))
    steps = replay(events)["oh-v1"]
    assert len(steps) == 2
    (first, call), (second, after) = steps
    assert ids(call.before) == ["es0", "eu1"]
    assert first["tools"] == [{"name": "terminal", "description": "Run a command"}]
    replies = first["output"]["messages"]
    assert [m["id"] for m in replies] == ["ea2", "ea3"]
    assert replies[0]["content"][0] == {"type": "text", "text": "Check the log."}
    assert replies[0]["content"][-1]["arguments"] == {"command": "tail app.log"}
    [op] = second["actions"]
    assert (op["action"], op["targets"]) == ("summarize", ["ea2", "ea3", "eo4", "eo5"])
    assert ids(after.after) == ["es0", "eu1", "cond-ea2"]
    assert second["output"]["messages"][0]["content"][0]["text"] == "inventory-svc times out."
    [end] = [e["body"] for e in events if e["type"] == "session_end"]
    assert end["status"] == "succeeded"


def test_it_sends_the_openhands_sdks_updated_system_prompt_and_tools() -> None:
    events = _sdk_events()[:4]
    at, text = events[0]["timestamp"], lambda t: {"type": "text", "text": t}
    tools = [*events[0]["tools"], {"name": "browser", "description": "Open a page"}]
    update = {"kind": "SystemPromptUpdateEvent", "id": "p9", "timestamp": at, "source": "agent",
              "system_prompt": text("You are OpenHands, with a browser."), "tools": tools,
              "reason": "tools_changed"}  # fmt: skip
    again = {**events[1], "id": "u10", "llm_message": {"role": "user", "content": [text("Go on.")]}}
    reply = {**events[2], "id": "a11", "llm_response_id": "resp-3"}
    data = json.dumps([*events, update, again, reply]).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", fallback="oh-u")))["oh-u"]
    (_, _), (body, call) = steps
    # the call after a restore is sent the new tools and the new prompt in place of the old
    assert body["tools"] == tools
    assert [o["action"] for o in body["actions"]] == ["rewrite"]
    assert ids(call.after)[:2] == ["ep9", "eu1"]
    assert call.after[0].text == "You are OpenHands, with a browser."


def test_it_reads_an_openhands_sdk_event_folder(tmp_path: Path) -> None:
    from contextview.core.importers.folders import event_folders, files_under, read_folder

    folder = tmp_path / "conv-7a1" / "events"
    folder.mkdir(parents=True)
    for n, event in enumerate(_sdk_events()):
        (folder / f"event-{n:05d}-{event['id']}.json").write_text(json.dumps(event))
    [found] = event_folders(files_under(tmp_path))
    events = list(read_folder(found, lambda p: open(p, "rb")))  # noqa: SIM115
    assert found.session == "conv-7a1"
    assert len(replay(events)["conv-7a1"]) == 2


def _cc_lines(entries: list[dict[str, Any]], session: str = "cc-r") -> bytes:
    """Claude Code entries chained as it logs them: each names the one before it
    unless it gives its own ``parentUuid``."""
    out, parent = [], None
    for entry in entries:
        line = {"sessionId": session, "isSidechain": False, "parentUuid": parent, **entry}
        out.append(json.dumps(line) + "\n")
        parent = line.get("uuid", parent)
    return "".join(out).encode()


def _said(uuid: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "message": {"role": "user", "content": text}, **extra}


def _reply(uuid: str, mid: str, text: str, **extra: Any) -> dict[str, Any]:
    message = {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5",
               "content": [{"type": "text", "text": text}]}  # fmt: skip
    return {"type": "assistant", "uuid": uuid, "message": message, **extra}


def test_it_drops_the_branch_a_claude_code_rewind_abandoned() -> None:
    data = _cc_lines(
        [
            _said("u-1", "Rename the cache module."),
            _reply("a-1", "msg_1", "Which name?"),
            _said("u-2", "Call it store."),
            _reply("a-2", "msg_2", "Renamed to store."),
            {"type": "system", "subtype": "turn_duration", "uuid": "s-1", "durationMs": 900},
            # the user went back to the question and answered it otherwise
            _said("u-3", "Call it kv.", parentUuid="a-1"),
            _reply("a-3", "msg_3", "Renamed to kv."),
        ]
    )
    events = list(read(io.BytesIO(data), format="claude-code"))
    steps = replay(events)["cc-r"]
    assert len(steps) == 3
    body, third = steps[2]
    assert ids(third.after) == ["u-1", "msg_1", "u-3"]
    [op] = body["actions"]
    assert (op["action"], op["targets"]) == ("drop", ["u-2", "msg_2"])
    assert "rewind" in body["reason"]


def test_it_keeps_a_claude_code_conversation_whose_prompts_follow_hooks_and_tools() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "a.py"}}
    result = [{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1"}]
    data = _cc_lines(
        [
            _said("u-1", "Read a.py"),
            {**_reply("a-1", "msg_1", ""), "message": {"id": "msg_1", "role": "assistant",
             "content": [use]}},
            {"type": "progress", "uuid": "p-1", "data": {"type": "hook_progress"}},
            {**_said("u-2", ""), "parentUuid": "a-1",
             "message": {"role": "user", "content": result}},
            _reply("a-2", "msg_2", "x is 1."),
            _said("u-3", "Thanks."),
            _reply("a-3", "msg_3", "You're welcome."),
        ]
    )  # fmt: skip
    steps = replay(list(read(io.BytesIO(data), format="claude-code")))["cc-r"]
    assert [body.get("actions") for body, _ in steps] == [None, None, None]
    assert ids(steps[2][1].before) == ["u-1", "msg_1", "u-2", "msg_2", "u-3"]


def test_it_detects_a_claude_code_transcript_that_opens_with_a_metadata_entry() -> None:
    lines = [
        {"type": "permission-mode", "permissionMode": "default", "sessionId": "cc-m"},
        {"type": "custom-title", "customTitle": "Fix the cache", "sessionId": "cc-m"},
        _said("u-1", "hi", sessionId="cc-m"),
        _reply("a-1", "msg_1", "hello", sessionId="cc-m"),
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    assert detect(data) == "claude-code"
    assert len(replay(list(read(io.BytesIO(data), format="claude-code")))["cc-m"]) == 1


def test_it_reads_the_stream_json_of_claude_codes_print_mode() -> None:
    # `claude -p --output-format stream-json`: session_id, no parentUuid nor timestamp,
    # a sub-agent's messages marked by the Task call that started them.
    def line(kind: str, uuid: str, message: dict[str, Any], task: str | None = None) -> str:
        return json.dumps({"type": kind, "message": message, "parent_tool_use_id": task,
                           "session_id": "cc-print", "uuid": uuid}) + "\n"  # fmt: skip

    def reply(mid: str, *blocks: dict[str, Any]) -> dict[str, Any]:
        usage = {"input_tokens": 5, "output_tokens": 9, "cache_read_input_tokens": 700}
        return {"id": mid, "role": "assistant", "model": "claude-opus-4-1",
                "content": list(blocks), "usage": usage}  # fmt: skip

    def result(call: str, text: str) -> dict[str, Any]:
        block = {"type": "tool_result", "tool_use_id": call, "content": text}
        return {"role": "user", "content": [block]}

    task = {"type": "tool_use", "id": "toolu_task", "name": "Task", "input": {"prompt": "Count"}}
    grep = {"type": "tool_use", "id": "toolu_g", "name": "Grep", "input": {"pattern": "TODO"}}
    init = {"type": "system", "subtype": "init", "session_id": "cc-print", "model": "x"}
    data = (
        json.dumps(init) + "\n"
        + line("assistant", "a1", reply("msg_1", task))
        + line("user", "s1", {"role": "user", "content": "Count"}, "toolu_task")
        + line("assistant", "s2", reply("msg_s1", grep), "toolu_task")
        + line("user", "s3", result("toolu_g", "3 matches"), "toolu_task")
        + line("assistant", "s4", reply("msg_s2", {"type": "text", "text": "3"}), "toolu_task")
        + line("user", "u2", result("toolu_task", "3"))
        + line("assistant", "a2", reply("msg_2", {"type": "text", "text": "Three TODOs."}))
        + json.dumps({"type": "result", "subtype": "success", "session_id": "cc-print"}) + "\n"
    ).encode()  # fmt: skip
    assert detect(data) == "claude-code"
    events = list(read(io.BytesIO(data), format="claude-code"))
    assert [e["body"] for e in events if e["type"] == "session_end"] == [
        {"session_id": "cc-print", "status": "succeeded"}
    ]
    steps = replay(events)
    assert [ids(r.before) for _, r in steps["cc-print"]] == [[], ["msg_1", "u2"]]
    assert steps["cc-print"][1][0]["usage"]["cache_read_tokens"] == 700
    assert [ids(r.before) for _, r in steps["cc-print:agent-toolu_task"]] == [
        ["s1"],
        ["s1", "msg_s1", "s3"],
    ]


def _rollout(items: list[tuple[str, dict[str, Any]]], **meta_fields: Any) -> bytes:
    meta = {"id": "019e-rollout", "timestamp": "2025-10-02T09:00:00Z", "cwd": "/srv/app",
            "cli_version": "0.46.0", "base_instructions": {"text": "You are Codex."},
            **meta_fields}  # fmt: skip
    lines = [{"timestamp": "2025-10-02T09:00:00Z", "type": "session_meta", "payload": meta}]
    lines += [
        {"timestamp": f"2025-10-02T09:00:{n + 1:02d}Z", "type": kind, "payload": payload}
        for n, (kind, payload) in enumerate(items)
    ]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _item(role: str, text: str) -> tuple[str, dict[str, Any]]:
    kind = "output_text" if role == "assistant" else "input_text"
    return "response_item", {"type": "message", "role": role,
                             "content": [{"type": kind, "text": text}]}  # fmt: skip


def _tokens(**info: Any) -> tuple[str, dict[str, Any]]:
    return "event_msg", {"type": "token_count", "info": info, "rate_limits": None}


def test_it_leaves_codex_ghost_snapshots_out_of_the_context() -> None:
    commit = {"id": "3f9c2e1", "parent": "a71d004", "preexisting_untracked_files": []}
    ghost = {"type": "ghost_snapshot", "ghost_commit": commit}
    data = _rollout(
        [
            ("turn_context", {"model": "gpt-5-codex", "cwd": "/srv/app"}),
            _item("user", "Bump the version to 2.4.1"),
            ("response_item", ghost),
            _item("assistant", "Done: 2.4.1."),
            _tokens(last_token_usage={"input_tokens": 900, "cached_input_tokens": 0,
                                      "output_tokens": 12}, model_context_window=272000),
            _item("user", "Thanks"),
            ("response_item", {**ghost, "ghost_commit": {**ghost["ghost_commit"], "id": "b2"}}),
            _item("assistant", "You're welcome."),
            _tokens(last_token_usage={"input_tokens": 950, "cached_input_tokens": 900,
                                      "output_tokens": 5}, model_context_window=272000),
        ]
    )  # fmt: skip
    steps = replay(list(read(io.BytesIO(data), format="codex")))["019e-rollout"]
    assert len(steps) == 2
    assert [m.role for m in steps[1][1].before] == ["system", "user", "assistant", "user"]
    texts = " ".join(m.text for _, step in steps for m in step.before)
    assert "ghost" not in texts and "3f9c2e1" not in texts


def _compacted_question(message: str, last: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """The call after a compaction of a question and its answer, whose replacement
    history keeps the question and ends with `last`: its step body and its result."""
    question = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Find why the job stalls"}],
    }
    data = _rollout(
        [
            ("turn_context", {"model": "gpt-5-codex"}),
            ("response_item", question),
            _item("assistant", "The queue worker dies on OOM."),
            _tokens(last_token_usage={"input_tokens": 5000, "cached_input_tokens": 0,
                                      "output_tokens": 40}),
            ("compacted", {"message": message, "replacement_history": [question, last]}),
            _item("user", "Fix it"),
            _item("assistant", "Raised the memory limit."),
            _tokens(last_token_usage={"input_tokens": 800, "cached_input_tokens": 0,
                                      "output_tokens": 20}),
        ]
    )  # fmt: skip
    body, step = replay(list(read(io.BytesIO(data), format="codex")))["019e-rollout"][1]
    return body, step


def test_it_takes_a_codex_compaction_summary_item_as_the_summary() -> None:
    item = {"type": "compaction_summary", "encrypted_content": "gAAAA-opaque"}
    body, step = _compacted_question("", item)
    assert [op["action"] for op in body["actions"]][:1] == ["summarize"]
    summary = body["actions"][0]["result"]
    assert summary["content"][0]["type"] == "compaction_summary"
    assert not any(op["action"] == "insert" for op in body["actions"])
    assert ids(step.after) == ["instructions", "l3", summary["id"], "l7"]


def test_it_takes_the_summary_codex_put_in_its_replacement_history_as_the_summary() -> None:
    said = "The queue worker dies on OOM; the limit is 512 MiB."
    text = f"Another language model started this task and left you this summary:\n{said}"
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    body, step = _compacted_question(said, item)
    summary = body["actions"][0]["result"]
    assert body["actions"][0]["action"] == "summarize"
    assert summary["content"][0]["text"] == text
    # the context is the history as Codex sent it: the summary once, not twice
    assert ids(step.after) == ["instructions", "l3", summary["id"], "l7"]
    assert not any(m.text == said for m in step.after)


def test_it_reads_codex_usage_given_only_as_running_totals() -> None:
    def totals(prompt: int, cached: int, output: int) -> dict[str, int]:
        return {"input_tokens": prompt, "cached_input_tokens": cached, "output_tokens": output,
                "reasoning_output_tokens": 0, "total_tokens": prompt + output}  # fmt: skip

    data = _rollout(
        [
            ("turn_context", {"model": "gpt-5"}),
            _item("user", "List the services"),
            ("response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                               "arguments": "{\"command\": [\"ls\"]}"}),
            _tokens(total_token_usage=totals(4000, 0, 30), model_context_window=272000),
            ("response_item", {"type": "function_call_output", "call_id": "c1",
                               "output": "api\nworker"}),
            _item("assistant", "Two: api and worker."),
            _tokens(total_token_usage=totals(8100, 4000, 45), model_context_window=272000),
        ]
    )  # fmt: skip
    steps = [e["body"] for e in read(io.BytesIO(data), format="codex") if e["type"] == "step"]
    assert [s["usage"] for s in steps] == [
        {"input_tokens": 4000, "cache_read_tokens": 0, "output_tokens": 30},
        {"input_tokens": 100, "cache_read_tokens": 4000, "output_tokens": 15},
    ]
    assert [s["context_window"] for s in steps] == [272000, 272000]


def test_it_imports_a_codex_sub_agents_rollout_as_a_session_naming_its_parent() -> None:
    spawn = {"parent_thread_id": "019e-parent", "depth": 1, "agent_role": "explorer"}
    spawned = {"subagent": {"thread_spawn": spawn}}
    items = [
        ("turn_context", {"model": "gpt-5.3-codex"}),
        _item("user", "Find where the retry limit is set"),
        _item("assistant", "src/net.rs sets it to 5."),
        _tokens(last_token_usage={"input_tokens": 700, "cached_input_tokens": 0,
                                  "output_tokens": 9}),
    ]  # fmt: skip
    for meta in ({"source": spawned}, {"source": "exec", "parent_thread_id": "019e-parent"}):
        [session] = [e for e in read(io.BytesIO(_rollout(items, **meta)), format="codex")
                     if e["type"] == "session"]  # fmt: skip
        assert session["body"]["session_id"] == "019e-rollout"
        assert session["body"]["metadata"]["parent_session"] == "019e-parent"
    [own] = [e for e in read(io.BytesIO(_rollout(items, source="cli")), format="codex")
             if e["type"] == "session"]  # fmt: skip
    assert "parent_session" not in own["body"]["metadata"]


def test_it_starts_a_forked_codex_sub_agent_from_the_history_it_copied() -> None:
    """A sub-agent spawned with its parent's context: its rollout copies the parent's
    history (its session_meta, calls, usage, compaction) before its own first turn."""
    events = events_of("codex_forked_subagent.jsonl")
    child, parent = "019cd814-fea0-7c31-8d6b-2e0a4f79c15e", "019cd80e-22b8-71a2-8c4e-5b9d0f3a17c6"
    [session] = [e["body"] for e in events if e["type"] == "session"]
    assert session["session_id"] == child
    assert session["metadata"]["parent_session"] == parent
    steps = replay(events)[child]
    # Its own two calls, with their own usage: none of the parent's calls again.
    assert [body["usage"] for body, _ in steps] == [
        {"input_tokens": 2500, "cache_read_tokens": 8800, "output_tokens": 71},
        {"input_tokens": 300, "cache_read_tokens": 11200, "output_tokens": 38},
    ]
    assert [body["model"] for body, _ in steps] == ["gpt-5.3-codex-mini"] * 2
    body, first = steps[0]
    # The parent's compaction happened before the fork: no operation of the sub-agent.
    assert "actions" not in body
    assert [m.role for m in first.before] == [
        "system", "user", "user", "developer", "user", "user", "assistant", "tool", "user",
    ]  # fmt: skip
    texts = [m.text for m in first.before]
    assert texts[1] == "Why does the nightly export job INV-4471 time out after 30 s?"
    assert first.before[2].partition == "memory"  # the parent's compaction summary
    assert "spawn_agent" in texts[6] and texts[7].startswith("You were forked")
    assert texts[8].startswith("List every place the nightly export")
    # what the parent's compaction took out is not in the sub-agent's context
    assert not any("TIMEOUT_S" in text for text in texts)
    assert [part["type"] for m in body["output"]["messages"] for part in m["content"]] == [
        "reasoning", "function_call",
    ]  # fmt: skip


def test_it_starts_a_forked_codex_session_from_the_history_its_fork_copied() -> None:
    """`codex fork`: a session_meta naming the session it was forked from, then that
    session's lines (some rollouts give usage only as running totals)."""

    def totals(prompt: int, cached: int, output: int) -> dict[str, int]:
        return {"input_tokens": prompt, "cached_input_tokens": cached, "output_tokens": output}

    # turn ids are UUIDv7: the copied turn began an hour before the fork, its own after
    copied_turn = "0199a3ef-6800-7a10-9b2c-3d4e5f607182"
    own_turn = "0199a426-6a08-7c3d-8e4f-5a6b7c8d9e0f"
    data = _rollout(
        [
            ("turn_context", {"turn_id": copied_turn, "model": "gpt-5-codex"}),
            _item("user", "Why does job SO20260101007 stall?"),
            ("response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                               "arguments": "{\"command\": [\"ps\"]}"}),
            _tokens(total_token_usage=totals(4000, 0, 30)),
            ("response_item", {"type": "function_call_output", "call_id": "c1",
                               "output": "worker <defunct>"}),
            _item("assistant", "The worker died."),
            _tokens(total_token_usage=totals(8100, 4000, 45)),
            ("turn_context", {"turn_id": own_turn, "model": "gpt-5-codex"}),
            _item("user", "Restart it"),
            _item("assistant", "Restarted."),
            _tokens(total_token_usage=totals(12400, 8000, 52)),
        ],
        forked_from_id="0199a3ef-5000-7000-8000-000000000001",
    )  # fmt: skip
    events = list(read(io.BytesIO(data), format="codex"))
    [session] = [e["body"] for e in events if e["type"] == "session"]
    assert session["metadata"]["forked_from"] == "0199a3ef-5000-7000-8000-000000000001"
    [(body, step)] = replay(events)["019e-rollout"]
    assert body["usage"] == {"input_tokens": 300, "cache_read_tokens": 4000, "output_tokens": 7}
    roles = ["system", "user", "assistant", "tool", "assistant", "user"]
    assert [m.role for m in step.before] == roles


def _said_by(role: str, text: str) -> tuple[str, dict[str, Any]]:
    return "response_item", {"type": "message", "role": role,
                             "content": [{"type": "input_text", "text": text}]}  # fmt: skip


def test_it_rebuilds_a_codex_compaction_without_its_history_keeping_the_prompts() -> None:
    old_prompt = "Paste of the nightly log:\n" + "x" * 85_000  # past what Codex puts back
    data = _rollout(
        [
            ("turn_context", {"model": "gpt-5-codex"}),
            _said_by("developer", "<permissions instructions>read-only</permissions instructions>"),
            _said_by("user", "# AGENTS.md instructions for /srv/app\n\nUse uv."),
            _said_by("user", "<environment_context>cwd: /srv/app</environment_context>"),
            _said_by("user", old_prompt),
            _item("assistant", "The log is mostly retries."),
            _tokens(last_token_usage={"input_tokens": 21000, "cached_input_tokens": 0,
                                      "output_tokens": 10}),
            _said_by("user", "Why does job SO20260101007 stall?"),
            ("response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                               "arguments": "{\"command\": [\"ps\"]}"}),
            _tokens(last_token_usage={"input_tokens": 21100, "cached_input_tokens": 0,
                                      "output_tokens": 8}),
            ("response_item", {"type": "function_call_output", "call_id": "c1",
                               "output": "worker <defunct>"}),
            _said_by("user", "<user_shell_command>ls /var/run</user_shell_command>"),
            _item("assistant", "The worker died on OOM."),
            _tokens(last_token_usage={"input_tokens": 21300, "cached_input_tokens": 0,
                                      "output_tokens": 9}),
            ("compacted", {"message": "The worker of SO20260101007 dies on OOM."}),
            _item("user", "Fix it"),
            _item("assistant", "Raised the memory limit."),
            _tokens(last_token_usage={"input_tokens": 900, "cached_input_tokens": 0,
                                      "output_tokens": 7}),
        ]
    )  # fmt: skip
    body, step = replay(list(read(io.BytesIO(data), format="codex")))["019e-rollout"][3]
    summarize = body["actions"][0]
    assert summarize["action"] == "summarize"
    assert summarize["result"]["content"] == "The worker of SO20260101007 dies on OOM."
    # the initial context and the prompt Codex puts back stay where they were
    question, kept = "l9", ["instructions", "l3", "l4", "l5"]
    assert not set(summarize["targets"]) & {question, *kept}
    # the old prompt too long to be put back, replies, tools and the shell note leave
    assert {"l6", "l7", "l10", "l12", "l13", "l14"} <= set(summarize["targets"])
    assert ids(step.after) == [*kept, question, summarize["result"]["id"], "l17"]
    assert ids(step.folds[0].originals)[:2] == ["l6", "l7"]


def _partial_compaction(meta: dict[str, Any], **next_prompt: Any) -> list[Any]:
    summary = {**_said("s-1", "Summary: the cache module is renamed to store."),
               "isCompactSummary": True}  # fmt: skip
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "b-1",
                "content": "Conversation compacted",
                "compactMetadata": {"trigger": "manual", "preTokens": 48000, **meta}}  # fmt: skip
    data = _cc_lines(
        [
            _said("u-1", "Rename the cache module to store."),
            _reply("a-1", "msg_1", "Renamed."),
            _said("u-2", "Bump the version to 2.4.1."),
            _reply("a-2", "msg_2", "Bumped."),
            _said("u-3", "Run the tests of SO20260101007."),
            _reply("a-3", "msg_3", "12 passed."),
            {**boundary, "parentUuid": None, "logicalParentUuid": "a-3"},
            _said(
                "m-1", "Caveat: the messages below were generated by local commands.", isMeta=True
            ),
            {**summary, "parentUuid": "b-1"},
            _said("u-4", "Now push it.", **next_prompt),
            _reply("a-4", "msg_4", "Pushed."),
        ]
    )
    return replay(list(read(io.BytesIO(data), format="claude-code")))["cc-r"]


@pytest.mark.parametrize(
    "meta",
    [
        {"preservedSegment": {"headUuid": "u-3", "anchorUuid": "s-1", "tailUuid": "a-3"}},
        {"preservedMessages": {"anchorUuid": "s-1", "uuids": ["u-3", "a-3"]}},
    ],
)
def test_it_keeps_what_a_claude_code_partial_compaction_preserved(meta: dict[str, Any]) -> None:
    steps = _partial_compaction(meta, parentUuid="a-3")  # the prompt follows the kept tail
    body, step = steps[3]
    [op] = body["actions"]
    assert (op["action"], op["targets"]) == ("summarize", ["u-1", "msg_1", "u-2", "msg_2"])
    assert ids(step.after) == ["s-1", "u-3", "msg_3", "m-1", "u-4"]
    assert "SO20260101007" in step.after[1].text


def test_it_keeps_the_earlier_messages_a_claude_code_compaction_from_a_message_kept() -> None:
    meta = {"preservedSegment": {"headUuid": "u-1", "anchorUuid": "b-1", "tailUuid": "a-1"}}
    body, step = _partial_compaction(meta)[3]
    [op] = body["actions"]
    assert op["targets"] == ["u-2", "msg_2", "u-3", "msg_3"]
    assert ids(step.after) == ["u-1", "msg_1", "s-1", "m-1", "u-4"]


def _used(uuid: str, mid: str, tool: str, name: str = "Read") -> dict[str, Any]:
    use = {"type": "tool_use", "id": tool, "name": name, "input": {"file_path": "lib/a.ex"}}
    message = {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5", "content": [use]}
    return {"type": "assistant", "uuid": uuid, "message": message}


def _result(uuid: str, tool: str, text: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool, "content": text}
    return {"type": "user", "uuid": uuid, "message": {"role": "user", "content": [block]}}


def test_it_reads_a_claude_code_entry_logged_twice_once() -> None:
    lines = _cc_lines(
        [
            _said("u-1", "Which port does the API listen on?"),
            _reply("a-1", "msg_1", "Let me look."),
            _used("a-2", "msg_1", "toolu_1", "Grep"),
            _result("r-1", "toolu_1", "config/runtime.exs: PORT=4000"),
            _reply("a-3", "msg_2", "Port 4000."),
            _said("u-2", "And in production?"),
            _reply("a-4", "msg_3", "Also 4000."),
        ]
    ).splitlines(keepends=True)
    data = b"".join(line + line for line in lines)  # each line written twice
    steps = replay(list(read(io.BytesIO(data), format="claude-code")))["cc-r"]
    assert len(steps) == 3
    assert not any(body.get("actions") for body, _ in steps)
    first = steps[0][0]["output"]["messages"][0]["content"]
    assert [block["type"] for block in first] == ["text", "tool_use"]
    assert ids(steps[2][1].before) == ["u-1", "msg_1", "r-1", "msg_2", "u-2"]


def test_it_clears_the_tool_results_a_claude_code_microcompaction_lists() -> None:
    memory = {"type": "nested_memory", "path": "/srv/CLAUDE.md",
              "content": {"path": "/srv/CLAUDE.md", "content": "Run mix format."}}  # fmt: skip
    boundary = {
        "type": "system",
        "subtype": "microcompact_boundary",
        "uuid": "mc-1",
        "content": "Context microcompacted",
        "microcompactMetadata": {
            "trigger": "auto",
            "preTokens": 61000,
            "tokensSaved": 24000,
            "compactedToolIds": ["toolu_1"],
            "clearedAttachmentUUIDs": ["at-1"],
        },
    }
    data = _cc_lines(
        [
            _said("u-1", "Why is lib/a.ex slow?"),
            {"type": "attachment", "uuid": "at-1", "attachment": memory},
            _used("a-1", "msg_1", "toolu_1"),
            _result("r-1", "toolu_1", "defmodule A do ... 4000 lines ... end"),
            _used("a-2", "msg_2", "toolu_2", "Grep"),
            _result("r-2", "toolu_2", "lib/a.ex:12: Enum.sort"),
            boundary,
            _reply("a-3", "msg_3", "The sort on line 12."),
        ]
    )
    body, step = replay(list(read(io.BytesIO(data), format="claude-code")))["cc-r"][2]
    assert [(op["action"], op.get("target") or op["targets"]) for op in body["actions"]] == [
        ("truncate", "r-1"),
        ("drop", ["at-1"]),
    ]
    assert "microcompaction" in body["reason"] and "24000" in body["reason"]
    assert ids(step.after) == ["u-1", "msg_1", "r-1", "msg_2", "r-2"]
    cleared, kept = step.after[2], step.after[4]
    assert cleared.content == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "[Old tool result content cleared]",
        }
    ]
    assert "Enum.sort" in kept.text
    # what was cleared can be opened again
    originals = {m.id: m for fold in step.folds for m in fold.originals}
    assert "4000 lines" in originals["r-1"].text and "mix format" in originals["at-1"].text


def test_it_sends_claude_code_attachments_and_local_commands_as_the_model_saw_them() -> None:
    def attached(uuid: str, **attachment: Any) -> dict[str, Any]:
        return {"type": "attachment", "uuid": uuid, "attachment": attachment}

    api_error = _reply("e-1", "err-1", "API Error: 529 overloaded", isApiErrorMessage=True)
    api_error["message"]["model"] = "<synthetic>"
    data = _cc_lines(
        [
            _said("u-1", "Format the project."),
            attached(
                "at-1",
                type="nested_memory",
                content={"path": "/srv/CLAUDE.md", "content": "Run mix format."},
            ),  # fmt: skip
            attached("at-2", type="hook_success", hookEvent="PreToolUse", content="ok"),
            attached("at-3", type="already_read_file", filename="mix.exs"),
            {
                "type": "system",
                "subtype": "local_command",
                "uuid": "lc-1",
                "content": "<local-command-stdout>Set model to opus</local-command-stdout>",
            },  # fmt: skip
            {"type": "system", "subtype": "turn_duration", "uuid": "td-1", "durationMs": 900},
            attached("q-1", type="queued_command", prompt="and run the tests"),
            _reply("a-1", "msg_1", "Formatting."),
            api_error,
            _said("u-2", "Try again."),
            _reply("a-2", "msg_2", "Formatted."),
        ]
    )
    steps = replay(list(read(io.BytesIO(data), format="claude-code")))["cc-r"]
    first = steps[0][1]
    assert ids(first.before) == ["u-1", "at-1", "lc-1", "q-1"]
    assert "Run mix format." in first.before[1].text
    assert "Set model to opus" in first.before[2].text
    assert first.before[3].content == "and run the tests"
    # the API error Claude Code logged was never sent to the model
    assert ids(steps[1][1].before) == ["u-1", "at-1", "lc-1", "q-1", "msg_1", "u-2"]


def test_it_reads_an_openhands_evaluations_rows_as_a_session_each() -> None:
    history = json.loads((FIXTURES / "openhands.json").read_text())
    usage = history[3]["tool_call_metadata"]["model_response"]["usage"]
    usage.update(prompt_tokens=5000, cache_creation_input_tokens=4200)
    rows = [
        {"instance_id": "django__django-11099", "instruction": "Fix it", "history": history,
         "metrics": {"accumulated_cost": 0.4}, "test_result": {"git_patch": "diff"}},
        {"instance_id": "astropy__astropy-12907", "history": history[:6], "metrics": {}},
    ]  # fmt: skip
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    assert detect(data[:HEAD_BYTES], whole=True) == "openhands"
    assert detect(json.dumps(rows[0], indent=2).encode(), whole=True) == "openhands"
    events = list(read(io.BytesIO(data), format="openhands"))
    sessions = {e["body"]["session_id"]: e["body"] for e in events if e["type"] == "session"}
    assert sessions["django__django-11099"]["metadata"]["instance_id"] == "django__django-11099"
    steps = replay(events)
    assert len(steps["django__django-11099"]) == 3 and len(steps["astropy__astropy-12907"]) == 2
    # the cache writes LiteLLM reports beside the prompt's tokens are not input
    assert steps["django__django-11099"][0][0]["usage"] == {
        "input_tokens": 800,
        "cache_read_tokens": 0,
        "cache_write_tokens": 4200,
        "output_tokens": 60,
    }
    # one run written indented, as a .json file
    one = list(read(io.BytesIO(json.dumps(rows[1], indent=2).encode()), format="openhands"))
    assert len(replay(one)["astropy__astropy-12907"]) == 2


def test_it_reads_an_opendevin_evaluations_history_of_pairs() -> None:
    # OpenDevin's evaluations wrote a run's history as [action, observation] pairs.
    events = json.loads((FIXTURES / "openhands.json").read_text())[:7]
    nothing = {"source": "agent", "observation": "null", "content": "", "extras": {},
               "message": "No observation"}  # fmt: skip
    pairs = [[events[0], nothing], events[1:3], events[3:5], events[5:7]]
    row = {"instance_id": "sympy__sympy-20590", "history": pairs, "metrics": {}}
    data = (json.dumps(row) + "\n").encode()
    assert detect(data, whole=True) == "openhands"
    steps = replay(list(read(io.BytesIO(data), format="openhands")))["sympy__sympy-20590"]
    flat = json.dumps(events).encode()
    [plain] = replay(list(read(io.BytesIO(flat), format="openhands", fallback="f"))).values()
    assert len(steps) == 2
    assert [ids(r.before) for _, r in steps] == [ids(r.before) for _, r in plain]


def test_it_reads_the_model_and_usage_mini_swe_agent_keeps_with_each_reply() -> None:
    response = {
        "id": "chatcmpl-9",
        "model": "claude-sonnet-4-5-20250929",
        "usage": {"prompt_tokens": 9000, "completion_tokens": 120, "total_tokens": 9120,
                  "prompt_tokens_details": {"cached_tokens": 6000},
                  "cache_creation_input_tokens": 2500},
    }  # fmt: skip
    doc = {
        "info": {"exit_status": "Submitted"},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Fix the failing test"},
            {"role": "assistant", "content": "THOUGHT: run it\n```bash\npytest\n```",
             "extra": {"response": response, "cost": 0.01, "timestamp": 1767225600.5}},
        ],
        "trajectory_format": "mini-swe-agent-1.1",
    }  # fmt: skip
    events = list(read(io.BytesIO(json.dumps(doc).encode()), format="swe-agent", fallback="r"))
    [(body, _)] = replay(events)["r"]
    assert body["model"] == "claude-sonnet-4-5-20250929"
    assert body["usage"] == {
        "input_tokens": 500,
        "cache_read_tokens": 6000,
        "cache_write_tokens": 2500,
        "output_tokens": 120,
    }
    assert "extra" not in json.dumps(body["output"])  # the model never saw it


def test_it_reads_each_swe_agent_call_from_the_query_it_was_sent() -> None:
    def step(query: list[dict[str, Any]], response: str) -> dict[str, Any]:
        return {"action": "ls", "observation": "a.py", "response": response, "thought": "",
                "state": {}, "execution_time": 0.1, "query": query, "extra_info": {}}  # fmt: skip

    system = {"role": "system", "content": "You are an autonomous programmer."}
    task = {"role": "user", "content": "Fix issue #12"}
    first = {"role": "assistant", "content": "ls", "message_type": "action"}
    seen = {"role": "user", "content": "a.py", "message_type": "observation"}
    doc = {
        "trajectory": [step([system, task], "ls"), step([system, task, first, seen], "cat a.py")],
        "history": [system, task, first, seen],
        "info": {"exit_status": "submitted"},
    }
    events = list(read(io.BytesIO(json.dumps(doc).encode()), format="swe-agent", fallback="q"))
    steps = replay(events)["q"]
    assert [ids(r.before) for _, r in steps] == [["m0", "m1"], ["m0", "m1", "m2", "m3"]]
    assert steps[1][0]["output"]["messages"][0]["content"] == "cat a.py"


def test_it_names_a_swe_agent_query_that_is_no_list_of_messages() -> None:
    # Passed over, the call's context would silently be read from the history instead.
    system = {"role": "system", "content": "You are an autonomous programmer."}
    good = {"response": "ls", "observation": "a.py", "query": [system]}
    doc = {"trajectory": [good, {**good, "query": "notalist"}], "history": [system]}
    with pytest.raises(TranscriptError) as caught:
        list(read(io.BytesIO(json.dumps(doc).encode()), format="swe-agent", fallback="q"))
    assert str(caught.value) == (
        'trajectory[1].query: must be a list of messages, not a string ("notalist")'
    )


@pytest.mark.parametrize("kept", ["query", "messages"])
def test_it_shows_the_tool_calls_of_each_swe_agent_call(kept: str) -> None:
    # SWE-agent 1.x with function calling: a step's response is the reply's text
    # alone; its tool calls are on the assistant message the history keeps of it.
    def called(text: str, call: str, command: str) -> dict[str, Any]:
        function = {"name": "bash", "arguments": json.dumps({"command": command})}
        return {"role": "assistant", "content": text, "message_type": "action",
                "tool_calls": [{"id": call, "type": "function", "function": function}]}  # fmt: skip

    def result(call: str, text: str) -> dict[str, Any]:
        return {"role": "tool", "content": text, "tool_call_ids": [call]}

    start = [{"role": "system", "content": "You are a programmer."},
             {"role": "user", "content": "Fix issue #12"}]  # fmt: skip
    replies = [called("Look first.", "c1", "ls"), called("Submit.", "c2", "submit")]
    history = [*start, replies[0], result("c1", "a.py"), replies[1], result("c2", "diff")]
    sent = [history[:2], history[:4]]
    after = [history[:4], history]
    doc = {
        "trajectory": [
            {"response": r["content"], "action": "", "observation": "", "thought": "",
             kept: sent[k] if kept == "query" else after[k]}
            for k, r in enumerate(replies)
        ],
        "history": history,
        "info": {"exit_status": "submitted"},
    }  # fmt: skip
    events = list(read(io.BytesIO(json.dumps(doc).encode()), format="swe-agent", fallback="t"))
    steps = replay(events)["t"]
    outputs = [body["output"]["messages"][0] for body, _ in steps]
    assert [o["tool_calls"][0]["id"] for o in outputs] == ["c1", "c2"]
    assert [o["content"] for o in outputs] == ["Look first.", "Submit."]
    assert ids(steps[1][1].before) == ["m0", "m1", "m2", "m3"]
    assert not steps[1][1].ops


def test_it_reads_the_step_a_swe_agent_run_stopped_with_as_no_call() -> None:
    # Stopped by its cost limit, SWE-agent adds a step it sent nothing: query [{}].
    system = {"role": "system", "content": "You are a programmer.", "message_type": "system"}
    task = {"role": "user", "content": "Fix issue #12", "message_type": "observation"}
    reply = {"role": "assistant", "content": "ls", "message_type": "action"}
    doc = {
        "trajectory": [
            {"response": "ls", "thought": "", "action": "ls", "observation": "a.py",
             "query": [system, task]},
            {"response": "Exit due to cost limit", "thought": "Exit due to cost limit",
             "action": "", "observation": "Exited (autosubmitted)", "query": [{}]},
        ],
        "history": [system, task, reply, {"role": "user", "content": "a.py"}],
        "info": {"exit_status": "submitted (exit_cost)"},
    }  # fmt: skip
    events = list(read(io.BytesIO(json.dumps(doc).encode()), format="swe-agent", fallback="x"))
    [(body, call)] = replay(events)["x"]
    assert ids(call.before) == ["m0", "m1"]
    assert body["output"]["messages"][0]["content"] == "ls"


def test_it_reads_a_swe_agent_cache_mark_that_moved_on_as_no_change() -> None:
    # SWE-agent marks its last messages for the prompt cache at each call: a message
    # marked at one call reads as plain text at the next.
    def marked(text: str) -> list[dict[str, Any]]:
        return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]

    def said(role: str, content: Any) -> dict[str, Any]:
        return {"role": role, "content": content}

    queries = [
        [said("system", "sys"), said("user", marked("Fix issue #12"))],
        [said("system", "sys"), said("user", marked("Fix issue #12")), said("assistant", "ls"),
         said("user", marked("a.py"))],
        [said("system", "sys"), said("user", "Fix issue #12"), said("assistant", "ls"),
         said("user", [{"type": "text", "text": "a.py"}]), said("assistant", "cat a.py"),
         said("user", marked("print(1)"))],
    ]  # fmt: skip
    doc = {
        "trajectory": [{"response": "", "query": q} for q in queries],
        "info": {"exit_status": "submitted"},
    }
    events = list(read(io.BytesIO(json.dumps(doc).encode()), format="swe-agent", fallback="c"))
    steps = replay(events)["c"]
    assert [body.get("actions") for body, _ in steps] == [None, None, None]
    assert [m.text for m in steps[2][1].before][1:4] == ["Fix issue #12", "ls", "a.py"]


def _swe_attempt(tag: str, calls: int) -> dict[str, Any]:
    """One run of SWE-agent's retry loop, its calls' replies named after `tag`."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "sys"},
                                     {"role": "user", "content": "Fix issue #7"}]  # fmt: skip
    steps = []
    for k in range(calls):
        steps.append({"response": f"{tag}{k}", "query": list(history)})
        history += [{"role": "assistant", "content": f"{tag}{k}"},
                    {"role": "user", "content": f"output {k}"}]  # fmt: skip
    return {"trajectory": steps, "history": history, "info": {"exit_status": "submitted"}}


def test_it_imports_each_attempt_of_a_swe_agent_retry_loop() -> None:
    first, second = _swe_attempt("a", 2), _swe_attempt("b", 3)
    chosen = {"attempts": [first, second], **second}
    chosen["info"] = {**second["info"], "best_attempt_idx": 1}
    events = list(read(io.BytesIO(json.dumps(chosen).encode()), format="swe-agent", fallback="r"))
    sessions = {e["body"]["session_id"]: e["body"] for e in events if e["type"] == "session"}
    assert sessions["r:attempt-0"]["metadata"]["parent_session"] == "r"
    replies = {
        sid: [body["output"]["messages"][0]["content"] for body, _ in steps]
        for sid, steps in replay(events).items()
    }
    assert replies == {"r": ["b0", "b1", "b2"], "r:attempt-0": ["a0", "a1"]}
    # saved while the loop still ran: the attempts alone
    running = json.dumps({"attempts": [first, second]}).encode()
    assert detect(running, whole=True) == "swe-agent"
    events = list(read(io.BytesIO(running), format="swe-agent", fallback="r"))
    counts = {sid: len(steps) for sid, steps in replay(events).items()}
    assert counts == {"r:attempt-0": 2, "r:attempt-1": 3}


def test_it_drops_the_turns_a_codex_rollback_undid() -> None:
    last = {"input_tokens": 900, "cached_input_tokens": 0, "output_tokens": 20}
    data = _rollout(
        [
            ("turn_context", {"model": "gpt-5-codex"}),
            _item("user", "<environment_context>cwd: /srv/app</environment_context>"),
            _item("user", "Add a --verbose flag."),
            _item("assistant", "Added it."),
            _tokens(last_token_usage=last),
            _item("user", "Now delete the tests."),
            _item("assistant", "Deleted them."),
            _tokens(last_token_usage=last),
            ("event_msg", {"type": "thread_rolled_back", "num_turns": 1}),
            _item("user", "Now document the flag."),
            _item("assistant", "Documented."),
            _tokens(last_token_usage=last),
        ]
    )
    steps = replay(list(read(io.BytesIO(data), format="codex")))["019e-rollout"]
    body, step = steps[2]
    [op] = body["actions"]
    assert op["action"] == "drop" and "rollback" in body["reason"]
    assert ids(step.after) == ["instructions", "l3", "l4", "l5", "l11"]
    assert "delete the tests" in " ".join(m.text for m in step.folds[0].originals)


def _atif(steps: list[dict[str, Any]]) -> bytes:
    doc = {
        "schema_version": "ATIF-v1.7",
        "session_id": "atif-m",
        "agent": {"name": "nat", "version": "1.4", "model_name": "gpt-5"},
        "steps": steps,
    }
    return json.dumps(doc).encode()


def _atif_call(step_id: int, text: str, prompt: int, **extra: Any) -> dict[str, Any]:
    metrics = {"prompt_tokens": prompt, "completion_tokens": 20, "cached_tokens": 0}
    return {"step_id": step_id, "source": "agent", "message": text, "metrics": metrics, **extra}


def test_it_reads_an_atif_step_without_an_llm_call_as_context_not_a_call() -> None:
    dispatch = {
        "step_id": 2,
        "source": "agent",
        "message": "",
        "llm_call_count": 0,
        "tool_calls": [
            {"tool_call_id": "c1", "function_name": "lookup", "arguments": {"id": "A100"}}
        ],
        "observation": {"results": [{"source_call_id": "c1", "content": "order A100: shipped"}]},
    }
    data = _atif(
        [
            {"step_id": 1, "source": "user", "message": "Where is order A100?"},
            dispatch,
            _atif_call(3, "It has shipped.", 300, llm_call_count=1),
        ]
    )
    steps = replay(list(read(io.BytesIO(data), format="atif")))["atif-m"]
    # one model call, which saw what the harness dispatched and what came back
    [(body, call)] = steps
    assert ids(call.before) == ["s1", "s2", "s2.r0"]
    assert body["usage"] == {"input_tokens": 300, "cache_read_tokens": 0, "output_tokens": 20}
    dispatch["llm_call_count"] = "none"
    with pytest.raises(TranscriptError) as caught:
        list(read(io.BytesIO(_atif([dispatch])), format="atif"))
    assert str(caught.value) == "steps[0].llm_call_count: must be a whole number, not 'none'"


def test_it_imports_the_sidechain_steps_of_an_atif_trajectory_as_sub_agents() -> None:
    # Harbor's trajectory of a Claude Code run: the sub-agents' steps inline, in the
    # order they were logged, marked as sidechain steps.
    def side(step: dict[str, Any], agent: str | None) -> dict[str, Any]:
        mark = {"is_sidechain": True} | ({"agent_id": agent} if agent else {})
        return {**step, "extra": mark}

    task = {"tool_call_id": "t1", "function_name": "Task", "arguments": {"prompt": "Find"}}
    data = _atif(
        [
            {"step_id": 1, "source": "user", "message": "Fix every caller of frob()."},
            _atif_call(2, "Delegating.", 900, tool_calls=[task], extra={"is_sidechain": False},
                       observation={"results": [{"source_call_id": "t1", "content": "2 found"}]}),
            side({"step_id": 3, "source": "user", "message": "Find callers of frob()"}, "a7"),
            side(_atif_call(4, "main.py and cli.py", 300, model_name="claude-haiku-4-5"), "a7"),
            _atif_call(5, "Both fixed.", 1000),
            side({"step_id": 6, "source": "user", "message": "Check the tests"}, None),
            side(_atif_call(7, "They pass.", 200), None),
        ]
    )  # fmt: skip
    events = list(read(io.BytesIO(data), format="atif"))
    steps = replay(events)
    assert [ids(call.before) for _, call in steps["atif-m"]] == [["s1"], ["s1", "s2", "s2.r0"]]
    assert [ids(call.before) for _, call in steps["atif-m:agent-a7"]] == [["s3"]]
    assert [ids(call.before) for _, call in steps["atif-m:sidechain-6"]] == [["s6"]]
    sessions = {e["body"]["session_id"]: e["body"] for e in events if e["type"] == "session"}
    assert sessions["atif-m:agent-a7"]["metadata"]["parent_session"] == "atif-m"
    assert sessions["atif-m:agent-a7"]["model"] == "claude-haiku-4-5"


def test_it_replaces_the_context_at_an_atif_context_boundary() -> None:
    boundary = {
        "step_id": 4,
        "source": "system",
        "message": "Context compaction performed",
        "observation": {"results": [{"content": "Summary: the user wants order A100 refunded."}]},
        "extra": {"context_management": {"type": "compaction", "boundary": "replace"}},
    }
    data = _atif(
        [
            {"step_id": 1, "source": "system", "message": "You are a support agent."},
            {"step_id": 2, "source": "user", "message": "Refund order A100."},
            _atif_call(3, "Looking it up.", 900),
            boundary,
            {"step_id": 5, "source": "user", "message": "Go on."},
            _atif_call(6, "Refunded.", 200),
        ]
    )
    steps = replay(list(read(io.BytesIO(data), format="atif")))["atif-m"]
    assert len(steps) == 2
    body, after = steps[1]
    # the calls after the boundary see its summary and what follows, nothing before it
    assert ids(after.after) == ["s4.summary", "s5"]
    assert [o["action"] for o in body["actions"]] == ["summarize"]
    assert {m.id for m in after.folds[0].originals} == {"s1", "s2", "s3"}
    assert "refunded" in after.after[0].text
    # a boundary with no content to carry on (the next message brings the summary)
    del boundary["observation"]
    steps = replay(list(read(io.BytesIO(_atif_with(data, boundary)), format="atif")))["atif-m"]
    body, after = steps[1]
    assert [o["action"] for o in body["actions"]] == ["drop"]
    assert ids(after.after) == ["s5"]


def test_it_replaces_the_context_at_a_terminus_2_summarization_handoff() -> None:
    # Harbor before v1.7: a system step says so, its results only refer to the
    # trajectories of the summarization
    refs = [{"session_id": f"run-7-summarization-1-{part}", "trajectory_path": f"{part}.json"}
            for part in ("summary", "questions", "answers")]  # fmt: skip
    handoff = {
        "step_id": 4,
        "source": "system",
        "message": "Performed context summarization and handoff to continue task.",
        "observation": {"results": [{"subagent_trajectory_ref": refs}]},
    }
    data = _atif(
        [
            {"step_id": 1, "source": "user", "message": "Rotate the logs in /var/app."},
            _atif_call(2, "Listing them.", 900),
            {"step_id": 3, "source": "user", "message": "New Terminal Output: app.log app.1"},
            handoff,
            {"step_id": 5, "source": "user", "message": "Here are the answers: app.log is 2 GB."},
            _atif_call(6, "Compressing app.log.", 300),
        ]
    )
    steps = replay(list(read(io.BytesIO(data), format="atif")))["atif-m"]
    body, after = steps[1]
    # the call after the handoff sees the handoff's answers, nothing of the run before it
    assert ids(after.after) == ["s5"]
    assert [o["action"] for o in body["actions"]] == ["drop"]
    assert "compaction" in body["reason"]


def _atif_with(data: bytes, step: dict[str, Any]) -> bytes:
    doc = json.loads(data)
    doc["steps"] = [step if s["step_id"] == step["step_id"] else s for s in doc["steps"]]
    return json.dumps(doc).encode()


def _recall(eid: int, kind: str, **extras: Any) -> list[dict[str, Any]]:
    """A recall OpenHands' memory answers, as its event stream logs the pair."""
    action = {
        "id": eid,
        "source": "user",
        "action": "recall",
        "message": "Retrieving content",
        "args": {"recall_type": kind, "query": "Fix the timeout", "thought": ""},
    }
    said = (
        "Added workspace context" if kind == "workspace_context" else "Added microagent knowledge"
    )
    observation = {
        "id": eid + 1,
        "source": "environment",
        "cause": eid,
        "observation": "recall",
        "message": said,
        "content": said,
        "extras": {"recall_type": kind, **extras},
    }
    return [action, observation]  # fmt: skip


def test_it_sends_an_openhands_recall_as_the_knowledge_it_added() -> None:
    history = json.loads((FIXTURES / "openhands.json").read_text())[:7]
    github = {"name": "github", "trigger": "github", "content": "Use the GITHUB_TOKEN to push."}
    docker = {"name": "docker", "trigger": "container", "content": "Run docker with sudo."}
    workspace = _recall(101, "workspace_context", repo_name="acme/billing", date="2026-11-30",
                        repo_instructions="Run make test before you commit.",
                        conversation_instructions="", additional_agent_instructions="",
                        runtime_hosts={"http://localhost:51102": 51102},
                        microagent_knowledge=[github])  # fmt: skip
    knowledge = _recall(103, "knowledge", microagent_knowledge=[github, docker])
    empty = _recall(105, "knowledge", microagent_knowledge=[github])
    events = [*history[:2], *workspace, *history[2:5], *knowledge, *empty, *history[5:]]
    data = json.dumps(events).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", session_id="oh-r")))
    (_, first), (_, second) = steps["oh-r"]
    assert ids(first.before) == ["e0", "e1", "e102"]
    assert (
        first.before[2].text == "Run make test before you commit.\n\nUse the GITHUB_TOKEN to push."
    )
    # a microagent already recalled is not sent again, and a recall adding nothing is no message
    assert ids(second.before) == ["e0", "e1", "e102", "e3", "e4", "e104"]
    assert second.before[-1].text == "Run docker with sudo."


def test_it_sends_an_openhands_file_edit_as_the_editor_reported_it() -> None:
    history = json.loads((FIXTURES / "openhands.json").read_text())[:5]
    meta = {"function_name": "str_replace_editor", "tool_call_id": "toolu_9",
            "model_response": {"id": "chatcmpl-9", "model": "claude-sonnet-4-5"}}  # fmt: skip
    edit = {"id": 40, "source": "agent", "action": "edit", "tool_call_metadata": meta,
            "args": {"path": "/app/inventory.py", "command": "create", "thought": ""}}  # fmt: skip
    whole_file = "--- /app/inventory.py\n+++ /app/inventory.py\n" + "+TIMEOUT = 30\n" * 200
    said = "File created successfully at: /app/inventory.py"
    edited = {"id": 41, "source": "agent", "cause": 40, "observation": "edit",
              "tool_call_metadata": meta, "content": whole_file,
              "extras": {"path": "/app/inventory.py", "impl_source": "oh_aci",
                         "formatted_output_and_error": said}}  # fmt: skip
    done = {"id": 42, "source": "agent", "action": "finish", "args": {"thought": "Done."},
            "tool_call_metadata": {**meta, "tool_call_id": "toolu_10",
                                   "model_response": {"id": "chatcmpl-10"}}}  # fmt: skip
    data = json.dumps([*history, edit, edited, done]).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", session_id="oh-e")))["oh-e"]
    last = steps[-1][1].before
    assert last[-1].id == "e41"
    # the model reads what the editor said, not the diff OpenHands keeps for the user
    assert last[-1].text == said


def test_it_leaves_an_openhands_loop_detection_out_of_the_context() -> None:
    history = json.loads((FIXTURES / "openhands.json").read_text())[:7]
    said = "Agent detected in a loop! Loop type: repeating_action_observation"
    loop = {"id": 50, "source": "environment", "observation": "loop_detection", "content": said}
    data = json.dumps([*history[:5], loop, *history[5:]]).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", session_id="oh-l")))["oh-l"]
    assert ids(steps[1][1].before) == ["e0", "e1", "e3", "e4"]


def test_it_sends_the_images_a_user_attached_in_openhands_with_their_message() -> None:
    history = json.loads((FIXTURES / "openhands.json").read_text())[:7]
    shot = "data:image/png;base64,iVBORw0KGgo="
    history[1]["args"]["image_urls"] = [shot]
    data = json.dumps(history).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", session_id="oh-i")))["oh-i"]
    asked = steps[0][1].before[1]
    assert asked.content == [
        {"type": "text", "text": "Fix the inventory timeout for order SO20260101007"},
        {"type": "image", "url": shot},
    ]


def test_it_starts_a_branched_claude_code_session_from_the_conversation_it_copied() -> None:
    """/branch and --fork-session write a new session that opens with a copy of the
    conversation it branched from (the same uuids, each line with ``forkedFrom``):
    the context of its first call, not calls of its own."""
    source = {"forkedFrom": {"sessionId": "cc-main", "messageUuid": "a-2"}}
    own = _reply("a-3", "msg_3", "Raised to 10s.")
    own["message"] |= {"model": "claude-opus-4-5", "usage": {
        "input_tokens": 6, "cache_read_input_tokens": 21000, "output_tokens": 40}}  # fmt: skip
    data = _cc_lines(
        [
            _said("u-1", "Why does order SO20260101007 time out?", **source),
            _reply("a-0", "msg_1", "Let me look for the timeout.", **source),
            _used("a-1", "msg_1", "toolu_1", "Grep") | source,
            _result("r-1", "toolu_1", "inventory.ex:88: timeout 3000") | source,
            _reply("a-2", "msg_2", "The inventory call waits 3s.", **source),
            _said("u-2", "Try raising it to 10s instead."),
            own,
        ],
        session="cc-branch",
    )
    events = list(read(io.BytesIO(data), format="claude-code"))
    [session] = [e["body"] for e in events if e["type"] == "session"]
    assert session["metadata"]["forked_from"] == "cc-main"
    assert session["model"] == "claude-opus-4-5"
    [(body, step)] = replay(events)["cc-branch"]
    assert ids(step.before) == ["u-1", "msg_1", "r-1", "msg_2", "u-2"]
    assert [part["type"] for part in step.before[1].content] == ["text", "tool_use"]
    assert body["usage"] == {"input_tokens": 6, "cache_read_tokens": 21000, "output_tokens": 40}
    assert body["output"]["messages"][0]["id"] == "msg_3"


def _resumed_pair(*, keep_ids: bool) -> tuple[bytes, bytes]:
    """A Claude Code 1.0 session, and the one `claude --resume` made of it: a file of
    its own that opens with the ``summary`` Claude Code titled the first one with and a
    copy of its entries (the same uuids, message ids, usage and times), with the new
    session's id or (`keep_ids`) the first one's, then the new turns."""

    def call(uuid: str, mid: str, text: str, tokens: int) -> dict[str, Any]:
        entry = _reply(uuid, mid, text, requestId=f"req_{mid}", timestamp="2025-08-01T13:46:05Z")
        entry["message"]["usage"] = {"input_tokens": tokens, "output_tokens": 7}
        return entry

    history = [
        _said("u-1", "What is 4 + 4 * 4?", timestamp="2025-08-01T13:46:01Z"),
        call("a-1", "msg_1", "20", 1200),
        _said("u-2", "Remove 10 from it.", timestamp="2025-08-01T13:47:01Z"),
        call("a-2", "msg_2", "10", 1300),
    ]
    title = {"type": "summary", "summary": "Arithmetic on 20", "leafUuid": "a-2"}
    first = _cc_lines(history, session="cc-first") + (json.dumps(title) + "\n").encode()
    copy = _cc_lines(history, session="cc-first" if keep_ids else "cc-again")
    turn = [_said("u-3", "Add 20 to it.", parentUuid="a-2"), call("a-3", "msg_3", "30", 1400)]
    again = (json.dumps(title) + "\n").encode() + copy + _cc_lines(turn, session="cc-again")
    return first, again


@pytest.mark.parametrize("keep_ids", [False, True])
def test_it_starts_a_resumed_claude_code_session_from_the_conversation_it_copied(
    keep_ids: bool,
) -> None:
    first, again = _resumed_pair(keep_ids=keep_ids)
    original = list(read(io.BytesIO(first), format="claude-code"))
    assert [len(v) for v in replay(original).values()] == [2]
    events = list(read(io.BytesIO(again), format="claude-code"))
    # the copied calls are the first session's: none of them is a step here
    assert {e["body"]["session_id"] for e in events} == {"cc-again"}
    [session] = [e["body"] for e in events if e["type"] == "session"]
    assert session["metadata"].get("resumed_from") == ("cc-first" if keep_ids else None)
    [(body, step)] = replay(events)["cc-again"]
    assert ids(step.before) == ["u-1", "msg_1", "u-2", "msg_2", "u-3"]
    assert body["usage"] == {"input_tokens": 1400, "output_tokens": 7}
    assert body["output"]["messages"][0]["id"] == "msg_3"


def test_it_reads_a_claude_code_title_that_follows_its_conversation_as_no_copy() -> None:
    first, _ = _resumed_pair(keep_ids=False)
    # titled again later, and a session that goes on after its title: all its own calls
    more = _cc_lines([_said("u-3", "Double it.", parentUuid="a-2"), _reply("a-3", "m3", "20")])
    data = first.replace(b'"cc-first"', b'"cc-r"') + more
    assert len(replay(list(read(io.BytesIO(data), format="claude-code")))["cc-r"]) == 3


def test_it_waits_for_the_end_of_a_resumed_claude_code_copy_still_being_written() -> None:
    """Read live (sdk watch), a transcript whose summary names an entry it does not
    hold yet may be a copy half written: no step is sent until the file is complete,
    when a summary of an entry it never holds marks no copy."""
    title = {"type": "summary", "summary": "Arithmetic on 20", "leafUuid": "a-3"}
    head = [_said("u-1", "What is 4 + 4?"), _reply("a-1", "msg_1", "8"), _said("u-2", "Double it.")]
    data = (json.dumps(title) + "\n").encode() + _cc_lines([*head, _reply("a-2", "msg_2", "16")])
    assert not replay(list(read(io.BytesIO(data), format="claude-code", live=True)))
    assert len(replay(list(read(io.BytesIO(data), format="claude-code")))["cc-r"]) == 2


def _oh_usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    """OpenHands' running total of tokens, as each agent action carries it."""
    totals = {"model": "default", "prompt_tokens": prompt, "completion_tokens": completion,
              "cache_read_tokens": cached, "cache_write_tokens": 0, "context_window": 200000,
              "per_turn_token": 0, "response_id": ""}  # fmt: skip
    return {"accumulated_cost": 0.02, "max_budget_per_task": None,
            "accumulated_token_usage": totals, "costs": [], "response_latencies": [],
            "token_usages": []}  # fmt: skip


def _oh_session() -> list[dict[str, Any]]:
    """A CodeActAgent session as OpenHands (V0) stores it: a tool call whose model
    response is kept beside the action, then a reply in words with none."""
    call = {"id": "toolu_1", "type": "function", "index": 0,
            "function": {"name": "execute_bash",
                         "arguments": json.dumps({"command": "grep -rn TIMEOUT ."})}}  # fmt: skip
    response = {"id": "chatcmpl-1", "model": "claude-sonnet-4-5", "object": "chat.completion",
                "choices": [{"index": 0, "finish_reason": "tool_calls",
                             "message": {"role": "assistant", "content": "Find the timeout.",
                                         "tool_calls": [call]}}],
                "usage": {"prompt_tokens": 5000, "completion_tokens": 60}}  # fmt: skip
    meta = {"function_name": "execute_bash", "tool_call_id": "toolu_1",
            "model_response": response, "total_calls_in_response": 1}  # fmt: skip
    history = json.loads((FIXTURES / "openhands.json").read_text())[:2]
    return [
        *history,
        {"id": 3, "timestamp": "2026-11-30T11:00:03", "source": "agent", "action": "run",
         "message": "Running command: grep -rn TIMEOUT .", "tool_call_metadata": meta,
         "llm_metrics": _oh_usage(5000, 60),
         "args": {"command": "grep -rn TIMEOUT .", "is_input": False,
                  "thought": "Find the timeout.", "blocking": False, "is_static": False,
                  "cwd": None, "hidden": False, "confirmation_state": "confirmed",
                  "security_risk": -1}},
        {"id": 4, "timestamp": "2026-11-30T11:00:04", "source": "agent", "cause": 3,
         "observation": "run", "tool_call_metadata": meta, "content": "inventory.py:3:TIMEOUT = 3",
         "message": "Command `grep -rn TIMEOUT .` executed with exit code 0.",
         "extras": {"command": "grep -rn TIMEOUT .", "metadata": {"exit_code": 0}}},
        {"id": 5, "timestamp": "2026-11-30T11:00:06", "source": "agent", "action": "message",
         "message": "TIMEOUT is 3 s. Shall I raise it?", "llm_metrics": _oh_usage(10300, 100, 5000),
         "args": {"content": "TIMEOUT is 3 s. Shall I raise it?", "image_urls": None,
                  "wait_for_response": True, "security_risk": -1}},
    ]  # fmt: skip


def test_it_sends_openhands_tool_arguments_as_the_model_wrote_them() -> None:
    data = json.dumps(_oh_session()).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", session_id="oh-a")))["oh-a"]
    first, _ = steps[0]
    [reply] = first["output"]["messages"]
    assert reply["content"][0] == {"type": "text", "text": "Find the timeout."}
    # not OpenHands' own args (its thought again, blocking, confirmation_state...)
    assert reply["content"][1]["arguments"] == {"command": "grep -rn TIMEOUT ."}


def test_it_takes_an_openhands_replys_usage_from_its_running_total() -> None:
    # A reply in words has no model response beside it: the total it carries, less
    # the one the action before it carried, is what its call used.
    events = _oh_session()
    condensed = {"id": 6, "source": "agent", "action": "condensation",
                 "llm_metrics": _oh_usage(12300, 400, 5000),
                 "args": {"forgotten_event_ids": [3, 4], "summary": "TIMEOUT = 3 s."}}  # fmt: skip
    asked = {"id": 7, "source": "user", "action": "message", "args": {"content": "Yes."}}
    done = {"id": 8, "source": "agent", "action": "message", "args": {"content": "Raised."},
            "llm_metrics": _oh_usage(13000, 420, 5000)}  # fmt: skip
    data = json.dumps([*events, condensed, asked, done]).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", session_id="oh-u")))["oh-u"]
    assert [body["usage"] for body, _ in steps] == [
        {"input_tokens": 5000, "cache_read_tokens": 0, "output_tokens": 60},
        {"input_tokens": 300, "cache_read_tokens": 5000, "output_tokens": 40},
        # the condenser's own call (2,000 in, 300 out) is not this call's
        {"input_tokens": 700, "cache_read_tokens": 0, "output_tokens": 20},
    ]


def test_it_sends_an_openhands_command_that_printed_nothing_as_an_empty_result() -> None:
    events = _oh_session()
    events[3] = {**events[3], "content": "", "message": "Command executed"}
    data = json.dumps(events).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", session_id="oh-e")))["oh-e"]
    _, second = steps[1]
    [result] = [m for m in second.before if m.role == "tool"]
    assert result.content == ""


def test_it_sends_an_openhands_sdk_tool_result_of_plain_text_as_that_text() -> None:
    events = _sdk_events()
    plain = {**events[4], "observation": {
        "kind": "TerminalObservation", "content": "upstream timed out after 3 s",
        "is_error": False, "command": "tail app.log", "exit_code": 0,
        "metadata": {"exit_code": 0, "pid": -1, "working_dir": "/workspace"}}}  # fmt: skip
    failed = {
        **events[5],
        "observation": {
            "kind": "TerminalObservation",
            "content": "ls: cannot access",
            "is_error": True,
        },
    }
    data = json.dumps([*events[:4], plain, failed, *events[6:]]).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", fallback="oh-t")))["oh-t"]
    results = [m for m in steps[1][1].before if m.id in ("eo4", "eo5")]
    assert [m.text for m in results] == [
        "upstream timed out after 3 s",
        "Tool Execution Error. \nls: cannot access",
    ]


def test_it_sends_an_early_openhands_sdk_tool_result_as_its_output_text() -> None:
    # The SDK's first releases kept a command's result as `output`, with no `content`.
    events = _sdk_events()
    events[4] = {**events[4], "observation": {
        "kind": "ExecuteBashObservation", "output": "upstream timed out after 3 s",
        "command": "tail app.log", "exit_code": 0, "error": False}}  # fmt: skip
    data = json.dumps(events).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", fallback="oh-o")))["oh-o"]
    [result] = [m for m in steps[1][1].before if m.id == "eo4"]
    assert result.content == "upstream timed out after 3 s"


def test_it_keeps_the_reasoning_of_an_openhands_sdk_reply_in_words() -> None:
    events = _sdk_events()
    reply = events[7]
    reply["llm_message"] = {**reply["llm_message"], "reasoning_content": "The log says 3 s."}
    data = json.dumps(events).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", fallback="oh-r")))["oh-r"]
    parts = steps[1][0]["output"]["messages"][0]["content"]
    assert parts[0] == {"type": "thinking", "thinking": "The log says 3 s."}
    assert parts[1]["text"] == "inventory-svc times out."


def test_it_shows_the_reasoning_summary_of_an_openhands_sdk_call() -> None:
    # A model on the Responses API: its reasoning kept as that API's item, summarized.
    events = _sdk_events()
    item = {"id": "rs_1", "summary": ["Check the log.", "Then the config."],
            "content": None, "encrypted_content": "gAAAA", "status": "completed"}  # fmt: skip
    events[2] = {**events[2], "responses_reasoning_item": item}
    data = json.dumps(events).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", fallback="oh-s")))["oh-s"]
    parts = steps[0][0]["output"]["messages"][0]["content"]
    assert parts[0] == {"type": "thinking", "thinking": "Check the log.\n\nThen the config."}


def test_it_shows_the_thinking_of_an_openhands_sdk_call_once() -> None:
    # LiteLLM gives an Anthropic model's thinking both as blocks and as their text.
    events = _sdk_events()
    events[2] = {
        **events[2],
        "reasoning_content": "The log will say.",
        "thinking_blocks": [
            {"type": "thinking", "thinking": "The log will say.", "signature": "c2lnbmVk"}
        ],
    }
    data = json.dumps(events).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", fallback="oh-k")))["oh-k"]
    parts = steps[0][0]["output"]["messages"][0]["content"]
    thinking = [p for p in parts if p["type"] == "thinking"]
    assert thinking == [{"type": "thinking", "thinking": "The log will say."}]


# OpenHands (V0) CodeActAgent handing a question to BrowsingAgent: the delegate's
# events are logged in the parent's stream, from the `delegate` action (event 7) to
# the `delegate` observation that brings back its answer (event 20).
_DELEGATE = "openhands_delegate:delegate-7"
_ANSWER = "The latest httpx release is 0.28.1 (released 2024-12-06)."


def _oh_totals(event: dict[str, Any], prompt: int, completion: int) -> None:
    event["llm_metrics"]["accumulated_token_usage"].update(
        prompt_tokens=prompt, completion_tokens=completion
    )


def test_it_reads_an_openhands_delegates_calls_as_a_session_of_its_own() -> None:
    events = events_of("openhands_delegate.json")
    sessions = {e["body"]["session_id"]: e["body"] for e in events if e["type"] == "session"}
    assert sessions[_DELEGATE]["metadata"] == {
        "parent_session": "openhands_delegate",
        "parent_tool_call_id": "toolu_d1",
        "delegate_agent": "BrowsingAgent",
        "task": "Find the latest httpx release on https://pypi.org/project/httpx/ and report "
        "its version number.",
    }
    assert "parent_session" not in sessions["openhands_delegate"]["metadata"]
    steps = replay(events)
    # the parent's context goes on as OpenHands sent it: its delegate call and the
    # answer that came back, none of the delegate's browsing
    parent = steps["openhands_delegate"]
    assert [body["output"]["messages"][0]["id"] for body, _ in parent] == ["e5", "e7", "e21"]
    last = parent[2][1].before
    assert ids(last) == ["e0", "e1", "e5", "e6", "e7", "e20"]
    assert last[-1].partition == "tool" and last[-1].text == _ANSWER
    # the delegate's calls saw its task and its own pages; its last message and its
    # finish repeat what it had already answered, with no call of their own
    delegate = steps[_DELEGATE]
    assert [body["output"]["messages"][0]["id"] for body, _ in delegate] == ["e12", "e14"]
    assert ids(delegate[0][1].before) == ["e8"]
    assert ids(delegate[1][1].before) == ["e8", "e12", "e13"]
    ends = {
        e["body"]["session_id"]: e["body"]["status"] for e in events if e["type"] == "session_end"
    }
    # OpenHands stops a delegate once it finished: it succeeded
    assert ends == {_DELEGATE: "succeeded"}


@pytest.mark.parametrize("counted", ["with-the-parent", "on-its-own"])
def test_it_counts_each_openhands_call_once_whichever_way_a_delegate_counted_tokens(
    counted: str,
) -> None:
    """A delegate's actions carry the conversation's running total (which goes on
    from its parent's), or, in older OpenHands, their own LLM's (from nothing)."""
    history = json.loads((FIXTURES / "openhands_delegate.json").read_text())
    if counted == "on-its-own":
        for n, (prompt, completion) in {12: (2900, 40), 14: (6300, 85), 16: (6300, 85),
                                        17: (6300, 85), 21: (19200, 210)}.items():  # fmt: skip
            _oh_totals(history[n], prompt, completion)
    data = json.dumps(history).encode()
    steps = replay(list(read(io.BytesIO(data), format="openhands", session_id="oh-d")))
    usage = {sid: [(b["usage"]["input_tokens"], b["usage"]["output_tokens"]) for b, _ in found]
             for sid, found in steps.items()}  # fmt: skip
    assert usage == {
        "oh-d:delegate-7": [(2900, 40), (3400, 45)],
        # the reply after the delegate's answer: its own call, not the delegate's too
        "oh-d": [(6100, 70), (6200, 80), (6900, 60)],
    }


def test_it_reads_a_delegate_in_an_openhands_evaluations_row_under_the_run() -> None:
    history = json.loads((FIXTURES / "openhands_delegate.json").read_text())
    row = {"instance_id": "pin-check-1", "history": history, "metrics": {}}
    events = list(read(io.BytesIO(json.dumps(row).encode() + b"\n"), format="openhands"))
    steps = replay(events)
    assert {sid: len(found) for sid, found in steps.items()} == {
        "pin-check-1:delegate-7": 2,
        "pin-check-1": 3,
    }


def test_it_reads_an_openhands_delegate_that_delegates_in_turn() -> None:
    history = json.loads((FIXTURES / "openhands_delegate.json").read_text())

    def totals(prompt: int, completion: int) -> dict[str, Any]:
        metrics = json.loads(json.dumps(history[12]["llm_metrics"]))
        metrics["accumulated_token_usage"].update(
            prompt_tokens=prompt, completion_tokens=completion
        )
        return metrics

    # the browsing agent hands the page it opened on to a third agent (ids 101-103)
    inner = {
        "id": 101,
        "timestamp": "2026-11-30T09:00:17",
        "source": "agent",
        "message": "I'm asking ReaderAgent for help with this task.",
        "action": "delegate",
        "llm_metrics": totals(16000, 210),
        "args": {"agent": "ReaderAgent", "inputs": {"task": "Read the page."}, "thought": ""},
    }
    said = {
        "id": 102,
        "timestamp": "2026-11-30T09:00:18",
        "source": "agent",
        "action": "message",
        "message": "0.28.1",
        "llm_metrics": totals(16500, 230),
        "args": {"content": "0.28.1", "wait_for_response": False},
    }
    back = {**history[20], "id": 103, "tool_call_metadata": None,
            "extras": {"outputs": {"content": "0.28.1"}}}  # fmt: skip
    for n in (14, 16, 17, 21):
        usage = history[n]["llm_metrics"]["accumulated_token_usage"]
        _oh_totals(history[n], usage["prompt_tokens"] + 1300, usage["completion_tokens"] + 40)
    data = json.dumps([*history[:14], inner, said, back, *history[14:]]).encode()
    events = list(read(io.BytesIO(data), format="openhands", session_id="oh-n"))
    sessions = {e["body"]["session_id"]: e["body"] for e in events if e["type"] == "session"}
    inner_sid = "oh-n:delegate-7:delegate-101"
    assert sessions[inner_sid]["metadata"]["parent_session"] == "oh-n:delegate-7"
    steps = replay(events)
    usage = {sid: [b["usage"]["input_tokens"] for b, _ in found] for sid, found in steps.items()}
    assert usage == {
        inner_sid: [500],
        "oh-n:delegate-7": [2900, 800, 3400],
        "oh-n": [6100, 6200, 6900],
    }
    # the browsing agent's next call saw the third agent's answer, not its work
    assert ids(steps["oh-n:delegate-7"][2][1].before) == ["e8", "e12", "e13", "e101", "e103"]


def test_it_keeps_a_codex_tool_search_and_image_generation_in_the_call_that_made_them() -> None:
    # Codex 0.14x logs the tools a model looked up (tool_search_call, answered by
    # tool_search_output) and the images it made (image_generation_call) as items of
    # the reply, like a function_call; the call's token_count follows them.
    search = {
        "type": "tool_search_call",
        "call_id": "ts_1",
        "status": "completed",
        "execution": "client",
        "arguments": {"query": "jira ticket", "limit": 5},
    }
    found = {
        "type": "tool_search_output",
        "call_id": "ts_1",
        "status": "completed",
        "execution": "client",
        "tools": [
            {
                "type": "function",
                "name": "jira_get_issue",
                "description": "Read a Jira issue",
                "parameters": {"type": "object"},
            }
        ],
    }
    image = {
        "type": "image_generation_call",
        "id": "ig_1",
        "status": "completed",
        "revised_prompt": "A bar chart of build times",
        "result": "iVBORw0KGgo=",
    }
    usage = {"input_tokens": 1200, "cached_input_tokens": 0, "output_tokens": 30}
    data = _rollout(
        [
            ("turn_context", {"model": "gpt-5.5"}),
            _item("user", "What does OPS-4411 say? Then chart the build times."),
            ("response_item", search),
            _tokens(last_token_usage=usage),
            ("response_item", found),
            ("response_item", {"type": "function_call", "name": "jira_get_issue",
                               "namespace": "mcp__jira", "call_id": "c2",
                               "arguments": "{\"key\": \"OPS-4411\"}"}),
            _tokens(last_token_usage={**usage, "input_tokens": 1500}),
            ("response_item", {"type": "function_call_output", "call_id": "c2",
                               "output": "OPS-4411: builds take 14 minutes"}),
            ("response_item", {"type": "reasoning", "summary": [], "encrypted_content": "gA"}),
            ("response_item", image),
            _item("assistant", "Here is the chart."),
            _tokens(last_token_usage={**usage, "input_tokens": 1700}),
        ]
    )  # fmt: skip
    steps = replay(list(read(io.BytesIO(data), format="codex")))["019e-rollout"]
    assert [body["usage"]["input_tokens"] for body, _ in steps] == [1200, 1500, 1700]
    outputs = [[p["type"] for m in b["output"]["messages"] for p in m["content"]]
               for b, _ in steps]  # fmt: skip
    assert outputs == [
        ["tool_search_call"],
        ["function_call"],
        ["reasoning", "image_generation_call", "output_text"],
    ]
    [result] = [m for m in steps[1][1].before if m.role == "tool"]
    assert result.extra["tool_call_id"] == "ts_1"
    assert "jira_get_issue" in result.text


def test_it_names_a_codex_session_by_the_session_id_its_meta_gives() -> None:
    # Codex 0.14x writes the thread's id as session_meta.session_id (beside or
    # instead of id).
    meta = {"session_id": "019f2123-9c04-73a1-919a-eaecdff9067f", "cwd": "/srv/app",
            "cli_version": "0.142.0", "source": "cli"}  # fmt: skip
    lines = [
        {"timestamp": "2026-06-24T09:06:39Z", "type": "session_meta", "payload": meta},
        {"timestamp": "2026-06-24T09:06:40Z", "type": "turn_context",
         "payload": {"model": "gpt-5.5"}},
        {"timestamp": "2026-06-24T09:06:41Z", "type": "response_item",
         "payload": {"type": "message", "role": "user",
                     "content": [{"type": "input_text", "text": "hi"}]}},
        {"timestamp": "2026-06-24T09:06:42Z", "type": "response_item",
         "payload": {"type": "message", "role": "assistant",
                     "content": [{"type": "output_text", "text": "hello"}]}},
    ]  # fmt: skip
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    assert detect(data) == "codex"
    events = list(read(io.BytesIO(data), format="codex", fallback="rollout-file"))
    assert {e["body"]["session_id"] for e in events} == {meta["session_id"]}


def test_it_reads_a_mini_swe_agent_trajectory_of_responses_api_calls() -> None:
    # mini-swe-agent 2 with a Responses API model (its litellm_response model) keeps
    # each reply as the whole response object, output items and usage, and each
    # command's result as the function_call_output item it sent back.
    def response(n: int, output: list[dict[str, Any]], prompt: int, cached: int) -> dict[str, Any]:
        return {"id": f"resp_{n}", "object": "response", "created_at": 1767225600 + n,
                "model": "gpt-5.4-2026-03-05", "status": "completed", "output": output,
                "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
                          "output_tokens": 40, "output_tokens_details": {"reasoning_tokens": 12},
                          "total_tokens": prompt + 40},
                "extra": {"actions": [{"command": "pytest -x", "tool_call_id": f"call_{n}"}],
                          "cost": 0.01, "timestamp": 1767225600.5 + n}}  # fmt: skip

    def bash(n: int, command: str) -> dict[str, Any]:
        return {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}", "name": "bash",
                "arguments": json.dumps({"command": command}), "status": "completed"}  # fmt: skip

    said = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Running the tests first.",
                         "annotations": []}]}  # fmt: skip
    doc = {
        "info": {"exit_status": "Submitted", "mini_version": "2.1.0",
                 "config": {"model": {"model_name": "openai/gpt-5.4"}}},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant.", "extra": {}},
            {"role": "user", "content": "Please solve this issue: the parser drops BOMs",
             "extra": {}},
            response(1, [{"type": "reasoning", "id": "rs_1", "summary": []}, said,
                         bash(1, "pytest -x")], 3000, 0),
            {"type": "function_call_output", "call_id": "call_1",
             "output": "<returncode>1</returncode>\n<output>1 failed</output>",
             "extra": {"raw_output": "1 failed", "returncode": 1, "timestamp": 1767225602.0}},
            response(2, [bash(2, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")], 3400, 2900),
            {"type": "function_call_output", "call_id": "call_2",
             "output": "<returncode>0</returncode>", "extra": {"returncode": 0}},
            {"role": "exit", "content": "",
             "extra": {"exit_status": "Submitted", "submission": ""}},
        ],
        "trajectory_format": "mini-swe-agent-1.1",
    }  # fmt: skip
    data = json.dumps(doc).encode()
    assert detect(data, whole=True) == "swe-agent"
    events = list(read(io.BytesIO(data), format="swe-agent", fallback="run-9"))
    steps = replay(events)["run-9"]
    assert len(steps) == 2
    first, second = (body for body, _ in steps)
    assert first["model"] == "gpt-5.4-2026-03-05"
    assert [first["usage"], second["usage"]] == [
        {"input_tokens": 3000, "cache_read_tokens": 0, "output_tokens": 40},
        {"input_tokens": 500, "cache_read_tokens": 2900, "output_tokens": 40},
    ]
    [reply] = first["output"]["messages"]
    assert [p["type"] for p in reply["content"]] == ["reasoning", "output_text", "function_call"]
    assert "extra" not in json.dumps(reply)  # the model never saw it
    before = steps[1][1].before
    assert [m.role for m in before] == ["system", "user", "assistant", "tool"]
    assert before[3].extra["tool_call_id"] == "call_1"
    assert "1 failed" in before[3].text and "pytest -x" in before[2].text
    assert events[-1]["body"]["status"] == "succeeded"


def test_it_takes_a_swe_agent_sessions_model_from_its_replay_config() -> None:
    # SWE-agent 1.x keeps the run's configuration as JSON text in replay_config.
    config = {
        "agent": {"model": {"name": "claude-3-7-sonnet-20250219", "temperature": 0.0}},
        "problem_statement": {"text": "TimeDelta serialization precision", "id": "m-1"},
    }
    doc = {
        "environment": "swe_main",
        "trajectory": [],
        "history": [
            {"role": "system", "content": "SETTING: a shell", "agent": "main"},
            {"role": "user", "content": "<pr_description>TimeDelta</pr_description>",
             "agent": "main", "message_type": "observation"},
            {"role": "assistant", "content": "Let me look.", "agent": "main",
             "message_type": "action"},
        ],
        "info": {"exit_status": "submitted", "model_stats": {"api_calls": 1}},
        "replay_config": json.dumps(config),
    }  # fmt: skip
    events = list(read(io.BytesIO(json.dumps(doc).encode()), format="swe-agent", fallback="r"))
    assert (events[0]["type"], events[0]["body"]["agent"]) == ("session", "swe-agent")
    assert events[0]["body"]["model"] == "claude-3-7-sonnet-20250219"


def test_it_sends_a_codex_message_from_another_agent_as_the_model_read_it() -> None:
    # Codex's V2 agents write to each other: the task a parent gives a sub-agent, and
    # the sub-agent's report, reach the recipient as an inter_agent_communication line
    # (sent on as an assistant message of its JSON) or an agent_message item.
    task = {
        "author": "/root",
        "recipient": "/root/researcher",
        "other_recipients": [],
        "content": "Find where RETRY_LIMIT is set in services/queue",
        "trigger_turn": True,
    }
    report = {
        "type": "agent_message",
        "author": "/root/researcher/helper",
        "recipient": "/root/researcher",
        "content": [{"type": "input_text", "text": "It is set in queue/config.py:14"}],
    }
    spawn = {"parent_thread_id": "019e-parent", "depth": 1, "agent_path": "/root/researcher"}
    data = _rollout(
        [
            ("turn_context", {"model": "gpt-5.5"}),
            ("inter_agent_communication", task),
            ("response_item", {"type": "function_call", "name": "spawn_agent", "call_id": "c1",
                               "arguments": "{\"task_name\": \"helper\"}"}),
            _tokens(last_token_usage={"input_tokens": 700, "cached_input_tokens": 0,
                                      "output_tokens": 9}),
            ("response_item", {"type": "function_call_output", "call_id": "c1",
                               "output": "spawned /root/researcher/helper"}),
            ("response_item", report),
            _item("assistant", "RETRY_LIMIT is set in queue/config.py:14."),
            _tokens(last_token_usage={"input_tokens": 800, "cached_input_tokens": 700,
                                      "output_tokens": 12}),
        ],
        source={"subagent": {"thread_spawn": spawn}},
    )  # fmt: skip
    steps = replay(list(read(io.BytesIO(data), format="codex")))["019e-rollout"]
    assert len(steps) == 2
    first, second = (step.before for _, step in steps)
    assert "RETRY_LIMIT" in first[-1].text
    assert "queue/config.py:14" in second[-1].text
