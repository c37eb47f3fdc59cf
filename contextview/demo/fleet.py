"""A fleet of scripted agents that run through the SDK's hooks against a live server.

    python -m contextview.demo.fleet --url http://127.0.0.1:8000 --key cv_... [--forever]

Each agent is the kind of program the seeds describe, with its own context
manager (written here as the seeds publish them, plus the helpers they leave
out), a scripted "model" that reads real tool output (a 128-order JSON answer,
nginx and Spring Boot logs, a 20-turn customer chat, web search results), and
one SDK hook between the two:

============================  ==========================  =====================
agent                         manager (seed), hook          mode
============================  ==========================  =====================
``nginx-504-hunt``            ContextManager (000)          summary
                              `watch_manager`
``order-audit``               ContextBuilder (002)          (budgets)
                              `watch_builder`
``chat-sliding``              context modes (001)           sliding
``chat-summary``              `wrap_build`                  summary
``chat-hybrid``                                             hybrid
``warranty-rag``                                            rag
``opera-research``            edit manager (003) `EditHook` (edits)
``plain-504-loop``            OpenAI-style list,            full
                              `Session.record_step`
============================  ==========================  =====================

Along the way they make the mistakes contextview is for: a summary that loses
the order id and the upstream address, a pod log dropped and reloaded two steps
later, the same grep twice in a row, a member id given at turn 1 that the
sliding window and the summaries lose by turn 20, a 128-order result that
pushes the builder past 90 % of its budget, a merge that loses the opening date
a research answer needs, and a plain loop that never compacts and runs over
its budget.

Without ``--forever`` every agent plays its script once and ends its session.
With it, an agent that finished its script stays on its session, taking a
follow-up turn every ``--pace`` seconds (the customer asks again for their
member id, the debugger re-reads the error log, ...), so that a mode switch or
a restore sent from the UI is applied by a live agent, and its effect shows in
the next steps (the hybrid mode brings the member id back, a restored original
puts the opening date back in front of the research agent). After ``--linger``
follow-ups it ends the session and starts a new one.

Needs the SDK (httpx) and nothing of the server's Django code.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from contextview.demo import fixtures
from contextview.demo.recorder import Message, msg
from contextview.sdk import Client, Directive, Reject
from contextview.sdk.hooks import EditHook, watch_builder, watch_manager, wrap_build

CJK = re.compile(r"[\u3000-\u9fff\uff00-\uffef]")


def estimate_tokens(text: Any) -> int:
    """The agents' own estimate (seed 000, 4.3): CJK at 1.5 a character, the rest at 4 a token.

    The server counts with tiktoken; where the two disagree by more than 10 %
    the step is flagged ``token_estimate_off``.
    """
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    cjk = len(CJK.findall(text))
    return int(cjk * 1.5 + (len(text) - cjk) / 4) + 4


# ================================================================ seed 000: ContextManager


@dataclass
class ContextAction:
    action: str
    target: str
    params: dict[str, Any]


class ContextManager:
    """Seed 000's ContextManager as published, with the helpers it leaves out."""

    def __init__(
        self,
        policy: Callable[[dict[str, Any]], ContextAction],
        summarizer: Callable[[list[Message]], str],
        estimate_tokens: Callable[[str], int],
        max_tokens: int = 8000,
    ) -> None:
        self.policy = policy
        self.summarizer = summarizer
        self.estimate_tokens = estimate_tokens
        self.max_tokens = max_tokens
        self.active_context: list[Message] = []
        self.archive: dict[str, Message] = {}
        self.summary_index: list[dict[str, Any]] = []
        self.action_log: list[dict[str, Any]] = []
        self._summaries = 0

    def observe(self) -> dict[str, Any]:
        return {
            "active_context": self.active_context,
            "summary_index": self.summary_index,
            "used_tokens": self._used_tokens(),
            "max_tokens": self.max_tokens,
            "last_actions": self.action_log[-5:],
        }

    def step(self, new_message: Message) -> ContextAction:
        self.active_context.append(new_message)
        observation = self.observe()
        action = self.policy(observation)
        self.action_log.append({"obs": observation, "action": action.__dict__})
        return action

    def execute(self, action: ContextAction) -> None:
        if action.action == "summarize":
            target_message = self._find_target(action.target)
            summary = self.summarizer([target_message])
            self.summary_index.append(
                {"target": action.target, "summary": summary, "time": action.params.get("time")}
            )
            self._replace_with_summary(action.target, summary)
        elif action.action == "drop":
            self.archive[action.target] = self._find_target(action.target)
            self.active_context = [m for m in self.active_context if m.get("id") != action.target]
        elif action.action == "reload":
            raw = self.archive.get(action.target)
            if raw is not None:
                self.active_context.append(raw)
        self._compact_if_needed()

    def _used_tokens(self) -> int:
        return sum(self.estimate_tokens(m.get("content", "")) for m in self.active_context)

    def _find_target(self, target: str) -> Message:
        return next(m for m in self.active_context if m.get("id") == target)

    def _replace_with_summary(self, target: str, summary: str) -> None:
        # Seed 000, 6.3: keep the original retrievable and say where the summary came from.
        original = self._find_target(target)
        self.archive[target] = original
        self._summaries += 1
        replacement = {
            "id": f"sum_{self._summaries}",
            "role": original.get("role", "tool"),
            "content": f"[summary of {target}] {summary}",
        }
        if original.get("tool"):
            replacement["tool"] = original["tool"]
        self.active_context = [replacement if m is original else m for m in self.active_context]

    def _compact_if_needed(self) -> None:
        # The silent safety net: over max_tokens, the oldest raw tool result goes,
        # and nothing in action_log says so (the SDK logs it as inferred).
        while self._used_tokens() > self.max_tokens:
            raw = [m for m in self.active_context if m.get("role") == "tool"]
            raw = [m for m in raw if not str(m.get("content", "")).startswith("[summary")]
            if not raw:
                return
            self.archive[raw[0]["id"]] = raw[0]
            self.active_context = [m for m in self.active_context if m is not raw[0]]


