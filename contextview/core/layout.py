"""What a context is made of, where its pinned texts and task sit in it, and what
that task is, in a line (`task_line`, what the sessions list shows of a session).

Models attend least to the middle of a long context ("lost in the middle"):
`third_of` is the one rule for start, middle and end, which ``pinned_mid``
(``contextview.core.stats``) and the step page's markers both use.
`composition` splits a context's tokens by kind, as an engineer asks "what
is this context full of": system prompt, tool definitions, tool results,
messages, the model's thinking, and what the provider read that the log does
not hold (``unseen_tokens``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from contextview.core.calls import is_tool_result
from contextview.core.entities import normalize
from contextview.core.model import Message
from contextview.core.parts import blocks, thinking_text

# In the order a provider reads them: what comes first in a call first.
KINDS = ("unseen", "tools", "system", "messages", "tool_results", "thinking")
KIND_LABELS = {
    "unseen": "unseen (provider only)",
    "tools": "tool definitions",
    "system": "system",
    "messages": "messages",
    "tool_results": "tool results",
    "thinking": "thinking",
}
THIRDS = ("start", "middle", "end")


def third_of(at: float, total: float) -> str:
    """Which third of a context of `total` tokens a message starting at token `at` is in."""
    if total <= 0 or at < total / 3:
        return "start"
    return "middle" if at < 2 * total / 3 else "end"


def kind_of(m: Message) -> str:
    """The kind a message counts under: system, tool_results or messages."""
    if m.role in ("system", "developer") or m.partition == "system":
        return "system"
    if is_tool_result(m):
        return "tool_results"
    return "messages"


def composition(
    context: Sequence[Message],
    tokens: Sequence[int | None],
    *,
    count: Callable[[str], int],
    tools_tokens: int = 0,
    unseen: int | None = None,
) -> dict[str, int]:
    """Tokens of `context` by kind (`KINDS`, in order); `tokens[i]` are message i's.

    A message's thinking counts apart from the rest of it, measured with `count`
    and never more than the message's own tokens. Negative unseen tokens (the
    provider counted less than the log holds) count as none.
    """
    out = dict.fromkeys(KINDS, 0)
    out["unseen"] = max(0, unseen or 0)
    out["tools"] = tools_tokens
    for m, n in zip(context, tokens, strict=True):
        n = n or 0
        if m.role == "assistant" and isinstance(m.content, list):
            thought = thinking_text(m.content)
            if thought:
                t = min(n, count(thought))
                out["thinking"] += t
                n -= t
        out[kind_of(m)] += n
    return out


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a pinned text or the task sits in a context."""

    what: str  # "pinned" or "task"
    text: str  # the pinned text, or the start of the message
    message: str  # the id of the message it is in
    at: int  # tokens before that message
    third: str  # start, middle or end


def placements(
    context: Sequence[Message], tokens: Sequence[int | None], pinned: Sequence[str] = ()
) -> list[Placement]:
    """Where each pinned text (first found), pinned message and task message sits."""
    total = sum(n or 0 for n in tokens)
    wanted = {normalize(p): p for p in pinned if p.strip()}
    out: list[Placement] = []
    at = 0
    for m, n in zip(context, tokens, strict=True):
        folded = normalize(m.text) if wanted else ""
        for key in [k for k in wanted if k in folded]:
            out.append(Placement("pinned", wanted.pop(key), m.id, at, third_of(at, total)))
        if m.pinned or m.partition == "task":
            what = "pinned" if m.pinned else "task"
            out.append(Placement(what, first_line(m.text), m.id, at, third_of(at, total)))
        at += n or 0
    return out


# How much of a session's task the sessions list keeps (``Session.task``).
TASK_CHARS = 200


def cut(line: str, limit: int) -> str:
    """`line` as it is, or its first `limit` - 1 characters (less the spaces they end
    with) and an ellipsis."""
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def head_of(text: str, limit: int) -> str:
    """The start of `text` up to `limit` characters, ended at the last line break
    within them when there is one in their second half: a long text's preview, which
    says how it starts without carrying all of it."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    end = head.rfind("\n")
    return head[:end] if end > limit // 2 else head


def one_line(text: str, limit: int = TASK_CHARS) -> str:
    """`text` on one line (each run of white space a space), cut at `limit` characters."""
    return cut(" ".join(text.split()), limit)


def task_line(context: Sequence[Message]) -> str:
    """What a context was asked to do, on one line: its first task message, else its
    first question (a user's message that is not tools' results); "" without either."""
    question = ""
    for m in context:
        if m.partition == "task" and (line := one_line(m.text)):
            return line
        if not question and m.partition == "question" and not is_tool_result(m):
            question = one_line(m.text)
    return question


def first_line(text: str, limit: int = 80) -> str:
    """The first line of `text`, cut at `limit` characters (how a message is named by
    its start: a pinned text's place, what was lost, the pages' first_line)."""
    return cut(text.strip().split("\n", 1)[0].strip(), limit)


def message_label(message: Message) -> str:
    """A message as a reader knows it: 'tool result: “Exit code 2”', not its id (a Claude
    Code tool result is a user message: it is named by what it holds). How "what was
    lost", the step's rows, the archive and the reports' re-billed results name a
    message. One with no text is named by its first part ('user: (compaction)': Codex's
    compaction is encrypted); "" for an empty message."""
    kind = "tool result" if message.partition == "tool" else message.role or message.partition
    line = first_line(message.text or "", 60)
    if line:
        return f"{kind}: “{line}”"
    parts = blocks(message.content, message.extra)
    return f"{kind}: ({parts[0].kind.replace('_', ' ')})" if parts else ""
