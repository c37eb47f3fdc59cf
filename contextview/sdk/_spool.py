"""The on-disk spool: events that could not be sent yet, oldest first.

A spool is a folder of segment files ``seg-<n>.jsonl``, each read back whole
and deleted once all its events are answered. A segment holds event lines
(``{"e": event, "x": [[list, position, key], ...]}``) and content lines
(``{"k": key, "m": message}``) for the messages its events send by id alone or
in a run (list ``"run"``, at the run's position), so that every segment can
resend any of its events with full content on its own.
A crash between sending a segment and deleting it only makes the server answer
``duplicate`` for what it already has; so does an event spooled after an
attempt whose answer was lost (``"a"``: it is resent byte for byte).

One process owns a spool folder at a time (an exclusive lock on ``lock``).

Events the server refused for good are set aside in ``dead-letter.jsonl``, one
line each (`DeadLetter`), never sent again; `python -m contextview.sdk check`
counts them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from contextview.sdk._wire import RUN, Message, Pending, encode_json

try:  # POSIX; elsewhere the folder is simply not locked.
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]


# The file of a spool folder that holds the events the server refused for good.
DEAD_LETTER = "dead-letter.jsonl"


class SpoolError(OSError):
    pass


def dead_letter_line(pending: Pending, status: int | None, error: str, at: str) -> bytes:
    """One line of the dead-letter file: when, what the server said, and the event.

    The event goes with every message in full (ids alone and runs expanded) when
    the SDK still knows them, so it reads, and could be sent again, on its own.
    """
    pending.expand_all()
    head = encode_json(
        {"at": at, "status": status, "error": error, "event_id": pending.event_id,
         "session_id": pending.session_id}
    )  # fmt: skip
    return head[:-1] + b',"event":' + pending.data + b"}\n"


@dataclass(frozen=True)
class DeadLetters:
    """What a dead-letter file holds: how many events, of how many sessions, the latest."""

    path: Path
    count: int
    sessions: int
    last: dict[str, Any] | None


def read_dead_letters(folder: str | os.PathLike[str]) -> DeadLetters:
    """Summarize a spool folder's dead-letter file (which a running client may be appending to)."""
    path = Path(folder) / DEAD_LETTER
    count = 0
    sessions: set[str] = set()
    last: dict[str, Any] | None = None
    try:
        with open(path, "rb") as stream:
            for raw in stream:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue  # a line being written, or cut short by a crash
                if not isinstance(line, dict):
                    continue
                count += 1
                sessions.add(str(line.get("session_id")))
                last = line
    except FileNotFoundError:
        pass
    return DeadLetters(path, count, len(sessions), last)


class Spool:
    def __init__(self, folder: str | os.PathLike[str], *, segment_bytes: int = 8 << 20) -> None:
        self.folder = Path(folder)
        self.segment_bytes = segment_bytes
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock: IO[bytes] | None = open(self.folder / "lock", "ab")  # noqa: SIM115
        if fcntl is not None:
            try:
                fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                self._lock.close()
                self._lock = None
                raise SpoolError(
                    f"spool folder {self.folder} is in use by another process"
                ) from exc
        found = sorted(self.folder.glob("seg-*.jsonl"))
        # Segments left by an earlier process: their events were counted there, not here.
        self._foreign = set(found)
        # Segments on disk, oldest first (kept here rather than listing the folder
        # each time the sender looks for work).
        self._segments = list(found)
        self._next = int(found[-1].stem[4:]) + 1 if found else 0
        self.dead_letter_path = self.folder / DEAD_LETTER
        self._dead: IO[bytes] | None = None
        self._writer: IO[bytes] | None = None
        self._writer_path: Path | None = None
        self._written = 0
        # Content lines already in the segment being written: id(message) -> (message, key).
        self._keys: dict[int, tuple[Message, int]] = {}

    def segments(self) -> list[Path]:
        return list(self._segments)

    def has_segments(self) -> bool:
        return bool(self._segments)

    def _open_writer(self) -> IO[bytes]:
        if self._writer is None or self._written >= self.segment_bytes:
            self.close_writer()
            self._writer_path = self.folder / f"seg-{self._next:012d}.jsonl"
            self._next += 1
            self._writer = open(self._writer_path, "ab")  # noqa: SIM115
            self._segments.append(self._writer_path)
            self._written = 0
            self._keys = {}
        return self._writer

    def close_writer(self) -> None:
        if self._writer is not None:
            self._writer.flush()
            os.fsync(self._writer.fileno())
            self._writer.close()
        self._writer = None
        self._writer_path = None
        self._keys = {}

    def write(self, events: list[Pending]) -> None:
        """Append events at the spool's end (they are newer than all it holds)."""
        for pending in events:
            out = self._open_writer()
            lines: list[bytes] = []
            refs: list[list[Any]] = []
            for where, position, message in pending.expand or ():
                known = self._keys.get(id(message))
                if known is None or known[0] is not message:
                    key = len(self._keys)
                    self._keys[id(message)] = (message, key)
                    lines.append(b'{"k":%d,"m":%s}\n' % (key, encode_json(message)))
                else:
                    key = known[1]
                refs.append([where, position, key])
            line = b'{"e":' + pending.data
            if refs:
                line += b',"x":' + encode_json(refs)
            if pending.attempts:
                # Sent before (its answer lost): never to be rewritten, only resent as is.
                line += b',"a":%d' % pending.attempts
            lines.append(line + b"}\n")
            chunk = b"".join(lines)
            out.write(chunk)
            self._written += len(chunk)
        if self._writer is not None:
            self._writer.flush()

    def read_oldest(self) -> tuple[Path, list[Pending]] | None:
        """The oldest segment's events; the segment stays until `remove` is called."""
        segments = self.segments()
        if not segments:
            return None
        path = segments[0]
        if path == self._writer_path:
            self.close_writer()
        contents: dict[int, Message] = {}
        events: list[Pending] = []
        with open(path, "rb") as stream:
            for raw in stream:
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue  # a line cut short by a crash: its event was never promised
                if "k" in line:
                    contents[line["k"]] = line["m"]
                    continue
                event = line["e"]
                refs = line.get("x", ())
                # A run missing one of its messages stays a run: expanding it would
                # send a shorter context than the agent had.
                short = {p for where, p, key in refs if where == RUN and key not in contents}
                expand = [
                    (where, position, contents[key])
                    for where, position, key in refs
                    if key in contents and not (where == RUN and position in short)
                ]
                session_id = str(event.get("body", {}).get("session_id", ""))
                events.append(
                    Pending(
                        event_id=str(event.get("id")),
                        session_id=session_id,
                        data=encode_json(event),
                        expand=expand or None,
                        kind=str(event.get("type")),
                        attempts=int(line.get("a", 0)),
                        spooled=True,
                        foreign=path in self._foreign,
                    )
                )
        return path, events

    def set_aside(self, lines: list[bytes]) -> None:
        """Append dead-letter lines (`dead_letter_line`); they are on disk when this returns."""
        if self._dead is None:
            self._dead = open(self.dead_letter_path, "ab")  # noqa: SIM115
        self._dead.write(b"".join(lines))
        self._dead.flush()
        os.fsync(self._dead.fileno())

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        if path in self._segments:
            self._segments.remove(path)

    def close(self) -> None:
        self.close_writer()
        if self._dead is not None:
            self._dead.close()
            self._dead = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None
