"""Claude Code session transcripts (``~/.claude/projects/<project>/<session>.jsonl``).

One JSON object per line. ``user`` and ``assistant`` entries carry an Anthropic
``message`` whose content blocks (``text``, ``tool_use``, ``tool_result``,
``thinking``, ``image``) are kept as written. A model call is one assistant
message id: Claude Code logs a streamed reply as several entries sharing that id,
one block each, which are joined. The context of a call is every message logged
before its first entry. A ``system`` entry of subtype ``compact_boundary``
(``compactMetadata``: ``trigger``, ``preTokens``) followed by the
``isCompactSummary`` user entry is a summary of everything before it, but for the
messages a partial compaction kept: those ``compactMetadata`` lists in
``preservedMessages.uuids``, or the ``preservedSegment``, the chain of entries from
its ``headUuid`` to its ``tailUuid``. Claude Code leaves the kept entries where they
were logged and sends them on with the summary; they stay in the context. Sidechain
entries (a sub-agent's calls) form sessions of their own, named after the main
session and the ``agentId``; so do the sub-agent entries Claude Code 2.1 logs
inline, each inside a ``progress`` entry of its parent (``data.type``
``agent_progress``, ``data.agentId``, ``data.message`` the sub-agent's entry).
The output of its print mode (``--output-format stream-json``) is read as the same
entries (`_as_entry`); the ``result`` line it ends with tells how the session ended
(``subtype`` ``success``, or an error).

A session branched from another (``/branch``, ``--fork-session``, a sub-agent forked
with its parent's context) opens with a copy of the conversation it branched from:
the same entries, each with ``forkedFrom`` (``sessionId``, ``messageUuid``). The copy
is the context of the branch's first call, not calls of its own (their replies and
usage belong to the session they were made in), and ``forkedFrom.sessionId`` is kept
as ``metadata.forked_from``.

A resumed session (``--resume``, ``--continue``) that Claude Code 1.0 gave a session
id of its own is a transcript that opens with a copy of the conversation it resumed,
before the new turns: the same entries (``uuid``, ``message.id``, ``usage``,
timestamps), written with the new session's id, after the ``summary`` lines that title
that conversation and name its last entry (``leafUuid``), or still with the id of the
session they were copied from. A ``summary`` is appended after the entry it names, so
one that comes before it marks a copy: the lines up to that entry were copied. Entries
of another session that the file's own conversation then goes on from (its first
entry's ``parentUuid`` is one of theirs) were copied too. Either copy is the context
of the resumed session's first call, as a branch's is, with no step or usage of its
own: those calls were made, and counted, in the session resumed; its id, when the copy
names it, is kept as ``metadata.resumed_from``. The resumed session stays a session
of its own rather than more steps of the one it resumed: one conversation can be
resumed more than once, each time into a new file that copies the same history and
goes on differently from it.

An entry logged again (the same ``uuid``) is read once. Entries chain by
``parentUuid``. A user's prompt whose parent is not the entry
logged just before it went back to an earlier point of the conversation (a
rewind): what was logged after that point stays in the file as an abandoned
branch, and leaves the context.

What reaches the model is what Claude Code sends of its entries: ``user`` and
``assistant`` messages (``isMeta`` ones too), ``system`` entries of subtype
``local_command`` (sent as user messages), and ``attachment`` entries (memory
files, hook context, queued prompts, reminders: each sent as a user message, but
for the kinds Claude Code sends nothing of). Progress, snapshots, queue operations,
titles and other system entries never reach it, nor does an API error Claude Code
logged as a ``<synthetic>`` reply with ``isApiErrorMessage``. A ``system`` entry of
subtype ``microcompact_boundary`` (``microcompactMetadata``: ``compactedToolIds``,
``clearedAttachmentUUIDs``, ``tokensSaved``) clears old tool results from every later
call: the results of those tool uses are sent as ``[Old tool result content
cleared]`` (a ``truncate`` of each), and those attachments no longer (a ``drop``).

The session's task (``metadata.task``) is the last prompt before its first call, the one
that made it (`asked`): not the local commands run before it, nor a branched session's
copy of the other one's prompts.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from contextview.core.errors import short_repr
from contextview.core.importers._log import (
    Event,
    SessionLog,
    TranscriptError,
    compaction_reason,
    json_kind,
    json_lines,
    line_error,
    own_lines,
    token_count,
    unfit,
)
from contextview.core.importers._task import plain_text
from contextview.core.parts import part_kind

FORMAT = "claude-code"
ENTRY_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "attachment",
        "custom-title",
        "ai-title",
        "agent-name",
        "last-prompt",
        "permission-mode",
        "mode",
        "pr-link",
        "worktree-state",
        "saved_hook_context",
    }
)
# Claude Code writes these itself (API errors, interruptions); no model produced them.
SYNTHETIC_MODEL = "<synthetic>"
# What a microcompaction leaves of a tool result it clears.
CLEARED_RESULT = "[Old tool result content cleared]"
# Attachments Claude Code logs and sends nothing of to the model (the later ones
# are of kinds it no longer writes, kept for the transcripts that hold them).
SILENT_ATTACHMENTS = frozenset(
    {
        "already_read_file",
        "command_permissions",
        "dynamic_skill",
        "edited_image_file",
        "hook_cancelled",
        "hook_error_during_execution",
        "hook_non_blocking_error",
        "hook_permission_decision",
        "hook_system_message",
        "structured_output",
        "autocheckpointing",
        "background_task_status",
        "todo",
        "task_progress",
        "ultramemory",
    }
)
# Hook events whose successful output is sent on to the model.
HOOKS_HEARD = frozenset({"SessionStart", "UserPromptSubmit"})
# What Claude Code adds to a user's message that the user did not write: reminders,
# the file the IDE had open or the lines selected in it, a background task's notice.
_ADDED = re.compile(
    r"<(system-reminder|ide_opened_file|ide_selection|task-notification)>.*?</\1>", re.S
)
# User messages Claude Code writes itself: a local command's caveat and output, a shell
# command run from the prompt (``!``) and its output, a request the user interrupted.
_NOT_ASKED = (
    "<local-command-",
    "Caveat: The messages below were generated by the user while running local commands",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "[Request interrupted by user",
)
_COMMAND = re.compile(r"<command-name>\s*(.*?)\s*</command-name>", re.S)
_COMMAND_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.S)


def looks_like(first: dict[str, Any]) -> bool:
    first = _as_entry(first)
    kind = part_kind(first)
    if kind in ENTRY_TYPES:
        return any(k in first for k in ("sessionId", "messageId", "uuid", "leafUuid"))
    # Claude Code keeps adding metadata entries (titles, modes, links), each with its
    # session: a file may open with one this reader does not know yet.
    return (
        isinstance(kind, str) and isinstance(first.get("sessionId"), str) and "payload" not in first
    )


def _as_entry(line: dict[str, Any]) -> dict[str, Any]:
    """A line of Claude Code's print mode (``claude -p --output-format stream-json``,
    the Agent SDK's messages) as the transcript's entry: that output spells the session
    ``session_id``, and marks a sub-agent's messages with the ``parent_tool_use_id`` of
    the Task call that started it, where a transcript logs them as a sidechain."""
    if "sessionId" in line or not isinstance(line.get("session_id"), str):
        return line
    entry = {**line, "sessionId": line["session_id"]}
    parent = line.get("parent_tool_use_id")
    if isinstance(parent, str) and parent and "isSidechain" not in line:
        entry.update(isSidechain=True, agentId=parent, parentToolUseID=parent)
    return entry


def asked(content: Any) -> str:
    """What a user's prompt asks (the session's task): its text without what Claude Code
    added to it, a slash command as the user typed it ("/review PR 123"), or "" for a
    message Claude Code wrote itself."""
    text = _ADDED.sub("", plain_text(content)).strip()
    if text.startswith(_NOT_ASKED):
        return ""
    command = _COMMAND.search(text)
    if command is None:
        return text
    name = command.group(1) if command.group(1).startswith("/") else f"/{command.group(1)}"
    args = _COMMAND_ARGS.search(text)
    return f"{name} {args.group(1).strip()}".strip() if args else name


def _usage(raw: Any, lineno: int) -> dict[str, int] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise line_error(
            lineno, f"message.usage: must be an object of token counts, not {json_kind(raw)}"
        )
    out = {
        ours: token_count(raw.get(theirs), f"line {lineno}: message.usage.{theirs}")
        for ours, theirs in (
            ("input_tokens", "input_tokens"),
            ("output_tokens", "output_tokens"),
            ("cache_read_tokens", "cache_read_input_tokens"),
            ("cache_write_tokens", "cache_creation_input_tokens"),
        )
    }
    return {k: v for k, v in out.items() if v is not None} or None


def _texts(value: Any, out: list[str]) -> None:
    """The strings an attachment holds, depth first (its ``type`` aside)."""
    if isinstance(value, str):
        if value:
            out.append(value)
    elif isinstance(value, list):
        for item in value:
            _texts(item, out)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key != "type":
                _texts(item, out)


def _attachment(entry: dict[str, Any], mid: str) -> dict[str, Any] | None:
    """An ``attachment`` entry as the user message the model was sent, or None for
    one of a kind Claude Code sends nothing of. The text Claude Code puts around
    what an attachment holds is its own and is not written here: the message holds
    the attachment's own text (a queued prompt as the user wrote it)."""
    att = entry.get("attachment")
    if not isinstance(att, dict):
        return None
    kind = part_kind(att)
    content: Any = None
    if kind in SILENT_ATTACHMENTS:
        return None
    if kind == "hook_success" and att.get("hookEvent") not in HOOKS_HEARD:
        return None
    if kind == "queued_command" and isinstance(att.get("prompt"), str | list):
        content = att["prompt"]
    else:
        texts: list[str] = []
        _texts(att, texts)
        if not texts:
            return None  # nothing to send (no hook context, no diagnostics)
        content = "\n\n".join(texts)
    return {"id": mid, "role": "user", "content": content}


