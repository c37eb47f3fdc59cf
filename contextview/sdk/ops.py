"""Operations from two contexts, and seed 003 edits applied to a message list.

Plain functions over message dicts (``{"id", "role", "content", ...}``), usable
by any agent: `infer_ops` explains how a context became another in the
contract's operation forms (it lives in the core, which the server shares),
`apply_edits` applies seed 003's ``{ids, role, justification, new_content}``
edits the way the server does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from contextview.core.infer import infer_ops

__all__ = ["apply_edits", "infer_ops"]

Message = dict[str, Any]


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
