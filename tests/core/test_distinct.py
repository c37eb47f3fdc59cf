from __future__ import annotations

from contextview.core.distinct import Distinct


def test_it_numbers_values_once_and_hands_out_each_new_one_once() -> None:
    table = Distinct()
    a, b = {"id": "u1", "content": "hi"}, {"content": "hi", "id": "u1"}  # same, keys reordered
    assert table.refs([a, {"id": "u2", "content": "yo"}]) == [1, 2]
    assert table.new() == {"1": a, "2": {"id": "u2", "content": "yo"}}
    assert table.refs([b, {"id": "u3", "content": "hi"}]) == [1, 3]
    assert table.new() == {"3": {"id": "u3", "content": "hi"}}
    assert table.new() == {} and len(table) == 3
