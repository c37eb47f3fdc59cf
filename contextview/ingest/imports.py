"""Importing transcripts that agents wrote themselves (contract: "Importing transcripts").

The core's importers turn a file into ingest events; this service hands them to
`batch_ingest` in batches, each transcript inside a savepoint of its own, so a file
that turns out bad halfway leaves nothing of it behind and costs the others of the
request nothing: they are stored, and the answer names the one that was not. A
folder (the command) or a zip or tar of one (an upload) is read for its transcripts:
OpenHands sessions kept as folders of event files, and transcripts kept as files (a
Claude Code project folder, its sessions beside their sub-agents' own transcripts).
Event ids come from the content, so the same file again stores nothing and a file
that grew adds only its new steps, and completes the reply of a call an earlier
import caught while it was still being written (a step's id is made from its call,
not its reply).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

from django.conf import settings
from django.db import DatabaseError, transaction

from contextview.core.importers import (
    FORMATS,
    HEAD_BYTES,
    IMPORTED,
    IMPORTED_UNTIMED,
    Event,
    TranscriptError,
    batches,
    claude_code,
    detect,
    openhands,
    read,
    session_name,
    session_name_apart,
)
from contextview.core.importers.folders import (
    Archive,
    ArchiveTooLarge,
    event_folders,
    is_archive,
    read_folder,
    transcript_files,
)
from contextview.ingest.services import batch_ingest, step_is_stored, step_reply_complete
from contextview.projects.models import Project
from contextview.sessions.models import Session


class ImportFailed(Exception):
    """A request, or a transcript of one, that cannot be imported. Raised by
    `transcript_import`, nothing of the transcripts it names was stored; `outcome`,
    when not None, is what the request's other transcripts stored."""

    def __init__(self, status: int, message: str, outcome: ImportOutcome | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.outcome = outcome

    def as_dict(self) -> dict[str, Any]:
        """The answer's body: the error, and with others stored, what they were."""
        if self.outcome is None:
            return {"error": self.message}
        return {**self.outcome.as_dict(), "error": self.message}


@dataclass
class ImportedSession:
    session_id: str
    format: str
    steps: int = 0
    operations: int = 0
    new_steps: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "format": self.format,
            "steps": self.steps,
            "operations": self.operations,
            "new_steps": self.new_steps,
        }


@dataclass
class ImportOutcome:
    sessions: list[ImportedSession] = field(default_factory=list)
    # whether anything was stored (201) or all of it was there already (200)
    created: bool = False
    # the transcripts that could not be imported, in the order they were met
    failed: list[ImportFailed] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"sessions": [s.as_dict() for s in self.sessions]}
        if self.failed:
            out["created"] = self.created
            out["errors"] = [{"status": f.status, "error": f.message} for f in self.failed]
        return out

    @contextmanager
    def one_transcript(self) -> Iterator[None]:
        """Import one transcript (a file, an archive, a transcript in a folder) in a
        savepoint: when it fails, nothing of it is stored or reported, the failure is
        kept in `failed`, and the request goes on. A fault of the request itself
        (400: a session_id for many transcripts) still ends it."""
        sessions, created = len(self.sessions), self.created
        try:
            with transaction.atomic():
                yield
        except ImportFailed as exc:
            if exc.status == 400:
                raise
            del self.sessions[sessions:]
            self.created = created
            self.failed.append(exc)


def transcript_format(*, stream: IO[bytes], name: str, format: str | None) -> str:
    """The format asked for, or the one the file's first bytes show."""
    if format:
        return format
    head = stream.read(HEAD_BYTES)
    whole = len(head) < HEAD_BYTES
    stream.seek(0)
    if whole and not head.strip():
        raise ImportFailed(
            422, f"{name}: the file is empty, so its format cannot be told; pass format to say it"
        )
    try:
        found = detect(head, whole=whole)
    except TranscriptError as exc:
        raise ImportFailed(422, f"{name}: {exc}") from None
    if found is None:
        raise ImportFailed(
            422,
            f"{name}: not a transcript this server reads (expected one of {', '.join(FORMATS)}); "
            "pass format to say which",
        )
    return found


