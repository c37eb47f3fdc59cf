"""The step page's "What the context holds": its contexts by kind, and where the
session's pinned texts and the task sit in the after context (``core.layout``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache

from contextview.core.layout import KIND_LABELS, KINDS, Placement, composition, placements
from contextview.core.model import Message
from contextview.core.stats import provider_counted
from contextview.core.tokens import EncodingUnavailable, TokenCounter
from contextview.sessions.models import Session, Step

Cells = Sequence[tuple[Message, int | None]]


@dataclass(frozen=True)
class KindRow:
    name: str
    label: str
    before: int | None  # None: not known
    after: int


@dataclass(frozen=True)
class StepLayout:
    kinds: list[KindRow]
    placements: list[Placement]
    after_total: int
    # what the composition chart draws, as JSON for a data- attribute
    chart: str


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _unseen_by_side(stats: dict[str, object], reported_before: int | None) -> dict[str, int | None]:
    """What the provider read beyond the log, of the before and of the after context.

    The statistics' ``unseen_tokens`` are of the context the call was made with
    (``provider_counted``): the after of a step whose operations shrank it (a
    compaction), else the before, whose after adds only what the log counts (the
    reply), so both sides get it. The before of a compaction gets what the step's own
    count of it (`reported_before`: Claude Code's ``preTokens``) says beyond the log;
    without one it is not known (None).
    """
    unseen = _int(stats.get("unseen_tokens"))
    tokens = stats.get("tokens")
    if unseen is None or not isinstance(tokens, dict):
        return {"before": unseen, "after": unseen}
    before, after = _int(tokens.get("before")), _int(tokens.get("after"))
    if before is None or after is None or provider_counted(before, after) == "before":
        return {"before": unseen, "after": unseen}
    if reported_before is None:
        return {"before": None, "after": unseen}
    return {"before": reported_before - before, "after": unseen}


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
    unseen = _unseen_by_side(stats, step.reported_before)
    counter = _counter(encoding)

    def count(text: str) -> int:
        return counter.count(text) if counter is not None else 0

    parts = {
        name: composition(
            [m for m, _ in cells],
            [n for _, n in cells],
            count=count,
            tools_tokens=tools_tokens,
            unseen=unseen[name],
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
    if unseen["before"] is None and unseen["after"]:
        # Not known of the before context: shown as not known, not as none.
        kinds = [replace(k, before=None) if k.name == "unseen" else k for k in kinds]
    chart = {
        "kinds": [[k.name, k.label] for k in kinds],
        "bars": [{"name": name, "parts": parts[name]} for name in ("before", "after")],
        "markers": [{"what": p.what, "text": p.text, "at": p.at, "third": p.third} for p in where],
        "total": after_total,
    }
    return StepLayout(
        kinds=kinds, placements=where, after_total=after_total, chart=json.dumps(chart)
    )
