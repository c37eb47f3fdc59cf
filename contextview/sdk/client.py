"""The contextview client: steps are recorded on the agent's thread and sent from another.

An agent's thread only copies what it records into a queue (a few microseconds
for a 100-message context). One background thread per client does the rest:
works out which messages can go by id alone (``_wire``), batches events, gzips
them, posts them, retries what can be retried, spools to disk what the server
cannot take yet, and brings back the control channel's directives. Nothing in
here raises into the agent's code: failures become counters, `Problem` reports
(``on_error`` and the ``contextview.sdk`` logger) and nothing else.

What the server refuses for good never holds up the rest: an event refused
alone is set aside (the spool's dead-letter file) and reported once; a batch
refused whole is sent again in halves until the events at fault stand alone.
"""

from __future__ import annotations

import atexit
import dataclasses
import email.utils
import functools
import gzip as gzip_module
import itertools
import logging
import os
import random
import secrets
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, NamedTuple
from urllib.parse import quote

import httpx

from contextview.core.errors import NEVER_RECORDED
from contextview.sdk._capture import capture_function, captured_draft
from contextview.sdk._spool import Spool, SpoolError, dead_letter_line
from contextview.sdk._wire import (
    BATCH_BYTES,
    BATCH_EVENTS,
    BatchCut,
    Pending,
    SessionWire,
    StepDraft,
    batch_body,
    end_event,
    rfc3339,
    session_event,
)

log = logging.getLogger("contextview.sdk")

Message = dict[str, Any]

# Statuses worth another try: the server may take the same bytes later. A 500 is
# not one: it is what a bad value answers on a server that fails to refuse it.
RETRYABLE = frozenset({429, 502, 503, 504})
# How many times one event alone may be cut off or time out, while the server
# answers otherwise, before it is taken for the cause and set aside (`Client._judged`).
STUCK_AFTER = 3
MAX_RETRY_AFTER_S = 300.0
# Problems logged one by one up to this many, then every hundredth.
LOG_FIRST = 20


class Reject(Exception):
    """Raise from `on_set_mode` / `on_restore` to reject a directive with a reason."""


@dataclass(frozen=True)
class Directive:
    """A request from the UI: switch mode (``set_mode``) or bring originals back (``restore``)."""

    id: str
    session_id: str
    type: str
    mode: str | None = None
    targets: tuple[str, ...] = ()
    step: int | None = None
    # restore: the folded originals as the server keeps them (id -> message dict),
    # fetched before the directive reaches the agent, so applying it needs no network.
    originals: dict[str, Message] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Problem:
    """Something the SDK could not do; given to ``on_error`` and logged."""

    kind: str  # rejected, dropped, ack, spool, internal
    detail: str
    event_id: str | None = None
    session_id: str | None = None
    status: int | None = None
    # rejected: the dead-letter file the event was set aside in (None without a spool)
    dead_letter: str | None = None


@dataclass
class Counters:
    """Events by what became of them; read with `Client.stats`."""

    recorded: int = 0  # taken from the agent
    sent: int = 0  # stored by the server (including duplicates)
    duplicates: int = 0  # answered "already stored" (a retry of something that got through)
    retried: int = 0  # sends repeated after a failure (one per event per retry)
    spooled: int = 0  # written to the on-disk spool
    dropped: int = 0  # lost: refused by the server, or no room left, or unsent at exit
    rejected: int = 0  # the part of dropped the server refused for good (set aside)
    dead_lettered: int = 0  # the part of rejected written to the spool's dead-letter file
    splits: int = 0  # batches refused whole and sent again in halves
    requests: int = 0
    bytes_sent: int = 0  # request bodies as sent (after gzip)
    bytes_raw: int = 0  # request bodies before gzip


OnSetMode = Callable[[Directive], Any]
OnRestore = Callable[[Directive], Any]


