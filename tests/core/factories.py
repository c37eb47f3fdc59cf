"""Messages and contexts for the core tests, with content taken from the seeds."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from contextview.core.model import Message, default_partition

SYSTEM = "You debug orders. Answer in a table."
QUESTION = "Why does order SO20260101007 time out? My member id is A12345."
NGINX_LOG = "\n".join(
    [
        '10.0.3.7 - - [01/Jan/2026:10:23:11 +0800] "GET /api/orders/SO20260101007 HTTP/1.1" 200',
        '10.0.3.7 - - [01/Jan/2026:10:23:14 +0800] "POST /api/inventory/lock HTTP/1.1" 504',
        "upstream timed out (110: Connection timed out) while reading response header, "
        'upstream: "http://inventory:8080/lock", request_time=3.002',
    ]
)
SUMMARY = "504 from inventory after 3s on /api/inventory/lock for SO20260101007"


def msg(mid: str, content: Any = "", role: str | None = "user", **kw: Any) -> Message:
    kw.setdefault("partition", default_partition(role))
    return Message(id=mid, role=role, content=content, **kw)


def seed_context() -> list[Message]:
    """The context of the contract's example step, before its summarize."""
    return [
        msg("sys", SYSTEM, "system"),
        msg("u1", QUESTION, "user"),
        msg("tool_result_32", NGINX_LOG, "tool", tool="read_file"),
        msg("a1", "The inventory service answers 504 after 3 s.", "assistant"),
    ]


def raw(m: Message) -> dict[str, Any]:
    """The message as an agent would send it."""
    out: dict[str, Any] = {"id": m.id, "role": m.role, "content": m.content}
    if m.partition != default_partition(m.role):
        out["partition"] = m.partition
    if m.tool is not None:
        out["tool"] = m.tool
    if m.pinned:
        out["pinned"] = True
    return out


_WORDS = [
    "order",
    "SO20260101007",
    "member",
    "A12345",
    "nginx",
    "504",
    "timeout",
    "3s",
    "inventory",
    "订单",
    "超时",
    "日志",
    "错误码",
    "tool_result_32",
    ",",
    ".",
    "\n",
]

texts = st.lists(st.sampled_from(_WORDS), max_size=12).map(lambda ws: " ".join(ws))
roles = st.sampled_from(["system", "user", "assistant", "tool", None])


@st.composite
def contexts(draw: st.DrawFn, min_size: int = 0, max_size: int = 8) -> list[Message]:
    ids = draw(
        st.lists(
            st.sampled_from([f"m{k}" for k in range(20)] + ["sys", "u1", "tool_result_32"]),
            min_size=min_size,
            max_size=max_size,
            unique=True,
        )
    )
    return [msg(mid, draw(texts), draw(roles), pinned=draw(st.booleans())) for mid in ids]


# The contract's example action (its ingest example, step evt-2).
CONTRACT_ACTION = {
    "action": "summarize",
    "target": "tool_result_32",
    "reason": "log body is normal; keep error code and timeout",
    "params": {"max_tokens": 400},
    "result": {"id": "sum_1", "role": "tool", "content": "504 from inventory after 3s"},
}
