"""The occupancy chart drawn as plain SVG geometry, for pages that run no script.

A report file must open anywhere and stay small, so its chart is computed here and
written as an inline SVG: one band per partition stacked over the steps, the lines of
the budget and its thresholds, and a mark on each flagged step. The dashboard's own
chart (plotly, in the browser) takes its colours from the same tables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Partitions in stacking order (bottom first), and their colours; others follow, sorted.
PARTITION_COLORS: dict[str, str] = {
    "system": "#64748b",
    "task": "#0ea5e9",
    "memory": "#8b5cf6",
    "tool": "#f59e0b",
    "retrieval": "#10b981",
    "question": "#3b82f6",
    "other": "#a3a3a3",
}
UNSEEN_COLOR = "#fca5a5"
# How each occupancy line looks (colour, dash); where it goes comes with the line.
LINE_STYLES: dict[str, tuple[str, str]] = {
    "budget": ("#b91c1c", "solid"),
    "over_90": ("#ea580c", "dash"),
    "over_70": ("#ca8a04", "dot"),
}
DEFAULT_LINE = ("#6b7280", "dot")
_DASHES = {"solid": "", "dash": "6 4", "dot": "2 3"}

WIDTH, HEIGHT = 900, 320
LEFT, RIGHT, TOP, BOTTOM = 64, 150, 14, 34


@dataclass(frozen=True)
class Band:
    name: str
    color: str
    points: str  # an SVG polygon's points


@dataclass(frozen=True)
class Rule:
    y: float
    label: str
    color: str
    dash: str


@dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclass(frozen=True)
class Mark:
    x: float
    y: float
    step: int
    flags: str


@dataclass(frozen=True)
class SvgChart:
    width: int
    height: int
    left: int
    right: float  # x of the plot's right edge
    top: int
    bottom: float  # y of the plot's bottom edge
    bands: list[Band]
    rules: list[Rule]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    marks: list[Mark]
    legend: list[tuple[str, str, int]]  # name, colour, y


def line_style(flag: str) -> tuple[str, str]:
    return LINE_STYLES.get(flag, DEFAULT_LINE)


def partition_order(names: set[str]) -> list[str]:
    """Known partitions in their order, then any others by name."""
    known = [p for p in PARTITION_COLORS if p in names]
    return known + sorted(names - set(PARTITION_COLORS))


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round values from 0 to `top` (at least two), about `count` of them."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [k * step for k in range(int(top // step) + 1)]


def step_ticks(first: int, last: int) -> list[int]:
    """Whole steps from `first` to `last`, about eight of them: a step has no halves."""
    span = last - first
    if span <= 1:
        return list(dict.fromkeys([first, last]))
    return [first + int(t) for t in nice_ticks(span, 8) if float(t).is_integer() and t <= span]


def _label(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def _bands(rows: Sequence[Sequence[Any]]) -> list[tuple[str, str, list[float]]]:
    """(name, colour, tokens at each point) per band, bottom first."""
    names: set[str] = set()
    for r in rows:
        if isinstance(r[4], Mapping):
            names.update(str(k) for k in r[4])
    bands: list[tuple[str, str, list[float]]] = [
        (p, PARTITION_COLORS.get(p, DEFAULT_LINE[0]),
         [float((r[4] or {}).get(p) or 0) if isinstance(r[4], Mapping) else 0.0 for r in rows])
        for p in partition_order(names)
    ]  # fmt: skip
    if not bands:
        # No partitions measured yet: the agent's own count, else the measured total.
        totals = [float(r[3] if r[3] is not None else (r[7] or 0)) for r in rows]
        bands = [("tokens", PARTITION_COLORS["other"], totals)]
    unseen = [float(max(0, r[11] or 0)) if len(r) > 11 else 0.0 for r in rows]
    if any(unseen):
        bands.append(("unseen (provider only)", UNSEEN_COLOR, unseen))
    return bands


def occupancy_chart(
    rows: Sequence[Sequence[Any]], *, max_tokens: int | None, lines: Sequence[Mapping[str, Any]]
) -> SvgChart | None:
    """The chart of the chart rows the session page draws (see web.session_chart);
    None for a session with no step."""
    if not rows:
        return None
    right, bottom = WIDTH - RIGHT, HEIGHT - BOTTOM
    bands = _bands(rows)
    stacks = [sum(b[2][i] for b in bands) for i in range(len(rows))]
    rules_at = [(max_tokens * float(ln["at"]), ln) for ln in lines] if max_tokens else []
    y_top = max([*stacks, *(y for y, _ in rules_at), 1.0]) * 1.05
    y_values = nice_ticks(y_top)
    y_top = max(y_top, y_values[-1])
    first, last = int(rows[0][0]), int(rows[-1][0])
    span = max(1, last - first)

    def x_of(index: float) -> float:
        return round(LEFT + (index - first) / span * (right - LEFT), 1)

    def y_of(tokens: float) -> float:
        return round(bottom - tokens / y_top * (bottom - TOP), 1)

    xs = [x_of(float(r[0])) for r in rows]
    drawn: list[Band] = []
    under = [0.0] * len(rows)
    for name, color, values in bands:
        over = [u + v for u, v in zip(under, values, strict=True)]
        edge = [f"{x},{y_of(v)}" for x, v in zip(xs, over, strict=True)]
        base = [f"{x},{y_of(v)}" for x, v in zip(reversed(xs), reversed(under), strict=True)]
        drawn.append(Band(name, color, " ".join(edge + base)))
        under = over
    rules = []
    for y, ln in rules_at:
        color, dash = line_style(str(ln.get("flag", "")))
        rules.append(Rule(y_of(y), f"{ln.get('label', '')} {round(y):,}", color, _DASHES[dash]))
    marks = [
        Mark(x, y_of(total), int(r[0]), ", ".join(str(f) for f in r[5]))
        for x, total, r in zip(xs, stacks, rows, strict=True)
        if r[5]
    ]
    legend = [(b.name, b.color, TOP + 8 + 18 * k) for k, b in enumerate(reversed(drawn))]
    return SvgChart(
        width=WIDTH,
        height=HEIGHT,
        left=LEFT,
        right=right,
        top=TOP,
        bottom=bottom,
        bands=drawn,
        rules=rules,
        x_ticks=[Tick(x_of(v), str(v)) for v in step_ticks(first, last)],
        y_ticks=[Tick(y_of(v), _label(v)) for v in y_values],
        marks=marks,
        legend=legend,
    )