class Session:
    """One agent session: record its steps; they reach the server in the background.

    Made by `Client.session`. Its methods never raise and never wait on the
    network. Directives for the session are applied on the agent's thread when
    it calls `poll` (every `record_step` does), or on the SDK's thread with
    ``deliver="thread"``.
    """

    def __init__(
        self,
        client: Client,
        session_id: str,
        *,
        mode: str | None,
        on_set_mode: OnSetMode | None,
        on_restore: OnRestore | None,
        deliver: Literal["poll", "thread"],
    ) -> None:
        self.client = client
        self.id = session_id
        self.mode = mode
        self.on_set_mode = on_set_mode
        self.on_restore = on_restore
        self.deliver = deliver
        self.ended = False
        self._index = itertools.count()
        self._inbox: deque[Directive] = deque()
        # Sender-thread state.
        self._wire: SessionWire | None = None
        self._seen_directives: set[str] = set()
        self._control_cursor: str | None = None
        self._next_poll = 0.0
        self._last_active = time.monotonic()

    @property
    def handles_directives(self) -> bool:
        return self.on_set_mode is not None or self.on_restore is not None

    def record_step(
        self,
        before: Sequence[Any],
        after: Sequence[Any] | None = None,
        ops: Sequence[dict[str, Any]] | dict[str, Any] | None = None,
        *,
        reason: str | None = None,
        mode: str | None = None,
        before_tokens: int | None = None,
        after_tokens: int | None = None,
        outcome: dict[str, Any] | None = None,
        obs: dict[str, Any] | None = None,
        index: int | None = None,
        infer: bool = True,
        capture: str = "content",
    ) -> int:
        """Record one step; returns its index (-1 if it could not be recorded).

        `before` is the context the step started from, `after` the context it
        left (optional: the server derives it from `ops`). `ops` are contract
        operations (named or seed 003 edits); without them, and with `after`,
        the SDK infers them (`contextview.sdk.ops.infer_ops`) unless `infer` is
        False. Messages without an ``id`` get one that stays the same while the
        message does. `obs` adds fields to the observation (seed 000's
        ``summary_index``, seed 001's ``mode_snapshot``, ...).

        `capture` says what is taken of the lists now, on the agent's thread:
        ``"content"`` each message's content (the dicts are copied later, on
        the SDK's thread, with those contents), ``"copy"`` every dict, or
        ``"shared"`` the lists alone, for agents that never edit a message dict
        once they passed it here. Another name is reported as a problem and the
        step is taken as ``"copy"``, the safest.
        """
        try:
            try:
                take = capture_function(capture)
            except ValueError as exc:
                self.client._internal(exc, self.id)
                take = capture_function("copy")
            if index is None:
                index = next(self._index)
            # Only the lists and what `capture` names are taken here (the agent may
            # edit them in place after this returns); everything else waits for the
            # SDK's thread, so that a step costs the agent a few microseconds.
            captured = take(before)
            captured_after = take(after) if after is not None else None
            if ops is not None:
                ops = [dict(ops)] if isinstance(ops, dict) else [dict(op) for op in ops]
            fields = {
                "timestamp": time.time(),
                "ops": ops,
                "infer": infer,
                "obs_extra": dict(obs) if obs else None,
                "mode": self.mode if mode is None else mode,
                "reason": reason,
                "before_tokens": before_tokens,
                "after_tokens": after_tokens,
                "outcome": outcome,
            }
            draft = functools.partial(captured_draft, captured, captured_after, fields, index)
            self.client._enqueue(("step", self, draft))
            if self._inbox:
                self.poll()
            return index
        except Exception as exc:  # the agent's step must go on whatever happens here
            self.client._internal(exc, self.id)
            return -1

    def next_index(self) -> int:
        return next(self._index)

    def update(self, **fields: Any) -> None:
        """Send the session's fields again (``mode``, ``pinned``, ``budget``, ``metadata``, ...)."""
        try:
            if "mode" in fields:
                self.mode = fields["mode"]
            self.client._enqueue(("session", self, time.time(), dict(fields)))
        except Exception as exc:
            self.client._internal(exc, self.id)

    def end(self, status: str = "succeeded", score: float | None = None) -> None:
        """Close the session (``succeeded``, ``failed``, ``abandoned`` or ``unknown``)."""
        try:
            self.ended = True
            self.client._enqueue(("end", self, time.time(), status, score))
        except Exception as exc:
            self.client._internal(exc, self.id)

    def poll(self) -> int:
        """Apply the directives received so far, on this thread; returns how many."""
        applied = 0
        while self._inbox:
            try:
                directive = self._inbox.popleft()
            except IndexError:
                break
            self._apply(directive)
            applied += 1
        return applied

    def _apply(self, directive: Directive) -> None:
        handler = self.on_set_mode if directive.type == "set_mode" else None
        if directive.type == "restore":
            handler = self.on_restore
        if handler is None:
            self.client._ack(
                self, directive, "rejected", f"this agent does not handle {directive.type}"
            )
            return
        try:
            answer = handler(directive)
        except Reject as exc:
            self.client._ack(self, directive, "rejected", str(exc) or "rejected by the agent")
            return
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"
            self.client._ack(self, directive, "rejected", detail)
            return
        if answer is False:
            self.client._ack(self, directive, "rejected", "declined by the agent")
            return
        if directive.type == "set_mode" and directive.mode:
            # Steps from now on report the new mode; the session says so too.
            self.update(mode=directive.mode)
        self.client._ack(self, directive, "applied", answer if isinstance(answer, str) else "")

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self.ended:
            self.end("failed" if exc_type is not None else "succeeded")


