"""What every importer shares: reading lines, and turning a transcript's messages
and model calls into the contract's ingest events.

An importer feeds a `SessionLog` the messages in the order the agent added them
to its context, tells it where each model call happened, and stages the
compactions the log reports; the log answers with `step` events whose
`obs.messages` send each message's content once and its `id` alone afterwards
(contract: an id sent alone stands for the latest recorded content), so a
context resent on every call is stored once. What the previous step's context
held goes as ``$run`` elements of it (``core.runs``), so a step's event, and the
server's work on it, grow with what the call added, not with its context; its id
is still the one it had when every step sent its whole context (`_step_id`).

Only ids and short hashes of what was already sent are kept, so memory grows with
the number of messages in the live context, never with the transcript's bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import IO, Any

from contextview.core.errors import short_repr
from contextview.core.layout import one_line
from contextview.core.messages import canonical_json
from contextview.core.runs import BASE_KEY, encode_runs, run_element, runs_in
from contextview.core.times import as_rfc3339

Event = dict[str, Any]
log = logging.getLogger(__name__)


class TranscriptError(Exception):
    """A transcript that cannot be read, naming the line (or JSON path) at fault."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


# What is said of JSON nested deeper than Python's parser (or a reader) can go.
TOO_DEEP = "is nested too deep to read"


class NotFinite(Exception):
    """A number JSON does not have (NaN, Infinity) or one past a float (1e400):
    Python reads them, PostgreSQL does not store them, and ingest refuses them."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f"{self.text} is not a number JSON allows"


def _not_finite(text: str) -> Any:
    raise NotFinite(text)


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise NotFinite(text)
    return value


def json_loads(data: bytes | str) -> Any:
    """``json.loads``, raising NotFinite for a number ingest would refuse."""
    return json.loads(data, parse_constant=_not_finite, parse_float=_finite)


def json_utf8(data: bytes) -> Any:
    """`json_loads` of a log's bytes read as UTF-8, as JSON and JSONL are (json.loads
    would guess UTF-16 or 32 from NUL bytes), a byte order mark passed over."""
    return json_loads(data.decode("utf-8-sig"))


def not_utf8(exc: UnicodeDecodeError, within: str = "") -> str:
    """What an error says of bytes `json_utf8` could not read; `within`: of what the
    byte's offset is ("of the line"), when not of the whole file."""
    return f"is not UTF-8 text (byte {exc.start}{' ' + within if within else ''}: {exc.reason})"


def compaction_reason(trigger: str, tokens: Any) -> str:
    """The reason of the operations a log's compaction becomes: what set it off and,
    where the log gave it, the tokens reported before it."""
    if isinstance(tokens, int) and not isinstance(tokens, bool):
        return f"compaction (trigger: {trigger}, {tokens} tokens reported before)"
    return f"compaction (trigger: {trigger})"


def line_error(lineno: int, message: str) -> TranscriptError:
    return TranscriptError(f"line {lineno}", message)


