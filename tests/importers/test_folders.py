"""OpenHands sessions kept as folders of event files (``<session>/events/N.json``)."""

from __future__ import annotations

import gzip
import io
import json
import random
import tarfile
import zipfile
from pathlib import Path
from typing import IO, Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from contextview.core.importers import TranscriptError, openhands
from contextview.core.importers.folders import event_folders, read_folder
from contextview.sessions.models import Session
from tests.api_client import Api
from tests.importers.test_core_importers import _sdk_events, ids, replay
from tests.importers.test_import_api import upload

SESSION = Path(__file__).parent / "fixtures" / "openhands_folder" / "oh-folder-5e1c"


def _paths(root: Path) -> list[str]:
    return [p.relative_to(root.parent).as_posix() for p in root.rglob("*") if p.is_file()]


def _open(path: str) -> IO[bytes]:
    return (SESSION.parent / path).open("rb")


def test_it_finds_the_event_files_in_the_order_of_their_numbers() -> None:
    paths = _paths(SESSION)
    random.Random(5).shuffle(paths)
    [folder] = event_folders(paths)  # metadata.json and the event cache are not events
    assert folder.session == "oh-folder-5e1c"
    assert folder.files == tuple(f"oh-folder-5e1c/events/{n}.json" for n in range(14))


def test_it_names_a_folder_given_as_its_events_after_the_archive_or_the_newer_file_names() -> None:
    [alone] = event_folders(["events/1.json", "events/0.json"])
    assert alone.session == "" and alone.files == ("events/0.json", "events/1.json")
    [newer] = event_folders(["c9/events/event-00010-b2.json", "c9/events/event-00002-a1.json"])
    assert newer.session == "c9"
    assert newer.files == ("c9/events/event-00002-a1.json", "c9/events/event-00010-b2.json")


def test_it_reads_a_folder_as_the_same_events_in_one_file() -> None:
    [folder] = event_folders(_paths(SESSION))
    from_folder = list(read_folder(folder, _open))
    stream = [json.loads((SESSION.parent / p).read_bytes()) for p in folder.files]
    as_list = list(openhands.read(io.BytesIO(json.dumps(stream).encode()), fallback=folder.session))
    assert from_folder == as_list

    steps = replay(from_folder)["oh-folder-5e1c"]
    assert len(steps) == 5
    body, condensed = steps[3]
    assert ids(list(condensed.folds[0].originals)) == ["e3", "e4", "e5", "e6"]
    assert ids(condensed.after)[:3] == ["e0", "e1", "cond-e3"]
    assert body["usage"] == {"input_tokens": 600, "cache_read_tokens": 600, "output_tokens": 60}
    assert from_folder[-1]["type"] == "session_end"


def test_it_names_the_event_file_that_is_not_json() -> None:
    [folder] = event_folders(["s/events/0.json", "s/events/1.json"])
    files = {
        "s/events/0.json": b'{"id": 0, "source": "user", "action": "message"}',
        "s/events/1.json": b"{not",
    }
    with pytest.raises(TranscriptError, match=r"^s/events/1.json: is not valid JSON"):
        list(read_folder(folder, lambda p: io.BytesIO(files[p])))


