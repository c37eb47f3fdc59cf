"""Statistics of a step and of a session: the contract's "Statistics" section.

`step_stats` turns one step (its before and after contexts, operations and folds)
into the `stats` object of the read API; `SessionSums` sums those objects into a
session's `aggregates` as they come (`session_aggregates` over a whole list).
Token counts come in through `tokens_of`, so the caller decides how they are
counted and cached (tiktoken, see `tokens.py`).

Reward
------
Every step gets a deterministic `reward`. It follows the per-action reward of
seed 000 (section 5.3) and the process rewards of seed 003:

    reward =   sum over replacing operations (summarize, fold, merge, rewrite, truncate) of
                 +1.0  when it keeps every key entity and at least halves the tokens
                       (tokens_out <= tokens_in / 2)
                 -0.5  when it loses a key entity (entity_loss)
             + 0.2 per summarize, when the step has a budget and its after context
                   is within it (after <= max_tokens - reserved_tokens)
             - 1.0 when the step reloads something folded in an earlier step
                   (reload_regret)
             - 0.5 * (1 + min(1, overflow)) when the after context exceeds the budget
                   (budget_exceeded), overflow = (after - limit) / limit,
                   limit = max_tokens - reserved_tokens: from -0.5 just over to -1.0
                   at twice the limit
             - 0.3 when the step's new tool message uses the same tool as the
                   previous step's (repeated_tool_call)

rounded to 4 decimals. Seed 000 gives its +0.2 "while the task is succeeding",
which a step cannot know; staying within budget is the observable stand-in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from contextview.core.calls import is_tool_result, result_call
from contextview.core.entities import (
    entity_key,
    extract_entities,
    is_kept_key,
    normalize,
    pinned_entities,
)
from contextview.core.layout import third_of
from contextview.core.model import (
    COMPACTING_OPS,
    PARTITIONS,
    REPLACING_OPS,
    Fold,
    Message,
    Operation,
)
from contextview.core.parts import has_compaction
from contextview.core.sequences import common_prefix, common_suffix
from contextview.core.usage import usage_counts
from contextview.core.windows import known_window

# Every flag a step can raise, with the one line the page and the reports show beside
# it (the contract's Statistics section). In the order the dashboard lists them.
FLAG_HELP: dict[str, str] = {
    "over_70": (
        "the context after this step is over 70% of the budget (of the context window, "
        "without a budget)"
    ),
    "over_90": (
        "the context after this step is over 90% of the budget (of the context window, "
        "without a budget)"
    ),
    "budget_exceeded": "the context after this step is over max_tokens minus reserved_tokens",
    "partition_over": "a partition is over its own budget",
    "ratio_ineffective": "a compression kept more than 80% of the tokens it was given",
    "ratio_aggressive": "a compression kept less than 5% of the tokens it was given",
    "entity_loss": "a key entity (id, number, code, pinned text) did not survive a rewrite",
    "reload_regret": "this step reloads something folded in an earlier step",
    "repeated_tool_call": "the same tool call (tool and arguments) as the previous step's",
    "amnesia": "this step needs something an earlier operation lost",
    "refetch_after_fold": "a tool call repeats, with its arguments, one whose result was folded",
    "pinned_mid": "a pinned text sits in the middle third of a context over 8,000 tokens",
    "pinned_missing": "a pinned text is not in the context after this step",
    "after_mismatch": "the agent's after context differs from applying its operations",
    "token_estimate_off": "the agent's own token counts are off by more than 10%",
}
FLAGS = tuple(FLAG_HELP)

# Thresholds of seed 002: its ContextBuilder compresses lightly at 70% and
# forcibly at 90%; validate_compression warns below 0.05 and above 0.8.
OVER_70 = 0.7
OVER_90 = 0.9
# The thresholds as the occupancy charts draw them, fractions of max_tokens, by flag.
OCCUPANCY_THRESHOLDS = (("over_90", OVER_90), ("over_70", OVER_70))
RATIO_INEFFECTIVE = 0.8
RATIO_AGGRESSIVE = 0.05
ESTIMATE_OFF = 0.1
# pinned_mid: a pinned text in the middle third of a context longer than this.
PINNED_MID_MIN_TOKENS = 8000

REWARD_EFFECTIVE = 1.0
REWARD_SUMMARIZE_IN_BUDGET = 0.2
PENALTY_RELOAD_REGRET = 1.0
PENALTY_BUDGET = 0.5
PENALTY_REPEATED_TOOL = 0.3
PENALTY_NEEDED_LOSS = 0.5

TokensOf = Callable[[Message], int]
_is_pinned = attrgetter("pinned")


@dataclass(frozen=True, slots=True)
class StepInput:
    """What one step's statistics are computed from.

    `folded_earlier`, `prev_new_tool` and `prev_ids` carry what the earlier steps
    of the session left behind; the caller keeps them from step to step (the
    `new_tool` of one step's stats is the next step's `prev_new_tool`).
    """

    before: Sequence[Message]
    after: Sequence[Message]
    ops: Sequence[Operation] = ()
    folds: Sequence[Fold] = ()
    # ids brought back by reload operations in this step
    reloaded: Sequence[str] = ()
    # What changed between the previous step's after and this before without the
    # agent saying so (``contextview.core.infer``), and what those operations folded.
    inferred_ops: Sequence[Operation] = ()
    inferred_folds: Sequence[Fold] = ()
    # ids folded or dropped in earlier steps of the session
    folded_earlier: Set[str] = frozenset()
    # the tool of the previous step's new tool message, and its arguments when known
    prev_new_tool: str | None = None
    prev_new_call: str | None = None
    # ids of the previous step's before context; None for a session's first step
    prev_ids: Set[str] | None = None
    # the session's budget as sent: max_tokens, reserved_tokens, partitions
    budget: Mapping[str, Any] | None = None
    # the session's pinned texts
    pinned: Sequence[str] = ()
    reported_before: int | None = None
    reported_after: int | None = None
    after_mismatch: bool = False
    encoding: str = "cl100k_base"
    # contract v1.1: the model's window (occupancy is measured against it without
    # a budget), the tokens of the tool definitions sent with the call (partition
    # "tools", in both contexts), and whether `reported_before` is the provider's
    # usage rather than the agent's own estimate
    context_window: int | None = None
    tools_tokens: int = 0
    reported_by_usage: bool = False
    # the provider's usage as reported (input_tokens, cache_read_tokens, ...)
    usage: Mapping[str, Any] | None = None
    # the model that served the call: with usage and no window given, its known
    # window (``contextview.core.windows``) is what occupancy is measured against
    model: str | None = None


class TextCache:
    """Text work that repeats across a session's steps, done once per text.

    A context changes little from one step to the next; keyed by the text itself,
    the normalization, entity extraction and pinned-text lookups of an unchanged
    message cost a dict lookup. One cache serves one session's computation.
    """

    __slots__ = ("_normalized", "_base", "_entities", "_pinned", "_keys", "_text_keys", "_stored")

    def __init__(
        self, stored: Callable[[str], tuple[list[str], list[str]] | None] | None = None
    ) -> None:
        """`stored`, when given, answers a text's entities and their keys as a caller
        kept them per content (or None): asked before they are extracted again."""
        self._stored = stored
        self._normalized: dict[str, str] = {}
        # entities of a text alone, which a caller may have stored per content
        self._base: dict[str, list[str]] = {}
        self._entities: dict[tuple[str, ...], dict[str, list[str]]] = {}
        self._pinned: dict[tuple[str, ...], tuple[tuple[str, ...], dict[str, frozenset[int]]]] = {}
        # by id() of a list that `entities` returned: (that list, its entities' keys)
        self._keys: dict[int, tuple[list[str], list[str]]] = {}
        # keys of a text's entities alone, which a caller may have stored per content
        self._text_keys: dict[str, list[str]] = {}

    def normalized(self, text: str) -> str:
        cached = self._normalized.get(text)
        if cached is None:
            cached = self._normalized[text] = normalize(text)
        return cached

    def prime(self, text: str, entities: list[str], keys: list[str] | None = None) -> None:
        """Entities of `text` extracted earlier (``extract_entities(text)``, no pinned).

        `keys`, when known, are their ``entity_key``s.
        """
        self._base[text] = entities
        if keys is not None:
            self._keys[id(entities)] = (entities, keys)

    def prime_keys_of(self, entities: list[str], keys: list[str]) -> None:
        """The ``entity_key`` of each of `entities`, worked out earlier: what
        `keys_of` gives for that list."""
        self._keys[id(entities)] = (entities, keys)

    def prime_keys(self, text: str, keys: list[str]) -> None:
        """The keys of `text`'s entities (no pinned), worked out earlier: `text_keys`."""
        self._text_keys[text] = keys

    def text_keys(self, text: str) -> list[str]:
        """The keys of the entities of `text` alone (no pinned texts)."""
        keys = self._text_keys.get(text)
        if keys is None:
            keys = self._text_keys[text] = self.keys_of(self.base_entities(text))
        return keys

    def base_entities(self, text: str) -> list[str]:
        cached = self._base.get(text)
        if cached is None:
            kept = self._stored(text) if self._stored is not None else None
            if kept is None:
                cached = self._base[text] = extract_entities(text)
            else:
                cached = self._base[text] = kept[0]
                self._keys[id(cached)] = kept
        return cached

    def entities(self, text: str, pinned: tuple[str, ...] = ()) -> list[str]:
        if not pinned:
            return self.base_entities(text)
        by_text = self._entities.get(pinned)
        if by_text is None:
            by_text = self._entities[pinned] = {}
        cached = by_text.get(text)
        if cached is None:
            cached = by_text[text] = pinned_entities(self.base_entities(text), text, pinned)
        return cached

    def remember_keys(self, entities: list[str], keys: list[str]) -> None:
        """Known keys of a list of entities, for `keys_of`."""
        self._keys[id(entities)] = (entities, keys)

    def keys_of(self, entities: list[str]) -> list[str]:
        """The normalized key of each entity in a list that `entities` returned."""
        entry = self._keys.get(id(entities))
        if entry is None or entry[0] is not entities:
            keys = list(map(entity_key, entities))
            entry = self._keys[id(entities)] = (entities, keys)
        return entry[1]

    def pinned_in(self, pinned: tuple[str, ...], text: str) -> frozenset[int]:
        """Positions in `pinned` of the pinned texts that `text` contains."""
        hits = self.pinned_table(pinned).get(text)
        if hits is None:
            keys = self._pinned[pinned][0]
            folded = self.normalized(text)
            hits = frozenset(k for k, key in enumerate(keys) if key in folded)
            self._pinned[pinned][1][text] = hits
        return hits

    def pinned_table(self, pinned: tuple[str, ...]) -> dict[str, frozenset[int]]:
        """What `pinned_in` answered so far, by text: for callers that loop over contexts."""
        entry = self._pinned.get(pinned)
        if entry is None:
            entry = self._pinned[pinned] = (tuple(normalize(p) for p in pinned), {})
        return entry[1]


