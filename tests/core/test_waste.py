"""Waste: tool results carried several times, or for many steps without use."""

from __future__ import annotations

from typing import Any

from contextview.core.calls import is_tool_result, said_text
from contextview.core.model import Message
from contextview.core.stats import TextCache
from contextview.core.waste import UNREFERENCED_MIN_STEPS, WasteTracker, waste_summary
from tests.core.factories import msg


def words(m: Message) -> int:
    return len(m.text.split())


SYS = msg("sys", "You look after the shop's orders.", "system")
ASK = msg("u0", "Which orders are stuck?", "user")
ORDERS = "SO20260101007 stuck for 48h at the warehouse"  # 7 tokens by words()
LOG = "GET /api/inventory/lock answered 504 after 3002ms"  # 6 tokens by words()


def run(
    contexts: list[list[Message]], tracker: WasteTracker | None = None, start: int = 0
) -> dict[int, dict[str, Any]]:
    """Each step's stats as the worker stores them: only the waste events."""
    tracker = tracker or WasteTracker()
    cache = TextCache()
    stats: dict[int, dict[str, Any]] = {}
    for index, before in enumerate(contexts[start:], start):
        events = tracker.step(index, before, words, cache)
        stats[index] = {"waste": events} if events else {}
    return stats


def test_it_sums_the_tokens_of_a_result_carried_twice_over_the_steps_that_carry_it() -> None:
    first = msg("t1", ORDERS, "tool", tool="search")
    again = msg("t2", ORDERS, "tool", tool="search")
    head = [SYS, ASK, first]
    twice = [*head, msg("a1", "Let me look again.", "assistant"), again]
    contexts = [head, twice, [*twice, msg("u1", "Go on.", "user")], [*twice, msg("u2", "And?")]]
    stats = run(contexts)
    # The second copy is billed for nothing at steps 1, 2 and 3.
    assert [s.get("waste", {}).get("duplicate_tokens", 0) for s in stats.values()] == [0, 7, 7, 7]
    summary = waste_summary(stats)
    assert summary["duplicate_results"] == [
        {"tool": "search", "message": "t1", "first_at": 1, "copies": 2, "tokens": 21}
    ]


def test_it_lists_a_result_never_referred_to_again_with_its_rebilled_tokens() -> None:
    used = msg("t1", ORDERS, "tool", tool="search")
    unused = msg("t2", LOG, "tool", tool="read_log")
    contexts = [[SYS, ASK, used, unused]]
    for k in range(1, 8):
        # The agent writes about the order at step 2, never about the log.
        text = "SO20260101007 is stuck at the warehouse." if k == 2 else f"Working, part {k}."
        contexts.append([*contexts[-1], msg(f"a{k}", text, "assistant")])
    summary = waste_summary(run(contexts))
    # Carried at steps 0..7: read once, then re-billed 7 times.
    assert summary["unreferenced_results"] == [
        {"tool": "read_log", "message": "t2", "added_at": 0, "steps": 8, "tokens": 6 * 7}
    ]
    assert summary["duplicate_results"] == []
    assert summary["rebilled_tokens"] == 42


def test_it_counts_a_result_that_leaves_early_as_no_waste() -> None:
    log = msg("t1", LOG, "tool", tool="read_log")
    contexts = [[SYS, ASK, log]] + [
        [SYS, ASK, msg(f"a{k}", f"Step {k} done.", "assistant")] for k in range(1, 8)
    ]
    stats = run(contexts)
    assert stats[1]["waste"]["gone"] and UNREFERENCED_MIN_STEPS > 1
    assert waste_summary(stats)["unreferenced_results"] == []


def test_it_takes_a_tool_call_passing_an_entity_as_a_reference() -> None:
    log = msg("t1", LOG, "tool", tool="read_log")
    calls = [
        {"id": "c1", "function": {"name": "curl", "arguments": '{"path": "/api/inventory/lock"}'}}
    ]
    contexts = [[SYS, ASK, log]]
    for k in range(1, 8):
        new = msg(
            f"a{k}", "Retrying.", "assistant", extra={"tool_calls": calls} if k == 3 else None
        )
        contexts.append([*contexts[-1], new])
    stats = run(contexts)
    assert stats[3]["waste"]["referenced"]
    assert waste_summary(stats)["unreferenced_results"] == []


