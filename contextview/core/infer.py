"""Operations nobody reported: how one context became another.

Two questions, one module:

- `infer_step` (the server's): a step's `obs` is not the previous step's `after`
  with messages appended, so the context changed between the two calls without
  the agent saying so (a silent compaction, a masked tool result, a dropped
  turn). It finds the contract's inferred operations (summarize, rewrite,
  truncate, drop, insert) that turn the previous after into this obs.
- `infer_ops` (the SDK's): an agent hands over a step's before and after, but no
  operations; it explains the change in the contract's operation forms (as
  message dicts, ready to send), reloading what was folded earlier.

Both read a shortened message as a `truncate` by the same rule (`is_cut_message`):
on what the model reads of it, so a tool result sent as parts is cut like a string.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from contextview.core.apply import apply_operations
from contextview.core.model import REPLACING_OPS, Fold, Message, Operation
from contextview.core.parts import reading

# The OpenTelemetry GenAI attribute by which a call says its history was compacted
# before it; a step carries it among its obs fields.
COMPACTED = "gen_ai.conversation.compacted"

# Marks an agent leaves where it cut a text short ("...", "…").
_CUT_MARKS = ". …\n\t"


def is_cut(old: str, new: str) -> bool:
    """Whether `new` is `old` cut short: its head or its tail, maybe with a "…" mark."""
    if len(new) >= len(old):
        return False
    head = new.rstrip(_CUT_MARKS)
    if old.startswith(head):
        return True
    tail = new.lstrip(_CUT_MARKS)
    return bool(tail) and old.endswith(tail)


def is_cut_message(
    old: Any, new: Any, old_fields: Mapping[str, Any] | None, new_fields: Mapping[str, Any] | None
) -> bool:
    """Whether content `new` is content `old` cut short, as the model reads them.

    On their text (`contextview.core.parts.reading`, what tokens are counted from),
    not on the strings sent: OTLP gives every tool message as ``tool_result`` parts,
    and Anthropic's spelling does too, so a tool output cut short is a cut whichever
    form carried it. `*_fields` are the message's other fields the model reads (its
    tool calls).
    """
    return is_cut(reading(old, old_fields).text, reading(new, new_fields).text)


# --- between steps (the server) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Inferred:
    """What changed between a previous after and a step's obs."""

    ops: list[Operation] = field(default_factory=list)
    # What the operations removed or replaced, as `apply_operations` folds them.
    folds: list[Fold] = field(default_factory=list)
    # How many messages at the end of obs arrived as usual (new, no operation).
    appended: int = 0


def same_as_sent(kept: Message, sent: Message) -> bool:
    """Whether `sent` is `kept` as the agent sends it again.

    Marks (pinned, expirable) and the partition are the server's bookkeeping, and
    a message sent without a role has the one it had (as an operation's result
    without a role takes its target's): a message resent without them is unchanged.
    """
    return kept is sent or (
        kept.id == sent.id
        and kept.content == sent.content
        and kept.tool == sent.tool
        and kept.extra == sent.extra
        and (sent.role is None or kept.role == sent.role)
    )


def has_compaction(m: Message) -> bool:
    """Whether a message carries a `compaction` part: a summary of what left the context."""
    content = m.content
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "compaction" for part in content
    )


def _changed(old: Message, new: Message) -> Operation:
    """`old` became `new` in place: a truncate when the text was cut short, else a rewrite."""
    cut = old.role == new.role and is_cut_message(old.content, new.content, old.extra, new.extra)
    return Operation(op="truncate" if cut else "rewrite", targets=(old.id,), result=new)


def _summary(targets: Sequence[Message], result: Message) -> Operation:
    return Operation(op="summarize", targets=tuple(m.id for m in targets), result=result)


