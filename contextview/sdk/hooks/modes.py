"""Seed 001: context modes (full, sliding, summary, rag, hybrid) over a message store.

    hook = ModeHook(session, modes=("full", "sliding", "summary", "rag", "hybrid"))
    mode = hook.mode(mode)                      # a mode set from the UI wins
    context = manager.build(mode, store, query)
    hook.record_build(mode=mode, history=store.messages, context=context,
                      immutable_items=store.immutable_items, snapshot=store.mode_snapshot)

or `wrap_build(manager, session)`, which does the three lines above around
``manager.build(mode, state, query)``.

Each build is one step. Its ``before`` is what the model saw last time plus
what arrived since (new history messages, newly retrieved passages); its
``after`` is the built context. The operations between them are inferred:
messages the mode left out are dropped, a summary stands for what it replaced,
an old message brought back (rag) is a reload, and a new order is a reorder.
``immutable_items`` become the session's pinned texts, a message's ``scope``
its partition, and ``mode_snapshot`` goes with the observation.

A ``set_mode`` directive is applied by `mode` (unknown modes are rejected); a
``restore`` puts the originals back into every following build.

Messages need ids (the store's own): the hook follows them from build to build.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from contextview.sdk._capture import Captured
from contextview.sdk._wire import StepDraft
from contextview.sdk.client import Directive, Reject, Session
from contextview.sdk.hooks._common import Message, field_of, submit_later
from contextview.sdk.ops import infer_ops

# How scopes map to the contract's partitions; a scope not listed keeps its
# role's partition (and still rides along as a field of the message).
SCOPE_PARTITIONS: dict[str, str] = {
    "system": "system",
    "instruction": "system",
    "task": "task",
    "goal": "task",
    "memory": "memory",
    "summary": "memory",
    "reasoning": "memory",
    "tool": "tool",
    "retrieval": "retrieval",
    "reference": "retrieval",
    "knowledge": "retrieval",
    "question": "question",
}


@dataclass(slots=True)
class _Build:
    """What one build saw and made, as the agent's thread took it."""

    mode: str
    after: Captured
    arrived: Captured  # the store's messages appended since the last build
    history_count: int
    retrieved: list[Any]
    summaries: dict[str, list[str]] | None
    immutable_items: list[str] | None
    snap: dict[str, Any] | None
    query: str | None
    reason: str | None
    before_tokens: int | None
    after_tokens: int | None
    timestamp: float = field(default_factory=time.time)


def _is_summary(message: Mapping[str, Any]) -> bool:
    marks = (str(message.get("id", "")), str(message.get("scope", "")))
    return any("summ" in mark.lower() for mark in marks)


