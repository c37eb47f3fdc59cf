"""Applying operations to a context, and deciding what a step's contexts are.

`derive_step` is the one place that decides a step's `before` and `after`; the API,
the workers, the pages and the exports all go through it (or through what it
stored), so they can never disagree about what the agent saw.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import compress
from typing import Any

from contextview.core.errors import InputError
from contextview.core.messages import (
    Overlay,
    message_id,
    parse_id,
    parse_message_list,
    same_message,
    sent_by_id,
)
from contextview.core.model import (
    REPLACING_OPS,
    Applied,
    Fold,
    Message,
    Operation,
    default_partition,
)
from contextview.core.ops import normalize_operations

# Operations that mean nothing without at least one target.
_NEEDS_TARGET = REPLACING_OPS | {"drop", "reload", "pin", "unpin", "expire"}


@dataclass(slots=True)
class _Outcome:
    after: list[Message]
    op: Operation
    fold: Fold | None = None
    reloaded: tuple[str, ...] = ()


def apply_operations(
    before: Sequence[Message],
    ops: Sequence[Operation],
    *,
    archive: Mapping[str, Message],
    strict: bool = True,
) -> Applied:
    """Apply `ops` in order, each to the result of the one before.

    `archive` maps ids to folded originals of earlier steps (what `reload` can bring
    back). Strict, an operation that cannot apply raises InputError; otherwise (the
    step gave its own after) it is skipped and described in `Applied.errors`.
    """
    context = list(before)
    folds: list[Fold] = []
    reloaded: list[str] = []
    errors: list[str] = []
    applied_ops: list[Operation] = []
    # Originals folded earlier in this same step: reloadable before the store has them.
    folded_here: dict[str, Message] = {}

    for i, op in enumerate(ops):
        origin = op.origin or f"body.actions[{i}]"
        try:
            outcome = _apply_one(context, op, i, origin, archive, folded_here)
        except InputError as e:
            if strict:
                raise
            errors.append(str(e))
            applied_ops.append(op)
            continue
        context = outcome.after
        applied_ops.append(outcome.op)
        reloaded.extend(outcome.reloaded)
        if outcome.fold is not None:
            folds.append(outcome.fold)
            for original in outcome.fold.originals:
                folded_here[original.id] = original
    return Applied(after=context, folds=folds, reloaded=reloaded, errors=errors, ops=applied_ops)


def _target_field(origin: str, op: Operation, k: int) -> str:
    if op.form == "edit":
        return f"{origin}.ids[{k}]"
    if len(op.targets) <= 1:
        return f"{origin}.target"
    return f"{origin}.targets[{k}]"


def _locate(positions: Mapping[str, int], op: Operation, origin: str) -> list[int]:
    found: list[int] = []
    for k, target in enumerate(op.targets):
        position = positions.get(target)
        if position is None:
            raise InputError(_target_field(origin, op, k), f"'{target}' is not in the context", 422)
        found.append(position)
    return found


def _apply_one(
    context: list[Message],
    op: Operation,
    index: int,
    origin: str,
    archive: Mapping[str, Message],
    folded_here: Mapping[str, Message],
) -> _Outcome:
    """One operation, without touching `context`: a failed one must leave no trace."""
    name = op.op
    if name in _NEEDS_TARGET and not op.targets:
        raise InputError(_target_field(origin, op, 0), f"'{name}' needs a target", 422)
    positions = {m.id: k for k, m in enumerate(context)}

    if name == "reload":
        return _reload(context, positions, op, origin, archive, folded_here)
    if name == "reorder":
        return _reorder(context, positions, op, origin)
    if name == "insert":
        return _insert(context, positions, op, origin)

    found = _locate(positions, op, origin)
    if name == "keep":
        return _Outcome(context, op)
    if name in ("pin", "unpin", "expire"):
        after = list(context)
        for k in found:
            m = after[k]
            after[k] = (
                replace(m, expirable=True) if name == "expire" else replace(m, pinned=name == "pin")
            )
        return _Outcome(after, op)

    originals = tuple(context[k] for k in found)
    leaving = set(op.targets)
    if name == "drop":
        after = [m for m in context if m.id not in leaving]
        return _Outcome(after, op, Fold(index, name, "drop", None, originals))

    if name in REPLACING_OPS:
        if op.result is None:
            raise InputError(f"{origin}.result", f"'{name}' needs a result message", 422)
        result = _resolve_result(op.result, originals[0], op.form)
        if result.id in positions and result.id not in leaving:
            raise InputError(
                f"{origin}.result.id", f"id '{result.id}' is already in the context", 422
            )
        after = []
        for k, m in enumerate(context):
            if k == found[0]:
                after.append(result)
            elif m.id not in leaving:
                after.append(m)
        return _Outcome(
            after, replace(op, result=result), Fold(index, name, "fold", result.id, originals)
        )

    raise InputError(f"{origin}.action", f"unknown operation '{name}'")


def _resolve_result(result: Message, first: Message, form: str) -> Message:
    """The result as it enters the context: what it left open comes from the first target."""
    role = first.role if result.role is None else result.role
    partition = result.partition
    if not partition:
        # Same role, same place in the budget; a new role says where it belongs.
        inherit = result.role is None or result.role == first.role
        partition = first.partition if inherit else default_partition(result.role)
    if form == "edit":
        # An edit changes a message's content, not what else the agent knew of it.
        return replace(first, content=result.content, role=role, partition=partition)
    if role == result.role and partition == result.partition:
        return result
    return replace(result, role=role, partition=partition)


def _reload(
    context: list[Message],
    positions: Mapping[str, int],
    op: Operation,
    origin: str,
    archive: Mapping[str, Message],
    folded_here: Mapping[str, Message],
) -> _Outcome:
    back: list[Message] = []
    # The messages the originals come back over: what a rewrite or truncate that kept
    # the original's id put in its place (ids are unique in a context).
    replaced: set[int] = set()
    for k, target in enumerate(op.targets):
        original = folded_here.get(target) or archive.get(target)
        if target in positions:
            if original is None or same_message(original, context[positions[target]]):
                raise InputError(
                    _target_field(origin, op, k), f"'{target}' is already in the context", 422
                )
            replaced.add(positions[target])
        elif original is None:
            raise InputError(_target_field(origin, op, k), f"'{target}' is not in the archive", 422)
        back.append(original)

    kept = [m for k, m in enumerate(context) if k not in replaced] if replaced else context
    at = _position(op, origin, len(kept))
    return _Outcome(kept[:at] + back + kept[at:], op, reloaded=op.targets)


def _position(op: Operation, origin: str, length: int) -> int:
    """Where `params.position` puts new messages in a context of `length`: the end by default."""
    where = op.params.get("position")
    if where is None:
        return length
    if isinstance(where, int) and not isinstance(where, bool) and where >= 0:
        return min(where, length)
    raise InputError(f"{origin}.params.position", "must be an integer >= 0")


def _insert(
    context: list[Message], positions: Mapping[str, int], op: Operation, origin: str
) -> _Outcome:
    result = op.result
    if result is None:
        raise InputError(f"{origin}.result", "'insert' needs a result message", 422)
    if result.id in positions:
        raise InputError(f"{origin}.result.id", f"id '{result.id}' is already in the context", 422)
    if not result.partition:
        # Nothing it replaces to inherit from: its role decides, as for any message.
        result = replace(result, partition=default_partition(result.role))
    at = _position(op, origin, len(context))
    return _Outcome(context[:at] + [result] + context[at:], replace(op, result=result))


def _reorder(
    context: list[Message], positions: Mapping[str, int], op: Operation, origin: str
) -> _Outcome:
    field = f"{origin}.params.order"
    order_raw: Any = op.params.get("order")
    if not isinstance(order_raw, list):
        raise InputError(field, "must list every id in the context")
    order = [parse_id(item, field=f"{field}[{k}]") for k, item in enumerate(order_raw)]

    problems: list[str] = []
    missing = [m.id for m in context if m.id not in set(order)]
    if missing:
        problems.append("missing " + ", ".join(f"'{x}'" for x in missing))
    unknown = [x for x in order if x not in positions]
    if unknown:
        problems.append("not in the context " + ", ".join(f"'{x}'" for x in unknown))
    repeated = sorted({x for x in order if order.count(x) > 1})
    if repeated:
        problems.append("repeated " + ", ".join(f"'{x}'" for x in repeated))
    if problems:
        raise InputError(
            field, "must list every id in the context exactly once: " + "; ".join(problems), 422
        )
    return _Outcome([context[positions[x]] for x in order], op)


@dataclass(slots=True)
class StepResult:
    before: list[Message]
    ops: list[Operation]
    after: list[Message]
    folds: list[Fold]
    reloaded: list[str]
    after_given: bool
    after_mismatch: bool
    errors: list[str]
    # Every message this step recorded (obs, operation results, after): what an id
    # sent alone in a later step refers to. The last one wins per id. A message of
    # the base a run named that its id stands for already is not recorded again.
    recorded: dict[str, Message]


def derive_step(
    *,
    obs: Any,
    ops_raw: Any,
    ops_field: str = "body.actions",
    after_raw: Any,
    latest: Mapping[str, Message],
    archive: Mapping[str, Message],
    obs_resolved: int = 0,
) -> StepResult:
    """A step's before, operations and after, from the raw event parts.

    `latest` is what the session recorded so far (id -> message) and `archive` its
    folded originals (id -> message); the first `obs_resolved` items of `obs` are
    messages already (a base's, ``core.runs.expand_runs``). Raises InputError for an
    event that cannot be taken; a given after that differs from the derivation wins
    and is flagged.
    """
    seen = Overlay(latest)
    before = parse_message_list(obs, field="body.obs.messages", latest=seen, resolved=obs_resolved)
    # A base's messages are what their ids stand for already, mostly the very
    # objects: only the others are recorded again (passed over at C speed).
    head = before[:obs_resolved]
    stands = map(operator.is_not, map(latest.get, map(message_id, head)), head)
    _record(seen.local, list(compress(head, stands)))
    _record(seen.local, before[obs_resolved:])

    ops = normalize_operations(ops_raw, field=ops_field, latest=seen)
    after_given = after_raw is not None
    applied = apply_operations(before, ops, archive=archive, strict=not after_given)
    _record(seen.local, _results(applied.ops))
    # What a reload brought back is what its id now stands for.
    if applied.reloaded:
        reloaded = set(applied.reloaded)
        _record(seen.local, [m for m in applied.after if m.id in reloaded])

    if not after_given:
        # Without operations the after is the before, recorded already.
        if applied.ops:
            _record(seen.local, applied.after)
        return StepResult(
            before=before,
            ops=applied.ops,
            after=applied.after,
            folds=applied.folds,
            reloaded=applied.reloaded,
            after_given=False,
            after_mismatch=False,
            errors=applied.errors,
            recorded=seen.local,
        )

    after = parse_message_list(
        after_raw, field="body.after.messages", latest=seen, inherit_partition=True
    )
    if any(op.op in REPLACING_OPS and op.result is None for op in ops):
        completed = _results_from_after(ops, before, after)
        if completed != ops:
            applied = apply_operations(before, completed, archive=archive, strict=False)
            _record(seen.local, _results(applied.ops))
    after = _settle(after, after_raw, applied.after)
    _record(seen.local, after)
    return StepResult(
        before=before,
        ops=applied.ops,
        after=after,
        folds=applied.folds,
        reloaded=applied.reloaded,
        after_given=True,
        after_mismatch=not _same_contexts(after, applied.after),
        errors=applied.errors,
        recorded=seen.local,
    )


def _record(into: dict[str, Message], messages: Sequence[Message]) -> None:
    into.update(zip(map(message_id, messages), messages, strict=True))


def _results(ops: Sequence[Operation]) -> list[Message]:
    # A result with partition "" was never resolved (its operation was skipped):
    # it is not a complete message to refer back to.
    return [op.result for op in ops if op.result is not None and op.result.partition]


def _results_from_after(
    ops: Sequence[Operation], before: Sequence[Message], after: Sequence[Message]
) -> list[Operation]:
    """Fill results an agent left out but whose after shows them.

    Seed 000's ContextManager logs `{obs, action}` and writes the summary only when
    it executes the action, so a hook that also sends the after has the result
    there: a target whose content changed in place, else a message new to the
    context, taken in order. Without this the folds of such logs would be lost.
    """
    before_by_id = {m.id: m for m in before}
    after_by_id = {m.id: m for m in after}
    claimed = {op.result.id for op in ops if op.result is not None}
    # A reloaded original is new to the context too, but it is nobody's result.
    claimed.update(t for op in ops if op.op == "reload" for t in op.targets)
    fresh = [m for m in after if m.id not in before_by_id and m.id not in claimed]
    completed: list[Operation] = []
    for op in ops:
        if op.op in REPLACING_OPS and op.result is None and op.targets:
            first = op.targets[0]
            in_place = after_by_id.get(first)
            old = before_by_id.get(first)
            if in_place is not None and old is not None and in_place.content != old.content:
                op = replace(op, result=in_place)
            elif fresh:
                op = replace(op, result=fresh.pop(0))
        completed.append(op)
    return completed


def _settle(given: list[Message], sent: Sequence[Any], derived: Sequence[Message]) -> list[Message]:
    """Give after messages what the agent left out of them from the derivation's
    message of the same id: the role and partition they do not name, and, for one
    sent by id alone, its marks (pinned, expirable) as this step's operations left them.

    A summary that took its target's role and partition (say `retrieval`) and comes
    back in the after without them, or a message this step pinned referred to by its
    id, is the same message, not a mismatch. A message sent with content is as it
    says otherwise (no `pinned`: not pinned, as in an obs). One without a partition
    that the derivation does not know, or that names another role, takes its role's.
    """
    known = {m.id: m for m in derived}
    settled: list[Message] = []
    for m, raw in zip(given, sent, strict=True):
        d = known.get(m.id)
        if d is not None:
            role = d.role if raw.get("role") is None else m.role
            partition = m.partition or (d.partition if d.role == role else "")
            pinned, expirable = m.pinned, m.expirable
            if sent_by_id(raw):
                pinned = d.pinned if raw.get("pinned") is None else m.pinned
                expirable = d.expirable
            if (role, partition, pinned, expirable) != (m.role, m.partition, m.pinned, m.expirable):
                m = replace(m, role=role, partition=partition, pinned=pinned, expirable=expirable)
        if not m.partition:
            m = replace(m, partition=default_partition(m.role))
        settled.append(m)
    return settled


def _same_contexts(given: Sequence[Message], derived: Sequence[Message]) -> bool:
    if len(given) != len(derived):
        return False
    return all(
        a.id == b.id
        and a.role == b.role
        and a.content == b.content
        and a.partition == b.partition
        and a.pinned == b.pinned
        for a, b in zip(given, derived, strict=True)
    )
