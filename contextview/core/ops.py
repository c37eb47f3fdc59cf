"""Every accepted operation form, mapped to the one Operation shape.

Named actions (seed 000) keep their name; edits of seed 003 (`ids`, `role`,
`justification`, `new_content`) become drop, rewrite or merge with form="edit".
Whether an operation can apply to a context is decided later, in apply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from contextview.core.errors import InputError
from contextview.core.messages import (
    MAX_ROLE_LENGTH,
    Overlay,
    optional_str,
    parse_id,
    parse_message,
)
from contextview.core.model import OP_NAMES, RESULT_OPS, Message, Operation


def normalize_operations(raw: Any, *, field: str, latest: Mapping[str, Message]) -> list[Operation]:
    """The operations of `action` (one dict) or `actions` (a list of dicts), in order."""
    if raw is None:
        return []
    if isinstance(raw, dict):
        items = [(raw, field)]
    elif isinstance(raw, list):
        items = [(item, f"{field}[{i}]") for i, item in enumerate(raw)]
    else:
        raise InputError(field, "must be an object or a list of objects")

    # A result recorded by one operation can be referred to by id alone in a later one.
    seen = Overlay(latest)
    ops: list[Operation] = []
    for item, item_field in items:
        op = normalize_operation(item, field=item_field, latest=seen)
        # Edit results are only complete once applied (they inherit from their
        # target), so only named results are offered to later references.
        if op.result is not None and op.result.partition:
            seen.local[op.result.id] = op.result
        ops.append(op)
    return ops


def normalize_operation(raw: Any, *, field: str, latest: Mapping[str, Message]) -> Operation:
    if not isinstance(raw, dict):
        raise InputError(field, "must be an object")
    if "action" in raw:
        return _named(raw, field, latest)
    if "ids" in raw:
        return _edit(raw, field)
    raise InputError(
        field,
        "must name an 'action' (summarize, drop, ...) or list 'ids' to edit",
    )


def _named(raw: dict[str, Any], field: str, latest: Mapping[str, Message]) -> Operation:
    name = raw["action"]
    if not isinstance(name, str) or name not in OP_NAMES:
        shown = f"'{name}'" if isinstance(name, str) else repr(name)
        raise InputError(
            f"{field}.action", f"unknown action {shown}; expected one of {', '.join(OP_NAMES)}"
        )

    targets: list[str] = []
    target = raw.get("target")
    # Seed 000's default policy logs keep with target "": no target at all.
    if target is not None and target != "":
        targets.append(parse_id(target, field=f"{field}.target"))
    many = raw.get("targets")
    if many is not None:
        if not isinstance(many, list):
            raise InputError(f"{field}.targets", "must be a list of ids")
        for k, item in enumerate(many):
            tid = parse_id(item, field=f"{field}.targets[{k}]")
            if tid not in targets:
                targets.append(tid)

    params = raw.get("params")
    if params is None:
        params = {}
    elif not isinstance(params, dict):
        raise InputError(f"{field}.params", "must be an object")

    # Only an operation that puts a message in the context has a result; one sent
    # with another (a drop's) is no part of what the operation did.
    result_raw = raw.get("result") if name in RESULT_OPS else None
    result = (
        None
        if result_raw is None
        else parse_message(
            result_raw, field=f"{field}.result", latest=latest, inherit_partition=True
        )
    )
    return Operation(
        op=name,
        targets=tuple(targets),
        form="named",
        result=result,
        reason=optional_str(raw, "reason", field),
        params=dict(params),
        origin=field,
    )


def _edit(raw: dict[str, Any], field: str) -> Operation:
    ids_raw = raw["ids"]
    if not isinstance(ids_raw, list) or not ids_raw:
        raise InputError(f"{field}.ids", "must be a non-empty list of ids")
    ids: list[str] = []
    for k, item in enumerate(ids_raw):
        mid = parse_id(item, field=f"{field}.ids[{k}]")
        if mid not in ids:
            ids.append(mid)

    role = optional_str(raw, "role", field, max_length=MAX_ROLE_LENGTH)
    reason = optional_str(raw, "justification", field)
    content = raw.get("new_content")
    if content is not None and not isinstance(content, str | list):
        raise InputError(f"{field}.new_content", "must be a string or a list of parts")

    if not content:
        return Operation(op="drop", targets=tuple(ids), form="edit", reason=reason, origin=field)
    # role None and partition "" mean "as the first target": known only when applied.
    result = Message(id=ids[0], role=role, content=content, partition="")
    return Operation(
        op="rewrite" if len(ids) == 1 else "merge",
        targets=tuple(ids),
        form="edit",
        result=result,
        reason=reason,
        origin=field,
    )
