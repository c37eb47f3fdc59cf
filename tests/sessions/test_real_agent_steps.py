"""A step as a real agent sends it (contract v1.1), end to end: a real gunicorn, broker
and worker, read back through the read API over HTTP."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from contextview.core.tokens import TokenCounter
from tests.api_client import Api, step
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

TOOLS = [
    {
        "name": "Bash",
        "description": "Run a shell command on the order service's host.",
        "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]
CONTEXT = [
    {"id": "sys", "role": "system", "content": "You are a coding agent."},
    {"id": "dev", "role": "developer", "content": "Prefer small diffs."},
    {
        "id": "u1",
        "role": "user",
        "content": [
            {"type": "text", "text": "Checkout fails with 504; screenshot attached."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png"}},
        ],
    },
    {
        "id": "a1",
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Look at the inventory logs.", "signature": "s"},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "tail"}},
        ],
    },
    {
        "id": "t1",
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "lock 3002 ms"}],
    },
]


def _http(base: str, key: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base}/api/v1{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_it_serves_a_real_agents_step_with_its_call_and_statistics(
    api: Api, gunicorn_api: str, celery_worker_process: Any
) -> None:
    key = api.issued.secret
    usage = {"input_tokens": 12, "cache_read_tokens": 2000, "cache_write_tokens": 300}
    output = {"messages": [{"role": "assistant", "content": [{"type": "text", "text": "Done."}]}]}
    events = [
        {"id": "s", "type": "session",
         "body": {"session_id": "cc", "encoding": "cl100k_base", "context_window": 200000}},
        step("cc", 0, CONTEXT, model="claude-sonnet-4", tools=TOOLS, usage=usage, output=output),
        {"id": "end", "type": "session_end", "body": {"session_id": "cc", "status": "unknown"}},
    ]  # fmt: skip
    answer = _http(gunicorn_api, key, "POST", "/ingest", {"batch": events})
    assert [r["status"] for r in answer["results"]] == [201, 201, 201]

    wait_for(lambda: _http(gunicorn_api, key, "GET", "/sessions/cc/steps/0")["stats"] is not None)
    got = _http(gunicorn_api, key, "GET", "/sessions/cc/steps/0")
    assert [m["content"] for m in got["before"]] == [m["content"] for m in CONTEXT]
    assert got["before"][1]["partition"] == "system"
    assert (got["model"], got["tools"], got["usage"], got["output"]) == (
        "claude-sonnet-4",
        TOOLS,
        usage,
        output,
    )
    assert got["reported"]["before_tokens"] == 2312

    stats = got["stats"]
    counter = TokenCounter()
    tools = counter.count(json.dumps(TOOLS, ensure_ascii=False))
    assert stats["partitions"]["tools"]["before"] == tools
    assert got["before"][3]["tokens"] == counter.count(
        'Look at the inventory logs.\nBash\n{"command": "tail"}'
    )
    assert stats["tokens"]["before"] == sum(m["tokens"] for m in got["before"]) + tools
    # With provider usage, occupancy is the provider's count against the window: what
    # the call really held, the system prompt and schemas the log never shows included.
    assert stats["unseen_tokens"] == 2312 - stats["tokens"]["before"]
    assert stats["occupancy"]["before"] == 2312 / 200000
    assert stats["estimated"] is True
    assert _http(gunicorn_api, key, "GET", "/sessions/cc")["status"] == "unknown"