@dataclass
class _Call:
    """A model call whose reply may still be streaming in."""

    message_id: str
    timestamp: str | None
    model: str | None
    usage: dict[str, int] | None
    # the context the call saw, as ids, and the operations staged before it
    obs_at: int = 0
    blocks: list[Any] = field(default_factory=list)


@dataclass
class _Session:
    log: SessionLog
    call: _Call | None = None
    compaction: dict[str, Any] | None = None
    # the message each tool result was logged in, and of each such message its
    # blocks (a lone block without its content: a microcompaction clears it whole)
    result_of: dict[str, str] = field(default_factory=dict)
    shapes: dict[str, list[Any]] = field(default_factory=dict)

    def last_message(self) -> str | None:
        """The id of the message the conversation ends with now (a reply still
        streaming in is placed where its call began)."""
        call, context = self.call, self.log.context
        if call is not None and len(context) == call.obs_at:
            return call.message_id
        return context[-1] if context else None


@dataclass
class _Chain:
    """The ``parentUuid`` chain of a session's main conversation: the last entry
    logged, and for each entry the message the conversation ended with there."""

    tip: str | None = None
    ends_at: dict[str, str | None] = field(default_factory=dict)
    # each entry's parentUuid, and the message each user or assistant entry logged
    parent: dict[str, str | None] = field(default_factory=dict)
    message_of: dict[str, str] = field(default_factory=dict)
    # the entries the last compaction kept: a prompt that follows one is no rewind
    kept: set[str] = field(default_factory=set)

    def preserved(self, meta: dict[str, Any]) -> set[str]:
        """The uuids of the entries a compaction kept (its ``compactMetadata``)."""
        listed = meta.get("preservedMessages", meta.get("preserved_messages"))
        if isinstance(listed, dict):
            uuids = listed.get("uuids")
            if isinstance(uuids, list):
                return {u for u in uuids if isinstance(u, str)}
        segment = meta.get("preservedSegment", meta.get("preserved_segment"))
        if not isinstance(segment, dict):
            return set()
        head = segment.get("headUuid", segment.get("head_uuid"))
        at = segment.get("tailUuid", segment.get("tail_uuid"))
        found: set[str] = set()
        while isinstance(at, str) and at in self.parent and at not in found:
            found.add(at)
            if at == head:
                return found
            at = self.parent[at]
        return set()  # the chain does not lead from the tail to the head


