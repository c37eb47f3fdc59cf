"""A long transcript's steps are sent against the step before them (``$run``), with the
ids they had when every step sent its whole context."""

from __future__ import annotations

import io
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextview.core.importers import read
from contextview.core.importers._log import RUN_FROM, SessionLog, event_id
from contextview.core.runs import BASE_KEY, RUN_KEY
from contextview.core.session import SessionWalk


def whole(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each step event's body with its whole context in ``obs.messages``, as importers
    sent it before they sent runs: each run's messages by their ids alone."""
    contexts: dict[tuple[str, int], list[str]] = {}
    out = []
    for event in events:
        if event["type"] != "step":
            continue
        body = event["body"]
        sid, obs = body["session_id"], body["obs"]
        messages: list[dict[str, Any]] = []
        for m in obs["messages"]:
            if RUN_KEY in m:
                start, count = m[RUN_KEY]
                base = contexts[(sid, obs[BASE_KEY])]
                messages += ({"id": mid} for mid in base[start : start + count])
            else:
                messages.append(m)
        contexts[(sid, body["index"])] = [m["id"] for m in messages]
        out.append({**body, "obs": {"messages": messages}})
    return out


def claude_code(calls: int, *, compact_at: int | None = None) -> bytes:
    """A Claude Code session whose every call reads a file and adds its reply and result."""
    lines = []

    def entry(kind: str, uid: str, parent: str | None, message: Any, **fields: Any) -> None:
        at = f"2026-11-30T10:{len(lines) // 60:02d}:{len(lines) % 60:02d}.000Z"
        head = {"parentUuid": parent, "isSidechain": False, "sessionId": "long-cc"}
        lines.append(json.dumps({**head, "type": kind, "uuid": uid, "timestamp": at,
                                 "message": message, **fields}))  # fmt: skip

    entry("user", "u0", None, {"role": "user", "content": "Why is SO20260101007 late?"})
    parent = "u0"
    for n in range(1, calls + 1):
        call = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"n": n}}
        usage = {"input_tokens": 10 * n, "output_tokens": 5}
        reply = {"model": "claude-sonnet-4-5", "id": f"msg_{n}", "type": "message"}
        entry("assistant", f"a{n}", parent, {**reply, "role": "assistant", "usage": usage,
                                             "content": [call]})  # fmt: skip
        result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": f"line {n} of the log"}
        entry("user", f"r{n}", f"a{n}", {"role": "user", "content": [result]})
        parent = f"r{n}"
        if n == compact_at:
            boundary = {"subtype": "compact_boundary", "compactMetadata": {"trigger": "auto"}}
            entry("system", f"c{n}", None, None, content="Conversation compacted", **boundary)
            summary = {"role": "user", "content": "Summary: SO20260101007 waits on stock."}
            entry("user", f"s{n}", f"c{n}", summary, isCompactSummary=True)
            parent = f"s{n}"
    return "\n".join(lines).encode() + b"\n"


def test_a_long_sessions_steps_carry_only_what_each_call_adds() -> None:
    events = list(read(io.BytesIO(claude_code(300)), format="claude-code"))
    steps = [e for e in events if e["type"] == "step"]
    assert len(steps) == 300
    last = steps[-1]["body"]
    # 599 messages in the last context, sent as one run of the step before and the two
    # messages the call before it added.
    assert last["obs"][BASE_KEY] == 298
    assert last["obs"]["messages"][0] == {RUN_KEY: [0, 597]}
    assert len(last["obs"]["messages"]) == 3
    assert len(json.dumps(last)) < 1000
    bodies = whole(events)
    assert len(bodies[-1]["obs"]["messages"]) == 599
    # The ids are those of the steps sent whole: an earlier import of the file, or a
    # hook's record of what it sent, still knows them.
    for event, body in zip(steps, bodies, strict=True):
        assert event["id"] == event_id("long-cc", "step", f"step{body['index']}", body)


def test_the_step_after_a_compaction_is_sent_whole_and_those_after_it_by_runs() -> None:
    events = list(read(io.BytesIO(claude_code(40, compact_at=20)), format="claude-code"))
    steps = [e["body"] for e in events if e["type"] == "step"]
    compacted = next(s for s in steps if s.get("actions"))
    assert compacted["obs"][BASE_KEY] == compacted["index"] - 1
    # The compaction's step changed its context by operations: the step after it sends
    # its messages by id, and those after it runs of the step before again.
    assert BASE_KEY not in steps[compacted["index"] + 1]["obs"]
    assert steps[-1]["obs"][BASE_KEY] == steps[-1]["index"] - 1
    # What the server derives from the runs is the context each call saw.
    walk = SessionWalk()
    for step, body in zip(steps, whole(events), strict=True):
        got = walk.take(
            step["index"],
            obs=step["obs"]["messages"],
            base=step["obs"].get(BASE_KEY),
            ops_raw=step.get("actions"),
        )
        assert [m.id for m in got.before] == [m["id"] for m in body["obs"]["messages"]]


# Ids and contents with what JSON escapes: quotes, backslashes, control characters,
# other scripts, and halves of surrogate pairs a log may hold.
_TEXT = st.text(st.characters(codec=None, exclude_categories=()), min_size=1, max_size=6)


@st.composite
def _sessions(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """What an importer tells a `SessionLog`: messages added, calls, compactions."""
    script: list[tuple[str, Any]] = []
    ids: list[str] = []
    used: set[str] = set()  # ids are never used twice
    for _ in range(draw(st.integers(2, 8))):
        for _ in range(draw(st.integers(0, 2 * RUN_FROM))):
            mid = draw(_TEXT.filter(lambda t: t not in used))
            used.add(mid)
            ids.append(mid)
            script.append(("add", {"id": mid, "role": "user", "content": draw(_TEXT)}))
        if draw(st.booleans()) and len(ids) > 2:
            gone = ids[: draw(st.integers(1, len(ids) - 1))]
            summary = draw(_TEXT.filter(lambda t: t not in used))
            used.add(summary)
            ids = [summary, *ids[len(gone) :]]
            script.append(("compact", (gone, summary)))
        script.append(("step", draw(st.one_of(st.none(), _TEXT))))
    return script


@settings(max_examples=60, deadline=None)
@given(_sessions())
def test_a_steps_id_is_that_of_its_whole_context_whatever_it_holds(
    script: list[tuple[str, Any]],
) -> None:
    log = SessionLog('s"\\\x01é')
    events: list[dict[str, Any]] = []
    for kind, what in script:
        if kind == "add":
            log.add(dict(what))
        elif kind == "compact":
            gone, summary = what
            result = {"id": summary, "role": "user", "content": "summary"}
            log.stage([{"action": "summarize", "targets": gone, "result": result}], reason="c")
        else:
            events += log.step(timestamp=None, fields={"model": what})
    steps = [e for e in events if e["type"] == "step"]
    for event, body in zip(steps, whole(events), strict=True):
        assert event["id"] == event_id(log.session_id, "step", f"step{body['index']}", body)