def infer_step(
    previous: Sequence[Message], obs: Sequence[Message], *, compacted: bool = False
) -> Inferred:
    """The operations that turn `previous` (the last step's after) into `obs`.

    Messages are matched by id. Between two messages found in both, what left and
    what came are paired up: one newcomer where several left is a summary of them;
    as many newcomers as left, role for role, are rewrites in place (one left,
    one came with its role: a rewrite); what left with nothing in its place is
    dropped; a newcomer with nothing to replace is inserted, unless it sits at the
    end (appended, as every step appends). A message under a known id with new
    content is rewritten (or truncated). A message with a `compaction` part, or,
    when the call reported the history `compacted`, the first newcomer, is the
    summary of everything that left, wherever it stands. Moves end in a reorder.

    Applying the operations to `previous` gives `obs` without its last
    `appended` messages, message for message (as `same_as_sent` compares them).
    """
    n = len(previous)
    # The usual step: the same message objects, more of them (lists compare by identity
    # first, at C speed).
    if obs is previous or (len(obs) >= n and (obs if len(obs) == n else obs[:n]) == previous):
        return Inferred(appended=len(obs) - n)
    prev_by_id = {m.id: m for m in previous}
    obs_ids = {m.id for m in obs}
    if len(obs) >= n and all(same_as_sent(a, b) for a, b in zip(previous, obs, strict=False)):
        return Inferred(appended=len(obs) - n)

    kept = {m.id for m in obs if m.id in prev_by_id}
    gone = [m for m in previous if m.id not in obs_ids]
    new = [m for m in obs if m.id not in prev_by_id]
    changed = {m.id: m for m in obs if m.id in prev_by_id and not same_as_sent(prev_by_id[m.id], m)}

    ops: list[Operation] = []
    consumed: set[str] = set()  # obs messages an operation put in place
    summary = _compaction_summary(new, changed, compacted, bool(gone))
    if summary is not None:
        targets = [prev_by_id[summary.id]] if summary.id in changed else []
        ops.append(_summary(targets + gone, summary))
        consumed.add(summary.id)
        changed.pop(summary.id, None)
        gone = []

    # Gaps: the stretches between messages kept by id, numbered in each context.
    gone_in: dict[int, list[Message]] = {}
    gap = 0
    for m in previous:
        if m.id in kept:
            gap += 1
        elif gone and m.id not in obs_ids:
            gone_in.setdefault(gap, []).append(m)
    new_in: dict[int, list[Message]] = {}
    kept_order: list[str] = []
    for m in obs:
        if m.id in kept:
            kept_order.append(m.id)
        elif m.id not in consumed and m.id not in prev_by_id:
            new_in.setdefault(len(kept_order), []).append(m)

    for g in range(len(kept_order) + 1):
        left, came = gone_in.get(g, []), new_in.get(g, [])
        ops += _pair(left, came, consumed)
        if g < len(kept_order) and kept_order[g] in changed:
            mid = kept_order[g]
            ops.append(_changed(prev_by_id[mid], changed[mid]))

    appended = 0
    for m in reversed(obs):
        if m.id in prev_by_id or m.id in consumed:
            break
        appended += 1
    placed = list(obs[: len(obs) - appended])
    for k, m in enumerate(placed):
        if m.id not in kept and m.id not in consumed:
            ops.append(Operation(op="insert", targets=(), result=m, params={"position": k}))

    applied = apply_operations(previous, ops, archive={})
    if [m.id for m in applied.after] != [m.id for m in placed]:
        ops.append(Operation(op="reorder", targets=(), params={"order": [m.id for m in placed]}))
        applied = apply_operations(previous, ops, archive={})
    return Inferred(ops=applied.ops, folds=applied.folds, appended=appended)


def _compaction_summary(
    new: Sequence[Message],
    changed: Mapping[str, Message],
    compacted: bool,
    anything_gone: bool,
) -> Message | None:
    """The message that stands for what left, by its `compaction` part or the call's word."""
    for m in (*new, *changed.values()):
        if has_compaction(m) and (anything_gone or m.id in changed):
            return m
    if compacted and anything_gone and new:
        return new[0]
    return None


def _pair(left: list[Message], came: list[Message], consumed: set[str]) -> list[Operation]:
    """What left one stretch of the context, against what came into the same stretch."""
    if not left:
        return []
    if not came:
        return [Operation(op="drop", targets=tuple(m.id for m in left))]
    if len(left) == len(came) and all(a.role == b.role for a, b in zip(left, came, strict=True)):
        consumed.update(m.id for m in came)
        return [_changed(a, b) for a, b in zip(left, came, strict=True)]
    consumed.add(came[0].id)
    if len(left) == 1 and left[0].role == came[0].role:
        return [_changed(left[0], came[0])]
    return [_summary(left, came[0])]