def json_kind(value: Any) -> str:
    """What JSON value `value` is, as an error names what a field held: its type, and
    a scalar's value too (``a number (-1)``)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        kind = "a boolean"
    elif isinstance(value, str):
        kind = "a string"
    else:
        kind = "a number"
    text = canonical_json(value)
    return f"{kind} ({text if len(text) <= 40 else text[:37] + '...'})"


def unfit(container: Any, key: str, expected: str, meaning: str = "") -> str:
    """What an error says of the field `key` of `container` that is not `expected`
    (what it must be, said with its article: "an object", "a list"): "field required"
    where the field is absent, with `meaning` (what the field holds, "the session
    id") or else `expected`; where it is there, what it must be and what it holds."""
    if not isinstance(container, dict) or key not in container:
        return f"field required, {meaning or expected}"
    value = container[key]
    if value == "" and "string" in expected:
        return "must not be empty"
    return f"must be {expected}, not {json_kind(value)}"


def token_count(value: Any, where: str) -> int | None:
    """A token count as a log writes it: absent (None) or a whole number of tokens;
    anything else is an error naming `where` (the line or JSON path of the field)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 53:
        raise TranscriptError(where, f"must be a whole number of tokens, not {short_repr(value)}")
    return value


def usage_cached_inside(
    prompt: int | None, cached: int, output: int | None, written: int | None = None
) -> dict[str, int] | None:
    """The usage of a provider that counts cached input inside the prompt's tokens
    (OpenAI, Codex, ATIF, LiteLLM's): the contract keeps them apart. The tokens
    `written` to a cache are in the prompt too (LiteLLM counts Anthropic's so). A
    count not given is left out; None when there is none."""
    out: dict[str, int] = {}
    if prompt is not None:
        out["input_tokens"] = max(0, prompt - cached)
        out["cache_read_tokens"] = cached
        if written:
            out["input_tokens"] = max(0, out["input_tokens"] - written)
            out["cache_write_tokens"] = written
    if output is not None:
        out["output_tokens"] = output
    return out or None


def openai_usage(usage: Any, at: str) -> dict[str, int] | None:
    """A usage object in OpenAI's spellings, which count cached input inside the
    prompt's tokens (`usage_cached_inside`): Chat Completions' (``prompt_tokens``,
    ``completion_tokens``, ``prompt_tokens_details.cached_tokens``; LiteLLM keeps
    Anthropic's ``cache_creation_input_tokens`` beside them) or the Responses API's
    (``input_tokens``, ``output_tokens``, ``input_tokens_details``). None when it is no
    object; a count of another kind is an error naming its path from `at`."""
    if not isinstance(usage, dict):
        return None
    chat = "prompt_tokens" in usage or "completion_tokens" in usage
    prompt, output = (
        ("prompt_tokens", "completion_tokens") if chat else ("input_tokens", "output_tokens")
    )
    details = usage.get(f"{prompt}_details")
    cached = (
        token_count(details.get("cached_tokens"), f"{at}.{prompt}_details.cached_tokens")
        if isinstance(details, dict)
        else None
    )
    return usage_cached_inside(
        token_count(usage.get(prompt), f"{at}.{prompt}"),
        cached or 0,
        token_count(usage.get(output), f"{at}.{output}"),
        token_count(usage.get("cache_creation_input_tokens"), f"{at}.cache_creation_input_tokens"),
    )


def reasoning_parts(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The reasoning a reply kept by LiteLLM holds (its message, or an agent's record
    of it), as thinking parts: its Anthropic ``thinking_blocks``, else its
    ``reasoning_content``, else the summary of the Responses API's reasoning item that
    the OpenHands SDK keeps (``responses_reasoning_item.summary``, its texts). LiteLLM
    writes an Anthropic model's thinking both ways, the blocks and their text joined,
    so the reply would show it twice were both kept."""
    blocks = reply.get("thinking_blocks")
    parts: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": block["thinking"]}
        for block in (blocks if isinstance(blocks, list) else [])
        if isinstance(block, dict) and isinstance(block.get("thinking"), str)
    ]
    item = reply.get("responses_reasoning_item")
    summary = item.get("summary") if isinstance(item, dict) else None
    summed = [t for t in summary if isinstance(t, str) and t] if isinstance(summary, list) else []
    for text in (reply.get("reasoning_content"), "\n\n".join(summed)):
        if not parts and isinstance(text, str) and text:
            parts.append({"type": "thinking", "thinking": text})
    return parts


def guarded(events: Iterator[Event], format: str) -> Iterator[Event]:
    """The events of a reader, its own failure on a shape it did not expect turned
    into the TranscriptError of a file that cannot be read (never a server error)."""
    _PLACE.set(None)
    try:
        yield from events
    except RecursionError:
        raise TranscriptError(_PLACE.get() or "file", TOO_DEEP) from None
    except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
        log.exception("the %s importer failed on a transcript", format)
        raise TranscriptError(
            _PLACE.get() or "file",
            f"cannot be read as {format} ({type(exc).__name__}: {str(exc)[:200]})",
        ) from None


# Where a reader is (a JSONL line, or the JSON path of a document's step or event),
# for the error of a reader that failed there.
_PLACE: ContextVar[str | None] = ContextVar("transcript_place", default=None)


def reading(where: str) -> None:
    """Note that a reader is at `where` (a JSON path), should it fail there."""
    _PLACE.set(where)


# What an error on a last line without its newline adds: a file copied while its agent
# was writing it ends so (the import API's `live`, the commands' --live).
UNFINISHED_HINT = (
    "the last line is unfinished: a transcript still being written is imported with "
    "live=1 (--live), which leaves that line for the next import"
)


def json_lines(
    stream: Iterable[bytes], *, live: bool = False
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each non-blank line of a JSONL stream (its lines) as an object, with its 1-based number.

    `live`: the file is still being written, so a last line without its newline that
    does not parse yet is left for the next read.
    """
    for lineno, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        unfinished = not raw.endswith(b"\n")  # only the last line can be
        try:
            value = json_utf8(raw)
        except NotFinite as exc:
            raise line_error(lineno, str(exc)) from None
        except ValueError as exc:
            if live and unfinished:
                return  # the last line, still being written
            if isinstance(exc, UnicodeDecodeError):
                raise line_error(lineno, not_utf8(exc, "of the line")) from None
            hint = f" ({UNFINISHED_HINT})" if unfinished else ""
            raise line_error(lineno, f"is not valid JSON: {exc}{hint}") from None
        except RecursionError:
            raise line_error(lineno, TOO_DEEP) from None
        if not isinstance(value, dict):
            raise line_error(lineno, f"must be a JSON object, not {type(value).__name__}")
        _PLACE.set(f"line {lineno}")
        yield lineno, value


def own_lines(
    lines: Iterable[tuple[int, dict[str, Any]]],
    *,
    format: str,
    recognised: Callable[[dict[str, Any]], bool],
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The lines of a JSONL transcript read as `format`, whose reader passes over the
    lines it does not know: a file none of whose lines is `recognised` is another
    format's (or none), and raises TranscriptError naming what its first line is.

    A transcript of the format with no model call yet is no error: it has lines of
    the format, and no step.
    """
    first: tuple[int, dict[str, Any]] | None = None
    known = False
    for lineno, line in lines:
        if first is None:
            first = (lineno, line)
        known = known or recognised(line)
        yield lineno, line
    if first is not None and not known:
        raise TranscriptError(
            "file",
            f"is not a {format} transcript: no line of it is a {format} record "
            f"({_what_line_is(*first)})",
        )


def _what_line_is(lineno: int, line: dict[str, Any]) -> str:
    kind = line.get("type")
    if isinstance(kind, str):
        return f"line {lineno} has type {short_repr(kind)}"
    fields = ", ".join(short_repr(k) for k in list(line)[:6]) or "none"
    return f"line {lineno} has no type; its fields: {fields}"


def json_document(stream: IO[bytes]) -> Any:
    """A whole-file JSON document (.traj, ATIF): these formats are one value, not lines."""
    return json_whole(stream.read())


def json_whole(data: bytes, where: str | None = None) -> Any:
    """One whole JSON value: a file's (`where` None: an error names the file, or the
    line a syntax error is on), or that of the part of a transcript named `where`."""
    place = where or "file"
    try:
        return json_utf8(data)
    except NotFinite as exc:
        raise TranscriptError(place, f"holds {exc.text}, not a number JSON allows") from None
    except UnicodeDecodeError as exc:
        raise TranscriptError(place, not_utf8(exc)) from None
    except json.JSONDecodeError as exc:
        if where is None:
            place, at = f"line {exc.lineno}", f"column {exc.colno}"
        else:
            at = f"line {exc.lineno} column {exc.colno}"
        more = (
            ": a value follows the first one, where this format is one JSON document "
            "(JSON lines are another format's)"
            if exc.msg == "Extra data"
            else ""
        )
        raise TranscriptError(place, f"is not valid JSON: {exc.msg} ({at}){more}") from None
    except RecursionError:
        raise TranscriptError(place, TOO_DEEP) from None


def short_hash(value: Any) -> str:
    text = value if isinstance(value, str) else canonical_json(value)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


# What of a step the model wrote: an earlier copy of a live transcript may hold only
# part of it (a reply still streaming in, its usage not yet reported).
REPLY_FIELDS = frozenset({"output", "usage", "context_window"})


def event_id(session_id: str, kind: str, tag: str, body: dict[str, Any]) -> str:
    """Ids from the content: the same file imported again sends the same events. A
    step's id is made from its call (its context and operations), not from its reply,
    so a copy of the file that grew sends the same id for a reply that grew."""
    if kind == "step":
        body = {k: v for k, v in body.items() if k not in REPLY_FIELDS}
    return f"imp-{tag}-{short_hash([session_id, canonical_json(body)])}"


# A step sends the messages the previous step's context holds as ``$run`` elements
# of it (``core.runs``) when there are at least this many: the server then neither
# reads nor looks up each of them again, so a long session costs what it adds.
RUN_FROM = 8


def _escaped(text: str) -> str:
    """`text` as it stands inside a JSON string (`canonical_json`), without the quotes."""
    return canonical_json(text)[1:-1]


_OBS_OPEN = _escaped('{"messages":[')
_OBS_CLOSE = _escaped("]}")


@dataclass(slots=True)
class _Said:
    """What a step's id is made from of its context: every message as it would be
    sent if the step named no base (`event_id`), as escaped text, made of
    `head`, the text of its first `head_count` messages (those sent as one run,
    each its id alone), and `texts`, one for each message after those."""

    head: str
    head_count: int
    texts: list[str]

    def messages(self) -> str:
        return _joined(self.head, ",".join(self.texts))


@dataclass(slots=True)
class _Base:
    """The previous step, as the next one can send runs of its context: its index,
    the ids of its context (no operation changed it, so that is its after), and
    the text those messages give a step's id, each its id alone (`_Said.head`)."""

    index: int
    ids: list[str]
    text: str


def _joined(*texts: str) -> str:
    """Texts of messages (`_Said`), one after another."""
    return ",".join(text for text in texts if text)


def _step_id(session_id: str, tag: str, body: dict[str, Any], said: _Said) -> str:
    """The id `event_id` gives the step `body` with its whole context in
    ``obs.messages``, worked out from the texts `said` holds of it: the same id
    whatever base the step is sent against, at a cost that does not grow with the
    messages the context carries over."""
    fields = {k: v for k, v in body.items() if k not in REPLY_FIELDS}
    pieces = []
    for key in sorted(fields):
        value = (
            f"{_OBS_OPEN}{said.messages()}{_OBS_CLOSE}"
            if key == "obs"
            else _escaped(canonical_json(fields[key]))
        )
        pieces.append(f"{_escaped(canonical_json(key))}:{value}")
    text = f'[{canonical_json(session_id)},"{{{",".join(pieces)}}}"]'
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"imp-{tag}-{digest}"


def text_of(content: Any) -> str:
    """A rough text of any content, for matching messages re-sent by an agent."""
    return content if isinstance(content, str) else canonical_json(content)


@dataclass
class SessionLog:
    """One session being imported: its live context and what was already sent."""

    session_id: str
    session_body: dict[str, Any] = field(default_factory=dict)
    index: int = 0
    # ids of the context as the model will see it at the next call
    context: list[str] = field(default_factory=list)
    # messages of the context whose content no event has carried yet
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    # content hash of each id as last sent, to match messages an agent re-sends
    sent_hash: dict[str, str] = field(default_factory=dict)
    staged: list[dict[str, Any]] = field(default_factory=list)
    staged_reason: list[str] = field(default_factory=list)
    # after the staged operations, the context should start with these ids in order
    staged_order: list[str] | None = None
    started: bool = False
    operations: int = 0
    # the previous step, when the next one may send runs of its context
    _base: _Base | None = None
    # each id sent alone, as the text of a step's id holds it (`_Said`)
    _ref_text: dict[str, str] = field(default_factory=dict)

    def add(self, message: dict[str, Any]) -> None:
        mid = message["id"]
        if mid in self.pending:
            self.pending[mid] = message  # a message the agent wrote in pieces, grown
            return
        if mid in self.sent_hash and mid in self.context:
            return  # the same entry logged twice (a resumed session repeats lines)
        self.context.append(mid)
        self.pending[mid] = message

    def asked(self, task: str) -> None:
        """What the user asked of the session, said before its first call: its
        ``metadata.task``, the line the sessions list shows of it, where the log's
        first message is something else (an agent's template, text it injected)."""
        line = one_line(task)
        if line and not self.started:
            self.session_body.setdefault("metadata", {})["task"] = line

    def hash_of(self, mid: str) -> str | None:
        if mid in self.pending:
            return short_hash(text_of(self.pending[mid].get("content")))
        return self.sent_hash.get(mid)

    def stage(
        self,
        ops: Iterable[dict[str, Any]],
        *,
        reason: str,
        order: list[str] | None = None,
    ) -> None:
        """Operations that happened before the next model call (a compaction)."""
        self.staged.extend(ops)
        self.staged_reason.append(reason)
        if order is not None:
            self.staged_order = order

    def settle(self) -> None:
        """Apply the staged operations to the live context, with no step to carry them:
        a log's copy of another session's history (a fork's) hands on the context that
        history came to, not the operations the other session made on the way."""
        if not self.staged:
            return
        after = self._ordered(self._apply(self.staged))
        for op in self.staged:
            result = op.get("result")
            if result is not None:
                self.pending[result["id"]] = result
        live = set(after)
        self.pending = {mid: m for mid, m in self.pending.items() if mid in live}
        self.context = after
        self.staged, self.staged_reason, self.staged_order = [], [], None

    def _ordered(self, after: list[str]) -> list[str]:
        """The context `after` the staged operations, led by the ids they asked it to
        start with."""
        if self.staged_order is None:
            return after
        first = set(self.staged_order)
        return self.staged_order + [m for m in after if m not in first]

    def untouched(self) -> list[str]:
        """The context's ids that no staged operation names: what an operation staged
        next may still take out."""
        named = {t for op in self.staged for t in op.get("targets", ())}
        return [m for m in self.context if m not in named]

    def _apply(self, ops: list[dict[str, Any]]) -> list[str]:
        ctx = list(self.context)
        for op in ops:
            name = op["action"]
            targets = op.get("targets") or ([op["target"]] if "target" in op else [])
            result: dict[str, Any] = op.get("result") or {}
            if name in ("summarize", "truncate", "rewrite", "fold", "merge"):
                first = min(ctx.index(t) for t in targets)
                gone = set(targets)
                ctx = [m for m in ctx if m not in gone]
                ctx.insert(first, result["id"])
            elif name == "drop":
                gone = set(targets)
                ctx = [m for m in ctx if m not in gone]
            elif name == "insert":
                position = op.get("params", {}).get("position", len(ctx))
                ctx.insert(position, result["id"])
            elif name == "reorder":
                ctx = list(op["params"]["order"])
        return ctx

    def step(
        self,
        *,
        timestamp: str | None,
        fields: dict[str, Any],
    ) -> Iterator[Event]:
        """The events of one model call: the session first, then the step."""
        if not self.started:
            self.started = True
            yield self._event("session", self.session_body, timestamp, "session")
        body: dict[str, Any] = {"session_id": self.session_id, "index": self.index}
        body["obs"], said = self._observed()
        ops = self.staged
        if ops:
            after = self._apply(ops)
            want = self._ordered(after)
            if want != after:
                ops = [*ops, {"action": "reorder", "params": {"order": list(want)}}]
                after = want
            body["actions"] = ops
            body["reason"] = "; ".join(self.staged_reason)
            for op in ops:
                result = op.get("result")
                if result is not None:
                    self.sent_hash[result["id"]] = short_hash(text_of(result.get("content")))
            self.context = after
            self.operations += len(ops)
            self.staged, self.staged_reason, self.staged_order = [], [], None
            self._base = None
        else:
            # What the server holds as this step's after: its context, as sent.
            ids = self.context
            rest = ",".join(map(self._id_alone, ids[said.head_count :]))
            self._base = _Base(self.index, ids.copy(), _joined(said.head, rest))
        body.update({k: v for k, v in fields.items() if v is not None})
        self.index += 1
        tag = f"step{body['index']}"
        yield self._event("step", body, timestamp, tag, said=said)

    def _observed(self) -> tuple[dict[str, Any], _Said]:
        """The step's ``obs`` as sent (what the previous step's context holds of it as
        ``$run`` elements, when it holds enough), and what its id is made from."""
        context, pending, base = self.context, self.pending, self._base
        n = len(base.ids) if base is not None else 0
        if (
            base is not None
            and n >= RUN_FROM
            and context[:n] == base.ids
            and (not pending or pending.keys().isdisjoint(base.ids))
        ):
            # The usual call: the previous context and what was added since.
            tail = self._sent(context[n:])
            said = _Said(base.text, n, [self._said(m) for m in tail])
            return {BASE_KEY: base.index, "messages": [run_element(0, n), *tail]}, said
        messages = self._sent(context)
        said = _Said("", 0, [self._said(m) for m in messages])
        if base is None or n < RUN_FROM:
            return {"messages": messages}, said
        where = {mid: position for position, mid in enumerate(base.ids)}
        positions = [None if "content" in m else where.get(m["id"]) for m in messages]
        if sum(count for _, _, count in runs_in(positions)) < RUN_FROM:
            return {"messages": messages}, said
        return {BASE_KEY: base.index, "messages": encode_runs(messages, positions)}, said

    def _sent(self, ids: list[str]) -> list[dict[str, Any]]:
        """The messages of `ids` as a step sends them: the content of each not sent
        before, the id alone of the others."""
        out: list[dict[str, Any]] = []
        for mid in ids:
            message = self.pending.pop(mid, None)
            if message is None:
                out.append({"id": mid})
            else:
                out.append(message)
                self.sent_hash[mid] = short_hash(text_of(message.get("content")))
        return out

    def _said(self, message: dict[str, Any]) -> str:
        """`message` as the text of a step's id holds it (`_Said`)."""
        if len(message) == 1 and "id" in message:
            return self._id_alone(message["id"])
        return _escaped(canonical_json(message))

    def _id_alone(self, mid: str) -> str:
        """The message `mid` sent by its id alone, as the text of a step's id holds it."""
        text = self._ref_text.get(mid)
        if text is None:
            text = self._ref_text[mid] = _escaped(canonical_json({"id": mid}))
        return text

    def end(self, *, status: str, timestamp: str | None, score: float | None = None) -> Event:
        body: dict[str, Any] = {"session_id": self.session_id, "status": status}
        if score is not None:
            body["score"] = score
        return self._event("session_end", body, timestamp, "end")

    def _event(
        self,
        kind: str,
        body: dict[str, Any],
        timestamp: str | None,
        tag: str,
        *,
        said: _Said | None = None,
    ) -> Event:
        body = {"session_id": self.session_id, **body}
        event: Event = {
            "id": event_id(self.session_id, kind, tag, body)
            if said is None
            else _step_id(self.session_id, tag, body, said),
            "type": kind,
            "body": body,
        }
        # A time the log wrote in another form is left out: the event is then
        # stamped when it is received, rather than the file refused for it.
        at = as_rfc3339(timestamp)
        if at is not None:
            event["timestamp"] = at
        return event
