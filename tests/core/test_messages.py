from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from contextview.core.errors import InputError
from contextview.core.messages import (
    blob_hash,
    message_hash,
    parse_message,
    parse_message_list,
    same_message,
)
from contextview.core.model import Message
from tests.core.factories import NGINX_LOG, QUESTION, SUMMARY, msg

F = "body.obs.messages[0]"


def test_it_parses_a_full_message_and_infers_partition_from_role() -> None:
    m = parse_message(
        {"id": "tool_result_32", "role": "tool", "tool": "read_file", "content": NGINX_LOG},
        field=F,
        latest={},
    )
    assert m == Message(
        id="tool_result_32", role="tool", content=NGINX_LOG, partition="tool", tool="read_file"
    )


@pytest.mark.parametrize(
    ("role", "partition"),
    [
        ("system", "system"),
        ("tool", "tool"),
        ("assistant", "memory"),
        ("user", "question"),
        ("developer", "system"),
        ("critic", "other"),
        (None, "other"),
    ],
)
def test_it_defaults_partition_from_role(role: str | None, partition: str) -> None:
    m = parse_message({"id": "x", "role": role, "content": "hi"}, field=F, latest={})
    assert m.partition == partition


def test_it_keeps_an_explicit_partition() -> None:
    raw = {"id": "doc_3", "role": "tool", "content": "retrieved", "partition": "retrieval"}
    assert parse_message(raw, field=F, latest={}).partition == "retrieval"


def test_it_turns_an_int_id_into_a_string() -> None:
    assert parse_message({"id": 7, "content": "x"}, field=F, latest={}).id == "7"


def test_it_accepts_content_as_a_list_of_parts() -> None:
    parts = [{"type": "text", "text": QUESTION}, {"type": "image_url", "image_url": "u"}]
    m = parse_message({"id": "u1", "role": "user", "content": parts}, field=F, latest={})
    assert m.content == parts
    assert m.text == QUESTION


def test_it_keeps_unknown_keys_in_extra() -> None:
    m = parse_message(
        {"id": "t1", "role": "tool", "content": "ok", "tool_call_id": "call_9", "name": "grep"},
        field=F,
        latest={},
    )
    assert m.extra == {"tool_call_id": "call_9", "name": "grep"}
    assert parse_message({"id": "t1", "content": "ok"}, field=F, latest={}).extra is None


def test_it_resolves_a_message_sent_by_id_alone_to_the_latest_recorded() -> None:
    recorded = msg("tool_result_32", NGINX_LOG, "tool", tool="read_file")
    m = parse_message({"id": "tool_result_32"}, field=F, latest={"tool_result_32": recorded})
    assert m == recorded


def test_it_lets_an_id_alone_reference_override_recorded_fields() -> None:
    recorded = msg("u1", QUESTION, "user")
    m = parse_message(
        {"id": "u1", "pinned": True, "partition": "task"}, field=F, latest={"u1": recorded}
    )
    assert (m.content, m.role, m.pinned, m.partition) == (QUESTION, "user", True, "task")


def test_it_rejects_an_id_never_recorded_with_422() -> None:
    with pytest.raises(InputError) as e:
        parse_message({"id": "sum_1"}, field="body.obs.messages[3]", latest={})
    assert e.value.status == 422
    assert str(e.value) == "body.obs.messages[3].id: id 'sum_1' was never recorded for this session"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"id": "x", "content": 5}, f"{F}.content"),
        ({"id": "x", "content": {"text": "a"}}, f"{F}.content"),
        ({"content": "a"}, f"{F}.id"),
        ({"id": "", "content": "a"}, f"{F}.id"),
        ({"id": 1.5, "content": "a"}, f"{F}.id"),
        ({"id": "x", "content": "a", "role": 3}, f"{F}.role"),
        ({"id": "x", "content": "a", "pinned": "yes"}, f"{F}.pinned"),
        ({"id": "x", "content": "a", "partition": ""}, f"{F}.partition"),
        ({"id": "x", "content": "a", "partition": "p" * 65}, f"{F}.partition"),
        ("just text", F),
    ],
)
def test_it_rejects_malformed_messages_naming_the_field(raw: object, field: str) -> None:
    with pytest.raises(InputError) as e:
        parse_message(raw, field=F, latest={})
    assert (e.value.field, e.value.status) == (field, 400)
    assert str(e.value).startswith(f"{field}: ")


def test_it_parses_a_list_resolving_ids_alone() -> None:
    latest = {"sys": msg("sys", "You debug orders.", "system")}
    out = parse_message_list(
        [{"id": "sys"}, {"id": "u1", "role": "user", "content": QUESTION}],
        field="body.obs.messages",
        latest=latest,
    )
    assert [m.id for m in out] == ["sys", "u1"]
    assert out[0].content == "You debug orders."


def test_it_rejects_a_duplicate_id_in_a_list() -> None:
    with pytest.raises(InputError) as e:
        parse_message_list(
            [
                {"id": "sys", "content": "a"},
                {"id": "u1", "content": "b"},
                {"id": "u1", "content": "c"},
            ],
            field="body.obs.messages",
            latest={},
        )
    assert str(e.value) == "body.obs.messages[2].id: duplicate id 'u1' (also at [1])"
    assert e.value.status == 400


