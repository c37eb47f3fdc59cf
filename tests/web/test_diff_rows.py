"""The side-by-side rows of the step view, from plain messages (no database)."""

from __future__ import annotations

from contextview.core.model import Message
from contextview.web.selectors import FoldInfo, diff_rows


def msg(mid: str, text: str, role: str = "user") -> Message:
    return Message(id=mid, role=role, content=text, partition="question")


def rows_of(
    before: list[Message], after: list[Message], **kw: object
) -> list[tuple[str, str | None, str | None]]:
    rows = diff_rows(
        before, after, tokens_before=[1] * len(before), tokens_after=[1] * len(after), **kw
    )
    return [
        (r.kind, r.left.message.id if r.left else None, r.right.message.id if r.right else None)
        for r in rows
    ]


def test_it_shows_a_merge_beside_the_messages_it_replaced() -> None:
    before = [msg("sys", "You help."), msg("h1", "Hop 1: Paris"), msg("h2", "Hop 2: 1973")]
    after = [msg("sys", "You help."), msg("m1", "Paris, 20 October 1973")]
    folds = {"h1": FoldInfo("fold", "merge", "m1"), "h2": FoldInfo("fold", "merge", "m1")}
    rows = rows_of(before, after, folds=folds, results={"m1": ("merge", ["h1", "h2"])})
    assert rows == [("same", "sys", "sys"), ("merged", "h1", "m1"), ("folded", "h2", None)]


def test_it_shows_a_moved_message_once_where_it_went() -> None:
    before = [msg("a", "order SO20260101007"), msg("b", "member id A12345"), msg("c", "504")]
    after = [msg("b", "member id A12345"), msg("c", "504"), msg("a", "order SO20260101007")]
    rows = diff_rows(before, after, tokens_before=[1, 1, 1], tokens_after=[1, 1, 1])
    assert [(r.kind, r.right.message.id if r.right else None) for r in rows] == [
        ("same", "b"),
        ("same", "c"),
        ("moved", "a"),
    ]
    assert rows[2].label == "moved from #1 to #3"


def test_it_diffs_a_rewritten_message_word_by_word() -> None:
    rows = diff_rows(
        [msg("u1", "Why does order SO20260101007 time out?")],
        [msg("u1", "Why does order SO20260101007 time out at checkout?")],
        tokens_before=[9],
        tokens_after=[12],
        results={"u1": ("rewrite", ["u1"])},
    )
    assert rows[0].kind == "changed" and rows[0].fold_result == "u1"
    assert ("insert", " at checkout") in (rows[0].right.pieces or [])
    assert rows[0].label == "rewritten (rewrite)"


def test_it_tells_dropped_from_removed_and_reloaded_from_added() -> None:
    before = [msg("a1", "thinking"), msg("x", "stale")]
    after = [msg("log", "nginx 504", role="tool"), msg("new", "hello")]
    rows = rows_of(before, after, folds={"a1": FoldInfo("drop", "drop", None)}, reloaded={"log"})
    assert [(k, left, right) for k, left, right in rows] == [
        ("reloaded", "a1", "log"),
        ("removed", "x", "new"),
    ]
    both = diff_rows(
        before, after, tokens_before=[1, 1], tokens_after=[1, 1],
        folds={"a1": FoldInfo("drop", "drop", None)}, reloaded={"log"},
    )  # fmt: skip
    assert [(r.left_kind, r.right_kind) for r in both] == [
        ("dropped", "reloaded"),
        ("removed", "added"),
    ]
