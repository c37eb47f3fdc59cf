"""What the model reads of a message, whatever spelling its provider uses.

Agents send content as a string or as a list of parts, and the parts come in the
spellings of OpenAI (chat ``content`` parts, ``tool_calls`` on the message,
Responses API items), Anthropic (``tool_use``, ``tool_result``, ``thinking``,
``image`` blocks with a ``source``) and OpenTelemetry GenAI (``tool_call``,
``tool_call_response``, ``reasoning``, ``blob`` / ``uri`` / ``file``). The
content is stored and returned as it was sent; this module only reads it.

`reading` is the one place that decides a message's text for tokens, entities,
diffs and search: text, thinking, each tool call's name and arguments (as JSON
text), each tool result's content, and compaction summaries, one per line.
Images, files and audio have no text to count: they are counted by the rule
below and marked estimated.

Estimated parts
---------------
- an image with ``width`` and ``height`` (on the part, its ``source`` or its
  ``image_url``), positive numbers of any size: ceil(width x height / 750) tokens
  (Anthropic's published rule), at most 1,600;
- an image without dimensions: 1,000 tokens;
- a file, document or audio part whose text is not inline: 1,000 tokens (a
  document sent as text, such as Anthropic's ``{"source": {"type": "text"}}``,
  is counted as its text).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

IMAGE_TOKENS = 1_000
IMAGE_TOKENS_MAX = 1_600
IMAGE_PIXELS_PER_TOKEN = 750
FILE_TOKENS = 1_000

# Message fields, beside `content`, that the model reads: OpenAI's tool calls and
# its older single function call. The store keeps them with the content.
READ_FIELDS = ("tool_calls", "function_call")

# What ties a tool call to its result, beside the content, in OpenAI's spelling.
CALL_FIELDS = (*READ_FIELDS, "tool_call_id")

_TEXT_TYPES = frozenset({"text", "input_text", "output_text", "summary_text"})
# Parts that call a tool. The Responses API's own tools (Codex's shell, a web search,
# a tool search) name no tool: their kind does, and the shell's and the search's
# ``action`` is what they were asked.
_KIND_TOOLS = {
    "local_shell_call": "local_shell",
    "web_search_call": "web_search",
    "tool_search_call": "tool_search",
}
_CALL_TYPES = frozenset(
    {
        "tool_call",
        "tool_use",
        "server_tool_use",
        "mcp_tool_use",
        "function_call",
        "custom_tool_call",
        *_KIND_TOOLS,
    }
)
# Where a call that is no OpenAI ``function`` keeps its arguments, by spelling.
_ARG_KEYS = ("arguments", "args", "input", "tool_input")
# Anthropic answers the tools it runs itself (web search and fetch, code execution,
# an MCP server's) with blocks of their own, each naming its call by tool_use_id.
_SERVER_RESULT_TYPES = frozenset(
    {
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_result",
    }
)
_RESULT_TYPES = frozenset(
    {
        "tool_result",
        "tool_call_response",
        "function_call_output",
        "custom_tool_call_output",
        *_SERVER_RESULT_TYPES,
    }
)
# What the model reads of the items such results hold: a search hit's title and
# address, a command's output.
_RESULT_ITEM_FIELDS = {
    "web_search_result": ("title", "url"),
    "web_fetch_result": ("url",),
    "code_execution_result": ("stdout", "stderr"),
    "bash_code_execution_result": ("stdout", "stderr"),
}
_THINKING_TYPES = frozenset({"thinking", "reasoning"})
# An image the model made (the Responses API's image_generation_call, its picture as
# ``result``) is read back as an image.
_IMAGE_TYPES = frozenset({"image", "image_url", "input_image", "image_generation_call"})
_FILE_TYPES = frozenset({"file", "document", "input_file", "blob", "uri", "input_audio", "audio"})


@dataclass(frozen=True, slots=True)
class Reading:
    """What the model reads of a message: its text, and the tokens estimated by rule."""

    text: str
    estimated_tokens: int = 0
    # how many parts were counted by rule (images, files, audio)
    estimated_parts: int = 0


_EMPTY = Reading("")


def part_kind(part: Mapping[str, Any]) -> str | None:
    """A part's ``type`` as the name of a kind; one that is no string names none (a
    part is read as text then), so no sender's shape can upset the readers."""
    kind = part.get("type")
    return kind if isinstance(kind, str) else None


def all_results(content: Any) -> bool:
    """Whether `content` is parts that are all tools' results: how Anthropic (a user
    message of ``tool_result`` blocks), OTel GenAI (``tool_call_response``) and the
    Responses API (``function_call_output``) send what a tool gave back."""
    return (
        type(content) is list
        and bool(content)
        and all(isinstance(p, Mapping) and part_kind(p) in _RESULT_TYPES for p in content)
    )


