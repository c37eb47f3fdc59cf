"""Replaying a recorded session under another context policy.

The contract's "Replaying a session under another policy": starting from the
messages as they arrived, a policy decides what each step's context would have
held, with no model called. What arrived at a step is what the end of its
recorded before holds that no earlier recorded context held (``new_positions``,
as the session's own statistics find it): the agent's, the user's and the tools'
messages, never what the recorded manager made (its summaries appear in an after
first, or carry a ``compaction`` part).

A policy is one small class with a ``kind``, built from its JSON by
`policy_from_json`, whose ``changes`` say what leaves the context so far (the
policy's own previous context followed by the step's arrivals), or is shown as a
placeholder from then on; both count as removing the message at that step. What
a removal lost, and whether a later step needed it, is decided by
`contextview.core.needs.LossTracker`, the rule the session's own statistics use:
each message a policy removes is fed to it as an operation that dropped it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, ClassVar, overload

from contextview.core.calls import CALL_LOOKBACK
from contextview.core.entities import is_kept_key
from contextview.core.errors import InputError
from contextview.core.model import PARTITIONS, Fold, Message
from contextview.core.needs import LossTracker, new_positions
from contextview.core.parts import has_compaction
from contextview.core.stats import TextCache, TokensOf

# Roles a sliding window always keeps: what sets up the agent, never "a turn".
_STANDING_ROLES = frozenset({"system", "developer"})
_TOOL_ROLES = frozenset({"tool", "tool_result"})


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """One step as recorded: its before (where arrivals are found) and its after."""

    index: int
    before: Sequence[Message]
    after: Sequence[Message]
    # tokens of the context the step had as recorded (its after), from the stored counts
    tokens: int


@dataclass(slots=True)
class Slot:
    """A message in a policy's context, shown as itself or as a placeholder."""

    message: Message
    shown: Message
    tokens: int
    # whether a window policy keeps it whatever its age, once worked out
    standing: bool | None = None

    @property
    def masked(self) -> bool:
        return self.shown is not self.message


@dataclass(frozen=True, slots=True)
class ReplayedStep:
    index: int
    tokens: int
    # the policy's context at this step (a list no later step changes)
    held: Sequence[Slot]
    removed: list[str]
    lost_needed: list[str]
    # tokens of the context as recorded, for comparing
    recorded: int

    @property
    def messages(self) -> list[str]:
        """The ids of the messages the policy's context holds (made when asked)."""
        return [s.message.id for s in self.held]

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "tokens": self.tokens,
            "messages": self.messages,
            "removed": self.removed,
            "lost_needed": self.lost_needed,
        }


@dataclass(slots=True)
class Totals:
    """The replay's totals, filled as its steps are produced."""

    tokens: int = 0
    recorded: int = 0
    peak_tokens: int = 0
    recorded_peak: int = 0
    amnesia: int = 0
    steps: int = 0

    def add(self, step: ReplayedStep) -> None:
        self.steps += 1
        self.tokens += step.tokens
        self.recorded += step.recorded
        self.peak_tokens = max(self.peak_tokens, step.tokens)
        self.recorded_peak = max(self.recorded_peak, step.recorded)
        self.amnesia += len(step.lost_needed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "tokens_saved": self.recorded - self.tokens,
            "peak_tokens": self.peak_tokens,
            "amnesia": self.amnesia,
            "recorded_tokens": self.recorded,
            "recorded_peak_tokens": self.recorded_peak,
        }


# A change a policy makes at a step: the position of a slot of the context so far,
# and what shows it from now on (None: it leaves the context).
Change = tuple[int, Slot | None]


@dataclass(slots=True)
class Shaping:
    """What a policy is given at each step, and the helpers it may use."""

    tokens: int  # tokens of the context so far
    first_new: int  # position of the step's first arrival (they come last)
    pinned: Callable[[Message], bool]
    # a placeholder standing for a message, and its tokens
    placeholder: Callable[[Message, int], tuple[Message, int]]
    cache: TextCache
    # what the policy noted at earlier steps of this replay
    state: dict[str, Any]


class Policy:
    """How a context is kept; subclasses set ``kind`` and implement ``changes``."""

    kind: ClassVar[str]

    def changes(self, slots: list[Slot], at: Shaping) -> list[Change]:
        """What leaves the context so far at this step, or is shown otherwise.

        Only changes, never the whole context: a policy that looks at the recent
        end only costs the same at step 10 and at step 10,000.
        """
        raise NotImplementedError

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind}


class Full(Policy):
    kind = "full"

    def changes(self, slots: list[Slot], at: Shaping) -> list[Change]:
        return []


