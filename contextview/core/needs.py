"""What the context lost, and whether a later step needed it.

The contract's "Context loss": an entity an operation lost (explicit or
inferred) is *needed later* by a step J that asks for it (a user or task
message holds it), mentions it (the agent writes it or passes it to a tool),
refetches it (a tool call repeats, with the same arguments, the one whose
result held it) or reloads it (brings back the original that held it).

Needing comes after losing, so the work has two halves:

- `LossTracker`, run over a session's steps in order: each step first checks
  what is new in its context against the losses still open, then registers
  its own losses. It reads only the messages new in a step (and their
  entities, once per distinct text through the ``TextCache``), never whole
  contexts, and it keeps what it learnt in the step's stats (``needs``,
  ``folded_calls``, ``refetches``, beside ``ops[].entities.lost``), so a computation resumed at any
  step rebuilds it from the stats before that step (`LossTracker.restore`).
- `NeedLinks`, at session aggregation (kept step by step by ``core.totals``, or
  over a whole session by `link_needs`): every need found on a step J becomes a
  ``needed_later`` entry on the operation of step I that lost the entity, an
  ``aggregates.amnesia`` entry, and that step's reward is settled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from contextview.core.calls import calls_of, is_tool_result, result_call, said_text
from contextview.core.entities import entity_key, is_kept_key
from contextview.core.model import Fold, Message
from contextview.core.stats import TextCache, TokensOf, op_reward
from contextview.core.waste import WasteTracker

HOWS = ("asked", "mentioned", "refetched", "reloaded")
# Partitions whose messages ask: the user's question and the task.
_ASKING = frozenset({"task", "question"})
Call = tuple[str, str]


# An operation that lost entities: (step, its position in the step's stats.ops).
Op = tuple[int, int]


@dataclass(slots=True)
class LossTracker:
    """The losses of a session so far, and the needs already linked to them."""

    # open losses by entity key: the latest operation that lost each entity
    open: dict[str, Op] = field(default_factory=dict)
    # the entities each operation lost with their keys, and the operations that took
    # each original out
    by_op: dict[Op, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    by_original: dict[str, list[Op]] = field(default_factory=dict)
    # calls whose result was folded or dropped: the step it left at
    folded_calls: dict[Call, int] = field(default_factory=dict)
    linked: set[tuple[int, int, str, str]] = field(default_factory=set)
    # the losses the step just walked found still in the context, and so closed:
    # [lost_at, op, key] each, kept in its stats (``closed``), which `restore` reads
    closed: list[list[Any]] = field(default_factory=list)
    # the index of the step it expects next: it knows every step before it
    next_index: int = 0
    # what the contexts carry for nothing, followed along the same steps
    waste: WasteTracker = field(default_factory=WasteTracker)

    def clear(self) -> None:
        self.open.clear()
        self.by_op.clear()
        self.by_original.clear()
        self.folded_calls.clear()
        self.linked.clear()
        self.closed = []
        self.next_index = 0
        self.waste.clear()

    def restore(
        self, rows: Iterable[tuple[int, Mapping[str, Any]]], cache: TextCache | None = None
    ) -> None:
        """Rebuild from the stats of earlier steps, in index order: (index, stats);
        the keys of their lost entities from `cache` when it has them."""
        for index, stats in rows:
            # As the walk had it: the step's needs closed earlier losses, then its own
            # operations opened new ones.
            for lost_at, op, key in stats.get("closed") or ():
                self._close(key, lost_at, op)
            self._open_all(index, stats.get("ops") or (), cache)
            for need in stats.get("needs") or ():
                self.linked.add(
                    (need["lost_at"], need["op"], entity_key(need["text"]), need["how"])
                )
            for refetch in stats.get("refetches") or ():
                self.folded_calls.pop((refetch["tool"], refetch["args"]), None)
            for tool, args in stats.get("folded_calls") or ():
                self.folded_calls[(tool, args)] = index
            self.waste.replay(index, stats.get("waste"))
            self.next_index = index + 1

    def _open_all(
        self, index: int, ops: Sequence[Mapping[str, Any]], cache: TextCache | None = None
    ) -> None:
        open_ = self.open
        for k, entry in enumerate(ops):
            lost = entry["entities"]["lost"]
            if not lost:
                continue
            # The keys that step_stats worked out for the list, or worked out here.
            keys = cache.keys_of(lost) if cache is not None else list(map(entity_key, lost))
            op = (index, k)
            self.by_op[op] = (tuple(lost), tuple(keys))
            # Every key opened with the one tuple naming the operation: a session's
            # compactions lose thousands of entities, and nothing is made per entity.
            open_.update(zip(keys, repeat(op)))
            for mid in entry.get("targets", ()):
                self.by_original.setdefault(mid, []).append(op)

    def _close(self, key: str, lost_at: int, op: int) -> None:
        """Close the open loss of `key` if it is the one operation `op` of step `lost_at`
        made (a later operation may have lost the entity again), noting it in `closed`."""
        if self.open.get(key) == (lost_at, op):
            del self.open[key]
            self.closed.append([lost_at, op, key])

    def _lost_text(self, op: Op, key: str) -> str:
        """The entity of key `key` that operation `op` lost (its last, as `open` has it)."""
        lost, keys = self.by_op[op]
        return dict(zip(keys, lost, strict=True))[key]

    def needs_of(
        self,
        index: int,
        before: Sequence[Message],
        new: Sequence[int],
        reloaded: Iterable[str],
        cache: TextCache,
        tokens_of: TokensOf,
        kept: Callable[[str], bool] | None = None,
        said: Sequence[str] = (),
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(needs, refetches) of step `index`, whose before holds new messages at `new`
        and whose reply says `said` (its texts): what the agent writes in reply to a
        call it needed at that call, and a session's last reply is read too.

        `kept`, when given, answers for a key what the scan below would: whether the
        messages of `before` other than the new ones keep its entity (a caller that
        asks of long contexts step after step can answer it faster).
        """
        needs: list[dict[str, Any]] = []
        refetches: list[dict[str, Any]] = []
        self.closed = []
        if not self.open and not self.folded_calls:
            return needs, refetches

        fresh = set(new)

        def scanned(key: str) -> bool:
            # Looked for only when a need is found, which happens once per loss and way;
            # from the end, where what was just talked about sits.
            normalized = cache.normalized
            for i in range(len(before) - 1, -1, -1):
                if i not in fresh and is_kept_key(key, normalized(before[i].text)):
                    return True
            return False

        in_context = kept or scanned

        def need(key: str, lost_by: Op, how: str, text: str | None = None) -> None:
            step, op = lost_by
            link = (step, op, key, how)
            if link in self.linked:
                return
            if in_context(key):
                # Still (or again) in the context: what is there was not forgotten.
                self._close(key, step, op)
                return
            self.linked.add(link)
            if text is None:
                text = self._lost_text(lost_by, key)
            needs.append({"text": text, "lost_at": step, "op": op, "how": how})

        for position in new:
            m = before[position]
            if self.folded_calls:
                call = result_call(before, position)
                if call is not None and call[1] is not None and call in self.folded_calls:
                    lost_at = self.folded_calls.pop(call)  # back in the context
                    refetches.append(
                        {
                            "tool": call[0],
                            "args": call[1],
                            "lost_at": lost_at,
                            "refetched_at": index,
                            "tokens": tokens_of(m),
                        }
                    )
                    for key in cache.text_keys(m.text):
                        lost_by = self.open.get(key)
                        if lost_by is not None and lost_by[0] == lost_at:
                            need(key, lost_by, "refetched")
                    continue
            if not self.open:
                continue
            if (m.role == "user" or m.partition in _ASKING) and not is_tool_result(m):
                # Not a tool's result that comes back in a user message (Anthropic's
                # form): the output of another command that holds it asks for nothing.
                how = "asked"
                text = m.text
            elif m.role == "assistant":
                how = "mentioned"
                text = said_text(m)
            else:
                continue
            for key in cache.text_keys(text):
                lost_by = self.open.get(key)
                if lost_by is not None:
                    need(key, lost_by, how)
        # The reply comes back as the next call's new message: linked here, it is not
        # linked again there.
        for text in said if self.open else ():
            for key in cache.text_keys(text):
                lost_by = self.open.get(key)
                if lost_by is not None:
                    need(key, lost_by, "mentioned")
        for mid in reloaded:
            for op in self.by_original.get(mid, ()):
                lost, keys = self.by_op[op]
                for entity, key in zip(lost, keys, strict=True):
                    need(key, op, "reloaded", entity)
        return needs, refetches

    def lose(
        self,
        index: int,
        ops: Sequence[Mapping[str, Any]],
        folds: Sequence[tuple[Fold, Sequence[Message]]],
        cache: TextCache | None = None,
    ) -> list[list[Any]]:
        """Register step `index`'s losses; the folded calls to keep in its stats.

        `folds` pairs each fold with the context its originals sat in. Whether
        a lost entity still sits elsewhere in the context is asked only when a
        later step needs it (``needs_of``), not here for every loss.
        """
        self._open_all(index, ops, cache)
        self.next_index = index + 1
        calls: list[list[Any]] = []
        for fold, context in folds:
            for original in fold.originals:
                if not original.extra and not isinstance(original.content, list):
                    continue  # no arguments and no call id: nothing to match a refetch by
                if not is_tool_result(original):
                    continue
                position = _position(context, original.id)
                call = result_call(context, position) if position is not None else None
                if call is not None and call[1] is not None:
                    self.folded_calls[(call[0], call[1])] = index
                    calls.append([call[0], call[1]])
        return calls


