"""The session walk: the same session, however its steps arrive, says the same thing."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextview.core.apply import StepResult, apply_operations
from contextview.core.calls import is_tool_result, said_text
from contextview.core.errors import InputError
from contextview.core.infer import same_as_sent
from contextview.core.model import Fold, Message
from contextview.core.session import SessionWalk, WalkedStep
from contextview.core.stats import ContextMeter, TextCache
from tests.core.factories import NGINX_LOG, SYSTEM, msg, raw, texts

ROLES = ["user", "assistant", "tool"]
# What happens to the context between two steps without the agent saying so.
SILENT = ["nothing", "nothing", "nothing", "drop", "summarize", "rewrite", "truncate", "insert"]


@dataclass
class Event:
    index: int
    obs: list[dict[str, Any]]
    ops: list[dict[str, Any]] | None


def _tokens(m: Message) -> int:
    return 1 + len(m.text.split())


@st.composite
def sessions(draw: st.DrawFn) -> list[Event]:
    """A session's steps as an agent sends them: every message in full, some
    operations reported, some changes made silently between steps."""
    made = iter(range(10_000))

    def new(role: str | None = None, text: str | None = None) -> Message:
        role = role or draw(st.sampled_from(ROLES))
        return msg(f"m{next(made)}", draw(texts) if text is None else text, role)

    after: list[Message] = [msg("sys", SYSTEM, "system"), msg("u0", NGINX_LOG, "tool", tool="read")]
    events: list[Event] = []
    walk = SessionWalk()
    for index in range(draw(st.integers(1, 9))):
        context = list(after)
        silent = draw(st.sampled_from(SILENT)) if index else "nothing"
        middle = list(range(1, len(context)))
        if silent != "nothing" and middle:
            at = draw(st.sampled_from(middle))
            if silent == "drop":
                del context[at]
            elif silent == "summarize" and at + 1 < len(context):
                context[at : at + 2] = [new("assistant", "summary of " + context[at].text)]
            elif silent == "rewrite":
                context[at] = msg(context[at].id, "now " + context[at].text, context[at].role)
            elif silent == "truncate" and len(context[at].text) > 4:
                old = context[at]
                context[at] = msg(old.id, old.text[: len(old.text) // 2] + "…", old.role)
            elif silent == "insert":
                context.insert(at, new())
        context += [new() for _ in range(draw(st.integers(0, 3)))]
        ops: list[dict[str, Any]] | None = None
        own = draw(st.sampled_from(["none", "none", "summarize", "drop", "reload"]))
        away = sorted(set(walk.archive) - {m.id for m in context})
        if own == "reload" and away:
            ops = [{"action": "reload", "target": draw(st.sampled_from(away))}]
        elif own in ("summarize", "drop") and len(context) > 2:
            first = draw(st.integers(1, len(context) - 1))
            targets = [m.id for m in context[first : first + draw(st.integers(1, 3))]]
            if own == "drop":
                ops = [{"action": "drop", "targets": targets}]
            else:
                result = raw(new("assistant", "short: " + " ".join(targets)))
                ops = [{"action": "summarize", "targets": targets, "result": result}]
        events.append(Event(index, [raw(m) for m in context], ops))
        after = list(walk.take(index, obs=[raw(m) for m in context], ops_raw=ops).after)
    return events


def _take(walk: SessionWalk, e: Event) -> StepResult:
    return walk.take(e.index, obs=e.obs, ops_raw=e.ops)


def _measure(
    walk: SessionWalk, results: dict[int, StepResult], indexes: list[int], cache: TextCache
) -> dict[int, tuple[list[list[str]], list[Any], dict[str, Any]]]:
    """Each step's (inferred op shapes, folds, stats), walked in `indexes` order."""
    meter = ContextMeter(_tokens)
    out = {}
    for i in indexes:
        inferred, stats = walk.measure(
            WalkedStep.of(i, results[i]), tokens_of=_tokens, cache=cache, meter=meter
        )
        shapes = [[op.op, *op.targets] for op in inferred.ops]
        out[i] = (shapes, _fold_shapes(walk.folds.get(i, [])), stats)
    return out


