"""How a step row keeps what was sent (``contextview.sessions.step_storage``): the read
API gives back the same values, key for key, as when they were kept as sent."""

from __future__ import annotations

import json
from importlib import import_module
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection
from hypothesis import given
from hypothesis import strategies as st

from contextview.core.refs import decode_refs
from contextview.sessions import step_storage
from contextview.sessions.models import Blob, Step
from tests.api_client import Api, results, signed_in, step

migration = import_module("contextview.sessions.migrations.0012_step_compact_columns")

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"
SYSTEM = {"id": "sys", "role": "system", "content": "You debug orders."}
QUESTION = {"id": "q", "role": "user", "content": "Why does SO20260101007 time out?"}
REPLY = "Looking at the inventory service logs."


def _as_kept(value: Any) -> str:
    """The JSON text the read API gave of `value` when it was kept as jsonb."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb::text", [json.dumps(value)])
        return json.dumps(json.loads(cursor.fetchone()[0]))


def _call(index: int, messages: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
    event = step("call", index, messages, **body)
    event["body"]["obs"].update(trace_id=TRACE, span_id=f"{index:016x}")
    return event


def _steps(api: Api, session: str = "call") -> list[dict[str, Any]]:
    count = Step.objects.filter(session__external_id=session).count()
    return [api.get(f"/sessions/{session}/steps/{i}").json() for i in range(count)]


def _row(session: str, index: int) -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT output::text, output_blobs, obs_extra::text, span_ids, after_refs, usage, "
            "body_hash FROM cv_step s JOIN cv_session c ON c.id = s.session_id "
            "WHERE c.external_id = %s AND s.index = %s",
            [session, index],
        )
        names = [c.name for c in cursor.description]
        return dict(zip(names, cursor.fetchone(), strict=True))


def test_it_keeps_a_reply_as_the_blob_of_the_message_it_becomes(api: Api) -> None:
    usage = {"output_tokens": 80, "input_tokens": 2970}
    reply = {"messages": [{"content": REPLY, "role": "assistant"}]}
    answer = {"id": "a0", "role": "assistant", "content": REPLY}
    batch = [
        _call(0, [SYSTEM, QUESTION], output=reply, usage=usage),
        _call(1, [SYSTEM, QUESTION, answer], usage={"input_tokens": 3030}),
    ]
    assert [r["status"] for r in results(api.ingest({"batch": batch}))] == [201, 201]

    first, second = _steps(api)
    assert json.dumps(first["output"]) == _as_kept(reply)
    assert json.dumps(first["usage"]) == _as_kept(usage)
    assert json.dumps(first["obs_extra"]) == _as_kept({"trace_id": TRACE, "span_id": f"{0:016x}"})
    assert second["output"] is None and second["usage"] == {"input_tokens": 3030}
    assert first["reported"]["before_tokens"] == 2970

    # The reply's text is one blob, which the next call's message shares.
    assert Blob.objects.filter(text=REPLY).count() == 1
    assert Blob.objects.count() == 3
    stored = _row("call", 0)
    assert stored["output"] is None
    assert decode_refs(bytes(stored["output_blobs"])) == [Blob.objects.get(text=REPLY).pk]
    assert stored["obs_extra"] is None and len(stored["span_ids"]) == 24
    assert stored["after_refs"] is None and len(stored["body_hash"]) == 16
    assert len(stored["usage"]) == 4  # which counts, then 2970 and 80 as varints


def test_it_gives_back_unusual_replies_usage_and_obs_fields_as_sent(api: Api) -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]
    outputs = [
        {"messages": [{"role": "assistant", "content": "", "tool_calls": calls}]},
        {"messages": [{"role": "model", "content": "a"}, {"role": "assistant", "content": "b"}]},
        {"messages": [{"role": "assistant", "content": [{"type": "text", "text": "parts"}]}]},
        {"messages": [{"role": "assistant", "content": "x"}], "finish": "stop"},
        {"messages": []},
    ]
    usages = [
        {"input_tokens": 5, "prompt_tokens_details": {"cached_tokens": 2}},
        {"input_tokens": 2**62, "cache_read_tokens": 0, "cache_write_tokens": 7},
        {"input_tokens": 1, "cost": 0.25},
        {},
        {"output_tokens": 0},
    ]
    obs = [
        {"trace_id": TRACE.upper(), "span_id": SPAN},
        {"trace_id": TRACE, "span_id": SPAN, "used_tokens": 10, "b": [1.5]},
        {"trace_id": TRACE},
        {"trace_id": 1, "span_id": SPAN},
        {"span_id": SPAN, "trace_id": TRACE, "z": None},
    ]
    batch = []
    for i, (output, usage, extra) in enumerate(zip(outputs, usages, obs, strict=True)):
        event = step("odd", i, [SYSTEM, {"id": f"m{i}", "role": "user", "content": f"{i}"}])
        event["body"].update(output=output, usage=usage)
        event["body"]["obs"].update(extra)
        batch.append(event)
    assert {r["status"] for r in results(api.ingest({"batch": batch}))} == {201}

    got = _steps(api, "odd")
    assert [json.dumps(s["output"]) for s in got] == [_as_kept(o) for o in outputs]
    assert [json.dumps(s["usage"]) for s in got] == [_as_kept(u) for u in usages]
    assert [json.dumps(s["obs_extra"]) for s in got] == [_as_kept(o) for o in obs]
    assert [_row("odd", i)["span_ids"] is not None for i in range(5)] == [0, 1, 0, 0, 1]


def test_it_shows_the_reply_on_the_step_page(api: Api) -> None:
    reply = {"messages": [{"role": "assistant", "content": REPLY}]}
    results(api.ingest({"batch": [_call(0, [SYSTEM, QUESTION], output=reply)]}))
    step_row = Step.objects.get(session__external_id="call")
    page = signed_in(api).get(f"/sessions/{step_row.session_id}/steps/0/")
    assert page.status_code == 200
    assert "Model output: 1 message" in page.content.decode()
    assert REPLY in page.content.decode()


def test_it_converts_stored_rows_both_ways(api: Api) -> None:
    reply = {"messages": [{"role": "assistant", "content": REPLY}]}
    framed = {"messages": [{"role": "assistant", "content": "y", "name": "bot"}]}
    batch = [
        _call(0, [SYSTEM, QUESTION], output=reply, usage={"input_tokens": 9, "output_tokens": 1}),
        _call(1, [SYSTEM], output=framed, usage={"input_tokens": 1, "cost": 0.5}),
    ]
    results(api.ingest({"batch": batch}))
    shown = json.dumps(_steps(api))
    compact = [_row("call", i) for i in range(2)]
    editor = SimpleNamespace(connection=connection)

    migration.expand_rows(None, editor)
    expanded = _row("call", 0)
    assert json.loads(expanded["output"]) == reply and expanded["output_blobs"] is None
    assert json.loads(expanded["obs_extra"]) == {"trace_id": TRACE, "span_id": f"{0:016x}"}
    assert expanded["span_ids"] is None and expanded["after_refs"] is not None
    assert json.loads(bytes(expanded["usage"])) == {"input_tokens": 9, "output_tokens": 1}
    assert json.loads(_row("call", 1)["output"]) == framed
    assert json.dumps(_steps(api)) == shown
    migration.expand_rows(None, editor)  # a second time changes nothing
    assert _row("call", 0) == expanded

    migration.compact_rows(None, editor)
    assert [_row("call", i) for i in range(2)] == compact
    migration.compact_rows(None, editor)
    assert [_row("call", i) for i in range(2)] == compact
    assert json.dumps(_steps(api)) == shown


_text = st.text(max_size=8)
_json = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), _text),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)),
    max_leaves=8,
)
_message = st.one_of(
    st.fixed_dictionaries({"role": st.just("assistant"), "content": _text}),
    st.dictionaries(st.sampled_from(["role", "content", "name", "tool_calls"]), _json),
)


@given(
    st.fixed_dictionaries({"messages": st.lists(_message, max_size=3)}, optional={"finish": _json})
)
def test_it_splits_and_joins_any_output(output: dict[str, Any]) -> None:
    sent = step_storage.jsonb_value(output)  # as read back from jsonb
    split = step_storage.output_split(sent)
    if split is None:
        return
    rest, texts = split
    assert all(isinstance(t, str) for t in texts)
    assert json.dumps(step_storage.output_joined(rest, texts)) == json.dumps(sent)


# The contract's counts as jsonb orders them: shortest name first.
_JSONB_ORDER = ["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"]


@given(st.dictionaries(st.sampled_from(step_storage.USAGE_NAMES), st.integers(0, 2**63 - 1)))
def test_it_packs_the_contract_usage_in_a_few_bytes(usage: dict[str, int]) -> None:
    packed = step_storage.usage_packed(usage)
    assert packed is not None and len(packed) <= 1 + 10 * len(usage)
    unpacked = step_storage.usage_unpacked(packed)
    assert unpacked == usage and list(unpacked) == [n for n in _JSONB_ORDER if n in usage]


@pytest.mark.parametrize(
    "usage", [{"input_tokens": True}, {"input_tokens": -1}, {"input_tokens": 1.0}, {"x": 1}]
)
def test_it_keeps_other_usage_as_text(usage: dict[str, Any]) -> None:
    assert step_storage.usage_packed(usage) is None
    assert step_storage.usage_unpacked(step_storage.usage_text(usage)) == usage
