"""Reading an ingest body one event at a time, with its limits checked as it goes.

``json.loads`` of a whole body would build every event before the event count
could be checked: 20 MiB of ``{}`` is seven million dicts (+500 MiB). Here the
envelope is walked by hand and each event of ``batch`` is decoded on its own by
the standard library's C scanner (``raw_decode``), so the count is known before
the event past the limit is built, and what is wrong inside one event (nesting
too deep for the parser, a number JSON does not have, such as ``NaN``) costs that
event alone.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest

from contextview.core.textsafe import json_needs_escape

# How deep a value may nest inside an event (the event object is level 1). Far
# more than any agent's log needs, far less than where Python's JSON, pydantic or
# the pages would run out of stack.
MAX_DEPTH = 100
# A value Python's parser itself gave up on (past its recursion limit).
TOO_DEEP_TO_READ = "nested too deep to read"

_WS = re.compile(r"[ \t\n\r]*")
# One token of a value being skipped over without building it: a string, a run
# of openers, a run of closers, or anything else up to the next of those.
_SKIP = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]+|[\]}]+|[^\[\]{}"]+', re.DOTALL)
_SCALAR = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null'
)
_KINDS = {"[": "array", "{": "object", '"': "string", "t": "boolean", "f": "boolean"}


class BodyError(Exception):
    """The whole request is refused: ``status`` (400, 413 or 415) and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Refused:
    """An event of the batch that could not be decoded; the others go on."""

    event_id: str | None
    error: str


@dataclass
class Batch:
    # Each event decoded, or Refused.
    events: list[Any]
    # Whether some string may hold what the store must escape (core.textsafe);
    # False means no event needs to be walked for it.
    needs_escape: bool


class _NotFinite:
    """Stands in the decoded value for a number JSON does not have."""

    def __init__(self, text: str) -> None:
        self.text = text


class _Decoder(json.JSONDecoder):
    def __init__(self) -> None:
        super().__init__(parse_constant=self._constant, parse_float=self._float)
        self.not_finite = False

    def _constant(self, name: str) -> _NotFinite:
        self.not_finite = True
        return _NotFinite(name)

    def _float(self, text: str) -> float | _NotFinite:
        value = float(text)
        if math.isfinite(value):
            return value
        self.not_finite = True  # 1e400
        return _NotFinite(text)


def batch_parse(body: bytes, *, max_events: int) -> Batch:
    """The events of an ingest body; raises BodyError for a body that is not an
    envelope (400) or has more than `max_events` events (413)."""
    try:
        encoding = json.detect_encoding(body)
        text = body.decode(encoding)
    except UnicodeDecodeError as exc:
        raise BodyError(400, f"body is not JSON: {exc}") from None
    needs_escape = json_needs_escape(text)
    decoder = _Decoder()
    i = _ws(text, 0)  # a byte order mark went with the decoding
    if text[i : i + 1] != "{":
        kind = _kind(text, i)
        if kind != "array" and _ws(text, _skip(text, i)) != len(text):
            _not_json("Extra data", text, _skip(text, i))
        raise BodyError(400, 'body must be an object {"batch": [events]}, not a JSON ' + kind)
    events: list[Any] | None = None
    i = _ws(text, i + 1)
    if text[i : i + 1] == "}":
        i += 1
    else:
        while True:
            if text[i : i + 1] != '"':
                _not_json("Expecting property name enclosed in double quotes", text, i)
            key, i = decoder.raw_decode(text, i)
            i = _ws(text, i)
            if text[i : i + 1] != ":":
                _not_json("Expecting ':' delimiter", text, i)
            i = _ws(text, i + 1)
            if key != "batch":
                i = _skip(text, i, what=f"{key}: a field other than batch")
            elif text[i : i + 1] == "[":
                events, i = _events(text, i, decoder, max_events)
            else:
                kind = _kind(text, i)
                raise BodyError(400, f"batch: must be a list of events, not {kind}")
            i = _ws(text, i)
            if text[i : i + 1] == ",":
                i = _ws(text, i + 1)
                continue
            if text[i : i + 1] == "}":
                i += 1
                break
            _not_json("Expecting ',' delimiter", text, i)
    if _ws(text, i) != len(text):
        _not_json("Extra data", text, _ws(text, i))
    if events is None:
        raise BodyError(400, "batch: field required, a list of events")
    return Batch(events=events, needs_escape=needs_escape)


