"""What goes on the wire for one session: events whose messages go by id when they can.

The server resolves a message sent as ``{"id": X}`` to the latest content the
session recorded for X. Rather than guess what that is, the SDK runs the same
derivation the server runs (``contextview.core.session.SessionWalk``, plain
Python) on every step it sends, and keeps a mirror of the session's latest
messages and archive. A message goes by id alone exactly when the mirror holds
an identical message under that id, so the server resolves it to what the
agent had. The mirror may lag the server (then content is resent, costing
bytes only) but must never run ahead of it: a step the server rejects resets
it (`SessionWire.reset`).

A step's context also goes against the step before it: where it repeats, in
order, messages of that step's after context that would go by id alone, the
stretch goes as one ``{"$run": [start, count]}`` element and the observation
names its base step (``"$base": index``). An agent that appends to its
context sends a step as one run and what it added. Only the step encoded just
before serves as a base: its event goes first, so the server has stored it, or
refused it, and then answers that the base "was never recorded" and the step
goes again in full (`Pending.expand_all`).

Everything here runs on the sender thread, never on the agent's.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import repeat
from typing import Any

from contextview.core.apply import StepResult
from contextview.core.errors import InputError
from contextview.core.model import Message as CoreMessage
from contextview.core.runs import BASE_KEY, RUN_KEY, run_element, runs_in
from contextview.core.session import SessionWalk
from contextview.sdk.ops import infer_ops

Message = dict[str, Any]

# One encoder for every event: compact, and UTF-8 as is (Chinese text would
# triple in size as \u escapes). Anything json cannot encode is sent as its str.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str)
# For text UTF-8 cannot hold (a lone surrogate: a string cut inside an emoji): as
# \u escapes, valid JSON that the server judges like any other text.
_ASCII_ENCODER = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), default=str)

# `Pending.expand`'s list name for the messages a run stands for.
RUN = "run"

# A batch's most events and bytes by default (the server takes 1000 and 20 MiB).
BATCH_EVENTS = 500
BATCH_BYTES = 4 << 20
# Whole-request refusals that say nothing of the events in it (the key, the URL,
# the encoding): every part of the batch would get the same, so it is not split.
REFUSES_THE_REQUEST = frozenset({401, 403, 404, 405, 415})


def encode_json(value: Any) -> bytes:
    text = _ENCODER.encode(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _ASCII_ENCODER.encode(value).encode("ascii")


def batch_body(events: Iterable[bytes]) -> bytes:
    """The ingest request's body for events encoded by `encode_json`."""
    return b'{"batch":[' + b",".join(events) + b"]}"


class BatchCut:
    """How many of the events waiting go in the next batch, weighed as they are sent.

    A batch takes events in order while it holds fewer than `events` of them and
    its body (`batch_body`) stays within `size` bytes; one event always goes,
    however big. A batch the server refuses whole (500, 400 for the envelope, 413
    too big together) goes again in halves, halving again whatever is refused,
    until the events at fault stand alone and the others are through.
    """

    def __init__(self, events: int = BATCH_EVENTS, size: int = BATCH_BYTES) -> None:
        self.events = max(1, events)
        self.size = size
        self.cap = self.events
        # How many events at the front hold one the server refuses whole.
        self.suspect = 0

    def take(self, sizes: Iterable[int]) -> int:
        """How many events go, of those waiting whose encoded sizes are `sizes`."""
        count = total = 0
        for size in sizes:
            if count and (count >= self.cap or total + size > self.size):
                break
            count += 1
            total += size + 1
        return count

    def full(self, count: int, total: int) -> bool:
        """Whether `count` events of `total` bytes (each plus one) fill the next batch:
        reading one more event cannot change what `take` says."""
        return count > self.cap or total > self.size

    def split(self, status: int, count: int) -> bool:
        """Whether the batch of `count` events answered `status` goes again in halves."""
        if status == 207 or status in REFUSES_THE_REQUEST or count <= 1:
            return False
        self.suspect = count
        self.cap = (count + 1) // 2
        return True

    def answered(self, count: int) -> None:
        """A batch of `count` events was answered for good: back to full batches once
        the events refused whole are through."""
        self.suspect -= count
        if self.suspect <= 0:
            self.suspect = 0
            self.cap = self.events


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class Pending:
    """One encoded event waiting for the server's answer."""

    event_id: str
    session_id: str
    data: bytes
    # Messages sent by id alone: (list name, position, full message), so the event
    # can be resent with content if the server no longer has what the id meant.
    # List name "run": one of the messages, in order, that the run element at
    # that position of ``obs.messages`` stands for.
    expand: list[tuple[str, int, Message]] | None = None
    kind: str = "step"
    attempts: int = 0
    expanded: bool = False
    # read back from the spool
    spooled: bool = False
    # spooled by an earlier process: not among the events this client counts
    foreign: bool = False
    # the local derivation already refused it: its refusal says nothing new
    predicted: bool = False
    # its weight when it entered the client's memory buffer
    counted: int = 0
    # times it alone was cut off or timed out while the server answered otherwise
    strikes: int = 0

    @property
    def weight(self) -> int:
        """Memory it holds, roughly: its bytes and a reference per message sent by id."""
        return len(self.data) + 64 * len(self.expand or ())

    def expand_all(self) -> bool:
        """Put content back in every message sent by id alone or in a run.

        The runs give way to the messages they stand for, and the observation
        loses its ``$base``. False if there was nothing to do.
        """
        if not self.expand:
            return False
        event = json.loads(self.data)
        body = event["body"]
        runs: dict[int, list[Message]] = {}
        for where, position, message in self.expand:
            if where == RUN:
                runs.setdefault(position, []).append(message)
            else:
                body[where]["messages"][position] = message
        if runs:
            obs = body["obs"]
            messages: list[Any] = []
            for position, element in enumerate(obs["messages"]):
                messages.extend(runs.get(position, (element,)))
            obs["messages"] = messages
            if not any(type(m) is dict and RUN_KEY in m for m in messages):
                obs.pop(BASE_KEY, None)
        self.data = encode_json(event)
        self.expand = None
        self.expanded = True
        return True


