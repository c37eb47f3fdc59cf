"""Whole numbers written as text, read only from the ASCII digits they must be.

``str.isdigit`` is true of characters ``int`` refuses ("²", "①") and of digits of
other scripts, and ``int`` refuses a text of more than some 4,300 digits: a number a
client writes in a cursor, a parameter or an attribute is read here, or not at all.
"""

from __future__ import annotations

import re

# As many digits as a PostgreSQL bigint always holds.
BIGINT_DIGITS = 18


def digits_value(text: str, most: int = BIGINT_DIGITS) -> int | None:
    """The number `text` writes in ASCII digits alone, at most `most` of them; None
    for anything else (a sign, a space, another script's digits, nothing)."""
    if 0 < len(text) <= most and text.isascii() and text.isdigit():
        return int(text)
    return None


def signed_value(text: str, most: int = BIGINT_DIGITS) -> int | None:
    """`digits_value` of `text`, negative when a "-" comes before its digits."""
    number = digits_value(text.removeprefix("-"), most)
    if number is None:
        return None
    return -number if text.startswith("-") else number


# A count in words an agent or an importer wrote: digits standing alone (not part of an
# id, a version, a date or a number already marked), right before what they count.
_COUNT = re.compile(
    r"(?<![\w.,:/#-])(\d{4,})(?![\w.,:/-])"
    r"(?=\s+(?:tokens?|tok|messages?|items?|lines?|characters?|chars|bytes|words|steps?|calls?)\b)"
)


def counts_marked(text: str) -> str:
    """`text` with the counts it writes in thousands ("compaction (trigger: auto, 167731
    tokens reported before)" reads "167,731 tokens"): for showing a reason, which is
    stored as it was written. Ids, years and other numbers are left as they are."""
    return _COUNT.sub(lambda m: f"{int(m.group(1)):,}", text)