def listed_calls(extra: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The calls a message's ``tool_calls`` field lists (OpenAI's spelling): the
    objects of that list; nothing when it is no list."""
    calls = extra.get("tool_calls") if extra else None
    return [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []


def arguments_in(raw: Mapping[str, Any]) -> Any:
    """The arguments a call (or a tool result that repeats them) holds, under whichever
    key its spelling uses; None when it holds none."""
    for key in _ARG_KEYS:
        if key in raw:
            return raw[key]
    return None


def _part_call(part: Mapping[str, Any], kind: str | None) -> tuple[Any, Any, Any]:
    """(call id, tool name, arguments as sent) of a part that calls a tool. The
    Responses API's results name the call by ``call_id`` (its ``id`` is the item's)."""
    call_id = part.get("call_id") or part.get("id")
    function = part.get("function")
    if isinstance(function, Mapping):
        return call_id, function.get("name"), function.get("arguments")
    tool = _KIND_TOOLS.get(kind or "")
    if tool is not None:
        return call_id, part.get("name", tool), part.get("action", arguments_in(part))
    return call_id, part.get("name"), arguments_in(part)


def calls_in(content: Any, extra: Mapping[str, Any] | None) -> Iterator[tuple[Any, Any, Any]]:
    """(call id, tool name, arguments as sent) of each tool call a message makes, in
    any spelling: call parts of its content, then the calls its ``tool_calls`` lists
    and OpenAI's older single ``function_call``. The one rule for what a call is."""
    if isinstance(content, list):
        for part in content:
            if isinstance(part, Mapping):
                kind = part_kind(part)
                if kind in _CALL_TYPES:
                    yield _part_call(part, kind)
    if not extra:
        return
    for call in listed_calls(extra):
        function = call.get("function")
        if isinstance(function, Mapping):
            yield call.get("id"), function.get("name"), function.get("arguments")
        else:
            yield call.get("id"), call.get("name"), arguments_in(call)
    legacy = extra.get("function_call")
    if isinstance(legacy, Mapping):
        yield None, legacy.get("name"), legacy.get("arguments")


def answered_call(part: Mapping[str, Any]) -> str | None:
    """The id of the call a tool-result part answers, whichever key its spelling uses."""
    for key in ("tool_use_id", "tool_call_id", "call_id", "id"):
        value = part.get(key)
        if isinstance(value, str):
            return value
    return None


def is_result_part(part: Any) -> bool:
    """Whether a content part is a tool's result."""
    return isinstance(part, Mapping) and part_kind(part) in _RESULT_TYPES


