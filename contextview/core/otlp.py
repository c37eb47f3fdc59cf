"""OTLP spans of LLM calls as contextview ingest events (contract v1.1, "OTLP/HTTP ingest").

Everything an instrumentation writes about one model call is read here, whatever
convention it follows:

- OpenTelemetry GenAI: ``gen_ai.system_instructions``, ``gen_ai.input.messages``,
  ``gen_ai.output.messages`` and ``gen_ai.tool.definitions`` as JSON strings (span
  attributes) or structured values (the ``gen_ai.client.inference.operation.details``
  event); the older per-message events ``gen_ai.{system,user,assistant,tool}.message``
  and ``gen_ai.choice``; ``gen_ai.usage.*``, ``gen_ai.request.model`` /
  ``gen_ai.response.model``, ``gen_ai.conversation.id``, ``gen_ai.agent.name`` and
  ``gen_ai.conversation.compacted``;
- OpenInference: ``llm.input_messages.{i}.message.*`` (``content``, ``contents``,
  ``tool_calls``, ``tool_call_id``, ``name``), ``llm.output_messages.*`` (a completions
  API call's prompts ``llm.prompts.{i}.prompt.text``, each a user message, or the list
  ``llm.prompts`` of older versions, and its choices ``llm.choices.{i}.completion.text``),
  ``llm.tools.{i}.tool.*`` (else the ``tools`` or ``functions`` inside
  ``llm.invocation_parameters``), ``llm.token_count.*``, ``llm.model_name``,
  ``session.id``;
- OpenLLMetry (Traceloop), beyond the contract's list: a span with ``llm.request.type``
  ``chat``, ``completion`` or ``response`` (or, as its OpenAI instrumentation writes a
  Responses API call, none, `is_tl_response`), its messages flattened as ``gen_ai.prompt.{i}.*`` and
  ``gen_ai.completion.{i}.*`` (``role``, ``content``, ``tool_call_id``,
  ``tool_calls.{j}.*``; a content list written as JSON text is read as its parts),
  its tools as ``llm.request.functions.{i}.*``; its session, when it names none of
  the contract's, from ``traceloop.association.properties.session_id``;
- LiteLLM's OpenTelemetry callback, beyond the contract's list: a span whose
  ``llm.request.type`` is one of LiteLLM's call types of a model call
  (``acompletion``...), its messages as the GenAI conventions';
- Semantic Kernel, beyond the contract's list: a span whose ``gen_ai.operation.name``
  is its ``chat.completions`` (or ``text.completions``, and their ``streaming_``
  forms), its messages the older per-message events, each body (the reply's too) the
  JSON text of ``gen_ai.event.content``;
- the Vercel AI SDK, beyond the contract's list: its provider-call spans
  (``ai.operationId`` ``ai.generateText.doGenerate``, ``ai.streamText.doStream``,
  ``ai.generateObject.doGenerate``, ``ai.streamObject.doStream``) with
  ``ai.prompt.messages`` (``text``, ``tool-call``, ``tool-result``, ``reasoning``,
  ``image`` and ``file`` parts), ``ai.prompt.tools``, ``ai.response.reasoning``,
  ``ai.response.text`` and ``ai.response.toolCalls``, ``ai.usage.*`` (version 6's
  ``inputTokenDetails``), ``ai.model.id``; its session, when it names
  none of the contract's, from ``ai.telemetry.metadata.sessionId``;
- Google's Agent Development Kit, beyond the contract's list: its ``call_llm`` span
  (no operation named) with ``gcp.vertex.agent.llm_request`` and ``llm_response``
  (JSON of Gemini contents; its ``usage_metadata`` holds the cached count, and the
  other counts in versions that set no ``gen_ai.usage.*``), session
  ``gcp.vertex.agent.session_id``;
- LangSmith's OpenTelemetry exporter, beyond the contract's list: a span of run type
  (``langsmith.span.kind``) ``llm`` (a prompt template's, which it names ``chat`` too,
  is none), its context and tools from the run's inputs (JSON text in
  ``gen_ai.prompt``: LangChain's serialized messages, or a model client's request), its
  reply from the run's outputs (``gen_ai.completion``: LangChain's generations, OpenAI's
  choices), its session the thread its metadata names (``langsmith.metadata.session_id``,
  ``thread_id`` or ``conversation_id``), its cached tokens LangChain's token details
  (``gen_ai.usage.input_token_details``, text: JSON, or Python's print of a dict) and
  its usage, where no ``gen_ai.usage.*`` gives it, LangChain's (JSON in
  ``langsmith.usage_metadata``, `_ls_usage`);
- Logfire's OpenAI and Anthropic integrations before they wrote the GenAI
  conventions, beyond the contract's list: a span that names no operation, its request
  as JSON text in ``request_data`` (``messages``, Anthropic's ``system``, ``tools``,
  ``model``), its reply in ``response_data`` (``message``, or a stream's
  ``combined_chunk_content``) with the provider's ``usage``; and its OpenAI Agents
  integration's Responses API calls, the whole exchange in one ``events`` attribute
  beside the ``response`` object, whose output says how many of the last events are the
  reply and whose ``usage`` may be the only one (`_lf_reply_count`), as are its OpenAI
  integration's Responses API calls, whose ``request_data`` keeps the model alone and
  whose ``events`` end with the reply's (`_lf_trailing_replies`);
- Spring AI, beyond the contract's list: the texts of a chat model call's prompt and
  reply, without their roles, as its content handlers wrote them on the span before
  1.0 (the events ``gen_ai.content.prompt`` and ``gen_ai.content.completion``, an array
  of texts under ``gen_ai.prompt`` / ``gen_ai.completion``) and as its content
  observation filters, which 1.0 and 1.1 ship for an application to register, still
  write them (the span attributes ``gen_ai.prompt`` and ``gen_ai.completion``: the
  texts joined in one, `_spring_texts`). Its 2.x sources write
  ``gen_ai.input.messages`` and ``gen_ai.output.messages``, read as the GenAI
  conventions'.

A call traced twice (a framework's span and its model client's inside it) is one
step (`_one_per_call`); a call inside another that names another session is a step of
its own session. A call that names no agent takes the one named by the
nearest span around it in the export (an ``invoke_agent`` span).

Messages come out in the contract's v1.1 form: ``content`` a string when the message
is one text, else a list of parts (``text``, ``tool_call``, ``tool_result``,
``thinking``, ``image``, ``file``, ``compaction``; other parts as they came), so the
same message reads the same whichever convention carried it.

Message ids. A span carries no ids for its messages, and an agent resends its whole
context on every call. Each message's id is a digest of what it is (role, content,
other fields), with ``.N`` added to the N-th repeat of identical messages in one
context: the id stays the same while the message does, whatever moved around it, so
a resent context is one stored copy and the server's inference matches messages
across calls by id. Repeats are then numbered against the call before in the session
(`align_repeats`): an agent that keeps sending "continue" and slides its window
drops the oldest, rather than seeming to rewrite and move every later one. Only
messages new since the previous call of the session (in the same request) are
converted and hashed; the rest are recognised by comparing the decoded values with
that call's.

Usage: the conventions report prompt tokens including those read from or written
to the provider's cache; the contract's ``input_tokens`` excludes them, so they are
subtracted (`_uncached_input` names the instrumentations that count them apart).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from contextview.core.errors import short_repr
from contextview.core.numbers import digits_value
from contextview.core.runs import BASE_KEY, encode_runs, run_element, runs_in
from contextview.core.textsafe import text_problem
from contextview.core.usage import usage_counts

LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
# Semantic Kernel's names of a model call (its .NET and Python ModelDiagnostics), which
# the GenAI conventions name chat and text_completion.
_SK_OPERATIONS = frozenset(
    {
        "chat.completions",
        "chat.streaming_completions",
        "text.completions",
        "text.streaming_completions",
    }
)
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
# Kept in the step's obs under its own name, where the server's inference reads it.
COMPACTED = "gen_ai.conversation.compacted"
_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_OI_INPUT = "llm.input_messages."
_OI_OUTPUT = "llm.output_messages."
# OpenInference's prompts and choices of a completions API call: texts, no roles.
_OI_PROMPTS = "llm.prompts"
_OI_CHOICES = "llm.choices."
_OI_TOOLS = "llm.tools."
_OI_PARAMETERS = "llm.invocation_parameters"
_TL_PROMPT = "gen_ai.prompt."
_TL_COMPLETION = "gen_ai.completion."
_TL_FUNCTIONS = "llm.request.functions."
# ``response``: its OpenAI Agents SDK instrumentation's span of a Responses API call.
_TL_REQUEST_TYPES = frozenset({"chat", "completion", "response"})
_TL_SESSION = "traceloop.association.properties.session_id"
# LiteLLM's call types of a model call (its ``CallTypes``), which its OpenTelemetry
# callback writes as ``llm.request.type`` (and, but for ``completion``, as
# ``gen_ai.operation.name``): its other calls (embeddings, images...) are not steps.
_LITELLM_CALLS = frozenset(
    {
        "completion",
        "acompletion",
        "text_completion",
        "atext_completion",
        "responses",
        "aresponses",
        "anthropic_messages",
        "generate_content",
        "agenerate_content",
        "generate_content_stream",
        "agenerate_content_stream",
    }
)
# The Vercel AI SDK's spans of one provider call (its outer spans wrap one or more).
_AI_CALLS = frozenset(
    {
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
    }
)
_AI_SESSION = "ai.telemetry.metadata.sessionId"
# The attributes holding an AI SDK call's reply.
_AI_REPLY = ("ai.response.text", "ai.response.reasoning", "ai.response.toolCalls")
# The AI SDK's uncached input count (version 6; version 5 gives only the input count).
_AI_DETAILS = "ai.usage.inputTokenDetails."
_AI_UNCACHED = f"{_AI_DETAILS}noCacheTokens"
# Google's Agent Development Kit: its call_llm span's request (JSON text), its session.
ADK_REQUEST = "gcp.vertex.agent.llm_request"
ADK_RESPONSE = "gcp.vertex.agent.llm_response"
_ADK_SESSION = "gcp.vertex.agent.session_id"
# LangSmith's OpenTelemetry exporter: a span's run type, and the run metadata that
# names its thread (LangSmith's threads), in the order LangSmith reads them.
_LS_KIND = "langsmith.span.kind"
_LS_SESSIONS = (
    "langsmith.metadata.session_id",
    "langsmith.metadata.thread_id",
    "langsmith.metadata.conversation_id",
)
# LangSmith's exporters: LangChain's usage of a run (``usage_metadata``) as JSON (the JS
# SDK), and its input token details (the cache counts) as text: JSON in the JS SDK, as
# Python prints a dict in the Python SDK.
_LS_USAGE = "langsmith.usage_metadata"
_LS_TOKEN_DETAILS = "gen_ai.usage.input_token_details"
# The attributes LangSmith writes a run's inputs and outputs in, and Spring AI a call's
# prompt texts and reply texts.
PROMPT_ATTRIBUTE = "gen_ai.prompt"
COMPLETION_ATTRIBUTE = "gen_ai.completion"
# Spring AI: the event and attribute holding a call's prompt texts, and its reply's.
SPRING_PROMPT = ("gen_ai.content.prompt", PROMPT_ATTRIBUTE)
SPRING_COMPLETION = ("gen_ai.content.completion", COMPLETION_ATTRIBUTE)
# What Strands Agents names as the system of its spans.
STRANDS = "strands-agents"
# Limits of the ingest schema that a span's values must fit.
MAX_NAME = 200
# How much of a tool span's status message is kept.
MAX_MESSAGE = 2000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SpanError(Exception):
    """A span that claims to be an LLM call but cannot be read; names the attribute."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(slots=True)
