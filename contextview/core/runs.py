"""The ``$run`` codec: a context sent against the step before it, both directions.

A step's observation may name a base step (``obs["$base"]``, its index); then an
element ``{"$run": [start, count]}`` of ``obs.messages`` stands for the messages
at positions ``start .. start + count - 1`` of that step's after context, in
order. An agent that appends to its context sends one run and what it added.

The SDK, the OTLP receiver and the transcript importers encode (`runs_in`,
`run_element`, `encode_runs`); ingest expands (`expand_runs`). The format is the
contract's; it must not change.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from contextview.core.errors import InputError
from contextview.core.model import Message

RUN_KEY = "$run"
BASE_KEY = "$base"
# A single message found in the base goes by itself: a run element is no shorter.
MIN_RUN = 2

T = TypeVar("T")


def run_element(start: int, count: int) -> dict[str, list[int]]:
    """The wire element for base positions ``start .. start + count - 1``."""
    return {RUN_KEY: [start, count]}


def runs_in(positions: Sequence[int | None]) -> Iterator[tuple[int, int, int]]:
    """The runs a context can be sent as: ``(first, start, count)`` for each longest
    stretch of at least `MIN_RUN` messages at consecutive positions of the base.

    `positions[i]` is where message i of the context stands in the base, or None
    when it is not there (or not as it is).
    """
    first = 0
    n = len(positions)
    while first < n:
        start = positions[first]
        if start is None:
            first += 1
            continue
        end = first + 1
        while end < n and positions[end] == start + (end - first):
            end += 1
        if end - first >= MIN_RUN:
            yield first, start, end - first
        first = end


def base_positions(context: Sequence[Message], base: Sequence[Message]) -> list[int | None]:
    """Where each message of `context` stands, identical, in `base` (ids are unique
    within a context), or None."""
    where = {m.id: position for position, m in enumerate(base)}
    out: list[int | None] = []
    for m in context:
        at = where.get(m.id)
        out.append(at if at is not None and (base[at] is m or base[at] == m) else None)
    return out


def encode_runs(context: Sequence[T], positions: Sequence[int | None]) -> list[T | dict[str, Any]]:
    """`context` with each of its runs (`runs_in(positions)`) as one run element."""
    out: list[T | dict[str, Any]] = []
    done = 0
    for first, start, count in runs_in(positions):
        out.extend(context[done:first])
        out.append(run_element(start, count))
        done = first + count
    out.extend(context[done:])
    return out


def expand_runs(raw: Any, base: Sequence[Message], *, field: str) -> tuple[Any, int]:
    """A context sent against a base: each ``{"$run": [start, count]}`` element
    replaced by the messages at those positions of `base` (the base step's after);
    and how many of its first items are such messages, resolved already (a context
    that extends its base starts with a run of all of it).

    Anything that is not a list is returned as it is, for `parse_message_list` to
    report.
    """
    if not isinstance(raw, list):
        return raw, 0
    out: list[Any] = []
    resolved = 0
    for i, item in enumerate(raw):
        if type(item) is not dict or RUN_KEY not in item:
            out.append(item)
            continue
        span = item[RUN_KEY]
        where = f"{field}[{i}].{RUN_KEY}"
        if (
            len(item) != 1
            or type(span) is not list
            or len(span) != 2
            or not all(type(n) is int for n in span)
        ):
            raise InputError(where, "must be [start, count], two integers, and alone in its object")
        start, count = span
        if start < 0 or count < 1 or start + count > len(base):
            raise InputError(
                where, f"[{start}, {count}] is outside the base context of {len(base)} messages"
            )
        if resolved == len(out):
            resolved += count
        out.extend(base[start : start + count])
    return out, resolved
