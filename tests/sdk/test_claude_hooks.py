"""`python -m contextview.sdk hook`, run as Claude Code runs a hook's command (the event
as JSON on stdin), against a real gunicorn and the real database."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, _free_port
from tests.importers.test_folders import claude_project
from tests.sdk.conftest import Reader

pytestmark = pytest.mark.django_db(transaction=True)

SID = "9d2f4c1e-7b3a-4e8f-a6d1-2c5e8b0f3a71"
README = ROOT / "README.md"


class Transcript:
    """A Claude Code session's transcript as Claude Code writes it, a turn at a time:
    the prompt, then per model call its streamed assistant entries (one per content
    block, sharing the message id) and the tool results Claude Code sends back."""

    def __init__(self, folder: Path, sid: str = SID) -> None:
        self.sid = sid
        self.path = folder / "-home-dev-shop" / f"{sid}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.last: str | None = None
        self.n = 0
        self._write(
            {"type": "file-history-snapshot", "messageId": "u-0", "isSnapshotUpdate": False,
             "snapshot": {"messageId": "u-0", "trackedFileBackups": {},
                          "timestamp": "2026-12-01T09:00:00.000Z"}}
        )  # fmt: skip

    def _write(self, entry: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(entry) + "\n")

    def _entry(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        self.n += 1
        uuid = f"{kind[0]}-{self.n}"
        self._write(
            {"parentUuid": self.last, "isSidechain": False, "userType": "external",
             "cwd": "/home/dev/shop", "sessionId": self.sid, "version": "2.1.40",
             "gitBranch": "main", "uuid": uuid, "type": kind,
             "timestamp": f"2026-12-01T09:{self.n // 60:02d}:{self.n % 60:02d}.000Z",
             "message": message, **extra}
        )  # fmt: skip
        self.last = uuid

    def prompt(self, text: str) -> None:
        self._entry("user", {"role": "user", "content": text})

    def call(self, mid: str, *blocks: dict[str, Any]) -> None:
        for block in blocks:
            self._entry(
                "assistant",
                {"model": "claude-sonnet-4-5", "id": mid, "type": "message",
                 "role": "assistant", "content": [block], "stop_reason": None,
                 "usage": {"input_tokens": 4, "cache_read_input_tokens": 8000,
                           "cache_creation_input_tokens": 600, "output_tokens": 60}},
                requestId=f"req_{mid}",
            )  # fmt: skip

    def result(self, tool_use_id: str, output: str) -> None:
        block = {"tool_use_id": tool_use_id, "type": "tool_result", "content": output}
        self._entry("user", {"role": "user", "content": [block]}, toolUseResult={"stdout": output})

    def first_turn(self) -> None:
        self.prompt("Why does order SO20260101007 time out? Check logs/inventory.log")
        self.call("msg_01", {"type": "thinking", "thinking": "The log first.", "signature": "s"},
                  {"type": "tool_use", "id": "toolu_01", "name": "Read",
                   "input": {"file_path": "logs/inventory.log"}})  # fmt: skip
        self.result("toolu_01", "09:14:02 reserve SO20260101007 timeout after 3000ms")
        self.call("msg_02", {"type": "text", "text": "The inventory reservation waits 3 s."})

    def second_turn(self) -> None:
        self.prompt("Raise it to 10 s and run the tests")
        self.call("msg_03", {"type": "tool_use", "id": "toolu_02", "name": "Edit",
                             "input": {"file_path": "lib/inventory.ex", "old_string": "3000",
                                       "new_string": "10_000"}})  # fmt: skip
        self.result("toolu_02", "The file lib/inventory.ex has been updated.")
        self.call("msg_04", {"type": "tool_use", "id": "toolu_03", "name": "Bash",
                             "input": {"command": "mix test"}})  # fmt: skip
        self.result("toolu_03", "42 tests, 0 failures")
        self.call("msg_05", {"type": "text", "text": "Raised to 10 s; the tests pass."})


def payload(event: str, transcript: Path | str, sid: str = SID, **fields: Any) -> str:
    """What Claude Code writes on a hook command's stdin for `event`."""
    own: dict[str, dict[str, Any]] = {
        "Stop": {"stop_hook_active": False},
        "SubagentStop": {"stop_hook_active": False},
        "PreCompact": {"trigger": "auto", "custom_instructions": ""},
        "SessionEnd": {"reason": "prompt_input_exit"},
        "SessionStart": {"source": "startup"},
        "UserPromptSubmit": {"prompt": "Raise it to 10 s"},
        "PreToolUse": {"tool_name": "Bash", "tool_input": {"command": "mix test"}},
        "PostToolUse": {"tool_name": "Bash", "tool_input": {"command": "mix test"},
                        "tool_response": {"stdout": "42 tests, 0 failures"}},
    }  # fmt: skip
    body = {"session_id": sid, "transcript_path": str(transcript), "cwd": "/home/dev/shop",
            "permission_mode": "default", "hook_event_name": event}  # fmt: skip
    return json.dumps({**body, **own[event], **fields})


