"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is ``{"timestamp", "type", "payload"}``. ``session_meta`` names the
session (its ``id``, or ``session_id``); ``turn_context`` the model in force;
``response_item`` payloads are the conversation items as sent to and returned by the
Responses API (messages, ``function_call`` / ``custom_tool_call`` /
``tool_search_call`` and their outputs, ``reasoning``, web searches and images made);
``event_msg`` of type ``token_count`` closes a model call with its usage and the
model's context window. What another agent wrote to this one (an
``inter_agent_communication`` line, or an ``agent_message`` item) is input, sent on
as Codex sends it: an assistant message. A sub-agent's rollout (as Codex 0.145 writes it: a
``session_meta`` whose ``source`` is ``{"subagent": {"thread_spawn":
{"parent_thread_id"}}}``, or that names its ``parent_thread_id``) is a session whose
``metadata.parent_session`` is that parent. A rollout forked from another session (a
sub-agent spawned with its parent's context, or ``codex fork``; its ``session_meta``
may name it in ``forked_from_id``, kept as ``metadata.forked_from``) starts with a
copy of that session's lines, its ``session_meta`` first: the context its first call
starts from, not calls of its own (see `_Reader.own_turn`). ``compacted`` replaces the
history with its ``replacement_history``: items already in the context are kept, the
others are re-injected (``insert``), and what stands for what left is the item of
that history that holds the summary ``message`` (Codex ends the history it builds
with it, a user message), else its ``compaction`` item, else the ``message`` itself,
added after the history. A ``compacted`` line without ``replacement_history`` (rollouts
of Codex before it logged one) is rebuilt the way Codex rebuilt it: see
`_Reader.rebuilt`. A ``thread_rolled_back`` event (``num_turns``) drops the last
turns the user undid, from the first of their prompts on. Older rollouts, written
before that envelope, are read too:
a first line with the session's ``id`` and ``timestamp``, then the items themselves;
and before those, the TypeScript Codex CLI (2025) saved a session as one JSON document
(``rollout-<date>-<id>.json``: ``{"session": {"id", "timestamp", "instructions"},
"items": [...]}``), read as those lines: the session, then each item.
The session's task (``metadata.task``) is its first prompt of its own: the first
``user_message`` event (what the user typed), else a user message that is none of the
texts Codex injects (`SESSION_PREFIXES`), and not a fork's copy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import IO, Any

from contextview.core.errors import short_repr
from contextview.core.importers._log import (
    Event,
    SessionLog,
    TranscriptError,
    compaction_reason,
    json_kind,
    json_lines,
    json_whole,
    line_error,
    own_lines,
    short_hash,
    text_of,
    token_count,
    unfit,
    usage_cached_inside,
)
from contextview.core.importers._task import plain_text
from contextview.core.parts import part_kind
from contextview.core.times import as_datetime

FORMAT = "codex"
INSTRUCTIONS = "instructions"
LINE_TYPES = frozenset(
    {
        "session_meta",
        "response_item",
        "event_msg",
        "turn_context",
        "compacted",
        "inter_agent_communication",
    }
)
# What another agent wrote to this one (Codex's V2 agents: a sub-agent's task, a
# report to its parent): a line of its own, or an ``agent_message`` item.
FROM_AGENT = "inter_agent_communication"
# Items the model produces; anything else in the history is input to the next call.
# Codex 0.14x adds the tools a model looks up (``tool_search_call``), the images it
# makes (``image_generation_call``) and the compaction the Responses API returns
# within a reply (``context_compaction``).
OUTPUT_ITEMS = frozenset(
    {
        "reasoning",
        "function_call",
        "custom_tool_call",
        "web_search_call",
        "local_shell_call",
        "tool_search_call",
        "image_generation_call",
        "context_compaction",
    }
)
# What answers a call: its ``output``, or the ``tools`` a tool search found.
TOOL_OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "tool_search_output",
    }
)


