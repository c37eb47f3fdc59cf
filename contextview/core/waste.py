"""Waste: tool results a session pays for again and again without using them.

Every call sends the whole context, so a tool result is billed once per step
that carries it. Two kinds are waste:

- **duplicates**: the same result (same text) present several times in one
  context; every copy beyond the first is billed for nothing at each step.
- **unreferenced**: a result that the agent never refers to again (no later
  user or assistant message, nor any tool call's arguments, holds one of its
  key entities) yet that stays in the context for `UNREFERENCED_MIN_STEPS`
  steps or more. Each read after the first is billed for nothing. A result
  without key entities cannot be told apart and is not judged.

Their "re-billed tokens" are those tokens summed over the steps that carried
them. The work has two halves, as for losses (``contextview.core.needs``):

- `WasteTracker`, run over a session's before contexts in order, looks only
  at what changed since the previous one (``context_delta``) and at each
  distinct result text once. What happens (a result arrives, leaves, gains or
  loses a copy, is referred to) goes into the step's stats as ``waste``
  events, so a computation resumed at any step rebuilds it (`replay`, `resume`).
- `WasteSums`, at session aggregation (kept step by step by ``core.totals``, or
  over a whole session by `waste_summary`), reads those events back into the
  session's lists and totals.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from contextview.core.calls import is_tool_result, result_call, said_text
from contextview.core.model import Message
from contextview.core.stats import Delta, TextCache, TokensOf, context_delta

# An unreferenced result is waste once carried this many steps.
UNREFERENCED_MIN_STEPS = 5
# Gone entries `WasteTracker.by_key` may hold beyond its live ones before it is rebuilt.
REBUILD_MIN = 100_000
# The longest lists a session's aggregates keep (largest re-billed first).
LIST_LIMIT = 50


@dataclass(slots=True)
class _Result:
    """One distinct tool result text while it is in the context."""

    text: str
    digest: str
    tool: str
    message: str
    tokens: int
    since: int
    copies: int = 1
    referenced: bool = False
    # the keys of its entities, while it is held by them (`WasteTracker.by_key`)
    keys: Sequence[str] = ()
    gone: bool = False


def _extra(copies: int, tokens: int) -> int:
    """Tokens of the copies beyond the first."""
    return (copies - 1) * tokens if copies > 1 else 0


@dataclass(slots=True)
class WasteTracker:
    """The tool results in a session's latest before context, by text."""

    live: dict[str, _Result] = field(default_factory=dict)
    # entity key -> the results that held it, in the order they arrived: a
    # reference to the key counts for the latest of them still in the context. A
    # function of what the context holds, so a resumed walk rebuilds it exactly
    # (`resume`). A result that leaves is only marked gone (common keys are held
    # by hundreds of results): `_refer` drops gone ones from a list's end, and the
    # lists are rebuilt from the live results when gone entries outnumber the rest.
    # Most keys are only ever held by one result, which then stands alone, not in
    # a list: a tool result brings some sixty keys, nearly all of them new.
    by_key: dict[str, _Result | list[_Result]] = field(default_factory=dict)
    # the keys that references can name, when the caller knows them (`expect`): only
    # those index a result in `by_key`. Most of a tool result's keys are never said
    # (the benchmark session's messages say some 3,300 keys, its results hold 55,000),
    # and indexing them all was the tracker's largest cost. None: every key.
    watched: set[str] | None = None
    # how many results in the context hold a key: none, and nothing can be referred to
    keyed: int = 0
    # entries of `by_key` for results in the context, and for gone ones
    held: int = 0
    dropped: int = 0
    digests: dict[str, str] = field(default_factory=dict)
    last: Sequence[Message] | None = None
    duplicate_tokens: int = 0
    # results replayed from stats, by digest, until `resume` finds their texts
    pending: dict[str, _Result] = field(default_factory=dict)

    def clear(self) -> None:
        self.live.clear()
        self.by_key.clear()
        self.pending.clear()
        self.keyed = self.held = self.dropped = 0
        self.watched = None
        self.last = None
        self.duplicate_tokens = 0

    def expect(self, keys: Iterable[str]) -> None:
        """References will name only `keys` (and those expected before): the keys of
        what the messages to come say (``said_text``). A key said that was not expected
        still finds its results (`_refer` indexes them then), at the cost of a rebuild."""
        if self.watched is None:
            # `by_key` holds every key so far: more than it needs, which is harmless.
            self.watched = set(keys)
        elif not self.watched.issuperset(keys):
            self.watched.update(keys)
            self._rebuild()

    def _digest(self, text: str) -> str:
        found = self.digests.get(text)
        if found is None:
            found = self.digests[text] = hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
        return found

    def step(
        self,
        index: int,
        before: Sequence[Message],
        tokens_of: TokensOf,
        cache: TextCache,
        since: tuple[Sequence[Message], Delta] | None = None,
    ) -> dict[str, Any] | None:
        """Follow step `index`'s before context; its ``waste`` events, None when none.

        `since`, when the caller worked it out: a context and ``context_delta`` of it
        and `before` (used when that context is the one this tracker saw last).
        """
        last = self.last
        delta: Delta
        if last is None:
            delta = None
        elif since is not None and since[0] is last:
            delta = since[1]
        else:
            delta = context_delta(last, before)
        removed: Sequence[Message]
        added: Sequence[Message]
        if last is None:
            removed, added = (), before
        elif delta is None:
            # Much changed: what differs, by identity (the contexts of a session
            # share their message objects), rather than everything twice.
            kept = set(map(id, before))
            had = set(map(id, last))
            removed = [m for m in last if id(m) not in kept]
            added = [m for m in before if id(m) not in had]
        else:
            removed, added = delta
        self.last = before
        events: dict[str, Any] = {}
        if removed or added:
            self._apply(index, before, removed, added, tokens_of, cache, events)
        if self.duplicate_tokens:
            events["duplicate_tokens"] = self.duplicate_tokens
        return events or None

    def _apply(
        self,
        index: int,
        before: Sequence[Message],
        removed: Sequence[Message],
        added: Sequence[Message],
        tokens_of: TokensOf,
        cache: TextCache,
        events: dict[str, Any],
    ) -> None:
        # Net change per result text: a message that moved is neither gone nor new.
        change: dict[str, int] = {}
        first: dict[str, Message] = {}
        get = change.get
        for m in removed:
            if is_tool_result(m):
                text = m.text
                if text:
                    change[text] = get(text, 0) - 1
        removed_ids = {m.id for m in removed} if removed else ()
        for m in added:
            if is_tool_result(m):
                text = m.text
                if text:
                    change[text] = get(text, 0) + 1
                    if text not in first:
                        first[text] = m
            elif self.keyed and m.id not in removed_ids:
                self._refer(m, cache, events)
        for text, n in change.items():
            if n:
                self._count(index, before, text, n, first.get(text), tokens_of, cache, events)

    def _refer(self, m: Message, cache: TextCache, events: dict[str, Any]) -> None:
        """Mark the results that message `m`, new in the context, refers to."""
        by_key = self.by_key
        keys = cache.text_keys(said_text(m))
        if self.watched is not None and not self.watched.issuperset(keys):
            self.expect(keys)
        for key in keys:
            holders = by_key.get(key)
            if holders is None:
                continue
            if isinstance(holders, _Result):
                result = holders
                if result.gone:
                    del by_key[key]
                    continue
            elif (result := holders[-1]).gone:
                while holders and holders[-1].gone:
                    holders.pop()
                if not holders:
                    del by_key[key]
                    continue
                result = holders[-1]
            if not result.referenced:
                result.referenced = True
                events.setdefault("referenced", []).append(result.digest)

    def _count(
        self,
        index: int,
        before: Sequence[Message],
        text: str,
        n: int,
        message: Message | None,
        tokens_of: TokensOf,
        cache: TextCache,
        events: dict[str, Any],
    ) -> None:
        result = self.live.get(text)
        if result is None:
            if n < 0 or message is None:
                return  # left without having been followed: nothing to do
            result = _Result(
                text=text,
                digest=self._digest(text),
                tool=message.tool or _called_tool(before, message),
                message=message.id,
                tokens=tokens_of(message),
                since=index,
                copies=0,
            )
            self.live[text] = result
            keys = cache.text_keys(text)
            events.setdefault("new", []).append(
                [result.digest, result.tool, result.tokens, result.message, int(bool(keys))]
            )
            self._hold(keys, result)
        old = result.copies
        result.copies = new = max(0, old + n)
        self.duplicate_tokens += _extra(new, result.tokens) - _extra(old, result.tokens)
        if new == 0:
            del self.live[text]
            self._release(cache.text_keys(text), result)
            events.setdefault("gone", []).append(result.digest)
        elif new > 1 or old > 1:
            events.setdefault("copies", []).append([result.digest, new])

    def replay(self, index: int, events: Mapping[str, Any] | None) -> None:
        """Take in the ``waste`` events of step `index` (steps in index order)."""
        if not events:
            return
        pending = self.pending
        for digest in events.get("referenced") or ():
            if digest in pending:
                pending[digest].referenced = True
        for digest in events.get("gone") or ():
            pending.pop(digest, None)
        for digest, tool, tokens, message, _ in events.get("new") or ():
            pending[digest] = _Result("", digest, tool, message, tokens, index, copies=1)
        for digest, copies in events.get("copies") or ():
            if digest in pending:
                pending[digest].copies = copies

    def resume(self, before: Sequence[Message], cache: TextCache) -> None:
        """After `replay`: `before` is the context of the step replayed last."""
        pending = self.pending
        texts = {self._digest(m.text): m.text for m in before if is_tool_result(m) and m.text}
        # The pending results are in the order they arrived, as `by_key` wants them.
        for digest, result in pending.items():
            text = texts.get(digest)
            if text is None:
                continue
            result.text = text
            self.live[text] = result
            self.duplicate_tokens += _extra(result.copies, result.tokens)
            self._hold(cache.text_keys(text), result)
        pending.clear()
        self.last = before

    def _hold(self, keys: Sequence[str], result: _Result) -> None:
        if keys:
            result.keys = keys
            self.keyed += 1
            self.held += len(keys)
        indexed: Iterable[str] = keys if self.watched is None else self.watched.intersection(keys)
        by_key = self.by_key
        # The keys held already are few: found, and every key added, at C speed;
        # then those few get the list of their holders.
        held = [(key, by_key[key]) for key in by_key.keys() & indexed] if by_key else ()
        by_key.update(zip(indexed, repeat(result)))
        for key, holders in held:
            if isinstance(holders, _Result):
                holders = [holders]
            holders.append(result)
            by_key[key] = holders

    def _release(self, keys: Sequence[str], result: _Result) -> None:
        result.gone = True
        if not keys:
            return
        self.keyed -= 1
        self.held -= len(keys)
        self.dropped += len(keys)
        if self.dropped > self.held + REBUILD_MIN:
            self._rebuild()

    def _rebuild(self) -> None:
        """`by_key` again from the results in the context, without the gone ones."""
        # `live` is in the order the results arrived, as `by_key` holds them.
        self.by_key.clear()
        self.held = self.dropped = self.keyed = 0
        for held in self.live.values():
            self._hold(held.keys, held)