@dataclass(slots=True)
class Budget:
    """A session's budget as the statistics read it: `limit` is what the context may
    hold (max_tokens less reserved_tokens); the page's budget line is the same one."""

    max_tokens: int | None = None
    reserved_tokens: int = 0
    partitions: dict[str, int] = field(default_factory=dict)

    @property
    def limit(self) -> int | None:
        if self.max_tokens is None:
            return None
        return self.max_tokens - self.reserved_tokens


def _count(value: Any) -> int | None:
    # Budgets arrive as JSON; a bool is an int to Python but not a token count.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def budget_of(raw: Mapping[str, Any] | None, context_window: int | None = None) -> Budget:
    """The budget of a session's `budget` field; without max_tokens, the model's
    context window (contract v1.1). Values that are not token counts are ignored."""
    if not raw:
        return Budget(max_tokens=context_window if context_window else None)
    max_tokens = _count(raw.get("max_tokens"))
    if max_tokens is None or max_tokens <= 0:
        max_tokens = context_window
    partitions: dict[str, int] = {}
    raw_partitions = raw.get("partitions")
    if isinstance(raw_partitions, Mapping):
        for name, value in raw_partitions.items():
            n = _count(value)
            if n is not None:
                partitions[str(name)] = n
    return Budget(
        max_tokens=max_tokens if max_tokens is not None and max_tokens > 0 else None,
        reserved_tokens=max(0, _count(raw.get("reserved_tokens")) or 0),
        partitions=partitions,
    )