def to_message(raw: Any) -> Message:
    """A message dict from whatever the agent holds (dict, pydantic model, dataclass)."""
    if isinstance(raw, dict):
        return dict(raw)
    dump = getattr(raw, "model_dump", None)
    if callable(dump):
        return dict(dump(exclude_none=True))
    if hasattr(raw, "__dict__"):
        return {k: v for k, v in vars(raw).items() if not k.startswith("_")}
    return {"role": "other", "content": str(raw)}


def _content_key(m: Message) -> tuple[Any, ...]:
    content = m.get("content")
    if not isinstance(content, str | None):
        content = encode_json(content)
    return (m.get("role"), content, m.get("tool_call_id"), m.get("name"))


class IdAssigner:
    """Ids for messages that come without one (OpenAI-style lists).

    The same dict object keeps its id from step to step, so a message edited in
    place reads as a rewrite; so does a tool message answering the same
    ``tool_call_id``. Failing that, a message equal in role and content to one
    of the last step's takes its id (agents that rebuild their list each call);
    anything else gets the next ``m<n>``. Only the last step's messages
    are remembered, holding their objects so that their addresses cannot be
    reused by new ones.
    """

    def __init__(self) -> None:
        self._by_object: dict[int, tuple[Any, str]] = {}
        self._by_content: dict[tuple[Any, ...], list[str]] = {}
        self._by_call: dict[tuple[Any, Any], str] = {}
        self._next = 0
        # The last step's lists when every message had an id: indexed only if a
        # later step brings messages without one (most agents never do).
        self._unindexed: Sequence[tuple[Sequence[Any], list[Message]]] | None = None

    def assign(self, lists: Sequence[tuple[Sequence[Any], list[Message]]]) -> None:
        if not any(None in map(dict.get, copies, repeat("id")) for _, copies in lists):
            self._unindexed = lists
            return
        if self._unindexed is not None:
            self._walk(self._unindexed)  # ids all given: this only indexes that step
            self._unindexed = None
        self._walk(lists)

    def _walk(self, lists: Sequence[tuple[Sequence[Any], list[Message]]]) -> None:
        """Give ids where they are missing, and index the step for the next one."""
        by_object: dict[int, tuple[Any, str]] = {}
        by_content: dict[tuple[Any, ...], list[str]] = {}
        by_call: dict[tuple[Any, Any], str] = {}
        for originals, copies in lists:
            used: set[str] = {str(m["id"]) for m in copies if m.get("id") is not None}
            for k, (original, message) in enumerate(zip(originals, copies, strict=True)):
                if message.get("id") is None:
                    mid = self._pick(original, message, used, by_object, by_call, by_content)
                    # A new dict: the one in the list may be the agent's own (copy=False).
                    message = copies[k] = {**message, "id": mid}
                    used.add(mid)
                mid = str(message["id"])
                by_object[id(original)] = (original, mid)
                by_content.setdefault(_content_key(message), []).append(mid)
                if message.get("tool_call_id"):
                    by_call[(message.get("role"), message["tool_call_id"])] = mid
        self._by_object = by_object
        self._by_content = by_content
        self._by_call = by_call

    def _pick(
        self,
        original: Any,
        message: Message,
        used: set[str],
        by_object: dict[int, tuple[Any, str]],
        by_call: dict[tuple[Any, Any], str],
        by_content: dict[tuple[Any, ...], list[str]],
    ) -> str:
        # This step's lists first (before, then after), then the last step's.
        for known in (by_object.get(id(original)), self._by_object.get(id(original))):
            if known is not None and known[0] is original and known[1] not in used:
                return known[1]
        call = message.get("tool_call_id")
        if call:
            for calls in (by_call, self._by_call):
                mid = calls.get((message.get("role"), call))
                if mid is not None and mid not in used:
                    return mid
        key = _content_key(message)
        for contents in (by_content, self._by_content):
            for mid in contents.get(key, ()):
                if mid not in used:
                    return mid
        self._next += 1
        return f"m{self._next}"


