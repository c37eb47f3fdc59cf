"""Record a demo agent's context steps as contract events, the way an SDK hook would.

The recorder keeps the agent's side of the story: the current context, the
archive of what operations removed, and what the server has recorded for each
message id. From the second step on it sends a message by id alone when its
content is the one last recorded, exactly as the contract allows.

Applying operations here mirrors the contract's table so that scenarios are
self-checking: an operation naming a message that is not in the context raises
at generation time instead of producing a demo the server would reject.
"""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from contextview.core.model import REWRITING_OPS

Message = dict[str, Any]
Event = dict[str, Any]

DEMO_START = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)

REPLACING = frozenset({"summarize", "fold", "merge"})
MARKING = frozenset({"keep", "pin", "unpin", "expire"})


class ScenarioError(ValueError):
    """A scenario asked for something the contract would reject."""


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# A rough stand-in for a tokenizer, shaped after cl100k_base's pre-tokenizer: words
# (with their leading space), runs of up to three digits, CJK characters,
# punctuation runs. Fitted on the demo texts to land within a few percent of
# cl100k_base; the demo agents report these numbers as "their own counts", and a
# scenario skews them where it wants the server to see a wrong count.
_CJK = "\u3400-\u9fff"
_WIDE = "\u3000-\u303f\uff00-\uffef"
_PIECE = re.compile(
    rf" ?[A-Za-z]+|\d{{1,3}}|[{_CJK}]|[{_WIDE}]| ?[^\sA-Za-z\d{_CJK}{_WIDE}]+|\n+| {{2,}}"
)