def _position(context: Sequence[Message], mid: str) -> int | None:
    for i in range(len(context) - 1, -1, -1):
        if context[i].id == mid:
            return i
    return None


def new_positions(before: Sequence[Message], known: set[str] | None) -> list[int]:
    """Positions of the messages at the end of `before` that `known` ids do not hold."""
    if known is None:
        return []
    out: list[int] = []
    for i in range(len(before) - 1, -1, -1):
        if before[i].id in known:
            break
        out.append(i)
    out.reverse()
    return out


class NeedLinks:
    """Every need of a session's steps, linked to the operation that lost what was
    needed, kept as the steps' stats are added in index order (`add`); `settle`
    writes them onto the losing steps' stats."""

    def __init__(self) -> None:
        self.amnesia: list[dict[str, Any]] = []  # aggregates.amnesia
        self.refetches: list[dict[str, Any]] = []  # aggregates.refetches
        self.later: dict[Op, list[dict[str, Any]]] = {}
        # operations whose needs grew since the last `settle`
        self.touched: set[Op] = set()

    def add(self, index: int, stats: Mapping[str, Any]) -> None:
        for need in stats.get("needs") or ():
            self.amnesia.append(
                {
                    "text": need["text"],
                    "lost_at": need["lost_at"],
                    "needed_at": index,
                    "how": need["how"],
                }
            )
            op = (need["lost_at"], need["op"])
            self.later.setdefault(op, []).append(
                {"text": need["text"], "step": index, "how": need["how"]}
            )
            self.touched.add(op)
        for refetch in stats.get("refetches") or ():
            self.refetches.append(
                {k: refetch[k] for k in ("tool", "lost_at", "refetched_at", "tokens")}
            )

    def settle(
        self, stats_by_index: Mapping[int, dict[str, Any]], *, every: bool = False
    ) -> list[int]:
        """Fill ``needed_later`` on the operations that lost what later steps needed,
        list those entities first in ``lost`` and settle the reward of their steps,
        in place; the indexes of the steps changed. Only the steps whose operations'
        needs grew since the last call, or (`every`) every step: stats read back may
        hold needs that a recomputation took away."""
        if every:
            indexes: Iterable[int] = stats_by_index
        else:
            indexes = sorted({index for index, _ in self.touched if index in stats_by_index})
        self.touched.clear()
        later = self.later
        changed: list[int] = []
        for index in indexes:
            stats = stats_by_index[index]
            ops = stats.get("ops") or ()
            if not any(
                (index, k) in later or op["entities"].get("needed_later")
                for k, op in enumerate(ops)
            ):
                continue
            reward = stats.get("reward_base", stats["reward"])
            for k, op in enumerate(ops):
                needed = later.get((index, k), [])
                entities = op["entities"]
                entities["needed_later"] = needed
                if needed:
                    entities["lost"] = _needed_first(entities["lost"], needed)
                reward += op_reward(op, needed=bool(needed)) - op_reward(op, needed=False)
            reward = round(reward, 4) + 0.0
            stats["reward"] = reward
            changed.append(index)
        return sorted(changed)


