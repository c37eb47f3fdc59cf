"""Demo sessions, one or more per seed style, as lists of contract events.

Every function is pure and deterministic: the same `session_id` and `start` give
the same events, so posting a demo twice is idempotent (the server answers
`duplicate`), and a new prefix gives a fresh copy.

What each session is built to show (the flags the server should raise):

- `cm-order-timeout` (seed 000): a ContextManager debugging a checkout timeout.
  A lossy summary of the nginx error log (`entity_loss`), two greps in a row
  (`repeated_tool_call`), a dropped pod log reloaded two steps later and the lossy
  summary's original reloaded (`reload_regret`), one step whose own counts are
  off (`token_estimate_off`), occupancy past 70% before compaction.
- `mode-customer-chat` (seed 001): a 20-turn chat in sliding then summary mode;
  the window drops turn 1 with the member id and the table preference
  (`pinned_missing`), and at turn 20 the assistant cannot answer.
- `mode-hybrid-warranty` (seed 001): the same customer in rag/hybrid mode with
  retrieval messages, `pin`, `expire`, `reorder`; the pinned texts survive.
- `builder-orders` (seed 002): a ContextBuilder with partition budgets; a raw
  128-order JSON shaped into a 1-line summary (`ratio_aggressive`,
  `entity_loss`), one step past 90% (`over_90`, `partition_over`), then forced
  degradation in the order tool → memory → retrieval.
- `edit-research` (seed 003): an external manager's edit lists on a multi-hop
  research trajectory: a rewrite, merges, a deletion, an empty list, and a merge
  that loses the opening date 20 October 1973 (`entity_loss`), after which the
  agent answers wrongly; counts under-reported (`token_estimate_off`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from contextview.demo import fixtures
from contextview.demo.recorder import (
    DEMO_START,
    Event,
    Message,
    SessionRecorder,
    apply_operation,
    context_tokens,
    message_text,
    msg,
)

# ------------------------------------------------------------------ seed 000


def cm_order_timeout(
    session_id: str = "cm-order-timeout", start: datetime = DEMO_START
) -> list[Event]:
    """Seed 000: ContextManager with observe/step/execute on an order-timeout hunt."""
    max_tokens = 8000
    rec = SessionRecorder(session_id, start)
    rec.session(
        agent="order-debug-bot",
        model="gpt-4o-mini",
        encoding="cl100k_base",
        mode="summary",
        budget={"max_tokens": max_tokens, "reserved_tokens": 800},
        metadata={
            "task": f"order {fixtures.INCIDENT_ORDER} times out at checkout",
            "manager": "ContextManager (summarize/drop/reload)",
            "seed": "000",
        },
    )
    summary_index: list[dict[str, Any]] = []
    action_log: list[dict[str, Any]] = []

    def step(
        new: list[Message],
        action: dict[str, Any],
        reason: str,
        skew: tuple[float, float] = (1.0, 1.0),
        seconds: float = 25,
    ) -> None:
        # observe(): what seed 000's ContextManager logs next to each action.
        used = round(rec.tokens_with(new) * skew[0])
        obs_fields = {
            "summary_index": copy.deepcopy(summary_index),
            "used_tokens": used,
            "max_tokens": max_tokens,
            "last_actions": copy.deepcopy(action_log[-5:]),
        }
        event = rec.step(
            new,
            [action],
            mode="summary",
            reason=f"{reason} (used_tokens {used}/{max_tokens})",
            obs_fields=obs_fields,
            skew=skew,
            seconds=seconds,
        )
        action_log.append({k: action[k] for k in ("action", "target", "params") if k in action})
        if action["action"] == "summarize":
            summary_index.append(
                {
                    "target": action["target"],
                    "summary": action["result"]["content"],
                    "time": event["timestamp"],
                }
            )

    access_log, tally = fixtures.nginx_access_log()
    timeouts = tally["timeouts"]
    step(
        [
            msg(
                "sys",
                "system",
                "You are a debugging assistant for the shop platform. Use the tools read_file, "
                "grep, kubectl_logs and http_get. Quote error codes, timeouts, order ids and "
                "file paths exactly; say which log a fact comes from.",
            ),
            msg(
                "u1",
                "user",
                f"订单 {fixtures.INCIDENT_ORDER} 结账一直超时, 用户看到 504。Order "
                f"{fixtures.INCIDENT_ORDER} keeps timing out at checkout (customers get a 504). "
                "Find out why; start with the nginx logs on the gateway.",
            ),
        ],
        {"action": "keep", "target": "u1", "reason": "task statement", "params": {}},
        reason="context small, nothing to compact",
        seconds=0,
    )
    step(
        [
            msg(
                "a1",
                "assistant",
                "I'll read the tail of the gateway access log around the reported time "
                '(10:20-10:30 CST). read_file(path="/var/log/nginx/access.log", tail=60)',
            ),
            msg(
                "tool_result_12",
                "tool",
                "$ tail -n 60 /var/log/nginx/access.log\n" + access_log,
                tool="read_file",
            ),
        ],
        {
            "action": "keep",
            "target": "tool_result_12",
            "reason": "need it to find the window",
            "params": {},
        },
        reason="over 70%, but the raw log is needed once to locate the failure window",
    )
    incident = timeouts.get(fixtures.INCIDENT_ORDER, 0)
    others = ", ".join(
        f"{order} ×{count}"
        for order, count in sorted(timeouts.items())
        if order != fixtures.INCIDENT_ORDER
    )
    step(
        [
            msg(
                "a2",
                "assistant",
                "The checkout 504s start after 10:22 and all have urt≈3.000, so nginx gave up "
                'on the upstream. Checking the error log. grep(pattern="upstream timed out", '
                'path="/var/log/nginx/error.log", line_numbers=true)',
            ),
            msg(
                "tool_result_18",
                "tool",
                '$ grep -n "upstream timed out" /var/log/nginx/error.log\n'
                + fixtures.nginx_error_grep(),
                tool="grep",
            ),
        ],
        {
            "action": "summarize",
            "target": "tool_result_12",
            "reason": "access log body is normal traffic; keep the 504 lines, timings and source",
            "params": {"max_tokens": 400, "keep_first": True, "keep_last": True},
            "result": msg(
                "sum_1",
                "tool",
                f"[summary of tool_result_12: /var/log/nginx/access.log, {tally['lines']} lines, "
                f"{tally['first']} to {tally['last']}] {tally['total_504']} × 504 on POST "
                f"/api/v1/orders/<id>/checkout, all with urt=3.000-3.004 s (upstream "
                f"{fixtures.UPSTREAM} and 10.42.3.56:8081): {fixtures.INCIDENT_ORDER} ×{incident}"
                f", {others}. Before 10:22 checkouts return 200 in 0.18-0.94 s; "
                "product, cart and /healthz requests are all 200.",
                tool="read_file",
            ),
        },
        reason="over max_tokens: compact the largest tool result",
    )
    step(
        [
            msg(
                "a3",
                "assistant",
                "Every timeout is on upstream inventory_svc, /v2/reservations. Looking for the "
                'timeout configured for it. grep(pattern="inventory", '
                'path="/etc/nginx/conf.d/", recursive=true, line_numbers=true)',
            ),
            msg(
                "tool_result_21",
                "tool",
                "$ grep -rn inventory /etc/nginx/conf.d/\n" + fixtures.NGINX_CONF_GREP,
                tool="grep",
            ),
        ],
        {
            "action": "summarize",
            "target": "tool_result_18",
            "reason": "log body is repetitive; keep error code and timeout",
            "params": {"max_tokens": 120},
            # The lossy one: no order id, no upstream address, no "110", no 3 s.
            "result": msg(
                "sum_2",
                "tool",
                "[summary of tool_result_18] " + fixtures.LOSSY_ERROR_SUMMARY,
                tool="grep",
            ),
        },
        reason="raw tool results dominate the context",
        skew=(1.32, 1.45),
    )
    step(
        [
            msg(
                "a4",
                "assistant",
                "nginx gives inventory_svc proxy_read_timeout 3s with proxy_next_upstream off, "
                "so any reservation slower than 3 s becomes a 504. Reading the inventory-svc "
                'logs. kubectl_logs(deployment="inventory-svc", namespace="shop", '
                'since="15m")',
            ),
            msg(
                "tool_result_25",
                "tool",
                "$ kubectl logs deploy/inventory-svc -n shop --since=15m\n"
                + fixtures.inventory_pod_logs(),
                tool="kubectl_logs",
            ),
        ],
        {"action": "keep", "target": "tool_result_25", "reason": "fresh evidence", "params": {}},
        reason="under 70%",
    )
    step(
        [
            msg(
                "a5",
                "assistant",
                "inventory-svc reservations take 3050-3600 ms and wait 2900 ms for a "
                "connection: HikariPool-1 is exhausted (total=20, active=20, idle=0). The slow "
                "query is the UPDATE on stock_reservations examining 1,184,302 rows. Checking "
                'pool metrics. http_get(url="http://prometheus.monitoring:9090/api/v1/'
                'query_range?query=hikaricp_connections_active{app=\\"inventory-svc\\"}")',
            ),
            msg("tool_result_29", "tool", fixtures.prometheus_pool_query(), tool="http_get"),
        ],
        {
            "action": "drop",
            "target": "tool_result_25",
            "reason": "pod log already digested in a5; free budget for the metrics",
            "params": {"archive": "tool_result_25_raw"},
        },
        reason="keep room for the metrics query",
    )
    step(
        [
            msg(
                "a6",
                "assistant",
                "Both pods sit at 20/20 active connections with 18-41 pending from 02:20Z on. "
                "Reading the service's datasource config. read_file(path=\"services/inventory/"
                'src/main/resources/application.yaml")',
            ),
            msg("tool_result_31", "tool", fixtures.INVENTORY_APPLICATION_YAML, tool="read_file"),
        ],
        {
            "action": "summarize",
            "target": "tool_result_29",
            "reason": "metric series are regular; keep levels and the change point",
            "params": {"max_tokens": 200},
            "result": msg(
                "sum_3",
                "tool",
                "[summary of tool_result_29: Prometheus query_range, 02:15Z-02:30Z] "
                'hikaricp_connections_active{app="inventory-svc", pool="HikariPool-1"} is '
                "20 (the maximum) on inventory-svc-7c9f6d8b5-2lqxw and -x8k4m from 02:20Z; "
                "hikaricp_connections_pending 18-41 from 02:20Z, 0 before. Before 02:20Z, 6-14 "
                "active.",
                tool="http_get",
            ),
        },
        reason="metric series are regular: keep levels only",
    )
    step(
        [
            msg(
                "u2",
                "user",
                f"For the incident ticket I need the exact inventory-svc log line for "
                f"{fixtures.INCIDENT_ORDER}'s reservation, and the exact nginx error line.",
            )
        ],
        {
            "action": "reload",
            "target": "tool_result_25",
            "reason": "the user wants the verbatim pod log line; the drop was premature",
            "params": {"from": "tool_result_25_raw"},
        },
        reason="user asked for raw evidence",
        seconds=140,
    )
    step(
        [
            msg(
                "a8",
                "assistant",
                f"sum_2 does not mention {fixtures.INCIDENT_ORDER}, the upstream address or the "
                "error code, so I can't quote the nginx line from it. Reloading the original "
                "error log.",
            )
        ],
        {
            "action": "reload",
            "target": "tool_result_18",
            "reason": "summary sum_2 lost the order id, the upstream URL and error 110",
            "params": {},
        },
        reason="summary lost key facts",
    )
    step(
        [
            msg(
                "a9",
                "assistant",
                "Root cause: checkout is reserve-first; nginx routes POST "
                f"/api/v1/orders/<id>/checkout to inventory_svc /v2/reservations with "
                "proxy_read_timeout 3s (/etc/nginx/conf.d/api.conf:42). Since 02:20Z (10:20 CST) "
                "inventory-svc's HikariPool-1 is exhausted (20/20 active, up to 41 waiting): "
                "the reservation UPDATE on stock_reservations scans 1,184,302 rows because the "
                "(sku_id, warehouse_id, state) index was dropped by migration "
                "V87__split_reservations.sql (INV-412). Reservations take 3050-3600 ms, so "
                f"nginx returns 504 (error 110, upstream timed out) for {fixtures.INCIDENT_ORDER}"
                " and other orders.\nFix: recreate the index; short term raise "
                "maximum-pool-size to 40 and keep connection-timeout below the 3 s proxy "
                "timeout; make /v2/reservations idempotent so proxy_next_upstream can retry.",
            )
        ],
        {"action": "keep", "target": "a9", "reason": "final answer", "params": {}},
        reason="answer given",
        seconds=90,
    )
    rec.end("succeeded", 0.7)
    return rec.events


# ------------------------------------------------------------------ seed 001


def _present(messages: list[Message], texts: list[str]) -> list[str]:
    joined = "\n".join(message_text(m) for m in messages)
    return [t for t in texts if t in joined]


def mode_customer_chat(
    session_id: str = "mode-customer-chat", start: datetime = DEMO_START
) -> list[Event]:
    """Seed 001: sliding then summary mode; the member id slides out of the window."""
    window_turns, recent_keep = 6, 2
    rec = SessionRecorder(session_id, start)
    rec.session(
        agent="support-bot",
        model="gpt-4o",
        encoding="cl100k_base",
        mode="sliding",
        budget={"max_tokens": 8000, "reserved_tokens": 1000},
        pinned=fixtures.PINNED,
        metadata={"channel": "web chat", "customer": "Lin Wei", "seed": "001"},
    )
    summaries = {13: ("summary_1", 7, 11), 16: ("summary_2", 12, 14), 19: ("summary_3", 15, 17)}
    current_summary: str | None = None
    for turn, (user, assistant) in enumerate(fixtures.CHAT_TURNS, 1):
        mode = "sliding" if turn <= 12 else "summary"
        new = [msg(f"u{turn}", "user", user), msg(f"a{turn}", "assistant", assistant)]
        if turn == 1:
            new.insert(0, msg("sys", "system", fixtures.CHAT_SYSTEM))
        obs = rec.context + new
        turns_in_obs = [int(m["id"][1:]) for m in obs if m["id"].startswith("u")]
        snapshot: dict[str, Any] = {"mode": mode}
        ops: list[dict[str, Any]]
        if mode == "sliding":
            snapshot["window_turns"] = window_turns
            stale = turns_in_obs[:-window_turns]
            if stale:
                targets = [f"{p}{t}" for t in stale for p in ("u", "a")]
                ops = [
                    {
                        "action": "drop",
                        "targets": targets,
                        "reason": f"sliding window keeps the last {window_turns} turns",
                        "params": {"window_turns": window_turns},
                    }
                ]
            else:
                ops = [{"action": "keep", "target": f"u{turn}", "reason": "within window"}]
        else:
            snapshot.update({"recent_keep_turns": recent_keep, "summary_id": current_summary})
            if turn in summaries:
                summary_id, first, last = summaries[turn]
                targets = [current_summary] if current_summary else []
                targets += [f"{p}{t}" for t in range(first, last + 1) for p in ("u", "a")]
                ops = [
                    {
                        "action": "summarize",
                        "targets": targets,
                        "reason": f"summary mode: fold turns {first}-{last}, keep the last "
                        f"{recent_keep} turns verbatim",
                        "result": msg(
                            summary_id,
                            "assistant",
                            fixtures.CHAT_SUMMARIES[summary_id],
                            partition="memory",
                        ),
                    }
                ]
                current_summary = summary_id
            else:
                ops = [{"action": "keep", "target": f"u{turn}", "reason": "under threshold"}]
        # The policy records its immutable items but, in these modes, never enforces them:
        # the snapshot shows them going missing while nothing puts them back.
        snapshot["immutable_items"] = fixtures.PINNED
        snapshot["immutable_items_in_context"] = _present(obs, fixtures.PINNED)
        snapshot["messages"] = len(obs)
        rec.step(
            new,
            ops,
            mode=mode,
            reason=ops[0]["reason"],
            obs_fields={"mode_snapshot": snapshot},
            skew=(1.0, 1.0) if turn != 9 else (0.78, 0.8),
            seconds=0 if turn == 1 else 45 + (turn * 17) % 60,
        )
    rec.end("failed", 0.2)
    return rec.events


def mode_hybrid_warranty(
    session_id: str = "mode-hybrid-warranty", start: datetime = DEMO_START
) -> list[Event]:
    """Seed 001: rag then hybrid mode, retrieval partition, pinned items kept."""
    rec = SessionRecorder(session_id, start)
    rec.session(
        agent="support-bot",
        model="gpt-4o",
        encoding="cl100k_base",
        mode="hybrid",
        budget={
            "max_tokens": 6000,
            "reserved_tokens": 800,
            "partitions": {"system": 400, "retrieval": 1600, "memory": 1200, "question": 1000},
        },
        pinned=fixtures.PINNED,
        metadata={"channel": "web chat", "customer": "Lin Wei", "seed": "001"},
    )

    def kb(key: str) -> Message:
        return msg(key, "system", fixtures.WARRANTY_KB[key][1], partition="retrieval")

    retrieval = {
        1: ["kb_descale_1"],
        3: ["kb_warranty_1", "kb_warranty_2"],
        4: ["kb_loan_1"],
        5: ["kb_membership_1"],
    }

    def retrieval_first(after_ops: list[Message]) -> dict[str, Any]:
        # hybrid puts references right after the system prompt, before the chat.
        ids = [m["id"] for m in after_ops]
        order = [i for i in ids if i == "sys"] + [i for i in ids if i.startswith("kb_")]
        order += [i for i in ids if i not in order]
        return {
            "action": "reorder",
            "reason": "references go after the system prompt",
            "params": {"order": order},
        }

    for turn, (user, assistant) in enumerate(fixtures.WARRANTY_TURNS, 1):
        mode = "rag" if turn <= 2 else "hybrid"
        new = [kb(k) for k in retrieval.get(turn, [])]
        new += [msg(f"u{turn}", "user", user), msg(f"a{turn}", "assistant", assistant)]
        if turn == 1:
            new.insert(0, msg("sys", "system", fixtures.CHAT_SYSTEM))
        ops: list[dict[str, Any]]
        if turn == 1:
            ops = [
                {
                    "action": "pin",
                    "target": "u1",
                    "reason": "holds the member id and the table preference (immutable items)",
                }
            ]
        elif turn == 2:
            ops = [
                {
                    "action": "expire",
                    "target": "kb_descale_1",
                    "reason": "manual section used; may leave at the next retrieval",
                }
            ]
        elif turn == 3:
            ops = [{"action": "drop", "target": "kb_descale_1", "reason": "expired reference"}]
        elif turn == 5:
            ops = [
                {
                    "action": "summarize",
                    "targets": ["u2", "a2", "u3", "a3"],
                    "reason": "hybrid: fold the troubleshooting turns into memory",
                    "result": msg(
                        "mem_1",
                        "assistant",
                        "Troubleshooting so far: after descaling with the Breville descaler the "
                        "pump hums but pushes no water; the air-lock procedure (hot water wand "
                        "30 seconds, two blank shots) did not help, so a pump fault is likely. "
                        "Pumps are covered by the 2-year warranty; a claim needs the order "
                        "number, the serial number (base plate, BES870xxxxxxxx) and a short "
                        "video. Repairs take 7–10 working days; Gold members get a loan "
                        "machine for repairs over 5 days.",
                        partition="memory",
                    ),
                },
                {"action": "drop", "target": "kb_warranty_2", "reason": "claim already filed"},
            ]
        elif turn == 6:
            ops = [
                {
                    "action": "expire",
                    "targets": ["kb_loan_1", "kb_membership_1"],
                    "reason": "answered",
                }
            ]
        else:
            ops = [{"action": "keep", "target": f"u{turn}", "reason": "under budget"}]
        if any(m["id"].startswith("kb_") for m in new) and turn > 1:
            # Reorder last, over the context the earlier operations leave.
            probe = rec.context + new
            for op in ops:
                probe = apply_operation(probe, dict(rec.archive), op)
            ops.append(retrieval_first(probe))
        obs = rec.context + new
        snapshot = {
            "mode": mode,
            "retrieval_top_k": 3,
            "recent_keep_turns": 3,
            "immutable_items": fixtures.PINNED,
            "immutable_items_in_context": _present(obs, fixtures.PINNED),
            "scopes": ["system", "reference", "chat"],
        }
        rec.step(
            new,
            ops,
            single=len(ops) == 1,
            mode=mode,
            reason=ops[0]["reason"],
            obs_fields={"mode_snapshot": snapshot},
            seconds=0 if turn == 1 else 70,
        )
    rec.end("succeeded", 1.0)
    return rec.events


# ------------------------------------------------------------------ seed 002

ORDER_BUDGET: dict[str, Any] = {
    "max_tokens": 16000,
    "reserved_tokens": 1200,
    "partitions": {
        "system": 1200,
        "task": 600,
        "memory": 2400,
        "tool": 4800,
        "retrieval": 4000,
        "question": 400,
    },
}

# Tuned so that step 2's context measures just over 90% of 16000 tokens in cl100k_base.
STALLED_POLLS = 221

_TOOL_DEFS = """\
Tools (JSON schema):
{"name": "query_orders", "description": "Query orders by date range and status; paged.",
 "parameters": {"type": "object", "properties": {"date_from": {"type": "string", "format": "date"},
   "date_to": {"type": "string", "format": "date"}, "status": {"type": "array", "items":
   {"enum": ["pending_shipment", "shipped", "exception", "closed"]}}, "page": {"type": "integer"},
   "page_size": {"type": "integer", "maximum": 200}}, "required": ["date_from", "date_to"]}}
{"name": "get_order_detail", "description": "One order with payment, logistics track and audit
 trail.", "parameters": {"type": "object", "properties": {"order_id": {"type": "string",
 "pattern": "^SO\\\\d{11}$"}}, "required": ["order_id"]}}
{"name": "carrier_query", "description": "Ask the carrier for the live status of a tracking
 number.", "parameters": {"type": "object", "properties": {"tracking_no": {"type": "string"}},
 "required": ["tracking_no"]}}
{"name": "create_ticket", "description": "Open a CS ticket (CS-YYYYMMDD-NNNN).", "parameters":
 {"type": "object", "properties": {"order_id": {"type": "string"}, "kind": {"enum":
 ["logistics", "address", "payment"]}, "note": {"type": "string"}}, "required": ["order_id",
 "kind"]}}"""


def builder_orders(session_id: str = "builder-orders", start: datetime = DEMO_START) -> list[Event]:
    """Seed 002: ContextBuilder with partition budgets, a result shaper and degradation."""
    budget: int = ORDER_BUDGET["max_tokens"]
    rec = SessionRecorder(session_id, start)
    rec.session(
        agent="order-ops-agent",
        model="gpt-4o",
        encoding="cl100k_base",
        budget=ORDER_BUDGET,
        metadata={
            "builder": "ContextBuilder",
            "thresholds": {"light": 0.7, "force": 0.9},
            "degradation_order": ["tool", "memory", "retrieval"],
            "seed": "002",
        },
    )

    def snapshot(new: list[Message], skew: float = 1.0) -> dict[str, Any]:
        """What the builder believes before it acts: its counts, per partition."""
        parts: dict[str, int] = {}
        for m in rec.context + new:
            key = m.get("partition", "other")
            parts[key] = parts.get(key, 0) + round(context_tokens([m]) * skew)
        used = sum(parts.values())
        return {"used_tokens": used, "occupancy": round(used / budget, 3), "partitions": parts}

    def sop(key: str, docs: dict[str, tuple[str, str]]) -> Message:
        source, text = docs[key]
        return msg(key, "system", f"[RETRIEVAL] {source}\n{text}", partition="retrieval")

    new = [
        msg(
            "sys",
            "system",
            "[SYSTEM] You are the order operations agent of an e-commerce platform. Hard "
            "rules: never retry payment failure code 51/54/61 automatically; never promise a "
            "delivery date the carrier has not confirmed; report abnormal orders as a table "
            "(order id, problem, since, next action, owner). Sections are tagged [SYSTEM] "
            "[TASK] [MEMORY] [TOOL] [RETRIEVAL] [QUESTION].\n" + _TOOL_DEFS,
            partition="system",
        ),
        msg(
            "task",
            "user",
            "[TASK] Daily order audit for orders created 2026-01-01. Goal: find every order "
            "that needs action today and say what to do. Done when each abnormal order has "
            "a next action and an owner, and pending orders past SLA are flagged.",
            partition="task",
        ),
        msg("mem_1", "assistant", "[MEMORY] " + fixtures.OPS_MEMORY, partition="memory"),
        *(sop(k, fixtures.SOP_DOCS) for k in fixtures.SOP_DOCS),
        msg(
            "q1",
            "user",
            "[QUESTION] 今天有哪些订单需要处理? Which orders need attention today?",
            partition="question",
        ),
    ]
    rec.step(
        new,
        [{"action": "keep", "target": "task", "reason": "task state is resident"}],
        reason="occupancy under 70%",
        obs_fields={"builder": snapshot(new)},
        seconds=0,
    )

    query_args = (
        '{"date_from": "2026-01-01", "date_to": "2026-01-01", "status": ["pending_shipment", '
        '"shipped", "exception"], "page": 1, "page_size": 200, "fields": ["order_id", '
        '"status", "exception_reason", "create_time", "customer_id", "amount", "ship_to", '
        '"logistics", "items"], "include": {"logistics_track": true, "items": true}}'
    )
    orders_raw = fixtures.orders_json()
    new = [
        msg("call_1", "assistant", f"[TOOL] query_orders({query_args})", partition="tool"),
        msg("tool_orders_1", "tool", orders_raw, tool="query_orders", partition="tool"),
    ]
    shaped = (
        f"[TOOL] query_orders 结果摘要 (shaped from tool_orders_1, {len(orders_raw)} chars): "
        f"{fixtures.ORDERS_SUMMARY}. 时间范围 2026-01-01 至 2026-01-15. "
        f"待发货: {', '.join(fixtures.PENDING)}."
    )
    shaped_tokens = context_tokens([{"content": shaped}])
    raw_tokens = context_tokens([{"content": orders_raw}])
    rec.step(
        new,
        [
            {
                "action": "summarize",
                "target": "tool_orders_1",
                "reason": "result shaper: extract, aggregate, keep abnormal orders in full",
                "params": {"shaper": "list_query", "keep": ["status", "exception_reason"]},
                "result": msg(
                    "tool_orders_1_shaped", "tool", shaped, tool="query_orders", partition="tool"
                ),
            },
            {
                "action": "truncate",
                "target": "call_1",
                "reason": "tool input: keep one line of what was asked",
                "result": msg(
                    "call_1",
                    "assistant",
                    "[TOOL] 查询订单: 2026-01-01, 全部状态, 第1页 (200/页)",
                    partition="tool",
                ),
            },
        ],
        single=False,
        reason="tool partition far over its 4800-token budget",
        obs_fields={"builder": snapshot(new)},
        outcome={
            "validate_compression": {
                "ratio": round(shaped_tokens / raw_tokens, 4),
                "key_entities": ["128", *fixtures.ABNORMAL],
                "missing": [],
                "passed": True,
            }
        },
    )

    # The stalled order's audit trail is mostly carrier polls: that is what makes the
    # detail results heavy enough to push the context past 90%.
    audit = {"SO20260101007": STALLED_POLLS, "SO20260101042": 40, "SO20260101103": 4}
    details = [
        msg(
            f"detail_{oid[-3:]}",
            "tool",
            fixtures.order_detail(oid, audit[oid]),
            tool="get_order_detail",
            partition="tool",
        )
        for oid in fixtures.ABNORMAL
    ]
    new = [
        msg(
            "a2",
            "assistant",
            "[MEMORY] 3 abnormal orders and 5 pending; fetching the three "
            "abnormal orders in full before deciding.",
            partition="memory",
        ),
        *details,
        *(sop(k, fixtures.SOP_EXTRA) for k in fixtures.SOP_EXTRA),
    ]
    # The builder counted this context with a characters/4 shortcut, so it saw 88% and
    # only compressed lightly; measured, the context stays above 90% (seed 002, 3.2).
    detail_042 = fixtures.order_detail("SO20260101042", audit["SO20260101042"])
    cut = detail_042.index('"audit_trail"')
    rec.step(
        new,
        [
            {
                "action": "truncate",
                "target": "detail_042",
                "reason": "light compression: the address case needs no audit history",
                "result": msg(
                    "detail_042",
                    "tool",
                    detail_042[:cut] + '"audit_trail": "[40 entries truncated]"}}',
                    tool="get_order_detail",
                    partition="tool",
                ),
            }
        ],
        reason="occupancy over 70%: light compression",
        obs_fields={"builder": snapshot(new, skew=0.86)},
        skew=(0.86, 0.86),
        outcome={"builder_estimate": "counted as characters / 4, not with the tokenizer"},
    )

    new = [
        msg(
            "q2",
            "user",
            "[QUESTION] 先把三个异常订单的处理方案给我, 用表格。",
            partition="question",
        )
    ]
    rec.step(
        new,
        [
            {
                "action": "summarize",
                "targets": ["detail_007", "detail_042", "detail_103"],
                "reason": "degrade 1/3 (tool): shape order details to the fields the SOPs use",
                "result": msg(
                    "details_shaped",
                    "tool",
                    "[TOOL] get_order_detail ×3 (shaped): SO20260101007 shipped, last "
                    f"track event 2026-01-01, stalled > 48h (carrier API polled {STALLED_POLLS} "
                    "times, no new event); SO20260101042 address validation failed, customer "
                    "not yet contacted; SO20260101103 payment FAILED, unionpay code 51 "
                    "(insufficient funds), order not closed.",
                    tool="get_order_detail",
                    partition="tool",
                ),
            },
            {
                "action": "summarize",
                "targets": ["mem_1", "a2"],
                "reason": "degrade 2/3 (memory): keep rules that apply to today's orders",
                "result": msg(
                    "mem_2",
                    "assistant",
                    "[MEMORY] Ops lead Zhou Min wants a table (order id, problem, since, next "
                    "action, owner). Code 51 must not be retried automatically. Wuhan hub has "
                    "weather delays since 2026-01-12. Old 'Nanhui' district names fail address "
                    "validation. Report goes to #ops-daily by 10:00.",
                    partition="memory",
                ),
            },
            {
                "action": "drop",
                "targets": ["ret_sop_comms", "ret_sop_sla"],
                "reason": "degrade 3/3 (retrieval): top-5 → top-3 references",
            },
        ],
        single=False,
        reason="occupancy over 90%: forced degradation tool → memory → retrieval",
        obs_fields={"builder": snapshot(new)},
    )

    new = [
        msg(
            "a4",
            "assistant",
            "| order | problem | since | next action | owner |\n|---|---|---|---|---|\n"
            "| SO20260101007 | 物流停滞超48h | 2026-01-01 | carrier_query, then 催件工单 "
            "(CS ticket); resend or refund past 72 h | logistics desk |\n"
            "| SO20260101042 | 地址异常 | 2026-01-01 | contact customer within 4 h; "
            "address_update only | customer service |\n"
            "| SO20260101103 | 支付失败 (51) | 2026-01-01 | no auto-retry; notify customer to "
            "change payment method; closes after 30 min | payments |\n"
            "5 orders pending shipment are within SLA.",
            partition="memory",
        )
    ]
    rec.step(
        new,
        [{"action": "keep", "target": "a4", "reason": "final answer"}],
        reason="occupancy under 70%",
        obs_fields={"builder": snapshot(new)},
    )
    rec.end("succeeded", 0.9)
    return rec.events


# ------------------------------------------------------------------ seed 003


def edit_research(session_id: str = "edit-research", start: datetime = DEMO_START) -> list[Event]:
    """Seed 003: an external manager edits a research agent's messages before each step."""
    rec = SessionRecorder(session_id, start)
    rec.session(
        agent="deep-research-agent",
        model="gpt-4o",
        encoding="cl100k_base",
        budget={"max_tokens": 4000, "reserved_tokens": 500},
        metadata={
            "manager": "external edit manager (ids/role/justification/new_content)",
            "benchmark": "multi-hop web QA",
            "seed": "003",
        },
    )
    rec.step(
        [
            msg("sys", "system", fixtures.RESEARCH_SYSTEM),
            msg("q", "user", fixtures.RESEARCH_QUESTION),
        ],
        [],
        single=False,
        reason="nothing to manage yet: an empty edit list leaves the context unchanged",
        seconds=0,
    )

    def hop(n: int) -> list[Message]:
        thought, query, results = fixtures.RESEARCH_SEARCHES[n - 1]
        return [
            msg(f"a{n}", "assistant", f"{thought}\nsearch({query!r})"),
            msg(f"o{n}", "user", "Observation: " + fixtures.search_results(query, results)),
        ]

    hop1 = fixtures.RESEARCH_SEARCHES[0][2]
    rec.step(
        hop(1),
        [
            {
                "ids": ["o1"],
                "role": "user",
                "justification": "Results 4-5 are trivia and a ticket page; keep the three "
                "that name the architect, with their URLs.",
                "new_content": "Observation: "
                + fixtures.search_results(fixtures.RESEARCH_SEARCHES[0][1], hop1[:3]),
            }
        ],
        single=False,
        reason="manager pass before agent step 2",
    )
    rec.step(
        hop(2),
        [
            {
                "ids": ["a1", "o1"],
                "role": "assistant",
                "justification": "Hop 1 is answered; merge the call and its evidence into a note.",
                "new_content": "Hop 1 done: the Sydney Opera House was designed by the Danish "
                "architect Jørn Utzon (won the competition on 29 January 1957), completed by "
                "Peter Hall's team, formally opened by Queen Elizabeth II on 20 October 1973. "
                "Sources: https://en.wikipedia.org/wiki/Sydney_Opera_House, "
                "https://en.wikipedia.org/wiki/J%C3%B8rn_Utzon",
            }
        ],
        single=False,
        reason="manager pass before agent step 3",
        skew=(0.8, 0.78),
    )
    rec.step(
        hop(3),
        [
            {
                "ids": ["a2", "o2"],
                "role": "assistant",
                "justification": "Hop 2 answered by two sources; keep the year and the sources.",
                "new_content": "Hop 2 done: Jørn Utzon received the Pritzker Prize in 2003. "
                "Sources: https://en.wikipedia.org/wiki/Pritzker_Architecture_Prize, "
                "https://en.wikipedia.org/wiki/J%C3%B8rn_Utzon",
            },
            {
                "ids": ["a1"],
                "role": "assistant",
                "justification": "The opening date is duplicated in hop 3's evidence; keep hop 1 "
                "to the architect only.",
                "new_content": "Hop 1 done: the Sydney Opera House was designed by the Danish "
                "architect Jørn Utzon (competition won 1957). Source: "
                "https://en.wikipedia.org/wiki/J%C3%B8rn_Utzon",
            },
        ],
        single=False,
        reason="manager pass before agent step 4",
    )
    rec.step(
        hop(4),
        [
            {
                "ids": ["a3", "o3"],
                "role": "assistant",
                "justification": "Keep the construction timeline and cost; drop duplicate "
                "snippets.",
                # Loses "20 October 1973", the one date the question needs.
                "new_content": "Hop 3 done: construction of the Opera House began in March "
                "1959; Utzon resigned in February 1966 and Peter Hall's team finished the "
                "interiors; the project ran ten years late and cost A$102 million (estimate "
                "A$7 million).",
            },
            {
                "ids": ["a4", "o4"],
                "role": "assistant",
                "justification": "The resignation side track serves no open hop.",
                "new_content": "",
            },
        ],
        single=False,
        reason="manager pass before agent step 5",
        skew=(0.82, 0.8),
    )
    rec.step(
        [
            msg(
                "a5",
                "assistant",
                "All hops done. Utzon won the Pritzker Prize in 2003. My notes give the "
                "construction start (March 1959) and no opening date, and the project is "
                "described as ten years late, so I take 1959 as the reference year: 2003 − "
                "1959 = 44.\nANSWER: 2003, 44 years after the Opera House opened. Sources: "
                "Wikipedia (Pritzker Architecture Prize; Sydney Opera House).",
            )
        ],
        [
            {
                "ids": ["a1", "a2", "a3"],
                "role": "assistant",
                "justification": "Collapse the three hop notes into one progress block.",
                "new_content": "Progress: architect Jørn Utzon (competition 1957); Pritzker "
                "Prize 2003; construction began March 1959, ten years late, A$102 million.",
            }
        ],
        single=False,
        reason="manager pass after the final answer",
        outcome={
            "answer": "2003; 44 years",
            "expected": "2003; 30 years (opened 20 October 1973)",
            "correct": False,
        },
    )
    rec.end("failed", 0.0)
    return rec.events


# ------------------------------------------------------------------ all of them

SCENARIOS: dict[str, Callable[[str, datetime], list[Event]]] = {
    "cm-order-timeout": cm_order_timeout,
    "mode-customer-chat": mode_customer_chat,
    "mode-hybrid-warranty": mode_hybrid_warranty,
    "builder-orders": builder_orders,
    "edit-research": edit_research,
}


def all_demo_sessions(prefix: str = "", start: datetime = DEMO_START) -> list[list[Event]]:
    """Events of every demo session, one list per session, ids prefixed with `prefix`."""
    return [
        build(f"{prefix}{name}", start + timedelta(minutes=20 * n))
        for n, (name, build) in enumerate(SCENARIOS.items())
    ]