def _measure(messages: Sequence[Message], tokens_of: TokensOf) -> tuple[int, dict[str, int]]:
    total = 0
    parts: dict[str, int] = {}
    get = parts.get  # the hottest loop of a session's statistics
    for m in messages:
        n = tokens_of(m)
        total += n
        parts[m.partition] = get(m.partition, 0) + n
    return total, parts


class ContextMeter:
    """Token totals by partition of a session's contexts, measured one after another.

    A step's after context is its before with a few messages changed, and the
    next step's before is that after with a few more: measured in that order,
    each context is the previous one's sums with the messages that differ
    subtracted and added. The shared head and tail are found with list
    comparisons (identity first, so shared message objects compare at C speed);
    what differs is either one middle stretch (appends, a summary in place of
    old messages, drops close together) or a window that slid (old messages
    gone from the head, new ones at the end). Anything else is summed in full.

    The pinned messages are counted the same way (`pinned`): most contexts hold
    none, which each step would otherwise find out by going through two of them.
    """

    __slots__ = ("_tokens_of", "_last", "_total", "_parts", "_pinned")

    def __init__(self, tokens_of: TokensOf) -> None:
        self._tokens_of = tokens_of
        self._last: Sequence[Message] | None = None
        self._total = 0
        self._parts: dict[str, int] = {}
        self._pinned = 0

    @property
    def pinned(self) -> int:
        """How many messages of the context measured last are pinned."""
        return self._pinned

    def measure(self, messages: Sequence[Message]) -> tuple[int, dict[str, int]]:
        """`(tokens, tokens by partition)` of `messages`; callers must not change the dict."""
        last = self._last
        if last is messages:
            return self._total, self._parts
        delta = None if last is None else context_delta(last, messages)
        if delta is None:
            total, parts = _measure(messages, self._tokens_of)
            pinned = sum(map(_is_pinned, messages))
        else:
            removed, added = delta
            total, parts = self._total, dict(self._parts)
            pinned = self._pinned
            tokens_of = self._tokens_of
            for m in removed:
                n = tokens_of(m)
                total -= n
                parts[m.partition] -= n
                if m.pinned:
                    pinned -= 1
            for m in added:
                n = tokens_of(m)
                total += n
                parts[m.partition] = parts.get(m.partition, 0) + n
                if m.pinned:
                    pinned += 1
            if removed and 0 in parts.values():
                # A partition stays, at 0, while a message of it does (as _measure has it).
                present = {m.partition for m in messages}
                parts = {name: n for name, n in parts.items() if n or name in present}
        self._last, self._total, self._parts, self._pinned = messages, total, parts, pinned
        return total, parts


# What `context_delta` answers: (messages that left, messages that came), or None.
Delta = tuple[Sequence[Message], Sequence[Message]] | None


