"""`python -m contextview.sdk hook`: Claude Code sends its sessions from its own hooks,
with no watcher running.

Claude Code runs a hook's command with the event as a JSON object on standard input
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, and the event's own
fields). On Stop, SubagentStop, PreCompact and SessionEnd this command reads the
session's transcript (``transcript_path``) and its sub-agents' own transcripts
(``<session>/subagents/``) as ``watch`` does, and posts to ``POST /api/v1/ingest`` only
the events it has not sent yet: what the session gained since the last hook, so that a
long session costs each hook its last turn, not its whole file. On PreCompact that is
the context as it was before Claude Code compacts it. At SubagentStop the session is
still in its turn and other sub-agents may still be writing: their last model call,
whose reply may be streaming in, waits for the next hook (the stopped sub-agent's own
transcript is sent whole). Any other event is left alone at once.

What it has sent is kept between runs in one small file per session,
STATE-DIR/<session_id>.json (--state-dir; by default $XDG_STATE_HOME/contextview/hooks,
else ~/.local/state/contextview/hooks): the ids of the events the server answered for,
and the size and time of each transcript when it was last read through. It is written
whole under a new name and renamed into place, while a lock (<session_id>.lock) keeps
the hooks of one session (a SubagentStop and a Stop close together) from sending at
once. A state file that is missing, unreadable, of another version or kept for another
server or key costs nothing but time: everything is sent again, the server answers what
it holds as duplicates, and the file is written anew. Events the server did not take (it
is down, busy, or refuses the key) are not recorded, and go again at the next hook.

It never stands in the agent's way: it always exits 0, writes nothing on standard
output (Claude Code reads it), gives the server --timeout seconds to answer each
request, and says any problem (server down, key refused, transcript missing, input not
a hook's) in one line on standard error. The server and key come from CONTEXTVIEW_URL
and CONTEXTVIEW_KEY in the environment Claude Code runs in, or --url and --key in the
command.

In ~/.claude/settings.json (or a project's .claude/settings.json), for each of the four
events:

  "Stop": [{"hooks": [{"type": "command", "command": "python -m contextview.sdk hook"}]}]
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from contextview.core.importers import IMPORTED, claude_code
from contextview.sdk.transcripts import (
    Followed,
    NotSent,
    send_new_events,
    sub_agent_files,
    transcript_state,
)

# The events after which the transcript holds something new worth sending: a turn or
# a sub-agent finished, a compaction is about to replace the context, the session ends.
SENDING_EVENTS = frozenset({"Stop", "SubagentStop", "PreCompact", "SessionEnd"})

DEFAULT_TIMEOUT = 5.0
USER_AGENT = "contextview-sdk/1 (claude-code hook)"

# The layout of the state files: one of another version is read as none.
STATE_VERSION = 1
# Added to the metadata of the sessions it sends, as an import marks those it reads
# (``Session.imported_from``): no agent listens to them, so the dashboard shows them as
# read from a transcript, not as agents gone quiet, and offers no mode switch.
MARK = {IMPORTED: claude_code.FORMAT}
# A session id that is a file name as it is (Claude Code's are UUIDs).
PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


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


def default_state_dir() -> Path:
    """$XDG_STATE_HOME/contextview/hooks, else ~/.local/state/contextview/hooks (a
    relative XDG_STATE_HOME is ignored, as the XDG base directory spec says)."""
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "contextview" / "hooks"


def state_file(folder: Path, session_id: str) -> Path:
    """Where the hooks of `session_id` keep what they sent."""
    if PLAIN_NAME.fullmatch(session_id):
        return folder / f"{session_id}.json"
    return folder / f"{hashlib.sha256(session_id.encode()).hexdigest()[:32]}.json"


def _server_of(url: str, key: str) -> str:
    """Which server and project the ids were sent to, without keeping the key: ids sent
    to one say nothing of another."""
    return hashlib.sha256(f"{url}\n{key}".encode()).hexdigest()[:32]


def load_state(path: Path, server: str) -> dict[str, Followed]:
    """What the hooks of a session sent to `server`, by transcript; nothing (everything
    is sent again) when the file is missing, unreadable, corrupt, of another version or
    of another server."""
    try:
        saved = json.loads(path.read_bytes())
        if saved["version"] != STATE_VERSION or saved["server"] != server:
            return {}
        return {str(where): _followed(kept) for where, kept in saved["files"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}


def _followed(kept: dict[str, Any]) -> Followed:
    seen, sent = kept["seen"], kept["sent"]
    if not isinstance(sent, list) or not all(isinstance(i, str) for i in sent):
        raise ValueError("sent: not a list of event ids")
    if seen is None:
        return Followed(sent=set(sent))
    if not (
        isinstance(seen, list)
        and len(seen) == 4
        and all(type(n) is int for n in seen[:3])
        and isinstance(seen[3], bool)
    ):
        raise ValueError("seen: not [inode, size, mtime, live]")
    return Followed(state=(seen[0], seen[1], seen[2], seen[3]), sent=set(sent))


def save_state(path: Path, server: str, files: dict[str, Followed]) -> None:
    """Write the state whole under a new name, then rename it into place: a hook that
    reads it meanwhile finds the old state or the new, never part of one."""
    saved = {
        "version": STATE_VERSION,
        "server": server,
        "files": {
            where: {"seen": None if f.state is None else list(f.state), "sent": sorted(f.sent)}
            for where, f in files.items()
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(saved, out, separators=(",", ":"))
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


@contextlib.contextmanager
def session_lock(path: Path, *, wait: float) -> Iterator[None]:
    """Hold the lock file `path` while the block runs, so that the hooks of one session
    take turns, waiting up to `wait` seconds for another to finish. Past that, or where
    it cannot be had (no flock on Windows, a folder that cannot be written), the block
    runs all the same: two hooks at once at worst send the same events twice, and the
    server answers the second copies as duplicates."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("a")
    except OSError:
        yield
        return
    with handle:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield
                    return
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def transcript_of(event: dict[str, Any]) -> Path:
    """The session's transcript the hook input names; HookProblem without one."""
    name = event["hook_event_name"]
    where = event.get("transcript_path")
    if not isinstance(where, str) or not where:
        raise HookProblem(f"{name}: the hook input has no transcript_path")
    path = Path(where).expanduser()
    if not path.is_file():
        raise HookProblem(f"{name}: no transcript at {path}")
    return path