# Items a rollout wrote as lines of their own before the ``{"type", "payload"}``
# envelope (Codex CLI before 0.4x): the session's meta first (``id``, ``timestamp``,
# ``instructions``), then the items, with ``{"record_type": "state"}`` lines between.
# ``compaction_summary`` is what Codex called the ``compaction`` item at first.
COMPACTIONS = frozenset({"compaction", "compaction_summary"})
LEGACY_ITEMS = OUTPUT_ITEMS | TOOL_OUTPUTS | COMPACTIONS | {"message"}
# Items Codex records for itself and leaves out of every prompt (the git state it
# can undo to).
NOT_SENT = frozenset({"ghost_snapshot"})
# User-role text Codex writes itself (instructions, environment, skills, a shell
# command the user ran, an interrupted turn): never the user's own prompt.
SESSION_PREFIXES = (
    "<user_instructions>",
    "# agents.md instructions for ",
    "<environment_context>",
    "<skill",
    "<user_shell_command>",
    "<turn_aborted>",
)
# How many tokens of the latest prompts a rebuilt history keeps, counted as Codex
# counts them (about 4 bytes a token).
REBUILT_PROMPT_TOKENS = 20_000
NO_SUMMARY = "(no summary available)"


def _legacy_meta(line: dict[str, Any]) -> bool:
    return (
        "type" not in line
        and "source" not in line  # an OpenHands event
        and isinstance(line.get("id"), str)
        and "timestamp" in line
    )


def _meta_id(meta: dict[str, Any]) -> Any:
    """A rollout's session id: its meta's ``id``, or ``session_id`` (Codex 0.14x
    writes both, a meta may carry the second alone)."""
    sid = meta.get("id")
    return sid if isinstance(sid, str) and sid else meta.get("session_id")


def _parent_thread(meta: dict[str, Any]) -> str | None:
    """The session that started a sub-agent's rollout: its ``parent_thread_id``, or
    that of the ``thread_spawn`` its ``source`` names (``{"subagent": {"thread_spawn":
    {"parent_thread_id", "depth"}}}``); None for a session the user started (a
    ``source`` of ``cli``, ``exec``, ``vscode``) or a helper with no parent named."""
    parent = meta.get("parent_thread_id")
    source = meta.get("source")
    if not isinstance(parent, str) and isinstance(source, dict):
        helper = source.get("subagent")
        spawn = helper.get("thread_spawn") if isinstance(helper, dict) else None
        parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    return parent if isinstance(parent, str) and parent else None


def _minted_at(value: Any) -> int | None:
    """When a UUIDv7 (Codex's session and turn ids) was made, in milliseconds since the
    epoch; None for any other value."""
    if not isinstance(value, str):
        return None
    digits = value.replace("-", "")
    if len(digits) != 32 or digits[12] != "7":
        return None
    try:
        int(digits, 16)
    except ValueError:
        return None
    return int(digits[:12], 16)


def _created_at(meta: dict[str, Any], stamp: Any) -> int | None:
    """When a rollout's session was made (milliseconds since the epoch): from its id,
    else its meta's ``timestamp``, else the line's; None when none tells."""
    made = _minted_at(_meta_id(meta))
    if made is not None:
        return made
    when = as_datetime(meta.get("timestamp")) or as_datetime(stamp)
    return None if when is None else int(when.timestamp() * 1000)


def looks_like(first: dict[str, Any]) -> bool:
    return (part_kind(first) in LINE_TYPES and "payload" in first) or _legacy_meta(first)


# What ``codex exec --json`` prints: events of what the agent did (the thread and
# its turns, the commands it ran, its messages, each turn's usage), not what the
# model was sent at each call; the session's rollout, which Codex writes beside it,
# holds that.
EXEC_EVENTS = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
    }
)


def exec_stream(first: dict[str, Any]) -> bool:
    """Whether a JSONL file that opens with `first` is ``codex exec --json`` output."""
    return first.get("type") in EXEC_EVENTS and "payload" not in first


def _exec_refused(line: dict[str, Any]) -> TranscriptError:
    """What an import of ``codex exec --json`` output says: where the transcript is."""
    thread = line.get("thread_id")
    named = (
        f"the file whose name ends in {thread}.jsonl"
        if isinstance(thread, str) and re.fullmatch(r"[0-9A-Za-z-]{1,64}", thread)
        else "its rollout-*.jsonl file"
    )
    return TranscriptError(
        "file",
        "is the event stream of `codex exec --json`, which tells what the agent did but "
        "not what the model was sent at each call; import the session's rollout "
        f"instead: {named} under ~/.codex/sessions",
    )


