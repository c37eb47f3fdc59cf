"""How a content blob keeps its parts without holding its text twice.

A blob stores a message's text (what the model reads, which search and the
statistics use) and, for a content that is not a plain string, the parts as sent.
Most such contents carry their text whole in one string (a tool result, a single
text part): stored as is, that text would be kept twice. `pack` leaves that
string empty and notes where it was; `unpack` puts the text back.

A packed value is ``{"$text_at": [key or index, ...], "value": ...}``. Nothing
else a blob holds looks like that: parts are a list, and a content sent with tool
calls is an object that always has ``content``.
"""

from __future__ import annotations

from typing import Any

TEXT_AT = "$text_at"
# Below this, the note of where the text was costs about what it saves.
MIN_PACKED = 64
# How deep a content's parts are searched for the text.
MAX_DEPTH = 6

Path = list[str | int]


def pack(value: Any, text: str) -> Any:
    """`value` with the string equal to `text` left empty, and where it was; `value`
    itself when no string is (or the text is short)."""
    if len(text) < MIN_PACKED or isinstance(value, str):
        return value
    path = _find(value, text, 0)
    if path is None:
        return value
    return {TEXT_AT: path, "value": _put(value, path, "")}


def unpack(stored: Any, text: str) -> Any:
    """The value `pack` was given, from what it returned."""
    if isinstance(stored, dict) and TEXT_AT in stored and "content" not in stored:
        return _put(stored["value"], stored[TEXT_AT], text)
    return stored


def _find(value: Any, text: str, depth: int) -> Path | None:
    if depth > MAX_DEPTH:
        return None
    items: Any
    if isinstance(value, list):
        items = enumerate(value)
    elif isinstance(value, dict):
        items = value.items()
    else:
        return None
    for key, item in items:
        if isinstance(item, str):
            if item == text:
                return [key]
        else:
            below = _find(item, text, depth + 1)
            if below is not None:
                return [key, *below]
    return None


def _put(value: Any, path: Path, text: str) -> Any:
    """A copy of `value` with `text` at `path` (copied only along the path)."""
    if not path:
        return text
    key, rest = path[0], path[1:]
    if isinstance(value, list) and isinstance(key, int):
        out_list = list(value)
        out_list[key] = _put(value[key], rest, text)
        return out_list
    if isinstance(value, dict) and isinstance(key, str):
        out = dict(value)
        out[key] = _put(value[key], rest, text)
        return out
    raise ValueError(f"no place {path!r} in a packed blob")