@dataclass(frozen=True)
class Sliding(Policy):
    """System, developer and pinned messages, and the last `keep_last` others."""

    keep_last: int
    kind: ClassVar[str] = "sliding"

    def keeps(self, slot: Slot, at: Shaping) -> bool:
        m = slot.message
        return m.role in _STANDING_ROLES or at.pinned(m)

    def _standing(self, slot: Slot, at: Shaping) -> bool:
        standing = slot.standing
        if standing is None:
            standing = slot.standing = self.keeps(slot, at)
        return standing

    def changes(self, slots: list[Slot], at: Shaping) -> list[Change]:
        # The others held: those the window held after the previous step, and the new.
        window = at.state.get("window", 0)
        window += sum(1 for s in slots[at.first_new :] if not self._standing(s, at))
        excess = window - self.keep_last
        at.state["window"] = min(window, self.keep_last)
        if excess <= 0:
            return []
        out: list[Change] = []
        others = 0
        # From the end: past the window, the next `excess` others are the oldest it held.
        for k in range(len(slots) - 1, -1, -1):
            if self._standing(slots[k], at):
                continue
            others += 1
            if others > self.keep_last:
                out.append((k, None))
                if len(out) == excess:
                    break
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "keep_last": self.keep_last}


@dataclass(frozen=True)
class Hybrid(Sliding):
    """A sliding window that also keeps the task and every user message naming a key
    entity (seed 001's hybrid: hard instructions and key entities come first)."""

    kind: ClassVar[str] = "hybrid"

    def keeps(self, slot: Slot, at: Shaping) -> bool:
        m = slot.message
        if super().keeps(slot, at) or m.partition == "task":
            return True
        return m.role == "user" and bool(at.cache.base_entities(m.text))


@dataclass(frozen=True)
class MaskObservations(Policy):
    """Tool results older than the last `keep_last` shown as a one-line placeholder."""

    keep_last: int
    kind: ClassVar[str] = "mask_observations"

    def changes(self, slots: list[Slot], at: Shaping) -> list[Change]:
        seen = 0
        out: list[Change] = []
        for k in range(len(slots) - 1, -1, -1):
            slot = slots[k]
            m = slot.message
            if m.role not in _TOOL_ROLES and m.partition != "tool":
                continue
            if seen < self.keep_last:
                seen += 1
                continue
            if slot.masked:
                break  # everything older was masked at an earlier step
            if at.pinned(m):
                continue
            shown, tokens = at.placeholder(m, slot.tokens)
            if tokens < slot.tokens:  # a placeholder that costs more is no saving
                out.append((k, Slot(m, shown, tokens)))
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "keep_last": self.keep_last}


@dataclass(frozen=True)
class Budget(Policy):
    """Over `max_tokens`, the oldest messages of the first partition of `order` leave,
    then those of the next, until under. Pinned messages never leave."""

    max_tokens: int
    order: tuple[str, ...]
    kind: ClassVar[str] = "budget"

    def changes(self, slots: list[Slot], at: Shaping) -> list[Change]:
        excess = at.tokens - self.max_tokens
        out: list[Change] = []
        for partition in self.order:
            if excess <= 0:
                break
            for k, slot in enumerate(slots):
                if excess <= 0:
                    break
                if slot.message.partition == partition and not at.pinned(slot.message):
                    out.append((k, None))
                    excess -= slot.tokens
        return out

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "max_tokens": self.max_tokens, "order": list(self.order)}


POLICIES: dict[str, type[Policy]] = {
    p.kind: p for p in (Full, Sliding, MaskObservations, Budget, Hybrid)
}


# The range of each count a policy takes: past the maximum no context is that big, and
# a number the answer's JSON cannot hold in 64 bits never reaches it.
KEEP_LAST = (0, 1_000_000)
MAX_TOKENS = (1, 1_000_000_000)


def _count(raw: Mapping[str, Any], name: str, bounds: tuple[int, int]) -> int:
    value = raw.get(name)
    low, high = bounds
    if type(value) is not int or not low <= value <= high:
        raise InputError(f"policy.{name}", f"must be an integer from {low:,} to {high:,}")
    return value


def policy_from_json(raw: Any) -> Policy:
    """The policy a JSON object describes; `InputError` naming the field otherwise."""
    if not isinstance(raw, Mapping):
        raise InputError("policy", "must be an object with a kind")
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in POLICIES:
        raise InputError("policy.kind", f"must be one of {', '.join(POLICIES)}, not {kind!r}")
    allowed = _PARAMETERS[kind]
    extra = sorted(set(raw) - allowed - {"kind"})
    if extra:
        raise InputError(f"policy.{extra[0]}", f"is not a parameter of {kind}")
    if kind == "full":
        return Full()
    if kind == "budget":
        max_tokens = _count(raw, "max_tokens", MAX_TOKENS)
        order = raw.get("order")
        if not isinstance(order, list) or not order:
            raise InputError("policy.order", "must be a non-empty list of partitions")
        for k, name in enumerate(order):
            if name not in PARTITIONS:
                raise InputError(f"policy.order[{k}]", f"must be one of {', '.join(PARTITIONS)}")
        return Budget(max_tokens=max_tokens, order=tuple(dict.fromkeys(order)))
    windowed = _WINDOWED[kind]
    return windowed(keep_last=_count(raw, "keep_last", KEEP_LAST))


