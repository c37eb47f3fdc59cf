"""The report's chart geometry: bands stack to each step's total, on round ticks."""

from __future__ import annotations

from contextview.core.svgchart import BOTTOM, HEIGHT, TOP, nice_ticks, occupancy_chart


def _row(index: int, parts: dict[str, int], flags: list[str] | None = None) -> list[object]:
    total = sum(parts.values())
    return [index, "", total, total, parts, flags, None, None, None, index, index, None]


def test_it_stacks_partitions_in_their_order_up_to_each_steps_total() -> None:
    rows = [_row(0, {"tool": 300, "system": 100}), _row(4, {"tool": 900, "system": 100}, ["x"])]
    chart = occupancy_chart(
        rows, max_tokens=2000, lines=[{"at": 1.0, "label": "budget", "flag": "budget"}]
    )
    assert chart is not None
    assert [b.name for b in chart.bands] == ["system", "tool"]
    # The top band's upper edge at step 4 is 1000 tokens, half of the 2000 budget line.
    top_edge_y = float(chart.bands[-1].points.split()[1].split(",")[1])
    rule_y = chart.rules[0].y
    bottom = HEIGHT - BOTTOM
    assert abs((bottom - top_edge_y) * 2 - (bottom - rule_y)) < 1
    assert TOP <= rule_y < bottom and chart.rules[0].label == "budget 2,000"
    assert [(m.step, m.flags) for m in chart.marks] == [(4, "x")]
    assert occupancy_chart([], max_tokens=None, lines=[]) is None


def test_it_picks_round_ticks() -> None:
    assert nice_ticks(1050) == [0, 500, 1000]
    assert nice_ticks(8400) == [0, 2000, 4000, 6000, 8000]
    assert nice_ticks(0) == [0.0, 1.0]


def test_it_labels_only_whole_steps() -> None:
    def labels(last: int, first: int = 0) -> list[str]:
        rows = [_row(i, {"tool": 100 + i}) for i in range(first, last + 1)]
        chart = occupancy_chart(rows, max_tokens=None, lines=[])
        assert chart is not None
        return [t.label for t in chart.x_ticks]

    assert labels(2) == ["0", "1", "2"]  # was 0, 0.5, 1, 1.5, 2
    assert labels(3) == ["0", "1", "2", "3"]
    assert labels(4, first=1) == ["1", "2", "3", "4"]
    assert labels(40) == ["0", "5", "10", "15", "20", "25", "30", "35", "40"]
    assert labels(1) == ["0", "1"]
    assert labels(2_000_000, first=1_999_990)[-1] == "2000000"