class _Lru(OrderedDict[str, CoreMessage]):
    """At most `limit` ids, the least recently recorded forgotten first."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: str, value: CoreMessage) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        if len(self) > self.limit:
            self.popitem(last=False)


@dataclass(slots=True)
class StepDraft:
    """A step as the agent recorded it, message dicts copied (made on the SDK's thread)."""

    index: int
    timestamp: float
    before: list[Any]
    before_copy: list[Message]
    after: list[Any] | None
    after_copy: list[Message] | None
    ops: list[dict[str, Any]] | None
    infer: bool
    fields: dict[str, Any]
    obs_extra: dict[str, Any] | None

    @classmethod
    def of(
        cls,
        *,
        index: int,
        timestamp: float,
        before: tuple[list[Any], list[Message]],
        after: tuple[list[Any], list[Message]] | None,
        ops: list[dict[str, Any]] | None,
        infer: bool,
        obs_extra: dict[str, Any] | None,
        mode: str | None,
        reason: Any,
        before_tokens: Any,
        after_tokens: Any,
        outcome: dict[str, Any] | None,
    ) -> StepDraft:
        """A draft from (objects, copies) snapshots and the step's own fields."""
        return cls(
            index=index,
            timestamp=timestamp,
            before=before[0],
            before_copy=before[1],
            after=after[0] if after is not None else None,
            after_copy=after[1] if after is not None else None,
            ops=ops,
            infer=infer,
            fields={
                "mode": mode,
                "reason": reason,
                "before_tokens": before_tokens,
                "after_tokens": after_tokens,
                "outcome": outcome,
            },
            obs_extra=obs_extra,
        )


class _Base:
    """A step whose after context the next step's runs may be taken from."""

    __slots__ = ("index", "after", "where")

    def __init__(self, index: int, after: list[CoreMessage]) -> None:
        self.index = index
        self.after = after
        # id -> position in `after` (ids are unique within a context)
        self.where = {m.id: position for position, m in enumerate(after)}


@dataclass
class SessionWire:
    session_id: str
    max_ids: int = 50_000
    latest: _Lru = field(init=False)
    archive: _Lru = field(init=False)
    # The session as the server walks it, on the mirror's latest and archive.
    walk: SessionWalk = field(init=False)
    ids: IdAssigner = field(default_factory=IdAssigner)
    # ids the agent's contexts lost to drops and folds (for inferring reloads)
    folded: set[str] = field(default_factory=set)
    # The step just encoded, if its derivation succeeded: the next step's base.
    base: _Base | None = field(default=None, init=False)
    # The last step's messages as parsed, by the agent's object: id(object) ->
    # (object, the copy sent, the parsed message). Only messages with content.
    parsed: dict[int, tuple[Any, Message, CoreMessage]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.latest = _Lru(self.max_ids)
        self.archive = _Lru(self.max_ids)
        self.walk = SessionWalk(latest=self.latest, archive=self.archive, keep_afters=1)

    def reset(self) -> None:
        """Forget what the server holds: the next steps send every message in full."""
        self.latest.clear()
        self.archive.clear()
        self.walk.afters.clear()
        self.base = None

    def encode_step(self, draft: StepDraft, event_id: str) -> tuple[Pending, str | None]:
        """The step as a pending event, and the local error if the server will refuse it."""
        before = draft.before_copy
        after = draft.after_copy
        lists: list[tuple[Sequence[Any], list[Message]]] = [(draft.before, before)]
        if after is not None and draft.after is not None:
            lists.append((draft.after, after))
        ops = [dict(op) for op in draft.ops] if draft.ops is not None else None
        results: list[tuple[dict[str, Any], list[Message]]] = []
        for op in ops or ():
            if isinstance(op.get("result"), dict):
                holder = [op["result"]]
                results.append((op, holder))
                lists.append((list(holder), holder))
        self.ids.assign(lists)
        for op, holder in results:
            op["result"] = holder[0]

        if ops is None and after is not None and draft.infer:
            ops = infer_ops(before, after, archived=self.folded)
        obs_in = self._known_parses(draft.before, before)
        result, send_after, error = self._derive(draft.index, obs_in, ops, after)
        if result is not None:
            self._keep_parses(draft.before, before, result.before)

        base = self.base
        if base is not None and base.index == draft.index:
            base = None  # the same index again: a step cannot be its own base
        wire_obs: list[Message] = []
        expand: list[tuple[str, int, Message]] = []
        runs = 0
        if result is not None:
            runs = self._wire_obs(before, result.before, base, wire_obs, expand)
        else:
            wire_obs = list(before)

        obs: dict[str, Any] = {"messages": wire_obs}
        obs_extra = draft.obs_extra
        if obs_extra:
            obs.update((k, v) for k, v in obs_extra.items() if k not in ("messages", BASE_KEY))
        if runs and base is not None:
            obs[BASE_KEY] = base.index
        body: dict[str, Any] = {
            "session_id": self.session_id,
            "index": draft.index,
            "obs": obs,
        }
        if ops:
            if len(ops) == 1:
                body["action"] = ops[0]
            else:
                body["actions"] = ops
        if send_after and after is not None:
            body["after"] = {"messages": self._wire_after(after, result, expand)}
        body.update((k, v) for k, v in draft.fields.items() if v is not None)
        event = {
            "id": event_id,
            "type": "step",
            "timestamp": rfc3339(draft.timestamp),
            "body": body,
        }
        if result is not None:
            self.walk.record(draft.index, result)
            for fold in result.folds:
                self.folded.update(m.id for m in fold.originals)
            if self.folded:  # empty until the agent folds something
                self.folded.difference_update(m.id for m in result.after)
            self.base = _Base(draft.index, result.after)
        else:
            self.base = None  # the server will refuse this step: nothing to build on
        pending = Pending(event_id, self.session_id, encode_json(event), expand or None)
        return pending, error

    def _wire_obs(
        self,
        before: list[Message],
        parsed_before: list[CoreMessage],
        base: _Base | None,
        wire: list[Message],
        expand: list[tuple[str, int, Message]],
    ) -> int:
        """Fill `wire` with the step's obs as sent; returns how many runs it holds.

        A message the mirror holds as it is goes by id alone, and a stretch of
        such messages found in the same order in the base step's after context
        goes as one run (when that is shorter: two messages or more). Anything
        else goes in full. Runs before the mirror takes this step's recordings.
        """
        latest_get = self.latest.get
        # Without a base no message is found in one: each goes by id alone or in full.
        base_after = base.after if base is not None else []
        where: dict[str, int] = base.where if base is not None else {}
        known: list[bool] = []  # the mirror holds it as it is: it may go by id alone
        positions: list[int | None] = []  # where the server's base holds it as it is
        for parsed in parsed_before:
            held = latest_get(parsed.id)
            same = held is parsed or held == parsed
            at = where.get(parsed.id) if same else None
            if at is not None and not (base_after[at] is held or base_after[at] == parsed):
                at = None
            known.append(same)
            positions.append(at)

        runs = {first: (start, count) for first, start, count in runs_in(positions)}
        i = 0
        while i < len(before):
            run = runs.get(i)
            if run is not None:
                start, count = run
                expand.extend((RUN, len(wire), raw) for raw in before[i : i + count])
                wire.append(run_element(start, count))
                i += count
                continue
            raw = before[i]
            if known[i]:
                expand.append(("obs", len(wire), raw))
                wire.append({"id": raw["id"]})
            else:
                wire.append(raw)
            i += 1
        return len(runs)

    def _wire_after(
        self,
        after: list[Message],
        result: StepResult | None,
        expand: list[tuple[str, int, Message]],
    ) -> list[Message]:
        """`after` with messages the step itself just recorded sent by id alone.

        Runs before the mirror takes this step's recordings: an id alone in
        `after` means what the step's obs and results recorded, else what the
        session held before.
        """
        if result is None or len(result.after) != len(after):
            return after
        here: dict[str, CoreMessage] = {m.id: m for m in result.before}
        for op in result.ops:
            if op.result is not None and op.result.partition:
                here[op.result.id] = op.result
        reloaded = set(result.reloaded)
        wire: list[Message] = []
        for position, (raw, parsed) in enumerate(zip(after, result.after, strict=True)):
            known = here.get(parsed.id) or self.latest.get(parsed.id)
            if parsed.id not in reloaded and known == parsed:
                wire.append({"id": raw["id"]})
                expand.append(("after", position, raw))
            else:
                wire.append(raw)
        return wire

    def _known_parses(self, originals: Sequence[Any], copies: list[Message]) -> list[Any]:
        """The obs with each message that is as it was last step given as parsed then.

        A message with content parses from its fields alone, so the same object
        with equal fields parses to the same message: an agent's context repeats
        itself from step to step, and only what changed is parsed again.
        """
        known = self.parsed
        if not known:
            return copies
        out: list[Any] = []
        for original, copy in zip(originals, copies, strict=True):
            hit = known.get(id(original))
            if hit is not None and hit[0] is original and hit[1] == copy:
                out.append(hit[2])
            else:
                out.append(copy)
        return out

    def _keep_parses(
        self, originals: Sequence[Any], copies: list[Message], parsed: list[CoreMessage]
    ) -> None:
        self.parsed = {
            id(original): (original, copy, message)
            for original, copy, message in zip(originals, copies, parsed, strict=True)
            if "content" in copy
        }

    def _derive(
        self,
        index: int,
        before: list[Any],
        ops: list[dict[str, Any]] | None,
        after: list[Message] | None,
    ) -> tuple[StepResult | None, bool, str | None]:
        """What the server will make of the step, and whether `after` must go with it.

        `after` is left out when the operations alone give it (the server derives
        the same); it goes along when they do not, so the server keeps the agent's
        view and flags the step ``after_mismatch``.
        """
        ops_raw: Any = ops if ops else None
        strict: StepResult | None
        strict_error: str | None
        try:
            strict = self.walk.derive(index, obs=before, ops_raw=ops_raw)
        except InputError as exc:
            strict = None
            strict_error = str(exc)
        else:
            strict_error = None
        if after is None:
            return strict, False, strict_error
        if strict is not None and _same_as_given(strict.after, after):
            return strict, False, None  # the common case, without parsing `after`
        try:
            given = self.walk.derive(index, obs=before, ops_raw=ops_raw, after_raw=after)
        except InputError as exc:
            return None, True, str(exc)
        if strict is not None and not given.after_mismatch and strict.after == given.after:
            return strict, False, None
        return given, True, None


def _same_as_given(derived: list[CoreMessage], given: list[Message]) -> bool:
    """Whether the server, given `given` as the after, would find it equal to `derived`.

    The fields the server compares (``_same_contexts``): id, role, content,
    partition (when the agent names one) and the pinned mark.
    """
    if len(derived) != len(given):
        return False
    for m, raw in zip(derived, given, strict=True):
        content = raw.get("content")
        if (
            m.id != str(raw.get("id"))
            or m.role != raw.get("role", m.role)
            or m.content != ("" if content is None else content)
            or m.partition != raw.get("partition", m.partition)
            or m.pinned != bool(raw.get("pinned", m.pinned))
        ):
            return False
    return True


def session_event(event_id: str, ts: float, session_id: str, fields: dict[str, Any]) -> Pending:
    body = {"session_id": session_id, **{k: v for k, v in fields.items() if v is not None}}
    event = {"id": event_id, "type": "session", "timestamp": rfc3339(ts), "body": body}
    return Pending(event_id, session_id, encode_json(event), kind="session")


def end_event(
    event_id: str, ts: float, session_id: str, status: str, score: float | None
) -> Pending:
    body: dict[str, Any] = {"session_id": session_id, "status": status}
    if score is not None:
        body["score"] = score
    event = {"id": event_id, "type": "session_end", "timestamp": rfc3339(ts), "body": body}
    return Pending(event_id, session_id, encode_json(event), kind="session_end")