# ================================================================ seed 001: context modes


@dataclass
class MessageStore:
    """The state layer: every message, never edited; the modes only read it."""

    messages: list[Message] = field(default_factory=list)
    summaries: list[Message] = field(default_factory=list)
    immutable_items: list[str] = field(default_factory=list)
    mode_snapshot: dict[str, Any] = field(default_factory=dict)


def _turns(messages: Sequence[Message]) -> list[list[Message]]:
    """Chat messages grouped by turn (a user message and what follows it)."""
    turns: list[list[Message]] = []
    for m in messages:
        if m.get("scope") != "chat":
            continue
        if m["role"] == "user" or not turns:
            turns.append([])
        turns[-1].append(m)
    return turns


class SlidingPolicy:
    def __init__(self, window_turns: int = 6) -> None:
        self.window_turns = window_turns

    def build(self, state: MessageStore, query: str) -> list[Message]:
        system = [m for m in state.messages if m.get("scope") == "system"]
        recent = [m for turn in _turns(state.messages)[-self.window_turns :] for m in turn]
        return system + recent


class SummaryPolicy:
    """Seed 001, 3.2: incremental layered summaries, the last turns verbatim."""

    def __init__(
        self,
        recent_keep: int = 2,
        compact_threshold: int = 4,
        summarizer: Callable[[list[Message]], str] | None = None,
    ) -> None:
        self.recent_keep = recent_keep
        self.compact_threshold = compact_threshold
        self.summarizer = summarizer or _first_sentences

    def build(self, state: MessageStore, query: str) -> list[Message]:
        system = [m for m in state.messages if m.get("scope") == "system"]
        turns = _turns(state.messages)
        old = turns[: -self.recent_keep] if len(turns) > self.recent_keep else []
        covered = state.summaries[-1]["covers"] if state.summaries else 0
        if len(old) - covered >= self.compact_threshold:
            fresh = [m for turn in old[covered:] for m in turn]
            earlier = [state.summaries[-1]] if state.summaries else []
            state.summaries.append(
                {
                    "id": f"summary_{len(state.summaries) + 1}",
                    "role": "assistant",
                    "scope": "summary",
                    "content": self.summarizer(earlier + fresh),
                    "covers": len(old),
                }
            )
        summary = [_public(state.summaries[-1])] if state.summaries else []
        unsummarized = old[state.summaries[-1]["covers"] :] if state.summaries else old
        recent = [m for turn in unsummarized + turns[len(old) :] for m in turn]
        return system + summary + recent


class RagPolicy:
    """Seed 001, 3.4: references after the system prompt, then the last three turns."""

    def __init__(self, retriever: Callable[[str], list[Message]], recent_turns: int = 3) -> None:
        self.retriever = retriever
        self.recent_turns = recent_turns

    def build(self, state: MessageStore, query: str) -> list[Message]:
        system = [m for m in state.messages if m.get("scope") == "system"]
        recent = [m for turn in _turns(state.messages)[-self.recent_turns :] for m in turn]
        return system + self.retriever(query) + recent


class HybridPolicy:
    """Seed 001, 2.2 and 4.3: hard constraints first, then references, summary, recent turns."""

    def __init__(self, summary: SummaryPolicy, retriever: Callable[[str], list[Message]]) -> None:
        self.summary = summary
        self.retriever = retriever

    def build(self, state: MessageStore, query: str) -> list[Message]:
        context = self.summary.build(state, query)
        pinned: list[Message] = []
        if state.immutable_items:
            pinned = [
                {
                    "id": "immutable_items",
                    "role": "system",
                    "scope": "system",
                    "content": "Hard constraints (kept verbatim): "
                    + "; ".join(state.immutable_items),
                }
            ]
        system = [m for m in context if m.get("scope") == "system"]
        rest = [m for m in context if m.get("scope") != "system"]
        return system + pinned + self.retriever(query) + rest


class FullPolicy:
    def build(self, state: MessageStore, query: str) -> list[Message]:
        return list(state.messages)


class ContextModeManager:
    """Seed 001, 2.3: one `build(mode, state, query)`, one policy per mode."""

    def __init__(self, max_tokens: int, policies: dict[str, Any]) -> None:
        self.max_tokens = max_tokens
        self.policies = policies

    def build(self, mode: str, state: MessageStore, query: str) -> dict[str, Any]:
        messages = self.policies[mode].build(state, query)
        tokens = sum(estimate_tokens(m["content"]) for m in messages)
        state.mode_snapshot = {
            "mode": mode,
            "messages": len(messages),
            "tokens": tokens,
            "immutable_items_in_context": [
                item
                for item in state.immutable_items
                if any(item.split()[-1] in str(m["content"]) for m in messages)
            ],
        }
        return {"messages": messages, "meta": {"mode": mode, "tokens": tokens}}


