"""Values numbered in order of first appearance, so an export carries each once.

Reports and exports of long sessions repeat the same messages (a context is resent
on every call): written in full at every step, a 2.8 MB transcript became a 68 MB
report. A ``Distinct`` gives each distinct value a number; a stream writes a
value where it first appears, under its number, and only the number after that.
It keeps a 16-byte digest per value, not the values, so streams stay small in
memory.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


class Distinct:
    def __init__(self) -> None:
        self._numbers: dict[bytes, int] = {}
        self._new: dict[str, Any] = {}

    def __len__(self) -> int:
        return len(self._numbers)

    def ref(self, value: Any) -> int:
        """The value's number (from 1); a value not seen before is kept for `new()`."""
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        number = self._numbers.get(key)
        if number is None:
            number = self._numbers[key] = len(self._numbers) + 1
            self._new[str(number)] = value
        return number

    def refs(self, values: list[Any]) -> list[int]:
        return [self.ref(v) for v in values]

    def new(self) -> dict[str, Any]:
        """The values first seen since the last call, by number (as JSON keys are text)."""
        new, self._new = self._new, {}
        return new


# The fewest consecutive numbers `ranged` writes as one range: two would be no shorter.
RANGE_FROM = 3


def ranged(numbers: list[int]) -> list[int | list[int]]:
    """`numbers` with each run of RANGE_FROM or more consecutive ones, ascending, as
    ``[first, last]``. A context resent at every call holds the numbers its messages
    got as they came, in order, so a step of a context of thousands of messages is
    written in a few items rather than thousands (`unranged` reads it back)."""
    out: list[int | list[int]] = []
    n, count = 0, len(numbers)
    while n < count:
        end = n + 1
        while end < count and numbers[end] == numbers[end - 1] + 1:
            end += 1
        if end - n >= RANGE_FROM:
            out.append([numbers[n], numbers[end - 1]])
        else:
            out.extend(numbers[n:end])
        n = end
    return out


def unranged(items: list[int | list[int]]) -> list[int]:
    """The numbers `ranged` wrote."""
    out: list[int] = []
    for item in items:
        if isinstance(item, list):
            out.extend(range(item[0], item[1] + 1))
        else:
            out.append(item)
    return out