def json_text(value: Any) -> str:
    """Arguments as the model reads them: a string as it is (already JSON text), else JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


class _Reader:
    __slots__ = ("texts", "estimated", "parts")

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.estimated = 0
        self.parts = 0

    def add(self, text: Any) -> None:
        if isinstance(text, str) and text:
            self.texts.append(text)

    def estimate(self, tokens: int) -> None:
        self.estimated += tokens
        self.parts += 1

    def call(self, name: Any, arguments: Any) -> None:
        # The tool's name, then its arguments on the next line.
        head = name if isinstance(name, str) else ""
        args = "" if arguments is None else json_text(arguments)
        self.add(f"{head}\n{args}" if head and args else head or args)

    def content(self, content: Any) -> None:
        if isinstance(content, str):
            self.add(content)
        elif isinstance(content, list):
            for part in content:
                self.part(part)
        elif isinstance(content, Mapping) and "type" in content:
            self.part(content)
        elif content is not None:
            self.add(json_text(content))

    def part(self, part: Any) -> None:
        if isinstance(part, str):
            self.add(part)
            return
        if not isinstance(part, Mapping):
            return
        kind = part_kind(part)
        if kind in _TEXT_TYPES or kind is None:
            # OTel GenAI puts a text part's text under "content".
            self.add(part.get("text", part.get("content")))
        elif kind in _THINKING_TYPES:
            text = part.get("thinking", part.get("text", part.get("content")))
            if isinstance(text, str):
                self.add(text)
            else:
                # OpenAI Responses: reasoning items carry a list of summary parts.
                self.content(part.get("summary"))
        elif kind in _CALL_TYPES:
            _, name, arguments = _part_call(part, kind)
            self.call(name, arguments)
        elif kind in _RESULT_TYPES:
            for key in ("content", "response", "output", "result"):
                if key in part:
                    self.content(part[key])
                    break
        elif kind == "compaction":
            for key in ("summary", "content", "text"):
                if key in part:
                    self.content(part[key])
                    break
        elif kind == "refusal":
            self.add(part.get("refusal"))
        elif kind in _RESULT_ITEM_FIELDS:
            for key in _RESULT_ITEM_FIELDS[kind]:
                self.add(part.get(key))
            if "content" in part:
                self.content(part["content"])  # a fetched page's document
        elif kind in _IMAGE_TYPES or (kind in _FILE_TYPES and _is_image(part)):
            self.estimate(image_tokens(part))
        elif kind in _FILE_TYPES:
            text = _inline_text(part)
            if text is None:
                self.estimate(FILE_TOKENS)
            else:
                self.add(text)
        elif kind == "redacted_thinking":
            pass  # encrypted: the provider reads it, but there is no text to count
        else:
            # A type this module does not know: its text, if it has one.
            self.add(part.get("text"))


def _dimension(part: Mapping[str, Any], key: str) -> int | float | None:
    """A positive number, integer or not (NaN is not one)."""
    for holder in (part, part.get("source"), part.get("image_url")):
        if isinstance(holder, Mapping):
            value = holder.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
                return value
    return None


def image_tokens(part: Mapping[str, Any]) -> int:
    width, height = _dimension(part, "width"), _dimension(part, "height")
    if width is None or height is None:
        return IMAGE_TOKENS
    if math.inf in (width, height):  # no JSON number, but an image all the same
        return IMAGE_TOKENS_MAX
    # Exact: PostgreSQL gives 1e300 back as an integer of 301 digits, and a product
    # of such numbers is past what a float holds.
    pixels = Fraction(width) * Fraction(height)
    return min(IMAGE_TOKENS_MAX, math.ceil(pixels / IMAGE_PIXELS_PER_TOKEN))


def _is_image(part: Mapping[str, Any]) -> bool:
    """An OTel blob, uri or file part that holds an image."""
    return part.get("modality") == "image" or _media_type(part).startswith("image/")


def _inline_text(part: Mapping[str, Any]) -> str | None:
    """A document's text when it is sent as text (Anthropic's text source)."""
    source = part.get("source")
    if isinstance(source, Mapping) and source.get("type") == "text":
        data = source.get("data")
        return data if isinstance(data, str) else None
    return None


def tools_text(tools: Any) -> str:
    """The tool definitions sent with a call, as the text their tokens are counted from."""
    return json.dumps(tools, ensure_ascii=False)


def reading(content: Any, extra: Mapping[str, Any] | None = None) -> Reading:
    """What the model reads of a message with this `content` and these other fields."""
    if is_plain_text(content, extra):
        return Reading(content)  # by far the most common message
    reader = _Reader()
    reader.content(content)
    if extra:
        for call in listed_calls(extra):
            reader.part({**call, "type": "tool_call"})
        legacy = extra.get("function_call")
        if isinstance(legacy, Mapping):
            reader.call(legacy.get("name"), legacy.get("arguments"))
    if not reader.texts and not reader.estimated:
        return _EMPTY
    return Reading("\n".join(reader.texts), reader.estimated, reader.parts)


def thinking_text(content: Any) -> str:
    """The text of a message's thinking and reasoning parts, as the model reads it."""
    if not isinstance(content, list):
        return ""
    reader = _Reader()
    for part in content:
        if isinstance(part, Mapping) and part_kind(part) in _THINKING_TYPES:
            reader.part(part)
    return "\n".join(reader.texts)


def _reads_extra(extra: Mapping[str, Any]) -> bool:
    return any(key in extra for key in READ_FIELDS)


def is_plain_text(content: Any, extra: Mapping[str, Any] | None = None) -> bool:
    """Whether a message is a string and nothing else the model reads (no parts)."""
    return isinstance(content, str) and (extra is None or not _reads_extra(extra))


def payload(content: Any, extra: Mapping[str, Any] | None) -> Any:
    """What the model reads of a message as one JSON value: its content, alone when
    nothing else of it is read, else ``{"content": ..., "tool_calls": ...}``.

    The store addresses and keeps this once, so a message's tool calls are stored
    with its content (and counted with it), not in its other fields.
    """
    if content is not None and (extra is None or not _reads_extra(extra)):
        return content
    out: dict[str, Any] = {"content": content}
    if extra:
        out.update((key, extra[key]) for key in READ_FIELDS if key in extra)
    return out


def has_compaction(content: Any) -> bool:
    """Whether a content carries a `compaction` part: a summary standing for what left
    the context (contract v1.1, for inferring the operations of a step)."""
    return isinstance(content, list) and any(
        isinstance(part, Mapping) and part.get("type") == "compaction" for part in content
    )