def _public(message: Message) -> Message:
    return {k: v for k, v in message.items() if k != "covers"}


def _first_sentences(messages: list[Message]) -> str:
    return " ".join(str(m["content"]).split(". ")[0] for m in messages)[:600]


def _kb_retriever(limit: int = 2, min_score: int = 1) -> Callable[[str], list[Message]]:
    """Keyword retrieval over the warranty knowledge base (words of 4+ letters in common)."""
    words = re.compile(r"[a-z]{4,}")

    def retrieve(query: str) -> list[Message]:
        asked = set(words.findall(query.lower()))
        scored = []
        for key, (_source, text) in fixtures.WARRANTY_KB.items():
            score = len(asked & set(words.findall(text.lower())))
            if score >= min_score:
                scored.append((score, key, text))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [
            {"id": key, "role": "system", "scope": "retrieval", "content": text}
            for _, key, text in scored[:limit]
        ]

    return retrieve


# ================================================================ seed 002: ContextBuilder


class ContextBuilder:
    """Seed 002, 8: a fixed assembly order, and degradation tool → memory → retrieval past 90 %."""

    def __init__(self, tokenizer: Callable[[str], int], budget: int = 128000) -> None:
        self.tokenizer = tokenizer
        self.budget = budget

    def build(
        self,
        system: str,
        task: str,
        memory: str,
        tool_result: Any,
        retrieval: list[str],
        question: str,
    ) -> list[Message]:
        blocks = [system, task, memory, tool_result, retrieval, question]
        total = sum(self._count(b) for b in blocks)
        if total > self.budget * 0.9:
            tool_result = self._shrink_tool(tool_result)
            memory = self._compress_memory(memory)
            retrieval = self._trim_retrieval(retrieval)
        return self._assemble(system, task, memory, tool_result, retrieval, question)

    def _count(self, block: Any) -> int:
        if not block:
            return 0
        if isinstance(block, list):
            return sum(self._count(b) for b in block)
        return self.tokenizer(str(block))

    def _shrink_tool(self, tool_result: Any) -> Any:
        """The result shaper (seed 002, 4.2): list queries become counts plus the abnormal rows."""
        if isinstance(tool_result, list):
            return [self._shrink_tool(t) for t in tool_result]
        if not tool_result:
            return tool_result
        try:
            data = json.loads(tool_result)
        except ValueError:
            lines = str(tool_result).splitlines()
            return "\n".join(lines[:5] + [f"... [{len(lines) - 10} lines]"] + lines[-5:])
        rows = data.get("data", {}).get("list")
        if isinstance(rows, list):
            by_status: dict[str, int] = {}
            for row in rows:
                by_status[row["status"]] = by_status.get(row["status"], 0) + 1
            abnormal = [
                f"{row['order_id']} {row.get('exception_reason')}"
                for row in rows
                if row["status"] == "exception"
            ]
            return (
                f"query_orders: {len(rows)} orders; "
                + ", ".join(f"{status} {n}" for status, n in sorted(by_status.items()))
                + "; abnormal: "
                + "; ".join(abnormal)
            )
        detail = data.get("data", {})
        keep = ("order_id", "status", "exception_reason", "amount", "customer_id")
        return json.dumps({k: detail.get(k) for k in keep}, ensure_ascii=False)

    def _compress_memory(self, memory: str) -> str:
        # Keeps the lines that name a ticket or an order; the rest (the Wuhan hub
        # delays, the table preference) is what gets lost.
        lines = [line for line in memory.splitlines() if re.search(r"CS-|SO\d", line)]
        return "\n".join(lines)

    def _trim_retrieval(self, retrieval: list[str]) -> list[str]:
        return retrieval[:3]

    def _assemble(self, *blocks: Any) -> list[Message]:
        out: list[Message] = []
        tags = ("SYSTEM", "TASK", "MEMORY", "TOOL", "RETRIEVAL", "QUESTION")
        for tag, block in zip(tags, blocks, strict=True):
            items = block if isinstance(block, list) else [block]
            out += [{"role": "user", "content": f"[{tag}] {item}"} for item in items if item]
        return out


# ================================================================ running agents


@dataclass
class Run:
    """What one agent run needs: the client, its session id, pacing, and when to stop."""

    client: Client
    session_id: str
    pace: float
    stop: threading.Event
    forever: bool
    linger: int
    log: Callable[[str], None]

    def pause(self, factor: float = 1.0) -> bool:
        """Sleep one pace; False once the fleet is stopping."""
        return not self.stop.wait(self.pace * factor)

    def follow_ups(self) -> range:
        return range(self.linger if self.forever else 0)


# ---------------------------------------------------------------- nginx-504-hunt (seed 000)