def agent_session(main: str, agent: str) -> str:
    """The session of a sub-agent `agent` of session `main`."""
    return f"{main}:agent-{agent}"


# Where Claude Code 2.1 keeps a sub-agent's own transcript: beside its session's.
_AGENT_FILE = re.compile(r"(?:^|/)([^/]+)/subagents/agent-([^/]+)\.jsonl$")


def agent_file_session(path: str) -> str | None:
    """The session of the sub-agent whose transcript is at `path`
    (``<session>/subagents/agent-<id>.jsonl``), or None for another file."""
    found = _AGENT_FILE.search(path)
    return agent_session(found.group(1), found.group(2)) if found else None


def kept_apart(paths: Iterable[str]) -> Callable[[str], set[str]]:
    """Of the transcripts at `paths`, read one at a time: for a path, the sub-agent
    sessions another of them holds whole (their own files), which what a parent's
    transcript logged of them inline must leave alone (it lacks their attachments and
    their last reply: read as well, it would be a second version of their steps)."""
    own = {path: session for path in paths if (session := agent_file_session(path))}

    def of(path: str) -> set[str]:
        return {session for p, session in own.items() if p != path}

    return of


def _forked_from(entry: dict[str, Any]) -> str | None:
    """The session an entry was copied from, when a branched session copied it."""
    source = entry.get("forkedFrom")
    sid = source.get("sessionId") if isinstance(source, dict) else None
    return sid if isinstance(sid, str) and sid else None


