"""How a step row keeps what the agent sent, in fewer bytes than the JSON it came as.

Pure functions (no Django); the ingest service writes what ``*_split`` gives, the
selectors read back what ``*_joined`` gives: the same values as sent, key for key
in the order PostgreSQL's jsonb gives an object's keys (shortest first, then
bytewise), as they were read before these forms existed.

- An OTLP call's ``trace_id`` and ``span_id`` (32 and 16 lowercase hex digits) are
  kept as their 24 bytes (``span_ids``), not as two JSON strings in ``obs_extra``.
- The model's reply is mostly text that comes back as a message of the next call's
  context: the text of each output message is kept once in the content-addressed
  blob store, where that message's content goes too, and the step names the blobs
  (``output_blobs``). What is left of the output (``output``) is NULL when it is
  the usual ``{"messages": [{"role": "assistant", "content": ...}, ...]}``.
- Usage in the contract's names (``usage``) is a byte saying which counts it has,
  then those counts as varints; other usage, as the JSON text jsonb gives of it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from contextview.core.refs import varint_append, varint_read

TRACE_ID = "trace_id"
SPAN_ID = "span_id"
_TRACE_HEX = re.compile(r"[0-9a-f]{32}")
_SPAN_HEX = re.compile(r"[0-9a-f]{16}")
_REPLY_ROLE = "assistant"


def jsonb_order(value: dict[str, Any]) -> dict[str, Any]:
    """`value`'s keys in the order jsonb keeps an object's keys: shortest (in UTF-8
    bytes) first, then bytewise."""
    keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))
    return {k: value[k] for k in keys}


def span_ids_split(obs_extra: dict[str, Any] | None) -> tuple[dict[str, Any] | None, bytes | None]:
    """`obs_extra` without a trace and span id in OTLP's form, and those ids as bytes
    (trace then span; None when they are not both in that form)."""
    if not obs_extra:
        return obs_extra, None
    trace, span = obs_extra.get(TRACE_ID), obs_extra.get(SPAN_ID)
    if not (
        isinstance(trace, str)
        and isinstance(span, str)
        and _TRACE_HEX.fullmatch(trace)
        and _SPAN_HEX.fullmatch(span)
    ):
        return obs_extra, None
    rest = {k: v for k, v in obs_extra.items() if k not in (TRACE_ID, SPAN_ID)}
    return rest or None, bytes.fromhex(trace + span)


def span_ids_joined(
    obs_extra: dict[str, Any] | None, span_ids: bytes | None
) -> dict[str, Any] | None:
    """The obs fields as sent, from what ``span_ids_split`` gave."""
    if span_ids is None:
        return obs_extra
    ids = bytes(span_ids)
    return jsonb_order({**(obs_extra or {}), TRACE_ID: ids[:16].hex(), SPAN_ID: ids[16:].hex()})


def span_id_of(span_ids: bytes | None) -> str | None:
    return None if span_ids is None else bytes(span_ids)[16:].hex()


def output_split(output: dict[str, Any] | None) -> tuple[dict[str, Any] | None, list[str]] | None:
    """The output without the text content of its messages, and those texts in order;
    None when some message has no text content (the output is then kept whole).
    The rest is None when it is the usual reply: messages of the assistant alone."""
    if output is None:
        return None
    messages = output.get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    texts: list[str] = []
    frames: list[dict[str, Any]] = []
    usual = len(output) == 1
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("content"), str):
            return None
        texts.append(m["content"])
        frame = {k: v for k, v in m.items() if k != "content"}
        usual = usual and frame == {"role": _REPLY_ROLE}
        frames.append(frame)
    if usual:
        return None, texts
    return {**output, "messages": frames}, texts


def output_joined(rest: dict[str, Any] | None, texts: list[str]) -> dict[str, Any]:
    """The output as sent, from what ``output_split`` gave."""
    if rest is None:
        return {"messages": [{"role": _REPLY_ROLE, "content": text} for text in texts]}
    frames = rest["messages"]
    if len(frames) != len(texts):
        raise ValueError(f"{len(texts)} texts for {len(frames)} output messages")
    messages = [jsonb_order({**f, "content": t}) for f, t in zip(frames, texts, strict=True)]
    return {**rest, "messages": messages}


# The contract's usage counts, in the order of the flag bits that say which are given.
USAGE_NAMES = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
_USAGE_BITS = {name: 1 << i for i, name in enumerate(USAGE_NAMES)}
# A packed usage starts with its flags (below this), a JSON text with "{".
_FLAGS_END = 1 << len(USAGE_NAMES)


def usage_packed(usage: dict[str, Any]) -> bytes | None:
    """`usage` packed, when it holds only the contract's counts (else None)."""
    flags = 0
    for name, value in usage.items():
        bit = _USAGE_BITS.get(name)
        if bit is None or type(value) is not int or not 0 <= value < 1 << 63:
            return None
        flags |= bit
    out = bytearray([flags])
    for name in USAGE_NAMES:
        if name in usage:
            varint_append(out, usage[name])
    return bytes(out)


def usage_unpacked(stored: bytes | memoryview | None) -> dict[str, Any] | None:
    """The usage as sent, from its stored form."""
    if stored is None:
        return None
    data = bytes(stored)
    if data[0] >= _FLAGS_END:
        sent: dict[str, Any] = json.loads(data)
        return sent
    flags, pos = data[0], 1
    usage: dict[str, Any] = {}
    for name in USAGE_NAMES:
        if flags & _USAGE_BITS[name]:
            usage[name], pos = varint_read(data, pos)
    return jsonb_order(usage)


def usage_text(usage: dict[str, Any]) -> bytes:
    """Usage that cannot be packed, as JSON text with its keys in jsonb's order (the
    ingest service has PostgreSQL write it, as jsonb would give it back)."""
    return json.dumps(jsonb_value(usage)).encode()


def jsonb_value(value: Any) -> Any:
    """`value` with the keys of every object in it in jsonb's order."""
    if isinstance(value, dict):
        return {k: jsonb_value(v) for k, v in jsonb_order(value).items()}
    if isinstance(value, list):
        return [jsonb_value(v) for v in value]
    return value


def output_parts(output: dict[str, Any] | None) -> list[Any]:
    """A reply as the sequence of what it said: each message's parts in order (a
    string content one part), each with its message's id and role. A reply still
    streaming in says a beginning of what the finished one says."""
    messages = (output or {}).get("messages")
    found: list[Any] = []
    for m in messages if isinstance(messages, list) else ():
        if not isinstance(m, dict):
            found.append(m)
            continue
        head = (m.get("id"), m.get("role"))
        content = m.get("content")
        for part in content if isinstance(content, list) else [content]:
            found.append((head, part))
    return found