def looks_like_document(doc: Any) -> bool:
    """A session as the TypeScript Codex CLI saved it, in one JSON document."""
    return isinstance(doc, dict) and isinstance(doc.get("session"), dict) and "items" in doc


# How such a document opens, for one too large to parse from its first bytes.
DOCUMENT_START = re.compile(rb'\{\s*"session"\s*:\s*\{')


def _recognised(line: dict[str, Any]) -> bool:
    """A line this reader reads (it passes over the others)."""
    return looks_like(line) or ("payload" not in line and part_kind(line) in LEGACY_ITEMS)


def _is_output(item: dict[str, Any]) -> bool:
    return part_kind(item) in OUTPUT_ITEMS or (
        item.get("type") == "message" and item.get("role") == "assistant"
    )


def _prompt(item: dict[str, Any]) -> str | None:
    """The text of a user's own prompt; None for any other item (a reply, a tool call
    or result, or user-role text Codex wrote itself)."""
    if item.get("type") != "message" or item.get("role") != "user":
        return None
    content = item.get("content")
    parts = [content] if isinstance(content, str) else content
    if not isinstance(parts, list):
        return None
    texts = []
    for part in parts:
        text = part.get("text") if isinstance(part, dict) else part
        if not isinstance(text, str):
            continue
        if text.lstrip().lower().startswith(SESSION_PREFIXES):
            return None
        if text:
            texts.append(text)
    return "\n".join(texts) if texts else None


def _prompt_tokens(prompt: str) -> int:
    """The tokens of a prompt as Codex estimates them (about 4 bytes a token)."""
    return (len(prompt.encode("utf-8", "surrogatepass")) + 3) // 4


def message_of(mid: str, item: dict[str, Any], lineno: int, path: str = "") -> dict[str, Any]:
    """One history item as a contract message, its parts as Codex wrote them; the item
    is on line `lineno`, at `path` in it (ending in a dot), for the error of a content
    that is none."""
    kind = part_kind(item)
    if kind == "message":
        content = item.get("content")
        if content is None:
            content = ""
        elif not isinstance(content, str | list):
            raise line_error(
                lineno,
                f"{path}content: must be a text or a list of parts, not {short_repr(content)}",
            )
        return {"id": mid, "role": item.get("role") or "user", "content": content}
    if kind in TOOL_OUTPUTS:
        output = item.get("output")
        if isinstance(output, dict) and isinstance(output.get("content"), str | list):
            output = output["content"]
        if kind == "tool_search_output":
            # The definitions of the tools found, as the model reads them: JSON.
            output = item.get("tools")
        if not isinstance(output, str | list) or kind == "tool_search_output":
            output = text_of(output)
        msg = {"id": mid, "role": "tool", "content": output}
        if isinstance(item.get("call_id"), str):
            msg["tool_call_id"] = item["call_id"]
        return msg
    if kind in COMPACTIONS:
        return {"id": mid, "role": "user", "content": [item], "partition": "memory"}
    if kind == FROM_AGENT:
        # Sent on as Codex sends it: an assistant message of the communication's JSON.
        sent = {k: v for k, v in item.items() if k != "type"}
        text = json.dumps(sent, ensure_ascii=False, separators=(",", ":"))
        return {"id": mid, "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    if kind == "agent_message" and isinstance(item.get("content"), str | list):
        return {"id": mid, "role": "assistant", "content": item["content"]}
    # calls and reasoning: the item itself is the part (a tool call, a thinking block)
    return {"id": mid, "role": "assistant", "content": [item]}


USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens")


def _counts(raw: Any, where: str) -> dict[str, int] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TranscriptError(where, f"must be an object of token counts, not {short_repr(raw)}")
    return {key: token_count(raw.get(key), f"{where}.{key}") or 0 for key in USAGE_KEYS}


def _usage(
    info: Any, lineno: int, totals: dict[str, int] | None
) -> tuple[dict[str, int] | None, int | None, dict[str, int] | None]:
    """The usage of the call a ``token_count`` closes, the model's window, and the
    session's running totals. Some rollouts give only the totals
    (``total_token_usage``): the call's usage is then what they grew by."""
    if info is None:  # the first token_count of a session, before any call
        return None, None, totals
    if not isinstance(info, dict):
        raise line_error(lineno, f"payload.info: must be an object or null, not {short_repr(info)}")
    window = info.get("model_context_window")
    window = window if isinstance(window, int) and not isinstance(window, bool) else None
    where = f"line {lineno}: payload.info"
    last = _counts(info.get("last_token_usage"), f"{where}.last_token_usage")
    total = _counts(info.get("total_token_usage"), f"{where}.total_token_usage")
    if last is None and total is not None:
        before = totals or {}
        last = {key: max(0, total[key] - before.get(key, 0)) for key in USAGE_KEYS}
    if last is None:
        return None, window, total or totals
    # Codex counts cached input inside input_tokens.
    usage = usage_cached_inside(
        last["input_tokens"], last["cached_input_tokens"], last["output_tokens"]
    )
    return usage, window, total or totals


@dataclass
class _Call:
    timestamp: str | None
    obs_at: int
    outputs: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] | None = None
    window: int | None = None


