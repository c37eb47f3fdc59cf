"""How one context became another, message by message and word by word.

Messages are matched by id: an id in both contexts is the same message, whose
content may have changed and whose place may have moved. A message the caller
knows was rewritten under a new id (content-addressed ids change with the
content: an OTLP or imported session's rewrite or truncate, which the server
infers) is matched to the one it replaced, and so is changed, not removed and added.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from contextview.core.messages import same_message
from contextview.core.model import Message
from contextview.core.parts import call_fields
from contextview.core.sequences import common_prefix, common_suffix

# Chinese and Japanese have no spaces between words, so without splitting every
# ideograph and kana apart, one changed character would mark a whole sentence.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_TOKEN = re.compile(rf"\s+|[{_CJK}]|[^\W{_CJK}]+|.", re.DOTALL)


def tokenize(text: str) -> list[str]:
    """Whitespace runs, word runs, single punctuation and single CJK characters.

    The tokens join back to exactly `text`.
    """
    return _TOKEN.findall(text)


# Past this many pairs of words between two changed stretches, they are not matched
# word by word (`word_diff`): two long lines that differ throughout take some 40 ms
# at this size, and longer ones grow past what a page can wait for.
WORD_MATCH_LIMIT = 4_000_000


def word_diff(a: str, b: str) -> list[tuple[str, str]]:
    """(tag, text) pieces with tags equal/delete/insert; equal+delete joins to `a`,
    equal+insert joins to `b`."""
    if a == b:
        return [("equal", a)] if a else []
    pieces: list[tuple[str, str]] = []

    def add(tag: str, texts: list[str]) -> None:
        text = "".join(texts)
        if not text:
            return
        if pieces and pieces[-1][0] == tag:
            pieces[-1] = (tag, pieces[-1][1] + text)
        else:
            pieces.append((tag, text))

    # Lines first: a long tool output usually changes in a few lines, and matching
    # its tens of thousands of tokens at once is what makes a diff slow.
    lines_a, lines_b = a.splitlines(keepends=True), b.splitlines(keepends=True)
    for op, i1, i2, j1, j2 in SequenceMatcher(None, lines_a, lines_b).get_opcodes():
        if op == "equal":
            add("equal", lines_a[i1:i2])
            continue
        ta, tb = tokenize("".join(lines_a[i1:i2])), tokenize("".join(lines_b[j1:j2]))
        if len(ta) * len(tb) > WORD_MATCH_LIMIT:
            # Two long lines that became each other (minified JSON rewritten): matching
            # word by word takes too long and says little a reader can use.
            # What both start and end with stays equal; the middle is replaced.
            head = common_prefix(ta, tb)
            tail = common_suffix(ta, tb, min(len(ta), len(tb)) - head)
            add("equal", ta[:head])
            add("delete", ta[head : len(ta) - tail])
            add("insert", tb[head : len(tb) - tail])
            add("equal", ta[len(ta) - tail :])
            continue
        # autojunk stays on: in long text, whitespace and common words would
        # otherwise make matching quadratic. It looks at the second sequence only, so
        # the longer one goes second (a long tool result against its short summary:
        # 28 ms -> 0.6 ms, the same words found).
        swapped = len(ta) > len(tb)
        first, second = (tb, ta) if swapped else (ta, tb)
        for wop, k1, k2, l1, l2 in SequenceMatcher(None, first, second).get_opcodes():
            (a1, a2, b1, b2) = (l1, l2, k1, k2) if swapped else (k1, k2, l1, l2)
            if wop == "equal":
                add("equal", ta[a1:a2])
            else:
                add("delete", ta[a1:a2])
                add("insert", tb[b1:b2])
    return pieces


@dataclass(slots=True)
class Changed:
    id: str
    before: Message
    after: Message
    words: list[tuple[str, str]]


@dataclass(slots=True)
class Moved:
    id: str
    from_index: int
    to_index: int


@dataclass(slots=True)
class ContextDiff:
    added: list[Message] = field(default_factory=list)
    removed: list[Message] = field(default_factory=list)
    changed: list[Changed] = field(default_factory=list)
    moved: list[Moved] = field(default_factory=list)
    # Messages in both contexts, equal in every field and not moved.
    unchanged: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "added": [_message_dict(m) for m in self.added],
            "removed": [_message_dict(m) for m in self.removed],
            "changed": [
                {
                    "id": c.id,
                    "before": _message_dict(c.before),
                    "after": _message_dict(c.after),
                    "words": [[tag, text] for tag, text in c.words],
                }
                for c in self.changed
            ],
            "moved": [
                {"id": m.id, "from_index": m.from_index, "to_index": m.to_index} for m in self.moved
            ],
            "unchanged": self.unchanged,
        }


def _message_dict(m: Message) -> dict[str, Any]:
    out = {"id": m.id, "role": m.role, "partition": m.partition, "content": m.content}
    out.update(call_fields(m.extra))
    return out


def diff_contexts(
    a: Sequence[Message],
    b: Sequence[Message],
    words: Callable[[str, str], list[tuple[str, str]]] = word_diff,
    replaced: Mapping[str, str] | None = None,
) -> ContextDiff:
    """How `a` became `b`; a changed message's words as `words` gives them (a report of
    many steps that change a message the same way passes one that remembers).

    `replaced` maps an id of `b` to the id of `a` whose message it rewrote (see the
    module); a pair is matched only where neither id is in both contexts.
    """
    index_a: dict[str, int] = {}
    for i, m in enumerate(a):
        index_a.setdefault(m.id, i)
    keys = [m.id for m in b]  # what each message of b is matched in a by
    if replaced:
        keys = _matched_ids(keys, replaced, index_a)
    index_b: dict[str, int] = {}
    for j, key in enumerate(keys):
        index_b.setdefault(key, j)

    diff = ContextDiff(
        added=[
            m
            for j, (m, key) in enumerate(zip(b, keys, strict=True))
            if key not in index_a and index_b[key] == j
        ],
        removed=[m for i, m in enumerate(a) if m.id not in index_b and index_a[m.id] == i],
    )
    # Shared keys in b's order, ranked by their place in a: those on a longest
    # increasing run kept their relative order; every other one moved.
    shared = [key for j, key in enumerate(keys) if key in index_a and index_b[key] == j]
    stayed = _longest_increasing([index_a[x] for x in shared])

    for k, key in enumerate(shared):
        before, after = a[index_a[key]], b[index_b[key]]
        moved = k not in stayed
        if moved:
            diff.moved.append(Moved(after.id, index_a[key], index_b[key]))
        if not same_message(before, after):
            diff.changed.append(Changed(after.id, before, after, words(before.text, after.text)))
        elif not moved:
            diff.unchanged += 1
    return diff


def _matched_ids(
    ids_b: list[str], replaced: Mapping[str, str], index_a: Mapping[str, int]
) -> list[str]:
    """`ids_b` with each id that `replaced` pairs with an id of `a` (`index_a`) as that id,
    where neither is in both contexts and each id of `a` takes one."""
    in_b = set(ids_b)
    taken: set[str] = set()
    out = []
    for mid in ids_b:
        was = replaced.get(mid)
        if (
            was is not None
            and mid not in index_a
            and was in index_a
            and was not in in_b
            and was not in taken
        ):
            taken.add(was)
            mid = was
        out.append(mid)
    return out


def _longest_increasing(values: list[int]) -> set[int]:
    """Positions in `values` of one longest strictly increasing subsequence (O(n log n))."""
    tails: list[int] = []  # smallest tail value of an increasing run of each length
    tail_at: list[int] = []  # position in `values` of that tail
    previous = [-1] * len(values)
    for k, v in enumerate(values):
        n = bisect_left(tails, v)
        if n == len(tails):
            tails.append(v)
            tail_at.append(k)
        else:
            tails[n] = v
            tail_at[n] = k
        previous[k] = tail_at[n - 1] if n else -1
    kept: set[int] = set()
    k = tail_at[-1] if tail_at else -1
    while k != -1:
        kept.add(k)
        k = previous[k]
    return kept
