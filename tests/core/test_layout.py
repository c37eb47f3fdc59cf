"""What a context is made of, and where its pinned texts and task sit."""

from __future__ import annotations

from contextview.core.layout import (
    composition,
    first_line,
    one_line,
    placements,
    task_line,
    third_of,
)
from tests.core.factories import msg


def test_it_splits_a_context_by_kind_with_thinking_apart_and_unseen_tokens() -> None:
    thinking = [
        {"type": "thinking", "thinking": "the log says 504"},
        {"type": "text", "text": "It is the inventory service."},
    ]
    context = [
        msg("sys", "You debug orders.", "system"),
        msg("u", "Why does SO20260101007 time out?", "user"),
        msg("t", "504 after 3002ms", "tool", tool="read_log"),
        msg("a", thinking, "assistant"),
    ]
    out = composition(
        context, [5, 10, 40, 30], count=lambda text: len(text.split()), tools_tokens=700, unseen=900
    )
    assert out == {
        "unseen": 900,
        "tools": 700,
        "system": 5,
        "messages": 10 + 30 - 4,
        "tool_results": 40,
        "thinking": 4,
    }
    # A provider that counted less than the log holds hides nothing.
    assert composition(context[:1], [5], count=len, unseen=-3)["unseen"] == 0


def test_it_places_pinned_texts_and_the_task_in_thirds_of_the_context() -> None:
    context = [
        msg("sys", "You debug orders.", "system"),
        msg("task", "Refund order SO20260101007 for member A12345.", "user", partition="task"),
        msg("t1", "a long log " * 30, "tool", tool="read_log"),
        msg("note", "Remember: member id A12345 is a VIP.", "assistant"),
        msg("t2", "another long log " * 30, "tool", tool="read_log"),
        msg("pin", "Never refund twice.", "user", pinned=True),
    ]
    tokens = [10, 20, 300, 10, 300, 10]  # 650 in all: thirds at 216 and 433
    where = placements(context, tokens, pinned=["member id A12345", "not in it"])
    assert [(p.what, p.message, p.at, p.third) for p in where] == [
        ("task", "task", 10, "start"),
        ("pinned", "note", 330, "middle"),
        ("pinned", "pin", 640, "end"),
    ]
    assert where[1].text == "member id A12345"
    assert third_of(0, 0) == "start" and third_of(216, 650) == "start"
    assert third_of(217, 650) == "middle" and third_of(434, 650) == "end"


def test_it_reads_a_contexts_task_as_its_task_message_else_its_first_question() -> None:
    system = msg("sys", "You debug orders.", "system")
    results = msg("r", [{"type": "tool_result", "tool_use_id": "t1", "content": "504"}], "user")
    question = msg("u", "Why does order\n  SO20260101007   time out?", "user")
    task = msg("t", "Find why checkout fails.", "user", partition="task")
    assert task_line([system, results, question]) == "Why does order SO20260101007 time out?"
    assert task_line([system, question, task]) == "Find why checkout fails."
    assert task_line([system, msg("e", "", "user"), question]) == task_line([question])
    assert task_line([system, msg("a", "On it.", "assistant")]) == ""


def test_it_cuts_a_long_task_to_one_line_of_the_lists_width() -> None:
    line = one_line("word " * 100)
    assert len(line) == 200 and line.endswith("…") and "  " not in line
    assert one_line("short\n\ttask ") == "short task"
    # Cut after a word, the ellipsis follows it.
    assert first_line("line 7: order SO20260100007 shipped as TRK-400007", 40) == (
        "line 7: order SO20260100007 shipped as…"
    )
