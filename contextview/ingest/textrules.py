"""Which strings of an event are identifiers and which are free text.

Identifiers (session, event and message ids, roles, tools, partitions, modes,
operation names and targets, ...) are kept exactly as sent and looked up by
equality, so one holding NUL or a lone surrogate is refused, for that event
alone, naming the field. Everything else is free text (contents and their parts,
reasons, metadata, pinned texts, outcomes, params, any field the contract does not
name) and is stored losslessly through ``contextview.core.textsafe``.

Only batches whose raw bytes may hold such text are walked (``Batch.needs_escape``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from contextview.core.errors import InputError
from contextview.core.textsafe import escape, escape_json, text_problem

_EVENT_IDENTS = frozenset({"id", "type", "timestamp"})
_BODY_IDENTS = frozenset(
    {"session_id", "agent", "model", "encoding", "mode", "status", "index", "budget"}
)
_MESSAGE_IDENTS = frozenset({"id", "role", "partition", "tool"})
_OP_IDENTS = frozenset({"action", "target", "targets", "ids", "role"})

Rule = Callable[[Any, str], Any]


def event_make_safe(raw: dict[str, Any]) -> dict[str, Any]:
    """The event with its free text escaped; InputError for a bad identifier."""
    return _fields(raw, "", _EVENT_IDENTS, {"body": _body})


def _fields(value: Any, field: str, idents: frozenset[str], nested: dict[str, Rule]) -> Any:
    """An object's identifiers checked, its `nested` fields passed to their rule and
    the rest escaped as free text; anything but an object is free text."""
    if not isinstance(value, dict):
        return escape_json(value)
    out: dict[str, Any] = {}
    for key, item in value.items():
        where = f"{field}.{key}" if field else key
        if key in idents:
            out[key] = _ident(item, where)
        elif key in nested:
            out[key] = nested[key](item, where)
        else:
            out[escape(key)] = escape_json(item)
    return out


def _message(value: Any, field: str) -> Any:
    return _fields(value, field, _MESSAGE_IDENTS, {})


def _messages(value: Any, field: str) -> Any:
    if not isinstance(value, list):
        return escape_json(value)
    return [_message(m, f"{field}[{i}]") for i, m in enumerate(value)]


def _context(value: Any, field: str) -> Any:
    return _fields(value, field, frozenset(), {"messages": _messages})


def _op(value: Any, field: str) -> Any:
    return _fields(value, field, _OP_IDENTS, {"result": _message})


def _ops(value: Any, field: str) -> Any:
    if not isinstance(value, list):
        return escape_json(value)
    return [_op(op, f"{field}[{i}]") for i, op in enumerate(value)]


_BODY_RULES: dict[str, Rule] = {
    "obs": _context,
    "after": _context,
    "output": _context,
    "action": _op,
    "actions": _ops,
}


def _body(value: Any, field: str) -> Any:
    return _fields(value, field, _BODY_IDENTS, _BODY_RULES)


def _ident(value: Any, field: str) -> Any:
    """`value` unchanged if no string in it holds NUL or a lone surrogate."""
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            raise InputError(field, problem)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _ident(item, f"{field}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            _ident(key, field)
            _ident(item, f"{field}.{key}")
    return value