def estimate_tokens(text: str) -> int:
    tokens = 0.0
    for piece in _PIECE.findall(text):
        head = piece.lstrip(" ") or piece
        first = head[0]
        if first.isascii() and first.isalpha():
            tokens += 1 + max(0, len(head) - 8) // 5
        elif "\u3400" <= first <= "\u9fff":
            tokens += 1.3
        elif first in "\n " or first.isdigit():
            tokens += 1
        else:
            tokens += -(-len(head) // 3)
    return round(tokens)


def msg(message_id: str, role: str, content: str, **fields: Any) -> Message:
    """A message: its id, role and content, then any other `fields`."""
    return {"id": message_id, "role": role, "content": content, **fields}


def message_text(message: Message) -> str:
    content = message.get("content", "")
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return str(content)


def context_tokens(messages: list[Message]) -> int:
    return sum(estimate_tokens(message_text(m)) for m in messages)


def targets_of(op: dict[str, Any]) -> list[str]:
    if "ids" in op:
        return list(op["ids"])
    if "targets" in op:
        return list(op["targets"])
    target = op.get("target")
    return [target] if target else []


def _index_of(context: list[Message], message_id: str, op: dict[str, Any]) -> int:
    for position, message in enumerate(context):
        if message["id"] == message_id:
            return position
    raise ScenarioError(f"{op.get('action', 'edit')} names {message_id!r}, not in the context")


def apply_operation(
    context: list[Message], archive: dict[str, Message], op: dict[str, Any]
) -> list[Message]:
    """The context after one operation; what leaves it goes to `archive`."""
    targets = targets_of(op)
    if "ids" in op:
        after = _apply_edit(context, archive, op, targets)
    else:
        after = _apply_named(context, archive, op, targets)
    ids = [m["id"] for m in after]
    if len(ids) != len(set(ids)):
        raise ScenarioError(f"operation {op} leaves duplicate ids in the context")
    return after


def _apply_named(
    context: list[Message], archive: dict[str, Message], op: dict[str, Any], targets: list[str]
) -> list[Message]:
    name = op["action"]
    after = list(context)
    if name == "reload":
        restored = []
        for target in targets:
            if target not in archive:
                raise ScenarioError(f"reload names {target!r}, not in the archive")
            restored.append(copy.deepcopy(archive[target]))
        position = op.get("params", {}).get("position", len(after))
        return after[:position] + restored + after[position:]
    positions = [_index_of(context, target, op) for target in targets]
    if name in MARKING:
        if name in ("pin", "unpin"):
            for position in positions:
                after[position] = {**after[position], "pinned": name == "pin"}
        return after
    if name == "drop":
        for position in positions:
            archive[context[position]["id"]] = context[position]
        return [m for m in after if m["id"] not in targets]
    if name == "reorder":
        order = op["params"]["order"]
        by_id = {m["id"]: m for m in context}
        if sorted(order) != sorted(by_id):
            raise ScenarioError("reorder must list every id of the context")
        return [by_id[i] for i in order]
    result = op.get("result")
    if result is None:
        raise ScenarioError(f"{name} needs a result")
    for position in positions:
        archive[context[position]["id"]] = context[position]
    if name in REPLACING:
        first = positions[0]
        after[first] = dict(result)
        return [m for i, m in enumerate(after) if i == first or i not in positions]
    if name in REWRITING_OPS:
        after[positions[0]] = dict(result)
        return after
    raise ScenarioError(f"unknown action {name!r}")


def _apply_edit(
    context: list[Message], archive: dict[str, Message], op: dict[str, Any], targets: list[str]
) -> list[Message]:
    positions = [_index_of(context, target, op) for target in targets]
    for position in positions:
        archive[context[position]["id"]] = context[position]
    new_content = op.get("new_content") or ""
    if not new_content:
        return [m for m in context if m["id"] not in targets]
    first = positions[0]
    role = op.get("role") or context[first].get("role")
    if len(targets) == 1:
        edited = {**context[first], "role": role, "content": new_content}
    else:
        edited = {"id": context[first]["id"], "role": role, "content": new_content}
    after = list(context)
    after[first] = edited
    return [m for i, m in enumerate(after) if i == first or i not in positions]


class SessionRecorder:
    """Builds one session's events: `session`, then `step`s, then `session_end`."""

    def __init__(self, session_id: str, start: datetime = DEMO_START) -> None:
        self.session_id = session_id
        self.events: list[Event] = []
        self.context: list[Message] = []
        self.archive: dict[str, Message] = {}
        self._recorded: dict[str, Message] = {}
        self._clock = start
        self._index = 0

    def _emit(self, kind: str, body: dict[str, Any], seconds: float) -> Event:
        self._clock += timedelta(seconds=seconds)
        event = {
            "id": f"{self.session_id}-e{len(self.events):03d}",
            "type": kind,
            "timestamp": rfc3339(self._clock),
            "body": {"session_id": self.session_id, **body},
        }
        self.events.append(event)
        return event

    def session(self, seconds: float = 0, **fields: Any) -> Event:
        return self._emit("session", copy.deepcopy(fields), seconds)

    def tokens_with(self, new: list[Message]) -> int:
        """The agent's own count of the context it is about to observe."""
        return context_tokens(self.context + new)

    def step(
        self,
        new: list[Message],
        ops: list[dict[str, Any]],
        *,
        single: bool = True,
        seconds: float = 20,
        mode: str | None = None,
        reason: str | None = None,
        obs_fields: dict[str, Any] | None = None,
        skew: tuple[float, float] = (1.0, 1.0),
        report_tokens: bool = True,
        outcome: dict[str, Any] | None = None,
    ) -> Event:
        """Observe the context plus `new`, apply `ops`, emit the step.

        `single` sends a lone operation as `action` (seed 000 style) rather than
        `actions`; `skew` multiplies the reported before/after counts so a
        scenario can make the agent's own counting visibly wrong.
        """
        known = {m["id"] for m in self.context}
        for message in new:
            if message["id"] in known:
                raise ScenarioError(f"new message {message['id']!r} is already in the context")
            known.add(message["id"])
        obs = [copy.deepcopy(m) for m in self.context + new]
        wire = []
        for message in obs:
            if self._recorded.get(message["id"]) == message:
                wire.append({"id": message["id"]})
            else:
                wire.append(copy.deepcopy(message))
            self._recorded[message["id"]] = message

        after = obs
        for op in ops:
            after = apply_operation(after, self.archive, op)
            result = op.get("result")
            if result is not None:
                self._recorded[result["id"]] = copy.deepcopy(result)
        self.context = after

        body: dict[str, Any] = {"index": self._index}
        if mode is not None:
            body["mode"] = mode
        body["obs"] = {"messages": wire, **copy.deepcopy(obs_fields or {})}
        if single and len(ops) == 1:
            body["action"] = copy.deepcopy(ops[0])
        else:
            body["actions"] = copy.deepcopy(ops)
        if reason is not None:
            body["reason"] = reason
        if report_tokens:
            body["before_tokens"] = round(context_tokens(obs) * skew[0])
            body["after_tokens"] = round(context_tokens(after) * skew[1])
        if outcome is not None:
            body["outcome"] = copy.deepcopy(outcome)
        self._index += 1
        return self._emit("step", body, seconds)

    def end(self, status: str, score: float | None = None, seconds: float = 30) -> Event:
        body: dict[str, Any] = {"status": status}
        if score is not None:
            body["score"] = score
        return self._emit("session_end", body, seconds)
