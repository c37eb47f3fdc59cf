"""Seed 002: a ContextBuilder with six partitions, a budget and forced degradation.

    hook = watch_builder(builder, session, partition_budgets={"tool": 4800, "memory": 3200})
    hook.tool = "query_orders"            # optional: the tool whose result this build carries
    prompt = builder.build(system, task, memory, tool_result, retrieval, question)

Each ``build`` is one step: its ``before`` holds one message per non-empty
block (a block that is a list gives one message per item), in the seed's
order system → task → memory → tool → retrieval → question, each in its
partition. The degradation methods (``_shrink_tool``, ``_compress_memory``,
``_trim_retrieval``) are wrapped on the instance, so each one the builder runs
is logged as an operation, in the order it ran: shrinking the tool result and
trimming retrieval are truncations (a trim to nothing a drop), compressing
memory a summary. The budget (``builder.budget``) and partition budgets go to
the session, token counts come from the builder's own ``_count``.

A message keeps its id while its text stays the same from one build to the
next (``tool``, then ``tool-2`` for the next result), so unchanged blocks go to
the server by id alone.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from contextview.sdk._wire import StepDraft
from contextview.sdk.client import Session
from contextview.sdk.hooks._common import Message, submit_later

BLOCKS = ("system", "task", "memory", "tool", "retrieval", "question")
ROLES = {
    "system": "system",
    "task": "user",
    "memory": "assistant",
    "tool": "tool",
    "retrieval": "system",
    "question": "user",
}
# method name -> (partition, operation, where it falls in the degradation order)
DEGRADERS: dict[str, tuple[str, str]] = {
    "_shrink_tool": ("tool", "truncate"),
    "_compress_memory": ("memory", "summarize"),
    "_trim_retrieval": ("retrieval", "truncate"),
}
THRESHOLD = 0.9


class BuilderHook:
    def __init__(
        self,
        builder: Any,
        session: Session,
        *,
        partition_budgets: Mapping[str, int] | None = None,
        degraders: Mapping[str, tuple[str, str]] | None = None,
        threshold: float = THRESHOLD,
    ) -> None:
        self.builder = builder
        self.session = session
        self.threshold = threshold
        self.tool: str | None = None
        self._build = builder.build
        self._versions: dict[str, tuple[str, int]] = {}
        self._runs: list[tuple[str, str, Any]] | None = None
        self._order = list((degraders or DEGRADERS).items())
        builder.build = self.build
        for name, (partition, op) in self._order:
            method = getattr(builder, name, None)
            if callable(method):
                setattr(builder, name, self._degrader(method, partition, op))
        budget = getattr(builder, "budget", None)
        if isinstance(budget, int):
            spec: dict[str, Any] = {"max_tokens": budget}
            if partition_budgets:
                spec["partitions"] = dict(partition_budgets)
            session.update(budget=spec)

    def _degrader(self, method: Any, partition: str, op: str) -> Any:
        def degrade(block: Any, *args: Any, **kwargs: Any) -> Any:
            out = method(block, *args, **kwargs)
            if self._runs is not None:
                self._runs.append((partition, op, _frozen(out)))
            return out

        return degrade

    def build(
        self,
        system: Any,
        task: Any,
        memory: Any,
        tool_result: Any,
        retrieval: Any,
        question: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        self.session.poll()
        # On the agent's thread: the blocks as they are (lists copied) and the
        # degradations the build runs; the step is made on the SDK's thread.
        blocks = dict(
            zip(
                BLOCKS,
                map(_frozen, (system, task, memory, tool_result, retrieval, question)),
                strict=True,
            )
        )
        self._runs = []
        try:
            return self._build(
                system, task, memory, tool_result, retrieval, question, *args, **kwargs
            )
        finally:
            runs, self._runs = self._runs, None
            budget = getattr(self.builder, "budget", None)
            mode = self.session.mode
            submit_later(self.session, self._draft, blocks, runs or [], budget, mode, time.time())

    def _count(self, block: Any) -> int | None:
        count = getattr(self.builder, "_count", None)
        if not callable(count):
            return None
        try:
            value = count(block)
        except Exception:
            return None
        return value if isinstance(value, int) else None

    def _messages(self, partition: str, block: Any) -> list[Message]:
        items = block if isinstance(block, list) else [block]
        out: list[Message] = []
        for k, item in enumerate(items):
            if item is None or item == "":
                continue
            if isinstance(item, dict):
                m = dict(item)
                m.setdefault("partition", partition)
                m.setdefault("role", ROLES[partition])
                if "id" not in m:
                    m["id"] = self._id(f"{partition}.{k}" if len(items) > 1 else partition, m)
            else:
                m = {"role": ROLES[partition], "content": str(item), "partition": partition}
                m["id"] = self._id(f"{partition}.{k}" if len(items) > 1 else partition, m)
            if partition == "tool" and self.tool and "tool" not in m:
                m["tool"] = self.tool
            out.append(m)
        return out

    def _id(self, slot: str, message: Message) -> str:
        """The slot's id, numbered anew whenever its text changes."""
        text = str(message.get("content"))
        known = self._versions.get(slot)
        if known is None:
            version = 1
        elif known[0] == text:
            version = known[1]
        else:
            version = known[1] + 1
        self._versions[slot] = (text, version)
        return slot if version == 1 else f"{slot}-{version}"

    def _result(self, partition: str, op: str, target: Message, text: str) -> Message:
        # A truncation keeps its message's id (the contract allows it); a summary is new.
        result: Message = {
            "id": target["id"] if op == "truncate" else f"{target['id']}~{op}",
            "role": ROLES[partition],
            "content": text,
            "partition": partition,
        }
        if partition == "tool" and self.tool:
            result["tool"] = self.tool
        return result

    def _degrade_items(
        self, partition: str, op: str, targets: list[Message], out: list[Any], why: str
    ) -> tuple[list[Message], list[dict[str, Any]]]:
        """A list block degraded item by item: items left out are dropped, shrunk ones cut."""
        texts = [str(i) for i in out if i not in (None, "")]
        ops: list[dict[str, Any]] = []
        if len(texts) == len(targets):
            kept: list[Message] = []
            for target, text in zip(targets, texts, strict=True):
                if text == target["content"]:
                    kept.append(target)
                    continue
                result = self._result(partition, op, target, text)
                ops.append({"action": op, "target": target["id"], "result": result, "reason": why})
                kept.append(result)
            return kept, ops
        remaining = list(texts)
        kept = []
        for target in targets:
            if target["content"] in remaining:
                remaining.remove(target["content"])
                kept.append(target)
        gone = [t["id"] for t in targets if t not in kept]
        if gone:
            ops.append({"action": "drop", "targets": gone, "reason": why})
        return kept, ops

    def _draft(
        self,
        blocks: dict[str, Any],
        runs: list[tuple[str, str, Any]],
        budget: Any,
        mode: str | None,
        timestamp: float,
        index: int,
    ) -> StepDraft:
        """The step of one build (on the SDK's thread, which keeps the ids' versions)."""
        before: list[Message] = []
        by_partition: dict[str, list[Message]] = {}
        for partition in BLOCKS:
            messages = self._messages(partition, blocks[partition])
            by_partition[partition] = messages
            before.extend(messages)
        counts = {p: self._count(blocks[p]) for p in BLOCKS}
        counted = all(c is not None for c in counts.values())
        total = sum(c for c in counts.values() if c is not None)
        over = isinstance(budget, int) and budget > 0 and total > budget * self.threshold

        ops: list[dict[str, Any]] = []
        current = {p: list(ms) for p, ms in by_partition.items()}
        degraded = dict(blocks)
        for n, (partition, op, out) in enumerate(runs, 1):
            degraded[partition] = out
            targets = current[partition]
            if not targets:
                continue
            why = (
                f"degrade {n}/{len(self._order)} ({partition}): {total} tokens over "
                f"{round(self.threshold * 100)}% of the {budget}-token budget"
            )
            if isinstance(out, list) and len(targets) > 1:
                current[partition], more = self._degrade_items(partition, op, targets, out, why)
                ops += more
                continue
            if out is None or out == "" or out == []:
                ops.append({"action": "drop", "targets": [m["id"] for m in targets], "reason": why})
                current[partition] = []
                continue
            text = "\n".join(str(i) for i in out) if isinstance(out, list) else str(out)
            if len(targets) == 1 and text == targets[0]["content"]:
                continue  # the degrader had nothing to take away
            result = self._result(partition, op, targets[0], text)
            ops.append(
                {
                    "action": op,
                    "targets": [m["id"] for m in targets],
                    "result": result,
                    "reason": why,
                }
            )
            current[partition] = [result]
        after = [m for p in BLOCKS for m in current[p]]
        after_total = sum(c for p in BLOCKS if (c := self._count(degraded[p])) is not None)
        reason = (
            f"{total} tokens > {round(self.threshold * 100)}% of {budget}: forced degradation "
            "tool → memory → retrieval"
            if over
            else f"{total} tokens, within {round(self.threshold * 100)}% of {budget}"
        )
        return StepDraft.of(
            index=index,
            timestamp=timestamp,
            # Dicts this hook made itself, on this thread: nobody else holds them.
            before=(list(before), before),
            after=(list(after), after),
            ops=ops or [{"action": "keep", "reason": "under the degradation threshold"}],
            infer=False,
            obs_extra={
                "builder": {
                    "budget": budget,
                    "threshold": self.threshold,
                    "tokens": {p: c for p, c in counts.items() if c is not None},
                }
            },
            mode=mode,
            reason=reason,
            before_tokens=total if counted else None,
            after_tokens=after_total if counted else None,
            outcome=None,
        )


def _frozen(block: Any) -> Any:
    """A block as it is now: a list is copied (and its dict items); strings never change."""
    if isinstance(block, list):
        return [dict(item) if isinstance(item, dict) else item for item in block]
    if isinstance(block, dict):
        return dict(block)
    return block


def watch_builder(builder: Any, session: Session, **options: Any) -> BuilderHook:
    """Log every ``builder.build(...)`` of a seed 002 ContextBuilder to `session`."""
    return BuilderHook(builder, session, **options)