# --- within a step (the SDK) ----------------------------------------------------------

MessageDict = dict[str, Any]
OpDict = dict[str, Any]

# The fields that make a message what it is, apart from its id.
_SUBSTANCE = ("role", "content", "partition", "tool")


def _same_substance(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in _SUBSTANCE)


def _runs(ids: Sequence[str], leaving: Collection[str]) -> list[list[str]]:
    """Consecutive stretches of `ids` that leave the context, in order."""
    runs: list[list[str]] = []
    current: list[str] = []
    for mid in ids:
        if mid in leaving:
            current.append(mid)
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


def infer_ops(
    before: Sequence[MessageDict],
    after: Sequence[MessageDict],
    *,
    archived: Collection[str] = (),
    reason: str | None = None,
) -> list[OpDict]:
    """Operations that turn `before` into `after`, as the contract names them.

    Messages are matched by id. A message whose content changed in place is a
    ``rewrite`` (``truncate`` when the new text is a cut of the old one); a
    message new to the context stands for the messages that left it (a
    ``summarize`` of the stretch it replaces), unless its id was folded earlier
    (`archived`), which makes it a ``reload``; what left with nothing in its
    place is a ``drop``; a changed order ends with a ``reorder``. A new message
    with nothing to replace cannot be explained by any operation: the caller
    should send `after` too (the server then flags the step ``after_mismatch``).
    """
    before_ids = [str(m["id"]) for m in before]
    after_ids = [str(m["id"]) for m in after]
    before_by_id = dict(zip(before_ids, before, strict=True))
    after_by_id = dict(zip(after_ids, after, strict=True))
    ops: list[OpDict] = []

    def add(op: OpDict) -> None:
        if reason is not None:
            op.setdefault("reason", reason)
        ops.append(op)

    for mid in before_ids:
        new = after_by_id.get(mid)
        if new is None:
            continue
        old = before_by_id[mid]
        if not _same_substance(old, new):
            shorter = is_cut_message(old.get("content"), new.get("content"), old, new)
            add({"action": "truncate" if shorter else "rewrite", "target": mid, "result": new})
        elif bool(old.get("pinned")) != bool(new.get("pinned")):
            add({"action": "pin" if new.get("pinned") else "unpin", "target": mid})

    leaving = [mid for mid in before_ids if mid not in after_by_id]
    arrivals = [mid for mid in after_ids if mid not in before_by_id]
    reloads = [mid for mid in arrivals if mid in archived]
    fresh = [mid for mid in arrivals if mid not in archived]

    if fresh and leaving:
        runs = _runs(before_ids, set(leaving))
        if len(fresh) == len(runs):
            pairs = list(zip(fresh, runs, strict=True))
        else:
            # One summary of everything that left; other newcomers stay unexplained.
            pairs = [(fresh[0], leaving)]
        for result_id, targets in pairs:
            add({"action": "summarize", "targets": list(targets), "result": after_by_id[result_id]})
        folded = {t for _, targets in pairs for t in targets}
        leaving = [mid for mid in leaving if mid not in folded]
    if leaving:
        add({"action": "drop", "targets": leaving})
    if reloads:
        add({"action": "reload", "targets": reloads})

    # Where the operations above leave things; a different order needs a reorder.
    placed = _simulate(before_ids, ops)
    if set(placed) == set(after_ids) and placed != after_ids:
        add({"action": "reorder", "params": {"order": after_ids}})
    return ops


def _simulate(ids: Sequence[str], ops: Iterable[OpDict]) -> list[str]:
    """The id order the operations give, by the contract's rules of position."""
    order = list(ids)
    for op in ops:
        name = op["action"]
        targets = op.get("targets") or ([op["target"]] if op.get("target") else [])
        if name in REPLACING_OPS:
            first = order.index(targets[0])
            rest = set(targets)
            result_id = str(op["result"]["id"])
            order = [
                result_id if k == first else mid
                for k, mid in enumerate(order)
                if k == first or mid not in rest
            ]
        elif name == "drop":
            gone = set(targets)
            order = [mid for mid in order if mid not in gone]
        elif name in ("reload", "insert"):
            at = (op.get("params") or {}).get("position", len(order))
            added = targets if name == "reload" else [str(op["result"]["id"])]
            order[at:at] = added
    return order