def context_delta(last: Sequence[Message], messages: Sequence[Message]) -> Delta:
    """What turns context `last` into `messages`: (messages that left, messages that came).

    None when that is no cheaper than going through `messages` whole. See
    `ContextMeter` for the two shapes of change it looks for.
    """
    if type(last) is not type(messages):
        last, messages = list(last), list(messages)
    n_last, n_new = len(last), len(messages)
    head = common_prefix(last, messages)
    tail = common_suffix(last, messages, min(n_last, n_new) - head)
    removed = last[head : n_last - tail]
    added = messages[head : n_new - tail]
    cost = len(removed) + len(added)
    if cost > 16 and head < n_new:
        # A slid window: the next message sits further along in `last`. Looked up
        # by identity: a message equal but not the same costs a full comparison.
        try:
            start = list(map(id, last)).index(id(messages[head]), head + 1)
        except ValueError:
            start = -1
        if start > 0:
            run = common_prefix(last[start:], messages[head:])
            slid_removed = [*last[head:start], *last[start + run :]]
            slid_added = messages[head + run :]
            if len(slid_removed) + len(slid_added) < cost:
                removed, added = slid_removed, slid_added
                cost = len(removed) + len(added)
    if cost >= n_new:
        return None
    return removed, added


def _partition_order(name: str) -> tuple[int, str]:
    # The contract's order (system, task, memory, ...), then any other name.
    return (PARTITIONS.index(name), "") if name in PARTITIONS else (len(PARTITIONS), name)


def usage_before(usage: Mapping[str, Any] | None) -> int | None:
    """The tokens a call's context came to, as its provider reported them: input
    plus cache reads and writes (contract v1.1), or OpenAI's ``prompt_tokens``,
    which already include cached ones. None without usage."""
    counts = usage_counts(usage)
    return counts.context if counts is not None else None


def provider_counted(before_tokens: int, after_tokens: int) -> str:
    """Which context ("before" or "after") a call's provider usage counted: the one
    operations that shrank it left (a compaction comes with the call that follows it),
    else the one before an after that only grew (by the call's own reply)."""
    return "after" if after_tokens < before_tokens else "before"


def reported_before(before_tokens: int | None, usage: Mapping[str, Any] | None) -> int | None:
    """The reported before count: the agent's own, else the provider's usage."""
    return before_tokens if before_tokens is not None else usage_before(usage)


def _relative_error(reported: int | None, measured: int) -> float | None:
    if reported is None or measured == 0:
        return None
    return (reported - measured) / measured


def _new_call(
    before: Sequence[Message], prev_ids: Set[str] | None
) -> tuple[str, str | None] | None:
    """(tool, arguments key) of the latest tool result the previous step's context did
    not have: its tool named by the message or by the call it answers (``result_call``,
    whatever the provider's spelling)."""
    for i in range(len(before) - 1, -1, -1):
        m = before[i]
        if prev_ids is not None and m.id in prev_ids:
            continue
        call = result_call(before, i)
        if call is not None and call[0]:
            return call
    return None


def folds_of_ops(
    ops: Sequence[Mapping[str, Any]], folds: Sequence[Fold], inferred_folds: Sequence[Fold]
) -> list[Fold | None]:
    """The fold of each entry of a step's ``stats["ops"]``, which `step_stats` lists
    as the step's own operations in order, then the inferred ones (``inferred``)."""
    own = {f.op_index: f for f in folds}
    unsaid = {f.op_index: f for f in inferred_folds}
    out: list[Fold | None] = []
    counts = [0, 0]
    for op in ops:
        inferred = bool(op.get("inferred"))
        out.append((unsaid if inferred else own).get(counts[inferred]))
        counts[inferred] += 1
    return out


def op_reward(entry: Mapping[str, Any], *, needed: bool) -> float:
    """The reward of one operation's stats; `needed`: it lost what a later step needed."""
    if entry["op"] not in REPLACING_OPS:
        return 0.0
    if needed:
        return -PENALTY_NEEDED_LOSS
    if entry["tokens_in"] > 0 and entry["tokens_out"] * 2 <= entry["tokens_in"]:
        return REWARD_EFFECTIVE
    return 0.0


class _Lookup:
    """Messages by id, built only when an operation needs one."""

    __slots__ = ("_before", "_after", "_by_id", "_after_by_id", "_scans", "results")

    # Lookups answered by scanning before a step builds its dict of every id.
    SCANS = 4

    def __init__(self, before: Sequence[Message], after: Sequence[Message]) -> None:
        self._before = before
        self._after = after
        self._by_id: dict[str, Message] | None = None
        self._after_by_id: dict[str, Message] | None = None
        self._scans = 0
        # results of this step's earlier operations: later ones may target them
        self.results: dict[str, Message] = {}

    @property
    def before(self) -> Sequence[Message]:
        return self._before

    def after_by_id(self) -> dict[str, Message]:
        if self._after_by_id is None:
            self._after_by_id = {m.id: m for m in self._after}
        return self._after_by_id

    def get(self, mid: str) -> Message | None:
        found = self.results.get(mid)
        if found is not None:
            return found
        if self._by_id is None and self._scans < self.SCANS:
            # Operations mostly name recent messages: scanning from the end finds
            # them at once, where a dict would cost the whole context.
            self._scans += 1
            for context in (self._before, self._after):
                for m in reversed(context):
                    if m.id == mid:
                        return m
            return None
        if self._by_id is None:
            # Before wins: a target rewritten under its own id is the old message.
            self._by_id = dict(self.after_by_id())
            self._by_id.update((m.id, m) for m in self._before)
        return self._by_id.get(mid)


