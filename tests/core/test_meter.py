"""ContextMeter: a session's contexts measured from one another, as summing each would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextview.core.model import Message
from contextview.core.stats import ContextMeter
from tests.core.factories import msg

PARTITIONS = ("system", "task", "memory", "tool", "retrieval", "question", "other")


def pool(n: int) -> list[Message]:
    """`n` distinct messages; some carry no words, so a partition can sum to zero, and
    some are pinned."""
    return [
        msg(
            f"m{i}",
            " ".join(["w"] * (i % 5)),
            "user",
            partition=PARTITIONS[i % 7],
            pinned=i % 11 == 0,
        )
        for i in range(n)
    ]


def words(m: Message) -> int:
    return len(m.text.split())


def summed(messages: list[Message]) -> tuple[int, dict[str, int]]:
    parts: dict[str, int] = {}
    for m in messages:
        parts[m.partition] = parts.get(m.partition, 0) + words(m)
    return sum(parts.values()), parts


# One edit of a context: append, drop a stretch, replace a stretch, slide the window.
edits = st.tuples(
    st.sampled_from(["append", "drop", "replace", "slide", "shuffle", "same"]),
    st.integers(0, 60),
    st.integers(0, 30),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(edits, min_size=1, max_size=25), st.randoms(use_true_random=False))
def test_every_context_measures_as_its_full_sum(script, rng) -> None:
    messages = pool(400)
    fresh = iter(messages[60:])
    context = list(messages[: rng.randint(0, 60)])
    meter = ContextMeter(words)
    for kind, at, size in script:
        if kind == "append":
            context = [*context, *(next(fresh) for _ in range(size % 8))]
        elif kind == "drop":
            context = context[:at] + context[at + size :]
        elif kind == "replace":
            context = [*context[:at], next(fresh), *context[at + size :]]
        elif kind == "slide":
            context = [*context[:1], *context[1 + size :], *(next(fresh) for _ in range(3))]
        elif kind == "shuffle":
            context = list(context)
            rng.shuffle(context)
        else:
            context = list(context)  # equal, not the same list
        assert meter.measure(context) == summed(context)
        assert meter.pinned == sum(m.pinned for m in context)


class Counting:
    """`words`, counting how many messages it was asked about."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, m: Message) -> int:
        self.calls += 1
        return words(m)


def test_the_same_list_twice_costs_nothing_more() -> None:
    counting = Counting()
    context = pool(50)
    meter = ContextMeter(counting)
    first = meter.measure(context)
    assert counting.calls == 50
    assert meter.measure(context) == first
    assert counting.calls == 50


def test_an_appended_message_costs_one_lookup() -> None:
    counting = Counting()
    messages = pool(201)
    meter = ContextMeter(counting)
    meter.measure(messages[:200])
    counting.calls = 0
    assert meter.measure(messages[:201]) == summed(messages[:201])
    assert counting.calls == 1


def test_a_slid_window_costs_what_left_and_what_came() -> None:
    counting = Counting()
    messages = pool(260)
    meter = ContextMeter(counting)
    meter.measure([messages[0], *messages[1:200]])
    counting.calls = 0
    slid = [messages[0], *messages[41:240]]
    assert meter.measure(slid) == summed(slid)
    assert counting.calls == 40 + 40  # m1..m40 left, m200..m239 came


def test_a_zero_token_partition_stays_while_its_message_does() -> None:
    empty = msg("e", "", "user", partition="retrieval")
    words_msg = msg("r", "two words", "user", partition="retrieval")
    meter = ContextMeter(words)
    meter.measure([empty, words_msg])
    assert meter.measure([empty]) == (0, {"retrieval": 0})
    assert meter.measure([msg("x", "a", "user", partition="task")]) == (1, {"task": 1})
