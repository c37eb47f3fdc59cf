"""Seed 000: a ContextManager with observe / step / execute (summarize, drop, reload).

    hook = watch_manager(cm, session)   # cm's own code is untouched
    action = cm.step(message)           # logged: obs as the policy saw it, and the action
    cm.execute(action)                  # logged: what the action did to active_context

`watch_manager` shadows ``step`` and ``execute`` on the instance (never on its
class) with wrappers that call the originals. A ``step`` is sent once its
action is executed, with the context before and after, the action in the
contract's named form (its result is read off the context: the summary the
manager wrote), the manager's own ``used_tokens`` before and after, and the
observation's other fields (``summary_index``, ``max_tokens``, the last
actions). Changes the action does not explain (a ``_compact_if_needed`` of its
own, say) are logged as inferred operations. An action that is never executed
is logged as ``keep`` with the proposal in ``params``.

A ``restore`` directive reloads the originals through the manager's own
``execute(reload)`` (the server's copy goes into ``cm.archive`` first when the
manager summarized rather than archived them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from contextview.core.model import OP_NAMES, REPLACING_OPS
from contextview.sdk._capture import Captured, capture_function
from contextview.sdk._wire import StepDraft
from contextview.sdk.client import Directive, Reject, Session
from contextview.sdk.hooks._common import Message, field_of, submit_later
from contextview.sdk.ops import infer_ops

# A step's tokens before, when the manager's observation did not give them:
# counted on the SDK's thread.
_UNCOUNTED = object()


class _Pending:
    """A step() whose action has not been executed yet."""

    __slots__ = ("before", "action", "obs", "used", "ts")

    def __init__(self, before: Captured, action: Any, obs: dict[str, Any], used: Any, ts: float):
        self.before = before
        self.action = action
        self.obs = obs
        self.used = used
        self.ts = ts


class ManagerHook:
    def __init__(self, manager: Any, session: Session, *, capture: str = "content") -> None:
        self._capture = capture_function(capture)
        self.manager = manager
        self.session = session
        self._step = manager.step
        self._execute = manager.execute
        self._pending: _Pending | None = None
        self._last_after: Captured | None = None
        self._action_type: Callable[..., Any] | None = None
        manager.step = self.step
        manager.execute = self.execute
        if session.on_restore is None:
            session.on_restore = self.restore

    # The wrappers: the manager's behaviour first, logging around it. On the
    # agent's thread they only capture the context (its list and contents);
    # copying messages, building the operations and counting tokens happen on
    # the SDK's thread.

    def step(self, new_message: Any, *args: Any, **kwargs: Any) -> Any:
        # Directives first: a restore reloads before the policy looks at the context.
        if self.session._inbox:
            self.session.poll()
        if self._pending is not None:
            self.flush()
        action = self._step(new_message, *args, **kwargs)
        try:
            if self._action_type is None and not isinstance(action, dict):
                self._action_type = type(action)
            obs = self._observation()
            self._pending = _Pending(
                self._before(self.manager.active_context),
                action,
                obs,
                obs.get("used_tokens"),
                time.time(),
            )
        except Exception as exc:
            self.session.client._internal(exc, self.session.id)
        return action

    def execute(self, action: Any, *args: Any, **kwargs: Any) -> Any:
        pending, self._pending = self._pending, None
        if pending is not None and pending.action is not action:
            self._log_unexecuted(pending)
            pending = None
        if pending is None:
            # execute() without step(): seed 000's run function calls it so.
            try:
                before = self._before(self.manager.active_context)
                pending = _Pending(
                    before, action, self._observation(fresh=True), _UNCOUNTED, time.time()
                )
            except Exception as exc:
                self.session.client._internal(exc, self.session.id)
        try:
            return self._execute(action, *args, **kwargs)
        finally:
            if pending is not None:
                self._log_executed(pending)

    def flush(self) -> None:
        """Log a step whose action was never executed (called by the next step, or by you)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._log_unexecuted(pending)

    def detach(self) -> None:
        """Log what is pending and give the manager its own methods back."""
        self.flush()
        for name in ("step", "execute"):
            self.manager.__dict__.pop(name, None)

    # What gets logged.

    def _observation(self, fresh: bool = False) -> dict[str, Any]:
        """The observation's fields but the context, as the policy saw them (shallow).

        Taken from the action_log entry step() just wrote: the manager's own
        numbers, not recomputed. `_obs_fields` shapes them later.
        """
        log = getattr(self.manager, "action_log", None)
        obs: Any = field_of(log[-1], "obs") if log and not fresh else None
        if not isinstance(obs, dict):
            return {
                "summary_index": list(getattr(self.manager, "summary_index", None) or ()),
                "max_tokens": getattr(self.manager, "max_tokens", None),
                "last_actions": list(log[-5:]) if log else [],
            }
        fields = obs.copy()
        fields.pop("active_context", None)
        fields.pop("messages", None)
        for key, value in fields.items():
            if value.__class__ is list:
                fields[key] = value.copy()  # the manager's own list: it grows later
        return fields

    def _before(self, context: list[Any]) -> Captured:
        """The context step() left: what the last execute() captured, and what step() added."""
        if self._last_after is not None:
            return self._last_after.extended(context, self._capture)
        return self._capture(context)

    def _count(self, captured: Captured) -> int | None:
        """The manager's own count of a context (on the SDK's thread; None if it fails)."""
        estimate = getattr(self.manager, "estimate_tokens", None)
        if not callable(estimate):
            return None
        try:
            return sum(int(estimate(content)) for content in captured.contents_seen())
        except Exception:
            return None

    def _log_executed(self, pending: _Pending) -> None:
        try:
            after = self._last_after = self._capture(self.manager.active_context)
            # The action's fields as they are now (shallow); the draft, its
            # operations, reason and token count are made on the SDK's thread.
            action = _action_fields(pending.action)
            mode = self.session.mode  # now: a directive may change it before the draft is made
            submit_later(self.session, self._executed_draft, pending, after, action, mode)
        except Exception as exc:
            self.session.client._internal(exc, self.session.id)

    def _executed_draft(
        self, pending: _Pending, after: Captured, action: Any, mode: str | None, index: int
    ) -> StepDraft:
        """The draft of an executed step (on the SDK's thread)."""
        proposed = _action_dict(action)
        before = pending.before.snapshot()
        after_snap = after.snapshot()
        return StepDraft.of(
            index=index,
            timestamp=pending.ts,
            before=before,
            after=after_snap,
            ops=_ops_for(proposed, before[1], after_snap[1]),
            infer=False,
            obs_extra=_obs_fields(pending.obs),
            mode=mode,
            reason=_reason(proposed) or None,
            before_tokens=(
                self._count(pending.before) if pending.used is _UNCOUNTED else pending.used
            ),
            after_tokens=self._count(after),
            outcome=None,
        )

    def _log_unexecuted(self, pending: _Pending) -> None:
        try:
            action = _action_fields(pending.action)
            mode = self.session.mode
            submit_later(self.session, self._unexecuted_draft, pending, action, mode)
        except Exception as exc:
            self.session.client._internal(exc, self.session.id)

    def _unexecuted_draft(
        self, pending: _Pending, action: Any, mode: str | None, index: int
    ) -> StepDraft:
        """The draft of a step whose action was never executed: a keep (on the SDK's thread)."""
        proposed = _action_dict(action)
        op: dict[str, Any] = {"action": "keep"}
        reason = _reason(proposed)
        if reason:
            op["reason"] = reason
        if proposed.get("action") != "keep":
            op["params"] = {"proposed": proposed, "executed": False}
        return StepDraft.of(
            index=index,
            timestamp=pending.ts,
            before=pending.before.snapshot(),
            after=None,
            ops=[op],
            infer=False,
            obs_extra=_obs_fields(pending.obs),
            mode=mode,
            reason=reason or None,
            before_tokens=pending.used,
            after_tokens=pending.used,
            outcome=None,
        )

    def restore(self, directive: Directive) -> str:
        """Reload each target through the manager's own execute(reload)."""
        archive = getattr(self.manager, "archive", None)
        if not isinstance(archive, dict):
            raise Reject("the manager has no archive to reload from")
        present = {str(m.get("id")) for m in self.manager.active_context if isinstance(m, dict)}
        missing = []
        for target in directive.targets:
            if target in present:
                continue
            if target not in archive:
                original = directive.originals.get(target)
                if original is None:
                    missing.append(target)
                    continue
                # Summarized, not archived, by the manager: the server kept the original.
                archive[target] = dict(original)
            self.manager.execute(self._make_action("reload", target))
        if missing:
            raise Reject(f"no original to reload for {', '.join(missing)}")
        return f"reloaded {', '.join(directive.targets)}"

    def _make_action(self, name: str, target: str) -> Any:
        params = {"reason": "restore requested in contextview"}
        if self._action_type is not None:
            try:
                return self._action_type(action=name, target=target, params=params)
            except TypeError:
                pass
        return SimpleNamespace(action=name, target=target, params=params)


