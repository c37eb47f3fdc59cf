"""Folders of transcripts, on disk or in an archive: transcripts kept as files (a
Claude Code project folder), and OpenHands sessions stored as folders of event files.

OpenHands' file store keeps a session as ``<session>/events/0.json``, ``1.json``,
... (newer versions name them ``event-00000-<uuid>.json``), one event per file,
besides other files (``metadata.json``, caches) that are not events. A folder is
one session, named after the session folder (whose ``base_state.json``, in OpenHands
V1, gives its calls' usage); its events are read in the order of
the numbers in their names, one file at a time, so memory is bounded by the
largest event, never by the session.

OpenHands V1 keeps the conversation of each sub-agent its task tool started in the
folder of the conversation that started it, ``<session>/subagents/<id>/`` (``<id>`` the
child conversation's id in hex, with its own ``base_state.json`` and ``events/``),
beside an index of those tasks, ``subagents/tasks.json`` (each task's
``conversation_id``, ``subagent_type`` and the parent's tool call in ``invocation``).
Such a folder is the sub-agent's session, whose ``metadata.parent_session`` names the
session of the folder above it (and ``parent_tool_call_id`` the call, when the index
has it), as a delegate's in one event stream (`openhands._Run`).

A zip or tar (plain or compressed) of such folders is read the same way: its
members are listed without being read, and each event file is inflated when its
turn comes, counted against a limit on the bytes inflated in all.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import tarfile
import tempfile
import uuid
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from contextview.core.importers import openhands
from contextview.core.importers._log import Event, TranscriptError, guarded

# An event file: its number is the event's place in the session. (A cache file,
# ``event_cache/0-25.json``, holds a list of events and is not one.)
_EVENT_FILE = re.compile(r"(\d+)\.json|event-(\d+)-[^/]*\.json")
# The state OpenHands V1 keeps beside a conversation's events.
_STATE_FILE = "base_state.json"
# Where OpenHands V1 keeps the conversations of a conversation's sub-agents, and
# their index there.
_SUBAGENTS = "subagents"
_TASKS_FILE = "tasks.json"
ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")


@dataclass(frozen=True)
class EventFolder:
    """The event files of one session, in order."""

    # the session folder's name (the one holding ``events/``, or the folder itself)
    session: str
    # the folder's path, as shown in errors
    where: str
    # paths of the event files, in event order
    files: tuple[str, ...]
    # the path of the conversation's state beside its events (OpenHands V1's
    # ``base_state.json``, with each call's usage), when there is one
    state: str | None = None
    # a sub-agent's (``<session>/subagents/<id>/``): the name of the session folder
    # that started it ("" for the folder given itself: the caller names it), and the
    # path of that folder's task index when there is one
    parent: str | None = None
    tasks: str | None = None


def event_folders(paths: Iterable[str]) -> list[EventFolder]:
    """The event folders among `paths` (``/``-separated, relative to what was given).

    Files directly in the given folder (an ``events`` folder given itself) make a
    folder whose session is named ``""``: the caller names it.
    """
    found: dict[str, list[tuple[int, str]]] = defaultdict(list)
    others: set[str] = set()
    for path in paths:
        folder, _, name = path.rpartition("/")
        match = _EVENT_FILE.fullmatch(name)
        if match is not None:
            found[folder].append((int(match.group(1) or match.group(2)), path))
        elif name in (_STATE_FILE, _TASKS_FILE):
            others.add(path)
    folders = []
    for folder, files in sorted(found.items()):
        parent, _, base = folder.rpartition("/")
        session = parent.rpartition("/")[2] if base == "events" else base
        state = f"{parent}/{_STATE_FILE}" if parent else _STATE_FILE
        # ``<session>/subagents/<id>/events``: a sub-agent of <session>
        container = parent.rpartition("/")[0]
        above, _, holder = container.rpartition("/")
        starter = above if base == "events" and holder == _SUBAGENTS else None
        tasks = f"{container}/{_TASKS_FILE}"
        files.sort()
        folders.append(
            EventFolder(
                session=session,
                where=folder or ".",
                files=tuple(p for _, p in files),
                state=state if base == "events" and state in others else None,
                parent=starter.rpartition("/")[2] if starter is not None else None,
                tasks=tasks if starter is not None and tasks in others else None,
            )
        )
    return folders


# The transcripts a folder holds as files of their own (its .json files are an
# agent's other records: indexes, metadata, caches), and the .json files that are
# sessions the TypeScript Codex CLI saved (``rollout-<date>-<id>.json``).
FOLDER_SUFFIXES = (".jsonl", ".traj")
SAVED_ROLLOUT = re.compile(r"(?:^|/)rollout-[^/]*\.json$")


def transcript_files(
    paths: Iterable[str],
    folders: Iterable[EventFolder],
    suffixes: tuple[str, ...] = FOLDER_SUFFIXES,
) -> list[str]:
    """The paths of transcripts kept as files of their own (ending in one of
    `suffixes`, or saved Codex rollouts), in order: those outside the session folders
    of OpenHands event `folders`, whose other files are not transcripts."""
    sessions = tuple(f.where.removesuffix("/events") + "/" for f in folders)
    return sorted(
        p
        for p in paths
        if (p.endswith(suffixes) or SAVED_ROLLOUT.search(p)) and not p.startswith(sessions)
    )


def files_under(folder: str | os.PathLike[str]) -> list[str]:
    """Every file under `folder` by its absolute path, so that the session folder's
    name is part of each (what `event_folders` names a session after)."""
    return [
        Path(root, name).absolute().as_posix()
        for root, _dirs, names in os.walk(folder)
        for name in names
    ]


def read_folder(
    folder: EventFolder,
    open_file: Callable[[str], IO[bytes]],
    *,
    session_id: str | None = None,
    fallback: str = "openhands",
    live: bool = False,
    max_event_bytes: int = 64 * 1024 * 1024,
) -> Iterator[Event]:
    """The events of an OpenHands event folder, as `openhands.read` gives them for the
    same events in one file; raises TranscriptError naming the file at fault."""

    def whole(path: str) -> Any:
        with open_file(path) as stream:
            data = stream.read(max_event_bytes + 1)
        if len(data) > max_event_bytes:
            raise TranscriptError(path, f"is larger than {max_event_bytes} bytes")
        return openhands.event_of(data, path)

    def events() -> Iterator[tuple[str, Any]]:
        for path in folder.files:
            yield path, whole(path)

    def read() -> Iterator[Event]:
        # A generator, so that a state that cannot be read fails where the events
        # are taken, as an event file does.
        usages = openhands.call_usages(whole(folder.state), folder.state) if folder.state else {}
        metadata: dict[str, Any] = {}
        if folder.parent is not None:
            metadata["parent_session"] = folder.parent or fallback
            if folder.tasks:
                metadata.update(_task_of(whole(folder.tasks), folder.session))
        yield from openhands.read_events(
            events(),
            session_id=session_id or folder.session or fallback,
            live=live,
            usages=usages,
            metadata=metadata,
        )

    return guarded(read(), openhands.FORMAT)


def _task_of(index: Any, conversation: str) -> dict[str, str]:
    """What a sub-agent's task index (``subagents/tasks.json``) tells of the task whose
    conversation is the folder `conversation` (its id in hex): the parent's tool call
    that started it and the sub-agent's type, as the session's metadata."""
    tasks = index.get("tasks") if isinstance(index, dict) else None
    for task in tasks.values() if isinstance(tasks, dict) else ():
        child = task.get("conversation_id") if isinstance(task, dict) else None
        try:
            if not isinstance(child, str) or uuid.UUID(child).hex != conversation:
                continue
        except ValueError:
            continue
        found: dict[str, str] = {}
        invocation = task.get("invocation")
        call = invocation.get("tool_call_id") if isinstance(invocation, dict) else None
        if isinstance(call, str):
            found["parent_tool_call_id"] = call
        if isinstance(task.get("subagent_type"), str):
            found["delegate_agent"] = task["subagent_type"]
        return found
    return {}


class ArchiveTooLarge(Exception):
    """An archive whose members inflate past the limit."""


_ZIP = (b"PK\x03\x04", b"PK\x05\x06")
_COMPRESSED: dict[bytes, Callable[[IO[bytes]], io.BufferedIOBase]] = {
    b"\x1f\x8b": lambda f: gzip.GzipFile(fileobj=f),
    b"BZh": lambda f: bz2.BZ2File(f),
    b"\xfd7zXZ\x00": lambda f: lzma.LZMAFile(f),
}


def _is_tar(head: bytes) -> bool:
    return head[257:262] == b"ustar"


def is_archive(head: bytes) -> bool:
    """Whether a file's first 512 bytes are those of a zip or a tar, or compressed
    (a compressed file that is not a tar is refused when it is opened)."""
    return head.startswith(_ZIP) or _is_tar(head) or head.startswith(tuple(_COMPRESSED))


class Archive:
    """The files of a zip or tar, listed at once and opened one at a time.

    `limit` bounds the bytes inflated from it in all (a small archive can hold a
    large tree). A compressed tar is first inflated to a temporary file, so that its
    members can be read in any order without inflating the stream again for each.
    Raises TranscriptError for what cannot be read as an archive.
    """

    def __init__(self, stream: IO[bytes], *, limit: int) -> None:
        self.limit = limit
        self.inflated = 0
        self._zip: zipfile.ZipFile | None = None
        self._tar: tarfile.TarFile | None = None
        self._spool: IO[bytes] | None = None
        self._members: dict[str, Any] = {}
        try:
            self._list(stream)
        except (zipfile.BadZipFile, tarfile.TarError, EOFError, OSError, lzma.LZMAError) as exc:
            self.close()
            raise TranscriptError("file", f"is not a zip or tar that can be read: {exc}") from None
        except BaseException:
            self.close()
            raise

    def _list(self, stream: IO[bytes]) -> None:
        head = stream.read(512)
        stream.seek(0)
        if head.startswith(_ZIP):
            self._zip = zipfile.ZipFile(stream)
            for info in self._zip.infolist():
                if not info.is_dir():
                    self._members[info.filename.strip("/")] = info
            return
        if not _is_tar(head):
            opener = next(v for k, v in _COMPRESSED.items() if head.startswith(k))
            spool = self._spool = tempfile.TemporaryFile()
            with opener(stream) as inflated:
                _copy_limited(inflated, spool, self.limit)
            spool.seek(0)
            if not _is_tar(spool.read(512)):
                raise TranscriptError("file", "is compressed but not a tar: send a zip or tar")
            spool.seek(0)
            stream = spool
        self._tar = tarfile.open(fileobj=stream, mode="r:")
        for member in self._tar:
            if member.isfile():
                self._members[member.name.removeprefix("./").strip("/")] = member

    @property
    def paths(self) -> list[str]:
        return list(self._members)

    def open(self, path: str) -> IO[bytes]:
        member = self._members[path]
        self.inflated += member.file_size if self._zip is not None else member.size
        if self.inflated > self.limit:
            raise ArchiveTooLarge(f"inflates past {self.limit} bytes")
        if self._zip is not None:
            return self._zip.open(member)
        assert self._tar is not None
        found = self._tar.extractfile(member)
        assert found is not None  # a regular file
        return found

    def close(self) -> None:
        for part in (self._zip, self._tar, self._spool):
            if part is not None:
                part.close()


def _copy_limited(source: io.BufferedIOBase, target: IO[bytes], limit: int) -> None:
    copied = 0
    while chunk := source.read(1 << 20):
        copied += len(chunk)
        if copied > limit:
            raise ArchiveTooLarge(f"inflates past {limit} bytes")
        target.write(chunk)