class ModeHook:
    def __init__(
        self,
        session: Session,
        *,
        modes: Iterable[str] | None = None,
        scope_partitions: Mapping[str, str] | None = None,
    ) -> None:
        self.session = session
        self.modes = set(modes) if modes is not None else None
        self.scope_partitions = dict(
            SCOPE_PARTITIONS if scope_partitions is None else scope_partitions
        )
        self.requested_mode: str | None = None
        self.restored: dict[str, Message] = {}
        self._context: list[Message] = []
        self._seen: set[str] = set()
        self._left: set[str] = set()
        self._pinned: list[str] | None = None
        # How much of the store the last build looked at, and its last message.
        self._history_mark: tuple[int, Any] = (0, None)
        if session.on_set_mode is None:
            session.on_set_mode = self.set_mode
        if session.on_restore is None:
            session.on_restore = self.restore

    def mode(self, wanted: str) -> str:
        """The mode to build with: a mode set from the UI, else `wanted`."""
        self.session.poll()
        return self.requested_mode or wanted

    def set_mode(self, directive: Directive) -> str:
        mode = directive.mode or ""
        if self.modes is not None and mode not in self.modes:
            raise Reject(f"unknown mode {mode!r}; this manager has {', '.join(sorted(self.modes))}")
        self.requested_mode = mode
        return f"building in {mode} mode from the next request"

    def restore(self, directive: Directive) -> str:
        missing = [t for t in directive.targets if t not in directive.originals]
        if missing and not all(t in self._seen for t in missing):
            raise Reject(f"no original for {', '.join(missing)}")
        by_id = {str(m.get("id")): m for m in self._context}
        for target in directive.targets:
            original = directive.originals.get(target) or by_id.get(target)
            if original is not None:
                self.restored[target] = dict(original)
        return f"{', '.join(directive.targets)} kept in every build from now on"

    def _partitioned(self, captured: Captured) -> tuple[list[Any], list[Message]]:
        originals, copies = captured.snapshot()  # fresh copies, this build's own
        for m in copies:
            scope = m.get("scope")
            if "partition" not in m and isinstance(scope, str) and scope in self.scope_partitions:
                m["partition"] = self.scope_partitions[scope]
        return originals, copies

    def record_build(
        self,
        *,
        mode: str,
        history: Sequence[Any],
        context: Sequence[Any],
        retrieved: Sequence[Any] = (),
        summaries: Mapping[str, Sequence[str]] | None = None,
        immutable_items: Sequence[str] | None = None,
        snapshot: Mapping[str, Any] | None = None,
        query: str | None = None,
        reason: str | None = None,
        before_tokens: int | None = None,
        after_tokens: int | None = None,
    ) -> list[Any]:
        """Log one build; returns the context to send the model (restored originals added).

        `history` is the store's full message list, `context` what the mode
        built from it. `retrieved` names passages that came from outside the
        store (rag); `summaries` maps a summary's id to the ids it replaces when
        the hook should not guess (it takes a new message whose id or scope
        says "summ" for a summary of what left).
        """
        try:
            return self._record(
                mode, history, context, retrieved, summaries, immutable_items, snapshot,
                query, reason, before_tokens, after_tokens,
            )  # fmt: skip
        except Exception as exc:
            self.session.client._internal(exc, self.session.id)
            return list(context)

    def _record(
        self,
        mode: str,
        history: Sequence[Any],
        context: Sequence[Any],
        retrieved: Sequence[Any],
        summaries: Mapping[str, Sequence[str]] | None,
        immutable_items: Sequence[str] | None,
        snap: Mapping[str, Any] | None,
        query: str | None,
        reason: str | None,
        before_tokens: int | None,
        after_tokens: int | None,
    ) -> list[Any]:
        # On the agent's thread: the session's fields, and what this build saw and
        # made (lists and contents); the step itself is worked out on the SDK's thread.
        if immutable_items is not None and list(immutable_items) != self._pinned:
            self._pinned = list(immutable_items)
            self.session.update(pinned=self._pinned)
        if mode != self.session.mode:
            self.session.update(mode=mode)

        built = list(context)
        if self.restored:
            built_ids = {str(field_of(m, "id")) for m in built}
            for mid, original in self.restored.items():
                if mid not in built_ids:
                    built.append(original)
        build = _Build(
            mode=mode,
            after=Captured.of(built),
            arrived=self._history_since(history),
            history_count=len(history),
            retrieved=list(retrieved),
            summaries={k: list(v) for k, v in summaries.items()} if summaries else None,
            immutable_items=list(immutable_items) if immutable_items is not None else None,
            snap=dict(snap) if snap else None,
            query=query,
            reason=reason,
            before_tokens=before_tokens,
            after_tokens=after_tokens,
        )
        submit_later(self.session, self._draft, build)
        return built

    def _history_since(self, history: Sequence[Any]) -> Captured:
        """The store's messages this hook has not looked at yet.

        The store only grows (seed 001: its messages are never edited), so only
        what was appended since the last build is taken; a store that shrank,
        or whose messages were replaced, is looked at whole again.
        """
        n, last = self._history_mark
        if n and len(history) >= n and history[n - 1] is last:
            try:
                new = list(history[n:])
            except TypeError:  # a sequence that cannot be sliced (a deque)
                new = list(islice(history, n, None))
        else:
            new = list(history)
        self._history_mark = (len(history), history[-1] if history else None)
        return Captured.of(new)

    def _draft(self, build: _Build, index: int) -> StepDraft:
        """The step of one build (on the SDK's thread, which keeps the hook's record)."""
        mode = build.mode
        after = self._partitioned(build.after)
        _, history_copies = self._partitioned(build.arrived)
        previous = self._context
        previous_ids = {str(m.get("id")) for m in previous}
        arrivals = [m for m in history_copies if str(m.get("id")) not in self._seen]
        arrived = {str(m.get("id")) for m in arrivals}
        retrieved_ids = {str(field_of(m, "id")) for m in build.retrieved}
        summaries = build.summaries
        summary_ids = set(summaries or ())
        for m in after[1]:
            mid = str(m.get("id"))
            if (
                mid in previous_ids
                or mid in self._seen
                or mid in self._left  # back from the archive: a reload, not an input
                or mid in arrived
            ):
                continue
            if mid in summary_ids or (mid not in retrieved_ids and _is_summary(m)):
                continue  # made by the mode: a result, not an input
            # Retrieved passages, pinned items put back: inputs the mode received.
            arrivals.append(m)
            arrived.add(mid)
        before_copies = previous + arrivals
        before = (list(before_copies), before_copies)

        ops: list[dict[str, Any]]
        if summaries:
            after_by_id = {str(m.get("id")): m for m in after[1]}
            ops = [
                {
                    "action": "summarize",
                    "targets": list(targets),
                    "result": after_by_id[sid],
                    "reason": f"{mode} mode: summary of older messages",
                }
                for sid, targets in summaries.items()
                if sid in after_by_id
            ]
            folded = {t for targets in summaries.values() for t in targets}
            rest = [m for m in before_copies if str(m.get("id")) not in folded]
            staged = rest + [after_by_id[s] for s in summaries if s in after_by_id]
            ops += infer_ops(staged, after[1], archived=self._left)
        else:
            ops = infer_ops(before_copies, after[1], archived=self._left, reason=f"{mode} mode")
        for op in ops:
            op.setdefault("reason", f"{mode} mode")

        obs: dict[str, Any] = {
            "mode_snapshot": build.snap
            or {
                "mode": mode,
                "history_messages": build.history_count,
                "context_messages": len(after[1]),
            }
        }
        if build.immutable_items is not None:
            obs["immutable_items"] = build.immutable_items
        if build.query is not None:
            obs["query"] = build.query
        now_ids = {str(m.get("id")) for m in after[1]}
        self._left |= {str(m.get("id")) for m in before_copies} - now_ids
        self._left -= now_ids
        self._seen |= {str(m.get("id")) for m in history_copies}
        self._context = after[1]
        return StepDraft.of(
            index=index,
            timestamp=build.timestamp,
            before=before,
            after=after,
            ops=ops,
            infer=False,
            obs_extra=obs,
            mode=mode,
            reason=build.reason or f"built in {mode} mode",
            before_tokens=build.before_tokens,
            after_tokens=build.after_tokens,
            outcome=None,
        )