def _obs_fields(obs: dict[str, Any]) -> dict[str, Any]:
    """The observation as sent: ``last_actions`` keeps only the actions (each entry's
    obs holds a whole context)."""
    out: dict[str, Any] = {}
    for key, value in obs.items():
        if key == "last_actions" and isinstance(value, list):
            value = [_action_dict(field_of(entry, "action", entry)) for entry in value]
        elif isinstance(value, list):
            value = [dict(v) if isinstance(v, dict) else v for v in value]
        out[key] = value
    return out


def _ops_for(
    proposed: dict[str, Any], before: list[Message], after: list[Message]
) -> list[dict[str, Any]]:
    """The action as a contract operation, and what else changed the context.

    Changes the action does not explain (the manager's own ``_compact_if_needed``,
    say) follow as inferred operations.
    """
    op = _op(proposed, before, after)
    ops = [op]
    expected = _apply_named(before, op, after)
    if expected is not None and expected != after:
        for extra in infer_ops(expected, after):
            extra["reason"] = "not logged by the manager (inferred by the SDK)"
            ops.append(extra)
    return ops


def _op(proposed: dict[str, Any], before: list[Message], after: list[Message]) -> dict[str, Any]:
    name = str(proposed.get("action", "keep"))
    target = proposed.get("target")
    params = dict(proposed.get("params") or {})
    op: dict[str, Any] = {"action": name}
    if name not in OP_NAMES:
        op = {"action": "keep"}
        params = {"action": name, **params}
    if target not in (None, ""):
        op["target"] = str(target)
    reason = _reason(proposed)
    if reason:
        op["reason"] = reason
    params.pop("reason", None)
    if params:
        op["params"] = params
    if op["action"] in REPLACING_OPS and target not in (None, ""):
        result = _result_of(str(target), before, after)
        if result is not None:
            op["result"] = result
    return op