class _Reader:
    def __init__(self, session_id: str | None, fallback: str) -> None:
        self.override = session_id
        self.fallback = fallback
        self.log: SessionLog | None = None
        self.model: str | None = None
        self.call: _Call | None = None
        self.last_input_tokens: int | None = None
        self.totals: dict[str, int] | None = None
        # the user's own prompts in the context, with their tokens as Codex counts them
        self.prompts: dict[str, int] = {}
        # the context Codex sends first in every history (instructions, environment),
        # as logged before the first prompt
        self.initial: set[str] = set()
        self.prompted = False
        # whether the session's task was heard (its first prompt of its own), and
        # whether from a user_message event (which no prompt overrides)
        self.asked = False
        self.told = False
        # the session's own id (as its first session_meta names it) and when it was made
        self.own_id: Any = None
        self.created: int | None = None
        # reading the history a fork copied from another session (see `own_turn`)
        self.replaying = False

    def session(self, lineno: int) -> SessionLog:
        if self.log is None:
            sid = self.override or self.fallback
            if not sid:
                raise line_error(lineno, "no session_meta line before the first item")
            self.log = SessionLog(sid, session_body={"agent": "codex", "metadata": {}})
        return self.log

    def finish(self) -> Iterator[Event]:
        call, log = self.call, self.log
        if call is None or log is None:
            return
        self.call = None
        later = log.context[call.obs_at :]
        log.context = log.context[: call.obs_at]
        if not log.started and self.model:
            log.session_body["model"] = self.model
        yield from log.step(
            timestamp=call.timestamp,
            fields={
                "model": self.model,
                "usage": call.usage,
                "context_window": call.window,
                "output": {"messages": call.outputs},
            },
        )
        log.context.extend(later)

    def line(self, lineno: int, line: dict[str, Any]) -> Iterator[Event]:
        kind = part_kind(line)
        if "payload" not in line:
            # the rollout format before the envelope
            if _legacy_meta(line):
                legacy = {**line, "base_instructions": line.get("instructions")}
                self.meta(lineno, legacy, line.get("timestamp"))
            elif kind in LEGACY_ITEMS:
                yield from self.item(lineno, line.get("timestamp"), line)
            return
        payload = line.get("payload")
        if kind not in LINE_TYPES:
            return
        if not isinstance(payload, dict):
            raise line_error(lineno, f"payload: {unfit(line, 'payload', 'an object')}")
        if kind == "session_meta":
            self.meta(lineno, payload, line.get("timestamp"))
        elif kind == "turn_context":
            self.own_turn(payload)
            if isinstance(payload.get("model"), str):
                self.model = payload["model"]
        elif kind == "event_msg":
            self.own_turn(payload)
            said = payload.get("message")
            if payload.get("type") == "user_message" and isinstance(said, str):
                self.user_said(lineno, said)
            if payload.get("type") == "thread_rolled_back":
                yield from self.finish()
                self.rolled_back(lineno, payload.get("num_turns"))
                self.settle_replayed()
            elif payload.get("type") == "token_count":
                usage, window, self.totals = _usage(payload.get("info"), lineno, self.totals)
                if usage is not None and usage["input_tokens"] + usage["cache_read_tokens"]:
                    self.last_input_tokens = usage["input_tokens"] + usage["cache_read_tokens"]
                if self.call is not None and usage is not None:
                    self.call.usage, self.call.window = usage, window
                    yield from self.finish()
        elif kind == "response_item":
            yield from self.item(lineno, line.get("timestamp"), payload)
        elif kind == FROM_AGENT:
            yield from self.item(lineno, line.get("timestamp"), {**payload, "type": FROM_AGENT})
        else:
            yield from self.finish()
            self.compacted(lineno, payload)
            self.settle_replayed()

    def meta(self, lineno: int, payload: dict[str, Any], stamp: Any) -> None:
        if self.log is not None:
            # A resumed rollout repeats its own meta; another session's opens the copy
            # of that session's history a fork starts with.
            if _meta_id(payload) not in (None, self.own_id) and self.created is not None:
                self.replaying = True
            return
        sid = self.override or _meta_id(payload)
        if not isinstance(sid, str) or not sid:
            key = "session_id" if "id" not in payload and "session_id" in payload else "id"
            problem = unfit(payload, key, "a non-empty string", "the session id")
            raise line_error(lineno, f"payload.{key}: {problem}")
        self.own_id, self.created = _meta_id(payload), _created_at(payload, stamp)
        metadata: dict[str, Any] = {
            k: payload[k]
            for k in ("cwd", "cli_version", "originator", "model_provider", "source")
            if isinstance(payload.get(k), str)
        }
        parent = _parent_thread(payload)
        if parent is not None and parent != sid:
            metadata["parent_session"] = parent
        forked = payload.get("forked_from_id")
        if isinstance(forked, str) and forked:
            metadata["forked_from"] = forked
            self.replaying = self.created is not None
        self.log = SessionLog(sid, session_body={"agent": "codex", "metadata": metadata})
        instructions = payload.get("base_instructions")
        text = instructions.get("text") if isinstance(instructions, dict) else instructions
        if isinstance(text, str) and text:
            self.log.add({"id": INSTRUCTIONS, "role": "system", "content": text})

    def own_turn(self, payload: dict[str, Any]) -> None:
        """A line of a turn: the first of this session's own ends the history a fork
        copied (`replaying`).

        A forked rollout (a sub-agent spawned with its parent's context, ``codex
        fork``) starts with the other session's lines as they were, stamped anew at the
        fork: its ``session_meta``, the items of its history, its turn contexts and
        ``token_count`` events, its compactions. That copy is the context the fork's
        first call starts from, not calls of its own: its items join the context, its
        outputs are no calls, its usage is no step's (the running totals go on from
        it, as Codex's do), and its compactions and rollbacks leave the context as they
        left it, with no operation of this session.

        The copy ends at the first line of a turn of this session's own: a turn's id
        is a UUIDv7 minted when the turn began, so the copied turns' ids are older than
        the session, and the first one minted since is its own. A turn id that tells
        no time ends it too, rather than hold back what may be the session's own."""
        turn = payload.get("turn_id")
        if not self.replaying or not isinstance(turn, str) or not turn:
            return
        minted = _minted_at(turn)
        if minted is not None and self.created is not None and minted < self.created:
            return
        self.replaying = False

    def settle_replayed(self) -> None:
        """A compaction or rollback of the history a fork copied: the context as it left
        it, with no operation of this session's (see `own_turn`)."""
        if self.replaying and self.log is not None:
            self.log.settle()

    def item(self, lineno: int, timestamp: Any, item: dict[str, Any]) -> Iterator[Event]:
        if part_kind(item) in NOT_SENT:
            return
        log = self.session(lineno)
        message = message_of(f"l{lineno}", item, lineno)
        prompt = _prompt(item)
        if prompt is not None:
            self.prompts[message["id"]] = _prompt_tokens(prompt)
            self.prompted = True
        elif not self.prompted and item.get("role") in ("user", "developer", "system"):
            self.initial.add(message["id"])
        if _is_output(item) and not self.replaying:
            if self.call is None:
                self.call = _Call(timestamp=timestamp, obs_at=len(log.context))
            self.call.outputs.append(message)
        else:
            yield from self.finish()
        if prompt is not None and not self.replaying and not self.asked:
            # The task: the session's first prompt of its own (a fork's copy holds the
            # other session's), not what Codex injects around it.
            self.asked = True
            log.asked(prompt)
        log.add(message)

    def user_said(self, lineno: int, text: str) -> None:
        """A ``user_message`` event: what the user typed, as Codex's own interface shows
        it. The first of the session's own is its task, whatever the user messages
        around it hold (a text Codex injects that `SESSION_PREFIXES` does not know)."""
        if self.replaying or self.told or not text.strip():
            return
        self.told = True
        self.asked = True
        self.session(lineno).asked(text)

    def rolled_back(self, lineno: int, turns: Any) -> None:
        """A ``thread_rolled_back`` event: the user undid the last `turns` turns, and
        everything from the first of their prompts on leaves the history Codex sends."""
        if isinstance(turns, bool) or not isinstance(turns, int) or turns <= 0:
            return
        log = self.session(lineno)
        live = log.untouched()
        prompts = [m for m in live if m in self.prompts]
        if not prompts:
            return
        cut = live.index(prompts[-min(turns, len(prompts))])
        left = [m for m in live[cut:] if m != INSTRUCTIONS]
        for mid in left:
            self.prompts.pop(mid, None)
        reason = f"rollback: the user undid the last {turns} turn(s)"
        log.stage([{"action": "drop", "targets": left, "reason": reason}], reason=reason)

    def compacted(self, lineno: int, payload: dict[str, Any]) -> None:
        log = self.session(lineno)
        history = payload.get("replacement_history")
        summary_text = payload.get("message")
        reason = compaction_reason("codex compact", self.last_input_tokens)
        by_hash: dict[str, list[str]] = {}
        for mid in log.context:
            h = log.hash_of(mid) if mid != INSTRUCTIONS else None
            if h is not None:
                by_hash.setdefault(h, []).append(mid)
        # The base instructions go with every call, outside the history compacted.
        kept: list[str] = [INSTRUCTIONS] if INSTRUCTIONS in log.context else []
        order: list[str] = list(kept)
        inserts: list[dict[str, Any]] = []
        summary: dict[str, Any] | None = None
        if history is None:
            self.rebuilt(f"l{lineno}", log, summary_text, reason)
            return
        if not isinstance(history, list):
            raise line_error(
                lineno,
                f"payload.replacement_history: must be a list of items, not {json_kind(history)}",
            )
        for n, item in enumerate(history):
            if not isinstance(item, dict):
                raise line_error(
                    lineno,
                    f"payload.replacement_history[{n}]: must be an object, not {json_kind(item)}",
                )
        said = _summary_item(history, summary_text)
        for n, item in enumerate(history):
            if part_kind(item) in NOT_SENT:
                continue
            message = message_of(
                f"l{lineno}.{n}", item, lineno, f"payload.replacement_history[{n}]."
            )
            same = by_hash.get(short_hash(text_of(message["content"])))
            if n == said:
                summary = {**message, "partition": "memory"}
                order.append(message["id"])
            elif same:
                mid = same.pop(0)
                kept.append(mid)
                order.append(mid)
            elif part_kind(item) in COMPACTIONS and summary is None and said is None:
                summary = message
                order.append(message["id"])
            else:
                inserts.append(message)
                order.append(message["id"])
        if summary is None and isinstance(summary_text, str) and summary_text:
            summary = {
                "id": f"l{lineno}",
                "role": "user",
                "content": summary_text,
                "partition": "memory",
            }
            order.append(summary["id"])
        kept_ids = set(kept)
        left = [m for m in log.context if m not in kept_ids]
        ops: list[dict[str, Any]] = []
        if left and summary is not None:
            ops.append(
                {"action": "summarize", "targets": left, "result": summary, "reason": reason}
            )
        elif left:
            ops.append({"action": "drop", "targets": left, "reason": reason})
        elif summary is not None:
            inserts.append(summary)
        ops.extend({"action": "insert", "result": m, "reason": reason} for m in inserts)
        if ops:
            log.stage(ops, reason=reason, order=order)

    def rebuilt(self, sid: str, log: SessionLog, summary_text: Any, reason: str) -> None:
        """A ``compacted`` line without the history it left: Codex rebuilt that history
        itself, and so is it rebuilt here. Codex starts it afresh with its initial
        context (the instructions and environment it sends first in a session), then
        puts back the user's own prompts: the user-role messages that are not text
        Codex wrote itself (instructions, ``<environment_context>``, skills, a shell
        command the user ran, a turn marked aborted) nor an earlier summary. Only the
        latest prompts are put back, newest first, while they fit in 20,000 tokens
        (about 4 bytes a token); the one that would pass that is cut, and older ones
        are left out. The summary comes last, as a user message.

        Here the initial context and the prompts put back whole stay as they were;
        everything else (replies, tool calls and results, reasoning, later environment
        notes, earlier summaries, the prompts left out or cut) is summarized into the
        summary message."""
        text = summary_text if isinstance(summary_text, str) and summary_text else NO_SUMMARY
        summary = {"id": sid, "role": "user", "content": text, "partition": "memory"}
        head = [m for m in log.context if m == INSTRUCTIONS or m in self.initial]
        kept: list[str] = []
        room = REBUILT_PROMPT_TOKENS
        for mid in reversed(log.context):
            tokens = self.prompts.get(mid)
            if tokens is None:
                continue
            if tokens > room:
                break
            kept.append(mid)
            room -= tokens
        kept.reverse()
        stays = set(head) | set(kept)
        left = [m for m in log.context if m not in stays]
        self.prompts = {m: t for m, t in self.prompts.items() if m in stays}
        order = [*head, *kept, summary["id"]]
        if left:
            op = {"action": "summarize", "targets": left, "result": summary, "reason": reason}
        else:
            op = {"action": "insert", "result": summary, "reason": reason}
        log.stage([op], reason=reason, order=order)


