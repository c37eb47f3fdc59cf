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


def test_it_names_what_a_compaction_folded_into_once_by_its_first_line() -> None:
    summary_id = "01ea0ad0-925d-4fd3-8171-cb8027dab4f5"
    before = [msg("sys", "You help.", role="system")] + [
        msg(f"t{k}", f"Exit code {k}\nstack trace", role="tool") for k in range(12)
    ]
    summary = msg(summary_id, "This session continues an earlier one.")
    after = [before[0], summary]
    folds = {f"t{k}": FoldInfo("fold", "summarize", summary_id) for k in range(12)}
    rows = diff_rows(
        before,
        after,
        tokens_before=[1] * len(before),
        tokens_after=[1, 1],
        folds=folds,
        results={summary_id: ("summarize", [f"t{k}" for k in range(12)])},
    )
    folded = [r for r in rows if r.left_kind == "folded"]
    assert len(folded) == 12
    labels = [r.label for r in folded]
    # The summary is named once, by its role and first line; the uuid is only a title.
    named = "user: “This session continues an earlier one.”"
    assert sum(named in label for label in labels) == 1
    assert labels[0].startswith(f"folded into {named} (summarize; 1 of 12 originals)")
    assert labels[1:] == [
        f"folded into the same message (summarize; {k} of 12 originals)" for k in range(2, 13)
    ]
    assert not any(summary_id in label for label in labels)
    assert all(r.label_title == f"folded into {summary_id}" for r in folded)
