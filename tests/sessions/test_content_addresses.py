"""Content and messages are addressed by 16 bytes of sha256; migration 0009 rewrites
stored addresses to that width and back, and a context resent afterwards is found."""

from __future__ import annotations

import hashlib
from importlib import import_module
from types import SimpleNamespace

from django.db import connection

from contextview.sessions.models import Blob, Message
from tests.api_client import Api, results, step
from tests.ingest.test_real_agent_messages import (
    ANTHROPIC_CALL,
    ANTHROPIC_RESULT,
    DEVELOPER,
    OPENAI_CALL,
    OPENAI_RESULT,
    OTEL_CALL,
    QUESTION,
    SCREENSHOT,
    SYSTEM,
    TOOLS,
)

readdress = import_module("contextview.sessions.migrations.0009_content_addresses_16_bytes")
CONTEXT = [
    SYSTEM,
    DEVELOPER,
    QUESTION,
    OPENAI_CALL,
    OPENAI_RESULT,
    ANTHROPIC_CALL,
    ANTHROPIC_RESULT,
    OTEL_CALL,
    SCREENSHOT,
]


def _addresses() -> tuple[dict[int, bytes], dict[int, bytes]]:
    return (
        {pk: bytes(h) for pk, h in Blob.objects.values_list("pk", "hash")},
        {pk: bytes(h) for pk, h in Message.objects.values_list("pk", "hash")},
    )


def _run(size: int) -> None:
    readdress._readdress(size)(None, SimpleNamespace(connection=connection))


def test_stored_addresses_go_to_32_bytes_and_back_and_a_resend_stores_nothing(api: Api) -> None:
    first = step("addr", 0, CONTEXT, tools=TOOLS)
    assert results(api.ingest({"batch": [first]}))[0]["status"] == 201
    blobs, messages = _addresses()
    assert len(blobs) == len(CONTEXT) + 1 and len(messages) == len(CONTEXT)
    assert {len(h) for h in [*blobs.values(), *messages.values()]} == {16}

    _run(32)
    wide_blobs, wide_messages = _addresses()
    assert {len(h) for h in [*wide_blobs.values(), *wide_messages.values()]} == {32}
    question = Blob.objects.get(text=QUESTION["content"])
    assert bytes(question.hash) == hashlib.sha256(b"s" + QUESTION["content"].encode()).digest()

    _run(16)
    assert _addresses() == (blobs, messages)
    again = step(
        "addr", 1, [*CONTEXT, {"id": "u3", "role": "user", "content": "And now?"}], tools=TOOLS
    )
    assert results(api.ingest({"batch": [again]}))[0]["status"] == 201
    assert Blob.objects.count() == len(blobs) + 1
    assert Message.objects.count() == len(messages) + 1