def _zipped(root: Path, *, upto: int | None = None) -> bytes:
    """The session folder as a zip, with only its first `upto` events if given."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in _paths(root):
            folder, _, name = path.rpartition("/")
            if upto is not None and folder.endswith("events") and int(name[:-5]) >= upto:
                continue
            archive.write(root.parent / path, path)
    return out.getvalue()


def _tarred(root: Path) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        archive.add(root, arcname=root.name)
    return out.getvalue()


def test_it_imports_a_zip_of_an_event_folder_and_then_only_what_it_gained(api: Api) -> None:
    first = upload(api, ("oh-folder-5e1c.zip", _zipped(SESSION, upto=9)))
    assert first.status_code == 201, first.content
    assert first.json()["sessions"] == [
        {"session_id": "oh-folder-5e1c", "format": "openhands", "steps": 3, "operations": 0,
         "new_steps": 3},
    ]  # fmt: skip
    grown = upload(api, ("oh-folder-5e1c.zip", _zipped(SESSION)))
    assert grown.status_code == 201, grown.content
    [session] = grown.json()["sessions"]
    assert (session["steps"], session["new_steps"], session["operations"]) == (5, 2, 1)
    condensed = api.get("/sessions/oh-folder-5e1c/steps/3").json()
    assert condensed["ops"][0]["op"] == "summarize"
    assert condensed["folds"][0]["originals"] == ["e3", "e4", "e5", "e6"]
    session = api.get("/sessions/oh-folder-5e1c").json()
    assert (session["status"], session["model"]) == ("succeeded", "gpt-5-mini")


def test_it_finds_a_tar_gz_of_the_same_folder_imported_already(api: Api) -> None:
    assert upload(api, ("run.zip", _zipped(SESSION))).status_code == 201
    again = upload(api, ("run.tar.gz", _tarred(SESSION)))
    assert again.status_code == 200, again.content
    assert again.json()["sessions"][0]["new_steps"] == 0


def test_it_refuses_an_archive_without_events_or_with_a_broken_one_storing_nothing(
    api: Api,
) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("notes/readme.txt", "hello")
    empty = upload(api, ("notes.zip", out.getvalue()))
    assert empty.status_code == 422
    assert "notes.zip: holds no transcript" in empty.json()["error"]

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for path in _paths(SESSION):
            data = (SESSION.parent / path).read_bytes()
            archive.writestr(path, b"{cut" if path.endswith("/7.json") else data)
    broken = upload(api, ("s.zip", out.getvalue()))
    assert broken.status_code == 422
    assert "oh-folder-5e1c/events/7.json: is not valid JSON" in broken.json()["error"]
    assert not Session.objects.filter(project=api.project).exists()
    assert upload(api, ("x.tar.gz", gzip.compress(b"not a tar"))).status_code == 422


def test_it_imports_a_folder_from_the_command_line(
    api: Api, capsys: pytest.CaptureFixture[str]
) -> None:
    call_command("importtranscript", api.project.slug, str(SESSION))
    assert "oh-folder-5e1c  openhands  5 steps (5 new), 1 operations" in capsys.readouterr().out
    # The events folder itself names the same session.
    call_command("importtranscript", api.project.slug, str(SESSION / "events"))
    assert "nothing new" in capsys.readouterr().out
    with pytest.raises(CommandError, match="holds no transcript"):
        call_command("importtranscript", api.project.slug, str(SESSION / "event_cache"))


@override_settings(IMPORT_MAX_BYTES=20_000)
def test_it_refuses_an_archive_that_inflates_past_the_import_limit(api: Api) -> None:
    event = {"id": 0, "source": "user", "action": "message", "args": {"content": " " * 50_000}}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("s/events/0.json", json.dumps(event))
    small = out.getvalue()
    assert len(small) < 2_000
    refused = upload(api, ("s.zip", small))
    assert refused.status_code == 413
    assert "inflates past 20000 bytes" in refused.json()["error"]
    tarred = io.BytesIO()
    with tarfile.open(fileobj=tarred, mode="w:gz") as archive:
        data = json.dumps(event).encode()
        info = tarfile.TarInfo("s/events/0.json")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    assert upload(api, ("s.tar.gz", tarred.getvalue())).status_code == 413


def claude_project(root: Path) -> Path:
    """A Claude Code 2.1 project folder: a session that ran a sub-agent, whose entries
    it logged inline (progress entries), and the sub-agent's own transcript beside it
    in ``<session>/subagents/``, which also holds what was sent of its attachments."""
    sid, agent = "5b1e0c7a-cc21-4f7e-9a10-3e2d6f0b9c41", "a4c19e2"
    common = {"sessionId": sid, "cwd": "/srv/shop", "version": "2.1.38", "gitBranch": "main"}

    def said(uuid: str, parent: str | None, content: Any, **extra: Any) -> dict[str, Any]:
        message = {"role": "user", "content": content}
        return {**common, "type": "user", "uuid": uuid, "parentUuid": parent,
                "isSidechain": False, "message": message, **extra}  # fmt: skip

    def replied(uuid: str, parent: str, mid: str, block: dict[str, Any], **extra: Any) -> Any:
        message = {
            "id": mid,
            "role": "assistant",
            "model": "claude-haiku-4-5",
            "content": [block],
            "usage": {"input_tokens": 9, "output_tokens": 30},
        }
        return {**common, "type": "assistant", "uuid": uuid, "parentUuid": parent,
                "isSidechain": False, "message": message, **extra}  # fmt: skip

    task = {"type": "tool_use", "id": "toolu_task", "name": "Task",
            "input": {"description": "Find the timeout", "prompt": "Where is the 3s timeout?",
                      "subagent_type": "Explore"}}  # fmt: skip
    grep = {"type": "tool_use", "id": "toolu_grep", "name": "Grep", "input": {"pattern": "3000"}}
    found = {"type": "tool_result", "tool_use_id": "toolu_grep",
             "content": "lib/inventory.ex:88: timeout: 3000"}  # fmt: skip
    side = {"isSidechain": True, "agentId": agent}
    sub = [
        said("s-1", None, "Where is the 3s timeout?", **side),
        {**common, **side, "type": "attachment", "uuid": "s-2", "parentUuid": "s-1",
         "attachment": {"type": "nested_memory", "path": "/srv/shop/CLAUDE.md",
                        "content": {"path": "/srv/shop/CLAUDE.md", "content": "Use mix."}}},
        replied("s-3", "s-2", "msg_s1", grep, **side),
        said("s-4", "s-3", [found], **side),
        replied("s-5", "s-4", "msg_s2", {"type": "text", "text": "lib/inventory.ex:88"}, **side),
    ]  # fmt: skip

    def inline(entry: dict[str, Any]) -> dict[str, Any]:
        data = {"type": "agent_progress", "agentId": agent, "prompt": "Where is the 3s timeout?",
                "message": {k: entry[k] for k in ("type", "uuid", "message")}}  # fmt: skip
        return {**common, "type": "progress", "uuid": f"p-{entry['uuid']}", "parentUuid": "a-1",
                "isSidechain": False, "parentToolUseID": "toolu_task", "data": data}  # fmt: skip

    result = {"type": "tool_result", "tool_use_id": "toolu_task",
              "content": [{"type": "text", "text": "lib/inventory.ex:88"}]}  # fmt: skip
    main = [
        {"type": "file-history-snapshot", "messageId": "u-1", "isSnapshotUpdate": False,
         "snapshot": {"messageId": "u-1", "timestamp": "2026-12-01T10:00:00Z",
                      "trackedFileBackups": {}}},
        said("u-1", None, "Why does order SO20260101007 time out?"),
        replied("a-1", "u-1", "msg_1", task),
        *(inline(e) for e in (sub[0], sub[2], sub[3])),
        said("r-1", "a-1", [result], toolUseResult={"agentId": agent, "status": "completed"}),
        replied("a-2", "r-1", "msg_2", {"type": "text", "text": "The inventory call waits 3s."}),
    ]  # fmt: skip
    project = root / "-srv-shop"
    (project / sid / "subagents").mkdir(parents=True)
    (project / sid / "tool-results").mkdir()
    (project / f"{sid}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in main))
    (project / sid / "subagents" / f"agent-{agent}.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in sub)
    )
    (project / sid / "tool-results" / "toolu_grep.txt").write_text("lib/inventory.ex:88")
    return project


def _assertclaude_project_imported(api: Api) -> None:
    sid = "5b1e0c7a-cc21-4f7e-9a10-3e2d6f0b9c41"
    sub = api.get(f"/sessions/{sid}:agent-a4c19e2").json()
    assert sub["metadata"]["parent_session"] == sid
    first = api.get(f"/sessions/{sid}:agent-a4c19e2/steps/0").json()
    assert [m["id"] for m in first["before"]] == ["s-1", "s-2"]  # its own transcript's
    assert api.get(f"/sessions/{sid}:agent-a4c19e2/steps/1").status_code == 200
    last = api.get(f"/sessions/{sid}/steps/1").json()
    assert [m["id"] for m in last["before"]] == ["u-1", "msg_1", "r-1"]


def test_it_imports_a_claude_code_project_folder_with_its_sub_agents(
    api: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = claude_project(tmp_path)
    call_command("importtranscript", api.project.slug, str(project))
    out = capsys.readouterr().out
    assert "5b1e0c7a-cc21-4f7e-9a10-3e2d6f0b9c41  claude-code  2 steps (2 new)" in out
    assert "5b1e0c7a-cc21-4f7e-9a10-3e2d6f0b9c41:agent-a4c19e2  claude-code  2 steps" in out
    _assertclaude_project_imported(api)


def test_it_imports_a_zip_of_a_claude_code_project_folder(api: Api, tmp_path: Path) -> None:
    project = claude_project(tmp_path)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for path in project.rglob("*"):
            if path.is_file():
                archive.write(path, path.relative_to(tmp_path).as_posix())
    response = upload(api, ("-srv-shop.zip", out.getvalue()))
    assert response.status_code == 201, response.content
    assert len(response.json()["sessions"]) == 2
    _assertclaude_project_imported(api)


def test_it_imports_the_sessions_the_typescript_codex_cli_saved_in_a_folder(
    api: Api, tmp_path: Path
) -> None:
    """``~/.codex/sessions`` of Codex CLI's TypeScript releases: one ``rollout-*.json``
    document a session, beside the index and config files that are not transcripts."""
    from tests.importers.test_core_importers import _typescript_rollout

    sessions = tmp_path / "sessions"
    sessions.mkdir()
    doc = _typescript_rollout()
    sid = doc["session"]["id"]
    (sessions / f"rollout-2025-05-02-{sid}.json").write_text(json.dumps(doc, indent=2))
    (sessions / "config.json").write_text(json.dumps({"model": "o4-mini"}))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for path in sessions.iterdir():
            archive.write(path, f"sessions/{path.name}")
    response = upload(api, ("codex-sessions.zip", out.getvalue()))
    assert response.status_code == 201, response.content
    assert [s["session_id"] for s in response.json()["sessions"]] == [sid]
    assert api.get(f"/sessions/{sid}").json()["steps"] == 2


def _sdk_state(usages: list[dict[str, Any]]) -> dict[str, Any]:
    """An OpenHands V1 conversation's base_state.json, with the usage of its calls."""
    metrics = {"model_name": "litellm_proxy/claude-sonnet-4-5", "accumulated_cost": 0.05,
               "accumulated_token_usage": {}, "costs": [], "response_latencies": [],
               "token_usages": usages}  # fmt: skip
    return {"id": "conv-7a1", "agent": {"kind": "Agent"}, "execution_status": "finished",
            "stats": {"usage_to_metrics": {"agent": metrics}}}  # fmt: skip