def _events(text: str, i: int, decoder: _Decoder, max_events: int) -> tuple[list[Any], int]:
    events: list[Any] = []
    i = _ws(text, i + 1)
    if text[i : i + 1] == "]":
        return events, i + 1
    while True:
        if len(events) == max_events:
            raise BodyError(
                413, f"batch has more than {max_events} events; the limit is {max_events}"
            )
        start = i
        decoder.not_finite = False
        try:
            value, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise BodyError(400, f"body is not JSON: {exc}") from None
        except RecursionError:
            where = f"batch[{len(events)}]"
            i = _skip(text, start, what=f"{where}: an event nested too deep to read")
            events.append(Refused(_first_id(text, start), f"{where}: {TOO_DEEP_TO_READ}"))
        except ValueError:  # an integer past Python's 4300 digits
            where = f"batch[{len(events)}]"
            i = _skip(text, start, what=f"{where}: an event with a number too long to read")
            events.append(Refused(_id_of(text, start), f"{where}: a number has too many digits"))
        else:
            events.append(_checked(value, text, start, i, decoder.not_finite))
        i = _ws(text, i)
        if text[i : i + 1] == ",":
            i = _ws(text, i + 1)
            continue
        if text[i : i + 1] == "]":
            return events, i + 1
        _not_json("Expecting ',' delimiter", text, i)


# An event's id when it is the event's first field, as clients write it.
_FIRST_ID = re.compile(r'\{\s*"id"\s*:\s*("[^"\\]*(?:\\.[^"\\]*)*")')


def _first_id(text: str, start: int) -> str | None:
    """The id of an event too deep to build, when it is written first."""
    match = _FIRST_ID.match(text, start)
    if match is None:
        return None
    try:
        event_id = json.loads(match.group(1))
    except ValueError:
        return None
    return event_id if isinstance(event_id, str) else None


_DIGITS_AS_TEXT = json.JSONDecoder(parse_int=str)


def _id_of(text: str, start: int) -> str | None:
    """The id of an event whose numbers are too long to read as numbers: read again
    with its integers kept as text, which costs only such an event."""
    try:
        value, _ = _DIGITS_AS_TEXT.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    event_id = value.get("id") if isinstance(value, dict) else None
    return event_id if isinstance(event_id, str) else None


def _checked(value: Any, text: str, start: int, end: int, not_finite: bool) -> Any:
    """The event, or Refused if it holds a number JSON lacks or nests too deep."""
    event_id = value.get("id") if isinstance(value, dict) else None
    event_id = event_id if isinstance(event_id, str) else None
    if not_finite:
        for path, leaf in _leaves(value, ""):
            if isinstance(leaf, _NotFinite):
                return Refused(
                    event_id,
                    f"{path or 'event'}: {leaf.text} is not a number JSON allows; "
                    "send a finite number or null",
                )
    deep = _nesting_error(value, _openers(text, start, end), whole="event")
    return value if deep is None else Refused(event_id, deep)


def event_nesting_error(event: dict[str, Any], body_text: str) -> str | None:
    """What is wrong with the nesting of an event the server built itself (an
    imported transcript's, an OTLP span's), held to the rule of one sent to ingest;
    `body_text` is its body as JSON."""
    # The event's own brace is not in its body's text.
    return _nesting_error(event, _openers(body_text, 0, len(body_text)) + 1, whole="event")


def _openers(text: str, start: int, end: int) -> int:
    return text.count("{", start, end) + text.count("[", start, end)