def _import_file(
    *,
    project: Project,
    name: str,
    stream: IO[bytes],
    format: str | None,
    session_id: str | None,
    live: bool,
    outcome: ImportOutcome,
) -> None:
    head = stream.read(512)
    stream.seek(0)
    if is_archive(head):
        # A zip or tar of a folder: its transcripts, as a folder's.
        with _archive(name, stream) as archive:
            _import_folders(
                project=project,
                name=name,
                paths=archive.paths,
                open_file=archive.open,
                format=format,
                session_id=session_id,
                live=live,
                outcome=outcome,
            )
        return
    fmt = transcript_format(stream=stream, name=name, format=format)
    events = _named_apart(
        project=project,
        name=session_name(name),
        given=session_id,
        read_as=lambda fallback: read(
            _rewound(stream), format=fmt, session_id=session_id, fallback=fallback, live=live
        ),
    )
    _import_events(
        project=project, name=name, fmt=fmt, events=events, outcome=outcome, given=session_id
    )


def _rewound(stream: IO[bytes]) -> IO[bytes]:
    stream.seek(0)
    return stream


def _named_apart(
    *,
    project: Project,
    name: str,
    given: str | None,
    read_as: Callable[[str], Iterator[Event]],
) -> Iterator[Event]:
    """The events of a transcript read by `read_as`, its sessions named after its file
    (`name`) where its log names none, unless `given` names them: a transcript that is
    not the session stored under that name grown (its first step is another call, or
    the same call with another reply: another run written to a file of the same name)
    is read again, as a session of its own (`session_name_apart`). A session its log
    names stays that session, and ingest refuses a step of it that differs (409). A
    generator, so that a transcript that cannot be read fails where its events are
    taken."""
    events = read_as(name)
    head: list[Event] = []
    if given is None:
        for event in events:
            head.append(event)
            if event["type"] == "step":
                break
    first = head[-1] if head and head[-1]["type"] == "step" else None
    if first is None or step_is_stored(project=project, event=first) is not False:
        yield from head
        yield from events
        return
    _close(events)
    if _first_session(read_as(f"{name}~")) == first["body"]["session_id"]:
        yield from read_as(name)  # named by its log, not by the file
        return
    yield from read_as(session_name_apart(name, first))


def _first_session(events: Iterator[Event]) -> str | None:
    """The session of the first step of `events`, read no further."""
    try:
        for event in events:
            if event["type"] == "step":
                return str(event["body"]["session_id"])
        return None
    finally:
        _close(events)


def _close(events: Iterator[Event]) -> None:
    """Stop reading a transcript (a reader's generator) before its end."""
    close = getattr(events, "close", None)
    if close is not None:
        close()


@contextmanager
def _archive(name: str, stream: IO[bytes]) -> Iterator[Archive]:
    """The archive open, what cannot be read in it a 422 and what inflates too far a 413."""
    try:
        archive = Archive(stream, limit=settings.IMPORT_MAX_BYTES)
    except TranscriptError as exc:
        raise ImportFailed(422, f"{name}: {exc}") from None
    except ArchiveTooLarge as exc:
        raise ImportFailed(413, f"{name}: {exc}") from None
    try:
        yield archive
    except ArchiveTooLarge as exc:
        raise ImportFailed(413, f"{name}: {exc}") from None
    finally:
        archive.close()


def _import_folders(
    *,
    project: Project,
    name: str,
    paths: Sequence[str],
    open_file: Callable[[str], IO[bytes]],
    format: str | None,
    session_id: str | None,
    live: bool,
    outcome: ImportOutcome,
) -> None:
    """The transcripts of a folder: its OpenHands event folders, and the transcripts
    kept as files (a Claude Code project's sessions and their sub-agents, a Codex
    sessions folder); `format`, if given, is that of the files."""
    folders = event_folders(paths)
    files = transcript_files(paths, folders)
    if not folders and not files:
        raise ImportFailed(
            422,
            f"{name}: holds no transcript (no .jsonl, .traj or Codex rollout-*.json file, "
            "and no OpenHands event folder: events/0.json, 1.json, ...)",
        )
    if session_id is not None and len(folders) + len(files) > 1:
        raise ImportFailed(
            400,
            f"session_id: names one session, but {name} holds "
            f"{len(folders) + len(files)} transcripts",
        )
    elsewhere_of = claude_code.kept_apart(files)
    for path in files:
        with outcome.one_transcript():
            _import_folder_file(
                project=project,
                name=name,
                path=path,
                open_file=open_file,
                format=format,
                session_id=session_id,
                live=live,
                leave=elsewhere_of(path),
                outcome=outcome,
            )
    for folder in folders:
        with outcome.one_transcript():
            events = read_folder(
                folder, open_file, session_id=session_id, fallback=session_name(name), live=live
            )
            try:
                _import_events(
                    project=project,
                    name=name,
                    fmt=openhands.FORMAT,
                    events=events,
                    outcome=outcome,
                    given=session_id,
                )
            except OSError as exc:
                raise ImportFailed(
                    422, f"{name}: cannot read {exc.filename}: {exc.strerror}"
                ) from None