_PARAMETERS: dict[str, frozenset[str]] = {
    "full": frozenset(),
    "sliding": frozenset({"keep_last"}),
    "mask_observations": frozenset({"keep_last"}),
    "hybrid": frozenset({"keep_last"}),
    "budget": frozenset({"max_tokens", "order"}),
}
_WINDOWED: dict[str, type[Sliding] | type[MaskObservations]] = {
    "sliding": Sliding,
    "mask_observations": MaskObservations,
    "hybrid": Hybrid,
}


def placeholder_text(message: Message, tokens: int) -> str:
    """The one line that stands for an omitted tool result."""
    what = message.tool or (message.extra or {}).get("name") or "tool"
    return f"[{what} output omitted: {tokens} tokens]"


@dataclass(slots=True)
class Replay:
    """One replay of a session under a policy; iterate `steps()` once, then read totals."""

    policy: Policy
    tokens_of: TokensOf
    # tokens of a text the session never stored (the placeholders)
    count_text: Callable[[str], int]
    cache: TextCache = field(default_factory=TextCache)
    pinned: tuple[str, ...] = ()
    totals: Totals = field(default_factory=Totals)

    def steps(self, recorded: Iterable[RecordedStep]) -> Iterator[ReplayedStep]:
        tracker = LossTracker()
        cache = self.cache
        seen: set[str] = set()
        # every message as it arrived, and where: a removed tool result's call is
        # looked for among the messages just before it, wherever those are now
        history: list[Message] = []
        arrived_at: dict[str, int] = {}
        context: list[Slot] = []
        tokens = 0
        placeholder_tokens: dict[str, int] = {}
        pinned_texts = self.pinned

        def pinned(m: Message) -> bool:
            return m.pinned or bool(pinned_texts and cache.pinned_in(pinned_texts, m.text))

        def placeholder(m: Message, count: int) -> tuple[Message, int]:
            text = placeholder_text(m, count)
            shown_tokens = placeholder_tokens.get(text)
            if shown_tokens is None:
                shown_tokens = placeholder_tokens[text] = self.count_text(text)
            return Message(m.id, m.role, text, m.partition, tool=m.tool), shown_tokens

        index = _KeptIndex(cache)
        shaping = Shaping(
            tokens=0,
            first_new=0,
            pinned=pinned,
            placeholder=placeholder,
            cache=cache,
            state={},
        )
        for step in recorded:
            # New messages come at the end of a context (the rule of the session's own
            # statistics); what the recorded manager put at the end of its after is
            # known, so it does not arrive with the next step's before.
            before, after = step.before, step.after
            arrived = [before[k] for k in new_positions(before, seen)]
            seen.update(m.id for m in arrived)
            if any(has_compaction(m.content) for m in arrived):
                # A summary the recorded manager sent as a compaction part, silently: its
                # own, as its summaries in an after are.
                arrived = [m for m in arrived if not has_compaction(m.content)]
            if after is not before:
                seen.update(after[k].id for k in new_positions(after, seen))
            for m in arrived:
                arrived_at[m.id] = len(history)
                history.append(m)
            candidate = context + [Slot(m, m, self.tokens_of(m)) for m in arrived]
            tokens += sum(s.tokens for s in candidate[len(context) :])
            needs, _ = tracker.needs_of(
                step.index,
                _Shown(candidate),
                range(len(context), len(candidate)),
                (),
                cache,
                self.tokens_of,
                kept=index.keeper(context),
            )
            shaping.tokens = tokens
            shaping.first_new = len(context)
            changes = self.policy.changes(candidate, shaping)
            removed: list[str] = []
            shaped = candidate
            if changes:
                shaped, removed, folded, delta = _applied(candidate, changes)
                tokens += delta
                # One loss per message, its entities as the stored index gave them (their
                # keys known), and as the operations of a recorded step are.
                ops = [
                    {"targets": [m.id], "entities": {"lost": cache.base_entities(m.text)}}
                    for m in folded
                ]
                folds = [
                    (Fold(0, "replay", "drop", None, (m,)), _call_window(history, arrived_at, m))
                    for m in folded
                ]
                tracker.lose(step.index, ops, folds, cache)
            context = shaped
            replayed = ReplayedStep(
                index=step.index,
                tokens=tokens,
                held=context,
                removed=removed,
                lost_needed=[n["text"] for n in needs],
                recorded=step.tokens,
            )
            self.totals.add(replayed)
            yield replayed