def _token_usage(response: str, prompt: int, completion: int, cached: int) -> dict[str, Any]:
    return {"model": "litellm_proxy/claude-sonnet-4-5", "prompt_tokens": prompt,
            "completion_tokens": completion, "cache_read_tokens": cached,
            "cache_write_tokens": 0, "reasoning_tokens": 0, "context_window": 200000,
            "per_turn_token": prompt + completion, "response_id": response}  # fmt: skip


def test_it_gives_each_openhands_sdk_call_the_usage_its_state_recorded(api: Api) -> None:
    usages = [_token_usage("resp-1", 4200, 90, 0), _token_usage("resp-2", 4600, 30, 4200)]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for n, event in enumerate(_sdk_events()):
            archive.writestr(f"conv-7a1/events/event-{n:05d}-{event['id']}.json", json.dumps(event))
        archive.writestr("conv-7a1/base_state.json", json.dumps(_sdk_state(usages)))
    response = upload(api, ("conv-7a1.zip", out.getvalue()))
    assert response.status_code == 201, response.content
    first = api.get("/sessions/conv-7a1/steps/0").json()
    assert first["usage"] == {"input_tokens": 4200, "cache_read_tokens": 0, "output_tokens": 90}
    assert first["model"] == "litellm_proxy/claude-sonnet-4-5"
    second = api.get("/sessions/conv-7a1/steps/1").json()
    assert second["usage"] == {"input_tokens": 400, "cache_read_tokens": 4200, "output_tokens": 30}
    assert api.get("/sessions/conv-7a1").json()["model"] == "litellm_proxy/claude-sonnet-4-5"


