"""The step page's "What the context holds": its contexts by kind, and where the
session's pinned texts and the task sit in the after context (``core.layout``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from contextview.core.layout import KIND_LABELS, KINDS, Placement, composition, placements
from contextview.core.model import Message
from contextview.core.tokens import EncodingUnavailable, TokenCounter
from contextview.sessions.models import Session, Step

Cells = Sequence[tuple[Message, int | None]]


@dataclass(frozen=True)
class KindRow:
    name: str
    label: str
    before: int
    after: int


@dataclass(frozen=True)
class StepLayout:
    kinds: list[KindRow]
    placements: list[Placement]
    after_total: int
    # what the composition chart draws, as JSON for a data- attribute
    chart: str


@cache
def _counter(encoding: str) -> TokenCounter | None:
    try:
        return TokenCounter(encoding)
    except EncodingUnavailable:
        return None


def step_layout(
    *,
    session: Session,
    step: Step,
    before: Cells,
    after: Cells,
    tools_tokens: int,
    encoding: str,
) -> StepLayout | None:
    """None until every message of the step has been counted (statistics pending)."""
    if any(n is None for _, n in (*before, *after)) or not (before or after):
        return None
    stats = step.stats if isinstance(step.stats, dict) else {}
    unseen = stats.get("unseen_tokens")
    unseen = unseen if isinstance(unseen, int) and not isinstance(unseen, bool) else None
    counter = _counter(encoding)

    def count(text: str) -> int:
        return counter.count(text) if counter is not None else 0

    parts = {
        name: composition(
            [m for m, _ in cells],
            [n for _, n in cells],
            count=count,
            tools_tokens=tools_tokens,
            unseen=unseen,
        )
        for name, cells in (("before", before), ("after", after))
    }
    pinned = [p for p in session.pinned or () if isinstance(p, str)]
    where = placements([m for m, _ in after], [n for _, n in after], pinned)
    after_total = sum(n or 0 for _, n in after)
    kinds = [
        KindRow(k, KIND_LABELS[k], parts["before"][k], parts["after"][k])
        for k in KINDS
        if parts["before"][k] or parts["after"][k]
    ]
    chart = {
        "kinds": [[k.name, k.label] for k in kinds],
        "bars": [{"name": name, "parts": parts[name]} for name in ("before", "after")],
        "markers": [{"what": p.what, "text": p.text, "at": p.at, "third": p.third} for p in where],
        "total": after_total,
    }
    return StepLayout(
        kinds=kinds, placements=where, after_total=after_total, chart=json.dumps(chart)
    )