def watch_manager(manager: Any, session: Session, *, capture: str = "content") -> ManagerHook:
    """Log every step / execute of a seed 000 ContextManager to `session`.

    What the agent's thread takes of each context, by `capture`:

    - ``"content"`` (the default): the list and each message's content, which
      is what managers rewrite in place (a summary written over a tool
      result). The message dicts are copied on the SDK's thread, so a field
      other than ``content`` edited in place shows as it is then.
    - ``"copy"``: every message dict, copied at the step (the most the hook
      costs a step), for managers that edit other fields in place.
    - ``"shared"``: the list alone, for managers that never edit a message dict
      (seed 000's own replaces lists and builds a new dict for a summary).
    """
    return ManagerHook(manager, session, capture=capture)


def _reason(action: Any) -> str:
    reason = field_of(action, "reason")
    if not reason:
        params = field_of(action, "params", None)
        if isinstance(params, dict):
            reason = params.get("reason")
    return str(reason) if reason else ""


class _Attributes(dict[str, Any]):
    """An action object's attributes as they were when it was executed."""


def _action_fields(action: Any) -> Any:
    """The action as it is now, shallow and cheap: a dict copy, or its attributes'."""
    if isinstance(action, dict):
        return action.copy()
    fields = getattr(action, "__dict__", None)
    return _Attributes(fields) if isinstance(fields, dict) else action


def _action_dict(action: Any) -> dict[str, Any]:
    if isinstance(action, _Attributes):
        return {k: v for k, v in action.items() if not k.startswith("_")}
    if isinstance(action, dict):
        return dict(action)
    if hasattr(action, "__dict__"):
        return {k: v for k, v in vars(action).items() if not k.startswith("_")}
    return {"action": str(action)}


def _result_of(target: str, before: list[Message], after: list[Message]) -> Message | None:
    """The message a summarize left: the target changed in place, else a newcomer."""
    before_ids = {str(m.get("id")) for m in before}
    for m in after:
        if str(m.get("id")) == target:
            return m
    for m in after:
        if str(m.get("id")) not in before_ids:
            return m
    return None


def _apply_named(
    before: list[Message], op: dict[str, Any], after: list[Message]
) -> list[Message] | None:
    """The context `op` alone would give (None for operations this does not model)."""
    name = op["action"]
    target = op.get("target")
    if name in ("keep", "pin", "unpin", "expire"):
        return before
    if name == "drop":
        return [m for m in before if str(m.get("id")) != target]
    if name in REPLACING_OPS and "result" in op:
        return [op["result"] if str(m.get("id")) == target else m for m in before]
    if name == "reload":
        back = [m for m in after if str(m.get("id")) == target]
        return before + back
    return None