NGINX_SUMMARIES = {
    "tool_result_12": "access.log 10:20-10:27: 14 × 504 on POST /api/v1/orders/<id>/checkout, "
    f"urt≈3.000 s, upstream {fixtures.UPSTREAM} and 10.42.3.56:8081; {fixtures.INCIDENT_ORDER} "
    "×6. Everything else 200.",
    "tool_result_18": fixtures.LOSSY_ERROR_SUMMARY,
    "tool_result_29": 'hikaricp_connections_active{app="inventory-svc"} at 20 (max) from 02:20Z, '
    "pending 18-41; 6-14 active before.",
}


def nginx_504_hunt(run: Run) -> None:
    """Seed 000: a ContextManager debugging checkout 504s, policy and summarizer scripted."""
    plan: dict[str, ContextAction] = {}
    mode = {"current": "summary"}

    def policy(obs: dict[str, Any]) -> ContextAction:
        newest = obs["active_context"][-1]["id"]
        if newest in plan:
            return plan.pop(newest)
        if mode["current"] != "full" and obs["used_tokens"] > 0.8 * obs["max_tokens"]:
            raw = [
                m for m in obs["active_context"]
                if m["role"] == "tool" and not str(m["content"]).startswith("[summary")
            ]  # fmt: skip
            if len(raw) > 1:
                name = "drop" if mode["current"] == "sliding" else "summarize"
                return ContextAction(name, raw[0]["id"], {"reason": "over 80% of max_tokens"})
        return ContextAction("keep", "", {})

    def summarizer(messages: list[Message]) -> str:
        target = messages[-1]
        text = str(target["content"])
        return NGINX_SUMMARIES.get(target["id"], text.splitlines()[0][:300])

    def on_set_mode(directive: Directive) -> str:
        if directive.mode not in ("full", "summary", "sliding"):
            raise Reject("this ContextManager's policy knows full, summary and sliding")
        mode["current"] = directive.mode
        return (
            f"policy now {directive.mode}: "
            + {
                "full": "never compacts",
                "summary": "summarizes the oldest raw tool result past 80%",
                "sliding": "drops the oldest raw tool result past 80%",
            }[directive.mode]
        )

    cm = ContextManager(policy, summarizer, estimate_tokens, max_tokens=9000)
    session = run.client.session(
        run.session_id,
        agent="order-debug-bot",
        model="gpt-4o-mini",
        encoding="cl100k_base",
        mode="summary",
        budget={"max_tokens": 9000, "reserved_tokens": 800},
        metadata={"seed": "000", "task": f"{fixtures.INCIDENT_ORDER} times out at checkout"},
        on_set_mode=on_set_mode,
    )
    watch_manager(cm, session)
    access_log, _ = fixtures.nginx_access_log()
    grep = '$ grep -n "upstream timed out" /var/log/nginx/error.log\n' + fixtures.nginx_error_grep()

    def say(message: Message, action: ContextAction | None = None) -> None:
        if message["role"] == "assistant" and action is None:
            # The agent's own turns join the context as is; observations go through
            # step(), where the policy decides (so two greps in a row are two steps).
            cm.active_context.append(message)
            return
        if action is not None:
            plan[message["id"]] = action
        chosen = cm.step(message)
        cm.execute(chosen)

    script: list[tuple[Message, ContextAction | None]] = [
        (msg("sys", "system", "You are a debugging assistant for the shop platform. Tools: "
             "read_file, grep, kubectl_logs, http_get. Quote error codes, timeouts, order ids "
             "and paths exactly."), None),
        (msg("u1", "user", f"订单 {fixtures.INCIDENT_ORDER} 结账一直超时, 用户看到 504. Find out "
             "why; start with the nginx logs on the gateway."), None),
        (msg("a1", "assistant", 'read_file(path="/var/log/nginx/access.log", tail=60)'), None),
        (msg("tool_result_12", "tool", "$ tail -n 60 /var/log/nginx/access.log\n" + access_log,
             tool="read_file"), None),
        (msg("a2", "assistant", 'The 504s all have urt≈3.000. grep(pattern="upstream timed '
             'out", path="/var/log/nginx/error.log")'), None),
        (msg("tool_result_18", "tool", grep, tool="grep"),
         ContextAction("summarize", "tool_result_12", {"reason": "access log body is normal "
                       "traffic; keep the 504 lines and timings", "max_tokens": 400})),
        (msg("a3", "assistant", 'Same grep with context lines. grep(pattern="upstream timed '
             'out", path="/var/log/nginx/error.log", context=2)'), None),
        (msg("tool_result_19", "tool", grep, tool="grep"),
         ContextAction("drop", "tool_result_19", {"reason": "same output as tool_result_18"})),
        (msg("a4", "assistant", 'grep(pattern="inventory", path="/etc/nginx/conf.d/", '
             "recursive=true)"), None),
        (msg("tool_result_21", "tool", "$ grep -rn inventory /etc/nginx/conf.d/\n"
             + fixtures.NGINX_CONF_GREP, tool="grep"),
         ContextAction("summarize", "tool_result_18", {"reason": "log body is repetitive; keep "
                       "error code and timeout", "max_tokens": 120})),
        (msg("a5", "assistant", "proxy_read_timeout 3s with proxy_next_upstream off. "
             'kubectl_logs(deployment="inventory-svc", namespace="shop", since="15m")'), None),
        (msg("tool_result_25", "tool", "$ kubectl logs deploy/inventory-svc -n shop\n"
             + fixtures.inventory_pod_logs(), tool="kubectl_logs"), None),
        (msg("a6", "assistant", "HikariPool-1 is exhausted (20/20). http_get(prometheus "
             "hikaricp_connections_active)"), None),
        (msg("tool_result_29", "tool", fixtures.prometheus_pool_query(), tool="http_get"),
         ContextAction("drop", "tool_result_25", {"reason": "pod log digested in a6"})),
        (msg("u2", "user", f"For the ticket I need the exact inventory-svc log line for "
             f"{fixtures.INCIDENT_ORDER} and the exact nginx error line."),
         ContextAction("reload", "tool_result_25", {"reason": "the user wants the verbatim pod "
                       "log line; the drop was premature"})),
        (msg("a8", "assistant", f"sum_2 does not mention {fixtures.INCIDENT_ORDER} or error "
             "110; reloading the original error log."),
         ContextAction("reload", "tool_result_18", {"reason": "summary lost the order id, the "
                       "upstream and error 110"})),
        (msg("a9", "assistant", "Root cause: inventory-svc's HikariPool-1 is exhausted since "
             "02:20Z; reservations take 3050-3600 ms, over nginx's proxy_read_timeout 3s "
             "(/etc/nginx/conf.d/api.conf:42), so checkout returns 504 (error 110) for "
             f"{fixtures.INCIDENT_ORDER}."), None),
    ]  # fmt: skip
    for message, action in script:
        say(message, action)
        if not run.pause():
            break
    for n in run.follow_ups():
        if not run.pause(2):
            break
        say(msg(f"f{n}a", "assistant", "Re-checking the error log for new timeouts."))
        say(msg(f"f{n}t", "tool", grep, tool="grep"))
    session.end("succeeded", 0.7)