def _nesting_error(value: Any, openers: int, *, whole: str) -> str | None:
    """What is wrong with the nesting of `value`, written with `openers` brackets and
    braces: the field holding a value nested past MAX_DEPTH (`whole` if it is the
    value itself), or None."""
    # Nesting deeper than MAX_DEPTH needs more than MAX_DEPTH openers: counting
    # them is cheap, walking the value is left for the few that have that many.
    if openers <= MAX_DEPTH:
        return None
    deep = _too_deep(value, whole=whole)
    return None if deep is None else f"{deep}: nested deeper than {MAX_DEPTH} levels"


def json_body(body: bytes) -> Any:
    """A request body that is one JSON value (the API's writes other than ingest),
    held to an ingest event's limit on nesting: raises BodyError (400) naming what
    is wrong."""
    try:
        text = body.decode(json.detect_encoding(body))
        value = json.loads(text)
    except RecursionError:
        raise BodyError(400, f"body: {TOO_DEEP_TO_READ}") from None
    except ValueError as exc:
        raise BodyError(400, f"body is not JSON: {exc}") from None
    deep = _nesting_error(value, _openers(text, 0, len(text)), whole="body")
    if deep is not None:
        raise BodyError(400, deep)
    return value


def _leaves(value: Any, path: str, levels: int | None = None) -> Iterator[tuple[str, Any]]:
    """(path, value) of every leaf, or of every value `levels` levels down."""
    stack = [(path, value, 0)]
    while stack:
        path, value, level = stack.pop()
        if level == levels or not isinstance(value, dict | list):
            yield path, value
        elif isinstance(value, dict):
            stack.extend(
                (f"{path}.{k}" if path else str(k), v, level + 1) for k, v in value.items()
            )
        else:
            stack.extend((f"{path}[{k}]", v, level + 1) for k, v in enumerate(value))


def _depth_over(value: Any, limit: int) -> bool:
    """Whether a container nests deeper than `limit` levels, without naming paths
    (which would cost more than the walk): the rare event that does is walked again."""
    stack = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        value, depth = pop()
        if depth > limit:
            return True
        children = value.values() if type(value) is dict else value
        for child in children:
            if type(child) is dict or type(child) is list:
                push((child, depth + 1))
    return False


# The error names the field a too deep value hangs from (body.metadata.x), not
# the hundred levels under it.
_NAMED_LEVELS = 3


def _too_deep(value: Any, *, whole: str) -> str | None:
    """The field holding the first value nested past MAX_DEPTH (`whole`: the value
    itself, when it is not a field under it), or None."""
    if not isinstance(value, dict | list) or not _depth_over(value, MAX_DEPTH):
        return None
    for path, child in _leaves(value, "", levels=_NAMED_LEVELS):
        if isinstance(child, dict | list) and _depth_over(child, MAX_DEPTH - _NAMED_LEVELS):
            return path or whole
    return whole


def _ws(text: str, i: int) -> int:
    match = _WS.match(text, i)
    return match.end() if match else i


def _kind(text: str, i: int) -> str:
    """What the value at `i` is, from its first character (an array is not read)."""
    match = _SCALAR.match(text, i) if text[i : i + 1] not in ("[", "{") else None
    if match is None and text[i : i + 1] not in ("[", "{"):
        _not_json("Expecting value", text, i)
    first = text[i : i + 1]
    return "null" if first == "n" else _KINDS.get(first, "number")


# Skipping costs a step of Python per token (some 0.35 µs): past this many (some
# 0.7 s, an event of 4 MB nested 600,000 levels deep), the whole body is refused.
MAX_SKIPPED_TOKENS = 2_000_000


def _skip(text: str, i: int, *, what: str = "a value") -> int:
    """Where the value at `i` ends, found without building it; `what` it is names it
    in the error if it is too large to skip."""
    if text[i : i + 1] not in ("[", "{"):
        match = _SCALAR.match(text, i)
        if match is None:
            _not_json("Expecting value", text, i)
        return match.end()  # type: ignore[union-attr]
    depth = 0
    for n, match in enumerate(_SKIP.finditer(text, i)):
        if n == MAX_SKIPPED_TOKENS:
            raise BodyError(400, f"{what} is too large to read past")
        token = match.group()
        if token[0] in "[{":
            depth += len(token)
        elif token[0] in "]}":
            if len(token) >= depth:
                return match.start() + depth
            depth -= len(token)
    _not_json("Unterminated value", text, i)
    return len(text)  # not reached