def _import_folder_file(
    *,
    project: Project,
    name: str,
    path: str,
    open_file: Callable[[str], IO[bytes]],
    format: str | None,
    session_id: str | None,
    live: bool,
    leave: set[str],
    outcome: ImportOutcome,
) -> None:
    """One transcript kept as a file in the folder `name`; a file no importer knows is
    passed over (a workflow's journal, an index)."""
    try:
        with open_file(path) as stream:
            head = stream.read(HEAD_BYTES)
            fmt = format or detect(head, whole=len(head) < HEAD_BYTES)
    except TranscriptError as exc:
        raise ImportFailed(422, f"{path}: {exc}") from None
    except OSError as exc:
        raise ImportFailed(422, f"{name}: cannot read {path}: {exc.strerror}") from None
    if fmt is None:
        return
    try:
        with open_file(path) as stream:
            events = _named_apart(
                project=project,
                name=session_name(path.rpartition("/")[2]),
                given=session_id,
                read_as=lambda fallback: read(
                    _rewound(stream),
                    format=fmt,
                    session_id=session_id,
                    fallback=fallback,
                    live=live,
                    leave=leave,
                ),
            )
            _import_events(
                project=project,
                name=path,
                fmt=fmt,
                events=events,
                outcome=outcome,
                given=session_id,
            )
    except OSError as exc:
        raise ImportFailed(422, f"{name}: cannot read {path}: {exc.strerror}") from None


def _import_events(
    *,
    project: Project,
    name: str,
    fmt: str,
    events: Iterable[Event],
    outcome: ImportOutcome,
    given: str | None,
) -> None:
    """Ingest a transcript's events; `given`: the session id the request named."""
    seen: dict[str, ImportedSession] = {}
    timed: set[str] = set()  # sessions of which the transcript wrote a time
    try:
        for batch in batches(events):
            result = batch_ingest(project=project, batch=batch)
            for event, answer in zip(batch, result.results, strict=True):
                sid = event["body"]["session_id"]
                if "timestamp" in event:
                    timed.add(sid)
                entry = seen.get(sid)
                if entry is None:
                    entry = seen[sid] = ImportedSession(session_id=sid, format=fmt)
                    outcome.sessions.append(entry)
                completed = None
                if answer.status == 409 and event["type"] == "step":
                    completed = step_reply_complete(project=project, event=event)
                if completed is not None:
                    # A reply an earlier import caught mid-stream, now grown; or an
                    # older copy of the file, whose reply the stored one holds.
                    outcome.created |= completed == "grown"
                    entry.steps += 1
                    entry.operations += len(event["body"].get("actions", ()))
                    continue
                if answer.status == 409:
                    raise ImportFailed(
                        409,
                        f"{name}: {_where(event)} was refused: {answer.error}; "
                        + _another_transcript(sid, given),
                    )
                if answer.status >= 400:
                    raise ImportFailed(422, f"{name}: {_where(event)} was refused: {answer.error}")
                if answer.status == 201:
                    outcome.created = True
                if event["type"] == "step":
                    entry.steps += 1
                    entry.operations += len(event["body"].get("actions", ()))
                    entry.new_steps += answer.status == 201
    except TranscriptError as exc:
        raise ImportFailed(422, f"{name}: {exc}") from None
    except (DatabaseError, ValueError) as exc:
        # Storage refusing content (e.g. a NUL byte PostgreSQL text cannot hold).
        raise ImportFailed(422, f"{name}: could not be stored: {exc}") from None
    _mark_imported(project=project, session_ids=seen, fmt=fmt, timed=timed)
    # A file with no model call yet (a live transcript that has only its first
    # prompt) stores nothing, and is no error: the next import of it will.


