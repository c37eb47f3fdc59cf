"""Importers: transcripts that agents write themselves, turned into ingest events.

Each module reads one format and yields the contract's ``session``, ``step`` and
``session_end`` events (contract: "Importing transcripts"); ``detect`` tells the
format from the start of a file. JSONL formats are read line by line, so a large
transcript is never held whole; SWE-agent and ATIF files are single JSON
documents and are parsed at once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import IO, Any

from contextview.core.importers import atif, claude_code, codex, openhands, swe_agent
from contextview.core.importers._log import (
    TOO_DEEP,
    Event,
    TranscriptError,
    guarded,
    line_error,
    short_hash,
)
from contextview.core.importers.folders import ARCHIVE_SUFFIXES
from contextview.core.runs import RUN_KEY

__all__ = [
    "FORMATS",
    "HEAD_BYTES",
    "IMPORTED",
    "IMPORTED_UNTIMED",
    "Event",
    "TranscriptError",
    "batches",
    "detect",
    "read",
    "session_name",
    "session_name_apart",
]

READERS: dict[str, Callable[..., Iterator[Event]]] = {
    claude_code.FORMAT: claude_code.read,
    codex.FORMAT: codex.read,
    openhands.FORMAT: openhands.read,
    swe_agent.FORMAT: swe_agent.read,
    atif.FORMAT: atif.read,
}
FORMATS = tuple(READERS)
HEAD_BYTES = 1 << 16
# The metadata key that marks a session read from a transcript, its format the value
# (``Session.imported_from``): set by an import, and by the SDK's Claude Code hook.
IMPORTED = "imported"
# The one that marks a transcript that wrote no times (``Session.times_from_import``).
IMPORTED_UNTIMED = "imported_untimed"
# An OpenHands event's source: SWE-agent's history messages have none.
_OPENHANDS_EVENT = re.compile(r'"source"\s*:\s*"(?:agent|user|environment)"')


def _first_line(head: bytes) -> Any:
    stripped = head.lstrip()
    line = stripped.split(b"\n", 1)[0]
    try:
        return json.loads(line)
    except ValueError:
        return None
    except RecursionError:
        # Past Python's limit within the head alone: deep, whatever the rest holds.
        raise line_error(head[: len(head) - len(stripped)].count(b"\n") + 1, TOO_DEEP) from None


def detect(head: bytes, *, whole: bool = False) -> str | None:
    """The format of a file from its first bytes (`whole`: these are all of it);
    raises TranscriptError for JSON nested too deep to tell."""
    first = _first_line(head)
    if isinstance(first, dict) and b"\n" in head.strip():
        # JSON Lines: the first line is an object of its own.
        if codex.looks_like(first) or codex.exec_stream(first):
            return codex.FORMAT  # the second to say where its transcript is
        if claude_code.looks_like(first):
            return claude_code.FORMAT
        if openhands.looks_like_event(first) or openhands.looks_like_row(first):
            return openhands.FORMAT
    doc: Any = None
    if whole or isinstance(first, dict | list):
        try:
            doc = json.loads(head)
        except ValueError:
            doc = None
        except RecursionError:
            raise TranscriptError("file", TOO_DEEP) from None
    if doc is not None:
        if isinstance(doc, dict) and claude_code.looks_like(doc):
            return claude_code.FORMAT
        if isinstance(doc, dict) and (codex.looks_like(doc) or codex.looks_like_document(doc)):
            return codex.FORMAT
        if openhands.looks_like_row(doc):
            return openhands.FORMAT
        for module in (atif, swe_agent, openhands):
            if module.looks_like(doc):
                return str(module.FORMAT)
        return None
    # A document too large for the head: tell it by the keys it opens with.
    text = head[:HEAD_BYTES].decode("utf-8", "replace")
    stripped = text.lstrip()
    if (
        stripped.startswith("[")
        and '"source"' in text
        and ('"action"' in text or '"observation"' in text or '"kind"' in text)
    ):
        return openhands.FORMAT
    if stripped.startswith("{"):
        if codex.DOCUMENT_START.match(stripped.encode()):
            return codex.FORMAT
        if '"schema_version"' in text and "ATIF" in text:
            return atif.FORMAT
        if '"history"' in text and _OPENHANDS_EVENT.search(text):
            return openhands.FORMAT  # an evaluation's rows, their events in history
        if '"trajectory"' in text or '"history"' in text:
            return swe_agent.FORMAT
    return None


def read(
    stream: IO[bytes],
    *,
    format: str,
    session_id: str | None = None,
    fallback: str = "transcript",
    live: bool = False,
    leave: Collection[str] = (),
) -> Iterator[Event]:
    """The events of one transcript, in order; raises TranscriptError on bad input.

    `session_id` replaces the one the log names; `fallback` names a session the log
    does not (the file's name); `live` leaves out a last model call that may still
    be streaming in; `leave` names sessions whose events are left out (those another
    transcript holds whole: `claude_code.kept_apart`).
    """
    try:
        reader = READERS[format]
    except KeyError:
        raise TranscriptError(
            "format", f"must be one of {', '.join(FORMATS)}, not {format!r}"
        ) from None
    events = guarded(reader(stream, session_id=session_id, fallback=fallback, live=live), format)
    if leave:
        return (e for e in events if e["body"]["session_id"] not in leave)
    return events


# A batch is sent when it holds this many events or this much weight: new content
# in characters, each message of a context sent by id alone as 200, and each one a
# ``$run`` stands for (the previous step's, already read) as 16: about what they cost
# in memory while the batch is ingested. This bounds the memory of one batch
# whatever the transcript's size, and keeps it under the ingest body limit.
BATCH_EVENTS = 1000
BATCH_WEIGHT = 8 * 1024 * 1024
REFERENCE_WEIGHT = 200
RUN_WEIGHT = 16


def batches(events: Iterable[Event]) -> Iterator[list[Event]]:
    """The events in order, cut into batches for the ingest service."""
    batch: list[Event] = []
    weight = 0
    for event in events:
        batch.append(event)
        for message in event["body"].get("obs", {}).get("messages", ()):
            run = message.get(RUN_KEY)
            if run is not None:
                weight += RUN_WEIGHT * run[1]
                continue
            content = message.get("content")
            weight += REFERENCE_WEIGHT
            if isinstance(content, str):
                weight += len(content)
            elif content is not None:
                weight += len(str(content))
        if len(batch) >= BATCH_EVENTS or weight >= BATCH_WEIGHT:
            yield batch
            batch, weight = [], 0
    if batch:
        yield batch


def session_name(filename: str) -> str:
    """The session of a file whose log does not name one: its name without the suffix."""
    stem = filename.replace("\\", "/").rsplit("/", 1)[-1]
    for suffix in (".jsonl", ".json", ".traj", *ARCHIVE_SUFFIXES):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    return stem[:200] or "transcript"


def session_name_apart(name: str, first_step: Event) -> str:
    """The session of a transcript named after its file (`name`) that is not the session
    stored under that name grown: another run written to a file of the same name (two
    SWE-agent runs of one instance, each ``<instance_id>.traj``). It is `name` and a
    short hash of the transcript's first step, its call and its reply, so the same
    transcript is named the same at each import, and so is a copy of it that grew,
    whose first step is the same."""
    first = [first_step["id"], first_step["body"].get("output")]
    return f"{name[:189]}-{short_hash(first)[:10]}"