@dataclass(slots=True)
class _Carried:
    """One result over the whole session, as `waste_summary` reads it back."""

    tool: str
    message: str
    tokens: int
    added_at: int
    judged: bool
    open_at: int | None = None  # the step it came (back) at, while in the context
    copies: int = 1
    copies_at: int = 0
    steps: int = 0
    max_copies: int = 1
    duplicated_at: int | None = None
    duplicate_tokens: int = 0
    referenced: bool = False

    def settle_copies(self, index: int) -> None:
        self.duplicate_tokens += _extra(self.copies, self.tokens) * (index - self.copies_at)
        self.copies_at = index

    def close(self, index: int) -> None:
        if self.open_at is not None:
            self.settle_copies(index)
            self.steps += index - self.open_at
            self.open_at = None

    def closed_at(self, index: int) -> tuple[int, int]:
        """(steps carried, duplicate tokens) had it been closed at `index`."""
        if self.open_at is None:
            return self.steps, self.duplicate_tokens
        extra = _extra(self.copies, self.tokens) * (index - self.copies_at)
        return self.steps + index - self.open_at, self.duplicate_tokens + extra


class WasteSums:
    """A session's waste, kept as its steps' ``waste`` events are added in index
    order (`add`); `summary` gives the aggregates entries (`waste_summary`) as if the
    session ended after the last step added, and changes nothing."""

    def __init__(self) -> None:
        self.results: dict[str, _Carried] = {}
        self.end = 0

    def add(self, index: int, stats: Mapping[str, Any]) -> None:
        self.end = index + 1
        events = stats.get("waste")
        if not isinstance(events, Mapping):
            return
        results = self.results
        for digest in events.get("referenced") or ():
            if digest in results:
                results[digest].referenced = True
        for digest in events.get("gone") or ():
            if digest in results:
                results[digest].close(index)
        for digest, tool, tokens, message, judged in events.get("new") or ():
            carried = results.get(digest)
            if carried is None:
                carried = results[digest] = _Carried(tool, message, tokens, index, bool(judged))
            carried.open_at = carried.copies_at = index
            carried.copies = 1
        for digest, copies in events.get("copies") or ():
            carried = results.get(digest)
            if carried is None or carried.open_at is None:
                continue
            carried.settle_copies(index)
            carried.copies = copies
            if copies > carried.max_copies:
                carried.max_copies = copies
            if copies > 1 and carried.duplicated_at is None:
                carried.duplicated_at = index

    def summary(self) -> dict[str, Any]:
        """``duplicate_results``: results present more than once in a context, with the
        most copies seen and the re-billed tokens of the extra copies;
        ``unreferenced_results``: results never referred to again yet carried
        `UNREFERENCED_MIN_STEPS` steps or more, with the tokens re-billed after
        their first step; ``rebilled_tokens``: both summed."""
        duplicates: list[dict[str, Any]] = []
        unreferenced: list[dict[str, Any]] = []
        for c in self.results.values():
            steps, duplicate_tokens = c.closed_at(self.end)
            if c.duplicated_at is not None and duplicate_tokens:
                duplicates.append(
                    {
                        "tool": c.tool,
                        "message": c.message,
                        "first_at": c.duplicated_at,
                        "copies": c.max_copies,
                        "tokens": duplicate_tokens,
                    }
                )
            if c.judged and not c.referenced and steps >= UNREFERENCED_MIN_STEPS and c.tokens:
                unreferenced.append(
                    {
                        "tool": c.tool,
                        "message": c.message,
                        "added_at": c.added_at,
                        "steps": steps,
                        "tokens": c.tokens * (steps - 1),
                    }
                )
        total = sum(d["tokens"] for d in duplicates) + sum(u["tokens"] for u in unreferenced)
        return {
            "duplicate_results": _largest(duplicates),
            "unreferenced_results": _largest(unreferenced),
            "rebilled_tokens": total,
        }


def waste_summary(stats_by_index: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """The session's waste from its steps' ``waste`` events: aggregates entries
    (`WasteSums.summary`)."""
    sums = WasteSums()
    for index in sorted(stats_by_index):
        sums.add(index, stats_by_index[index])
    return sums.summary()


def _largest(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries that re-billed most, earliest first among equals."""

    def order(entry: dict[str, Any]) -> tuple[int, int]:
        step = entry["first_at"] if "first_at" in entry else entry["added_at"]
        return (-int(entry["tokens"]), int(step or 0))

    return sorted(entries, key=order)[:LIST_LIMIT]


def _called_tool(context: Sequence[Message], result: Message) -> str:
    """The tool of the call that `result`, a tool result of `context` that does not
    name its tool (OpenAI's and Anthropic's spellings), answers; "" when unknown."""
    for i in range(len(context) - 1, -1, -1):  # a new result is near the end
        if context[i] is result:
            call = result_call(context, i)
            return call[0] if call is not None else ""
    return ""