def _stopped_agent(event: dict[str, Any], path: Path) -> str | None:
    """At SubagentStop, the file name of the sub-agent's own transcript."""
    where = event.get("agent_transcript_path")
    if isinstance(where, str) and where:
        return Path(where).name
    agent = event.get("agent_id")
    return f"agent-{agent}.jsonl" if isinstance(agent, str) and agent else None


def send_session(
    http: httpx.Client,
    url: str,
    key: str,
    event: dict[str, Any],
    *,
    timeout: float,
    state_dir: Path,
) -> list[str]:
    """Send what the session `event` names gained since its hooks before, and keep what
    was sent in its state file; the problems met, each a line."""
    path = transcript_of(event)
    session = event.get("session_id")
    saved = state_file(state_dir, session if isinstance(session, str) and session else path.stem)
    server = _server_of(url, key)
    problems: list[str] = []
    with session_lock(saved.with_suffix(".lock"), wait=timeout):
        followed = load_state(saved, server)
        try:
            _send_new(http, url, key, event, path, followed, problems, timeout=timeout)
        finally:
            try:
                save_state(saved, server, followed)
            except OSError as exc:
                problems.append(
                    f"cannot keep what was sent in {saved} ({exc.strerror or exc}): "
                    "the next hook sends the session whole again"
                )
    return problems


def _send_new(
    http: httpx.Client,
    url: str,
    key: str,
    event: dict[str, Any],
    path: Path,
    followed: dict[str, Followed],
    problems: list[str],
    *,
    timeout: float,
) -> None:
    """Post the new events of the session's transcript, then of each sub-agent's, each
    file read only when it changed, and record in `followed` what the server answered
    for. A sub-agent's own file holds it whole, so the session's leaves it out."""
    name = event["hook_event_name"]
    agents = sub_agent_files(path)
    # At SubagentStop the session is in its turn and other sub-agents may be writing:
    # only the stopped sub-agent's last call is surely complete.
    stopped = _stopped_agent(event, path) if name == "SubagentStop" else None
    elsewhere_of = claude_code.kept_apart(str(p) for p in (path, *agents))
    for each in (path, *agents):
        live = name == "SubagentStop" and (each == path or each.name != stopped)
        try:
            state = (*transcript_state(each, None), live)
        except OSError as exc:
            problems.append(f"{name}: cannot read {each}: {exc.strerror or exc}")
            continue
        known = followed.setdefault(str(each), Followed())
        if known.unchanged(state):
            continue
        try:
            _, said = send_new_events(
                http,
                url,
                key,
                each,
                live=live,
                sent=known.sent,
                leave=elsewhere_of(str(each)),
                metadata=MARK,
            )
        except NotSent as exc:
            # The server would answer the other files alike: they wait for the next hook.
            problems.extend([*exc.problems, f"{name}: {each}: not sent: {exc}"])
            return
        except httpx.TimeoutException:
            problems.append(f"{name}: {url} did not answer within {timeout:g} s")
            return
        except httpx.HTTPError as exc:
            problems.append(f"{name}: cannot reach {url} ({type(exc).__name__}: {exc})")
            return
        except OSError as exc:
            problems.append(f"{name}: cannot read {each}: {exc.strerror or exc}")
            continue
        known.state = state
        problems.extend(said)


def hook_main(
    url: str,
    key: str,
    *,
    timeout: float,
    state_dir: Path | None = None,
    stdin: Callable[[], bytes] | None = None,
) -> int:
    """Handle the hook event on standard input (or `stdin`): always 0, problems said in
    one line each on stderr."""
    try:
        event = read_hook_input((stdin or read_stdin)())
        if event["hook_event_name"] not in SENDING_EVENTS:
            return 0
        if not key:
            raise HookProblem("no key (set CONTEXTVIEW_KEY, or --key)")
        with httpx.Client(timeout=timeout, headers={"User-Agent": USER_AGENT}) as http:
            problems = send_session(
                http, url, key, event, timeout=timeout, state_dir=state_dir or default_state_dir()
            )
        for problem in dict.fromkeys(problems):
            _say(problem)
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