def test_a_message_sent_in_full_may_not_repeat_an_id_of_the_base_run_before_it() -> None:
    # A context sent against the step before it: its first messages are that step's,
    # resolved already (a `$run`), then what the agent added.
    base = [msg("sys", "You debug orders.", "system"), msg("u1", "Where is SO1?", "user")]
    with pytest.raises(InputError) as e:
        parse_message_list(
            [*base, {"id": "a1", "content": "Looking."}, {"id": "u1", "content": "again"}],
            field="body.obs.messages",
            latest={},
            resolved=2,
        )
    assert str(e.value) == "body.obs.messages[3].id: duplicate id 'u1' (also at [1])"
    with pytest.raises(InputError) as e:
        parse_message_list([*base, base[1]], field="body.obs.messages", latest={}, resolved=3)
    assert str(e.value) == "body.obs.messages[2].id: duplicate id 'u1' (also at [1])"
    taken = parse_message_list(
        [*base, {"id": "a1", "content": "Looking."}],
        field="body.obs.messages",
        latest={},
        resolved=2,
    )
    assert [m.id for m in taken] == ["sys", "u1", "a1"] and taken[0] is base[0]


@pytest.mark.parametrize("raw", [{"messages": []}, "u1", None])
def test_it_rejects_an_obs_that_is_not_a_list(raw: object) -> None:
    with pytest.raises(InputError) as e:
        parse_message_list(raw, field="body.obs.messages", latest={})
    assert (e.value.field, e.value.status) == ("body.obs.messages", 400)


def test_it_hashes_content_stably_and_keeps_text_and_lists_apart() -> None:
    text = "订单 SO20260101007"
    assert blob_hash(text) == hashlib.sha256(("s" + text).encode()).digest()[:16]
    assert blob_hash(text, 32) == hashlib.sha256(("s" + text).encode()).digest()
    assert blob_hash("订单 SO20260101007") != blob_hash("订单 SO20260101008")
    assert blob_hash([{"type": "text", "text": "a"}]) == blob_hash([{"text": "a", "type": "text"}])
    assert blob_hash("a") != blob_hash(["a"])


def test_it_hashes_every_field_of_a_message() -> None:
    base = msg("sum_1", SUMMARY, "tool", tool="read_file", extra={"name": "x"})
    assert message_hash(base) == message_hash(replace(base))
    for changed in [
        replace(base, id="sum_2"),
        replace(base, role="assistant"),
        replace(base, partition="memory"),
        replace(base, tool=None),
        replace(base, pinned=True),
        replace(base, expirable=True),
        replace(base, extra=None),
        replace(base, content=SUMMARY + "."),
    ]:
        assert message_hash(changed) != message_hash(base)


def test_it_reuses_a_known_blob_hash() -> None:
    m = msg("tool_result_32", NGINX_LOG, "tool")
    assert message_hash(m, blob=blob_hash(m.content)) == message_hash(m)


def test_addresses_are_16_bytes_and_a_full_content_digest_gives_a_full_message_one() -> None:
    m = msg("tool_result_32", NGINX_LOG, "tool")
    assert len(blob_hash(m.content)) == len(message_hash(m)) == 16
    # The width the store used before: the migration rewrites addresses both ways.
    full = message_hash(m, blob=blob_hash(m.content, 32))
    assert len(full) == 32 and full[:16] != message_hash(m)


def test_it_hashes_the_same_in_another_process() -> None:
    m = msg("u1", QUESTION, "user", extra={"b": 1, "a": [True, None]})
    code = (
        "from contextview.core.messages import message_hash\n"
        "from contextview.core.model import Message\n"
        f"m = Message(id='u1', role='user', content={QUESTION!r}, partition='question',"
        " extra={'a': [True, None], 'b': 1})\n"
        "print(message_hash(m).hex())\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
        env={"PYTHONHASHSEED": "12345", "PYTHONPATH": str(root)},
    )
    assert out.stdout.strip() == message_hash(m).hex()


def test_it_compares_messages_by_every_field() -> None:
    a = msg("u1", QUESTION, "user")
    assert same_message(a, msg("u1", QUESTION, "user"))
    assert not same_message(a, replace(a, pinned=True))
    assert not same_message(a, replace(a, id="u2"))


def test_it_keeps_null_content_as_sent_and_reads_the_tool_calls() -> None:
    # An OpenAI-style assistant turn that only calls a tool has `content: null`.
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    message = parse_message(
        {"id": "a1", "role": "assistant", "content": None, "tool_calls": [call]},
        field=F,
        latest={},
    )
    assert message.content is None
    assert message.extra == {"tool_calls": [call]}
    assert message.text == "ls\n{}"


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"id": "a", "role": "r" * 33, "content": "x"}, "role"),
        ({"id": "a" * 201, "content": "x"}, "id"),
        ({"id": "a", "role": "tool", "tool": "t" * 201, "content": "x"}, "tool"),
    ],
)
def test_it_refuses_values_longer_than_the_store_keeps(raw: dict[str, Any], where: str) -> None:
    with pytest.raises(InputError) as e:
        parse_message(raw, field=F, latest={})
    assert e.value.field == f"{F}.{where}"
    assert "at most" in str(e.value)


def test_it_keeps_an_unknown_role_as_sent() -> None:
    m = parse_message({"id": "c", "role": "critic", "content": "Too long."}, field=F, latest={})
    assert (m.role, m.partition) == ("critic", "other")