def _op_stats(
    op: Operation,
    fold: Fold | None,
    lookup: _Lookup,
    tokens_of: TokensOf,
    cache: TextCache,
    pinned: tuple[str, ...],
) -> dict[str, Any]:
    name = op.op
    result = op.result
    if result is None and fold is not None and fold.result_id is not None:
        result = lookup.get(fold.result_id)
    if fold is not None:
        originals: Sequence[Message] = fold.originals
    else:
        # An operation that did not apply (the agent's own after was taken):
        # measure it on what its targets name.
        originals = [m for m in map(lookup.get, op.targets) if m is not None]

    entities: list[str] = []
    lost: list[str] = []
    tokens_in = tokens_out = 0
    ratio: float | None = None
    if name in REPLACING_OPS:
        tokens_in = sum(tokens_of(m) for m in originals)
        tokens_out = tokens_of(result) if result is not None else 0
        # A summary the provider encrypted (Codex's compaction item) reads as no tokens
        # here: its ratio is not known, not 0 (which read as the best compression there
        # is, and flagged ratio_aggressive).
        opaque = result is not None and not tokens_out and has_compaction(result.content)
        ratio = tokens_out / tokens_in if tokens_in and not opaque else None
        entities, keys = _entities_of(originals, cache, pinned)
        kept_in = cache.normalized(result.text) if result is not None else ""
        gone = [i for i, key in enumerate(keys) if not is_kept_key(key, kept_in)]
        lost = _ranked(entities, keys, gone, originals, lookup.before, cache, pinned)
    elif name == "drop":
        # Archived, not rewritten: everything it carried left the context with it.
        tokens_in = sum(tokens_of(m) for m in originals)
        entities, keys = _entities_of(originals, cache, pinned)
        everything = range(len(entities))
        lost = _ranked(entities, keys, everything, originals, lookup.before, cache, pinned)
    elif name == "reload":
        tokens_out = sum(tokens_of(m) for m in originals)
    elif name == "insert":
        tokens_out = tokens_of(result) if result is not None else 0
    else:
        # keep, pin, unpin, expire, reorder: the content stays as it was.
        tokens_in = tokens_out = sum(tokens_of(m) for m in originals)

    if result is not None:
        lookup.results[result.id] = result
    return {
        "op": name,
        "targets": list(op.targets),
        "result_id": result.id if result is not None else None,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "ratio": ratio,
        "entities": {
            "total": len(entities),
            "kept": len(entities) - len(lost),
            "lost": lost,
            "needed_later": [],
        },
    }


def _ranked(
    entities: list[str],
    keys: list[str],
    gone: Sequence[int],
    originals: Sequence[Message],
    context: Sequence[Message],
    cache: TextCache,
    pinned: tuple[str, ...],
) -> list[str]:
    """The lost entities (positions `gone`), most likely to matter first: pinned texts,
    then what the task and the question held (the pinned, task and question messages
    among the `originals`, the pinned and task messages of the `context` they left
    and its last question), then the rest.

    What a later step needed goes before all of them, once that is known
    (``contextview.core.needs.NeedLinks.settle``). The cache remembers the keys of the
    list it returns, for whoever looks the losses up by key next.
    """
    order: Sequence[int] = gone
    if len(gone) < 2:
        return _in_order(entities, keys, order, cache)
    pinned_keys = {normalize(p) for p in pinned}
    # A tool's result that comes back in a user message (Anthropic's form) asks
    # nothing: it is what the question was answered with. Their entities alone: a
    # pinned text they hold ranks as pinned already.
    asking: set[str] = set()
    text_keys = cache.text_keys
    for m in originals:
        if m.pinned or (m.partition in ("task", "question") and not is_tool_result(m)):
            asking.update(text_keys(m.text))
    # A comprehension: this runs over the whole context at every compaction.
    for m in [m for m in context if m.partition == "task" or m.pinned]:
        asking.update(text_keys(m.text))
    for m in reversed(context):
        if m.partition == "question" and not is_tool_result(m):
            asking.update(text_keys(m.text))
            break
    # Sorted only when some lost key is among them (most often none is).
    wanted = pinned_keys | asking
    if not wanted.isdisjoint(map(keys.__getitem__, gone)):

        def rank(i: int) -> int:
            if keys[i] in pinned_keys:
                return 0
            return 1 if keys[i] in asking else 2

        order = sorted(gone, key=rank)
    return _in_order(entities, keys, order, cache)


def _in_order(
    entities: list[str], keys: list[str], order: Sequence[int], cache: TextCache
) -> list[str]:
    """The entities at positions `order`; the cache remembers their keys."""
    if type(order) is range and order == range(len(entities)):
        lost, lost_keys = list(entities), list(keys)  # all of them, as they came (a drop)
    else:
        lost, lost_keys = list(map(entities.__getitem__, order)), list(map(keys.__getitem__, order))
    cache.remember_keys(lost, lost_keys)
    return lost


