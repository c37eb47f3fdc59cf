"""Tool calls: which tool was called with which arguments, whatever the spelling.

Agents log a call in several shapes: OpenAI's ``tool_calls`` on the assistant
message (``function.name``, ``function.arguments`` as JSON text), Anthropic's
``tool_use`` blocks (``name``, ``input``), the contract's ``tool_call`` parts
(``name``, ``arguments``), or the arguments on the tool message itself. A tool
result names its call by ``tool_call_id`` (or ``tool_use_id``). This module is
the one place that reads them, so "the same call again" means one thing for
``repeated_tool_call`` and ``refetch_after_fold`` alike.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import orjson

from contextview.core.model import Message
from contextview.core.parts import all_results, json_text, listed_calls, part_kind

_CALL_PARTS = frozenset({"tool_call", "tool_use", "function_call"})
_ARG_KEYS = ("arguments", "args", "input", "tool_input")
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
    for call in listed_calls(message.extra):
        function = call.get("function")
        if isinstance(function, dict):
            yield call.get("id"), function.get("name"), function.get("arguments")
        else:
            yield call.get("id"), call.get("name"), _args_in(call)
    if isinstance(message.content, list):
        for part in message.content:
            if isinstance(part, dict) and part_kind(part) in _CALL_PARTS:
                yield part.get("id") or part.get("call_id"), part.get("name"), _args_in(part)


def _args_in(raw: Mapping[str, Any]) -> Any:
    for key in _ARG_KEYS:
        if key in raw:
            return raw[key]
    return None


def call_id_of_result(message: Message) -> str | None:
    """The id of the call a tool result answers, if it says."""
    extra = message.extra or {}
    for key in ("tool_call_id", "tool_use_id", "call_id"):
        value = extra.get(key)
        if isinstance(value, str):
            return value
    if isinstance(message.content, list):
        for part in message.content:
            if isinstance(part, dict) and part.get("type") in ("tool_result", "function_result"):
                value = part.get("tool_call_id") or part.get("tool_use_id")
                if isinstance(value, str):
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
    own = _args_in(extra)
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


def said_text(message: Message) -> str:
    """A message's text with what it passes to its tools: where its entities are said.

    The text holds the arguments of the calls the model reads as it reads them
    (``parts.reading``); arguments it does not read (under ``args`` or ``tool_input``)
    follow it. So for nearly every message this is its text, whose entities' keys are
    stored with its content and need not be found again.
    """
    if not message.extra and not isinstance(message.content, list):
        return message.text  # tool calls sit in extra fields or in parts
    text = message.text
    unread = [
        arguments if isinstance(arguments, str) else args_key(arguments)
        for _, _, arguments in calls_of(message)
        if arguments is not None and json_text(arguments) not in text
    ]
    return "\n".join((text, *unread)) if unread else text