# ---------------------------------------------------------------- order-audit (seed 002)


def order_audit(run: Run) -> None:
    """Seed 002: a daily order audit; the 128-order answer pushes the builder past 90 %."""
    builder = ContextBuilder(estimate_tokens, budget=16000)

    def on_set_mode(directive: Directive) -> str:
        raise Reject("a ContextBuilder has no modes; it degrades by budget")

    session = run.client.session(
        run.session_id,
        agent="order-audit-bot",
        model="gpt-4o",
        encoding="cl100k_base",
        metadata={"seed": "002", "task": "daily order audit 2026-01-01"},
        on_set_mode=on_set_mode,
    )
    restored: list[str] = []

    def on_restore(directive: Directive) -> str:
        texts = [str(m.get("content", "")) for m in directive.originals.values()]
        if not texts:
            raise Reject("the server sent no originals to restore")
        restored.extend(t[:4000] for t in texts)
        return f"{len(texts)} original(s) go into the retrieval block from the next build"

    session.on_restore = on_restore
    hook = watch_builder(
        builder, session, partition_budgets={"tool": 4800, "memory": 3200, "retrieval": 2400}
    )
    system = (
        "You are the order-operations agent. Tools: query_orders, get_order_detail, "
        "carrier_query, ticket_create. Answer in a table with order id, problem, since, next "
        "action, owner."
    )
    task = (
        "Daily order audit for orders created 2026-01-01: find every order that needs action "
        "today and say what to do."
    )
    memory = fixtures.OPS_MEMORY
    sops = [text for _, text in fixtures.SOP_DOCS.values()] + [
        text for _, text in fixtures.SOP_EXTRA.values()
    ]
    details = [fixtures.order_detail(oid, 34) for oid in fixtures.ABNORMAL]
    rounds: list[tuple[str | None, Any, str]] = [
        (None, None, "今天有哪些订单需要处理? Which orders need attention today?"),
        ("query_orders", fixtures.orders_json(), "Which orders are abnormal?"),
        ("get_order_detail", details, "先把三个异常订单的处理方案给我, 用表格。"),
        ("query_orders", fixtures.orders_json(), "Re-check: are the 5 pending orders in SLA?"),
        (None, None, "Thanks. Post the table to #ops-daily."),
    ]
    for tool, result, question in rounds:
        hook.tool = tool
        builder.build(system, task, memory, result, sops + restored, question)
        if not run.pause():
            break
    for n in run.follow_ups():
        if not run.pause(2):
            break
        hook.tool = "query_orders"
        builder.build(
            system, task, memory, fixtures.orders_json(), sops + restored,
            f"Follow-up {n + 1}: anything new since the last audit?",
        )  # fmt: skip
    session.end("succeeded", 0.8)


# ---------------------------------------------------------------- customer chats (seed 001)

MEMBER_ID = re.compile(r"member id (A\d{5})")


def _answer(turn: int, scripted: str, context: list[Message], pinned: list[str]) -> str:
    """The scripted model: turn 20 can only give the member id if the context still has it."""
    if turn != 20:
        return scripted
    for m in context:
        found = MEMBER_ID.search(str(m["content"]))
        if found:
            answer = f"Your member id is {found.group(1)}; the delay voucher DLY-20-7F3K9Q is "
            answer += "tied to it and still valid until 2026-02-27."
            if any("table" in p for p in pinned):
                answer = (
                    "| item | value |\n|---|---|\n"
                    f"| member id | {found.group(1)} |\n| voucher | DLY-20-7F3K9Q, valid |"
                )
            return answer
    return scripted


