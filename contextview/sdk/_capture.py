"""What the agent's thread takes of a context when it records a step.

Everything else about a step (copies of the message dicts, operations, token
counts, the wire) is made on the SDK's thread; these are the few microseconds
the agent's step pays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any

from contextview.sdk._wire import StepDraft, to_message

Message = dict[str, Any]


def _copies(messages: list[Any]) -> list[Message]:
    try:
        # map(dict.copy) is the cheapest shallow copy per message there is.
        return list(map(dict.copy, messages))
    except TypeError:  # not all dicts: pydantic models, dataclasses...
        return [to_message(m) for m in messages]


def snapshot(messages: Sequence[Any]) -> tuple[list[Any], list[Message]]:
    """The messages as they are now: the objects (for ids) and shallow copies (for content).

    Managers edit their lists and dicts in place after a step; the copies keep
    what the step saw. Contents are strings, which never change.
    """
    originals = list(messages)
    return originals, _copies(originals)


_NONE = object()  # the content of a message dict without a "content" key
_CONTENT = itemgetter("content")


class Captured:
    """A context as a step saw it, for a fraction of what copying it costs.

    `Captured.of` copies the list and takes each message's ``content`` (a
    reference: contents are strings, which never change); the message dicts
    themselves are copied later, on the SDK's thread (`snapshot`), with the
    contents put back as they were. A manager that rewrites a message's content
    in place is logged as it was at the step; a field other than ``content``
    edited in place is seen as it is when the SDK's thread builds the step
    (normally within milliseconds). `Captured.copied` copies every dict at
    once; `Captured.shared` lets the dicts themselves stand for the step.
    """

    __slots__ = ("objects", "contents", "copies", "head", "tail")

    def __init__(
        self,
        objects: list[Any],
        contents: list[Any] | None = None,
        copies: list[Message] | None = None,
        head: Captured | None = None,
        tail: Captured | None = None,
    ) -> None:
        self.objects = objects
        self.contents = contents
        self.copies = copies
        self.head = head
        self.tail = tail

    @classmethod
    def of(cls, messages: Sequence[Any]) -> Captured:
        objects = list(messages)
        try:
            return cls(objects, list(map(_CONTENT, objects)))  # C speed
        except (KeyError, TypeError):
            pass
        try:
            # A message without content, or one that is not a dict.
            return cls(objects, list(map(dict.get, objects, repeat("content"), repeat(_NONE))))
        except TypeError:  # pydantic models, dataclasses...: copied now
            return cls(objects, copies=[to_message(m) for m in objects])

    @classmethod
    def copied(cls, messages: Sequence[Any]) -> Captured:
        objects, copies = snapshot(messages)
        return cls(objects, copies=copies)

    @classmethod
    def shared(cls, messages: Sequence[Any]) -> Captured:
        objects = list(messages)
        if set(map(type, objects)) <= {dict}:
            return cls(objects, copies=list(objects))
        return cls(objects, copies=[to_message(m) for m in objects])

    def extended(
        self, messages: Sequence[Any], capture: Callable[[Sequence[Any]], Captured]
    ) -> Captured:
        """`messages` captured as this capture followed by what was added to it.

        When the list starts with this capture's objects (the very objects, in
        order), only the new messages are captured: an agent's next step
        usually appends to the context the last one left. A content rewritten
        in place in between is not seen here; the next capture of the whole
        context (after the step's action) sees it.
        """
        objects = list(messages)
        n = len(self.objects)
        # At C speed: list equality takes each message it holds itself as equal
        # without looking into it (an equal message in its place is the same too).
        if len(objects) >= n and objects[:n] == self.objects:
            return Captured(objects, head=self, tail=capture(objects[n:]))
        return capture(objects)

    def snapshot(self) -> tuple[list[Any], list[Message]]:
        """(objects, copies) as the step saw them; made once, on the SDK's thread."""
        if self.copies is None:
            if self.head is not None and self.tail is not None:
                self.copies = self.head.snapshot()[1] + self.tail.snapshot()[1]
            else:
                copies = _copies(self.objects)
                for copy, content in zip(copies, self.contents or (), strict=True):
                    if copy.get("content", _NONE) is not content:
                        # Rewritten in place since the step: the content the step saw.
                        if content is _NONE:
                            del copy["content"]
                        else:
                            copy["content"] = content
                self.copies = copies
        return self.objects, self.copies

    def contents_seen(self) -> list[Any]:
        """Each message's content as the step saw it ("" where it has none)."""
        if self.head is not None and self.tail is not None:
            return self.head.contents_seen() + self.tail.contents_seen()
        if self.contents is None:
            return [m.get("content", "") for m in self.copies or ()]
        return ["" if c is _NONE else c for c in self.contents]


# How a context is captured, by the name hooks and record_step take as `capture=`.
CAPTURES: dict[str, Callable[[Sequence[Any]], Captured]] = {
    "content": Captured.of,
    "copy": Captured.copied,
    "shared": Captured.shared,
}


def capture_function(name: str) -> Callable[[Sequence[Any]], Captured]:
    """`Captured.of`, `.copied` or `.shared` by its `capture=` name; ValueError for another."""
    try:
        return CAPTURES[name]
    except KeyError:
        raise ValueError(f"capture must be one of {', '.join(CAPTURES)}, not {name!r}") from None


def captured_draft(
    before: Captured, after: Captured | None, fields: dict[str, Any], index: int
) -> StepDraft:
    """The draft of a step of captured contexts (on the SDK's thread).

    `fields` are `StepDraft.of`'s other arguments but the index, which the
    session gives as the step is queued.
    """
    return StepDraft.of(
        index=index,
        before=before.snapshot(),
        after=after.snapshot() if after is not None else None,
        **fields,
    )
