"""Storing text PostgreSQL cannot hold, losslessly: one reversible escape.

PostgreSQL text and jsonb cannot hold NUL (U+0000), and UTF-8 cannot encode a lone
surrogate (what an agent produces when it cuts a string inside an emoji). Free
text an agent sends (contents, reasons, metadata, ...) is escaped on the way in
and restored by the read API, so the content comes back as it was sent.

The escaped form is meant to read well where it is shown as stored (the pages,
the reports):

=====================  ===================
as sent                stored
=====================  ===================
NUL                    ``␀`` (U+2400)
a lone surrogate       ``␛D83D`` (U+241B and the code point in hex)
``␀``                  ``␛␀``
``␛``                  ``␛␛``
=====================  ===================

Text without NUL, surrogates, ``␀`` or ``␛`` is stored unchanged, and
:func:`json_needs_escape` tells from a request's JSON text whether any string in
it can need escaping, so clean requests pay nothing.
"""

from __future__ import annotations

import re
from typing import Any

NUL_SYMBOL = "\u2400"  # ␀
ESCAPE = "\u241b"  # ␛

_UNSAFE = re.compile("[\x00\ud800-\udfff\u2400\u241b]")
_ESCAPED = re.compile(f"{ESCAPE}({ESCAPE}|{NUL_SYMBOL}|D[89A-F][0-9A-F]{{2}})|{NUL_SYMBOL}")
# What a string is refused for when it is an identifier (which is never escaped).
_NOT_TEXT = re.compile("[\x00\ud800-\udfff]")

# In JSON text, what starts a \u escape of NUL, of ␀ or ␛ (U+24xx) or of a
# surrogate (U+Dxxx: a valid pair or Hangul too, which are cheap to walk). Plain
# substring tests: a regex is several times slower on text of many escapes.
_JSON_ESCAPES = ("\\u0000", "\\u24", "\\ud", "\\uD")


def json_needs_escape(text: str) -> bool:
    """Whether some string of the JSON document `text` may decode to text that
    :func:`escape` changes (False is certain; True means "walk it and see").

    `text` must be decoded strictly (a lone surrogate written raw is not UTF-8),
    so a surrogate can only come from a \\u escape. Made to cost next to nothing
    on clean text: substring tests, and for ASCII text (most bodies) only one.
    """
    if "\\u" in text and any(start in text for start in _JSON_ESCAPES):
        return True
    return not text.isascii() and (NUL_SYMBOL in text or ESCAPE in text)


# In text that `json.dumps(..., ensure_ascii=False)` wrote (the canonical form), NUL
# is always written as the escape \u0000 and everything else as itself.
_UNSAFE_WRITTEN = re.compile("\\\\u0000|[\ud800-\udfff\u2400\u241b]")


def written_json_needs_escape(text: str) -> bool:
    """Whether some string of the value that `text` encodes (JSON written with
    ``ensure_ascii=False``) may be changed by :func:`escape` (False is certain).

    One pass over text the caller has written anyway (to hash it), instead of a
    walk over every string of the value.
    """
    if text.isascii():
        return "\\u0000" in text
    return _UNSAFE_WRITTEN.search(text) is not None


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\x00":
        return NUL_SYMBOL
    if char in (NUL_SYMBOL, ESCAPE):
        return ESCAPE + char
    return f"{ESCAPE}{ord(char):04X}"


def _restore_one(match: re.Match[str]) -> str:
    code = match.group(1)
    if code is None:
        return "\x00"
    if code in (NUL_SYMBOL, ESCAPE):
        return code
    return chr(int(code, 16))


def escape(text: str) -> str:
    """`text` in a form PostgreSQL and UTF-8 can hold; :func:`restore` undoes it."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape_one, text)


def restore(text: str) -> str:
    """The text as it was sent, from what :func:`escape` stored."""
    if ESCAPE not in text and NUL_SYMBOL not in text:
        return text
    return _ESCAPED.sub(_restore_one, text)


def escape_json(value: Any) -> Any:
    """A JSON value with every string and object key escaped (a new value)."""
    return _map_json(value, escape)


def restore_json(value: Any) -> Any:
    """A JSON value with every string and object key restored (a new value)."""
    return _map_json(value, restore)


def _map_json(value: Any, fn: Any) -> Any:
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {fn(k) if isinstance(k, str) else k: _map_json(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_json(v, fn) for v in value]
    return value


def text_problem(text: str) -> str | None:
    """Why `text` cannot be an identifier (which is kept exactly, never escaped), or None."""
    found = _NOT_TEXT.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "must not contain NUL (\\u0000)"
    return f"must not contain an unpaired surrogate (\\u{ord(found.group()):04x})"


def utf8_writable(text: str) -> str:
    """`text` as UTF-8 can write it: an unpaired surrogate (text cut inside an emoji,
    which the read API gives back as sent) written as its escape, ``\\ud83d``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text
