from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextview.core.refs import OnBases, decode_many, decode_refs, encode_refs

MAX_ID = (1 << 63) - 1


@given(st.lists(st.integers(min_value=1, max_value=MAX_ID), max_size=300))
def test_it_round_trips_any_list_of_ids(ids: list[int]) -> None:
    assert decode_refs(encode_refs(ids)) == ids


def test_it_spends_one_byte_on_a_small_step() -> None:
    # a session's messages get nearby ids: the usual context after the first ref
    ids = [1_000_000 + k for k in range(0, 400, 2)]
    data = encode_refs(ids)
    assert len(data) == len(encode_refs(ids[:1])) + len(ids) - 1
    assert decode_refs(data) == ids


def test_it_spends_one_byte_on_a_small_step_back() -> None:
    assert len(encode_refs([500, 490])) - len(encode_refs([500])) == 1


def test_it_encodes_the_empty_list_as_nothing() -> None:
    assert encode_refs([]) == b""
    assert decode_refs(b"") == []


def test_it_encodes_known_bytes() -> None:
    # deltas +1, +1, -1, +300 -> zigzag 2, 2, 1, 600; 600 takes two varint bytes
    assert encode_refs([1, 2, 1, 301]) == bytes([2, 2, 1, 0xD8, 0x04])


@pytest.mark.parametrize("bad", [0, -5, 1 << 63])
def test_it_rejects_ids_outside_positive_int64(bad: int) -> None:
    with pytest.raises(ValueError):
        encode_refs([3, bad])


def test_it_rejects_a_truncated_list() -> None:
    data = encode_refs([10, 1 << 40])
    with pytest.raises(ValueError):
        decode_refs(data[:-1])


ids_lists = st.lists(st.integers(min_value=1, max_value=1 << 40), max_size=60)


@given(ids_lists, st.lists(st.tuples(st.integers(0, 60), ids_lists), max_size=8))
def test_decoding_after_a_shared_head_gives_what_decoding_alone_gives(
    first: list[int], edits: list[tuple[int, list[int]]]
) -> None:
    # Each context keeps a head of the one before and ends its own way.
    contexts = [first]
    for keep, tail in edits:
        contexts.append(contexts[-1][:keep] + tail)
    blobs = [encode_refs(c) for c in contexts]
    decoded = decode_many(blobs)
    for blob, ids in zip(blobs, contexts, strict=True):
        got, base, shared = decoded[blob]
        assert got == ids
        if base is not None:
            assert decoded[base][0][:shared] == ids[:shared]


def test_a_context_that_grew_is_decoded_from_where_it_grew() -> None:
    head = [10_000_000 + k for k in range(200)]
    before, after = encode_refs(head), encode_refs([*head, 10_000_500])
    decoded = decode_many([before, after])
    assert decoded[after] == ([*head, 10_000_500], before, 200)


@given(
    ids_lists,
    st.lists(st.tuples(st.integers(0, 60), ids_lists), max_size=8),
    st.randoms(use_true_random=False),
)
def test_lists_made_on_their_bases_are_what_each_list_makes_alone(
    first: list[int], edits: list[tuple[int, list[int]]], rng: Any
) -> None:
    contexts = [first]
    for keep, tail in edits:
        contexts.append(contexts[-1][:keep] + tail)
    blobs = [encode_refs(c) for c in contexts]
    made = OnBases(decode_many(blobs), lambda ids: [f"m{i}" for i in ids])
    asked = list(zip(blobs, contexts, strict=True))
    rng.shuffle(asked)  # in any order: a list's base is made first when it is not yet
    for blob, ids in asked:
        assert made[blob] == [f"m{i}" for i in ids]


def test_a_context_that_grew_makes_only_what_it_added() -> None:
    head = list(range(1, 201))
    before, after = encode_refs(head), encode_refs([*head, 500, 501])
    asked: list[list[int]] = []
    made = OnBases(decode_many([before, after]), lambda ids: asked.append(ids) or ids)
    assert made[after] == [*head, 500, 501]
    assert made[after] is made[after]  # made once, then shared
    assert asked == [head, [500, 501]]


@given(ids_lists, ids_lists)
def test_a_list_encoded_in_two_parts_joins_to_the_whole(head: list[int], tail: list[int]) -> None:
    # What ingest does with a context that extends the one before it.
    joined = encode_refs(head) + encode_refs(tail, after=head[-1] if head else 0)
    assert joined == encode_refs(head + tail)