class LlmCall:
    """One model call: a step of its session once it has an index."""

    trace_id: str
    span_id: str
    session_id: str
    agent: str | None
    start_ns: int
    model: str | None
    messages: list[dict[str, Any]]
    tools: list[Any] | None = None
    usage: dict[str, int] | None = None
    output: list[dict[str, Any]] | None = None
    compacted: bool = False
    # other obs fields of a step stored before (kept when the step moves to a new index)
    extra: dict[str, Any] | None = None
    # the ids of `messages`, in order, when known (decoding builds them as it goes)
    ids: list[str] | None = None
    # when its span sits in one the export did not hold: the event id that marks that
    # span as holding this call (`inner_marker_id`), for a later export that brings it
    inner_marker: str | None = None
    # a stored step sent again (a late span moved it): its messages in full, where
    # `messages` holds their ids alone
    stored: list[dict[str, Any]] | None = None

    def message_ids(self) -> list[str]:
        return self.ids if self.ids is not None else [m["id"] for m in self.messages]

    def aligned_with(self, previous: Sequence[str]) -> None:
        """Number the repeats of this call's context against the context of the call
        before it in the session (`previous`, its ids): see `align_repeats`."""
        ids = self.message_ids()
        renamed = align_repeats(previous, ids)
        if renamed is None:
            return
        # A new list of new dicts: the others are shared with the call before.
        messages = list(self.messages)
        for k, (old, new) in enumerate(zip(ids, renamed, strict=True)):
            if old != new:
                # Under its new id, a stored message is sent with its content.
                source = self.stored[k] if self.stored is not None else messages[k]
                messages[k] = {**source, "id": new}
        self.messages, self.ids = messages, renamed

    @property
    def event_id(self) -> str:
        return span_event_id(self.trace_id, self.span_id)

    @property
    def order(self) -> tuple[int, str]:
        """Where the call sits in its session: start time (to the microsecond the
        database keeps), then span id so that equal start times order the same
        way every time."""
        return (self.start_ns // 1000, self.span_id)


def span_event_id(trace_id: str, span_id: str) -> str:
    """The ingest event id of a span: a span sent again is the same event."""
    return f"otlp-{trace_id}-{span_id}"


def inner_marker_id(trace_id: str, span_id: str, session: str | None = None) -> str:
    """The event id stored to say that span `span_id` holds a model call stored as a
    step: a model call's span that comes later under that id is the same call, if it
    is of the same session. `session`: the one the stored call names, None when it
    names none (and is then of the session of the span around it)."""
    marker = f"otlp-inner-{trace_id}-{span_id}"
    return marker if session is None else f"{marker}@{session}"


@dataclass(slots=True)
class Refused:
    trace_id: str
    span_id: str
    error: str


@dataclass(slots=True)
class ToolRun:
    """A span of a tool the agent ran (not a model call): kept to be shown beside the
    step of the call that asked for it."""

    trace_id: str
    span_id: str
    session_id: str
    name: str
    call_id: str
    start_ns: int
    end_ns: int
    # "ok", "error" or "unset", as the span's status code says
    status: str
    status_message: str


@dataclass(slots=True)
class Decoded:
    calls: list[LlmCall] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    tools: list[ToolRun] = field(default_factory=list)
    spans: int = 0


# --- values ---------------------------------------------------------------------------


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        return value.double_value
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return None


def attributes(kvs: Iterable[KeyValue]) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


def _structured(value: Any, name: str) -> Any:
    """A value an instrumentation may send as JSON text or as a structured value."""
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError as exc:
            raise SpanError(name, f"is not valid JSON ({exc})") from None
    return value


def _list(value: Any, name: str) -> list[Any]:
    value = _structured(value, name)
    if not isinstance(value, list):
        raise SpanError(name, "must be a list")
    return value


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value >= 0 and value.is_integer():
        return int(value)
    if isinstance(value, str):
        return digits_value(value)
    return None


def _text(value: Any) -> str | None:
    return value[:MAX_NAME] if isinstance(value, str) and value else None


def _name(value: Any) -> str | None:
    """A name the contract keeps exactly (an agent, a model): None when it holds what
    an identifier may not (NUL, a cut character), so the next source is used."""
    text = _text(value)
    return None if text is None or text_problem(text) is not None else text


# --- message parts --------------------------------------------------------------------


# Media parts: the GenAI conventions' ``blob``, ``uri`` and ``file``, and Pydantic AI's
# ``binary`` and ``*-url`` parts (its instrumentation versions 1 to 3).
_MEDIA_TYPES = frozenset(
    {"blob", "uri", "file", "binary", "image-url", "audio-url", "video-url", "document-url"}
)


def _media(part: Mapping[str, Any], kind: str) -> dict[str, Any]:
    modality = part.get("modality")
    mime = part.get("mime_type", part.get("media_type"))
    image = (
        modality == "image"
        or kind == "image-url"
        or (isinstance(mime, str) and mime.startswith("image/"))
    )
    out: dict[str, Any] = {"type": "image" if image else "file"}
    if mime:
        out["media_type"] = mime
    for source, target in (
        ("content", "data"),
        ("binary_content", "data"),
        ("uri", "url"),
        ("url", "url"),
        ("file_id", "file_id"),
    ):
        if source in part:
            out[target] = part[source]
    if modality and modality not in ("image", "document"):
        out["modality"] = modality
    return out


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "arguments": arguments}


def _thinking(text: Any) -> dict[str, Any]:
    return {"type": "thinking", "text": text if isinstance(text, str) else ""}


def _result(call_id: Any, content: Any) -> dict[str, Any]:
    """A tool's result; a result that is itself a list of parts (Anthropic's and
    Bedrock's blocks) is read as their content."""
    if _is_parts(content):
        content = content_of([genai_part(p) for p in content])
    return {"type": "tool_result", "tool_call_id": call_id, "content": content}


# The keys of Bedrock's (Converse) content blocks, which carry no ``type``: a block is
# an object of one of them (Strands Agents sends its messages so).
_BEDROCK_BLOCKS = frozenset(
    {"text", "toolUse", "toolResult", "reasoningContent", "image", "document", "video", "json"}
)


def _bedrock_part(block: Mapping[str, Any]) -> Any:
    """A Bedrock content block in the contract's spelling."""
    if isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    for key, body in block.items():
        if not isinstance(body, Mapping):
            continue
        if key == "toolUse":
            return _call(body.get("toolUseId"), body.get("name"), body.get("input"))
        if key == "toolResult":
            return _result(body.get("toolUseId"), body.get("content"))
        if key == "reasoningContent":
            reasoning = body.get("reasoningText")
            return _thinking(reasoning.get("text") if isinstance(reasoning, Mapping) else None)
        if key in ("image", "document", "video"):
            out: dict[str, Any] = {"type": "image" if key == "image" else "file"}
            fmt = body.get("format")
            if isinstance(fmt, str):
                # an image's and a video's format is their media subtype; a document's
                # (pdf, csv, md...) is not always one
                out.update({"format": fmt} if key == "document" else {"media_type": f"{key}/{fmt}"})
            return out
    if "json" in block:
        return {"type": "text", "text": json.dumps(block["json"], ensure_ascii=False)}
    return dict(block)


def _is_block(value: Mapping[str, Any]) -> bool:
    """Whether an untyped object is a Bedrock content block."""
    return len(value) == 1 and next(iter(value)) in _BEDROCK_BLOCKS


# OpenAI's Responses API text parts (OpenLLMetry writes a Responses message's content
# as the JSON text of its parts), read as text parts.
_RESPONSES_TEXTS = frozenset({"input_text", "output_text"})
# The part types that a list of parts is made of, as JSON text or not (the GenAI
# conventions', OpenAI's, Anthropic's and Pydantic AI's): a tool's output that is a
# JSON list of objects typed otherwise is the text it is, not parts.
_LISTED_KINDS = frozenset(
    {
        "text",
        *_RESPONSES_TEXTS,
        "input_image",
        "input_file",
        "tool_call",
        "tool_call_response",
        "server_tool_call",
        "server_tool_call_response",
        "reasoning",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "tool_result",
        "image",
        "image_url",
        "input_audio",
        "document",
        *_MEDIA_TYPES,
        *_BEDROCK_BLOCKS,
    }
)


def _listed_part(value: Any) -> bool:
    """Whether `value` is a message part: typed (``type``, or Pydantic AI's ``kind``) as
    one of `_LISTED_KINDS`, or a Bedrock block."""
    if not isinstance(value, Mapping):
        return False
    kind = value.get("type", value.get("kind"))
    return kind in _LISTED_KINDS if isinstance(kind, str) else _is_block(value)