def _agent_entry(entry: dict[str, Any]) -> dict[str, Any] | None:
    """The sub-agent's entry a ``progress`` entry carries, as a sidechain entry of its
    own; None for other progress (hooks, tools)."""
    data = entry.get("data")
    if not isinstance(data, dict) or data.get("type") != "agent_progress":
        return None
    inner, agent = data.get("message"), data.get("agentId")
    if not isinstance(inner, dict) or inner.get("type") not in ("user", "assistant"):
        return None
    if not isinstance(agent, str) or not agent:
        return None
    outer = {k: entry[k] for k in ("sessionId", "cwd", "version", "gitBranch") if k in entry}
    return {
        **outer,
        **inner,
        "isSidechain": True,
        "agentId": agent,
        "parentToolUseID": entry.get("parentToolUseID"),
    }


@dataclass(frozen=True)
class _Copy:
    """The history a resumed session's transcript opens with: its first `until` lines."""

    until: int
    # the session the copy is the start of, when its entries name the one they left
    session: str | None = None
    # the session it was copied from, when its entries say
    source: str | None = None


# The entries that are the conversation (what a call is sent, and its replies).
_SENT_KINDS = ("user", "assistant", "system", "attachment")


def _copied_history(lines: Iterator[tuple[int, dict[str, Any]]], *, live: bool) -> _Copy | None:
    """The copy a transcript opens with, when it is a resumed session's (see the
    module's docstring); None for a transcript that copied nothing. `live`: a summary
    whose entry is not there yet may name the end of a copy still being written, so
    the whole file is taken for one until the file is read complete."""
    leaves: set[str] = set()  # named by a summary before their entry was read
    session_of: dict[str, str] = {}  # uuid -> session, of the main conversation's entries
    first: str | None = None  # the session of the main conversation's first entry
    last_line = until = 0
    for lineno, entry in lines:
        kind = part_kind(entry)
        if kind == "summary":
            leaf = entry.get("leafUuid")
            if isinstance(leaf, str) and leaf not in session_of:
                leaves.add(leaf)
            continue
        uuid, sid = entry.get("uuid"), entry.get("sessionId")
        if kind not in _SENT_KINDS or entry.get("isSidechain") or not isinstance(uuid, str):
            continue
        if not isinstance(sid, str) or not sid:
            continue
        if first is None:
            first = sid
        elif sid != first:
            parent = entry.get("parentUuid")
            if isinstance(parent, str) and session_of.get(parent) == first:
                # The file's own conversation goes on from entries of another session.
                return _Copy(until=max(until, last_line), session=sid, source=first)
            first = sid  # entries of two conversations: neither is a copy of the other
        if uuid in leaves:
            until = lineno
        session_of.setdefault(uuid, sid)
        last_line = lineno
    if live and not leaves <= session_of.keys():
        return _Copy(until=sys.maxsize)
    return _Copy(until=until) if until else None