def _needed_first(lost: list[str], needed: list[dict[str, Any]]) -> list[str]:
    """`lost` with what was needed first, by the step that first needed it (then as
    listed), then the rest as listed. Ranked again with more needs, a ranked list
    gives what the list as first ranked would: the order never depends on how
    often it was settled."""
    first_need: dict[str, int] = {}
    for need in needed:  # in step order
        first_need.setdefault(entity_key(need["text"]), need["step"])
    keys = [entity_key(e) for e in lost]
    front = sorted(
        (n for n, key in enumerate(keys) if key in first_need),
        key=lambda n: (first_need[keys[n]], n),
    )
    rest = [e for e, key in zip(lost, keys, strict=True) if key not in first_need]
    return [lost[n] for n in front] + rest


def link_needs(
    stats_by_index: Mapping[int, dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[int]]:
    """(aggregates.amnesia, aggregates.refetches, indexes of steps whose stats changed)
    of a whole session (`NeedLinks`); stats are changed in place."""
    links = NeedLinks()
    for index in sorted(stats_by_index):
        links.add(index, stats_by_index[index])
    return links.amnesia, links.refetches, links.settle(stats_by_index, every=True)


# Entities an amnesia group shows before "and N more".
AMNESIA_SHOWN = 3
# Entities an operation's lost list shows before "and N more" (the step page's too).
LOST_SHOWN = 24


def in_view(texts: list[str], most: int) -> list[str]:
    """The first `most` of `texts`, the ones a list shows before "and N more"; all of
    them when one more would be all that hides."""
    return texts if len(texts) <= most + 1 else texts[:most]


@dataclass
class Shortlist:
    """Entities, most likely to matter first (an operation's ``lost``), of which the
    first `most` are in view and the rest behind "and N more" (`in_view`)."""

    texts: list[str]
    most: int = LOST_SHOWN

    @property
    def shown(self) -> list[str]:
        return in_view(self.texts, self.most)

    @property
    def more(self) -> list[str]:
        return self.texts[len(self.shown) :]


@dataclass
class AmnesiaGroup:
    """The entities one step lost and a later one needed the same way: one row of the
    session's amnesia list (a file fetched again yields dozens of entities at once)."""

    lost_at: int
    needed_at: int
    how: str
    texts: list[str]

    @property
    def shown(self) -> list[str]:
        """The entities in view (`in_view`)."""
        return in_view(self.texts, AMNESIA_SHOWN)

    @property
    def more(self) -> list[str]:
        return self.texts[len(self.shown) :]


def amnesia_groups(entries: Any) -> list[AmnesiaGroup]:
    """A session's amnesia (``aggregates.amnesia``: text, lost_at, needed_at, how) by
    (lost_at, needed_at, how), in the order their first entities come: how the session
    page and the HTML and Markdown reports list it."""
    groups: dict[tuple[int, int, str], AmnesiaGroup] = {}
    for e in entries if isinstance(entries, list) else ():
        if not isinstance(e, dict) or not isinstance(e.get("lost_at"), int):
            continue
        if not isinstance(e.get("needed_at"), int):
            continue
        key = (e["lost_at"], e["needed_at"], str(e.get("how") or ""))
        if key not in groups:
            groups[key] = AmnesiaGroup(*key, texts=[])
        groups[key].texts.append(str(e.get("text") or ""))
    return list(groups.values())


__all__ = [
    "AMNESIA_SHOWN",
    "HOWS",
    "LOST_SHOWN",
    "AmnesiaGroup",
    "LossTracker",
    "NeedLinks",
    "Op",
    "Shortlist",
    "amnesia_groups",
    "calls_of",
    "in_view",
    "link_needs",
    "new_positions",
]