def _entities_of(
    messages: Sequence[Message], cache: TextCache, pinned: tuple[str, ...]
) -> tuple[list[str], list[str]]:
    """The entities of `messages` together, with their keys (``entity_key``)."""
    if len(messages) == 1:
        entities = cache.entities(messages[0].text, pinned)
        return entities, cache.keys_of(entities)
    # The first entity of each key, in order of first appearance; the loops run
    # at C speed.
    found: list[str] = []
    keys: list[str] = []
    for m in messages:
        entities = cache.entities(m.text, pinned)
        found += entities
        keys += cache.keys_of(entities)
    distinct = dict.fromkeys(keys)
    if len(distinct) == len(keys):
        return found, keys  # no entity in two of the messages
    first = dict(zip(reversed(keys), reversed(found), strict=True))
    return list(map(first.__getitem__, distinct)), list(distinct)


def _missing_pinned(
    step: StepInput,
    lookup: _Lookup,
    cache: TextCache,
    pinned: tuple[str, ...],
    marked_before: int,
) -> list[str]:
    """The pinned texts, and the texts of pinned messages (`marked_before` of them in
    the before context), that the after context does not hold."""
    missing: list[str] = []
    if pinned:
        wanted = {k for k, p in enumerate(pinned) if p.strip()}
        # Run for every step over the whole after context when a pinned text is
        # missing, so the known answers are looked up directly, by string content.
        known = cache.pinned_table(pinned)
        for m in step.after:
            if not wanted:
                break  # pinned texts sit early (system, task): usually found at once
            content = m.content
            hits = known.get(content) if isinstance(content, str) else None
            if hits is None:
                hits = cache.pinned_in(pinned, m.text)
            if hits:
                wanted -= hits
        missing.extend(pinned[k] for k in sorted(wanted))

    # Pinned messages that left before this step, without the agent saying so.
    left_unsaid = [m for f in step.inferred_folds for m in f.originals if m.pinned]
    if not left_unsaid and not marked_before:
        return missing
    # A message unpinned in this step may leave: that is what unpinning is for.
    unpinned = {t for op in step.ops if op.op == "unpin" for t in op.targets}
    marked = [m for m in step.before if m.pinned and m.id not in unpinned] + left_unsaid
    if marked:
        after_by_id = lookup.after_by_id()
        for m in marked:
            same = after_by_id.get(m.id)
            if same is not None and same.content == m.content:
                continue
            # Changed or gone: it still counts as present if its text survives.
            key = cache.normalized(m.text)
            if key and not any(key in cache.normalized(a.text) for a in step.after):
                missing.append(m.text)
    return missing


