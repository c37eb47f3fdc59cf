from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contextview.core.distinct import Distinct, Ranged, ranged, unranged


def test_it_numbers_values_once_and_hands_out_each_new_one_once() -> None:
    table = Distinct()
    a, b = {"id": "u1", "content": "hi"}, {"content": "hi", "id": "u1"}  # same, keys reordered
    assert table.refs([a, {"id": "u2", "content": "yo"}]) == [1, 2]
    assert table.new() == {"1": a, "2": {"id": "u2", "content": "yo"}}
    assert table.refs([b, {"id": "u3", "content": "hi"}]) == [1, 3]
    assert table.new() == {"3": {"id": "u3", "content": "hi"}}
    assert table.new() == {} and len(table) == 3


@given(st.lists(st.integers(0, 60), max_size=40))
def test_ranges_give_back_the_numbers_they_were_made_of(numbers: list[int]) -> None:
    items = ranged(numbers)
    assert unranged(items) == numbers
    assert all(item[1] - item[0] >= 2 for item in items if isinstance(item, list))


def test_a_context_resent_as_it_grew_is_a_range_or_two() -> None:
    assert ranged([*range(1, 2001), 2005, 2006, *range(2010, 2013)]) == [
        [1, 2000],
        2005,
        2006,
        [2010, 2012],
    ]


@given(
    st.lists(st.integers(0, 30), max_size=12),
    st.lists(
        st.tuples(
            st.sampled_from(["again", "extend", "continue", "other"]),
            st.lists(st.integers(0, 30)),
        ),
        max_size=12,
    ),
)
def test_a_stream_of_growing_contexts_is_ranged_as_each_alone(
    first: list[int], moves: list[tuple[str, list[int]]]
) -> None:
    # A session's contexts as a report meets them: the same list again (a step's
    # before is the after before it), the last one with numbers added (its reply,
    # new messages numbered as they came), or another (a compaction). The stream's
    # answers are those of each list alone.
    stream = Ranged()
    numbers = first
    assert stream(numbers) == ranged(numbers)
    for move, more in moves:
        if move == "extend":
            numbers = numbers + more
        elif move == "continue":  # the messages that came next, numbered as they came
            start = numbers[-1] + 1 if numbers else 0
            numbers = numbers + list(range(start, start + len(more)))
        elif move == "other":
            numbers = more
        assert stream(numbers) == ranged(numbers), (move, numbers)


def test_a_context_that_grew_by_one_message_continues_its_last_range() -> None:
    stream = Ranged()
    context = list(range(1, 101))
    assert stream(context) == [[1, 100]]
    assert stream([*context, 101]) == [[1, 101]]
    assert stream([*context, 101, 205, 206]) == [[1, 101], 205, 206]
    assert stream([*context, 101, 205, 206, 207]) == [[1, 101], [205, 207]]