def _summary_item(history: list[dict[str, Any]], summary_text: Any) -> int | None:
    """Where a replacement history holds the summary a ``compacted`` line also gives as
    its ``message``: the last item whose text holds it. Codex compacting on its own
    builds the new history from the user's prompts and ends it with that summary, as a
    user message (after a fixed text telling the model what it is), so that message is
    what the model reads of what left; None when no item holds it (a history whose
    summary is an encrypted ``compaction`` item)."""
    if not isinstance(summary_text, str) or not summary_text.strip():
        return None
    for n in range(len(history) - 1, -1, -1):
        item = history[n]
        if part_kind(item) == "message" and summary_text in plain_text(item.get("content")):
            return n
    return None


def read(
    stream: IO[bytes], *, session_id: str | None = None, fallback: str = "", live: bool = False
) -> Iterator[Event]:
    reader = _Reader(session_id or None, fallback)
    source = _RolloutLines(stream, live)
    try:
        first = True
        for lineno, line in own_lines(source, format=FORMAT, recognised=_recognised):
            if first and exec_stream(line):
                raise _exec_refused(line)
            first = False
            yield from reader.line(lineno, line)
        if not live:
            yield from reader.finish()
    except TranscriptError as exc:
        raise source.place(exc) from None


class _RolloutLines:
    """The lines of a rollout, numbered; a one-document rollout as the lines it holds:
    its session's meta (line 0), then its items (line n: ``items[n - 1]``)."""

    def __init__(self, stream: IO[bytes], live: bool) -> None:
        self.stream, self.live = stream, live
        self.document = False

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        raw = iter(self.stream)
        head: list[bytes] = []
        for chunk in raw:
            head.append(chunk)
            if chunk.strip():
                break
        first = head[-1].strip() if head else b""
        if first == b"{" or (DOCUMENT_START.match(first) and not first.endswith(b"}")):
            # An indented document: its first line opens it, and is no JSON of its own.
            yield from self._document(json_whole(b"".join(head) + self.stream.read()))
            return
        for lineno, line in json_lines(chain(head, raw), live=self.live):
            if lineno == len(head) and looks_like_document(line):
                yield from self._document(line)
                return
            yield lineno, line

    def _document(self, doc: Any) -> Iterator[tuple[int, dict[str, Any]]]:
        self.document = True
        items = doc.get("items") if looks_like_document(doc) else None
        if not isinstance(items, list):
            raise TranscriptError(
                "file",
                'is not a Codex rollout: one saved as a document has "session" and "items", a list',
            )
        yield 0, doc["session"]
        for n, item in enumerate(items, start=1):
            if not isinstance(item, dict):
                raise line_error(n, f"must be a JSON object, not {json_kind(item)}")
            yield n, item

    def place(self, error: TranscriptError) -> TranscriptError:
        """`error` naming where it is in a document, not a line the document does not have."""
        where = error.where.split(" ", 1)
        if not self.document or where[0] != "line" or not where[1].isdigit():
            return error
        n = int(where[1])
        return TranscriptError("session" if n == 0 else f"items[{n - 1}]", error.message)