def customer_chat(mode: str) -> Callable[[Run], None]:
    def run_chat(run: Run) -> None:
        """Seed 001: the 20-turn after-sales chat built in one mode."""
        # The knowledge base is about warranties; a delivery chat only rarely needs it.
        retriever = _kb_retriever(min_score=3)
        summaries = iter(fixtures.CHAT_SUMMARIES.values())
        summary = SummaryPolicy(
            recent_keep=2,
            compact_threshold=4,
            summarizer=lambda ms: next(summaries, None) or _first_sentences(ms),
        )
        manager = ContextModeManager(
            8000,
            {
                "full": FullPolicy(),
                "sliding": SlidingPolicy(window_turns=6),
                "summary": summary,
                "rag": RagPolicy(retriever),
                "hybrid": HybridPolicy(summary, retriever),
            },
        )
        session = run.client.session(
            run.session_id,
            agent="support-bot",
            model="gpt-4o",
            encoding="cl100k_base",
            mode=mode,
            budget={"max_tokens": 8000, "reserved_tokens": 1000},
            metadata={"seed": "001", "channel": "web chat", "customer": "Lin Wei"},
        )
        wrap_build(manager, session)
        store = MessageStore([msg("sys", "system", fixtures.CHAT_SYSTEM, scope="system")])
        turns = list(fixtures.CHAT_TURNS)
        follow = [
            "Sorry, which member id do you have for me again?",
            "Is the voucher still on my account?",
        ]
        for n in run.follow_ups():
            turns.append((follow[n % 2], turns[19][1] if n % 2 == 0 else "Yes, it is."))
        for turn, (user, scripted) in enumerate(turns, 1):
            store.messages.append(msg(f"u{turn}", "user", user, scope="chat"))
            if turn == 1:
                # The rule that finds hard constraints (seed 001, 4.3) runs on turn 1.
                store.immutable_items = list(fixtures.PINNED)
            built = manager.build(mode, store, user)["messages"]
            reply = _answer(20 if turn > 20 and turn % 2 == 1 else turn, scripted, built,
                            store.immutable_items)  # fmt: skip
            store.messages.append(msg(f"a{turn}", "assistant", reply, scope="chat"))
            if not run.pause(1 if turn <= 20 else 2):
                break
        ok = any("A12345" in str(m["content"]) for m in store.messages[-1:])
        session.end("succeeded" if ok else "failed", 1.0 if ok else 0.2)

    run_chat.__doc__ = f"Seed 001: the 20-turn after-sales chat in {mode} mode."
    return run_chat


def warranty_rag(run: Run) -> None:
    """Seed 001, rag mode: a warranty claim answered from the knowledge base."""
    manager = ContextModeManager(6000, {"rag": RagPolicy(_kb_retriever(), recent_turns=3)})
    manager.policies["hybrid"] = HybridPolicy(SummaryPolicy(), _kb_retriever())
    manager.policies["sliding"] = SlidingPolicy(4)
    session = run.client.session(
        run.session_id,
        agent="support-bot",
        model="gpt-4o",
        encoding="cl100k_base",
        mode="rag",
        budget={
            "max_tokens": 6000,
            "reserved_tokens": 800,
            "partitions": {"system": 400, "retrieval": 1600, "memory": 1200, "question": 1000},
        },
        metadata={"seed": "001", "channel": "web chat", "topic": "warranty"},
    )
    wrap_build(manager, session)
    store = MessageStore([msg("sys", "system", fixtures.CHAT_SYSTEM, scope="system")])
    store.immutable_items = ["member id A12345"]
    turns = list(fixtures.WARRANTY_TURNS)
    for _ in run.follow_ups():
        turns.append(("Remind me: which member id is the warranty under?", turns[6][1]))
    for turn, (user, reply) in enumerate(turns, 1):
        store.messages.append(msg(f"u{turn}", "user", user, scope="chat"))
        manager.build("rag", store, user)
        store.messages.append(msg(f"a{turn}", "assistant", reply, scope="chat"))
        if not run.pause(1 if turn <= 7 else 2):
            break
    session.end("succeeded", 0.9)


# ---------------------------------------------------------------- opera-research (seed 003)


def _research_edits(hop: int) -> list[dict[str, Any]]:
    """The external manager's edits before agent step `hop` + 1 (seed 003's JSON)."""
    first = fixtures.RESEARCH_SEARCHES[0]
    if hop == 1:
        return [
            {
                "ids": ["o1"],
                "role": "user",
                "justification": "Results 4-5 are trivia; keep the three naming the architect.",
                "new_content": "Observation: " + fixtures.search_results(first[1], first[2][:3]),
            }
        ]
    if hop == 2:
        return [
            {
                "ids": ["a1", "o1"],
                "role": "assistant",
                "justification": "Hop 1 is answered; merge the call and its evidence.",
                "new_content": "Hop 1 done: architect Jørn Utzon; formally opened by Queen "
                "Elizabeth II on 20 October 1973. Source: "
                "https://en.wikipedia.org/wiki/Sydney_Opera_House",
            }
        ]
    if hop == 3:
        return [
            {
                "ids": ["a2", "o2"],
                "role": "assistant",
                "justification": "Hop 2 answered; keep the year and the source.",
                "new_content": "Hop 2 done: Utzon received the Pritzker Prize in 2003. Source: "
                "https://en.wikipedia.org/wiki/Pritzker_Architecture_Prize",
            },
            {
                "ids": ["a1"],
                "role": "assistant",
                "justification": "The opening date is repeated in hop 3's evidence.",
                "new_content": "Hop 1 done: architect Jørn Utzon (competition won 1957).",
            },
        ]
    if hop == 4:
        return [
            {
                "ids": ["a3", "o3"],
                "role": "assistant",
                "justification": "Keep the construction timeline and cost.",
                # Loses "20 October 1973", the one date the question needs.
                "new_content": "Hop 3 done: construction began March 1959; Utzon resigned "
                "February 1966; ten years late, A$102 million.",
            },
            {
                "ids": ["a4", "o4"],
                "justification": "The resignation side track serves no open hop.",
                "new_content": "",
            },
        ]
    return []