PARENT_HEX = "8d2f6c0e4b7a4e1f9c3d5a6b7e8f9012"
CHILD_HEX = "1f0e2d3c4b5a49688776655443322110"


def _sdk_task_conversations(root: Path) -> Path:
    """An OpenHands V1 conversation whose task tool started a sub-agent, as the SDK
    persists them: the sub-agent's conversation in ``<parent>/subagents/<id hex>/``,
    beside ``subagents/tasks.json``, its index of tasks."""
    at = "2026-12-02T09:00:{:02d}.000000"
    text = lambda t: {"type": "text", "text": t}  # noqa: E731

    def said(eid: str, n: int, source: str, role: str, words: str, **more: Any) -> dict:
        return {"kind": "MessageEvent", "id": eid, "timestamp": at.format(n), "source": source,
                "llm_message": {"role": role, "content": [text(words)]}, **more}  # fmt: skip

    def act(eid: str, n: int, response: str, call: str, tool: str, args: dict) -> dict:
        kind = "TaskAction" if tool == "task" else "TerminalAction"
        return {"kind": "ActionEvent", "id": eid, "timestamp": at.format(n), "source": "agent",
                "thought": [], "tool_name": tool, "tool_call_id": call,
                "llm_response_id": response,
                "tool_call": {"id": call, "name": tool, "arguments": json.dumps(args)},
                "action": {"kind": kind, **args}}  # fmt: skip

    def seen(eid: str, n: int, call: str, tool: str, output: str) -> dict:
        return {"kind": "ObservationEvent", "id": eid, "timestamp": at.format(n),
                "source": "environment", "tool_name": tool, "tool_call_id": call,
                "observation": {"kind": "TaskObservation", "content": [text(output)]}}  # fmt: skip

    system = {"kind": "SystemPromptEvent", "id": "sys", "timestamp": at.format(0),
              "source": "agent", "system_prompt": text("You are OpenHands."),
              "tools": [{"name": "task", "description": "Launch a subagent"}]}  # fmt: skip
    task = {"prompt": "Find where the 3 s timeout is set.", "subagent_type": "code-explorer"}
    parent = [
        system,
        said("u1", 1, "user", "user", "Why does order SO20260101007 time out?"),
        act("a2", 2, "resp-p1", "toolu_task1", "task", task),
        seen("o3", 9, "toolu_task1", "task", "lib/inventory.ex:88 sets timeout: 3000"),
        said("m4", 10, "agent", "assistant", "The inventory call waits 3 s.",
             llm_response_id="resp-p2"),
    ]  # fmt: skip
    child = [
        {**system, "tools": [{"name": "terminal", "description": "Run a command"}]},
        said("cu1", 3, "user", "user", task["prompt"], sender="Delegator"),
        act("ca2", 4, "resp-c1", "call_grep", "terminal", {"command": "grep -rn 3000 lib"}),
        seen("co3", 5, "call_grep", "terminal", "lib/inventory.ex:88: timeout: 3000"),
        said("cm4", 6, "agent", "assistant", "lib/inventory.ex:88 sets timeout: 3000",
             llm_response_id="resp-c2"),
    ]  # fmt: skip
    index = {"schema_version": 1, "next_id": 2, "legacy_ids": False, "tasks": {
        "task_00000001": {
            "schema_version": 1, "task_id": "task_00000001",
            "parent_conversation_id": "8d2f6c0e-4b7a-4e1f-9c3d-5a6b7e8f9012",
            "conversation_id": "1f0e2d3c-4b5a-4968-8776-655443322110",
            "subagent_type": "code-explorer",
            "invocation": {"action_id": "a2", "tool_call_id": "toolu_task1"},
            "status": "completed", "revision": 1, "start_event_count": 0,
            "result": "lib/inventory.ex:88 sets timeout: 3000", "error": None}}}  # fmt: skip
    conversation = root / PARENT_HEX
    for folder, events in ((conversation, parent), (conversation / "subagents" / CHILD_HEX, child)):
        (folder / "events").mkdir(parents=True)
        for n, event in enumerate(events):
            (folder / "events" / f"event-{n:05d}-{event['id']}.json").write_text(json.dumps(event))
        (folder / "base_state.json").write_text(
            json.dumps({"id": folder.name, "agent": {"kind": "Agent"},
                        "execution_status": "finished", "stats": {"usage_to_metrics": {}}})
        )  # fmt: skip
    (conversation / "subagents" / "tasks.json").write_text(json.dumps(index))
    return conversation