def step_stats(
    step: StepInput,
    *,
    tokens_of: TokensOf,
    cache: TextCache | None = None,
    meter: ContextMeter | None = None,
    estimate_meter: ContextMeter | None = None,
) -> dict[str, Any]:
    """The contract's step `stats` object for one step.

    A caller computing a session's steps in order passes one `meter` (built on
    the same `tokens_of`) for all of them, so each context costs its changes.
    `estimate_meter`, when some message of the session has parts counted by rule
    (images, files: `contextview.core.parts`), measures those estimated tokens.
    """
    if cache is None:
        cache = TextCache()
    pinned = tuple(step.pinned)
    flags: set[str] = set()

    if meter is None:
        meter = ContextMeter(tokens_of)
    before_tokens, before_parts = meter.measure(step.before)
    marked_before = meter.pinned
    after_tokens, after_parts = meter.measure(step.after)
    marked_after = meter.pinned
    if step.tools_tokens:
        before_tokens += step.tools_tokens
        after_tokens += step.tools_tokens
        before_parts = {**before_parts, "tools": step.tools_tokens}
        after_parts = {**after_parts, "tools": step.tools_tokens}
    # The provider counted the context the call was made with.
    counts = usage_counts(step.usage)
    counted = {"before": before_tokens, "after": after_tokens}
    unseen = (
        None
        if counts is None
        else counts.context - counted[provider_counted(before_tokens, after_tokens)]
    )
    window = step.context_window
    if window is None and unseen is not None:
        window = known_window(step.model)
    budget = budget_of(step.budget, window)
    estimated: dict[str, int] | None = None
    if estimate_meter is not None:
        estimated = {
            "before": estimate_meter.measure(step.before)[0],
            "after": estimate_meter.measure(step.after)[0],
        }

    names = set(before_parts) | set(after_parts) | set(budget.partitions)
    partitions = {
        name: {"before": before_parts.get(name, 0), "after": after_parts.get(name, 0)}
        for name in sorted(names, key=_partition_order)
    }

    occupancy: dict[str, float | None] = {"before": None, "after": None}
    limit = budget.limit
    # With provider usage the window holds what the log does not show as well (system
    # prompt, tool schemas): the provider's count, carried to the after, is what the
    # occupancy and every flag on it read.
    hidden = unseen or 0
    seen_after = max(0, after_tokens + hidden)
    if budget.max_tokens is not None:
        occupancy = {
            "before": max(0, before_tokens + hidden) / budget.max_tokens,
            "after": seen_after / budget.max_tokens,
        }
        for flag, at in OCCUPANCY_THRESHOLDS:
            if seen_after > budget.max_tokens * at:
                flags.add(flag)
    exceeded = limit is not None and seen_after > limit
    if exceeded:
        flags.add("budget_exceeded")
    if any(after_parts.get(name, 0) > n for name, n in budget.partitions.items()):
        flags.add("partition_over")

    # Provider usage standing in for the before count is of the context the call was
    # made with: after a compaction, that is the after, and the before has no count.
    usage_of_after = (
        step.reported_by_usage and provider_counted(before_tokens, after_tokens) == "after"
    )
    reported_error = {
        "before": None if usage_of_after else _relative_error(step.reported_before, before_tokens),
        "after": _relative_error(step.reported_after, after_tokens),
    }
    # The flag concerns the agent's own estimates; provider usage also counts what
    # the log does not hold (system prompt, tool schemas): that is unseen_tokens.
    own_errors = [reported_error["after"]]
    if not step.reported_by_usage:
        # The agent's own count of the before, whether or not usage came with it.
        own_errors.append(reported_error["before"])
    if any(e is not None and abs(e) > ESTIMATE_OFF for e in own_errors):
        flags.add("token_estimate_off")
    if step.after_mismatch:
        flags.add("after_mismatch")

    lookup = _Lookup(step.before, step.after)
    folds = {f.op_index: f for f in step.folds}
    ops = [
        _op_stats(op, folds.get(i), lookup, tokens_of, cache, pinned)
        for i, op in enumerate(step.ops)
    ]
    # After the step's own, so that stats.ops[i] stays the stats of ops[i].
    if step.inferred_ops:
        inferred_folds = {f.op_index: f for f in step.inferred_folds}
        for i, op in enumerate(step.inferred_ops):
            entry = _op_stats(op, inferred_folds.get(i), lookup, tokens_of, cache, pinned)
            entry["inferred"] = True
            ops.append(entry)

    reward = 0.0
    for entry in ops:
        if entry["op"] not in REPLACING_OPS:
            continue
        ratio = entry["ratio"]
        if ratio is not None and ratio > RATIO_INEFFECTIVE:
            flags.add("ratio_ineffective")
        if ratio is not None and ratio < RATIO_AGGRESSIVE:
            flags.add("ratio_aggressive")
        if entry["entities"]["lost"]:
            flags.add("entity_loss")
        # Whether a later step needed what it lost is settled at aggregation.
        reward += op_reward(entry, needed=False)
        if entry["op"] == "summarize" and limit is not None and not exceeded:
            reward += REWARD_SUMMARIZE_IN_BUDGET

    reloaded = set(step.reloaded)
    reloaded.update(t for op in step.ops if op.op == "reload" for t in op.targets)
    regretted = sorted(reloaded & step.folded_earlier)
    if regretted:
        flags.add("reload_regret")
        reward -= PENALTY_RELOAD_REGRET

    if exceeded and limit is not None:
        overflow = (seen_after - limit) / limit if limit > 0 else 1.0
        reward -= PENALTY_BUDGET * (1 + min(1.0, overflow))

    new_call = _new_call(step.before, step.prev_ids)
    new_tool, new_args = new_call if new_call is not None else (None, None)
    if new_tool is not None and new_tool == step.prev_new_tool:
        # The same tool with other arguments is a new question, not a repeat.
        if new_args is None or step.prev_new_call is None or new_args == step.prev_new_call:
            flags.add("repeated_tool_call")
            reward -= PENALTY_REPEATED_TOOL

    missing = _missing_pinned(step, lookup, cache, pinned, marked_before)
    if missing:
        flags.add("pinned_missing")
    if (
        after_tokens > PINNED_MID_MIN_TOKENS
        and (pinned or marked_after)
        and _pinned_mid(step.after, after_tokens, tokens_of, cache, pinned)
    ):
        flags.add("pinned_mid")

    out: dict[str, Any] = {
        "tokens": {"before": before_tokens, "after": after_tokens},
        "partitions": partitions,
        "occupancy": occupancy,
        "reported_error": reported_error,
        "ops": ops,
        "flags": sorted(flags),
        "reward": round(reward, 4) + 0.0,  # + 0.0: never "-0.0"
        "encoding": step.encoding,
        # Beyond the contract: why flags were raised, and what the next step needs.
        "missing_pinned": missing,
        "regretted_reloads": regretted,
        "new_tool": new_tool,
        "new_call": new_args,
        "reward_base": round(reward, 4) + 0.0,
    }
    if estimated is not None and (estimated["before"] or estimated["after"]):
        # Images and files are counted by rule, not measured (contract v1.1).
        out["estimated"] = True
        out["estimated_tokens"] = estimated
    if unseen is not None:
        # Reported input minus measured: what the provider read that the log does not hold.
        out["unseen_tokens"] = unseen
    if budget.max_tokens is not None and (unseen is not None or budget.max_tokens == window):
        # What occupancy was measured against, with usage or where a window said it.
        out["window"] = budget.max_tokens
    if counts is not None:
        # Beyond the contract: what the call was billed for, by model ("" when none is
        # known), which the session's aggregates sum for its cost (``usage_by_model``).
        out["billed"] = [
            step.model or "",
            counts.input,
            counts.cache_read,
            counts.cache_write,
            counts.output,
        ]
    return out


