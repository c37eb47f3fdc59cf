"""How a step's diff rows are grouped for the page: what its first view and each later
load carry."""

from __future__ import annotations

from contextview.core.model import Message
from contextview.web.selectors import ROWS_PER_LOAD, Cell, Row, row_groups


def _same(n: int) -> Row:
    cell = Cell(Message(id=f"m{n}", role="user", content=f"line {n}", partition="question"), 3)
    return Row("same", left=cell, right=cell)


def test_a_later_load_of_a_long_unchanged_run_carries_one_page_of_it() -> None:
    rows = [_same(n) for n in range(2502)]
    [first] = row_groups(rows)
    assert first.hidden == (0, 2502)  # the first view: one line with a count
    page = row_groups(rows, 0, 2502, first_view=False)
    assert [len(g.rows) for g in page] == [ROWS_PER_LOAD, 0]
    assert page[0].unchanged and page[1].hidden == (ROWS_PER_LOAD, 2502)
    last = row_groups(rows, 2400, 2502, first_view=False)
    assert [len(g.rows) for g in last] == [102] and last[0].unchanged
