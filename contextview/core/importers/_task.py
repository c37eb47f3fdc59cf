"""What an imported session was asked to do, when its log's first message for the
model is not that (contract: a session's ``metadata.task``, the line the sessions
list shows of it).

Agents put text of their own in front of the user's request: Claude Code its slash
commands' markup and reminders, Codex its AGENTS.md and environment, and agents run
on a benchmark (SWE-agent, mini-swe-agent, OpenHands, Terminus) a template of
instructions with the issue somewhere inside. Each importer says what its user asked
(``SessionLog.asked``); these are the pieces they share: the text a user wrote in a
message, and where a template put the issue it was given.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Any

from contextview.core.parts import part_kind

# The literal text either side of where a template puts the task: what a message made
# from it holds between them is the task ("" at the start or end of the message).
Around = tuple[str, str]

_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")
# Where a Jinja template's literal text stops: an expression, a statement, a comment.
_JINJA = re.compile(r"\{\{|\{%|\{#|\}\}|%\}|#\}")


def plain_text(content: Any) -> str:
    """The text of a message's content (a string, or the text parts of a list), without
    its images, files or tool results."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif (
            isinstance(part, dict)
            and part_kind(part) in ("text", "input_text")
            and isinstance(part.get("text"), str)
        ):
            texts.append(part["text"])
    return "\n".join(texts)


def around(template: Any, names: Collection[str]) -> Around | None:
    """Where `template` (a Jinja template, as agents keep them in their config) puts its
    first placeholder named one of `names`: the last line of literal text before it and
    the first after it; None for a template with no such placeholder."""
    if not isinstance(template, str):
        return None
    for found in _PLACEHOLDER.finditer(template):
        if found.group(1) in names:
            before = _JINJA.split(template[: found.start()])[-1].strip().splitlines()
            after = _JINJA.split(template[found.end() :])[0].strip().splitlines()
            return (before[-1].strip() if before else "", after[0].strip() if after else "")
    return None


def inside(text: str, arounds: Iterable[Around | None]) -> str:
    """What `text` holds where the first of `arounds` that fits it puts the task;
    all of `text` when none fits."""
    for pair in arounds:
        if pair is None:
            continue
        before, after = pair
        start = 0
        if before:
            at = text.find(before)
            if at < 0:
                continue
            start = at + len(before)
        end = text.find(after, start) if after else len(text)
        if end < 0:
            continue
        found = text[start:end].strip()
        if found:
            return found
    return text