def _mark_imported(
    *, project: Project, session_ids: Iterable[str], fmt: str, timed: set[str]
) -> None:
    """Mark the sessions a transcript holds as read from one (``Session.imported_from``):
    the pages then show them as imported, not as agents gone quiet, and offer no mode
    switch. Those it wrote no time of are marked too (``Session.times_from_import``): their
    times are the import's. Again after each import: a session event sent anew replaces
    the metadata."""
    for session in Session.objects.filter(project=project, external_id__in=list(session_ids)):
        untimed = session.external_id not in timed
        if session.imported_from != fmt or session.times_from_import != untimed:
            marks = {IMPORTED: fmt, IMPORTED_UNTIMED: True} if untimed else {IMPORTED: fmt}
            kept = {k: v for k, v in (session.metadata or {}).items() if k != IMPORTED_UNTIMED}
            session.metadata = {**kept, **marks}
            session.save(update_fields=["metadata"])


def _another_transcript(session_id: str, given: str | None) -> str:
    """What a 409 of an import says to do: the session holds another transcript (or
    this one edited, not grown)."""
    if given is not None:
        return (
            f"session {session_id!r} holds another transcript: pass another session_id "
            "to import this one beside it"
        )
    return (
        f"session {session_id!r} holds another version of this transcript (changed, not "
        "grown): pass session_id to import this one as a session of its own"
    )


def _where(event: dict[str, Any]) -> str:
    body = event["body"]
    if event["type"] == "step":
        return f"step {body['index']} of session {body['session_id']!r}"
    return f"the {event['type']} event of session {body['session_id']!r}"


def transcript_import(
    *,
    project: Project,
    files: Sequence[tuple[str, IO[bytes]]] = (),
    folders: Sequence[tuple[str, Sequence[str], Callable[[str], IO[bytes]]]] = (),
    format: str | None = None,
    session_id: str | None = None,
    live: bool = False,
) -> ImportOutcome:
    """Import each (name, binary stream) in `files`, and the transcripts of each
    folder in `folders` (a name, the paths of the files under it, and how to open
    one): its OpenHands event folders and its transcript files. A file that is a zip
    or tar is read as a folder. Each transcript is stored whole or not at all: when
    some cannot be imported, the others are, and ImportFailed names them (the first
    one's status and error, each in ``errors``, with what the others stored); when the
    only one fails, it is that transcript's own ImportFailed.

    `live`: the files are still being written; a last model call that may not be
    complete yet waits for the next import of the file.
    """
    if not files and not folders:
        raise ImportFailed(400, "file: field required, one or more transcripts")
    if session_id is not None and len(files) + len(folders) > 1:
        raise ImportFailed(400, "session_id: names one session, so it needs exactly one file")
    if session_id is not None and not 0 < len(session_id) <= 200:
        raise ImportFailed(400, "session_id: must be 1 to 200 characters")
    if format and format not in FORMATS:
        raise ImportFailed(400, f"format: must be one of {', '.join(FORMATS)}, not {format!r}")
    outcome = ImportOutcome()
    with transaction.atomic():
        for name, stream in files:
            with outcome.one_transcript():
                _import_file(
                    project=project,
                    name=name,
                    stream=stream,
                    format=format,
                    session_id=session_id,
                    live=live,
                    outcome=outcome,
                )
        for name, paths, open_file in folders:
            with outcome.one_transcript():
                _import_folders(
                    project=project,
                    name=name,
                    paths=paths,
                    open_file=open_file,
                    format=format,
                    session_id=session_id,
                    live=live,
                    outcome=outcome,
                )
    if not outcome.failed:
        return outcome
    first, *others = outcome.failed
    if not others and not outcome.sessions:
        raise first
    message = first.message
    if others:
        message += f" (and {len(others)} more not imported, named in errors)"
    raise ImportFailed(first.status, message, outcome)
