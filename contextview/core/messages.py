"""Turning raw message dicts into Messages, and hashing them.

A message sent with `id` alone stands for the latest content the session recorded
under that id; resolving it needs the session's `latest` map, which the caller
supplies (the core never looks anything up itself).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from operator import attrgetter
from typing import Any

from contextview.core.errors import NEVER_RECORDED, InputError
from contextview.core.model import Message, default_partition
from contextview.core.parts import payload
from contextview.core.runs import RUN_KEY

MAX_PARTITION_LENGTH = 64
# What the store's columns hold (cv_message.msg_id, role, tool).
MAX_ID_LENGTH = 200
MAX_ROLE_LENGTH = 32
MAX_TOOL_LENGTH = 200

# Keys with a meaning of their own; anything else an agent sends rides along in
# Message.extra so nothing it logged is lost.
_KNOWN_KEYS = frozenset({"id", "role", "content", "partition", "tool", "pinned"})

# One shared encoder: building the encoder per call costs more than encoding a
# short message. sort_keys and fixed separators make the bytes the same in every
# process, which content addressing relies on.
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def canonical_json(value: Any) -> str:
    return _CANONICAL.encode(value)


# Content is addressed by the first 16 bytes of a sha256: 128 bits leave a chance of
# about 2**-64 that two of 2**32 distinct contents of a project share an address,
# and every stored address, and both indexes over them, are half as wide.
ADDRESS_SIZE = 16


def blob_hash(value: Any, size: int = ADDRESS_SIZE) -> bytes:
    """The address of what the model reads of a message (`message_payload`): sha256,
    cut to `size` bytes, with a leading tag byte that keeps a str and anything else apart.

    Text is hashed as its UTF-8 bytes: JSON-escaping a large log first would cost
    more than the hash itself, on every message of every resent context.
    """
    if isinstance(value, str):
        digest = hashlib.sha256(b"s" + value.encode("utf-8")).digest()
    else:
        digest = hashlib.sha256(b"l" + _CANONICAL.encode(value).encode("utf-8")).digest()
    return digest[:size]


def message_payload(m: Message) -> Any:
    """What the store keeps once per distinct value: the content and the tool calls
    sent beside it (see `contextview.core.parts.payload`)."""
    if type(m.content) is str and m.extra is None:
        return m.content
    return payload(m.content, m.extra)


def message_hash(m: Message, *, blob: bytes | None = None) -> bytes:
    """The address of everything that makes a message what it is: sha256 over its
    fields and its content's address, cut to as many bytes as that address has.

    Pass `blob` when the content's address is already known (the store computes it
    to address the content), so a large content is hashed only once.
    """
    if blob is None:
        blob = blob_hash(message_payload(m))
    # A list, not a dict: positions fix the meaning and it encodes faster.
    head = [m.id, m.role, m.partition, m.tool, m.pinned, m.expirable, m.extra, blob.hex()]
    return hashlib.sha256(_CANONICAL.encode(head).encode("utf-8")).digest()[: len(blob)]


def same_message(a: Message, b: Message) -> bool:
    """Whether two messages are equal in every field (id included), not merely identical."""
    return a is b or a == b


class Overlay(Mapping[str, Message]):
    """`base` as seen by a step that has recorded more messages of its own.

    Writes go to `local` only, so the session's map is never changed by parsing.
    """

    def __init__(self, base: Mapping[str, Message]) -> None:
        self.base = base
        self.local: dict[str, Message] = {}

    def __getitem__(self, key: str) -> Message:
        found = self.local.get(key)
        return self.base[key] if found is None else found

    def get(self, key: str, default: Any = None) -> Any:
        found = self.local.get(key)
        return self.base.get(key, default) if found is None else found

    def __contains__(self, key: object) -> bool:
        return key in self.local or key in self.base

    def __iter__(self) -> Iterator[str]:
        yield from self.local
        for key in self.base:
            if key not in self.local:
                yield key

    def __len__(self) -> int:
        return len(self.local) + sum(1 for key in self.base if key not in self.local)


def parse_id(raw: Any, *, field: str) -> str:
    # Agents often number their messages; an int id means the same as its digits.
    if isinstance(raw, str):
        if not raw:
            raise InputError(field, "must not be empty")
        if len(raw) > MAX_ID_LENGTH:
            raise InputError(field, f"must be at most {MAX_ID_LENGTH} characters")
        return raw
    if isinstance(raw, int) and not isinstance(raw, bool):
        return str(raw)
    if raw is None:
        raise InputError(field, "field required")
    raise InputError(field, "must be a string")


def optional_str(
    raw: Mapping[str, Any], key: str, field: str, *, max_length: int | None = None
) -> str | None:
    value = raw.get(key)
    if value is None:
        return value
    if not isinstance(value, str):
        raise InputError(f"{field}.{key}", "must be a string")
    if max_length is not None and len(value) > max_length:
        raise InputError(f"{field}.{key}", f"must be at most {max_length} characters")
    return value


def _optional_bool(raw: Mapping[str, Any], key: str, field: str) -> bool | None:
    value = raw.get(key)
    if value is None or isinstance(value, bool):
        return value
    raise InputError(f"{field}.{key}", "must be true or false")


def _optional_partition(raw: Mapping[str, Any], field: str) -> str | None:
    value = raw.get("partition")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise InputError(f"{field}.partition", "must be a non-empty string")
    if len(value) > MAX_PARTITION_LENGTH:
        raise InputError(f"{field}.partition", f"must be at most {MAX_PARTITION_LENGTH} characters")
    return value


def _extra(raw: Mapping[str, Any], content_key: str = "content") -> dict[str, Any] | None:
    extra = {k: v for k, v in raw.items() if k not in _KNOWN_KEYS and k != content_key}
    return extra or None


def _content_key(raw: Mapping[str, Any]) -> str:
    """Where a message keeps its content: ``content``, or, in the OTel GenAI spelling
    of a message (``{"role", "parts"}``), its list of ``parts``."""
    if "content" not in raw and type(raw.get("parts")) is list:
        return "parts"
    return "content"


def sent_by_id(raw: Mapping[str, Any]) -> bool:
    """Whether a raw message came without content: it stands for what its id stands
    for in the session (as the agent may change its role, partition or mark)."""
    return _content_key(raw) not in raw


def parse_message(
    raw: Any,
    *,
    field: str,
    latest: Mapping[str, Message],
    inherit_partition: bool = False,
) -> Message:
    """One message from its raw dict.

    With `inherit_partition` (used for operation results), an absent partition is
    left as "" so that applying the operation can take it from the message the
    result replaces instead of guessing it from the role.
    """
    if type(raw) is dict and len(raw) == 1:
        # The common case by far, a message sent by id alone: the very message
        # recorded, shared rather than copied. Anything unusual takes the full path.
        mid = raw.get("id")
        if type(mid) is str:
            recorded = latest.get(mid)
            if recorded is not None:
                return recorded
    if type(raw) is Message:
        return raw  # already resolved: a message of a base context (core.runs)
    if not isinstance(raw, dict):
        raise InputError(field, "must be an object")
    if RUN_KEY in raw:
        raise InputError(
            f"{field}.{RUN_KEY}", "a run needs body.obs.$base, the step it is taken from"
        )
    mid = parse_id(raw.get("id"), field=f"{field}.id")
    role = optional_str(raw, "role", field, max_length=MAX_ROLE_LENGTH)
    partition = _optional_partition(raw, field)
    tool = optional_str(raw, "tool", field, max_length=MAX_TOOL_LENGTH)
    pinned = _optional_bool(raw, "pinned", field)

    content_key = _content_key(raw)
    recorded = None if content_key in raw else latest.get(mid)
    if recorded is None and content_key not in raw and len(raw) == 1:
        raise InputError(f"{field}.id", f"id '{mid}' {NEVER_RECORDED} for this session", 422)
    if recorded is not None:
        extra = _extra(raw)
        if extra is not None and recorded.extra is not None:
            extra = {**recorded.extra, **extra}
        return Message(
            id=mid,
            role=recorded.role if "role" not in raw else role,
            content=recorded.content,
            # A new role does not move the message: its partition stays as recorded
            # unless the reference names one.
            partition=recorded.partition if partition is None else partition,
            tool=recorded.tool if "tool" not in raw else tool,
            pinned=recorded.pinned if pinned is None else pinned,
            expirable=recorded.expirable,
            extra=recorded.extra if extra is None else extra,
        )

    # Sent with more than its id and never recorded: a message without content, such
    # as an assistant message that only calls tools (OpenAI's API takes it so).
    content = raw.get(content_key)
    # OpenAI-style assistant messages that only call tools carry `content: null`:
    # kept as null, so the message reads back as it was sent.
    if content is not None and not isinstance(content, str | list):
        raise InputError(f"{field}.content", "must be a string or a list of parts")
    if partition is None:
        partition = "" if inherit_partition else default_partition(role)
    return Message(
        id=mid,
        role=role,
        content=content,
        partition=partition,
        tool=tool,
        pinned=bool(pinned),
        extra=_extra(raw, content_key),
    )


# A message's id, as a function (to map over a context at C speed).
message_id = attrgetter("id")


def parse_message_list(
    raw: Any,
    *,
    field: str,
    latest: Mapping[str, Message],
    inherit_partition: bool = False,
    resolved: int = 0,
) -> list[Message]:
    """A context: a list of messages whose ids are unique within it. Its first
    `resolved` items are messages already (those of a base context a ``$run`` named,
    most of a resent context): taken and their ids checked at C speed."""
    if raw is None:
        raise InputError(field, "field required")
    if not isinstance(raw, list):
        raise InputError(field, "must be a list of messages")
    messages: list[Message] = raw[:resolved]
    held = set(map(message_id, messages))
    if len(held) != len(messages):
        _duplicate_raised(messages, field)
    seen: dict[str, int] = {}
    for i in range(resolved, len(raw)):
        item = raw[i]
        # A message of a base context (a `$run`) is resolved already: it skips the
        # call and the field name built for errors.
        m = (
            item
            if type(item) is Message
            else parse_message(
                item, field=f"{field}[{i}]", latest=latest, inherit_partition=inherit_partition
            )
        )
        if m.id in held:
            first = next(j for j, x in enumerate(messages) if x.id == m.id)
            raise InputError(f"{field}[{i}].id", f"duplicate id '{m.id}' (also at [{first}])")
        first = seen.setdefault(m.id, i)
        if first != i:
            raise InputError(f"{field}[{i}].id", f"duplicate id '{m.id}' (also at [{first}])")
        messages.append(m)
    return messages


def _duplicate_raised(messages: list[Message], field: str) -> None:
    """Raise for the first message whose id an earlier one has."""
    seen: dict[str, int] = {}
    for i, m in enumerate(messages):
        first = seen.setdefault(m.id, i)
        if first != i:
            raise InputError(f"{field}[{i}].id", f"duplicate id '{m.id}' (also at [{first}])")