def _is_parts(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(map(_listed_part, value))


def genai_part(part: Any) -> Any:
    """A message part in the contract's spelling, whichever spelling it came in: the
    OTel GenAI conventions' (a server tool call, one the provider ran, as a tool call
    and its result), Pydantic AI's (``thinking``, a result under ``result``,
    its media parts, and ``kind`` for ``type`` in its version 1 events), Anthropic's
    blocks (``tool_use``, ``tool_result``, ``thinking``) and Bedrock's (Strands'),
    also when Strands names a Bedrock block as a part's type, and the text parts of
    OpenAI's Responses API (its image and file parts are kept as given, as its chat
    API's are: the server reads them as they are)."""
    if not isinstance(part, Mapping):
        return {"type": "text", "text": part} if isinstance(part, str) else part
    kind = part.get("type", part.get("kind"))
    if kind is None:
        return _bedrock_part(part) if _is_block(part) else dict(part)
    if not isinstance(kind, str):  # no part type the server knows: kept as given
        return dict(part)
    if kind == "text":
        return {"type": "text", "text": part.get("content", part.get("text", ""))}
    if kind in _RESPONSES_TEXTS:
        return {"type": "text", "text": part.get("text", "")}
    if kind == "tool_call":
        return _call(part.get("id"), part.get("name"), part.get("arguments"))
    if kind == "tool_call_response":
        found = part.get("response", part.get("result"))
        return _result(part.get("id"), found)
    if kind == "server_tool_call":  # a tool the provider ran, its details as arguments
        return _call(part.get("id"), part.get("name"), part.get(kind))
    if kind == "server_tool_call_response":
        return _result(part.get("id"), part.get(kind))
    if kind in ("reasoning", "thinking"):
        return _thinking(part.get("content", part.get("thinking", part.get("text"))))
    if kind in _MEDIA_TYPES:
        return _media(part, kind)
    if kind == "tool_use":
        return _call(part.get("id"), part.get("name"), part.get("input"))
    if kind == "tool_result":
        return _result(part.get("tool_use_id", part.get("tool_call_id")), part.get("content"))
    if kind in _BEDROCK_BLOCKS and isinstance(part.get("content"), Mapping):
        return _bedrock_part({kind: part["content"]})
    return dict(part)


def content_of(parts: Sequence[Any]) -> str | list[Any]:
    """A list of converted parts as message content: one text is just a string."""
    if len(parts) == 1:
        only = parts[0]
        if isinstance(only, dict) and only.get("type") == "text" and len(only) == 2:
            text = only.get("text")
            if isinstance(text, str):
                return text
    return list(parts)


def genai_message(raw: Any, name: str) -> dict[str, Any]:
    """A ``gen_ai.input.messages`` / ``gen_ai.output.messages`` element; OpenAI's
    ``tool_calls`` and ``tool_call_id`` beside its parts, as LiteLLM keeps them, are
    read as its calls and its result."""
    if not isinstance(raw, Mapping):
        raise SpanError(name, "each message must be an object")
    out: dict[str, Any] = {"role": raw.get("role")}
    parts = raw.get("parts")
    if parts is not None and not isinstance(parts, list):
        raise SpanError(name, f"a message's parts must be a list, not {short_repr(parts)}")
    if isinstance(parts, list):
        out["content"] = content_of([genai_part(p) for p in parts])
    elif isinstance(raw.get("content"), str | list):
        content = raw["content"]
        out["content"] = (
            content if isinstance(content, str) else content_of([genai_part(p) for p in content])
        )
    else:
        out["content"] = ""
    read: tuple[str, ...] = ("role", "parts", "content")
    calls = _call_parts(raw.get("tool_calls"))
    if calls or (out["role"] == "tool" and raw.get("tool_call_id")):
        # OpenAI's tool_calls and tool_call_id beside the parts (LiteLLM): its calls
        # and its result as parts too.
        read = (*read, "tool_calls", "tool_call_id")
        content = out["content"]
        listed = content if isinstance(content, list) else _content_parts(content)
        if not any(isinstance(p, dict) and p.get("type") == "tool_result" for p in listed):
            listed = _answered(out["role"], listed, raw.get("tool_call_id"))
        listed = _with_calls(listed, calls)
        out["content"] = content_of(listed) if listed else ""
    for key, value in raw.items():
        if key not in read and value is not None:
            out[key] = value
    return out


def _system_message(instructions: Any) -> dict[str, Any]:
    """The system message of ``gen_ai.system_instructions``: a list of parts, or (as
    some agent frameworks write it) of messages, ``{"role": "system", "content"}``,
    whose contents are the parts."""
    parts: list[Any] = []
    for item in instructions if isinstance(instructions, list) else [instructions]:
        if isinstance(item, Mapping) and "role" in item and "type" not in item:
            parts += _content_parts(item.get("content", item.get("parts")))
        else:
            parts.append(genai_part(item))
    return {"role": "system", "content": content_of(parts)}


def _call_parts(calls: Any) -> list[dict[str, Any]]:
    """OpenAI-style ``tool_calls`` (``{id, function: {name, arguments}}``) as parts."""
    out: list[dict[str, Any]] = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        fn = function if isinstance(function, Mapping) else call
        out.append(_call(call.get("id"), fn.get("name"), fn.get("arguments")))
    return out


def _with_calls(parts: list[Any], calls: list[dict[str, Any]]) -> list[Any]:
    """`parts` and then the `calls` that are not among them already (OpenLLMetry writes
    an Anthropic ``tool_use`` block both in the content and as a flattened call)."""
    if not calls:
        return parts
    known = {p.get("id") for p in parts if isinstance(p, dict) and p.get("type") == "tool_call"}
    return parts + [c for c in calls if c["id"] is None or c["id"] not in known]


def _listed_parts(content: str) -> list[Any] | None:
    """A content list written as JSON text (OpenLLMetry's OpenAI parts and Anthropic
    blocks, Strands' Bedrock blocks): its parts, when it is one; else None (the text is
    the content)."""
    if not content.startswith("["):
        return None
    try:
        value = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None
    return value if _is_parts(value) else None


def _content_parts(content: Any) -> list[Any]:
    """A message's content as parts: a text (none when empty), a list of parts (also
    written as JSON text), or anything else written out as JSON text."""
    if isinstance(content, str):
        listed = _listed_parts(content)
        if listed is not None:
            return [genai_part(p) for p in listed]
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [genai_part(p) for p in content]
    if content is None:
        return []
    return [{"type": "text", "text": json.dumps(content, ensure_ascii=False)}]


def _event_body(attrs: Mapping[str, Any], main: str) -> Mapping[str, Any]:
    """The body of one of the older GenAI events: its attributes, or the JSON text of the
    whole body in ``gen_ai.event.content`` (Semantic Kernel's), when they do not hold
    its `main` field (``content`` for a message, ``message`` for ``gen_ai.choice``)."""
    if main in attrs or not isinstance(attrs.get("gen_ai.event.content"), str):
        return attrs
    decoded = _structured(attrs["gen_ai.event.content"], "gen_ai.event.content")
    return decoded if isinstance(decoded, Mapping) else {main: decoded}


def event_message(role: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """One of the older per-message events (its body fields as event attributes)."""
    body = _event_body(attrs, "content")
    parts = _content_parts(body.get("content"))
    sent_role = body.get("role")
    if isinstance(sent_role, str) and sent_role:
        role = sent_role
    parts = _answered(role, parts, body.get("id"))
    parts = _with_calls(parts, _call_parts(_structured(body.get("tool_calls"), "tool_calls")))
    return {"role": role, "content": content_of(parts) if parts else ""}


# --- OpenInference flattened attributes -----------------------------------------------


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix{i}.rest`` attributes grouped by i, in index order: [{rest: value}]."""
    groups: dict[int, dict[str, Any]] = {}
    n = len(prefix)
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[n:].partition(".")
        at = digits_value(index)
        if at is not None and rest:
            groups.setdefault(at, {})[rest] = value
    return [groups[i] for i in sorted(groups)]


def _texts_as(role: str, texts: Iterable[Any]) -> list[tuple[str, Any]]:
    """Texts an instrumentation wrote without roles (a completions API's prompts, Spring
    AI's), each a message of `role`, as raw context items: read as the older
    per-message events' content is."""
    return [("event", (role, {"content": text})) for text in texts]


def _oi_prompts(attrs: Mapping[str, Any]) -> list[Any]:
    """The prompts of an OpenInference completions API call: nested
    (``llm.prompts.{i}.prompt.text``), or the list ``llm.prompts`` older versions wrote."""
    listed = attrs.get(_OI_PROMPTS)
    if isinstance(listed, list):
        return listed
    return [item.get("prompt.text") for item in _indexed(attrs, f"{_OI_PROMPTS}.")]


def _answered(role: Any, parts: list[Any], call_id: Any) -> list[Any]:
    """A tool message's parts as the one result of the call it names (the flattened
    forms give the call's id beside the content); other messages' parts unchanged."""
    if role == "tool" and call_id:
        result: Any = content_of(parts) if parts else ""
        return [{"type": "tool_result", "tool_call_id": call_id, "content": result}]
    return parts


def _flat_calls(flat: Mapping[str, Any], prefix: str, fields: str, id_key: str) -> list[Any]:
    """The tool calls flattened under ``prefix{j}.``: ``{fields}name`` and
    ``{fields}arguments`` of each, and its id under `id_key`."""
    return [
        _call(call.get(id_key), call.get(f"{fields}name"), call.get(f"{fields}arguments"))
        for call in _indexed(flat, prefix)
    ]


def _oi_content(item: Mapping[str, Any]) -> Any:
    """One of OpenInference's ``message.contents.{j}`` items as a part: ``reasoning`` (a
    Responses API reasoning summary, an Anthropic thinking block; a redacted one has no
    text) is thinking, and a ``tool_use`` item (an Anthropic block, its call's fields
    beside the type) a tool call."""
    kind = item.get("message_content.type")
    if kind == "reasoning":
        return _thinking(item.get("message_content.text"))
    if kind == "tool_use":
        fn = "tool_call.function."
        return _call(item.get("tool_call.id"), item.get(f"{fn}name"), item.get(f"{fn}arguments"))
    if kind == "text" or "message_content.text" in item:
        return {"type": "text", "text": item.get("message_content.text", "")}
    if kind == "image":
        url = item.get("message_content.image.image.url")
        return {"type": "image", "url": url} if url else {"type": "image"}
    return {k.removeprefix("message_content."): v for k, v in item.items()}


def oi_message(flat: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenInference message from its ``message.*`` attributes. As LiteLLM's
    instrumentation writes Anthropic's messages, a call written both as a ``tool_use``
    content item and under ``message.tool_calls`` is one call, and a user message's
    ``message.content`` beside a ``message.tool_call_id`` is that call's result (a
    tool_result block)."""
    role = flat.get("message.role")
    call_id = flat.get("message.tool_call_id")
    parts: list[Any] = []
    content = flat.get("message.content")
    if isinstance(content, str) and content:
        if role != "tool" and call_id:
            parts.append(_result(call_id, content))
        else:
            parts.append({"type": "text", "text": content})
    parts += [_oi_content(item) for item in _indexed(flat, "message.contents.")]
    parts = _answered(role, parts, call_id)
    parts = _with_calls(
        parts, _flat_calls(flat, "message.tool_calls.", "tool_call.function.", "tool_call.id")
    )
    if "message.function_call_name" in flat:
        parts.append(
            {
                "type": "tool_call",
                "id": None,
                "name": flat["message.function_call_name"],
                "arguments": flat.get("message.function_call_arguments_json"),
            }
        )
    out: dict[str, Any] = {"role": role, "content": content_of(parts) if parts else ""}
    if isinstance(flat.get("message.name"), str):
        out["name"] = flat["message.name"]
    return out


def _flat_tools(attrs: Mapping[str, Any], prefix: str, fields: str) -> list[Any] | None:
    """Tool definitions flattened under ``prefix{i}.`` (OpenInference's
    ``llm.tools.{i}.tool.*``, OpenLLMetry's ``llm.request.functions.{i}.*``), each
    field named ``{fields}name``; a ``json_schema`` field is the whole definition, and
    ``parameters`` (OpenLLMetry's Anthropic instrumentation: ``input_schema``) may be
    JSON text."""
    name = f"{prefix}{fields}"
    tools: list[Any] = []
    for item in _indexed(attrs, prefix):
        schema = item.get(f"{fields}json_schema")
        if schema is not None:
            tools.append(_structured(schema, f"{name}json_schema"))
            continue
        tool = {k.removeprefix(fields): v for k, v in item.items()}
        for schema_key in ("parameters", "input_schema"):
            if schema_key in tool:
                tool[schema_key] = _structured(tool[schema_key], f"{name}{schema_key}")
        tools.append(tool)
    return tools or None


def _json_parameters(
    attrs: Mapping[str, Any], name: str, marks: tuple[str, ...]
) -> Mapping[str, Any] | None:
    """The object a call's parameters attribute `name` holds as JSON text, when the text
    holds one of `marks` (what the caller looks for: most calls' parameters have none,
    and are not decoded). None otherwise, and when the text is no JSON object: the
    parameters are not what the step is about, and no reason to refuse it."""
    raw = attrs.get(name)
    if not (isinstance(raw, str) and any(mark in raw for mark in marks)):
        return None
    try:
        params = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    return params if isinstance(params, Mapping) else None


def _oi_invocation_tools(attrs: Mapping[str, Any]) -> list[Any] | None:
    """The tools inside OpenInference's ``llm.invocation_parameters`` (JSON text of the
    call's parameters; LangChain's hold ``tools``, or ``functions`` in OpenAI's older
    API), which its instrumentations wrote before ``llm.tools.*``."""
    params = _json_parameters(attrs, _OI_PARAMETERS, ('"tools"', '"functions"'))
    if params is None:
        return None
    for key in ("tools", "functions"):
        tools = params.get(key)
        if isinstance(tools, list) and tools:
            return tools
    return None


def _pydantic_tools(attrs: Mapping[str, Any]) -> list[Any] | None:
    """The tools in Pydantic AI's ``model_request_parameters`` (JSON text of the call's
    ``ModelRequestParameters``), where its releases before ``gen_ai.tool.definitions``
    wrote them: ``function_tools``, then ``output_tools`` (``result_tools`` in the
    oldest), as that attribute now writes them."""
    params = _json_parameters(attrs, "model_request_parameters", ('"function_tools"',))
    if params is None:
        return None
    tools: list[Any] = []
    for key in ("function_tools", "output_tools", "result_tools"):
        listed = params.get(key)
        for tool in listed if isinstance(listed, list) else []:
            if not isinstance(tool, Mapping):
                continue
            found = {"type": "function", "name": tool.get("name")}
            if tool.get("description"):
                found["description"] = tool["description"]
            if tool.get("parameters_json_schema"):
                found["parameters"] = tool["parameters_json_schema"]
            tools.append(found)
    return tools or None


# --- OpenLLMetry flattened attributes ---------------------------------------------------


def tl_message(flat: Mapping[str, Any], role: str) -> dict[str, Any]:
    """An OpenLLMetry message from its ``gen_ai.prompt.{i}.*`` or
    ``gen_ai.completion.{i}.*`` attributes; `role` when it names none (a completion
    request's prompt is ``gen_ai.prompt.0.user``)."""
    sent_role = flat.get("role")
    if isinstance(sent_role, str) and sent_role:
        role = sent_role
    content = flat.get("content", flat.get("user"))
    if isinstance(content, list):
        # An attribute's array is no content list: read as the text it is.
        content = json.dumps(content, ensure_ascii=False)
    parts = _content_parts(content)
    if role == "thinking":
        # The Anthropic instrumentation writes a reply's thinking as a completion of
        # its own, of role "thinking".
        role, parts = "assistant", [_thinking(content)]
    parts = _answered(role, parts, flat.get("tool_call_id"))
    parts = _with_calls(parts, _flat_calls(flat, "tool_calls.", "", "id"))
    out: dict[str, Any] = {"role": role, "content": content_of(parts) if parts else ""}
    for key in ("finish_reason", "refusal"):
        if isinstance(flat.get(key), str):
            out[key] = flat[key]
    return out


# --- the Vercel AI SDK -------------------------------------------------------------------


def _ai_part(part: Any) -> Any:
    """A part of an AI SDK prompt message in the contract's spelling (version 4 names
    a call's input ``args`` and a result ``result``; version 5 ``input`` and ``output``,
    the latter as ``{"type", "value"}``)."""
    if not isinstance(part, Mapping):
        return {"type": "text", "text": part} if isinstance(part, str) else part
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": part.get("text", "")}
    if kind == "tool-call":
        return _call(
            part.get("toolCallId"), part.get("toolName"), part.get("input", part.get("args"))
        )
    if kind == "tool-result":
        output = part.get("output", part.get("result"))
        if isinstance(output, Mapping) and "value" in output:
            output = output["value"]
        return {"type": "tool_result", "tool_call_id": part.get("toolCallId"), "content": output}
    if kind == "reasoning":
        return {"type": "thinking", "text": part.get("text", "")}
    if kind in ("image", "file"):
        out: dict[str, Any] = {"type": kind}
        media = part.get("mediaType", part.get("mimeType"))
        if isinstance(media, str):
            out["media_type"] = media
        data = part.get("image", part.get("data"))
        if isinstance(data, str):
            out["url" if data.startswith(("http://", "https://")) else "data"] = data
        return out
    return dict(part)


def ai_message(raw: Any) -> dict[str, Any]:
    """An element of the AI SDK's ``ai.prompt.messages``."""
    if not isinstance(raw, Mapping):
        raise SpanError("ai.prompt.messages", "each message must be an object")
    content = raw.get("content")
    out: dict[str, Any] = {"role": raw.get("role")}
    if isinstance(content, list):
        out["content"] = content_of([_ai_part(p) for p in content])
    else:
        out["content"] = content if isinstance(content, str) else ""
    return out


def _ai_output(attrs: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The reply of an AI SDK call: its reasoning (its texts joined), its text, then its
    tool calls."""
    parts: list[Any] = []
    reasoning = attrs.get("ai.response.reasoning")
    if isinstance(reasoning, str) and reasoning:
        parts.append(_thinking(reasoning))
    text = attrs.get("ai.response.text")
    if isinstance(text, str) and text:
        parts.append({"type": "text", "text": text})
    if "ai.response.toolCalls" in attrs:
        calls = _list(attrs["ai.response.toolCalls"], "ai.response.toolCalls")
        parts.extend(_ai_part({"type": "tool-call", **c}) for c in calls if isinstance(c, Mapping))
    if not parts:
        return None
    reply: dict[str, Any] = {"role": "assistant", "content": content_of(parts)}
    if isinstance(attrs.get("ai.response.finishReason"), str):
        reply["finish_reason"] = attrs["ai.response.finishReason"]
    return [reply]


def _ai_tools(attrs: Mapping[str, Any]) -> list[Any] | None:
    """``ai.prompt.tools``: a list of tool definitions, each as JSON text."""
    listed = attrs.get("ai.prompt.tools")
    if listed is None:
        return None
    items = listed if isinstance(listed, list) else _list(listed, "ai.prompt.tools")
    return [_structured(t, "ai.prompt.tools") for t in items] or None


# --- Google's Agent Development Kit ------------------------------------------------------


def _json_object(
    attrs: Mapping[str, Any], name: str, *, lenient: bool = False
) -> Mapping[str, Any]:
    """An attribute holding an object as JSON text (ADK's request and response, LangSmith's
    run inputs and outputs, Logfire's request and response data), decoded once for the
    call's readers; empty when absent or no object. Text that is no JSON is refused
    naming the attribute, but `lenient`: an attribute another library may use for
    something else, which then says nothing."""
    value = attrs.get(name)
    if value is None:
        return {}
    if isinstance(value, str):
        if lenient and not value.startswith("{"):
            return {}
        try:
            value = _decoded_once(value, name)
        except SpanError:
            if not lenient:
                raise
            return {}
    return value if isinstance(value, Mapping) else {}


@lru_cache(maxsize=4)
def _decoded_once(text: str, name: str) -> Any:
    """`_structured` of a JSON text that several readers of one call read (context,
    tools, reply and usage: `_json_object`), decoded once (callers only read what it
    gives)."""
    return _structured(text, name)


def _gemini_part(part: Any) -> Any:
    """A Gemini ``Part`` (as the SDK dumps it: ``text`` with ``thought``,
    ``function_call``, ``function_response``, ``file_data``) in the contract's spelling."""
    if not isinstance(part, Mapping):
        return {"type": "text", "text": part} if isinstance(part, str) else part
    if isinstance(part.get("text"), str):
        return _thinking(part["text"]) if part.get("thought") else genai_part(part["text"])
    call = part.get("function_call")
    if isinstance(call, Mapping):
        return _call(call.get("id"), call.get("name"), call.get("args"))
    response = part.get("function_response")
    if isinstance(response, Mapping):
        return _result(response.get("id"), response.get("response"))
    data = part.get("file_data")
    if isinstance(data, Mapping):
        found = {"url": data.get("file_uri"), "mime_type": data.get("mime_type")}
        return _media({k: v for k, v in found.items() if v is not None}, "uri")
    return dict(part)


def adk_message(raw: Any) -> dict[str, Any]:
    """A Gemini ``Content`` (``role`` ``user`` or ``model``, ``parts``) as a message."""
    if not isinstance(raw, Mapping):
        raise SpanError(ADK_REQUEST, "each content must be an object")
    role = raw.get("role")
    parts = raw.get("parts")
    listed = [_gemini_part(p) for p in parts] if isinstance(parts, list) else []
    return {
        "role": "assistant" if role == "model" else role,
        "content": content_of(listed) if listed else "",
    }


def _adk_input(attrs: Mapping[str, Any]) -> list[Any]:
    request = _json_object(attrs, ADK_REQUEST)
    config = request.get("config")
    system = config.get("system_instruction") if isinstance(config, Mapping) else None
    raw: list[Any] = []
    if isinstance(system, Mapping):
        raw.append(("adk", {**system, "role": "system"}))
    elif system:
        raw.append(
            ("adk", {"role": "system", "parts": system if isinstance(system, list) else [system]})
        )
    contents = request.get("contents", [])
    if not isinstance(contents, list):
        raise SpanError(ADK_REQUEST, "contents must be a list")
    raw.extend(("adk", content) for content in contents)
    return raw


def _adk_output(attrs: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    try:
        response = _json_object(attrs, ADK_RESPONSE)
    except SpanError:  # ADK writes "<not serializable>" for a reply it cannot dump
        return None
    if not isinstance(response.get("content"), Mapping):
        return None
    reply = adk_message({"role": "model", **response["content"]})
    if isinstance(response.get("finish_reason"), str):
        reply["finish_reason"] = response["finish_reason"]
    return [reply]


def _adk_usage(attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The ``usage_metadata`` of ADK's response (Gemini's counts, whose
    ``prompt_token_count`` includes ``cached_content_token_count``); empty when the
    response has none, so that a span without it is not read twice."""
    raw = attrs.get(ADK_RESPONSE)
    if not (isinstance(raw, str) and "usage_metadata" in raw):
        return {}
    try:
        found = _json_object(attrs, ADK_RESPONSE).get("usage_metadata")
    except SpanError:
        return {}
    return found if isinstance(found, Mapping) else {}


def _adk_tools(attrs: Mapping[str, Any]) -> list[Any] | None:
    """The function declarations of ADK's request (``config.tools[].function_declarations``)."""
    config = _json_object(attrs, ADK_REQUEST).get("config")
    tools = config.get("tools") if isinstance(config, Mapping) else None
    declared = [
        declaration
        for tool in (tools if isinstance(tools, list) else [])
        if isinstance(tool, Mapping) and isinstance(tool.get("function_declarations"), list)
        for declaration in tool["function_declarations"]
    ]
    return declared or None


# --- LangSmith ----------------------------------------------------------------------------

# LangChain's message types (a serialized message's ``kwargs.type``) as roles; a chat
# message names its own role.
_LC_ROLES = {
    "human": "user",
    "ai": "assistant",
    "AIMessageChunk": "assistant",
    "system": "system",
    "developer": "developer",
    "tool": "tool",
    "function": "tool",
}


def is_langsmith_call(attrs: Mapping[str, Any]) -> bool:
    """Whether a span of LangSmith's OpenTelemetry exporter is a model call: its run type
    (``langsmith.span.kind``) ``llm``. It names the operation ``chat`` for a prompt
    template's runs too, which are none."""
    return attrs.get(_LS_KIND) == "llm"


def ls_message(raw: Any, name: str = PROMPT_ATTRIBUTE) -> dict[str, Any]:
    """A message of a LangSmith run: LangChain's serialized form (``lc``, ``kwargs``
    with ``type``, ``content``, ``tool_calls`` of ``name``/``args``/``id`` and
    ``tool_call_id``), or a provider's own (OpenAI's, Anthropic's), as a model client's
    wrapper traces its request."""
    if not isinstance(raw, Mapping):
        raise SpanError(name, "each message must be an object")
    kwargs = raw.get("kwargs")
    if "lc" not in raw or not isinstance(kwargs, Mapping):
        return genai_message(raw, name)
    kind = kwargs.get("type")
    role: Any = kind
    if kind == "chat":
        role = kwargs.get("role")
    elif isinstance(kind, str):
        role = _LC_ROLES.get(kind, kind)
    parts = _content_parts(kwargs.get("content"))
    parts = _answered(role, parts, kwargs.get("tool_call_id"))
    listed = kwargs.get("tool_calls")
    calls = [
        _call(c.get("id"), c.get("name"), c.get("args"))
        for c in (listed if isinstance(listed, list) else [])
        if isinstance(c, Mapping)
    ]
    parts = _with_calls(parts, calls)
    out: dict[str, Any] = {"role": role, "content": content_of(parts) if parts else ""}
    if isinstance(kwargs.get("name"), str):
        out["name"] = kwargs["name"]
    return out


def _ls_input(attrs: Mapping[str, Any]) -> list[Any]:
    """The context of a LangSmith model call from its run's inputs (``gen_ai.prompt``):
    ``messages`` (LangChain's are a batch of lists, whose first is the call's), after an
    Anthropic client's ``system``; or the texts of a completion model's ``prompts``."""
    inputs = _json_object(attrs, PROMPT_ATTRIBUTE)
    raw: list[Any] = []
    system = inputs.get("system")
    if system:
        raw.append(("system", system))
    messages = inputs.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[0], list):
        messages = messages[0]
    if isinstance(messages, list):
        raw.extend(("ls", m) for m in messages)
    else:
        prompts = inputs.get("prompts")
        raw += _texts_as("user", prompts if isinstance(prompts, list) else [])
    return raw


def _ls_output(attrs: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The reply of a LangSmith model call from its run's outputs (``gen_ai.completion``):
    LangChain's ``generations`` (their messages, else their texts), OpenAI's
    ``choices``, or a reply that is a message itself (an Anthropic client's)."""
    outputs = _json_object(attrs, COMPLETION_ATTRIBUTE)
    out: list[dict[str, Any]] = []
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations and isinstance(generations[0], list):
        generations = generations[0]
    choices = outputs.get("choices")
    if isinstance(generations, list):
        for generation in generations:
            if not isinstance(generation, Mapping):
                continue
            message = generation.get("message")
            if isinstance(message, Mapping):
                out.append(ls_message(message, COMPLETION_ATTRIBUTE))
            elif isinstance(generation.get("text"), str):
                out.append({"role": "assistant", "content": generation["text"]})
    elif isinstance(choices, list):
        for choice in choices:
            if isinstance(choice, Mapping) and isinstance(choice.get("message"), Mapping):
                reply = ls_message(choice["message"], COMPLETION_ATTRIBUTE)
                if isinstance(choice.get("finish_reason"), str):
                    reply["finish_reason"] = choice["finish_reason"]
                out.append(reply)
    elif "content" in outputs and "role" in outputs:
        out.append(ls_message(outputs, COMPLETION_ATTRIBUTE))
    return out or None


def _request_tools(request: Mapping[str, Any]) -> list[Any] | None:
    """The ``tools`` of a request a library traced whole (a LangSmith run's inputs,
    Logfire's request data), None when it lists none."""
    tools = request.get("tools")
    return tools if isinstance(tools, list) and tools else None


# One entry of a dict of names to whole numbers as Python prints it: `'cache_read': 12`.
_PRINTED_COUNT = re.compile(r"\s*'(\w{1,64})'\s*:\s*(\d{1,18}|None)\s*")
# Longer than any dict of token details: no such text is read.
_MAX_PRINTED = 1000


def _printed_counts(text: str) -> dict[str, int]:
    """A dict of names to whole numbers as Python prints it (``{'audio': 0,
    'cache_read': 12}``), read as numbers and never evaluated; empty for any other text
    (another value, a sign, a fraction, a quoted number)."""
    text = text.strip()
    if len(text) > _MAX_PRINTED or not (text.startswith("{") and text.endswith("}")):
        return {}
    inner = text[1:-1]
    if not inner.strip():
        return {}
    counts: dict[str, int] = {}
    for item in inner.split(","):
        found = _PRINTED_COUNT.fullmatch(item)
        if found is None:
            return {}
        if found[2] != "None":
            counts[found[1]] = int(found[2])
    return counts


def _ls_usage(attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """LangChain's usage of a LangSmith run (``usage_metadata``: ``input_tokens`` with
    the cached tokens counted in, ``output_tokens``, and ``input_token_details`` whose
    ``cache_read`` and ``cache_creation`` are the cache's), from the JSON the JS SDK
    writes whole and the details both SDKs write apart: JSON from the JS SDK, Python's
    print of a dict from the Python SDK."""
    usage = _json_object(attrs, _LS_USAGE, lenient=True)
    text = attrs.get(_LS_TOKEN_DETAILS)
    if isinstance(text, str):
        details = _json_object(attrs, _LS_TOKEN_DETAILS, lenient=True) or _printed_counts(text)
        if details:
            return {**usage, "input_token_details": details}
    return usage


def _ls_tools(attrs: Mapping[str, Any]) -> list[Any] | None:
    """The ``tools`` a model client's wrapper traces in its run's inputs."""
    if not is_langsmith_call(attrs):
        return None
    return _request_tools(_json_object(attrs, PROMPT_ATTRIBUTE))


# --- Logfire before the GenAI conventions ------------------------------------------------

_LF_REQUEST = "request_data"
_LF_RESPONSE = "response_data"


def is_logfire_call(attrs: Mapping[str, Any]) -> bool:
    """Whether a span is a model call as Logfire traced one before it wrote the GenAI
    conventions: it names no operation, and its ``request_data`` holds ``messages`` (an
    embedding's holds an ``input``)."""
    if _LF_REQUEST not in attrs or "gen_ai.operation.name" in attrs:
        return False
    return isinstance(_json_object(attrs, _LF_REQUEST, lenient=True).get("messages"), list)


def _lf_input(attrs: Mapping[str, Any]) -> list[Any]:
    """The context of such a call: the request's ``messages``, after an Anthropic
    client's ``system``."""
    request = _json_object(attrs, _LF_REQUEST, lenient=True)
    raw: list[Any] = []
    if request.get("system"):
        raw.append(("system", request["system"]))
    raw += [("genai", m) for m in request["messages"]]
    return raw


def _lf_output(attrs: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The reply of such a call: ``response_data.message`` (OpenAI's form, which Logfire
    writes for Anthropic's replies too), or a stream's ``combined_chunk_content``."""
    response = _json_object(attrs, _LF_RESPONSE, lenient=True)
    message = response.get("message")
    if isinstance(message, Mapping):
        return [genai_message({"role": "assistant", **message}, f"{_LF_RESPONSE}.message")]
    streamed = response.get("combined_chunk_content")
    if isinstance(streamed, str):
        return [{"role": "assistant", "content": streamed}]
    return None


def _lf_tools(attrs: Mapping[str, Any]) -> list[Any] | None:
    """The ``tools`` of such a call's request."""
    if not is_logfire_call(attrs):
        return None
    return _request_tools(_json_object(attrs, _LF_REQUEST, lenient=True))


def _lf_usage(attrs: Mapping[str, Any]) -> dict[str, int] | None:
    """The provider's usage Logfire kept with the reply (OpenAI's or Anthropic's
    spelling), in the contract's names."""
    usage = _json_object(attrs, _LF_RESPONSE, lenient=True).get("usage")
    counts = usage_counts(usage if isinstance(usage, Mapping) else None)
    return None if counts is None else counts.as_usage()


# Logfire's OpenAI Agents integration keeps a Responses API call's whole exchange in its
# ``events`` attribute (the input's messages, then one ``gen_ai.assistant.message`` item
# per part of the reply) beside the ``response`` object itself, whose usage only it holds.
_LF_RESPONSE_OBJECT = "response"


def _lf_response(attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """The Responses API object of such a call (``object`` ``response``), or {}."""
    if "events" not in attrs:
        return {}
    response = _json_object(attrs, _LF_RESPONSE_OBJECT, lenient=True)
    if response.get("object") != "response" or not isinstance(response.get("output"), list):
        return {}
    return response


def _lf_reply_count(
    attrs: Mapping[str, Any], listed: Sequence[tuple[str, Mapping[str, Any]]]
) -> int:
    """How many of the call's `listed` events are its reply: those Logfire made of the
    ``response``'s output (``responses_output_events``), which it puts last: one for each
    text of a message, one for each other item. 0 when the span has no such response,
    or when its last events are not as many replies of the assistant."""
    output = _lf_response(attrs).get("output")
    if not output:
        return _lf_trailing_replies(attrs, listed)
    count = 0
    for item in output:
        content = item.get("content") if isinstance(item, Mapping) else None
        message = (
            isinstance(item, Mapping)
            and item.get("role")
            and item.get("type") in (None, "message")
            and isinstance(content, list)
            and content
        )
        count += len(content) if message and isinstance(content, list) else 1
    tail = listed[-count:] if count <= len(listed) else []
    if not tail or any(body.get("role") != "assistant" for _, body in tail):
        return 0
    return count


def _lf_trailing_replies(
    attrs: Mapping[str, Any], listed: Sequence[tuple[str, Mapping[str, Any]]]
) -> int:
    """The reply of a Responses API call that Logfire's ``instrument_openai`` traced
    before it wrote the GenAI conventions: its ``request_data`` keeps the model alone
    (no ``messages``), its ``events`` the input's messages and then the reply's
    (``responses_output_events``), with no ``response`` to count them by. A Responses
    API input ends with what the user or a tool said, so the assistant's events after
    it are the reply; 0 when the call's events end otherwise."""
    request = _json_object(attrs, _LF_REQUEST, lenient=True) if _LF_REQUEST in attrs else {}
    if not request or "messages" in request or "input" in request:
        return 0
    count = 0
    for _, body in reversed(listed):
        if body.get("role") != "assistant":
            break
        count += 1
    return count if count < len(listed) else 0


# --- Spring AI ---------------------------------------------------------------------------


def _spring_texts(value: Any, name: str) -> list[str]:
    """The texts Spring AI wrote of a prompt's messages (or of a reply's generations), in
    order: an array of texts (an event's attribute; a message without text is an empty
    one), or one text joining them, as its content observation filters write it: each
    text in double quotes, unescaped, the texts separated by ``", "``, in brackets. The
    join is undone by splitting at ``", "``, so a text holding those four characters
    comes out as two. A text not so joined is the one text there is."""
    if isinstance(value, list) and all(v is None or isinstance(v, str) for v in value):
        return [v or "" for v in value]
    if not isinstance(value, str):
        raise SpanError(name, "must be a text or a list of texts")
    if value == "[]":
        return []
    if len(value) >= 4 and value.startswith('["') and value.endswith('"]'):
        return value[2:-2].split('", "')
    return [value]


def _spring(p: _Pending, names: tuple[str, str], role: str) -> list[tuple[str, Any]]:
    """What Spring AI wrote on a call's span of its prompt (or reply), `names` being the
    event and the attribute that hold it, as raw context items: from the events, else
    from the span's attribute.

    Spring AI writes the text of each message alone (``Content.getText``): which one
    was the system prompt, an earlier reply or a tool's result is not on the span, and
    is not guessed from the texts. Each is a message of `role`, in order: ``user`` for a
    prompt's texts, ``assistant`` for the generations of a reply. Read as the older
    per-message events' content is."""
    event, name = names
    found = [body[name] for e, body in _events(p) if e == event and name in body]
    if not found and name in p.attrs:
        found = [p.attrs[name]]
    return _texts_as(role, (text for value in found for text in _spring_texts(value, name)))


# --- ids --------------------------------------------------------------------------------


def _digest(message: Mapping[str, Any]) -> str:
    # Sorted keys: the same message gives the same bytes in every process.
    try:
        data = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:  # text that is not valid Unicode (a lone surrogate)
        raise SpanError("messages", f"a message cannot be read: {exc}") from None
    return hashlib.sha256(data).hexdigest()[:20]


@dataclass(slots=True)
class _Context:
    """A call's context as decoded (to compare with the next call's) and as sent."""

    raw: list[Any]
    messages: list[dict[str, Any]]
    digests: list[str]
    out: list[dict[str, Any]]
    ids: list[str]
    # the JSON texts it was decoded from (system instructions, input messages), if any
    texts: tuple[Any, Any] = (None, None)
    # the system instructions decoded from the first of them
    instructions: Any = None


def _context(raw: list[Any], previous: _Context | None, *, same: int = 0) -> _Context:
    """Messages with ids for the decoded context `raw`, reusing what `previous` shares
    at its head: those are neither converted nor hashed again. `same`: how many of
    the first items of `raw` are known to be `previous.raw`'s own (the caller took
    them from it), so that they are not compared one by one."""
    if previous is not None:
        old = previous.raw
        limit = min(len(raw), len(old))
        while same < limit and (raw[same] is old[same] or raw[same] == old[same]):
            same += 1
        messages = previous.messages[:same]
        digests = previous.digests[:same]
        out = previous.out[:same]
        ids = previous.ids[:same]
    else:
        same = 0
        messages, digests, out, ids = [], [], [], []
    # The n-th repeat of a message in a context gets ".n": ids stay unique in a list.
    seen: dict[str, int] = {}
    for item in raw[same:]:
        message = _convert(item)
        digest = _digest(message)
        n = seen.get(digest)
        if n is None:
            n = digests.count(digest)
        seen[digest] = n + 1
        messages.append(message)
        digests.append(digest)
        mid = digest if n == 0 else f"{digest}.{n}"
        ids.append(mid)
        out.append({**message, "id": mid})
    return _Context(raw, messages, digests, out, ids)


# --- spans ------------------------------------------------------------------------------


def is_llm_call(attrs: Mapping[str, Any]) -> bool:
    if _LS_KIND in attrs:
        return is_langsmith_call(attrs)
    return (
        attrs.get("gen_ai.operation.name") in LLM_OPERATIONS
        or attrs.get("gen_ai.operation.name") in _SK_OPERATIONS
        or attrs.get("openinference.span.kind") == "LLM"
        or attrs.get("llm.request.type") in _TL_REQUEST_TYPES
        or attrs.get("llm.request.type") in _LITELLM_CALLS
        or attrs.get("ai.operationId") in _AI_CALLS
        or is_adk_call(attrs)
        or is_tl_response(attrs)
        or is_logfire_call(attrs)
    )


def is_tl_response(attrs: Mapping[str, Any]) -> bool:
    """OpenLLMetry's OpenAI instrumentation's span of a Responses API call
    (``openai.response``): it names no request type nor operation, and writes the
    roles of its flattened prompt and reply, which no other span of it does."""
    return (
        "llm.request.type" not in attrs
        and "gen_ai.operation.name" not in attrs
        and (f"{_TL_PROMPT}0.role" in attrs or f"{_TL_COMPLETION}0.role" in attrs)
    )


def is_adk_call(attrs: Mapping[str, Any]) -> bool:
    """ADK's ``call_llm`` span: it names no operation; its request is sent (its tool
    spans carry an empty one, ``{}``)."""
    request = attrs.get(ADK_REQUEST)
    return isinstance(request, str) and len(request) > 2


def is_tool_run(attrs: Mapping[str, Any]) -> bool:
    return (
        attrs.get("gen_ai.operation.name") == "execute_tool"
        or attrs.get("openinference.span.kind") == "TOOL"
    )


def session_of(attrs: Mapping[str, Any], trace_id: str) -> str:
    """The session a span belongs to: the one it names, else its trace."""
    return named_session(attrs) or trace_id


def named_session(attrs: Mapping[str, Any]) -> str | None:
    """The session a span names: its conversation, else its session (the contract's,
    OpenLLMetry's, the AI SDK's or ADK's) or LangSmith's thread; None if none."""
    session = (
        attrs.get("gen_ai.conversation.id")
        or attrs.get("session.id")
        or attrs.get(_TL_SESSION)
        or attrs.get(_AI_SESSION)
        or attrs.get(_ADK_SESSION)
        or next((attrs[k] for k in _LS_SESSIONS if attrs.get(k)), None)
    )
    return str(session) if session else None


# The attributes `named_session` reads.
_SESSION_KEYS = frozenset(
    ("gen_ai.conversation.id", "session.id", _TL_SESSION, _AI_SESSION, _ADK_SESSION, *_LS_SESSIONS)
)


_STATUS = {Status.STATUS_CODE_OK: "ok", Status.STATUS_CODE_ERROR: "error"}


def tool_run(span: Span, attrs: Mapping[str, Any], trace_id: str, span_id: str) -> ToolRun:
    """What a tool span says: which tool, for which call, how long, how it ended.
    Values too long for their column are cut: a tool span is never refused."""
    name = (
        _text(attrs.get("gen_ai.tool.name"))
        or _text(attrs.get("tool.name"))
        or span.name.removeprefix("execute_tool ")
        or "tool"
    )
    call_id = _text(attrs.get("gen_ai.tool.call.id")) or _text(attrs.get("tool_call.id")) or ""
    end_ns = max(span.end_time_unix_nano, span.start_time_unix_nano)
    return ToolRun(
        trace_id=trace_id,
        span_id=span_id,
        session_id=session_of(attrs, trace_id)[:MAX_NAME],
        name=name[:MAX_NAME],
        call_id=call_id[:MAX_NAME],
        start_ns=span.start_time_unix_nano,
        end_ns=end_ns,
        status=_STATUS.get(span.status.code, "unset"),
        status_message=span.status.message[:MAX_MESSAGE],
    )


@dataclass(slots=True)
class _Pending:
    span: Span
    attrs: dict[str, Any]
    trace_id: str
    span_id: str
    session_id: str
    # the session it names itself (None: its session is its trace's)
    named: str | None
    # its own gen_ai.agent.name, else the resource's service.name
    agent: str | None


def _with_events(
    span: Span, attrs: dict[str, Any], only: Container[str] | None = None
) -> dict[str, Any]:
    """The span's attributes, completed by its inference details event (which carries
    the messages as structured values when the instrumentation writes them there);
    `only`: just these attributes of the event."""
    for event in span.events:
        if event.name == DETAILS_EVENT:
            kvs = event.attributes
            for key, value in attributes(k for k in kvs if only is None or k.key in only).items():
                attrs.setdefault(key, value)
    return attrs


def _instructions(value: Any) -> Any:
    """``gen_ai.system_instructions`` decoded: JSON text of its parts (or messages), or
    a structured value; a text that is no JSON list or object is the instructions
    themselves (LiteLLM writes a system prompt given as one text so)."""
    if not isinstance(value, str):
        return value
    try:
        decoded = orjson.loads(value)
    except orjson.JSONDecodeError:
        return value
    return decoded if isinstance(decoded, list | dict) else value


def _text_of(part: Any) -> str | None:
    """The text of a GenAI text part, if it is one."""
    if isinstance(part, Mapping) and part.get("type") == "text":
        text = part.get("content", part.get("text"))
        return text if isinstance(text, str) else None
    return None


def _unrepeated(instructions: Any, items: Sequence[Any]) -> Any:
    """``gen_ai.system_instructions`` less the texts that the context's own system
    messages hold too, which the model was sent once: Pydantic AI writes the text of
    each of its system prompt parts both there (after the agent's instructions) and
    as a system message of ``gen_ai.input.messages``, where it stays in its place.
    None when nothing is left."""
    if not (isinstance(instructions, list) and instructions):
        return instructions
    held: Counter[str] = Counter()
    # Decoded JSON: dicts (a comprehension, as this runs on every call's context).
    systems = [m for _, m in items if type(m) is dict and m.get("role") == "system"]
    for message in systems:
        parts = message.get("parts", message.get("content"))
        if isinstance(parts, str):
            held[parts] += 1
        elif isinstance(parts, list):
            held.update(t for t in map(_text_of, parts) if t is not None)
    if not held:
        return instructions
    kept = []
    for part in instructions:
        text = _text_of(part)
        if text is not None and held[text] > 0:
            held[text] -= 1
        else:
            kept.append(part)
    if len(kept) == len(instructions):
        return instructions
    return kept or None


def _genai_input(attrs: Mapping[str, Any], previous: _Context | None) -> _Context:
    """The context of a GenAI call. The official instrumentations write the messages as
    one JSON text per call, which mostly starts with the previous call's text (less its
    closing bracket): then only what follows is decoded."""
    system_text = attrs.get("gen_ai.system_instructions")
    input_text = attrs.get("gen_ai.input.messages", "[]")
    old = previous.texts if previous is not None else (None, None)
    # the system message the previous call's context starts with, if any
    old_system = None
    if previous is not None and previous.raw[:1] and previous.raw[0][0] == "system":
        old_system = previous.raw[0]
    shared: list[Any] | None = None
    if previous is not None and isinstance(input_text, str) and isinstance(old[1], str):
        old_items = previous.raw[1:] if old_system is not None else previous.raw
        head = old[1].rstrip()[:-1].rstrip()
        if input_text == old[1]:
            shared, rest = old_items, None
        elif old_items and input_text.startswith(head):
            tail = input_text[len(head) :].lstrip()
            if tail.startswith(","):
                shared, rest = old_items, "[" + tail[1:]
    if shared is None:
        items = [("genai", m) for m in _list(input_text, "gen_ai.input.messages")]
    else:
        items = list(shared)
        if rest is not None:
            items.extend(("genai", m) for m in _list(rest, "gen_ai.input.messages"))
    raw: list[Any] = []
    instructions = None
    if system_text is not None:
        if previous is not None and system_text == old[0]:
            instructions = previous.instructions
        else:
            instructions = _instructions(system_text)
        system = _unrepeated(instructions, items)
        if system is not None:
            if old_system is not None and (system is old_system[1] or system == old_system[1]):
                raw.append(old_system)
            else:
                raw.append(("system", system))
    # whether raw so far is the previous call's raw, item for item
    aligned = previous is not None and (raw[0] if raw else None) is old_system
    same = len(raw) + len(shared) if aligned and shared is not None else 0
    raw.extend(items)
    context = _context(raw, previous, same=same)
    context.texts = (system_text, input_text)
    context.instructions = instructions
    return context


def _input(p: _Pending, previous: _Context | None) -> _Context:
    """The call's context, as decoded values and as messages with ids."""
    attrs = p.attrs
    if "gen_ai.input.messages" in attrs or "gen_ai.system_instructions" in attrs:
        return _genai_input(attrs, previous)
    raw: list[Any] = []
    if is_langsmith_call(attrs):
        return _context(_ls_input(attrs), previous)
    if is_logfire_call(attrs):
        return _context(_lf_input(attrs), previous)
    flat = _indexed(attrs, _OI_INPUT)
    if flat:
        return _context([("oi", item) for item in flat], previous)
    prompts = _oi_prompts(attrs)
    if prompts:
        return _context(_texts_as("user", prompts), previous)
    flat = _indexed(attrs, _TL_PROMPT)
    if flat:
        return _context([("tl", item) for item in flat], previous)
    if "ai.prompt.messages" in attrs:
        items = _list(attrs["ai.prompt.messages"], "ai.prompt.messages")
        return _context([("ai", item) for item in items], previous)
    if ADK_REQUEST in attrs:
        return _context(_adk_input(attrs), previous)
    listed = _events(p)
    replied = _lf_reply_count(attrs, listed) if not p.span.events else 0
    for name, body in listed[: len(listed) - replied]:
        role = _MESSAGE_EVENTS.get(name)
        if role is not None:
            raw.append(("event", (role, body)))
    return _context(raw or _spring(p, SPRING_PROMPT, "user"), previous)


def _events(p: _Pending) -> list[tuple[str, Mapping[str, Any]]]:
    """The call's message events (``gen_ai.*.message``, ``gen_ai.choice``), each as its
    name and body: the span's events, else Pydantic AI's ``events`` attribute (its
    version 1 writes them there as one JSON list, each body with its ``event.name``,
    which its older releases leave out: the role, or a ``message``, says which)."""
    if p.span.events:
        return [(e.name, attributes(e.attributes)) for e in p.span.events]
    listed = p.attrs.get("events")
    if not isinstance(listed, str):
        return []
    out = []
    for item in _list(listed, "events"):
        if not isinstance(item, Mapping):
            continue
        name = item.get("event.name")
        if name is None:
            name = "gen_ai.choice" if "message" in item else f"gen_ai.{item.get('role')}.message"
        out.append((name, item))
    return out


# How each form of a raw context item (as `_input` tags them) becomes a message.
_CONVERTERS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "genai": lambda value: genai_message(value, "gen_ai.input.messages"),
    "system": _system_message,
    "oi": oi_message,
    "tl": lambda value: tl_message(value, "user"),
    "ai": ai_message,
    "adk": adk_message,
    "ls": ls_message,
    "event": lambda value: event_message(*value),
}


def _convert(item: tuple[str, Any]) -> dict[str, Any]:
    form, value = item
    return _CONVERTERS[form](value)


def _output(p: _Pending) -> list[dict[str, Any]] | None:
    attrs = p.attrs
    if "gen_ai.output.messages" in attrs:
        items = _list(attrs["gen_ai.output.messages"], "gen_ai.output.messages")
        return [genai_message(m, "gen_ai.output.messages") for m in items]
    flat = _indexed(attrs, _OI_OUTPUT)
    if flat:
        return [oi_message(m) for m in flat]
    flat = _indexed(attrs, _OI_CHOICES)
    if flat:
        return [event_message("assistant", {"content": m.get("completion.text")}) for m in flat]
    flat = _indexed(attrs, _TL_COMPLETION)
    if flat:
        return [tl_message(m, "assistant") for m in flat]
    if any(name in attrs for name in _AI_REPLY):
        return _ai_output(attrs)
    if ADK_REQUEST in attrs:
        return _adk_output(attrs)
    if is_langsmith_call(attrs):
        return _ls_output(attrs)
    if is_logfire_call(attrs):
        return _lf_output(attrs)
    listed = _events(p)
    replied = _lf_reply_count(attrs, listed) if not p.span.events else 0
    if replied:
        return [event_message("assistant", body) for _, body in listed[-replied:]]
    out = []
    for name, fields in listed:
        if name == "gen_ai.choice":
            body = _event_body(fields, "message")
            message = body.get("message", {})
            if isinstance(message, str) and message[:1] in ("{", "["):
                message = _structured(message, "gen_ai.choice.message")
            if not isinstance(message, Mapping):
                # Strands sends the reply's content blocks (or its text) alone.
                message = {"content": message}
            reply = event_message("assistant", message)
            if body.get("finish_reason"):
                reply["finish_reason"] = body["finish_reason"]
            out.append(reply)
    if not out:
        out = [_convert(item) for item in _spring(p, SPRING_COMPLETION, "assistant")]
    return out or None


def _tools(attrs: Mapping[str, Any]) -> list[Any] | None:
    if "gen_ai.tool.definitions" in attrs:
        return _list(attrs["gen_ai.tool.definitions"], "gen_ai.tool.definitions") or None
    return (
        _flat_tools(attrs, _OI_TOOLS, "tool.")
        or _oi_invocation_tools(attrs)
        or _pydantic_tools(attrs)
        or _flat_tools(attrs, _TL_FUNCTIONS, "")
        or _ai_tools(attrs)
        or _adk_tools(attrs)
        or _ls_tools(attrs)
        or _lf_tools(attrs)
    )


def _uncached_input(attrs: Mapping[str, Any]) -> bool:
    """Whether the call's input count leaves out the cached tokens. The instrumentations
    read here count them in (OpenLLMetry adds Anthropic's cache counts to its input
    count, OpenInference's cache read is a detail of its prompt count, Pydantic AI
    counts every input token) except Strands Agents, which passes on Bedrock's
    ``inputTokens``, the uncached part, and the AI SDK 5 calling Anthropic, whose
    ``inputTokens`` is Anthropic's ``input_tokens`` (version 6 counts them in, and
    gives the uncached part, `_AI_UNCACHED`)."""
    if STRANDS in (attrs.get("gen_ai.system"), attrs.get("gen_ai.provider.name")):
        return True
    provider = attrs.get("ai.model.provider")
    return (
        attrs.get("ai.operationId") in _AI_CALLS
        and isinstance(provider, str)
        and "anthropic" in provider
        and not any(name.startswith(_AI_DETAILS) for name in attrs)  # version 5
    )


# The AI SDK's provider metadata of a call (JSON text), where version 5 keeps
# Anthropic's cache writes.
_AI_METADATA = "ai.response.providerMetadata"


def _ai_cache_writes(attrs: Mapping[str, Any]) -> int | None:
    """The tokens an AI SDK 5 call to Anthropic wrote to the cache, which it gives only
    in its provider metadata (``anthropic.cacheCreationInputTokens``)."""
    metadata = _json_parameters(attrs, _AI_METADATA, ('"cacheCreationInputTokens"',))
    anthropic = metadata.get("anthropic") if metadata is not None else None
    if not isinstance(anthropic, Mapping):
        return None
    return _int(anthropic.get("cacheCreationInputTokens"))


def _filled(
    counts: list[int | None], source: Mapping[str, Any], names: Sequence[str | None]
) -> None:
    """The counts still missing (input, output, cache read, cache write, in that order)
    read from the fields of another library's usage named in the same order (None: a
    count it does not give)."""
    for i, name in enumerate(names):
        if counts[i] is None and name is not None:
            counts[i] = _int(source.get(name))


def usage_of(attrs: Mapping[str, Any]) -> dict[str, int] | None:
    """The provider's usage of an LLM call's span; SpanError for a count that is no
    count (a text, a negative number), which would leave the step without its usage."""

    def first(*names: str) -> int | None:
        for name in names:
            raw = attrs.get(name)
            if raw is None:
                continue
            value = _int(raw)
            if value is None:
                raise SpanError(name, f"must be a whole number of tokens, not {short_repr(raw)}")
            return value
        return None

    prompt = first(
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.prompt_tokens",
        "llm.token_count.prompt",
        "ai.usage.inputTokens",
        "ai.usage.promptTokens",
    )
    output = first(
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
        "llm.token_count.completion",
        "ai.usage.outputTokens",
        "ai.usage.completionTokens",
    )
    read = first(
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "llm.token_count.prompt_details.cache_read",
        "ai.usage.inputTokenDetails.cacheReadTokens",
        "ai.usage.cachedInputTokens",
        "gen_ai.usage.details.cache_read_tokens",
        "gen_ai.usage.details.cache_read_input_tokens",
    )
    write = first(
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
        "llm.token_count.prompt_details.cache_write",
        "ai.usage.inputTokenDetails.cacheWriteTokens",
        "gen_ai.usage.cache_write_input_tokens",
        "gen_ai.usage.details.cache_write_tokens",
        "gen_ai.usage.details.cache_creation_input_tokens",
    )
    counts = [prompt, output, read, write]
    if ADK_REQUEST in attrs and None in counts[:3]:
        # ADK copies the prompt and candidates counts to gen_ai.usage.* (older versions
        # do not); the cached count is only in its response.
        names = ("prompt_token_count", "candidates_token_count", "cached_content_token_count")
        _filled(counts, _adk_usage(attrs), names)
    if (_LS_TOKEN_DETAILS in attrs or _LS_USAGE in attrs) and None in counts:
        langchain = _ls_usage(attrs)
        _filled(counts, langchain, ("input_tokens", "output_tokens"))
        details = langchain.get("input_token_details")
        if isinstance(details, Mapping):
            _filled(counts, details, (None, None, "cache_read", "cache_creation"))
    if write is None and _AI_METADATA in attrs:
        counts[3] = _ai_cache_writes(attrs)
    responses = _lf_response(attrs).get("usage") if None in counts[:3] else None
    if isinstance(responses, Mapping):
        # the Responses API's usage: its input count holds the cached tokens
        _filled(counts, responses, ("input_tokens", "output_tokens"))
        details = responses.get("input_tokens_details")
        if isinstance(details, Mapping):
            _filled(counts, details, (None, None, "cached_tokens"))
    prompt, output, read, write = counts
    usage: dict[str, int] = {}
    uncached = _int(attrs.get(_AI_UNCACHED))
    if uncached is not None:
        usage["input_tokens"] = uncached
    elif prompt is not None:
        if not _uncached_input(attrs):
            prompt = max(0, prompt - (read or 0) - (write or 0))
        usage["input_tokens"] = prompt
    if output is not None:
        usage["output_tokens"] = output
    if read is not None:
        usage["cache_read_tokens"] = read
    if write is not None:
        usage["cache_write_tokens"] = write
    if not usage and is_logfire_call(attrs):
        return _lf_usage(attrs)
    return usage or None


# Micrometer's value of a key it was given nothing for (``KeyValue.NONE_VALUE``): Spring
# AI's observation writes it as the request or response model it does not know (a
# response that names no model), which is no model's name.
_NO_MODEL = "none"


def _model(attrs: Mapping[str, Any]) -> str | None:
    for name in (
        "gen_ai.response.model",
        "gen_ai.request.model",
        "llm.model_name",
        "ai.response.model",
        "ai.model.id",
    ):
        found = _name(attrs.get(name))
        if found and found != _NO_MODEL:
            return found
    if is_logfire_call(attrs):
        return _name(_json_object(attrs, _LF_REQUEST, lenient=True).get("model")) or None
    return None


def _compacted(attrs: Mapping[str, Any]) -> bool:
    value = attrs.get(COMPACTED)
    return value is True or (isinstance(value, str) and value.lower() == "true")


def span_event_ids(request: ExportTraceServiceRequest) -> list[str]:
    """The event id every span of an export would have, read from the ids alone."""
    return [
        span_event_id(span.trace_id.hex(), span.span_id.hex())
        for resource_spans in request.resource_spans
        for scope_spans in resource_spans.scope_spans
        for span in scope_spans.spans
    ]


def span_lookup_ids(request: ExportTraceServiceRequest) -> list[str]:
    """The event ids whose being stored `decode_request` asks about: every span's own
    (`span_event_ids`), its parent's (a model call stored under it) and its markers
    (a model call stored inside it, of its session or naming none, `inner_marker_id`)."""
    out = span_event_ids(request)
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                # Its session, read from the attributes that name one alone.
                only = _SESSION_KEYS
                named = attributes(kv for kv in span.attributes if kv.key in only)
                session = session_of(_with_events(span, named, only), trace_id)
                out.append(inner_marker_id(trace_id, span_id))
                out.append(inner_marker_id(trace_id, span_id, session))
                if span.parent_span_id:
                    out.append(span_event_id(trace_id, span.parent_span_id.hex()))
    return out


def _ancestors(span_id: bytes, parents: Mapping[bytes, bytes]) -> Iterator[bytes]:
    """The spans above `span_id` in an export, nearest first (64 at most, should
    parents form a loop)."""
    for _ in range(64):
        parent = parents.get(span_id)
        if not parent:
            return
        yield parent
        span_id = parent


def _agent_around(
    span_id: bytes, parents: Mapping[bytes, bytes], agents: Mapping[bytes, str]
) -> str | None:
    """The agent a call without a name of its own ran in: the nearest span above it (in
    the same export) that names one, such as Strands' and ADK's ``invoke_agent``."""
    return next((agents[a] for a in _ancestors(span_id, parents) if a in agents), None)


def _carries_input(p: _Pending) -> bool:
    """Whether a call's span holds a context in one of the forms `_input` reads."""
    attrs = p.attrs
    if any(key in attrs for key in _INPUT_KEYS):
        return True
    if any(key.startswith((_OI_INPUT, _OI_PROMPTS, _TL_PROMPT)) for key in attrs):
        return True
    return bool(p.span.events) or "events" in attrs


_INPUT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.system_instructions",
    "ai.prompt.messages",
    ADK_REQUEST,
    PROMPT_ATTRIBUTE,
    _LF_REQUEST,
)


def _one_per_call(pending: list[_Pending], parents: Mapping[bytes, bytes]) -> list[_Pending]:
    """The calls of an export less those another instrumentation traced again.

    A model call made through a framework is often traced twice when both are
    instrumented (LangChain's and the OpenAI client's OpenInference instrumentors,
    as auto-instrumentation sets them up; ADK's ``call_llm`` around the
    ``generate_content`` span of the Gemini client): the client's span sits inside
    the framework's, and no model call can run inside another. Of such nested
    spans the outermost that holds a context is the step (the framework's names
    the session and the agent); the others are accepted and left out. When they
    come in separate exports, the one stored first is the step: a call's span stored
    under a span of an earlier export marks that span (``inner_marker_id``), and a
    model call's span inside a stored call, or marked, is left out (``decode_request``).

    A call inside another that names a session other than the outer one's is no
    second trace of it (a sub-agent's conversation run from inside a call): it is a
    step of its own session. One that names none is of the session around it.
    """
    by_span = {p.span.span_id: p for p in pending}
    dropped: set[bytes] = set()
    for p in pending:
        inner = p.span.span_id
        outer = next((a for a in _ancestors(inner, parents) if a in by_span), None)
        if outer is None or outer == inner or inner in _ancestors(outer, parents):
            continue  # inside no call (or in a loop of parents: inside nothing)
        if p.named is not None and p.named != by_span[outer].session_id:
            continue  # a call of another session
        # The inner one goes, unless only it holds the context.
        if _carries_input(by_span[outer]) or not _carries_input(p):
            dropped.add(p.span.span_id)
        else:
            dropped.add(outer)
    if not dropped:
        return pending
    return [p for p in pending if p.span.span_id not in dropped]


def decode_request(
    request: ExportTraceServiceRequest, *, stored: Container[str] = frozenset()
) -> Decoded:
    """The LLM calls of an export, its tool runs, the spans that could not be read,
    and the span count.

    Other spans are counted and left out, and so are the spans whose event id is in
    `stored` (sent again: an exporter retrying an export whose answer it lost), before
    their attributes are read.
    """
    decoded = Decoded()
    pending: list[_Pending] = []
    # Each span's parent and the agents named by spans that are no calls (an agent run
    # around its calls): read to complete the calls below.
    parents: dict[bytes, bytes] = {}
    agents: dict[bytes, str] = {}
    in_export: set[bytes] = set()
    for resource_spans in request.resource_spans:
        service = None
        for kv in resource_spans.resource.attributes:
            if kv.key == "service.name":
                service = _name(any_value(kv.value))
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                decoded.spans += 1
                in_export.add(span.span_id)
                if span.parent_span_id:
                    parents[span.span_id] = span.parent_span_id
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                if stored and span_event_id(trace_id, span_id) in stored:
                    continue
                attrs = attributes(span.attributes)
                ids_ok = len(span.trace_id) == 16 and len(span.span_id) == 8
                agent = _name(attrs.get("gen_ai.agent.name"))
                if not is_llm_call(attrs):
                    if agent:
                        agents[span.span_id] = agent
                    # Accepted whatever it is (contract); a tool span is kept when it
                    # can be told apart from others.
                    if ids_ok and is_tool_run(attrs):
                        decoded.tools.append(tool_run(span, attrs, trace_id, span_id))
                    continue
                if not ids_ok:
                    decoded.refused.append(
                        Refused(trace_id, span_id, "trace_id and span_id must be 16 and 8 bytes")
                    )
                    continue
                attrs = _with_events(span, attrs)
                named = named_session(attrs)
                session_id = named or trace_id
                if stored and (
                    inner_marker_id(trace_id, span_id) in stored
                    or inner_marker_id(trace_id, span_id, session_id) in stored
                    or (
                        span.parent_span_id
                        and span_event_id(trace_id, span.parent_span_id.hex()) in stored
                    )
                ):
                    # One call traced twice, the other span stored as a step already
                    # (`_one_per_call`, across exports): accepted, no step of its own.
                    continue
                pending.append(
                    _Pending(
                        span=span,
                        attrs=attrs,
                        trace_id=trace_id,
                        span_id=span_id,
                        session_id=session_id,
                        named=named,
                        agent=agent or service,
                    )
                )
    if len(pending) > 1:
        pending = _one_per_call(pending, parents)
    if agents:
        for p in pending:
            if _name(p.attrs.get("gen_ai.agent.name")) is None:  # none of its own
                p.agent = _agent_around(p.span.span_id, parents, agents) or p.agent
    # A session's calls in start order: each one's context is compared with the one
    # before, so only what is new gets converted and hashed.
    pending.sort(key=lambda p: (p.session_id, p.span.start_time_unix_nano, p.span_id))
    previous: dict[str, _Context] = {}
    for p in pending:
        try:
            context = _input(p, previous.get(p.session_id))
            call = LlmCall(
                trace_id=p.trace_id,
                span_id=p.span_id,
                session_id=p.session_id,
                agent=p.agent,
                start_ns=p.span.start_time_unix_nano,
                model=_model(p.attrs),
                messages=context.out,
                ids=context.ids,
                tools=_tools(p.attrs),
                usage=usage_of(p.attrs),
                output=_output(p),
                compacted=_compacted(p.attrs),
            )
            outer = p.span.parent_span_id
            if outer and outer not in in_export:
                call.inner_marker = inner_marker_id(p.trace_id, outer.hex(), p.named)
        except SpanError as exc:
            decoded.refused.append(Refused(p.trace_id, p.span_id, str(exc)))
            continue
        previous[p.session_id] = context
        decoded.calls.append(call)
    return decoded


# --- events -----------------------------------------------------------------------------


def timestamp(start_ns: int) -> str:
    return (_EPOCH + timedelta(microseconds=start_ns // 1000)).isoformat()


# Fewer messages than this found in the base are sent in full: runs cost a lookup
# of the base.
MIN_RUN = 4


def align_repeats(previous: Sequence[str], ids: Sequence[str]) -> list[str] | None:
    """`ids` (digests, a repeat's with ``.N``) with the repeats numbered as in the
    context before (`previous`, ids of the same kind); None when nothing changes.

    Numbered within one context, the N-th "continue" is ``.N`` whatever came before
    it: when the first leaves (a window that slides, a turn dropped), every later one
    takes the number of the one before it, and the inference reads rewrites, moves
    and drops where one message left. So a repeat keeps the id of the one it is in
    the context before: the messages found once in each context are landmarks, and
    between the same two landmarks the repeats of a content pair up in order. A
    repeat with no partner is new, and takes the lowest number its content has in
    neither context (an id that just left would read as the same message back).
    Messages that do not repeat keep their ids, and so does everything when no
    content repeats in either context.
    """
    if not any("." in mid for mid in ids) and not any("." in mid for mid in previous):
        return None
    was = [mid.partition(".")[0] for mid in previous]
    now = [mid.partition(".")[0] for mid in ids]
    count_was, count_now = Counter(was), Counter(now)
    repeats = {d for d, n in count_now.items() if n > 1 or count_was[d] > 1}
    if not repeats:
        return None

    def stretches(digests: list[str]) -> dict[tuple[str, str | None], list[int]]:
        # Each repeat's positions by (content, the landmark before it).
        found: dict[tuple[str, str | None], list[int]] = {}
        landmark = None
        for k, d in enumerate(digests):
            if d in repeats:
                found.setdefault((d, landmark), []).append(k)
            elif count_was[d] == 1 and count_now[d] == 1:
                landmark = d
        return found

    partners = stretches(was)
    out = list(ids)
    taken: dict[str, set[int]] = {}
    unpaired: list[int] = []
    for key, positions in stretches(now).items():
        old = partners.get(key, [])
        for n, k in enumerate(positions):
            if n < len(old):
                out[k] = previous[old[n]]
                taken.setdefault(key[0], set()).add(_repeat_number(out[k]))
            else:
                unpaired.append(k)
    held: dict[str, set[int]] = {}
    for mid, d in zip(previous, was, strict=True):
        if d in repeats:
            held.setdefault(d, set()).add(_repeat_number(mid))
    for k in sorted(unpaired):
        d = now[k]
        used = taken.setdefault(d, set())
        n = 0
        while n in used or n in held.get(d, ()):
            n += 1
        used.add(n)
        out[k] = d if n == 0 else f"{d}.{n}"
    return None if out == list(ids) else out


def _repeat_number(mid: str) -> int:
    _, dot, n = mid.partition(".")
    return int(n) if dot and n.isdigit() else 0


def step_event(
    call: LlmCall, index: int, *, base: tuple[int, Sequence[str]] | None = None
) -> dict[str, Any]:
    """The ingest step event of `call` at `index`.

    `base` is the index and message ids of the session's step just before (stored
    by the same batch or before it): the messages this context shares with it, at
    its head or after a compaction dropped some, are sent as ``$run`` elements of
    that step's context (what the server already holds). Ids are digests of the
    content, so an id found there stands for the same message.
    """
    messages: list[Any] = call.messages
    obs: dict[str, Any] = {**(call.extra or {}), "trace_id": call.trace_id, "span_id": call.span_id}
    if call.compacted:
        obs[COMPACTED] = True
    if base is not None:
        base_index, base_ids = base
        n = len(base_ids)
        if n >= MIN_RUN and call.message_ids()[:n] == base_ids:
            # The base and what was added after it, the usual call: one run. Ids are
            # unique in a context, so none of the messages after it is in the base.
            obs[BASE_KEY] = base_index
            messages = [run_element(0, n), *messages[n:]]
        else:
            where = {mid: position for position, mid in enumerate(base_ids)}
            positions = [where.get(mid) for mid in call.message_ids()]
            if sum(count for _, _, count in runs_in(positions)) >= MIN_RUN:
                obs[BASE_KEY] = base_index
                messages = encode_runs(messages, positions)
    obs["messages"] = messages
    body: dict[str, Any] = {"session_id": call.session_id, "index": index, "obs": obs}
    if call.model:
        body["model"] = call.model
    if call.tools is not None:
        body["tools"] = call.tools
    if call.usage is not None:
        body["usage"] = call.usage
    if call.output is not None:
        body["output"] = {"messages": call.output}
    return {
        "id": call.event_id,
        "type": "step",
        "timestamp": timestamp(call.start_ns),
        "body": body,
    }
