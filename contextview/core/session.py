"""A session as the core knows it: its steps, walked in index order.

What one step is (`derive_step`) depends on what the steps before it left: the
latest content recorded under each id (an id sent alone means that), the archive
of folded and dropped originals (what a reload brings back), the previous step's
after (what inference compares the next obs with), the ids folded so far, the
previous step's new tool call, and the losses still open. `SessionWalk` holds all
of it, with the session's encoding, budget, pinned texts and context window, so
ingest, the statistics worker, the read API, the SDK's mirror of the server, the
benchmarks and the tests walk a session one way.

A walk need not start at step 0: ingest loads only what a batch refers to, and a
worker resumes at the first pending step (`resume`).
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextview.core.apply import StepResult, derive_step
from contextview.core.errors import NEVER_RECORDED, InputError
from contextview.core.infer import Inferred, infer_step
from contextview.core.model import Fold, Message, Operation
from contextview.core.needs import LossTracker, new_positions
from contextview.core.runs import expand_runs
from contextview.core.stats import (
    ContextMeter,
    Delta,
    StepInput,
    TextCache,
    TokensOf,
    context_delta,
    reported_before,
    step_stats,
)

# What a step with nothing to compare with infers.
NOTHING_INFERRED = Inferred()


@dataclass(frozen=True, slots=True)
class WalkedStep:
    """A step as derived or stored: what its statistics are computed from."""

    index: int
    before: Sequence[Message]
    after: Sequence[Message]
    ops: Sequence[Operation] = ()
    folds: Sequence[Fold] = ()
    # whether the call reported its history compacted (``infer.COMPACTED``)
    compacted: bool = False
    # the agent's own count of the before, and of the after
    before_tokens: int | None = None
    after_tokens: int | None = None
    after_mismatch: bool = False
    usage: Mapping[str, Any] | None = None
    # the step's own window, where the call said it (else the session's)
    context_window: int | None = None
    tools_tokens: int = 0
    # the call's model, else the session's (a known window is looked up by it)
    model: str | None = None
    # what the agent wrote in reply to the call (``calls.said_text`` of its output's
    # messages): it mentions there what it needed at this step
    said: Sequence[str] = ()

    @staticmethod
    def of(index: int, result: StepResult, **facts: Any) -> WalkedStep:
        """A derived step, with what else its event said (`facts`: the fields above)."""
        return WalkedStep(
            index=index,
            before=result.before,
            after=result.after,
            ops=result.ops,
            folds=result.folds,
            after_mismatch=result.after_mismatch,
            **facts,
        )


@dataclass(slots=True)
class _Previous:
    index: int
    before: Sequence[Message]
    ids: set[str]
    new_tool: str | None
    new_call: str | None


@dataclass(slots=True)
class SessionWalk:
    """One session's steps, in index order, and what each leaves to the next."""

    encoding: str = "cl100k_base"
    # why the encoding is a guess, when it is (``tokens.EncodingChoice.note``)
    encoding_note: str | None = None
    budget: Mapping[str, Any] | None = None
    pinned: Sequence[str] = ()
    context_window: int | None = None
    # id -> the latest message recorded under it; id -> folded or dropped original
    latest: MutableMapping[str, Message] = field(default_factory=dict)
    archive: MutableMapping[str, Message] = field(default_factory=dict)
    # after contexts by step index: those known so far (a `$base` names one, and
    # inference compares a step's obs with its predecessor's)
    afters: dict[int, Sequence[Message]] = field(default_factory=dict)
    # how many of the latest afters `record` keeps (all, unless said): a mirror
    # that only builds on the last step need not hold a long session's contexts
    keep_afters: int | None = None
    # what each step walked folded (its own operations', then the inferred ones')
    folds: dict[int, list[Fold]] = field(default_factory=dict)
    # ids folded or dropped by the steps so far
    folded: set[str] = field(default_factory=set)
    tracker: LossTracker = field(default_factory=LossTracker)
    _previous: _Previous | None = None

    # --- deriving steps from what an agent sent ------------------------------------

    def derive(
        self,
        index: int,
        *,
        obs: Any,
        ops_raw: Any = None,
        ops_field: str = "body.actions",
        after_raw: Any = None,
        base: int | None = None,
    ) -> StepResult:
        """Step `index`'s contexts from the raw event parts, as the session stands.

        Changes nothing (`record` takes the result); raises InputError for a step
        the session cannot take. `base` is the step whose after the obs's runs
        (``$run``) refer to.
        """
        resolved = 0  # how many of the obs's first items are messages of the base
        if base is not None:
            context = self.afters.get(base)
            if context is None:
                raise InputError(
                    "body.obs.$base", f"step {base} {NEVER_RECORDED} for this session", 422
                )
            obs, resolved = expand_runs(obs, context, field="body.obs.messages")
        return derive_step(
            obs=obs,
            obs_resolved=resolved,
            ops_raw=ops_raw,
            ops_field=ops_field,
            after_raw=after_raw,
            latest=self.latest,
            # What a reload can bring back: the archived originals, and what the
            # session recorded and left the context without an operation saying so
            # (its inferred fold is only archived once the worker has inferred it);
            # what is still in the context is refused as such.
            archive=ChainMap(self.archive, self.latest),
        )

    def record(self, index: int, result: StepResult) -> None:
        """Take a derived step: what its ids now stand for, its folds, its after."""
        self.latest.update(result.recorded)
        for fold in result.folds:
            for m in fold.originals:
                self.archive[m.id] = m
        afters = self.afters
        afters[index] = result.after
        if self.keep_afters is not None and len(afters) > self.keep_afters:
            for old in sorted(afters)[: len(afters) - self.keep_afters]:
                del afters[old]

    def take(self, index: int, **event: Any) -> StepResult:
        """`derive` then `record`: the step as the server stores it."""
        result = self.derive(index, **event)
        self.record(index, result)
        return result

    # --- between steps ---------------------------------------------------------------

    def infer(self, index: int, before: Sequence[Message], *, compacted: bool = False) -> Inferred:
        """What changed between step `index - 1`'s after and this before, unreported.

        Nothing when that after is not known: no inference runs across a gap.
        """
        previous = self.afters.get(index - 1)
        if previous is None:
            return NOTHING_INFERRED
        return infer_step(previous, before, compacted=compacted)

    # --- statistics -------------------------------------------------------------------

    def resume(
        self,
        *,
        index: int,
        before: Sequence[Message],
        after: Sequence[Message],
        new_tool: str | None,
        new_call: str | None,
    ) -> None:
        """Continue after step `index`, computed earlier (the worker's next chunk)."""
        self.afters = {index: after}
        self._previous = _Previous(index, before, {m.id for m in before}, new_tool, new_call)

    def restore_losses(
        self, rows: Iterable[tuple[int, Mapping[str, Any]]], cache: TextCache
    ) -> None:
        """Rebuild what the losses and the waste trackers knew from the stats of the
        steps before (``LossTracker.restore``'s rows), after `resume`."""
        self.tracker.restore(rows, cache)
        if self._previous is not None:
            self.tracker.waste.resume(self._previous.before, cache)

    def measure(
        self,
        step: WalkedStep,
        *,
        tokens_of: TokensOf,
        cache: TextCache,
        meter: ContextMeter | None = None,
        estimate_meter: ContextMeter | None = None,
    ) -> tuple[Inferred, dict[str, Any]]:
        """Step `step`'s inferred operations and statistics; the walk moves past it.

        Steps are measured in index order. `meter` (on `tokens_of`) is best kept
        for the whole walk, so each context costs its changes.
        """
        # Across a gap nothing is inferred, but the previous step still says which
        # messages are new and which tool call came last.
        previous = self._previous
        before, after, ops = step.before, step.after, step.ops
        inferred = self.infer(step.index, before, compacted=step.compacted)
        reloaded = [t for op in ops if op.op == "reload" for t in op.targets]
        prev_ids = previous.ids if previous is not None else None
        stats = step_stats(
            StepInput(
                before=before,
                after=after,
                ops=ops,
                folds=step.folds,
                reloaded=reloaded,
                inferred_ops=inferred.ops,
                inferred_folds=inferred.folds,
                folded_earlier=self.folded,
                prev_new_tool=previous.new_tool if previous is not None else None,
                prev_new_call=previous.new_call if previous is not None else None,
                prev_ids=prev_ids,
                budget=self.budget,
                pinned=self.pinned,
                reported_before=reported_before(step.before_tokens, step.usage),
                reported_after=step.after_tokens,
                after_mismatch=step.after_mismatch,
                encoding=self.encoding,
                context_window=step.context_window or self.context_window,
                tools_tokens=step.tools_tokens,
                reported_by_usage=step.before_tokens is None and step.usage is not None,
                usage=step.usage,
                model=step.model,
            ),
            tokens_of=tokens_of,
            cache=cache,
            meter=meter,
            estimate_meter=estimate_meter,
        )
        if self.encoding_note:
            stats["encoding_note"] = self.encoding_note
        # What changed since the previous step's before: the waste tracker and the
        # ids of the next step read it, worked out once.
        since = None
        if previous is not None and previous.before is not before:
            since = (previous.before, context_delta(previous.before, before))
        self._track_losses(step, stats, inferred, reloaded, prev_ids, cache, tokens_of, since)
        self._advance(step, inferred, stats, previous, since)
        return inferred, stats

    def _track_losses(
        self,
        step: WalkedStep,
        stats: dict[str, Any],
        inferred: Inferred,
        reloaded: Sequence[str],
        prev_ids: set[str] | None,
        cache: TextCache,
        tokens_of: TokensOf,
        since: tuple[Sequence[Message], Delta] | None,
    ) -> None:
        """What the step needed of earlier losses, and what it lost itself, into its stats."""
        tracker = self.tracker
        before = step.before
        needs, refetches = tracker.needs_of(
            step.index,
            before,
            new_positions(before, prev_ids),
            reloaded,
            cache,
            tokens_of,
            said=step.said,
        )
        flags = stats["flags"]
        if needs:
            stats["needs"] = needs
            flags.append("amnesia")
        if refetches:
            stats["refetches"] = refetches
            flags.append("refetch_after_fold")
        if needs or refetches:
            flags.sort()
        if tracker.closed:
            # What a resumed walk must close too (`LossTracker.restore`).
            stats["closed"] = tracker.closed
        pairs = [(f, before) for f in step.folds]
        previous = self.afters.get(step.index - 1)
        if previous is not None:
            pairs += [(f, previous) for f in inferred.folds]
        waste = tracker.waste.step(step.index, before, tokens_of, cache, since)
        if waste:
            stats["waste"] = waste
        calls = tracker.lose(step.index, stats["ops"], pairs, cache)
        if calls:
            stats["folded_calls"] = calls

    def _advance(
        self,
        step: WalkedStep,
        inferred: Inferred,
        stats: Mapping[str, Any],
        previous: _Previous | None,
        since: tuple[Sequence[Message], Delta] | None,
    ) -> None:
        folds = [*step.folds, *inferred.folds]
        if folds:
            self.folds[step.index] = folds
            for f in folds:
                self.folded.update(m.id for m in f.originals)
        self.afters.pop(step.index - 1, None)
        self.afters[step.index] = step.after
        ids = _ids_of(step.before, previous, since)
        self._previous = _Previous(
            step.index, step.before, ids, stats.get("new_tool"), stats.get("new_call")
        )


def _ids_of(
    before: Sequence[Message],
    previous: _Previous | None,
    since: tuple[Sequence[Message], Delta] | None,
) -> set[str]:
    """The ids of `before`, from those of the previous step's before when little changed.

    `since` is that before and its ``context_delta`` to `before`, when worked out.
    The previous step's set is updated in place: the step that read it is done with it.
    """
    if previous is None:
        return {m.id for m in before}
    if previous.before is before:
        return previous.ids
    if since is not None and since[0] is previous.before:
        delta = since[1]
    else:
        delta = context_delta(previous.before, before)
    if delta is None:
        return {m.id for m in before}
    removed, added = delta
    ids = previous.ids
    ids.difference_update(m.id for m in removed)
    ids.update(m.id for m in added)
    return ids