def _call_window(history: list[Message], arrived_at: dict[str, int], m: Message) -> list[Message]:
    """`m` with the messages that arrived just before it, where its call would be."""
    at = arrived_at.get(m.id)
    if at is None or history[at] is not m:
        return [m]  # a placeholder: no call to find
    return history[max(0, at - CALL_LOOKBACK) : at + 1]


class _Shown(Sequence[Message]):
    """What a list of slots shows, read without copying it."""

    __slots__ = ("_slots",)

    def __init__(self, slots: list[Slot]) -> None:
        self._slots = slots

    def __len__(self) -> int:
        return len(self._slots)

    @overload
    def __getitem__(self, k: int) -> Message: ...
    @overload
    def __getitem__(self, k: slice) -> list[Message]: ...
    def __getitem__(self, k: int | slice) -> Message | list[Message]:
        if isinstance(k, slice):
            return [s.shown for s in self._slots[k]]
        return self._slots[k].shown

    def __iter__(self) -> Iterator[Message]:
        return (s.shown for s in self._slots)


class _KeptIndex:
    """Whether a policy's context keeps an entity, asked of its normalized text joined
    in blocks of slots: a block no step changed is joined once, and a context of
    20,000 messages is searched at C speed."""

    BLOCK = 256

    def __init__(self, cache: TextCache) -> None:
        self.cache = cache
        self.blocks: dict[int, tuple[tuple[Slot, ...], str]] = {}

    def keeper(self, slots: list[Slot]) -> Callable[[str], bool]:
        texts: list[str] = []

        def kept(key: str) -> bool:
            if not texts and slots:
                texts.extend(self._joined(slots))
            return any(is_kept_key(key, text) for text in texts)

        return kept

    def _joined(self, slots: list[Slot]) -> Iterator[str]:
        normalized = self.cache.normalized
        for start in range(0, len(slots), self.BLOCK):
            part = tuple(slots[start : start + self.BLOCK])
            known = self.blocks.get(start)
            # Compared by identity first: an unchanged block costs a pointer compare a slot.
            if known is None or known[0] != part:
                # No entity holds a NUL, so none is found across two messages.
                known = self.blocks[start] = (
                    part,
                    "\x00".join(normalized(s.shown.text) for s in part),
                )
            yield known[1]


def _applied(
    slots: list[Slot], changes: list[Change]
) -> tuple[list[Slot], list[str], list[Message], int]:
    """(the context with `changes` made, the ids they took out or showed otherwise,
    what was shown of those, the change in tokens)."""
    out = list(slots)
    removed: list[str] = []
    shown: list[Message] = []
    delta = 0
    leaving: list[int] = []
    for k, replacement in sorted(changes, key=itemgetter(0)):
        old = slots[k]
        removed.append(old.message.id)
        shown.append(old.shown)
        if replacement is None:
            delta -= old.tokens
            leaving.append(k)
        else:
            delta += replacement.tokens - old.tokens
            out[k] = replacement
    for k in reversed(leaving):
        del out[k]
    return out, removed, shown, delta


def replay(
    policy: Policy,
    recorded: Iterable[RecordedStep],
    *,
    tokens_of: TokensOf,
    count_text: Callable[[str], int],
    cache: TextCache | None = None,
    pinned: Sequence[str] = (),
) -> tuple[list[ReplayedStep], Totals]:
    """Every step of a replay, and its totals (for callers that need them all at once)."""
    run = Replay(policy, tokens_of, count_text, cache or TextCache(), tuple(pinned))
    return list(run.steps(recorded)), run.totals


# Seed 001's context modes as the policies that play them; rag needs a retriever,
# which a replay does not have, so it has none.
MODE_POLICIES: dict[str, dict[str, Any]] = {
    "full": {"kind": "full"},
    "sliding": {"kind": "sliding", "keep_last": 20},
    "summary": {"kind": "mask_observations", "keep_last": 3},
    "hybrid": {"kind": "hybrid", "keep_last": 10},
}
# Seed 002's degradation order: tool results first, then memory, then retrieval.
DEGRADATION_ORDER = ("tool", "memory", "retrieval")

__all__ = [
    "DEGRADATION_ORDER",
    "KEEP_LAST",
    "MAX_TOKENS",
    "MODE_POLICIES",
    "POLICIES",
    "Budget",
    "Full",
    "Hybrid",
    "MaskObservations",
    "Policy",
    "RecordedStep",
    "Replay",
    "ReplayedStep",
    "Sliding",
    "Totals",
    "placeholder_text",
    "policy_from_json",
    "replay",
]