def _fold_shapes(folds: list[Fold]) -> list[tuple[Any, ...]]:
    return [(f.op, f.kind, f.result_id, [m.id for m in f.originals]) for f in folds]


def _contexts(results: dict[int, StepResult]) -> dict[int, tuple[list[Message], list[Message]]]:
    return {i: (list(r.before), list(r.after)) for i, r in results.items()}


def whole(events: list[Event]) -> tuple[dict[int, StepResult], dict[int, Any]]:
    walk = SessionWalk(budget={"max_tokens": 400}, pinned=["504"])
    results = {e.index: _take(walk, e) for e in events}
    return results, _measure(walk, results, sorted(results), TextCache())


def _batched(events: list[Event], cuts: list[int]) -> dict[int, StepResult]:
    """The steps taken in batches ending at `cuts`, each by a new walk from what the
    store kept (the latest content per id, the archive)."""
    latest: dict[str, Message] = {}
    archive: dict[str, Message] = {}
    batched: dict[int, StepResult] = {}
    start = 0
    for cut in cuts:
        walk = SessionWalk(latest=dict(latest), archive=dict(archive))
        for e in events[start:cut]:
            batched[e.index] = _take(walk, e)
        latest, archive = dict(walk.latest), dict(walk.archive)
        start = cut
    return batched


def _chunked(batched: dict[int, StepResult], cuts: list[int], rnd: random.Random) -> dict[int, Any]:
    """The steps measured in chunks ending at `cuts`, as the worker does: each chunk
    by a new walk resumed after the step before it, with the losses it restored, its
    waste tracker told the keys of what the chunk's messages say (only some of them
    here: what a message says unexpectedly must be found all the same)."""
    chunked: dict[int, Any] = {}
    start = 0
    for cut in cuts:
        walk = SessionWalk(budget={"max_tokens": 400}, pinned=["504"])
        cache = TextCache()
        said = {
            key
            for i in range(max(0, start - 1), cut)
            for m in batched[i].before
            if not is_tool_result(m)
            for key in cache.text_keys(said_text(m))
        }
        walk.tracker.waste.expect(rnd.sample(sorted(said), k=rnd.randint(0, len(said))))
        if start:
            prev = batched[start - 1]
            walk.resume(
                index=start - 1,
                before=prev.before,
                after=prev.after,
                new_tool=chunked[start - 1][2].get("new_tool"),
                new_call=chunked[start - 1][2].get("new_call"),
            )
            walk.folded = {mid for i in range(start) for f in chunked[i][1] for mid in f[3]}
            walk.restore_losses(((i, chunked[i][2]) for i in range(start)), cache)
        chunked.update(_measure(walk, batched, list(range(start, cut)), cache))
        start = cut
    return chunked


@settings(max_examples=60, deadline=None)
@given(sessions(), st.randoms(use_true_random=False))
def test_a_session_whole_in_batches_or_shuffled_says_the_same(
    events: list[Event], rnd: random.Random
) -> None:
    results, measured = whole(events)

    # In batches: each batch starts a new walk from what the store kept (the latest
    # content per id, the archive, the base after), and the worker computes in
    # chunks, resuming after the last step it computed with the losses it restored.
    n = len(events)
    cuts = sorted({*rnd.sample(range(1, n), k=min(2, n - 1)), n})
    batched = _batched(events, cuts)
    assert _contexts(batched) == _contexts(results)
    assert _chunked(batched, cuts, rnd) == measured

    # Shuffled: the steps arrive in any order, and the walk measures them in index order.
    # (A reload cannot arrive before the fold it undoes: the server refuses it.)
    if any(e.ops and e.ops[0]["action"] == "reload" for e in events):
        return
    order = list(events)
    rnd.shuffle(order)
    walk = SessionWalk(budget={"max_tokens": 400}, pinned=["504"])
    shuffled = {e.index: _take(walk, e) for e in order}
    assert _contexts(shuffled) == _contexts(results)
    assert _measure(walk, shuffled, sorted(shuffled), TextCache()) == measured


