"""The step view of messages as real agents send them: tool calls, results, thinking, images."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from django.test import Client

from contextview.sessions.models import Session
from tests.api_client import step

CALL = {
    "id": "call_7",
    "type": "function",
    "function": {"name": "read_file", "arguments": '{"path": "/var/log/inventory.log"}'},
}
NEXT_CALL = {"id": "call_8", "type": "function", "function": {"name": "list_dir"}}
CONTEXT = [
    {"id": "sys", "role": "system", "content": "You debug orders."},
    {"id": "u1", "role": "user", "content": "Why does order SO20260101007 time out?"},
    {"id": "a1", "role": "assistant", "content": None, "tool_calls": [CALL]},
    {"id": "t1", "role": "tool", "tool_call_id": "call_7", "content": "status 504 after 3 s"},
    {
        "id": "a2",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Inventory locks for 3002 ms.", "signature": "s"},
            {"type": "tool_use", "id": "toolu_2", "name": "grep", "input": {"q": "lock wait"}},
        ],
    },
    {
        "id": "t2",
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "lock wait 3002 ms"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}},
        ],
    },
]


def _cell(page: str, message_id: str) -> str:
    """The HTML of one message's cell on the right (after) side."""
    match = re.search(
        rf'<div class="cell right[^"]*"[^>]*id="m-{message_id}">(.*?)</div>\s*\n\s*'
        r'(?:<div class="row-label"|</div>)',
        page,
        re.S,
    )
    assert match, message_id
    return match.group(1)


def test_it_shows_tool_calls_thinking_tool_results_and_image_placeholders(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    session = seed([step("parts", 0, CONTEXT)])
    page = login("viewer").get(f"/sessions/{session.pk}/steps/0/").content.decode()

    openai_call = html.unescape(_cell(page, "a1"))
    assert "tool call" in openai_call and "read_file" in openai_call
    assert "<dt>path</dt>" in openai_call and "/var/log/inventory.log" in openai_call
    tokens = int(re.search(r"([\d,]+) tok", openai_call).group(1).replace(",", ""))
    assert tokens > 10  # no longer an empty box with 0 tokens

    assert "for call_7" in _cell(page, "t1")  # the OpenAI tool message names its call

    anthropic = html.unescape(_cell(page, "a2"))
    assert "thinking" in anthropic and "Inventory locks for 3002 ms." in anthropic
    assert "grep" in anthropic and "<dt>q</dt>" in anthropic and "lock wait" in anthropic

    result = html.unescape(_cell(page, "t2"))
    assert "tool result" in result and "for toolu_2" in result and "lock wait 3002 ms" in result
    assert 'role="img"' in result and "image/png" in result
    assert "data:" not in result  # the image itself is never put in the page


def test_a_tool_calls_arguments_show_by_name_with_their_text_as_written(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    # A Write call carries the whole file in one JSON string: shown as JSON, its lines
    # were one run of \n and \" escapes.
    source = 'import { test } from "vitest"\n\ntest("adds", () => {\n  expect(1 + 1).toBe(2)\n})\n'
    write = {"type": "tool_use", "id": "toolu_9", "name": "Write",
             "input": {"file_path": "/repo/test/add.test.js", "content": source,
                       "options": {"mode": "create", "backup": False}}}  # fmt: skip
    odd = {"type": "tool_use", "id": "toolu_10", "name": "Bash", "input": "ls -la"}
    context = [{"id": "a9", "role": "assistant", "content": [write, odd]}]
    session = seed([step("write", 0, context)])
    page = login("viewer").get(f"/sessions/{session.pk}/steps/0/").content.decode()
    cell = html.unescape(_cell(page, "a9"))
    assert "<dt>file_path</dt>" in cell and "/repo/test/add.test.js" in cell
    assert "<dt>content</dt>" in cell and 'test("adds", () => {\n  expect(1 + 1)' in cell
    assert "\\n" not in cell and '\\"' not in cell
    assert "<dt>options</dt>" in cell and '{"mode": "create", "backup": false}' in cell
    # Arguments that are no JSON object are shown as they are.
    assert "ls -la" in cell


def test_it_shows_the_calls_model_tools_usage_and_estimated_tokens(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    usage = {"input_tokens": 120, "cache_read_tokens": 900, "cache_write_tokens": 0}
    start = {"id": "start", "type": "session",
             "body": {"session_id": "call", "context_window": 128000}}  # fmt: skip
    output = {"messages": [{"role": "assistant", "content": None, "tool_calls": [NEXT_CALL]}]}
    call = step("call", 0, CONTEXT, model="gpt-4o-mini", tools=tools, usage=usage, output=output)
    session = seed([start, call])
    page = html.unescape(login("viewer").get(f"/sessions/{session.pk}/steps/0/").content.decode())
    assert "Model gpt-4o-mini" in page
    session_page = login("editor").get(f"/sessions/{session.pk}/").content.decode()
    assert re.search(r"<dt>Context window</dt><dd>128,000 tokens</dd>", session_page)
    assert "tool definitions" in page
    assert "input_tokens 120" in page
    # The provider's count, on the context the call was made with (it only grew after).
    assert re.search(
        r"<th>Before</th>.*?<td class=\"num\">1,020 <span[^>]*>provider</span>", page, re.S
    )
    assert "estimated by rule for images" in page
    shown = page[page.index("Model output: 1 message") :]
    assert "call_8" in shown and "list_dir" in shown


def test_a_calls_usage_marks_thousands_as_the_other_counts_do(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    usage = {"input_tokens": 3, "cache_read_tokens": 21445, "cache_write_tokens": 21155,
             "service_tier": "standard"}  # fmt: skip
    session = seed([step("usage", 0, CONTEXT, model="claude-sonnet-4-5", usage=usage)])
    page = login("viewer").get(f"/sessions/{session.pk}/steps/0/").content.decode()
    facts = page[page.index('class="call-facts') :]
    facts = facts[: facts.index("</p>")]
    assert "cache_read_tokens 21,445, cache_write_tokens 21,155" in facts
    assert "input_tokens 3," in facts and "service_tier standard" in facts