def call_fields(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """The tool-call fields a message was sent with beside its content, for the
    places that give a message as id, role and content only (diffs, exports)."""
    if not extra:
        return {}
    return {key: extra[key] for key in CALL_FIELDS if key in extra}


def split_payload(value: Any) -> tuple[Any, dict[str, Any]]:
    """The inverse of `payload`: (content, the other fields it carried)."""
    if isinstance(value, dict):
        rest = {key: value[key] for key in READ_FIELDS if key in value}
        return value.get("content"), rest
    return value, {}


def tool_calls(content: Any, extra: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The tool calls a message makes, as ``{"id", "name", "arguments"}`` (arguments as
    JSON text), from any spelling: for pages and for comparing calls."""
    found: list[dict[str, Any]] = []

    def add(call_id: Any, name: Any, arguments: Any) -> None:
        found.append(
            {
                "id": call_id if isinstance(call_id, str) else None,
                "name": name if isinstance(name, str) else "",
                "arguments": "" if arguments is None else json_text(arguments),
            }
        )

    for call_id, name, arguments in calls_in(content, extra):
        add(call_id, name, arguments)
    return found


@dataclass(frozen=True, slots=True)
class Block:
    """One part of a message as a page shows it."""

    kind: str  # text, thinking, tool_call, tool_result, image, file, compaction, other
    text: str = ""
    name: str = ""  # a tool call's tool
    ref: str = ""  # a tool call's id, or the call a tool result answers
    media_type: str = ""  # an image's or file's
    # A tool call's arguments, one (name, text) each, when they are a JSON object: a
    # string as it is, its newlines real (a file written, a command); anything else as JSON.
    args: tuple[tuple[str, str], ...] = ()


# Past this length a nested value's JSON is shown indented, a line each.
_ARG_INLINE = 80


def argument_fields(arguments: str) -> tuple[tuple[str, str], ...]:
    """A tool call's arguments (JSON text) as its named fields; () when they are not a
    JSON object, to be shown as they are."""
    try:
        value = json.loads(arguments)
    except ValueError:
        return ()
    if not isinstance(value, dict) or not value:
        return ()
    fields = []
    for name, item in value.items():
        if isinstance(item, str):
            fields.append((str(name), item))
            continue
        text = json.dumps(item, ensure_ascii=False)
        if isinstance(item, dict | list) and len(text) > _ARG_INLINE:
            text = json.dumps(item, ensure_ascii=False, indent=2)
        fields.append((str(name), text))
    return tuple(fields)


def _call_block(call: Mapping[str, Any]) -> Block:
    arguments = call["arguments"]
    return Block(
        "tool_call",
        arguments,
        name=call["name"],
        ref=call["id"] or "",
        args=argument_fields(arguments),
    )


def _media_type(part: Mapping[str, Any]) -> str:
    for holder in (part, part.get("source"), part.get("image_url"), part.get("file")):
        if isinstance(holder, Mapping):
            for key in ("media_type", "mime_type", "mimeType"):
                value = holder.get(key)
                if isinstance(value, str) and value:
                    return value
            url = holder.get("url")
            if isinstance(url, str) and url.startswith("data:"):
                return url[5:].split(";", 1)[0].split(",", 1)[0]
    image_url = part.get("image_url")
    if isinstance(image_url, str) and image_url.startswith("data:"):
        return image_url[5:].split(";", 1)[0]
    return ""


def _block(part: Any) -> Block:
    if isinstance(part, str):
        return Block("text", part)
    if not isinstance(part, Mapping):
        return Block("other", json_text(part))
    kind = part_kind(part)
    if kind in _CALL_TYPES:
        return _call_block(tool_calls([part])[0])
    if kind in _RESULT_TYPES:
        return Block("tool_result", reading([part]).text, ref=answered_call(part) or "")
    if kind in _IMAGE_TYPES or (kind in _FILE_TYPES and _is_image(part)):
        return Block("image", media_type=_media_type(part) or "image")
    if kind in _FILE_TYPES:
        text = _inline_text(part)
        return Block("file", text or "", media_type=_media_type(part) or str(kind))
    if kind in _THINKING_TYPES or kind == "redacted_thinking":
        text = reading([part]).text
        return Block("thinking", text if kind != "redacted_thinking" else "(redacted)")
    if kind == "compaction":
        return Block("compaction", reading([part]).text)
    text = reading([part]).text
    if kind in _TEXT_TYPES or kind is None or kind == "refusal" or text:
        return Block("text", text)
    return Block("other", json_text(dict(part)), name=str(kind))


def blocks(content: Any, extra: Mapping[str, Any] | None = None) -> list[Block]:
    """A message's parts for display, tool calls carried beside the content included;
    [] for plain text, which a page shows as it is."""
    if is_plain_text(content, extra):
        return []
    out = [_block(part) for part in content] if isinstance(content, list) else []
    if isinstance(content, str) and content:
        out.append(Block("text", content))
    out.extend(_call_block(call) for call in tool_calls(None, extra))
    return out
