"""The ``$run`` codec: what the SDK encodes, the server expands to the same context."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextview.core.errors import InputError
from contextview.core.model import Message
from contextview.core.runs import (
    MIN_RUN,
    RUN_KEY,
    base_positions,
    encode_runs,
    expand_runs,
    runs_in,
)

FIELD = "body.obs.messages"


def message(n: int, text: str = "") -> Message:
    return Message(id=f"m{n}", role="user", content=text or f"message {n}", partition="question")


@st.composite
def base_and_context(draw: st.DrawFn) -> tuple[list[Message], list[Message]]:
    """A base context and a next one taking from it: stretches of the base in any
    order, some messages rewritten under their id, and new messages."""
    size = draw(st.integers(min_value=0, max_value=30))
    base = [message(n) for n in range(size)]
    context: list[Message] = []
    used: set[str] = set()
    for _ in range(draw(st.integers(min_value=0, max_value=8))):
        kind = draw(st.sampled_from(["stretch", "rewritten", "new"]))
        if kind == "new" or not base:
            n = draw(st.integers(min_value=100, max_value=140))
            picked = [message(n)]
        else:
            start = draw(st.integers(min_value=0, max_value=size - 1))
            count = draw(st.integers(min_value=1, max_value=size - start))
            picked = base[start : start + count]
            if kind == "rewritten":
                picked = [message(int(m.id[1:]), f"rewritten {m.id}") for m in picked[:1]]
        for m in picked:
            if m.id not in used:  # ids are unique within a context
                used.add(m.id)
                context.append(m)
    return base, context


@given(base_and_context())
def test_encoding_then_expanding_gives_the_original_context(
    pair: tuple[list[Message], list[Message]],
) -> None:
    base, context = pair
    wire = encode_runs(context, base_positions(context, base))
    expanded, resolved = expand_runs(wire, base, field=FIELD)
    assert expanded == context
    # the messages taken from the base before the first sent in full
    lead = next((i for i, e in enumerate(wire) if not isinstance(e, dict)), len(wire))
    assert resolved == sum(e[RUN_KEY][1] for e in wire[:lead])
    runs = [e for e in wire if isinstance(e, dict)]
    assert all(e[RUN_KEY][1] >= MIN_RUN for e in runs)
    assert len(wire) == len(context) - sum(e[RUN_KEY][1] - 1 for e in runs)


@given(st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=12)), max_size=30))
def test_runs_are_the_longest_stretches_at_consecutive_positions(
    positions: list[int | None],
) -> None:
    found = list(runs_in(positions))
    covered = [i for first, _, count in found for i in range(first, first + count)]
    assert covered == sorted(set(covered))  # in order, never overlapping
    for first, start, count in found:
        assert positions[first : first + count] == list(range(start, start + count))
        # longest: the neighbours do not continue it
        assert first == 0 or positions[first - 1] != start - 1 or start == 0
        end = first + count
        assert end == len(positions) or positions[end] != start + count


def test_the_wire_format_is_the_contracts() -> None:
    base = [message(0), message(1), message(2), message(3)]
    added = {"id": "t4", "role": "tool", "content": "exit 0"}
    context: list[Any] = [*base, added]
    wire = encode_runs(context, [0, 1, 2, 3, None])
    assert json.dumps(wire[0], separators=(",", ":")) == '{"$run":[0,4]}'
    assert wire[1] is added
    # A single message found in the base is not worth a run.
    assert encode_runs([base[2]], [2]) == [base[2]]


@pytest.mark.parametrize(
    ("element", "why"),
    [
        ({RUN_KEY: [0, 5]}, "outside the base context of 4 messages"),
        ({RUN_KEY: [-1, 2]}, "outside the base context"),
        ({RUN_KEY: [0, 0]}, "outside the base context"),
        ({RUN_KEY: [0, "2"]}, "two integers"),
        ({RUN_KEY: [0, 2], "id": "x"}, "alone in its object"),
    ],
)
def test_a_bad_run_is_refused_naming_its_place(element: dict[str, Any], why: str) -> None:
    base = [message(n) for n in range(4)]
    with pytest.raises(InputError) as refused:
        expand_runs([{"id": "m0"}, element], base, field=FIELD)
    assert f"{FIELD}[1].$run" in str(refused.value) and why in str(refused.value)