def _resumed(stream: IO[bytes], *, live: bool) -> _Copy | None:
    """The copy a seekable transcript opens with, read ahead of its reading."""
    if not stream.seekable():
        return None
    start = stream.tell()
    try:
        return _copied_history(json_lines(stream, live=live), live=live)
    except TranscriptError:
        return None  # the reading names the line at fault
    finally:
        stream.seek(start)


class _Reader:
    def __init__(self, session_id: str | None, copy: _Copy | None = None) -> None:
        self.override = session_id
        self.copy = copy
        self.sessions: dict[str, _Session] = {}
        # uuids of the entries read: Claude Code may log one again (see `first_time`)
        self.seen: set[str] = set()
        # sidechain entry uuid -> the sub-agent session it belongs to
        self.side_of: dict[str, str] = {}
        self.main_id: str | None = None
        self.chains: dict[str, _Chain] = {}
        # how the print mode's last ``result`` said the run ended, while no turn follows
        self.outcome: str | None = None

    def copied(self, lineno: int) -> bool:
        """Whether the line is part of the history a resumed session opens with."""
        return self.copy is not None and lineno <= self.copy.until

    def main_of(self, lineno: int, entry: dict[str, Any]) -> Any:
        """The session of the conversation an entry belongs to (its sub-agent's aside)."""
        if self.override:
            return self.override
        if self.copy is not None and self.copy.session and self.copied(lineno):
            return self.copy.session
        return entry.get("sessionId")

    def session_for(self, lineno: int, entry: dict[str, Any]) -> _Session:
        main = self.main_of(lineno, entry)
        if not isinstance(main, str) or not main:
            raise line_error(
                lineno, f"sessionId: {unfit(entry, 'sessionId', 'a non-empty string')}"
            )
        if self.main_id is None:
            self.main_id = main
        sid = main
        if entry.get("isSidechain"):
            parent = entry.get("parentUuid")
            agent = entry.get("agentId")
            if isinstance(agent, str) and agent:
                sid = agent_session(main, agent)
            elif isinstance(parent, str) and parent in self.side_of:
                sid = self.side_of[parent]
            else:
                sid = f"{main}:agent-{entry.get('uuid') or lineno}"
            if isinstance(entry.get("uuid"), str):
                self.side_of[entry["uuid"]] = sid
        found = self.sessions.get(sid)
        if found is None:
            metadata = {
                k: entry[v]
                for k, v in (("cwd", "cwd"), ("version", "version"), ("git_branch", "gitBranch"))
                if isinstance(entry.get(v), str)
            }
            if sid != main:
                metadata["parent_session"] = main
                if isinstance(entry.get("parentToolUseID"), str):
                    metadata["parent_tool_use_id"] = entry["parentToolUseID"]
            body: dict[str, Any] = {"agent": "claude-code", "metadata": metadata}
            found = self.sessions[sid] = _Session(SessionLog(sid, session_body=body))
        return found

    def finish_call(self, s: _Session) -> Iterator[Event]:
        call = s.call
        if call is None:
            return
        s.call = None
        log = s.log
        if not log.started and call.model:
            log.session_body["model"] = call.model
        message = {"id": call.message_id, "role": "assistant", "content": call.blocks}
        # The call saw the context up to its first entry; its own reply and what
        # followed it wait in the context for the next call.
        later = log.context[call.obs_at :]
        log.context = log.context[: call.obs_at]
        yield from log.step(
            timestamp=call.timestamp,
            fields={
                "model": call.model,
                "usage": call.usage,
                "output": {"messages": [message]},
            },
        )
        log.add(message)
        log.context.extend(later)

    def first_time(self, entry: dict[str, Any]) -> bool:
        """Whether an entry is read for the first time. Claude Code logs some entries
        again, the same uuid and all: an inline sub-agent's entry, and lines written
        twice or more (2.1 with several sessions open in one folder, 1.0 fed its
        prompts as stream-json). It reads a transcript as one entry per uuid, and so
        does this."""
        uuid = entry.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            return True
        if uuid in self.seen:
            return False
        self.seen.add(uuid)
        return True

    def entry(self, lineno: int, entry: dict[str, Any]) -> Iterator[Event]:
        kind = part_kind(entry)
        if kind == "result":
            ok = entry.get("subtype") == "success" and entry.get("is_error") is not True
            self.outcome = "succeeded" if ok else "failed"
            return
        if kind in ("user", "assistant"):
            self.outcome = None  # a turn fed to the print mode after the result
        if not self.first_time(entry):
            return
        yield from self.read_entry(lineno, entry)
        # Every entry of the main conversation is a link of its chain, whatever it
        # holds (hooks' progress, system notes): a prompt names the one before it.
        uuid, main = entry.get("uuid"), self.main_of(lineno, entry)
        if isinstance(uuid, str) and isinstance(main, str) and not entry.get("isSidechain"):
            chain = self.chains.setdefault(main, _Chain())
            chain.tip = uuid
            s = self.sessions.get(main)
            chain.ends_at[uuid] = s.last_message() if s is not None else None
            parent = entry.get("parentUuid")
            chain.parent[uuid] = parent if isinstance(parent, str) else None
            message = entry.get("message")
            if kind == "user":
                chain.message_of[uuid] = uuid
            elif kind == "assistant" and isinstance(message, dict):
                mid = message.get("id")
                chain.message_of[uuid] = mid if isinstance(mid, str) and mid else uuid

    def rewound(self, s: _Session, entry: dict[str, Any]) -> Iterator[Event]:
        """A prompt that goes back to an earlier entry than the last one: the
        messages after that entry are an abandoned branch, dropped before the
        next call."""
        parent = entry.get("parentUuid")
        chain = self.chains.get(s.log.session_id)
        if (
            entry.get("isSidechain")
            or chain is None
            or not isinstance(parent, str)
            or parent == chain.tip
            or parent not in chain.ends_at
            or parent in chain.kept
            or s.compaction is not None
        ):
            return
        end = chain.ends_at[parent]
        yield from self.finish_call(s)
        context = s.log.context
        if end is not None and end not in context:
            return  # a point before a compaction: nothing of it is in the context
        cut = 0 if end is None else context.index(end) + 1
        gone = {t for op in s.log.staged if op["action"] == "drop" for t in op["targets"]}
        left = [m for m in context[cut:] if m not in gone]
        if left:
            reason = "rewind: the conversation went back to an earlier message"
            s.log.stage([{"action": "drop", "targets": left, "reason": reason}], reason=reason)

    def read_entry(self, lineno: int, entry: dict[str, Any]) -> Iterator[Event]:
        kind = part_kind(entry)
        if kind == "progress":
            inner = _agent_entry(entry)
            if inner is None:
                return
            if not self.first_time(inner):
                return
            entry, kind = inner, inner["type"]
        if kind not in _SENT_KINDS:
            return
        s = self.session_for(lineno, entry)
        source = _forked_from(entry)
        if source is not None and not s.log.started:
            s.log.session_body["metadata"].setdefault("forked_from", source)
        copy = self.copy
        if copy is not None and copy.source and s.log.session_id == copy.session:
            if not s.log.started:
                s.log.session_body["metadata"].setdefault("resumed_from", copy.source)
        uuid = entry.get("uuid")
        mid = uuid if isinstance(uuid, str) and uuid else f"line{lineno}"
        if kind == "attachment":
            sent = _attachment(entry, mid)
            if sent is not None:
                s.log.add(sent)
            return
        if kind == "system":
            subtype = entry.get("subtype")
            if subtype == "local_command" and isinstance(entry.get("content"), str):
                # The output of a command the user ran (/model, !ls), sent as theirs.
                s.log.add({"id": mid, "role": "user", "content": entry["content"]})
            elif subtype == "microcompact_boundary":
                yield from self.finish_call(s)
                meta = entry.get("microcompactMetadata") or entry.get("microcompact_metadata")
                self.microcompacted(s, meta if isinstance(meta, dict) else {})
            elif subtype == "compact_boundary":
                yield from self.finish_call(s)
                meta = entry.get("compactMetadata") or entry.get("compact_metadata") or {}
                s.compaction = dict(meta) if isinstance(meta, dict) else {}
                # What the compaction removes: the context up to here, not what is
                # logged after the boundary and before its summary, nor what it kept.
                s.compaction["$at"] = len(s.log.context)
                chain = self.chains.get(s.log.session_id)
                if chain is not None and not entry.get("isSidechain"):
                    chain.kept = chain.preserved(s.compaction)
                    kept = {chain.message_of[u] for u in chain.kept if u in chain.message_of}
                    s.compaction["$kept"] = kept
            return
        message = entry.get("message")
        if not isinstance(message, dict):
            raise line_error(lineno, f"message: {unfit(entry, 'message', 'an object')}")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise line_error(
                lineno,
                f"message.content: must be a string or a list of blocks, not {json_kind(content)}",
            )
        if isinstance(content, list):
            for n, block in enumerate(content):
                if not isinstance(block, dict):
                    raise line_error(
                        lineno,
                        f"message.content[{n}]: must be a content block (an object), "
                        f"not {short_repr(block)}",
                    )
        if kind == "assistant":
            yield from self.assistant(lineno, s, entry, message, content)
            return
        # A tool result does not end the call: Claude Code may log more blocks of the
        # same reply after it.
        if not isinstance(uuid, str) or not uuid:
            raise line_error(lineno, f"uuid: {unfit(entry, 'uuid', 'a non-empty string')}")
        msg: dict[str, Any] = {"id": uuid, "role": "user", "content": content}
        if (
            isinstance(content, list)
            and content
            and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
        ):
            msg["partition"] = "tool"
            s.shapes[uuid] = [
                {k: v for k, v in b.items() if k != "content"} if len(content) == 1 else b
                for b in content
            ]
            for block in content:
                if isinstance(block.get("tool_use_id"), str):
                    s.result_of[block["tool_use_id"]] = uuid
        if entry.get("isCompactSummary"):
            yield from self.finish_call(s)
            yield from self.compacted(s, msg)
            return
        if "partition" not in msg:
            yield from self.rewound(s, entry)
            if s.call is None and not entry.get("isMeta"):
                # Claude Code's own (isMeta): a skill's or command's expanded prompt.
                s.log.asked(asked(content))
        s.log.add(msg)

    def microcompacted(self, s: _Session, meta: dict[str, Any]) -> None:
        """Stage a microcompaction for the next call: the results of the tool uses it
        lists cleared, the attachments it lists gone."""
        log = s.log
        live = log.untouched()
        tools = meta.get("compactedToolIds")
        cleared = {t for t in tools if isinstance(t, str)} if isinstance(tools, list) else set()
        ops: list[dict[str, Any]] = []
        reason = (
            f"microcompaction (trigger: {meta.get('trigger') or 'unknown'}, "
            f"{meta.get('tokensSaved')} tokens reported saved)"
        )
        for mid in dict.fromkeys(s.result_of[t] for t in cleared if t in s.result_of):
            blocks = s.shapes.get(mid)
            if mid not in live or blocks is None:
                continue
            mine = [b for b in blocks if b.get("tool_use_id") in cleared]
            if all(b.get("content") == CLEARED_RESULT for b in mine):
                continue  # cleared by an earlier microcompaction
            content = [
                {**b, "content": CLEARED_RESULT} if b.get("tool_use_id") in cleared else b
                for b in blocks
            ]
            s.shapes[mid] = content
            result = {"id": mid, "role": "user", "content": content, "partition": "tool"}
            ops.append({"action": "truncate", "target": mid, "result": result, "reason": reason})
        attachments = meta.get("clearedAttachmentUUIDs")
        if isinstance(attachments, list):
            listed = {a for a in attachments if isinstance(a, str)}
            dropped = [m for m in live if m in listed]
            if dropped:
                ops.append({"action": "drop", "targets": dropped, "reason": reason})
        if ops:
            log.stage(ops, reason=reason)

    def compacted(self, s: _Session, summary: dict[str, Any] | None) -> Iterator[Event]:
        """Stage the compaction for the next call: what was in the context left it,
        summarized into `summary` (None: a boundary whose summary never came)."""
        meta = s.compaction or {"$at": len(s.log.context)}
        s.compaction = None
        log = s.log
        trigger = meta.get("trigger") or "unknown"
        reason = compaction_reason(trigger, meta.get("preTokens", meta.get("pre_tokens")))
        kept = meta.get("$kept") or set()
        left = [m for m in log.context[: meta["$at"]] if m not in kept]
        if not left:
            if summary is not None:
                log.add(summary)
            return
        if summary is not None:
            result = {**summary, "partition": "memory"}
            op = {"action": "summarize", "targets": left, "result": result, "reason": reason}
        else:
            op = {"action": "drop", "targets": left, "reason": reason}
        log.stage([op], reason=reason)
        yield from ()

    def assistant(
        self,
        lineno: int,
        s: _Session,
        entry: dict[str, Any],
        message: dict[str, Any],
        content: Any,
    ) -> Iterator[Event]:
        mid = message.get("id") or entry.get("uuid")
        if not isinstance(mid, str) or not mid:
            raise line_error(lineno, f"message.id: {unfit(message, 'id', 'a non-empty string')}")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        model = message.get("model")
        if model == SYNTHETIC_MODEL:
            yield from self.finish_call(s)
            if entry.get("isApiErrorMessage"):
                return  # an API error Claude Code shows, and never sends on

            s.log.add({"id": mid, "role": "assistant", "content": blocks})
            return
        if _forked_from(entry) is not None or self.copied(lineno):
            # A reply of the session this one branched from, or resumed: context, no
            # call. Its blocks may be logged one an entry, as they were in that session.
            yield from self.finish_call(s)
            copied = s.log.pending.get(mid)
            if copied is not None and isinstance(copied["content"], list):
                blocks = [*copied["content"], *blocks]
            s.log.add({"id": mid, "role": "assistant", "content": blocks})
            return
        call = s.call
        if call is not None and call.message_id == mid:
            call.blocks.extend(blocks)
            call.usage = _usage(message.get("usage"), lineno) or call.usage
            return
        yield from self.finish_call(s)
        if s.compaction is not None:
            # A boundary whose summary never came: the context was emptied.
            yield from self.compacted(s, None)
        s.call = _Call(
            message_id=mid,
            timestamp=entry.get("timestamp"),
            model=model if isinstance(model, str) else None,
            usage=_usage(message.get("usage"), lineno),
            obs_at=len(s.log.context),
            blocks=list(blocks),
        )

    def close(self) -> Iterator[Event]:
        for s in self.sessions.values():
            yield from self.finish_call(s)
        main = self.sessions.get(self.main_id) if self.main_id else None
        if self.outcome is not None and main is not None and main.log.started:
            yield main.log.end(status=self.outcome, timestamp=None)


def read(
    stream: IO[bytes], *, session_id: str | None = None, fallback: str = "", live: bool = False
) -> Iterator[Event]:
    """`live`: the file is still being written, so its last call may not be complete
    and is left for the next read."""
    reader = _Reader(session_id, _resumed(stream, live=live))
    lines = own_lines(json_lines(stream, live=live), format=FORMAT, recognised=looks_like)
    for lineno, entry in lines:
        yield from reader.entry(lineno, _as_entry(entry))
    if not live:
        yield from reader.close()
