"""Tool calls: which tool was called with which arguments, whatever the spelling.

Agents log a call in several shapes: OpenAI's ``tool_calls`` on the assistant
message (``function.name``, ``function.arguments`` as JSON text), Anthropic's
``tool_use`` blocks (``name``, ``input``), the contract's ``tool_call`` parts
(``name``, ``arguments``), the Responses API's items (``function_call``, Codex's
``local_shell_call``), or the arguments on the tool message itself. A tool result
names its call by ``tool_call_id`` (or ``tool_use_id``, ``call_id``). What a call is
``parts.calls_in`` says, for reading and counting a message too; this module
compares them, so "the same call again" means one thing for ``repeated_tool_call``
and ``refetch_after_fold`` alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson

from contextview.core.model import Message, default_partition
from contextview.core.parts import (
    CALL_FIELDS,
    all_results,
    answered_call,
    arguments_in,
    calls_in,
    is_result_part,
)

# How far back from a tool result its call is looked for.
CALL_LOOKBACK = 16
RESULT_ROLES = frozenset({"tool", "tool_result"})


def is_tool_result(message: Message) -> bool:
    """Whether a message is a tool's result: it names its tool, has a tool's role, or
    its content is tool results' parts (``parts.all_results``)."""
    return message.tool is not None or message.role in RESULT_ROLES or all_results(message.content)


def args_key(arguments: Any) -> str:
    """Arguments in one canonical text: JSON with sorted keys (JSON text is parsed first)."""
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return str(arguments).strip()
    try:
        return orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return str(arguments)


def calls_of(message: Message) -> Iterator[tuple[str | None, str | None, Any]]:
    """(call id, tool name, arguments) of each call an assistant message makes."""
    for call_id, name, arguments in calls_in(message.content, message.extra):
        yield (
            call_id if isinstance(call_id, str) else None,
            name if isinstance(name, str) else None,
            arguments,
        )


def call_id_of_result(message: Message) -> str | None:
    """The id of the call a tool result answers, if it says."""
    extra = message.extra or {}
    for key in ("tool_call_id", "tool_use_id", "call_id"):
        value = extra.get(key)
        if isinstance(value, str):
            return value
    if isinstance(message.content, list):
        for part in message.content:
            if is_result_part(part):
                value = answered_call(part)
                if value is not None:
                    return value
    return None


def result_call(context: Sequence[Message], position: int) -> tuple[str, str | None] | None:
    """(tool, arguments key or None) of the call whose result is context[position].

    None when that message is no tool result. The arguments are the message's
    own, or those of the call it names in one of the messages just before it.
    """
    message = context[position]
    if not is_tool_result(message):
        return None
    tool = message.tool
    extra = message.extra or {}
    own = arguments_in(extra)
    if own is not None:
        return (tool or str(extra.get("name") or ""), args_key(own))
    call_id = call_id_of_result(message)
    if call_id is not None:
        for m in reversed(context[max(0, position - CALL_LOOKBACK) : position]):
            if m.role not in ("assistant", None):
                continue
            for cid, name, arguments in calls_of(m):
                if cid == call_id:
                    key = args_key(arguments) if arguments is not None else None
                    return (tool or name or "", key)
    if tool is None:
        tool = extra.get("name") if isinstance(extra.get("name"), str) else None
    return (tool, None) if tool else None


def reply_said(output: Any) -> list[str]:
    """What a call's reply says (its output as sent, ``{"messages": [...]}``): the
    `said_text` of each message the model wrote, as its next call would hold it."""
    messages = output.get("messages") if isinstance(output, dict) else None
    said = []
    for n, raw in enumerate(messages if isinstance(messages, list) else ()):
        if not isinstance(raw, dict):
            continue
        content = raw.get("content")
        role = raw.get("role") if isinstance(raw.get("role"), str) else "assistant"
        reply = Message(
            id=f"reply-{n}",
            role=role,
            content=content if isinstance(content, str | list) else None,
            partition=default_partition(role),
            extra={k: raw[k] for k in CALL_FIELDS if k in raw} or None,
        )
        text = said_text(reply)
        if text:
            said.append(text)
    return said


def said_text(message: Message) -> str:
    """Where a message's entities are said: its text, which holds what it passes to its
    tools as the model reads it (``parts.reading`` reads every call ``parts.calls_in``
    finds, under whichever key it keeps its arguments). So its entities' keys are the
    ones stored with its content and need not be found again."""
    return message.text