class _Answer(NamedTuple):
    """What came of one ingest request."""

    status: int | None  # None: no answer (connection failed, timed out, cut off)
    body: Any
    retry_after: float | None
    error: str
    reached: bool = True  # False: the request never reached the server


@dataclass
class _Ack:
    session_id: str
    directive_id: str
    status: str
    detail: str
    attempts: int = 0
    due: float = 0.0


class Client:
    """Sends sessions to a contextview server; one per process is enough.

    `url` is the server's base URL, `key` a project key that may ingest. With
    `spool_dir`, events that cannot be sent in time (server down, memory bound
    reached, process exiting) are kept on disk and sent by this or the next
    client that opens the same folder. The client flushes for at most
    `exit_timeout` seconds when the interpreter exits.
    """

    def __init__(
        self,
        url: str,
        key: str,
        *,
        gzip: bool = True,
        batch_events: int = BATCH_EVENTS,
        batch_bytes: int = BATCH_BYTES,
        flush_interval: float = 0.2,
        max_queue: int = 10_000,
        max_buffer_events: int = 50_000,
        max_buffer_bytes: int = 64 << 20,
        spool_dir: str | os.PathLike[str] | None = None,
        exit_timeout: float = 5.0,
        timeout: float = 10.0,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        poll_interval: float = 5.0,
        on_error: Callable[[Problem], Any] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.gzip = gzip
        self.batch_events = max(1, batch_events)
        self.batch_bytes = batch_bytes
        self.flush_interval = flush_interval
        self.max_queue = max_queue
        self.max_buffer_events = max_buffer_events
        self.max_buffer_bytes = max_buffer_bytes
        self.exit_timeout = exit_timeout
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.poll_interval = poll_interval
        self.on_error = on_error
        self.counters = Counters()
        self.problems: deque[Problem] = deque(maxlen=200)
        self._problem_count = 0
        self._key = key
        self._timeout = timeout
        self._transport = transport
        self._spool_dir = spool_dir
        self._run_id = secrets.token_hex(5)
        self._seq = itertools.count(1)
        self._closed = False
        self._setup()
        atexit.register(_close_at_exit, weakref.ref(self))
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=functools.partial(_after_fork, weakref.ref(self)))

    @classmethod
    def from_env(cls, **options: Any) -> Client:
        """A client from ``CONTEXTVIEW_URL``, ``CONTEXTVIEW_KEY`` and ``CONTEXTVIEW_SPOOL``."""
        options.setdefault("spool_dir", os.environ.get("CONTEXTVIEW_SPOOL") or None)
        return cls(
            os.environ.get("CONTEXTVIEW_URL", "http://127.0.0.1:8000"),
            os.environ.get("CONTEXTVIEW_KEY", ""),
            **options,
        )

    def _setup(self) -> None:
        """Fresh per-process state (also after a fork: the parent sends what it queued)."""
        self._lock = threading.Lock()
        self._state = threading.Lock()
        self._flushed = threading.Condition(threading.Lock())
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._records: deque[tuple[Any, ...]] = deque()
        self._enqueued = 0
        self._finished = 0
        self._mem: deque[Pending] = deque()
        self._mem_bytes = 0
        self._replay: deque[Pending] = deque()
        self._replay_path: Any = None
        self._acks: deque[_Ack] = deque()
        self._prefetch: deque[tuple[Session, Directive]] = deque()
        self._incoming: list[Any] = []
        self._sessions: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()
        self._retry_at = 0.0
        self._streak = 0
        # The size of the next batch: smaller after one the server refused whole.
        self._cut = BatchCut(self.batch_events, self.batch_bytes)
        # Events refused by the answer being settled, set aside together (`_set_aside`).
        self._refused: list[tuple[Pending, int | None, str]] = []
        self._http: httpx.Client | None = None
        self._spool: Spool | None = None
        self._exit_spilled = False
        if self._spool_dir is not None:
            try:
                self._spool = Spool(self._spool_dir)
            except (OSError, SpoolError) as exc:
                self._report(Problem("spool", f"spool disabled: {exc}"))
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ agent side

    def session(
        self,
        session_id: str | None = None,
        *,
        agent: str | None = None,
        model: str | None = None,
        encoding: str | None = None,
        mode: str | None = None,
        budget: dict[str, Any] | None = None,
        pinned: Sequence[str] | None = None,
        metadata: dict[str, Any] | None = None,
        on_set_mode: OnSetMode | None = None,
        on_restore: OnRestore | None = None,
        deliver: Literal["poll", "thread"] = "poll",
    ) -> Session:
        """Start a session (or get the live one with this id); its ``session`` event is queued.

        Keep the returned object for the session's life: it numbers the steps and
        remembers what the server already has.
        """
        sid = session_id or f"session-{secrets.token_hex(8)}"
        session = self._sessions.get(sid)
        if session is not None and not session.ended:
            # The same live session: one index counter and one mirror, or steps collide.
            if mode is not None:
                session.mode = mode
            session.on_set_mode = on_set_mode or session.on_set_mode
            session.on_restore = on_restore or session.on_restore
        else:
            session = Session(
                self, sid, mode=mode, on_set_mode=on_set_mode, on_restore=on_restore,
                deliver=deliver,
            )  # fmt: skip
            self._sessions[sid] = session
        fields = {
            "agent": agent,
            "model": model,
            "encoding": encoding,
            "mode": mode,
            "budget": budget,
            "pinned": list(pinned) if pinned is not None else None,
            "metadata": metadata,
        }
        self._enqueue(("session", session, time.time(), fields))
        return session

    def _enqueue(self, record: tuple[Any, ...]) -> bool:
        if self._closed:
            self._drop_now("the client is closed", record[1].id)
            return False
        if len(self._records) >= self.max_queue:
            self._drop_now("the queue is full (the sender cannot keep up)", record[1].id)
            return False
        with self._lock:
            self._enqueued += 1
            self.counters.recorded += 1
            self._records.append(record)
        if self._thread is None:
            self._start()
        if len(self._records) >= self.batch_events:
            self._wake.set()
        return True

    def _drop_now(self, why: str, session_id: str) -> None:
        self._count_dropped(1)
        self._report(Problem("dropped", why, session_id=session_id))

    def _lose(self, n: int) -> None:
        """`n` recorded events will never be sent: counted dropped, and finished."""
        self._count_dropped(n)
        self._finish(n)

    def _count_dropped(self, n: int) -> None:
        # The one counter both the agent's threads and the SDK's thread move.
        with self._lock:
            self.counters.dropped += n

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="contextview-sdk", daemon=True
                )
                self._thread.start()

    def _ack(self, session: Session, directive: Directive, status: str, detail: str) -> None:
        self._acks.append(_Ack(session.id, directive.id, status, detail[:2000]))
        self._wake.set()

    def _internal(self, exc: BaseException, session_id: str | None = None) -> None:
        self._report(Problem("internal", f"{type(exc).__name__}: {exc}", session_id=session_id))

    def _report(self, problem: Problem) -> None:
        try:
            self.problems.append(problem)
            self._problem_count += 1
            n = self._problem_count
            if n <= LOG_FIRST or n % 100 == 0:
                log.warning(
                    "contextview: %s%s (event %s, session %s)%s",
                    problem.kind,
                    f" {problem.status}" if problem.status else "",
                    problem.event_id,
                    problem.session_id,
                    f": {problem.detail}",
                )
            if self.on_error is not None:
                self.on_error(problem)
        except Exception:  # a faulty on_error must not break the sender either
            log.exception("contextview: on_error raised")

    @property
    def dead_letter_path(self) -> str | None:
        """The file where events the server refused for good are set aside (with a spool)."""
        return str(self._spool.dead_letter_path) if self._spool is not None else None

    @property
    def stats(self) -> dict[str, int]:
        """Counters, plus what is still waiting (in memory and on disk)."""
        out = dict(vars(self.counters))
        out["waiting"] = self._enqueued - self._finished
        return out

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until everything recorded so far is answered; False on timeout."""
        try:
            if self._thread is None:
                return self._enqueued == self._finished
            target = self._enqueued
            deadline = None if timeout is None else time.monotonic() + timeout
            self._wake.set()
            with self._flushed:
                while self._finished < target:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._flushed.wait(0.05 if left is None else min(left, 0.05))
                    self._wake.set()
            return True
        except Exception as exc:
            self._internal(exc)
            return False

    def close(self, timeout: float | None = None) -> None:
        """Flush for up to `timeout` (default `exit_timeout`), then stop.

        What is still unsent goes to the spool if there is one, else is dropped.
        """
        if self._closed:
            return
        timeout = self.exit_timeout if timeout is None else timeout
        start = time.monotonic()
        self.flush(timeout)
        self._closed = True
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(max(0.5, timeout - (time.monotonic() - start)))
        if thread is None or thread.is_alive():
            # The sender is stuck in a request (or never ran): save what we can from here.
            self._shutdown()
        if self._http is not None:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ sender thread

    def _run(self) -> None:
        try:
            # Below the agent's threads when CPUs are short (Linux: a thread is a task).
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        except (AttributeError, OSError):
            pass
        while True:
            try:
                busy = self._cycle()
            except Exception as exc:  # keep the sender alive whatever went wrong
                self._internal(exc)
                busy = False
                time.sleep(self.flush_interval)
            if self._stop.is_set():
                break
            if not busy:
                wait = self.flush_interval
                if self._retry_at > time.monotonic():
                    wait = min(wait, max(0.01, self._retry_at - time.monotonic()))
                self._wake.wait(wait)
                self._wake.clear()
        self._shutdown()

    def _cycle(self) -> bool:
        """One round of work; True if there may be more to do at once."""
        with self._state:
            if self._exit_spilled:
                return False
            self._drain_records()
        busy = False
        if time.monotonic() >= self._retry_at:
            # Acknowledgements first: small, and the engineer is watching for them.
            self._service_acks()
            busy = self._send_next()
            self._service_control()
        self._notify()
        return busy

    def _notify(self) -> None:
        with self._flushed:
            self._flushed.notify_all()

    def _finish(self, n: int = 1) -> None:
        self._finished += n

    def _finish_event(self, pending: Pending) -> None:
        if not pending.foreign:
            self._finished += 1

    def _drain_records(self) -> None:
        while self._records:
            record = self._records.popleft()
            try:
                pending = self._encode(record)
            except Exception as exc:
                self._internal(exc, record[1].id)
                self._lose(1)
                continue
            if pending is None:
                continue
            if not self._room_for(pending):
                self._lose(1)
                self._report(
                    Problem(
                        "dropped",
                        "memory buffer full and no spool to spill to",
                        pending.event_id,
                        pending.session_id,
                    )
                )
                # The mirror counted on this event; it must not run ahead of the server.
                self._desync(record[1])
                continue
            self._mem.append(pending)
            self._mem_count(pending, +1)
        self._spill_if_needed()

    def _mem_count(self, pending: Pending, sign: int) -> None:
        """Account for an event entering (+1) or leaving (-1) the memory buffer.

        What it weighed when it entered is what leaves, though expanding it
        since may have changed its weight.
        """
        if sign > 0:
            pending.counted = pending.weight
            self._mem_bytes += pending.counted
        else:
            self._mem_bytes -= pending.counted
            pending.counted = 0

    def _room_for(self, pending: Pending) -> bool:
        if self._spool is not None:
            return True
        return (
            len(self._mem) < self.max_buffer_events
            and self._mem_bytes + pending.weight <= self.max_buffer_bytes
        )

    def _spill_if_needed(self) -> None:
        if self._spool is None:
            return
        spill: list[Pending] = []
        while self._mem and (
            len(self._mem) > self.max_buffer_events or self._mem_bytes > self.max_buffer_bytes
        ):
            pending = self._mem.popleft()
            self._mem_count(pending, -1)
            spill.append(pending)
        if spill:
            self._to_spool(spill)

    def _to_spool(self, events: list[Pending]) -> None:
        assert self._spool is not None
        try:
            self._spool.write(events)
            self.counters.spooled += len(events)
        except OSError as exc:
            self._report(Problem("spool", f"could not write the spool: {exc}"))
            self._lose(len(events))

    def _event_id(self) -> str:
        return f"{self._run_id}-{next(self._seq)}"

    def _encode(self, record: tuple[Any, ...]) -> Pending | None:
        kind, session = record[0], record[1]
        session._last_active = time.monotonic()
        if kind == "step":
            # The step's draft is made here, off the agent's thread.
            draft: StepDraft = record[2]()
            if session._wire is None:
                session._wire = SessionWire(session.id)
            wire: SessionWire = session._wire
            pending, error = wire.encode_step(draft, self._event_id())
            if error is not None:
                log.debug(
                    "contextview: step %s of %s will be refused: %s", draft.index, session.id, error
                )
                pending.expand = None
                pending.predicted = True
            return pending
        if kind == "session":
            return session_event(self._event_id(), record[2], session.id, record[3])
        if kind == "end":
            pending = end_event(self._event_id(), record[2], session.id, record[3], record[4])
            # An ended session's mirror goes: a later step (allowed) starts a fresh one.
            session._wire = None
            return pending
        raise ValueError(f"unknown record {kind!r}")

    def _desync(self, session: Session | None) -> None:
        """The server lacks something the mirror counted on: resend in full from now on."""
        if session is None:
            return
        if session._wire is not None:
            session._wire.reset()
        for pending in itertools.chain(self._mem, self._replay):
            if pending.session_id == session.id and pending.attempts == 0:
                if pending.expand_all() and not pending.spooled:
                    self._mem_count(pending, -1)
                    self._mem_count(pending, +1)

    # ------------------------------------------------------------ sending

    def _client(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(
                base_url=self.url,
                headers={
                    "Authorization": f"Bearer {self._key}",
                    "User-Agent": "contextview-sdk/1",
                },
                timeout=httpx.Timeout(self._timeout, connect=min(5.0, self._timeout)),
                transport=self._transport,
            )
        return self._http

    def _source(self) -> deque[Pending] | None:
        """Where the oldest unsent events are: the spool's oldest segment, else memory."""
        if self._replay:
            return self._replay
        if self._replay_path is not None:
            assert self._spool is not None
            self._spool.remove(self._replay_path)
            self._replay_path = None
        if self._spool is not None and self._spool.has_segments():
            with self._state:
                loaded = self._spool.read_oldest()
            if loaded is not None:
                self._replay_path, events = loaded
                self._replay.extend(events)
                if self._replay:
                    return self._replay
                return self._source()
        return self._mem if self._mem else None

    def _take(self, source: deque[Pending]) -> list[Pending]:
        return list(itertools.islice(source, self._cut.take(len(p.data) for p in source)))

    def _send_next(self) -> bool:
        source = self._source()
        if source is None:
            return False
        batch = self._take(source)
        for pending in batch:
            # Counted as sent once from here: a later _desync must not rewrite it, since
            # the server may already hold it (and would answer 409 to other content).
            if pending.attempts:
                self.counters.retried += 1
            pending.attempts += 1
        body = batch_body(p.data for p in batch)
        answer = self._judged(batch, self._post_ingest(body))
        with self._state:
            if self._exit_spilled:
                return False
            return self._settle(source, batch, answer)

    def _judged(self, batch: list[Pending], answer: _Answer) -> _Answer:
        """The answer, or what it means when the server failed on what this batch carries.

        A 500 for one event, or a batch cut off or timed out (gateways answer 502
        or 504 for a worker that died on it), is the batch's fault only if the
        server takes an empty batch right after (which reads the key from the
        database too). Then a 500 is refused like any other, and a batch cut off
        is split like a 500, down to one event, which is set aside once that
        happened to it alone `STUCK_AFTER` times. Otherwise the server is failing
        whatever it gets, and the batch waits for it like any outage.
        """
        status = answer.status
        failed = len(batch) == 1 and status is not None and status >= 500
        failed = failed and status not in RETRYABLE
        cut_off = answer.reached and (status is None or status in (502, 504))
        if not (failed or cut_off):
            return answer
        if self._post_ingest(b'{"batch":[]}').status != 207:
            return answer._replace(status=None)  # retried like an outage
        if cut_off:
            if len(batch) == 1:
                batch[0].strikes += 1
                if batch[0].strikes < STUCK_AFTER:
                    return answer
            why = f"{answer.error or status} (while the server takes an empty batch)"
            return answer._replace(status=500, error=why)
        return answer

    def _post_ingest(self, body: bytes) -> _Answer:
        headers = {"Content-Type": "application/json"}
        raw_size = len(body)
        if self.gzip:
            body = gzip_module.compress(body, compresslevel=5)
            headers["Content-Encoding"] = "gzip"
        self.counters.requests += 1
        self.counters.bytes_raw += raw_size
        self.counters.bytes_sent += len(body)
        try:
            response = self._client().post("/api/v1/ingest", content=body, headers=headers)
        except httpx.HTTPError as exc:
            # Not connecting at all says nothing of what the request carried.
            reached = not isinstance(
                exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout
            )
            return _Answer(None, None, None, f"{type(exc).__name__}: {exc}", reached)
        retry_after = _retry_after(response.headers.get("Retry-After"))
        if response.status_code == 207:
            try:
                return _Answer(207, response.json(), None, "")
            except ValueError:
                return _Answer(502, None, retry_after, "207 with a body that is not JSON")
        return _Answer(response.status_code, None, retry_after, _error_of(response))

    def _settle(self, source: deque[Pending], batch: list[Pending], reply: _Answer) -> bool:
        status, answer, error = reply.status, reply.body, reply.error
        if status is None or status in RETRYABLE:
            self._streak += 1
            self._retry_at = time.monotonic() + self._delay(reply.retry_after)
            return False
        self._streak = 0
        if self._cut.split(status, len(batch)):
            # Refused whole (500, 400 for the envelope, 413 too big together): the
            # first half goes, then the rest (`BatchCut`).
            self.counters.splits += 1
            return True
        self._cut.answered(len(batch))
        keep: list[Pending] = []
        if status == 207:
            results = answer.get("results") if isinstance(answer, dict) else None
            if not isinstance(results, list) or len(results) != len(batch):
                results = [{"status": 502, "error": "answer without one result per event"}] * len(
                    batch
                )
            for pending, result in zip(batch, results, strict=True):
                if not self._settle_event(pending, result if isinstance(result, dict) else {}):
                    keep.append(pending)
            directives = answer.get("directives") if isinstance(answer, dict) else None
            if isinstance(directives, list):
                # Handled outside the state lock: a callback may do anything, even flush.
                self._incoming.extend(directives)
        else:
            # Refused whole: the key, URL or encoding (401, 403, 404, 415), or this
            # event alone (too big, or failing the server).
            for pending in batch:
                self._reject(pending, status, error)
        self._set_aside()
        # Finished events leave the front of the queue; the rest stay first, in order.
        for _ in batch:
            gone = source.popleft()
            if source is self._mem:
                self._mem_count(gone, -1)
        for pending in reversed(keep):
            source.appendleft(pending)
            if source is self._mem:
                self._mem_count(pending, +1)
        if keep:
            self._retry_at = time.monotonic() + self._delay(None)
        return not keep

    def _settle_event(self, pending: Pending, result: dict[str, Any]) -> bool:
        """Record what the server said of one event; False if it must be sent again."""
        code = result.get("status")
        if code in (200, 201):
            self.counters.sent += 1
            if result.get("duplicate"):
                self.counters.duplicates += 1
            self._finish_event(pending)
            return True
        if code in RETRYABLE or not isinstance(code, int):
            return False  # the server could not judge it now (or said nothing readable)
        error = str(result.get("error") or "")
        if NEVER_RECORDED in error and not pending.expanded:
            # What an id alone stood for never reached the server (an earlier event
            # was refused): send this one again with every message in full.
            session = self._sessions.get(pending.session_id)
            if session is not None:
                self._desync(session)
            if pending.expand_all():
                return False
        self._reject(pending, code if isinstance(code, int) else None, error)
        return True

    def _reject(self, pending: Pending, status: int | None, error: str) -> None:
        """An event the server refused for good: never sent again (`_set_aside` keeps it)."""
        self._count_dropped(1)
        self.counters.rejected += 1
        self._finish_event(pending)
        if pending.kind == "step" and not pending.predicted:
            # The mirror took this step's messages as recorded: they are not. Steps
            # after it go in full, and those already sent against it come back as
            # "never recorded" and go again in full (`_settle_event`).
            self._desync(self._sessions.get(pending.session_id))
        self._refused.append((pending, status, error))

    def _set_aside(self) -> None:
        """The events just refused to the dead-letter file (one write), each reported once."""
        refused, self._refused = self._refused, []
        if not refused:
            return
        where = None
        if self._spool is not None:
            at = rfc3339(time.time())
            lines = [dead_letter_line(p, status, error, at) for p, status, error in refused]
            try:
                self._spool.set_aside(lines)
            except OSError as exc:
                self._report(Problem("spool", f"could not write the dead-letter file: {exc}"))
            else:
                self.counters.dead_lettered += len(lines)
                where = self.dead_letter_path
        for pending, status, error in refused:
            self._report(
                Problem("rejected", error, pending.event_id, pending.session_id, status, where)
            )

    def _delay(self, retry_after: float | None) -> float:
        if retry_after is not None:
            wait = min(retry_after, MAX_RETRY_AFTER_S)
            return wait + random.uniform(0, min(1.0, wait * 0.1))
        ceiling = min(self.backoff_max, self.backoff_base * 2.0 ** max(0, self._streak - 1))
        # "Equal jitter": at least half the exponential delay, so waits still grow.
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    # ------------------------------------------------------------ control channel

    def _receive_directives(self, directives: Iterable[Any]) -> None:
        for raw in directives:
            if not isinstance(raw, dict):
                continue
            session = self._sessions.get(str(raw.get("session_id")))
            did = str(raw.get("id"))
            if session is None or did in session._seen_directives:
                continue
            session._seen_directives.add(did)
            targets = raw.get("targets")
            if not isinstance(targets, list):
                targets = []
            step = raw.get("step")
            directive = Directive(
                id=did,
                session_id=session.id,
                type=str(raw.get("type")),
                mode=raw.get("mode") if isinstance(raw.get("mode"), str) else None,
                targets=tuple(str(t) for t in targets),
                step=step if isinstance(step, int) else None,
                raw=dict(raw),
            )
            if directive.type == "restore" and session.on_restore is not None:
                self._prefetch.append((session, directive))
            else:
                self._deliver(session, directive)

    def _deliver(self, session: Session, directive: Directive) -> None:
        if session.deliver == "thread":
            session._apply(directive)
        else:
            session._inbox.append(directive)

    def _service_acks(self) -> None:
        now = time.monotonic()
        for _ in range(len(self._acks)):
            ack = self._acks.popleft()
            if ack.due > now:
                self._acks.append(ack)
                continue
            if not self._send_ack(ack):
                ack.attempts += 1
                if ack.attempts >= 20:
                    self._report(
                        Problem(
                            "ack", f"gave up acknowledging {ack.directive_id}", None, ack.session_id
                        )
                    )
                else:
                    ack.due = now + min(60.0, 0.5 * 2**ack.attempts)
                    self._acks.append(ack)

    def _service_control(self) -> None:
        now = time.monotonic()
        if self._incoming:
            incoming, self._incoming = self._incoming, []
            self._receive_directives(incoming)
        while self._prefetch:
            session, directive = self._prefetch.popleft()
            self._deliver(session, self._with_originals(directive))
        if self.poll_interval <= 0:
            return
        try:
            sessions = list(self._sessions.values())
        except RuntimeError:  # an agent thread started a session meanwhile; next round
            sessions = []
        polled = 0
        for session in sessions:
            idle = now - session._last_active
            if (
                session.ended
                or not session.handles_directives
                or now < session._next_poll
                # A session that just sent events hears of directives in the answer.
                or idle < self.poll_interval
                or idle > 1800
            ):
                continue
            session._next_poll = now + self.poll_interval
            self._poll_control(session)
            polled += 1
            if polled >= 20:  # the rest next round: sending must not wait on polls
                break

    def _send_ack(self, ack: _Ack) -> bool:
        path = (
            f"/api/v1/sessions/{quote(ack.session_id, safe='')}/control/"
            f"{quote(ack.directive_id, safe='')}/ack"
        )
        try:
            response = self._client().post(
                path, json={"status": ack.status, "detail": ack.detail}, timeout=5.0
            )
        except httpx.HTTPError:
            return False
        if response.status_code in RETRYABLE:
            return False
        if response.status_code not in (200, 409):
            self._report(
                Problem("ack", _error_of(response), None, ack.session_id, response.status_code)
            )
        return True

    def _poll_control(self, session: Session) -> None:
        params = {"after": session._control_cursor} if session._control_cursor else None
        try:
            response = self._client().get(
                f"/api/v1/sessions/{quote(session.id, safe='')}/control", params=params, timeout=5.0
            )
        except httpx.HTTPError:
            return
        if response.status_code != 200:
            return  # 404 until the session's first event is stored
        try:
            answer = response.json()
        except ValueError:
            return
        if isinstance(answer.get("cursor"), str):
            session._control_cursor = answer["cursor"]
        if isinstance(answer.get("directives"), list):
            self._receive_directives(answer["directives"])

    def _with_originals(self, directive: Directive) -> Directive:
        """The directive with the originals it restores, as the server archived them."""
        try:
            response = self._client().get(
                f"/api/v1/sessions/{quote(directive.session_id, safe='')}/archive", timeout=5.0
            )
            entries = response.json().get("originals", []) if response.status_code == 200 else []
        except (httpx.HTTPError, ValueError, AttributeError):
            entries = []
        wanted = set(directive.targets)
        originals: dict[str, Message] = {}
        for entry in entries:
            # Entries come in step order: the last fold of an id is the one to restore.
            if isinstance(entry, dict) and entry.get("id") in wanted:
                message = entry.get("message")
                if isinstance(message, dict):
                    originals[entry["id"]] = {
                        k: v for k, v in message.items() if k in ("id", "role", "content", "tool")
                    }
        return dataclasses.replace(directive, originals=originals)

    # ------------------------------------------------------------ exit

    def _shutdown(self) -> None:
        """Keep what is unsent: to the spool if there is one, else count it dropped."""
        with self._state:
            if self._exit_spilled:
                return
            self._exit_spilled = True
            try:
                self._drain_records()
            except Exception as exc:
                self._internal(exc)
            left = list(self._mem)
            self._mem.clear()
            self._mem_bytes = 0
            if left:
                if self._spool is not None:
                    self._to_spool(left)
                else:
                    self._lose(len(left))
                    self._report(Problem("dropped", f"{len(left)} events unsent at exit"))
            # A segment being replayed stays on disk whole; the next client resends it.
            self._replay.clear()
            if self._spool is not None:
                self._spool.close()
        self._notify()


def _error_of(response: httpx.Response) -> str:
    """One line saying why the server refused a request: its ``error``, else its status."""
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("error") or answer.get("detail"), str):
        text = str(answer.get("error") or answer.get("detail"))
    elif "html" in response.headers.get("content-type", ""):
        text = ""  # an error page: its status says as much
    else:
        text = response.text
    text = " ".join(text.split())[:500]
    head = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
    return f"{head}: {text}" if text else head


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _after_fork(ref: weakref.ReferenceType[Client]) -> None:
    # The child has no sender thread and a copy of the parent's queue (which the
    # parent sends): start afresh.
    client = ref()
    if client is not None:
        client._setup()


def _close_at_exit(ref: weakref.ReferenceType[Client]) -> None:
    client = ref()
    if client is not None:
        try:
            client.close()
        except Exception:
            log.exception("contextview: closing at exit failed")