def hook(
    stdin: str, *, url: str, key: str, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CONTEXTVIEW_URL": url, "CONTEXTVIEW_KEY": key}
    return subprocess.run(
        [sys.executable, "-m", "contextview.sdk", "hook", *args],
        cwd=ROOT, input=stdin, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def quiet(done: subprocess.CompletedProcess[str]) -> None:
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def seen_by(step: dict[str, Any]) -> list[str]:
    return [m["id"] for m in step["before"]]


def test_it_sends_the_session_at_stop_and_then_only_what_it_gained(
    gunicorn_api: str, project_key: str, tmp_path: Path
) -> None:
    reader = Reader(gunicorn_api, project_key)
    transcript = Transcript(tmp_path)
    transcript.first_turn()
    quiet(hook(payload("Stop", transcript.path), url=gunicorn_api, key=project_key))
    first = reader.steps(SID)
    assert [s["model"] for s in first] == ["claude-sonnet-4-5"] * 2
    assert seen_by(first[1]) == ["u-1", "msg_01", "u-4"]  # the prompt, the Read, its result
    session = reader.get(f"/sessions/{SID}")
    assert session["metadata"]["task"].startswith("Why does order SO20260101007 time out?")

    transcript.second_turn()
    quiet(hook(payload("Stop", transcript.path), url=gunicorn_api, key=project_key))
    steps = reader.steps(SID)
    assert len(steps) == 5
    assert [(s["index"], seen_by(s)) for s in steps[:2]] == [
        (s["index"], seen_by(s)) for s in first
    ]
    assert seen_by(steps[4])[-3:] == ["u-8", "msg_04", "u-10"]  # the Edit's result, the tests'


@pytest.mark.parametrize("event", ["SubagentStop", "PreCompact", "SessionEnd"])
def test_it_sends_the_session_at_the_other_events_that_end_a_context(
    event: str, gunicorn_api: str, project_key: str, tmp_path: Path
) -> None:
    transcript = Transcript(tmp_path)
    transcript.first_turn()
    quiet(hook(payload(event, transcript.path), url=gunicorn_api, key=project_key))
    assert len(Reader(gunicorn_api, project_key).steps(SID)) == 2


@pytest.mark.parametrize("event", ["PreToolUse", "PostToolUse", "UserPromptSubmit", "SessionStart"])
def test_it_leaves_the_other_events_alone(
    event: str, gunicorn_api: str, project_key: str, tmp_path: Path
) -> None:
    transcript = Transcript(tmp_path)
    transcript.first_turn()
    quiet(hook(payload(event, transcript.path), url=gunicorn_api, key=project_key))
    response = Reader(gunicorn_api, project_key).http.get(f"/api/v1/sessions/{SID}")
    assert response.status_code == 404


def test_it_sends_a_sub_agent_from_its_own_transcript(
    gunicorn_api: str, project_key: str, tmp_path: Path
) -> None:
    project = claude_project(tmp_path)
    sid, agent = "5b1e0c7a-cc21-4f7e-9a10-3e2d6f0b9c41", "a4c19e2"
    stop = payload(
        "SubagentStop", project / f"{sid}.jsonl", sid, agent_id=agent,
        agent_type="Explore", agent_transcript_path=str(
            project / sid / "subagents" / f"agent-{agent}.jsonl"),
    )  # fmt: skip
    quiet(hook(stop, url=gunicorn_api, key=project_key))
    quiet(hook(payload("Stop", project / f"{sid}.jsonl", sid), url=gunicorn_api, key=project_key))
    reader = Reader(gunicorn_api, project_key)
    sub = reader.steps(f"{sid}:agent-{agent}")
    # its own transcript's context, with the attachment the session's file leaves out
    assert [seen_by(s) for s in sub][0] == ["s-1", "s-2"]
    assert len(sub) == 2
    assert len(reader.steps(sid)) == 2


def test_it_says_in_one_line_why_nothing_was_sent_and_lets_the_agent_go_on(
    gunicorn_api: str, project_key: str, tmp_path: Path
) -> None:
    transcript = Transcript(tmp_path)
    transcript.first_turn()
    stop = payload("Stop", transcript.path)
    down = f"http://127.0.0.1:{_free_port()}"
    cases = [
        (hook(stop, url=down, key=project_key), rf"cannot reach {down}"),
        (hook(stop, url=gunicorn_api, key="cv_not_a_key"), r"HTTP 401"),
        (hook(stop, url=gunicorn_api, key=""), r"no key"),
        (hook(payload("Stop", tmp_path / "gone.jsonl"), url=gunicorn_api, key=project_key),
         r"no transcript at .*gone\.jsonl"),
        (hook("Stop\n", url=gunicorn_api, key=project_key), r"stdin is not JSON"),
        (hook('{"session_id": "x"}', url=gunicorn_api, key=project_key), "no hook_event_name"),
        (hook("", url=gunicorn_api, key=project_key), r"no hook input"),
        (hook(stop, url=gunicorn_api, key=project_key, args=("--timeout", "soon")),
         r"--timeout: invalid float value"),
    ]  # fmt: skip
    for done, why in cases:
        assert done.returncode == 0, done.stderr
        assert done.stdout == ""
        assert re.fullmatch(rf"contextview hook: .*{why}.*\n", done.stderr), done.stderr
    response = Reader(gunicorn_api, project_key).http.get(f"/api/v1/sessions/{SID}")
    assert response.status_code == 404


def test_help_says_what_it_does() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "contextview.sdk", "hook", "--help"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    for said in ("Stop, SubagentStop, PreCompact and SessionEnd", "always exits 0", "--timeout"):
        assert said in done.stdout


def readme_settings() -> dict[str, Any]:
    text = README.read_text()
    section = text[text.index("\n### Claude Code hooks\n") :]
    found = re.search(r"```json\n(.*?)```", section, re.S)
    assert found, "the Claude Code hooks paragraph has no settings.json snippet"
    settings: dict[str, Any] = json.loads(found.group(1))
    return settings


def test_the_readmes_settings_send_the_session_as_written(
    gunicorn_api: str, project_key: str, tmp_path: Path
) -> None:
    hooks = readme_settings()["hooks"]
    assert sorted(hooks) == ["PreCompact", "SessionEnd", "Stop", "SubagentStop"]
    transcript = Transcript(tmp_path / "claude")
    transcript.first_turn()
    workspace = tmp_path / "shop"
    workspace.mkdir()
    # Claude Code runs each command through the shell, in the project, with its own
    # environment: here the Python the tests run (with the SDK on its path) is `python`.
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "CONTEXTVIEW_URL": gunicorn_api,
        "CONTEXTVIEW_KEY": project_key,
    }
    for event, matchers in hooks.items():
        [matcher] = matchers
        [command] = matcher["hooks"]
        assert command["type"] == "command"
        if event == "SessionEnd":
            transcript.second_turn()
        done = subprocess.run(
            ["sh", "-c", command["command"]], cwd=workspace, env=env,
            input=payload(event, transcript.path), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        quiet(done)
    assert len(Reader(gunicorn_api, project_key).steps(SID)) == 5
