from __future__ import annotations

import json
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from contextview.core.diff import diff_contexts, tokenize, word_diff
from contextview.core.model import Message
from tests.core.factories import NGINX_LOG, SUMMARY, contexts, msg, seed_context, texts


def test_it_splits_words_punctuation_whitespace_and_each_cjk_character() -> None:
    assert tokenize("order SO20260101007, 超时3s tool_result_32!") == [
        "order",
        " ",
        "SO20260101007",
        ",",
        " ",
        "超",
        "时",
        "3s",
        " ",
        "tool_result_32",
        "!",
    ]


def test_it_diffs_words_not_characters() -> None:
    words = word_diff("inventory answered 504 after 3s", "inventory answered 502 after 3s")
    assert words == [
        ("equal", "inventory answered "),
        ("delete", "504"),
        ("insert", "502"),
        ("equal", " after 3s"),
    ]


def test_it_diffs_chinese_by_character() -> None:
    words = word_diff("订单服务返回超时", "订单服务返回成功")
    assert words == [("equal", "订单服务返回"), ("delete", "超时"), ("insert", "成功")]


def test_it_reports_added_removed_changed_and_moved_messages() -> None:
    a = seed_context()
    summary = msg("sum_1", SUMMARY, "tool")
    rewritten = replace(a[3], content="The inventory service answers 504 after 3.002 s.")
    b = [a[1], a[0], summary, rewritten]
    d = diff_contexts(a, b)
    assert [m.id for m in d.added] == ["sum_1"]
    assert [m.id for m in d.removed] == ["tool_result_32"]
    assert [(c.id, c.words[-2:]) for c in d.changed] == [
        ("a1", [("insert", ".002"), ("equal", " s.")])
    ]
    # sys and u1 swapped: one of them moved, the other kept its place in the order
    assert [(m.id, m.from_index, m.to_index) for m in d.moved] in (
        [("sys", 0, 1)],
        [("u1", 1, 0)],
    )
    assert d.unchanged == 1


def test_it_calls_moved_only_what_left_the_common_order() -> None:
    a = [msg(f"m{k}", f"line {k}") for k in range(6)]
    b = a[1:] + a[:1]
    d = diff_contexts(a, b)
    assert [(m.id, m.from_index, m.to_index) for m in d.moved] == [("m0", 0, 5)]
    assert d.unchanged == 5


def test_it_counts_a_pin_as_a_change_with_equal_words() -> None:
    a = [msg("u1", "member id A12345")]
    d = diff_contexts(a, [replace(a[0], pinned=True)])
    assert [(c.id, c.words) for c in d.changed] == [("u1", [("equal", "member id A12345")])]


def test_it_renders_as_json_ready_dicts() -> None:
    a = seed_context()
    b = [a[0], a[1], msg("sum_1", SUMMARY, "tool"), replace(a[3], content="504 after 3 s.")]
    out = diff_contexts(a, b).as_dict()
    assert json.loads(json.dumps(out)) == out
    assert out["added"] == [
        {"id": "sum_1", "role": "tool", "partition": "tool", "content": SUMMARY}
    ]
    assert out["removed"][0] == {
        "id": "tool_result_32",
        "role": "tool",
        "partition": "tool",
        "content": NGINX_LOG,
    }
    assert out["changed"][0]["id"] == "a1"
    assert out["changed"][0]["words"][0][0] in ("equal", "delete", "insert")
    assert (out["moved"], out["unchanged"]) == ([], 2)


@given(contexts())
def test_it_finds_nothing_but_unchanged_between_a_context_and_itself(a: list[Message]) -> None:
    d = diff_contexts(a, list(a))
    assert (d.added, d.removed, d.changed, d.moved, d.unchanged) == ([], [], [], [], len(a))


