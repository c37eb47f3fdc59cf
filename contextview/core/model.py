"""The shapes the core works with: messages, normalized operations, folds.

Everything here is plain Python; Django apps persist these and the API renders
them, but what a context *is* is decided in this package alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contextview.core.parts import Reading, reading

# The longest name a session's mode may have (its column, ingest, the mode switch).
MAX_MODE = 64
PARTITIONS = ("system", "task", "memory", "tool", "retrieval", "question", "other")

ROLE_PARTITION = {
    "system": "system",
    "developer": "system",
    "tool": "tool",
    "tool_result": "tool",
    "assistant": "memory",
    "user": "question",
}

# Operations after normalization. Edits of seed 003 become drop / rewrite / merge
# with form="edit"; named actions keep their name with form="named".
OP_NAMES = (
    "keep",
    "pin",
    "unpin",
    "expire",
    "summarize",
    "fold",
    "merge",
    "rewrite",
    "truncate",
    "drop",
    "reload",
    "reorder",
    "insert",
)
# Operations whose result takes the targets' place and whose targets become
# folded originals of that result.
REPLACING_OPS = frozenset({"summarize", "fold", "merge", "rewrite", "truncate"})
# Replacing operations whose result stands in the one target's place: the same
# message with new content (under a new id when ids follow content).
REWRITING_OPS = frozenset({"rewrite", "truncate"})
# Operations that take content out of the context, archived: what a session's
# `tokens_saved` sums.
COMPACTING_OPS = REPLACING_OPS | {"drop"}
# Operations that need a result message: the replacing ones, and insert (a new
# message put into the context, nothing folded).
RESULT_OPS = REPLACING_OPS | {"insert"}


def default_partition(role: str | None) -> str:
    return ROLE_PARTITION.get(role or "", "other")


def content_text(content: Any) -> str:
    """The text the model reads of a content as sent (a string, or a list of parts)."""
    return reading(content).text


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a context, fully resolved (never "by id alone")."""

    id: str
    role: str | None
    # None only when the agent sent `content: null` (a message that only calls tools)
    content: str | list[Any] | None
    partition: str
    tool: str | None = None
    pinned: bool = False
    expirable: bool = False
    # Any other field the agent sent with the message (name, tool_call_id, ...).
    extra: dict[str, Any] | None = None
    # What `reading` worked out, kept: a message's fields never change, and a walk
    # asks a message of its text at every step that holds it (a tool call's text is
    # its arguments written out as JSON).
    _reading: Reading | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def text(self) -> str:
        """What the model reads of it (see `contextview.core.parts`)."""
        if type(self.content) is str and self.extra is None:
            return self.content
        return self.reading.text

    @property
    def reading(self) -> Reading:
        found = self._reading
        if found is None:
            found = reading(self.content, self.extra)
            object.__setattr__(self, "_reading", found)
        return found


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation in the single representation every input form maps to."""

    op: str  # one of OP_NAMES
    targets: tuple[str, ...]
    form: str = "named"  # "named" (seed 000 style) or "edit" (seed 003 style)
    # The replacing message for summarize/fold/merge/rewrite/truncate. For edits
    # its role may be None, meaning "the first target's role".
    result: Message | None = None
    reason: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    # Where the operation sat in the event (e.g. "body.actions[2]"), so errors found
    # while applying it can name the field. Not part of what the operation means.
    origin: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Fold:
    """Originals that left the context in one operation, and what replaced them."""

    op_index: int
    op: str
    kind: str  # "fold" (replaced by result_id) or "drop" (left with no replacement)
    result_id: str | None
    originals: tuple[Message, ...]


@dataclass(slots=True)
class Applied:
    after: list[Message]
    folds: list[Fold]
    # ids brought back by reload operations, in order
    reloaded: list[str]
    # Operations skipped because they could not apply (only when not strict).
    errors: list[str] = field(default_factory=list)
    # The operations as applied: results resolved (role and partition inherited
    # from what they replace). Skipped operations appear unchanged.
    ops: list[Operation] = field(default_factory=list)
