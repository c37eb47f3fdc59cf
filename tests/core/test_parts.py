"""What the model reads of a message, in every provider's spelling (contract v1.1)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextview.core.messages import blob_hash, message_payload, parse_message
from contextview.core.model import Message
from contextview.core.parts import (
    FILE_TOKENS,
    IMAGE_TOKENS,
    IMAGE_TOKENS_MAX,
    argument_fields,
    blocks,
    has_compaction,
    payload,
    reading,
    split_payload,
    tool_calls,
)
from contextview.core.tokens import TokenCounter

F = "body.obs.messages[0]"


def parsed(raw: dict[str, Any]) -> Message:
    return parse_message(raw, field=F, latest={})


def test_it_reads_an_openai_assistant_message_that_only_calls_tools() -> None:
    m = parsed(
        {
            "id": "a1",
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "app/orders.py"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "grep", "arguments": '{"q": "SO20260101007"}'},
                },
            ],
        }
    )
    assert m.text == 'read_file\n{"path": "app/orders.py"}\ngrep\n{"q": "SO20260101007"}'
    assert [c["name"] for c in tool_calls(m.content, m.extra)] == ["read_file", "grep"]
    assert TokenCounter().count_readings([m.reading]) == [TokenCounter().count(m.text)]
    assert TokenCounter().count(m.text) > 10


def test_it_reads_an_openai_tool_message_as_its_content() -> None:
    m = parsed({"id": "t1", "role": "tool", "tool_call_id": "call_1", "content": "504 after 3s"})
    assert m.text == "504 after 3s"
    assert m.partition == "tool"
    assert m.extra == {"tool_call_id": "call_1"}


def test_it_reads_openai_content_parts_and_a_refusal() -> None:
    content = [
        {"type": "text", "text": "Look at this:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "refusal", "refusal": "I can't share that."},
    ]
    r = reading(content)
    assert r.text == "Look at this:\nI can't share that."
    assert (r.estimated_tokens, r.estimated_parts) == (IMAGE_TOKENS, 1)
    assert blocks(content)[1].kind == "image"
    assert blocks(content)[1].media_type == "image/png"


def test_it_reads_anthropic_tool_use_thinking_and_tool_result_blocks() -> None:
    assistant = [
        {"type": "thinking", "thinking": "The log says 504; check inventory.", "signature": "x"},
        {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"},
        {"type": "text", "text": "Reading the log."},
        {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "/var/log"}},
    ]
    assert reading(assistant).text == (
        'The log says 504; check inventory.\nReading the log.\nread_file\n{"path": "/var/log"}'
    )
    assert [b.kind for b in blocks(assistant)] == ["thinking", "thinking", "text", "tool_call"]
    assert blocks(assistant)[3].name == "read_file"

    result = [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [
                {"type": "text", "text": "status 504 from inventory-svc"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg"}},
            ],
        }
    ]
    r = reading(result)
    assert r.text == "status 504 from inventory-svc"
    assert r.estimated_tokens == IMAGE_TOKENS
    block = blocks(result)[0]
    assert (block.kind, block.ref, block.text) == (
        "tool_result",
        "toolu_1",
        "status 504 from inventory-svc",
    )
    # A tool result whose content is a plain string.
    assert reading([{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]).text == "ok"


def test_it_reads_otel_genai_parts() -> None:
    parts = [
        {"type": "text", "content": "Weather in Paris?"},
        {"type": "reasoning", "content": "Need the weather tool."},
        {"type": "tool_call", "id": "c1", "name": "get_weather", "arguments": {"city": "Paris"}},
        {"type": "tool_call_response", "id": "c1", "response": {"temp_c": 21}},
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": "iVBO"},
        {"type": "uri", "modality": "image", "mime_type": "image/png", "uri": "https://x/y.png"},
        {"type": "file", "mime_type": "application/pdf", "file_id": "f1"},
    ]
    r = reading(parts)
    assert r.text == (
        'Weather in Paris?\nNeed the weather tool.\nget_weather\n{"city": "Paris"}\n{"temp_c": 21}'
    )
    assert (r.estimated_tokens, r.estimated_parts) == (2 * IMAGE_TOKENS + FILE_TOKENS, 3)
    assert [b.kind for b in blocks(parts)] == [
        "text",
        "thinking",
        "tool_call",
        "tool_result",
        "image",
        "image",
        "file",
    ]
    assert blocks(parts)[6].media_type == "application/pdf"


def test_it_reads_the_contract_spelling_and_compaction_parts() -> None:
    parts = [
        {"type": "compaction", "summary": "Earlier: order SO20260101007 timed out (504)."},
        {"type": "tool_call", "id": "c9", "name": "ls", "arguments": "{}"},
        {"type": "tool_result", "tool_call_id": "c9", "content": "a.py b.py"},
        {"type": "image", "media_type": "image/png", "url": "https://x/y.png"},
        {"type": "file", "media_type": "application/pdf", "data": "JVBERi0="},
    ]
    r = reading(parts)
    assert r.text == "Earlier: order SO20260101007 timed out (504).\nls\n{}\na.py b.py"
    assert r.estimated_tokens == IMAGE_TOKENS + FILE_TOKENS
    assert blocks(parts)[0].kind == "compaction"
    assert has_compaction(parts) and not has_compaction(parts[1:]) and not has_compaction("x")
    assert blocks(parts)[3].media_type == "image/png"


def test_it_reads_openai_responses_items() -> None:
    items = [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan: grep."}]},
        {"type": "function_call", "call_id": "fc1", "name": "grep", "arguments": '{"q":"x"}'},
        {"type": "function_call_output", "call_id": "fc1", "output": "3 hits"},
        {"type": "input_text", "text": "thanks"},
    ]
    assert reading(items).text == 'Plan: grep.\ngrep\n{"q":"x"}\n3 hits\nthanks'


def test_it_reads_the_responses_apis_own_tools_as_calls() -> None:
    # Codex's shell and the web search name no tool: the kind does, the action is
    # what was asked. Their items name the call by call_id, beside an id of their own.
    shell = {
        "type": "local_shell_call",
        "id": "lsh_1",
        "call_id": "call_9",
        "status": "completed",
        "action": {"type": "exec", "command": ["bash", "-lc", "cat /var/log/SO20260101007.log"]},
    }
    search = {"type": "web_search_call", "id": "ws_1", "action": {"query": "nginx 504"}}
    text = reading([shell, search]).text
    assert text.startswith("local_shell\n") and "SO20260101007.log" in text
    assert "web_search\n" in text and "nginx 504" in text
    # An image the model made is read back as an image, counted by the rule.
    made = {"type": "image_generation_call", "id": "ig_1", "result": "iVBORw0KGgo="}
    assert reading([made]).estimated_tokens == IMAGE_TOKENS
    assert "iVBOR" not in reading([made]).text
    assert [b.kind for b in blocks([made])] == ["image"]
    assert [(c["id"], c["name"]) for c in tool_calls([shell, search])] == [
        ("call_9", "local_shell"),
        ("ws_1", "web_search"),
    ]


def test_it_reads_the_tools_anthropic_runs_itself() -> None:
    search = {
        "type": "server_tool_use",
        "id": "srv_1",
        "name": "web_search",
        "input": {"query": "SO20260101007 carrier delay"},
    }
    found = {
        "type": "web_search_tool_result",
        "tool_use_id": "srv_1",
        "content": [
            {
                "type": "web_search_result",
                "title": "Carrier delays in March",
                "url": "https://example.com/delays",
                "encrypted_content": "EqgfCioIARgB",
            }
        ],
    }
    ran = {
        "type": "code_execution_tool_result",
        "tool_use_id": "srv_2",
        "content": {
            "type": "code_execution_result",
            "stdout": "42 rows",
            "stderr": "",
            "return_code": 0,
        },
    }
    mcp = {
        "type": "mcp_tool_use",
        "id": "mcp_1",
        "name": "get_ticket",
        "server_name": "jira",
        "input": {"key": "OPS-4411"},
    }
    text = reading([search, found, ran, mcp]).text
    assert "Carrier delays in March" in text and "https://example.com/delays" in text
    assert "42 rows" in text and "OPS-4411" in text
    assert "EqgfCioIARgB" not in text
    assert [b.kind for b in blocks([found, ran])] == ["tool_result", "tool_result"]
    assert [c["name"] for c in tool_calls([search, mcp])] == ["web_search", "get_ticket"]


def test_it_counts_an_image_from_its_dimensions_when_given() -> None:
    small = {"type": "image", "width": 300, "height": 200, "source": {"media_type": "image/png"}}
    assert reading([small]).estimated_tokens == 80  # ceil(300 * 200 / 750)
    huge = {"type": "image", "source": {"width": 4000, "height": 3000}}
    assert reading([huge]).estimated_tokens == IMAGE_TOKENS_MAX


@pytest.mark.parametrize(
    ("width", "height", "tokens"),
    [
        (300.0, 200.0, 80),  # a JSON number with a decimal point is a dimension too
        (10**12, 10**12, IMAGE_TOKENS_MAX),
        (1e300, 1e300, IMAGE_TOKENS_MAX),  # a float product past the largest float
        (10**300, 10**300, IMAGE_TOKENS_MAX),  # 1e300 as PostgreSQL gives it back
        (10**400, 2.5, IMAGE_TOKENS_MAX),  # an integer past the largest float, with a float
        (1e-300, 1e-300, 1),
        (math.inf, 300, IMAGE_TOKENS_MAX),
        (-300, 200, IMAGE_TOKENS),  # no size: counted as an image without dimensions
        (0, 200, IMAGE_TOKENS),
        (math.nan, 200, IMAGE_TOKENS),
        (True, 200, IMAGE_TOKENS),
    ],
    ids=lambda value: repr(value)[:12],
)
def test_it_counts_an_image_of_any_dimensions_by_the_rule(
    width: Any, height: Any, tokens: int
) -> None:
    image = {"type": "image", "width": width, "height": height}
    assert reading([image]).estimated_tokens == tokens


def test_it_counts_a_document_sent_as_text_as_its_text() -> None:
    doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hi"}}
    assert reading([doc]) == reading("hi")


def test_it_keeps_unknown_parts_and_reads_only_their_text() -> None:
    parts = [{"type": "audio_transcript", "text": "hello"}, {"type": "cursor", "pos": 3}]
    assert reading(parts).text == "hello"
    assert blocks(parts)[1].kind == "other"


@pytest.mark.parametrize(
    "content",
    [
        "plain",
        [{"type": "text", "text": "a"}],
        None,
    ],
)
def test_it_stores_tool_calls_with_the_content_and_gives_both_back(content: Any) -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]
    value = payload(content, {"tool_calls": calls, "name": "bot"})
    assert split_payload(value) == (content, {"tool_calls": calls})
    # Without tool calls a content is its own payload, as before.
    if content is not None:
        assert payload(content, {"name": "bot"}) == content


def test_it_addresses_a_message_by_its_tool_calls_too() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    other = {**call, "function": {"name": "ls", "arguments": '{"all": true}'}}
    a = parsed({"id": "a", "role": "assistant", "content": None, "tool_calls": [call]})
    b = parsed({"id": "a", "role": "assistant", "content": None, "tool_calls": [other]})
    assert blob_hash(message_payload(a)) != blob_hash(message_payload(b))


def test_it_counts_an_empty_tool_call_message_as_more_than_nothing() -> None:
    m = parsed(
        {
            "id": "a1",
            "role": "assistant",
            "content": "",
            "function_call": {"name": "lookup", "arguments": '{"id": "A12345"}'},
        }
    )
    assert "A12345" in m.text
    assert [b.kind for b in blocks(m.content, m.extra)] == ["tool_call"]


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8), _containers, max_leaves=8
)
_TYPES = ["text", "thinking", "reasoning", "tool_use", "tool_call", "function_call",
          "tool_result", "tool_call_response", "image", "image_url", "blob", "file",
          "document", "compaction", "refusal", "redacted_thinking", "unknown"]  # fmt: skip
_FIELDS = ["text", "content", "thinking", "name", "arguments", "input", "function", "id",
           "response", "output", "summary", "source", "image_url", "width", "height",
           "mime_type", "modality", "refusal"]  # fmt: skip
_typed = st.fixed_dictionaries(
    {"type": st.sampled_from(_TYPES)}, optional={name: _json for name in _FIELDS}
)
_parts = st.lists(_typed | _json, max_size=4)
_contents = st.none() | st.text(max_size=20) | _parts
_extras = st.none() | st.dictionaries(
    st.sampled_from(["tool_calls", "function_call", "name", "tool_call_id"]), _json, max_size=3
)


@given(content=_contents, extra=_extras)
def test_it_gives_back_content_and_tool_calls_from_what_it_stores(
    content: Any, extra: dict[str, Any] | None
) -> None:
    carried = {k: v for k, v in (extra or {}).items() if k in ("tool_calls", "function_call")}
    assert split_payload(payload(content, extra)) == (content, carried)
    reading(content, extra)  # any JSON reads without an error
    blocks(content, extra)


def test_a_message_works_out_what_the_model_reads_of_it_once() -> None:
    # A walk asks a message of its text at every step that holds it; a tool call's
    # text is its arguments written out as JSON, which is worth doing once.
    call = Message(
        id="a1",
        role="assistant",
        content=[
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "/srv/app.py"}},
        ],
        partition="messages",
    )
    assert call.reading is call.reading
    assert call.text == 'Looking.\nRead\n{"path": "/srv/app.py"}'
    # What it kept is no part of what the message is.
    fresh = Message(id="a1", role="assistant", content=call.content, partition="messages")
    assert fresh == call and repr(fresh) == repr(call)


def test_argument_fields_names_each_argument_and_keeps_strings_as_written() -> None:
    nested = {"paths": [f"src/module_{k}.py" for k in range(8)]}
    text = json.dumps({"command": "cd /repo &&\npytest -q", "timeout": 60, "opts": nested})
    fields = dict(argument_fields(text))
    assert fields["command"] == "cd /repo &&\npytest -q"
    assert fields["timeout"] == "60"
    # A long nested value is indented, a line each.
    assert fields["opts"].startswith('{\n  "paths": [\n    "src/module_0.py",')
    for shown_as_is in ["[REDACTED_ARGUMENTS len=182]", '["a", "b"]', "{}", ""]:
        assert argument_fields(shown_as_is) == ()