@given(contexts(), contexts())
def test_it_adds_and_removes_exactly_the_set_differences(
    a: list[Message], b: list[Message]
) -> None:
    d = diff_contexts(a, b)
    ids_a, ids_b = {m.id for m in a}, {m.id for m in b}
    assert {m.id for m in d.added} == ids_b - ids_a
    assert {m.id for m in d.removed} == ids_a - ids_b
    shared = ids_a & ids_b
    assert {c.id for c in d.changed} | {m.id for m in d.moved} <= shared
    assert d.unchanged == len(shared - {c.id for c in d.changed} - {m.id for m in d.moved})


@given(st.permutations([msg(f"m{k}", "x") for k in range(8)]))
def test_it_keeps_the_longest_common_order_unmoved(b: list[Message]) -> None:
    a = [msg(f"m{k}", "x") for k in range(8)]
    d = diff_contexts(a, b)
    stayed = [m.id for m in b if m.id not in {x.id for x in d.moved}]
    # what did not move keeps a's order, and nothing shorter would do
    assert stayed == sorted(stayed, key=lambda x: int(x[1:]))
    assert len(stayed) == _lcs_length([m.id for m in a], [m.id for m in b])


def _lcs_length(x: list[str], y: list[str]) -> int:
    table = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
    for i, xi in enumerate(x):
        for j, yj in enumerate(y):
            table[i + 1][j + 1] = (
                table[i][j] + 1 if xi == yj else max(table[i][j + 1], table[i + 1][j])
            )
    return table[-1][-1]


def test_two_long_lines_that_differ_throughout_are_not_matched_word_by_word() -> None:
    # Minified JSON in Chinese (a token a character) rewritten as another: what both
    # start and end with stays equal, the middle is replaced.
    def orders(status: str) -> str:
        return ", ".join(f'{{"id": "SO2026{i:05d}", "at": "{status}广州{i}"}}' for i in range(400))

    before = f"query_orders: [{orders('已揽收')}] done"
    after = f"query_orders: [{orders('运输中')}] done"
    words = word_diff(before, after)
    assert "".join(t for tag, t in words if tag != "insert") == before
    assert "".join(t for tag, t in words if tag != "delete") == after
    assert [tag for tag, _ in words] == ["equal", "delete", "insert", "equal"]
    assert words[0][1].startswith("query_orders: [") and words[-1][1].endswith("] done")


def test_a_long_result_against_its_short_summary_keeps_the_words_they_share() -> None:
    before = "orders: " + ", ".join(
        f'{{"id": "SO2026{i:05d}", "city": "广州"}}' for i in range(300)
    )
    after = "orders: 300 in all, SO202600007 stalled in 广州"
    words = word_diff(before, after)
    assert "".join(t for tag, t in words if tag != "insert") == before
    assert "".join(t for tag, t in words if tag != "delete") == after
    assert ("equal", "orders: ") == words[0]


@given(texts, texts)
def test_it_rebuilds_both_texts_from_the_word_diff(a: str, b: str) -> None:
    words = word_diff(a, b)
    assert "".join(t for tag, t in words if tag != "insert") == a
    assert "".join(t for tag, t in words if tag != "delete") == b
    assert all(tag in ("equal", "insert", "delete") for tag, _ in words)


@given(st.text())
def test_it_tokenizes_any_text_losslessly(text: str) -> None:
    assert "".join(tokenize(text)) == text


def test_it_matches_a_message_rewritten_under_a_new_id_only_when_told() -> None:
    a = [msg("s", "You debug orders.", "system"), msg("t1", NGINX_LOG, "tool")]
    cut = msg("t1-cut", NGINX_LOG[:40], "tool")
    b = [a[0], cut]
    plain = diff_contexts(a, b)
    assert ([m.id for m in plain.removed], [m.id for m in plain.added]) == (["t1"], ["t1-cut"])

    told = diff_contexts(a, b, replaced={"t1-cut": "t1"})
    assert (told.removed, told.added, told.unchanged) == ([], [], 1)
    (changed,) = told.changed
    assert (changed.id, changed.before.id, changed.after.id) == ("t1-cut", "t1", "t1-cut")
    # An id still in both contexts is that message: the pairing does not apply.
    assert diff_contexts(a, [*a, cut], replaced={"t1-cut": "t1"}).added == [cut]