def _not_json(message: str, text: str, i: int) -> None:
    raise BodyError(400, f"body is not JSON: {json.JSONDecodeError(message, text, i)}")


# Content-Encoding values taken, and the zlib window bits that read each.
# HTTP's "deflate" is the zlib format (RFC 9110), but some clients send raw
# deflate under that name: 32 + MAX_WBITS would read zlib and gzip, not raw, so
# deflate is told apart by its first two bytes.
_GZIP = 16 + zlib.MAX_WBITS
# The batch API takes gzip (contract: another encoding is a 415); OTLP also takes
# deflate, which the OpenTelemetry exporters offer as their other compression.
INGEST_ENCODINGS = ("identity", "gzip")
OTLP_ENCODINGS = ("identity", "gzip", "deflate")


def json_charset_refused(content_type: str) -> str | None:
    """Why a JSON body's declared charset is refused (JSON is UTF-8, RFC 8259), from
    the whole Content-Type header; None when it names none, or UTF-8."""
    for parameter in content_type.split(";")[1:]:
        name, _, value = parameter.partition("=")
        charset = value.strip().strip('"')
        if name.strip().lower() == "charset" and charset.lower() not in ("utf-8", "utf8"):
            return f"charset must be utf-8, not {charset!r}: JSON is UTF-8"
    return None


def request_body(
    request: HttpRequest, limit: int, encodings: tuple[str, ...] = INGEST_ENCODINGS
) -> bytes:
    """The request body, inflated if in one of `encodings` (gzip, deflate), refusing
    past ``limit`` without reading on.

    Shared by every endpoint that takes a body (ingest, OTLP); raises BodyError
    (400, 413 or 415) naming what is wrong.
    """
    declared = request.META.get("CONTENT_LENGTH")
    try:
        length = int(declared or "0")
    except ValueError:
        raise BodyError(400, "Content-Length is not a number") from None
    encoding = (request.META.get("HTTP_CONTENT_ENCODING") or "identity").strip().lower()
    if encoding not in encodings:
        names = [name for name in encodings if name != "identity"]
        raise BodyError(
            415, f"Content-Encoding {encoding!r} is not supported; use {', '.join(names)} or none"
        )
    if length > limit:
        raise BodyError(413, f"body of {length} bytes is over the limit of {limit} bytes")
    chunked = "chunked" in (request.META.get("HTTP_TRANSFER_ENCODING") or "").lower()
    if chunked and not declared:
        # Django reads a body without Content-Length as empty; the server has
        # de-chunked the stream, which ends where the body does.
        raw = request.environ["wsgi.input"].read(limit + 1)
    else:
        raw = request.read(limit + 1)
    if len(raw) > limit:
        raise BodyError(413, f"body is over the limit of {limit} bytes")
    if encoding == "identity":
        return raw
    if encoding == "deflate":
        return _inflate(raw, zlib.MAX_WBITS if _is_zlib(raw) else -zlib.MAX_WBITS, "deflate", limit)
    return _inflate(raw, _GZIP, "gzip", limit)


def _is_zlib(raw: bytes) -> bool:
    """Whether `raw` starts with a zlib header (method 8, check bits right)."""
    return len(raw) >= 2 and raw[0] & 0x0F == 8 and (raw[0] << 8 | raw[1]) % 31 == 0


def _inflate(raw: bytes, wbits: int, name: str, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    try:
        body = inflater.decompress(raw, limit + 1)
    except zlib.error as exc:
        raise BodyError(400, f"body is not valid {name}: {exc}") from None
    if len(body) > limit or inflater.unconsumed_tail:
        raise BodyError(413, f"body inflates past the limit of {limit} bytes")
    if not inflater.eof:
        raise BodyError(400, f"body is not valid {name}: the stream is truncated")
    return body
