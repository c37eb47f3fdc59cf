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


class Ranged:
    """`ranged` of a stream of lists, each mostly the one before it with numbers added.

    A session's contexts come in step order: a step's before is the after of the step
    before it, and its after is its before with the reply added. The list given again
    is answered from the last answer, and a list that starts with the last one
    (compared at C speed) from the last answer and its new numbers alone, so a stream
    costs its new numbers, not every context's length again. Any other list is
    ranged whole. Answers are shared: callers only read them.
    """

    def __init__(self) -> None:
        self._last: list[int] = []
        self._answer: list[int | list[int]] = []

    def __call__(self, numbers: list[int]) -> list[int | list[int]]:
        last = self._last
        if numbers is not last:
            held = len(last)
            if held and len(numbers) > held and numbers[:held] == last:
                self._answer = _joined(self._answer, ranged(numbers[held:]))
            else:
                self._answer = ranged(numbers)
            self._last = numbers
        return self._answer


def _joined(head: list[int | list[int]], tail: list[int | list[int]]) -> list[int | list[int]]:
    """`ranged` of the numbers of `head` then those of `tail` (both `ranged`): only the
    run that ends one and the run that starts the other can become one."""
    if not head or not tail:
        return head + tail
    ends, end_run = _last_run(head)
    starts, start_run = _first_run(tail)
    if start_run[0] != end_run[1] + 1:
        return head + tail
    first, last = end_run[0], start_run[1]
    run: list[int | list[int]] = (
        [[first, last]] if last - first + 1 >= RANGE_FROM else list(range(first, last + 1))
    )
    return head[: len(head) - ends] + run + tail[starts:]


def _last_run(items: list[int | list[int]]) -> tuple[int, tuple[int, int]]:
    """(how many of the last items write the last run of consecutive numbers, that
    run as (first, last)). A run shorter than RANGE_FROM is written number by number,
    so it is at most RANGE_FROM - 1 numbers long."""
    item = items[-1]
    if isinstance(item, list):
        return 1, (item[0], item[1])
    n = 1
    while n < min(len(items), RANGE_FROM - 1):
        prior = items[-1 - n]
        if not isinstance(prior, int) or prior != item - n:
            break
        n += 1
    return n, (item - n + 1, item)


def _first_run(items: list[int | list[int]]) -> tuple[int, tuple[int, int]]:
    """`_last_run`, of the first items."""
    item = items[0]
    if isinstance(item, list):
        return 1, (item[0], item[1])
    n = 1
    while n < min(len(items), RANGE_FROM - 1):
        later = items[n]
        if not isinstance(later, int) or later != item + n:
            break
        n += 1
    return n, (item, item + n - 1)
