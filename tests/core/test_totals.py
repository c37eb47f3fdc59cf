"""A session's totals kept step by step as a live session's steps come in (what a
worker carries from one run to the next) are its totals computed whole."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextview.core.model import Fold, Message, Operation
from contextview.core.totals import SessionTotals
from contextview.core.waste import WasteTracker
from tests.core.factories import msg
from tests.core.test_needs import ASK, SYS, Session, call, result, words


class WastefulSession(Session):
    """`Session`, with the waste the worker's walk follows along the same steps."""

    def __init__(self) -> None:
        super().__init__()
        self.waste = WasteTracker()

    def step(self, before: list[Message], *args: Any) -> Any:
        out = super().step(before, *args)
        events = self.waste.step(len(self.stats) - 1, before, words, self.cache)
        if events:
            out["waste"] = events
        return out


def _summary(n: int, of: Message, text: str) -> tuple[Message, Operation, Fold]:
    summary = msg(f"s{n}", text, "tool", tool="search")
    return (
        summary,
        Operation(op="summarize", targets=(of.id,), result=summary),
        Fold(0, "summarize", "fold", summary.id, (of,)),
    )


def amnesiac_session() -> dict[int, dict[str, Any]]:
    """Two summaries lose four order numbers; later steps ask for two of them (the
    second listed first), mention a third and fetch the first result again, and one
    result is carried twice."""
    s = WastefulSession()
    orders = "SO20260101001 SO20260101002 stuck; SO20260101003 SO20260101004 late"
    first = result(1, orders)
    context = [SYS, ASK, call(1), first]
    s.step(context)
    summary, op, fold = _summary(1, first, "Four orders have trouble.")
    s.step(context, [op], [fold])
    context = [SYS, ASK, call(1), summary]
    s.step([*context, msg("u2", "Where is SO20260101002?")])
    context = [*context, msg("u2", "Where is SO20260101002?")]
    second = result(3, "SO20260101009 refunded")
    s.step([*context, call(3), second, second])
    context = [*context, call(3), second, second]
    summary2, op2, fold2 = _summary(2, second, "One refund.")
    s.step(context, [op2], [fold2])
    context = [summary2 if m.id == second.id else m for m in context]
    s.step([*context, msg("u5", "And SO20260101001, SO20260101009?")])
    context = [*context, msg("u5", "And SO20260101001, SO20260101009?")]
    s.step([*context, call(6, '{"order": "SO20260101003"}')])
    s.step([*context, call(7), result(7, orders)])
    return s.stats


def _whole(stats: dict[int, dict[str, Any]]) -> tuple[dict[str, Any], dict[int, Any]]:
    stats = copy.deepcopy(stats)
    totals, _ = SessionTotals.of(stats)
    return totals.aggregates(), stats


def _in_runs(
    stats: dict[int, dict[str, Any]], ends: list[int]
) -> tuple[dict[str, Any], dict[int, Any]]:
    """Runs that end after the steps `ends` name, as a worker computes a live session:
    each adds its steps to the totals it carries, and settles them with every step's
    statistics so far (those before it as the last run left them)."""
    stats = copy.deepcopy(stats)
    totals = SessionTotals()
    seen: dict[int, dict[str, Any]] = {}
    for index in sorted(stats):
        seen[index] = stats[index]
        totals.add(index, stats[index])
        if index in ends:
            totals.settle(seen)
    totals.settle(seen)
    return totals.aggregates(), stats


def test_the_session_has_amnesia_refetches_and_waste_to_sum() -> None:
    aggregates, stats = _whole(amnesiac_session())
    assert {a["text"] for a in aggregates["amnesia"]} >= {"SO20260101002", "SO20260101009"}
    assert aggregates["refetches"] and aggregates["duplicate_results"]
    # What was needed comes first in what the first summary lost, the first needed first.
    assert stats[1]["ops"][0]["entities"]["lost"][:2] == ["SO20260101002", "SO20260101001"]


def test_totals_kept_step_by_step_are_the_totals_of_the_whole_session() -> None:
    stats = amnesiac_session()
    assert _in_runs(stats, list(stats)) == _whole(stats)


@settings(max_examples=40, deadline=None)
@given(ends=st.lists(st.integers(min_value=0, max_value=8), max_size=8))
def test_totals_kept_over_runs_of_any_length_are_the_totals_of_the_whole_session(
    ends: list[int],
) -> None:
    stats = amnesiac_session()
    assert _in_runs(stats, ends) == _whole(stats)


def test_a_step_before_those_added_is_refused() -> None:
    totals = SessionTotals()
    totals.add(3, amnesiac_session()[3])
    try:
        totals.add(2, amnesiac_session()[2])
    except ValueError as exc:
        assert "step 2" in str(exc)
    else:
        raise AssertionError("a step before those added was taken")