def _pinned_mid(
    after: Sequence[Message],
    total: int,
    tokens_of: TokensOf,
    cache: TextCache,
    pinned: tuple[str, ...],
) -> bool:
    """Whether a pinned text or message starts in the middle third of `after`."""
    at = 0
    for m in after:
        where = third_of(at, total)
        if where == "end":
            break
        if where == "middle" and (m.pinned or (pinned and cache.pinned_in(pinned, m.text))):
            return True
        at += tokens_of(m)
    return False


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


# What ``usage_by_model`` holds for each model, in the order of a step's ``billed``
# (after its model): the calls, then their summed counts.
BILLED_FIELDS = (
    "calls",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
)


class SessionSums:
    """The sums of the contract's session `aggregates`, kept as a session's step stats
    are added in index order (`add`): a live session's next step adds its own, the
    steps before it are not read again. What a step adds does not change after, but
    for its reward, which a later step's needs settle (`reward_settled`)."""

    def __init__(self) -> None:
        self.steps = 0
        # per step, in index order: summed when read, as the whole list would be
        self.occupancies: list[float] = []
        self.ratios: list[float] = []
        self.rewards: dict[int, float] = {}
        self.ops_by_type: Counter[str] = Counter()
        self.flag_counts: Counter[str] = Counter()
        self.tokens_saved = self.entities_total = self.entities_kept = 0
        self.reload_regrets = self.tokens_after = self.window = 0
        # model -> [calls, input, cache reads, cache writes, output] of its billed calls
        self.billed: dict[str, list[int]] = {}

    def add(self, index: int, stats: Mapping[str, Any]) -> None:
        self.steps += 1
        self.tokens_after += stats["tokens"]["after"]
        self.window = max(self.window, stats.get("window") or 0)
        if "reload_regret" in stats["flags"]:
            # One per original brought back; a step reloading three counts three.
            self.reload_regrets += len(stats.get("regretted_reloads") or ()) or 1
        after = stats["occupancy"]["after"]
        if after is not None:
            self.occupancies.append(after)
        self.flag_counts.update(stats["flags"])
        self.rewards[index] = stats["reward"]
        billed = stats.get("billed")
        if billed:
            sums = self.billed.get(billed[0])
            if sums is None:
                self.billed[billed[0]] = [1, *billed[1:]]
            else:
                sums[0] += 1
                for i in range(1, len(sums)):
                    sums[i] += billed[i]
        ops = stats["ops"]
        # What a compacting step inserts is part of what the compaction left in the
        # context (Codex re-injects the user's recent prompts beside its summary): it
        # counts against what the step saved. An insert in a step that compacts
        # nothing (a retrieved passage) saves or costs nothing.
        compacts = any(op["op"] in COMPACTING_OPS for op in ops)
        for op in ops:
            name = op["op"]
            self.ops_by_type[name] += 1
            if name in COMPACTING_OPS:
                self.tokens_saved += op["tokens_in"] - op["tokens_out"]
            elif compacts and name == "insert":
                self.tokens_saved -= op["tokens_out"]
            if name in REPLACING_OPS:
                self.entities_total += op["entities"]["total"]
                self.entities_kept += op["entities"]["kept"]
            if op["ratio"] is not None:
                self.ratios.append(op["ratio"])

    def reward_settled(self, index: int, reward: float) -> None:
        self.rewards[index] = reward

    def aggregates(self) -> dict[str, Any]:
        occupancies = self.occupancies
        total, kept = self.entities_total, self.entities_kept
        return {
            "steps": self.steps,
            "peak_occupancy": max(occupancies) if occupancies else None,
            "mean_occupancy": _mean(occupancies),
            "ops_by_type": dict(sorted(self.ops_by_type.items())),
            "tokens_saved": self.tokens_saved,
            "mean_ratio": _mean(self.ratios),
            "entity_retention": kept / total if total else None,
            "reload_regrets": self.reload_regrets,
            "budget_violations": self.flag_counts["budget_exceeded"],
            "flag_counts": dict(sorted(self.flag_counts.items())),
            # Beyond the contract: what project-wide comparisons sum over sessions.
            "reward_total": round(sum(self.rewards.values(), 0.0), 4) + 0.0,
            "tokens_after_total": self.tokens_after,
            "entities_total": total,
            "entities_kept": kept,
            # the window that provider-counted occupancy was measured against, if any
            **({"window": self.window} if self.window else {}),
            # the calls' usage by model, which the session's cost is priced from
            "usage_by_model": {
                model: dict(zip(BILLED_FIELDS, sums, strict=True))
                for model, sums in sorted(self.billed.items())
            },
        }


def session_aggregates(step_stats_list: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The contract's session `aggregates`, from the stats of its steps."""
    sums = SessionSums()
    for n, stats in enumerate(step_stats_list):
        sums.add(n, stats)
    return sums.aggregates()