def _messages_of(result: Any) -> tuple[list[Any], Any]:
    """The built messages and meta out of whatever a manager's build returns."""
    if isinstance(result, list):
        return result, None
    if isinstance(result, Mapping):
        for key in ("messages", "prompt", "context"):
            if isinstance(result.get(key), list):
                return result[key], result.get("meta")
    for key in ("messages", "prompt", "context"):
        value = getattr(result, key, None)
        if isinstance(value, list):
            return value, getattr(result, "meta", None)
    raise TypeError(f"cannot find the built messages in a {type(result).__name__}")


def wrap_build(manager: Any, session: Session, **options: Any) -> ModeHook:
    """Log every ``manager.build(mode, state, query)`` as a step; returns the hook.

    ``state`` is the MessageStore (``.messages``, and ``.immutable_items`` and
    ``.mode_snapshot`` when it has them); ``build`` may return the message list,
    or a dict or object with ``messages`` (or ``prompt``) and ``meta``.
    """
    policies = getattr(manager, "policies", None)
    if "modes" not in options and isinstance(policies, Mapping) and policies:
        options["modes"] = list(policies)
    hook = ModeHook(session, **options)
    original = manager.build

    def build(mode: str, state: Any, query: Any = None, *args: Any, **kwargs: Any) -> Any:
        mode = hook.mode(mode)
        result = original(mode, state, query, *args, **kwargs)
        try:
            messages, meta = _messages_of(result)
            history = state if isinstance(state, list) else getattr(state, "messages", [])
            snap = getattr(state, "mode_snapshot", None)
            snap = dict(snap) if isinstance(snap, Mapping) else {"mode": mode}
            if isinstance(meta, Mapping):
                snap.setdefault("meta", dict(meta))
            built = hook.record_build(
                mode=mode,
                history=history,
                context=messages,
                immutable_items=getattr(state, "immutable_items", None),
                snapshot=snap,
                query=query if isinstance(query, str) else None,
            )
            if len(built) != len(messages):
                messages[:] = built  # restored originals join what goes to the model
        except Exception as exc:
            session.client._internal(exc, session.id)
        return result

    manager.build = build
    return hook
