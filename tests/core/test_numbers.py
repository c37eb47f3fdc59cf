from __future__ import annotations

import pytest

from contextview.core.numbers import digits_value, signed_value


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
