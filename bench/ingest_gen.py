"""Deterministic long agent sessions for the ingest benchmark.

A generated session starts with a system prompt and a task, then every step
adds an assistant message, a tool result (1-4 KB of log lines or JSON) and now
and then a user message (messages of 100-400 bytes). The context grows to
`max_context` messages; whenever the observed context reaches that size the
agent compacts it, alternately summarizing the oldest dozen messages and
dropping the oldest tool results, so it stays near `max_context` for the rest
of the session. Every step resends its whole context: with `by_id=True`
messages already recorded go by id alone (what the SDK does), with
`by_id=False` every message goes with its full content every time.

Pure: no I/O, the same arguments always give the same events.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from contextview.core.runs import BASE_KEY, run_element

Event = dict[str, Any]
Message = dict[str, Any]

GEN_START = datetime(2026, 11, 30, 0, 0, tzinfo=UTC)

_WORDS = (
    "order inventory reservation timeout upstream gateway checkout retry latency pool "
    "connection index query customer parcel carrier tracking warehouse refund voucher "
    "schema migration deploy rollback replica shard cache eviction budget summary context "
    "token window error status payment address exception ticket escalation service pod "
    "metric alert threshold queue worker backlog span trace request response header"
).split()
_LEVELS = ("INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG")
_SERVICES = ("inventory-svc", "order-svc", "payment-svc", "gateway", "search-svc", "cart-svc")


def _sentence(rng: random.Random, low: int, high: int) -> str:
    target = rng.randint(low, high)
    words: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(_WORDS)
        if rng.random() < 0.08:
            word = f"SO2026{rng.randint(10**6, 10**7 - 1)}"
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:target].rstrip() + "."


def _log_text(rng: random.Random, target: int, step: int) -> str:
    """Log lines up to `target` bytes (whole lines only)."""
    lines: list[str] = []
    size = 0
    second = rng.randint(0, 80_000)
    while True:
        second += rng.randint(0, 3)
        clock = f"{second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        line = (
            f"2026-01-{1 + step % 28:02d}T{clock}.{rng.randint(0, 999):03d}Z "
            f"{rng.choice(_LEVELS):5} [{rng.choice(_SERVICES)}] "
            f"req={rng.getrandbits(40):010x} {_sentence(rng, 40, 120)} "
            f"took={rng.randint(1, 4000)}ms"
        )
        if size + len(line) + 1 > target:
            return "\n".join(lines)
        lines.append(line)
        size += len(line) + 1


def _json_text(rng: random.Random, target: int) -> str:
    """A JSON query answer of at most `target` bytes (whole rows only)."""
    rows: list[dict[str, Any]] = []
    text = json.dumps({"code": 0, "data": {"total": 0, "list": rows}})
    while True:
        rows.append(
            {
                "id": f"SO2026{rng.randint(10**6, 10**7 - 1)}",
                "status": rng.choice(("shipped", "pending", "exception", "closed")),
                "amount": round(rng.uniform(5, 3000), 2),
                "sku": f"SKU-{rng.randint(10000, 99999)}",
                "note": _sentence(rng, 20, 80),
            }
        )
        longer = json.dumps({"code": 0, "data": {"total": len(rows), "list": rows}})
        if len(longer) > target:
            rows.pop()
            return text
        text = longer


def _tool_result(rng: random.Random, step: int) -> str:
    """1-4 KB: a target in [1300, 4096] and whole lines or rows up to it."""
    target = rng.randint(1300, 4096)
    return _log_text(rng, target, step) if rng.random() < 0.6 else _json_text(rng, target)


def session_event(
    session_id: str, *, seed: int = 0, by_id: bool = True, start: datetime = GEN_START
) -> Event:
    return {
        "id": f"{session_id}-session",
        "type": "session",
        "timestamp": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "body": {
            "session_id": session_id,
            "agent": "bench-agent",
            "model": "gpt-4o",
            "encoding": "cl100k_base",
            "mode": "summary",
            "budget": {"max_tokens": 128000, "reserved_tokens": 8000},
            "metadata": {"generator": "bench.ingest_gen", "seed": seed, "by_id": by_id},
        },
    }


def long_session(
    session_id: str,
    steps: int = 1000,
    max_context: int = 200,
    seed: int = 0,
    *,
    by_id: bool = True,
    runs: bool = False,
    start: datetime = GEN_START,
) -> Iterator[Event]:
    """Yield `steps` step events of one session, step index 0 upwards.

    With `runs`, each step after the first sends the previous step's after context
    as one run (the ``$base`` extension, what the SDK sends) and its new messages.
    """
    if max_context < 20:
        raise ValueError("max_context must be at least 20")
    rng = random.Random(f"{session_id}:{seed}")
    context: list[Message] = [
        {
            "id": "sys",
            "role": "system",
            "content": "You are an operations agent. " + _sentence(rng, 400, 700),
        },
        {"id": "task", "role": "user", "content": "Task: " + _sentence(rng, 200, 400)},
    ]
    recorded: set[str] = set()
    compactions = 0
    for index in range(steps):
        room = max_context - len(context)
        new: list[Message] = []
        if rng.random() < 0.3:
            new.append({"id": f"u{index}", "role": "user", "content": _sentence(rng, 100, 400)})
        new.append({"id": f"a{index}", "role": "assistant", "content": _sentence(rng, 100, 400)})
        new.append(
            {
                "id": f"t{index}",
                "role": "tool",
                "tool": rng.choice(("read_file", "grep", "http_get", "sql_query")),
                "content": _tool_result(rng, index),
            }
        )
        new = new[-room:] if room > 0 else []
        obs = context + new

        ops: list[dict[str, Any]] = []
        after = obs
        if len(obs) >= max_context:
            compactions += 1
            movable = obs[2:]
            if compactions % 2:
                targets = [m["id"] for m in movable[:12]]
                result = {
                    "id": f"sum{index}",
                    "role": "assistant",
                    "content": f"Summary of {len(targets)} messages: " + _sentence(rng, 300, 600),
                }
                ops.append(
                    {
                        "action": "summarize",
                        "targets": targets,
                        "reason": "context at its message cap",
                        "result": result,
                    }
                )
                first = obs.index(movable[0])
                after = obs[:first] + [result] + [m for m in obs[first:] if m["id"] not in targets]
            else:
                targets = [m["id"] for m in movable if m["role"] == "tool"][:10]
                ops.append(
                    {
                        "action": "drop",
                        "targets": targets,
                        "reason": "oldest tool results are stale",
                    }
                )
                after = [m for m in obs if m["id"] not in targets]
        else:
            ops.append({"action": "keep", "target": new[-1]["id"] if new else "task"})

        wire: list[Any] = []
        obs_fields: dict[str, Any] = {}
        if runs and index and context:
            # This context is the last step's after (`context`) and what is new.
            wire = [run_element(0, len(context)), *new]
            obs_fields[BASE_KEY] = index - 1
        else:
            for message in obs:
                if by_id and message["id"] in recorded:
                    wire.append({"id": message["id"]})
                else:
                    wire.append(message)
        recorded.update(m["id"] for m in obs)
        recorded.update(op["result"]["id"] for op in ops if "result" in op)

        before_bytes = sum(len(m["content"]) for m in obs)
        after_bytes = sum(len(m["content"]) for m in after)
        body: dict[str, Any] = {
            "session_id": session_id,
            "index": index,
            "obs": {"messages": wire, **obs_fields},
            "before_tokens": before_bytes // 4,
            "after_tokens": after_bytes // 4,
        }
        if len(ops) == 1:
            body["action"] = ops[0]
        else:
            body["actions"] = ops
        context = after
        yield {
            "id": f"{session_id}-s{index:05d}",
            "type": "step",
            "timestamp": (start + timedelta(seconds=7 * (index + 1))).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            ),
            "body": body,
        }


def _contents(event: Event) -> Iterator[Any]:
    body = event.get("body", {})
    for message in body.get("obs", {}).get("messages", []):
        if "content" in message:
            yield message["content"]
    ops = body.get("actions") or ([body["action"]] if "action" in body else [])
    for op in ops:
        result = op.get("result")
        if isinstance(result, dict) and "content" in result:
            yield result["content"]


def distinct_content_bytes(events: Iterable[Event]) -> int:
    """Total UTF-8 bytes of the distinct message contents the events carry."""
    seen: set[str] = set()
    total = 0
    for event in events:
        for content in _contents(event):
            text = content if isinstance(content, str) else json.dumps(content, sort_keys=True)
            if text not in seen:
                seen.add(text)
                total += len(text.encode())
    return total