def _assert_sdk_sub_agent_imported(api: Api) -> None:
    sub = api.get(f"/sessions/{CHILD_HEX}").json()
    assert sub["metadata"]["parent_session"] == PARENT_HEX
    assert sub["metadata"]["parent_tool_call_id"] == "toolu_task1"
    assert sub["steps"] == 2
    first = api.get(f"/sessions/{CHILD_HEX}/steps/0").json()
    assert [m["content"] for m in first["before"]][-1][0]["text"] == (
        "Find where the 3 s timeout is set."
    )
    assert "parent_session" not in api.get(f"/sessions/{PARENT_HEX}").json()["metadata"]


def test_it_imports_an_openhands_sdk_sub_agent_as_a_session_of_the_one_that_started_it(
    api: Api, tmp_path: Path
) -> None:
    conversation = _sdk_task_conversations(tmp_path)
    response = upload(api, ("conversations.zip", _zipped(conversation)))
    assert response.status_code == 201, response.content
    assert sorted(s["session_id"] for s in response.json()["sessions"]) == sorted(
        [PARENT_HEX, CHILD_HEX]
    )
    _assert_sdk_sub_agent_imported(api)
    again = upload(api, ("conversations.zip", _zipped(conversation)))
    assert again.status_code == 200, again.content


def test_it_imports_an_openhands_sdk_sub_agent_from_the_command_line(
    api: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conversation = _sdk_task_conversations(tmp_path)
    call_command("importtranscript", api.project.slug, str(conversation))
    out = capsys.readouterr().out
    assert f"{CHILD_HEX}  openhands  2 steps (2 new)" in out
    _assert_sdk_sub_agent_imported(api)


def test_it_takes_the_state_and_task_index_of_a_folder_the_sdk_uploads(
    api: Api, tmp_path: Path
) -> None:
    from contextview.sdk.transcripts import zipped_folder

    conversation = _sdk_task_conversations(tmp_path)
    with zipped_folder(conversation) as zipped:
        response = upload(api, ("conversations.zip", zipped.read()))
    assert response.status_code == 201, response.content
    _assert_sdk_sub_agent_imported(api)
