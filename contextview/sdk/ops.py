"""Operations from two contexts, and seed 003 edits applied to a message list.

Plain functions over message dicts (``{"id", "role", "content", ...}``), usable
by any agent: `infer_ops` explains how a context became another in the
contract's operation forms, `apply_edits` applies seed 003's
``{ids, role, justification, new_content}`` edits the way the server does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from contextview.core.model import REPLACING_OPS

Message = dict[str, Any]
Op = dict[str, Any]

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
    before: Sequence[Message],
    after: Sequence[Message],
    *,
    archived: Collection[str] = (),
    reason: str | None = None,
) -> list[Op]:
    """Operations that turn `before` into `after`, as the contract names them.

    Messages are matched by id. A message whose content changed in place is a
    ``rewrite`` (``truncate`` when the new text is a prefix of the old one); a
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
    ops: list[Op] = []

    def add(op: Op) -> None:
        if reason is not None:
            op.setdefault("reason", reason)
        ops.append(op)

    for mid in before_ids:
        new = after_by_id.get(mid)
        if new is None:
            continue
        old = before_by_id[mid]
        if not _same_substance(old, new):
            old_text, new_text = old.get("content"), new.get("content")
            shorter = (
                isinstance(old_text, str)
                and isinstance(new_text, str)
                and len(new_text) < len(old_text)
                and old_text.startswith(new_text.rstrip(". …"))
            )
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


def _simulate(ids: Sequence[str], ops: Iterable[Op]) -> list[str]:
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
        elif name == "reload":
            order.extend(targets)
    return order


def apply_edits(messages: Sequence[Message], edits: Iterable[Mapping[str, Any]]) -> list[Message]:
    """`messages` after seed 003's edit operations, applied in order.

    Empty ``new_content`` deletes the messages; one id with content rewrites it
    (role from ``role`` when given); several ids merge into one message with the
    first id, at the first one's place. Ids not in the list are skipped, as a
    manager's stale edit would be. ``justification`` never reaches the agent.
    """
    context = [dict(m) for m in messages]
    for edit in edits:
        ids = [str(i) for i in edit.get("ids") or []]
        here = {str(m.get("id")) for m in context}
        present = [i for i in ids if i in here]
        if not present:
            continue
        content = edit.get("new_content")
        if not content:
            context = [m for m in context if str(m.get("id")) not in present]
            continue
        first, rest = present[0], set(present[1:])
        out: list[Message] = []
        for m in context:
            mid = str(m.get("id"))
            if mid == first:
                merged = dict(m, content=content)
                if edit.get("role"):
                    merged["role"] = edit["role"]
                out.append(merged)
            elif mid not in rest:
                out.append(m)
        context = out
    return context