def opera_research(run: Run) -> None:
    """Seed 003: a multi-hop research agent whose context an external manager edits."""
    state: dict[str, Any] = {"managed": True}
    session = run.client.session(
        run.session_id,
        agent="deep-research-agent",
        model="gpt-4o",
        encoding="cl100k_base",
        budget={"max_tokens": 4000, "reserved_tokens": 500},
        metadata={"seed": "003", "benchmark": "multi-hop web QA"},
    )
    hook = EditHook(session)
    context: list[Message] = [
        msg("sys", "system", fixtures.RESEARCH_SYSTEM),
        msg("q", "user", fixtures.RESEARCH_QUESTION),
    ]
    restored: list[Message] = []

    def on_set_mode(directive: Directive) -> str:
        if directive.mode == "full":
            state["managed"] = False
            return "edit manager off: the agent sees its whole trajectory"
        state["managed"] = True
        return "edit manager on"

    def on_restore(directive: Directive) -> str:
        if not directive.originals:
            raise Reject("the server sent no originals")
        restored.extend({**m, "id": mid} for mid, m in directive.originals.items())
        return "originals go back into the context before the next step"

    session.on_set_mode = on_set_mode
    session.on_restore = on_restore

    def manage(hop: int) -> None:
        nonlocal context
        session.poll()
        if restored:
            present = {m["id"] for m in context}
            back = [m for m in restored if m["id"] not in present]
            restored.clear()
            if back:
                session.record_step(context, after=context + back, reason="engineer restored")
                context = context + back
        edits = _research_edits(hop) if state["managed"] else []
        context = hook.apply(context, edits, reason=f"manager pass before agent step {hop + 1}")

    manage(0)
    for hop, (thought, query, results) in enumerate(fixtures.RESEARCH_SEARCHES, 1):
        context.append(msg(f"a{hop}", "assistant", f"{thought}\nsearch({query!r})"))
        context.append(
            msg(f"o{hop}", "user", "Observation: " + fixtures.search_results(query, results))
        )
        manage(hop)
        if not run.pause():
            break
    hops = len(fixtures.RESEARCH_SEARCHES)
    for n in range(1 + len(run.follow_ups())):
        text = "\n".join(str(m["content"]) for m in context)
        if "20 October 1973" in text:
            answer = "ANSWER: 2003, 30 years after the official opening on 20 October 1973."
        else:
            answer = "ANSWER: 2003, 44 years after construction began in 1959 (no opening date)."
        context.append(msg(f"a{hops + 1 + n}", "assistant", answer))
        manage(hops + 1 + n)
        if n == len(run.follow_ups()) or not run.pause(2):
            break
    correct = any("30 years" in str(m["content"]) for m in context)
    session.end("succeeded" if correct else "failed", 1.0 if correct else 0.0)


# ---------------------------------------------------------------- plain-504-loop (generic)


def plain_504_loop(run: Run) -> None:
    """An OpenAI-style loop with no context manager; record_step only. It overruns its budget."""
    strategy = {"mode": "full"}

    def on_set_mode(directive: Directive) -> str:
        if directive.mode not in ("full", "sliding", "summary"):
            raise Reject("this loop can keep everything (full), a window (sliding) or "
                         "one-line tool results (summary)")  # fmt: skip
        strategy["mode"] = directive.mode
        return f"compacting as {directive.mode} from the next call"

    session = run.client.session(
        run.session_id,
        agent="plain-loop",
        model="gpt-4o",
        encoding="cl100k_base",
        mode="full",
        budget={"max_tokens": 6000, "reserved_tokens": 500},
        metadata={"framework": "none (OpenAI chat messages)", "task": "nginx 504 hunt"},
        on_set_mode=on_set_mode,
    )
    access_log, _ = fixtures.nginx_access_log()
    calls = [
        ("read_file", access_log),
        ("grep", fixtures.nginx_error_grep()),
        ("grep", fixtures.nginx_error_grep()),
        ("grep", fixtures.NGINX_CONF_GREP),
        ("kubectl_logs", fixtures.inventory_pod_logs()),
        ("http_get", fixtures.prometheus_pool_query()),
    ]
    messages: list[Message] = [
        {"role": "system", "content": "You debug the shop platform. Quote error codes exactly."},
        {"role": "user", "content": f"Why does {fixtures.INCIDENT_ORDER} get a 504 at checkout?"},
    ]
    for n in run.follow_ups():
        calls.append(calls[1 + n % 5])
    for n, (tool, output) in enumerate(calls, 1):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": f"call_{n}", "type": "function",
                                "function": {"name": tool, "arguments": "{}"}}],
            }
        )  # fmt: skip
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "name": tool,
                         "content": output})  # fmt: skip
        session.poll()
        compacted = _compact(messages, strategy["mode"])
        if compacted is messages:
            session.record_step(messages, reason="full mode: nothing is ever compacted")
        else:
            session.record_step(messages, after=compacted, reason=f"{strategy['mode']} compaction")
            messages = compacted
        if not run.pause(1 if n <= 6 else 2):
            break
    messages.append({"role": "assistant", "content": "Root cause: inventory-svc pool exhausted."})
    session.record_step(messages)
    session.end("succeeded", 0.6)