def test_it_resumes_mid_session_from_the_stored_events_and_gets_the_same_answer() -> None:
    first = msg("t1", ORDERS, "tool", tool="search")
    log = msg("t2", LOG, "tool", tool="read_log")
    contexts = [[SYS, ASK, first, log]]
    for k in range(1, 10):
        extra = [msg(f"r{k}", ORDERS, "tool", tool="search")] if k == 4 else []
        contexts.append([*contexts[-1], msg(f"a{k}", f"Working, part {k}.", "assistant"), *extra])
    whole = run(contexts)
    # A new worker run starts at step 6: it replays steps 0..5, then carries on.
    tracker = WasteTracker()
    for index in range(6):
        tracker.replay(index, whole[index].get("waste"))
    tracker.resume(contexts[5], TextCache())
    resumed = {**{i: whole[i] for i in range(6)}, **run(contexts, tracker, start=6)}
    assert resumed == whole
    summary = waste_summary(whole)
    assert summary["duplicate_results"][0]["tokens"] == 7 * 6  # steps 4..9
    assert [u["message"] for u in summary["unreferenced_results"]] == ["t1", "t2"]


def test_it_finds_the_same_references_told_which_keys_messages_say_or_not_all() -> None:
    log = msg("t1", LOG, "tool", tool="read_log")
    orders = msg("t2", ORDERS, "tool", tool="search")
    contexts = [[SYS, ASK, log, orders]]
    for k in range(1, 8):
        text = "Order SO20260101007 again, after the 504." if k in (2, 5) else f"Part {k}."
        contexts.append([*contexts[-1], msg(f"a{k}", text, "assistant")])
    whole = run(contexts)
    cache = TextCache()
    said = [
        key
        for context in contexts
        for m in context
        if not is_tool_result(m)
        for key in cache.text_keys(said_text(m))
    ]
    assert whole[2]["waste"]["referenced"]
    for expected in (said, said[:1], []):
        tracker = WasteTracker()
        tracker.expect(expected)
        assert run(contexts, tracker) == whole


def test_it_looks_only_at_what_changed_between_contexts() -> None:
    seen: list[str] = []

    class Counting(TextCache):
        def base_entities(self, text: str) -> list[str]:
            seen.append(text)
            return super().base_entities(text)

    log = msg("t1", LOG, "tool", tool="read_log")
    contexts = [[SYS, ASK, log]]
    for k in range(1, 30):
        contexts.append([*contexts[-1], msg(f"a{k}", f"Part {k}.", "assistant")])
    tracker, cache = WasteTracker(), Counting()
    for index, before in enumerate(contexts):
        tracker.step(index, before, words, cache)
    # The log once, and each assistant message once, when it arrives.
    assert len(seen) == 1 + 29


def test_what_a_message_says_is_its_text_when_the_model_reads_its_calls_arguments() -> None:
    # Arguments the model reads are in the text already, so the entity keys stored with
    # the content serve.
    read = Message(
        id="a1",
        role="assistant",
        content=[{"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "/srv/x.py"}}],
        partition="messages",
    )
    assert said_text(read) == read.text
    listed = Message(
        id="a2",
        role="assistant",
        content=None,
        partition="messages",
        extra={
            "tool_calls": [{"id": "c1", "function": {"name": "grep", "arguments": '{"q": "SO1"}'}}]
        },
    )
    assert said_text(listed) == listed.text
    unread = Message(
        id="a3",
        role="assistant",
        content=[{"type": "function_call", "name": "lookup", "args": {"order": "SO20260101007"}}],
        partition="messages",
    )
    # Arguments under a key of another spelling (Gemini's "args") are read too.
    assert "SO20260101007" in unread.text
    assert said_text(unread) == unread.text
