from __future__ import annotations

import pytest

from contextview.core.numbers import counts_marked, digits_value, signed_value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("42", 42),
        ("9" * 18, 10**18 - 1),
        ("9" * 19, None),  # more than a bigint always holds
        ("²", None),  # a digit to str.isdigit, not to int()
        ("٣", None),  # another script's three
        ("-1", None),
        (" 1", None),
        ("", None),
        ("1" * 5000, None),  # int() refuses texts this long
    ],
)
def test_it_reads_ascii_digits_alone(text: str, value: int | None) -> None:
    assert digits_value(text) == value


def test_it_reads_as_many_digits_as_asked() -> None:
    assert digits_value("1" * 30, most=30) == int("1" * 30)


@pytest.mark.parametrize(
    ("text", "value"),
    [("-1", -1), ("7", 7), ("-" + "9" * 18, -(10**18 - 1)), ("--1", None), ("-", None),
     ("+1", None), ("-²", None), ("1-", None)],
)  # fmt: skip
def test_it_reads_a_sign_before_the_digits(text: str, value: int | None) -> None:
    assert signed_value(text) == value


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("compaction (trigger: auto, 167731 tokens reported before)",
         "compaction (trigger: auto, 167,731 tokens reported before)"),
        ("kept 1500 tokens of 2400000 tokens", "kept 1,500 tokens of 2,400,000 tokens"),
        ("folded 1200 messages", "folded 1,200 messages"),
        # Ids, years, versions, hashes and small or marked counts stay as written.
        ("order SO20260101007 lost since 2026", "order SO20260101007 lost since 2026"),
        ("tool_result_32000 tokens", "tool_result_32000 tokens"),
        ("v2.10000 tokens", "v2.10000 tokens"),
        ("sha=dc9e82a0, 12 tokens, 21,445 tokens", "sha=dc9e82a0, 12 tokens, 21,445 tokens"),
        ("ticket 48213 is open", "ticket 48213 is open"),
    ],
)  # fmt: skip
def test_it_marks_the_thousands_of_the_counts_a_text_writes(text: str, shown: str) -> None:
    assert counts_marked(text) == shown