def test_a_resumed_walk_keeps_closed_the_losses_a_step_found_still_in_the_context() -> None:
    # Step 1 summarizes the log holding the order number; step 2 asks for it while the
    # user's first message still holds it, which closes the loss. A walk resumed after
    # step 2 must not open it again: step 3's reload of the log would then count as a
    # need of it (hypothesis found this).
    sys = {"id": "sys", "role": "system", "content": "You debug orders."}
    ask = {"id": "u1", "role": "user", "content": "Order SO20260101007 times out."}
    log = {"id": "t1", "role": "tool", "content": "SO20260101007 timed out"}
    short = {"id": "s1", "role": "tool", "content": "It timed out."}
    again = {"id": "u2", "role": "user", "content": "And SO20260101007?"}
    events = [
        Event(0, [sys, ask, log], None),
        Event(1, [sys, ask, log], [{"action": "summarize", "target": "t1", "result": short}]),
        Event(2, [sys, ask, short, again], None),
        Event(3, [sys, ask, short, again], [{"action": "reload", "target": "t1"}]),
    ]
    results, measured = whole(events)
    assert measured[1][2]["ops"][0]["entities"]["lost"] == ["SO20260101007"]
    assert measured[2][2]["closed"] == [[1, 0, "so20260101007"]]
    assert "needs" not in measured[2][2] and "needs" not in measured[3][2]
    for cut in (1, 2, 3):
        assert _chunked(_batched(events, [cut, 4]), [cut, 4], random.Random(cut)) == measured, cut


@settings(max_examples=60, deadline=None)
@given(sessions())
def test_inferred_operations_turn_the_previous_after_into_the_steps_context(
    events: list[Event],
) -> None:
    walk = SessionWalk()
    results = {e.index: _take(walk, e) for e in events}
    for i in range(1, len(events)):
        inferred = walk.infer(i, results[i].before)
        previous = list(results[i - 1].after)
        got = apply_operations(previous, inferred.ops, archive={}).after
        obs = list(results[i].before)
        placed = obs[: len(obs) - inferred.appended]
        assert len(got) == len(placed) and all(map(same_as_sent, got, placed))
        assert obs[len(placed) :] == obs[len(obs) - inferred.appended :]


def test_it_infers_nothing_across_a_gap_but_counts_new_messages_from_the_last_step() -> None:
    walk = SessionWalk()
    first = walk.take(0, obs=[raw(msg("sys", SYSTEM, "system")), raw(msg("u1", "q"))])
    later = walk.take(2, obs=[raw(msg("sys", SYSTEM, "system")), raw(msg("u2", "r"))])
    assert walk.infer(2, later.before).ops == []
    cache, meter = TextCache(), ContextMeter(_tokens)
    walk.measure(WalkedStep.of(0, first), tokens_of=_tokens, cache=cache, meter=meter)
    inferred, stats = walk.measure(
        WalkedStep.of(2, later), tokens_of=_tokens, cache=cache, meter=meter
    )
    assert inferred.ops == [] and "inferred" not in str(stats["ops"])


def test_a_silent_compaction_is_a_summarize_whose_originals_count_as_folded() -> None:
    walk = SessionWalk()
    loop = [msg("sys", SYSTEM, "system"), msg("u1", "q"), msg("t1", NGINX_LOG, "tool")]
    summary = msg("s1", "the log says 504", "assistant")
    cache, meter = TextCache(), ContextMeter(_tokens)
    for index, context in enumerate([loop, [loop[0], summary]]):
        result = walk.take(index, obs=[raw(m) for m in context])
        inferred, stats = walk.measure(
            WalkedStep.of(index, result), tokens_of=_tokens, cache=cache, meter=meter
        )
    assert [(op.op, op.targets) for op in inferred.ops] == [("summarize", ("u1", "t1"))]
    assert [op.get("inferred") for op in stats["ops"]] == [True]
    assert walk.folded == {"u1", "t1"}
    assert _fold_shapes(walk.folds[1]) == [("summarize", "fold", "s1", ["u1", "t1"])]


def test_a_base_the_session_never_recorded_is_refused_naming_the_field() -> None:
    walk = SessionWalk()
    try:
        walk.derive(3, obs=[{"$run": [0, 1]}], base=2)
    except InputError as exc:
        assert (exc.field, exc.status) == ("body.obs.$base", 422)
        assert "step 2 was never recorded" in str(exc)
    else:
        raise AssertionError("a missing base was taken")
