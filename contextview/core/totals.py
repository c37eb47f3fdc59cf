"""A session's aggregates, kept as its steps' statistics come in index order.

A worker that computed a session's steps so far keeps its `SessionTotals`, and the
session's next step only adds its own statistics (and settles the rewards of the
steps whose losses it needed): the steps before it are not summed again. Computed
whole (`of`), from every step's statistics, they are the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextview.core.needs import NeedLinks
from contextview.core.stats import SessionSums
from contextview.core.waste import WasteSums


class SessionTotals:
    """The sums, the needs linked to losses, and the waste of a session's steps."""

    def __init__(self) -> None:
        self.sums = SessionSums()
        self.links = NeedLinks()
        self.waste = WasteSums()
        # the index after the last step added: the next one must come after it
        self.next_index = 0

    @classmethod
    def of(cls, stats_by_index: Mapping[int, dict[str, Any]]) -> tuple[SessionTotals, list[int]]:
        """The totals of a whole session, settled: (totals, the steps whose stats
        `settle` changed)."""
        totals = cls()
        for index in sorted(stats_by_index):
            totals.add(index, stats_by_index[index])
        return totals, totals.settle(stats_by_index, every=True)

    def add(self, index: int, stats: Mapping[str, Any]) -> None:
        if index < self.next_index:
            raise ValueError(f"step {index} comes before step {self.next_index - 1}, added")
        self.sums.add(index, stats)
        self.links.add(index, stats)
        self.waste.add(index, stats)
        self.next_index = index + 1

    def settle(
        self, stats_by_index: Mapping[int, dict[str, Any]], *, every: bool = False
    ) -> list[int]:
        """Write the needs linked so far onto the operations that lost what was needed,
        and their steps' rewards (``NeedLinks.settle``); the steps changed."""
        changed = self.links.settle(stats_by_index, every=every)
        for index in changed:
            self.sums.reward_settled(index, stats_by_index[index]["reward"])
        return changed

    def aggregates(self) -> dict[str, Any]:
        """The contract's session `aggregates` (but for the encoding)."""
        aggregates = self.sums.aggregates()
        aggregates["amnesia"] = self.links.amnesia
        aggregates["refetches"] = self.links.refetches
        aggregates.update(self.waste.summary())
        return aggregates
