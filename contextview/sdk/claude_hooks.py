"""`python -m contextview.sdk hook`: Claude Code sends its sessions from its own hooks,
with no watcher running.

Claude Code runs a hook's command with the event as a JSON object on standard input
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, and the event's own
fields). On Stop, SubagentStop, PreCompact and SessionEnd this command uploads the
session's transcript (``transcript_path``, with its sub-agents' own transcripts in
``<session>/subagents/``) to ``POST /api/v1/import``, which adds only what the file
gained since the last upload; on PreCompact that is the context as it was before Claude
Code compacts it. Any other event is left alone at once.

It never stands in the agent's way: it always exits 0, writes nothing on standard
output (Claude Code reads it), gives the server --timeout seconds to answer, and says
any problem (server down, key refused, transcript missing, input not a hook's) in one
line on standard error. The server and key come from CONTEXTVIEW_URL and CONTEXTVIEW_KEY
in the environment Claude Code runs in, or --url and --key in the command.

In ~/.claude/settings.json (or a project's .claude/settings.json), for each of the four
events:

  "Stop": [{"hooks": [{"type": "command", "command": "python -m contextview.sdk hook"}]}]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from contextview.sdk.transcripts import describe, upload

# The events after which the transcript holds something new worth sending: a turn or
# a sub-agent finished, a compaction is about to replace the context, the session ends.
SENDING_EVENTS = frozenset({"Stop", "SubagentStop", "PreCompact", "SessionEnd"})

DEFAULT_TIMEOUT = 5.0
USER_AGENT = "contextview-sdk/1 (claude-code hook)"


class HookProblem(Exception):
    """What kept the hook from sending, said in one line."""


def _say(problem: str) -> None:
    print(f"contextview hook: {' '.join(problem.split())}", file=sys.stderr, flush=True)


def read_hook_input(raw: bytes) -> dict[str, Any]:
    """The event Claude Code sent, checked for what this hook needs of it."""
    if not raw.strip():
        raise HookProblem("no hook input on stdin (Claude Code sends the event as JSON)")
    try:
        event = json.loads(raw)
    except ValueError as exc:
        raise HookProblem(f"stdin is not JSON ({exc}): not a Claude Code hook's input") from None
    if not isinstance(event, dict) or not isinstance(event.get("hook_event_name"), str):
        raise HookProblem("stdin has no hook_event_name: not a Claude Code hook's input")
    return event


def send_transcript(
    http: httpx.Client, url: str, key: str, event: dict[str, Any], *, timeout: float
) -> None:
    """Upload the transcript of the session `event` names; HookProblem if it was not
    taken."""
    name = event["hook_event_name"]
    where = event.get("transcript_path")
    if not isinstance(where, str) or not where:
        raise HookProblem(f"{name}: the hook input has no transcript_path")
    path = Path(where).expanduser()
    if not path.is_file():
        raise HookProblem(f"{name}: no transcript at {path}")
    try:
        sent = upload(http, url, key, path, format="claude-code", sub_agents=True)
    except OSError as exc:
        raise HookProblem(f"{name}: cannot read {path}: {exc.strerror or exc}") from None
    except httpx.TimeoutException:
        raise HookProblem(f"{name}: {url} did not answer within {timeout:g} s") from None
    except httpx.HTTPError as exc:
        raise HookProblem(f"{name}: cannot reach {url} ({type(exc).__name__}: {exc})") from None
    if sent.status not in (200, 201):
        raise HookProblem(f"{name}: {describe(path, sent)}")


def hook_main(
    url: str, key: str, *, timeout: float, stdin: Callable[[], bytes] | None = None
) -> int:
    """Handle the hook event on standard input (or `stdin`): always 0, problems said in
    one line on stderr."""
    try:
        event = read_hook_input((stdin or read_stdin)())
        if event["hook_event_name"] not in SENDING_EVENTS:
            return 0
        if not key:
            raise HookProblem("no key (set CONTEXTVIEW_KEY, or --key)")
        with httpx.Client(timeout=timeout, headers={"User-Agent": USER_AGENT}) as http:
            send_transcript(http, url, key, event, timeout=timeout)
    except HookProblem as exc:
        _say(str(exc))
    except Exception as exc:  # noqa: BLE001 - a hook must never break the agent
        _say(f"failed: {type(exc).__name__}: {exc}")
    return 0


def read_stdin() -> bytes:
    """Standard input, or nothing when it is a terminal (someone ran the command by hand:
    Claude Code always sends the event)."""
    if sys.stdin is None or sys.stdin.isatty():
        return b""
    return sys.stdin.buffer.read()