def _compact(messages: list[Message], mode: str) -> list[Message]:
    if mode == "sliding" and len(messages) > 8:
        return messages[:2] + messages[-6:]
    if mode == "summary":
        out = []
        for k, m in enumerate(messages):
            if m["role"] == "tool" and k < len(messages) - 2 and len(m["content"]) > 300:
                first = m["content"].splitlines()[0][:200]
                m = {**m, "content": f"[{m.get('name')}: {first} ...]"}
            out.append(m)
        if any(a is not b for a, b in zip(out, messages, strict=True)):
            return out
    return messages


# ================================================================ the fleet

AGENTS: dict[str, Callable[[Run], None]] = {
    "nginx-504-hunt": nginx_504_hunt,
    "order-audit": order_audit,
    "chat-sliding": customer_chat("sliding"),
    "chat-summary": customer_chat("summary"),
    "chat-hybrid": customer_chat("hybrid"),
    "warranty-rag": warranty_rag,
    "opera-research": opera_research,
    "plain-504-loop": plain_504_loop,
}


def run_fleet(
    client: Client,
    *,
    names: Sequence[str] = tuple(AGENTS),
    prefix: str | None = None,
    pace: float = 0.05,
    forever: bool = False,
    linger: int = 40,
    stop: threading.Event | None = None,
    log: Callable[[str], None] = lambda line: None,
) -> list[str]:
    """Run the named agents, one thread each; returns the session ids of their first runs.

    With `forever`, each agent starts a new session (id ``<prefix><name>-<n>``)
    whenever one ends, until `stop` is set.
    """
    stop = stop or threading.Event()
    prefix = prefix if prefix is not None else f"fleet-{datetime.now(UTC):%Y%m%d-%H%M%S}-"
    first = [f"{prefix}{name}" for name in names]

    def agent_loop(name: str) -> None:
        generation = 0
        while not stop.is_set():
            sid = f"{prefix}{name}" + (f"-{generation + 1}" if generation else "")
            log(f"{name}: session {sid}")
            try:
                AGENTS[name](Run(client, sid, pace, stop, forever, linger, log))
            except Exception as exc:  # one broken agent must not stop the fleet
                log(f"{name}: {type(exc).__name__}: {exc}")
            generation += 1
            if not forever:
                return

    threads = [
        threading.Thread(target=agent_loop, args=(name,), name=f"agent-{name}", daemon=True)
        for name in names
    ]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.5)
    except KeyboardInterrupt:
        stop.set()
        for thread in threads:
            thread.join(5)
    return first


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m contextview.demo.fleet",
        description="Run scripted agents through the contextview SDK against a server.",
    )
    parser.add_argument("--url", required=True, help="the server's base URL")
    parser.add_argument("--key", required=True, help="a project key that may ingest")
    parser.add_argument("--forever", action="store_true", help="keep agents live on the server")
    parser.add_argument(
        "--pace", type=float, default=None,
        help="seconds between steps (default 0.05, or 2 with --forever)",
    )  # fmt: skip
    parser.add_argument(
        "--linger", type=int, default=40,
        help="with --forever: follow-up turns before a session ends and a new one starts",
    )  # fmt: skip
    parser.add_argument("--only", default="", help=f"comma-separated subset of {', '.join(AGENTS)}")
    parser.add_argument("--prefix", default=None, help="session id prefix (default: time-based)")
    parser.add_argument("--spool", default=None, help="folder for the SDK's on-disk spool")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(AGENTS)
    unknown = [n for n in names if n not in AGENTS]
    if unknown:
        print(f"unknown agents: {', '.join(unknown)}", file=sys.stderr)
        return 2
    pace = args.pace if args.pace is not None else (2.0 if args.forever else 0.05)
    client = Client(args.url, args.key, spool_dir=args.spool, poll_interval=2.0)
    started = time.monotonic()
    run_fleet(
        client,
        names=names,
        prefix=args.prefix,
        pace=pace,
        forever=args.forever,
        linger=args.linger,
        log=lambda line: print(line, flush=True),
    )
    delivered = client.flush(60)
    client.close()
    # Read once closed: an agent still finishing its step when Ctrl-C stopped the fleet
    # may have recorded into the closing client, which counts what it dropped.
    stats = client.stats
    print(
        f"fleet: {len(names)} agents in {time.monotonic() - started:.1f} s; "
        + ", ".join(f"{k} {v}" for k, v in stats.items()),
        flush=True,
    )
    return 0 if delivered and stats["rejected"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
