"""ATIF, the Agent Trajectory Interchange Format (Harbor; one JSON document).

``{"schema_version": "ATIF-v1.x", "session_id", "agent": {"name", "model_name"},
"steps": [...], "final_metrics"}``. A step's ``source`` is ``system``, ``user`` or
``agent``; an agent step is one model call (its ``message``, ``reasoning_content``
and ``tool_calls``; ``metrics`` with ``prompt_tokens``, ``completion_tokens``,
``cached_tokens``), its ``observation.results`` the tool results that follow it
(each naming its call by ``source_call_id``; results that name none, as many as the
calls none names, answer those calls in order).

Later versions add to that: ``agent.tool_definitions`` (v1.5: the calls' tools),
content as a list of text and image parts (v1.6), observations on system steps
(v1.2), steps copied from the trajectory this one continues (``is_copied_context``:
context, not calls of this run), and sub-agents' trajectories embedded in
``subagent_trajectories`` (v1.7, each with its ``trajectory_id``), which become
sessions of their own whose ``metadata.parent_session`` names this one, as do the
sub-agents whose steps a trajectory holds inline, each marked ``extra.is_sidechain``
(Harbor's from Claude Code, naming the sub-agent in ``extra.agent_id``). An agent
step whose ``llm_call_count`` is 0 (v1.7) is a dispatch the harness made without a
model call: context, not a call. A step whose ``extra.context_management.boundary``
is ``replace`` (v1.7's convention for a compaction) ends the context before it: the
calls after it see its observation's content (the summary) and what follows. Harbor's
Terminus-2 wrote the same reset before v1.7 gave it that field: a ``system`` step
saying it performed a context summarization and handoff, its results referring to
the summarization's own trajectories.

A converter that writes a step per tool call (Harbor's from OpenHands) splits a call
that made several tool calls over several steps: the later ones, whose ``metrics``
count no tokens where the first's do, are read as part of the first's call
(`_parallel_calls`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from contextview.core.errors import short_repr
from contextview.core.importers._log import (
    Event,
    SessionLog,
    TranscriptError,
    json_document,
    json_kind,
    reading,
    token_count,
    unfit,
    usage_cached_inside,
)
from contextview.core.importers._task import Around, inside, plain_text

FORMAT = "atif"
# What Terminus-2's system step says at each context reset (its summarization handoff).
TERMINUS_RESET = "Performed context summarization and handoff to continue task."
# Where Terminus-2's first prompt puts the task's instruction, between its own
# instructions and the terminal's screen.
_INSTRUCTION: tuple[Around, ...] = (("Task Description:", "Current terminal state:"),)


def looks_like(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and str(doc.get("schema_version", "")).upper().startswith("ATIF")
        or (isinstance(doc, dict) and isinstance(doc.get("steps"), list) and "agent" in doc)
    )


def _usage(metrics: Any, where: str) -> dict[str, int] | None:
    if not isinstance(metrics, dict):
        return None

    def count(key: str) -> int | None:
        return token_count(metrics.get(key), f"{where}.metrics.{key}")

    # ATIF counts cached tokens inside prompt_tokens, as OpenAI does; prompt_tokens
    # holds all the input, so the tokens written to a cache (which the spec puts in
    # metrics.extra) are in it too.
    extra = metrics.get("extra")
    written = (
        token_count(
            extra.get("cache_creation_input_tokens"),
            f"{where}.metrics.extra.cache_creation_input_tokens",
        )
        if isinstance(extra, dict)
        else None
    )
    return usage_cached_inside(
        count("prompt_tokens"), count("cached_tokens") or 0, count("completion_tokens"), written
    )


def _content(message: Any) -> str | list[Any]:
    if message is None:
        return ""
    return message if isinstance(message, str | list) else str(message)


def read(
    stream: IO[bytes],
    *,
    session_id: str | None = None,
    fallback: str = "atif",
    live: bool = False,  # a whole document is complete when it parses
) -> Iterator[Event]:
    doc = json_document(stream)
    if not looks_like(doc):
        raise TranscriptError("file", "is not an ATIF trajectory (no schema_version or steps)")
    # v1.7 makes session_id optional; its trajectory_id then names the document.
    own = next((doc.get(k) for k in ("session_id", "trajectory_id") if _named(doc.get(k))), None)
    yield from _trajectory(doc, session_id or own or fallback, where="", parent=None)


def _named(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _trajectory(
    doc: dict[str, Any], sid: str, *, where: str, parent: dict[str, Any] | None
) -> Iterator[Event]:
    """The events of one trajectory (`where` prefixes its JSON paths), then those of
    the sub-agents it holds: its sidechain steps', then those embedded in it."""
    agent = doc["agent"] if isinstance(doc.get("agent"), dict) else {}
    body: dict[str, Any] = {"agent": agent.get("name") or "atif", "metadata": dict(parent or {})}
    if isinstance(agent.get("model_name"), str):
        body["model"] = agent["model_name"]
    tools = agent.get("tool_definitions")
    if not (isinstance(tools, list) and tools and all(isinstance(t, dict) for t in tools)):
        tools = None
    steps = doc.get("steps")
    if not isinstance(steps, list):
        # Required by every version: a trajectory without it has nothing to import.
        problem = unfit(doc, "steps", "a list", "the trajectory's list of steps")
        raise TranscriptError(f"{where}steps", problem)
    # the tool call whose result refers to each embedded sub-agent's trajectory
    started_by: dict[str, Any] = {}
    lanes = _lanes(steps, where)
    main = dict(body)
    main["metadata"] = dict(body["metadata"])
    if isinstance(doc.get("final_metrics"), dict):
        main["metadata"]["final_metrics"] = doc["final_metrics"]
    log = SessionLog(sid, session_body=main)
    yield from _calls(log, steps, lanes.pop(None, []), where, tools, started_by)
    for lane, indices in lanes.items():
        side = {**body, "metadata": {"parent_session": sid}}
        # a sub-agent may run on a model of its own: its first call's
        models = (steps[n].get("model_name") for n in indices if steps[n].get("source") == "agent")
        side["model"] = next((m for m in models if isinstance(m, str) and m), body.get("model"))
        yield from _calls(
            SessionLog(f"{sid}:{lane}", session_body=side), steps, indices, where, tools, {}
        )
    subs = doc.get("subagent_trajectories")
    for i, sub in enumerate(subs if isinstance(subs, list) else []):
        at = f"{where}subagent_trajectories[{i}]"
        reading(at)
        if not isinstance(sub, dict):
            raise TranscriptError(at, f"must be an object, not {json_kind(sub)}")
        tid = sub["trajectory_id"] if _named(sub.get("trajectory_id")) else str(i)
        meta = {"parent_session": sid}
        if started_by.get(tid) is not None:
            meta["parent_tool_call_id"] = started_by[tid]
        yield from _trajectory(sub, f"{sid}:{tid}", where=f"{at}.", parent=meta)


def _lanes(steps: list[Any], where: str) -> dict[str | None, list[int]]:
    """The indices of the steps of each agent a trajectory interleaves: None for its
    own, and a name for each sub-agent whose steps it holds inline, marked
    ``extra.is_sidechain`` (Harbor's Claude Code trajectories, in the order they were
    logged): the sub-agent's ``extra.agent_id``, or where a converter names none, the
    first step of each run of sidechain steps."""
    lanes: dict[str | None, list[int]] = {}
    run: str | None = None
    for n, step in enumerate(steps):
        if not isinstance(step, dict):
            raise TranscriptError(f"{where}steps[{n}]", f"must be an object, not {json_kind(step)}")
        extra = step.get("extra")
        if not (isinstance(extra, dict) and extra.get("is_sidechain") is True):
            run = None
            lanes.setdefault(None, []).append(n)
            continue
        agent = extra.get("agent_id")
        if isinstance(agent, str) and agent:
            lane = f"agent-{agent}"
        else:
            run = run or f"sidechain-{step.get('step_id', n)}"
            lane = run
        lanes.setdefault(lane, []).append(n)
    return lanes


def _calls(
    log: SessionLog,
    steps: list[Any],
    indices: list[int],
    where: str,
    tools: list[Any] | None,
    started_by: dict[str, Any],
) -> Iterator[Event]:
    """The events of the steps at `indices`, one agent's, in order."""
    parts_of = _parallel_calls(steps, indices)
    joined = {j for later in parts_of.values() for j in later}
    for n in indices:
        step = steps[n]
        at = f"{where}steps[{n}]"
        reading(at)
        if n in joined:
            continue  # read with the step of its call
        source = step.get("source")
        sid_n = step.get("step_id", n)
        if source not in ("system", "user", "agent"):
            raise TranscriptError(f"{at}.source", "must be system, user or agent")
        if source != "agent":
            said = {"id": f"s{sid_n}", "role": source, "content": _content(step.get("message"))}
            _observed(log, step, at, sid_n, started_by, said=said)
            if source == "user" and step.get("is_copied_context") is not True:
                log.asked(inside(plain_text(said["content"]), _INSTRUCTION))
            continue
        later = [(j, f"{where}steps[{j}]", steps[j]) for j in parts_of.get(n, ())]
        parts = [p for _, a, one in [(n, at, step), *later] for p in _reply_parts(one, a)]
        reply = {"id": f"s{sid_n}", "role": "assistant", "content": parts}
        # A step copied from the trajectory this one continues is context this run
        # starts from, not a call it made (its usage was the earlier run's); a step
        # with no LLM call (llm_call_count 0, v1.7) is a dispatch the agent's harness
        # made itself. Both are context for the calls that follow.
        if step.get("is_copied_context") is not True and _llm_calls(step, at) != 0:
            yield from log.step(
                timestamp=step.get("timestamp"),
                fields={
                    "model": step.get("model_name") or log.session_body.get("model"),
                    "usage": _usage(step.get("metrics"), at),
                    "output": {"messages": [reply]},
                    "tools": tools,
                },
            )
        log.add(reply)
        _observed(log, step, at, sid_n, started_by, said=None)
        for j, a, one in later:
            _observed(log, one, a, one.get("step_id", j), started_by, said=None)


def _reply_parts(step: dict[str, Any], at: str) -> list[Any]:
    """An agent step's reply: its reasoning, its message and its tool calls."""
    parts: list[Any] = []
    if step.get("reasoning_content"):
        parts.append({"type": "thinking", "thinking": step["reasoning_content"]})
    text = _content(step.get("message"))
    parts.extend(
        text if isinstance(text, list) else [{"type": "text", "text": text}] if text else []
    )
    calls = step.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        raise TranscriptError(f"{at}.tool_calls", unfit(step, "tool_calls", "a list"))
    for c, call in enumerate(calls or []):
        if not isinstance(call, dict):
            raise TranscriptError(
                f"{at}.tool_calls[{c}]", f"must be an object, not {json_kind(call)}"
            )
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("tool_call_id"),
                "name": call.get("function_name"),
                "arguments": call.get("arguments"),
            }
        )
    return parts


# The counts of a step's metrics that tell a model call was made for it.
_COUNTS = ("prompt_tokens", "completion_tokens", "cached_tokens")


def _counted(step: Any) -> bool | None:
    """Whether an agent step's ``metrics`` count tokens: None when it has none (a
    producer that reports no usage tells nothing by it)."""
    metrics = step.get("metrics")
    if not isinstance(metrics, dict):
        return None
    return any(metrics.get(k) for k in _COUNTS)


def _calling(step: Any) -> bool:
    """An agent step of this run that made tool calls and says nothing of how many
    model calls it stands for."""
    return (
        isinstance(step, dict)
        and step.get("source") == "agent"
        and step.get("is_copied_context") is not True
        and step.get("llm_call_count") is None
        and isinstance(step.get("tool_calls"), list)
        and bool(step["tool_calls"])
    )


def _parallel_calls(steps: list[Any], indices: list[int]) -> dict[int, list[int]]:
    """For each agent step of `indices` (the steps of one agent) whose model call also
    made the tool calls of the steps after it, those steps' indices. Converters that
    write a step per tool call (Harbor's from OpenHands: a step per action, its
    metrics how much OpenHands' running total of tokens grew since the action before)
    split one call's parallel tool calls over steps; the tokens of the call are on its
    first step, and each later one has ``metrics`` that count none (``{}``: the total
    did not grow, no model was called). Such a step, following the agent steps of a
    call that counted tokens with no other step between, is part of that call. A step
    with no ``metrics`` tells nothing and stays a call of its own, as does every step
    when no step counts tokens."""
    found: dict[int, list[int]] = {}
    first: int | None = None
    for n in indices:
        step = steps[n]
        if not _calling(step):
            first = None
        elif first is not None and _counted(step) is False:
            found.setdefault(first, []).append(n)
        else:
            first = n if _counted(step) else None
    return found


def _llm_calls(step: dict[str, Any], at: str) -> int | None:
    """How many LLM calls a step stands for (v1.7): None when the producer did not
    say, 0 for a step the harness dispatched without one."""
    count = step.get("llm_call_count")
    if count is None:
        return None
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise TranscriptError(
            f"{at}.llm_call_count", f"must be a whole number, not {short_repr(count)}"
        )
    return count


def _observed(
    log: SessionLog,
    step: dict[str, Any],
    at: str,
    sid_n: Any,
    started_by: dict[str, Any],
    *,
    said: dict[str, Any] | None,
) -> None:
    """What a step adds to the context: what it `said` (an agent's reply is in
    already) and its observation results. A step that declares it replaces the
    context (``extra.context_management.boundary`` ``replace``, the convention of
    v1.7) instead leaves only its results' content for the calls after it: what
    was in the context is summarized into them, or dropped when they hold none."""
    results = _results(step, at, sid_n, started_by)
    kind = _boundary(step)
    if kind is None:
        if said is not None:
            log.add(said)
        for msg in results:
            log.add(msg)
        return
    reason = f"{kind} (ATIF context boundary at step {sid_n}): the context was replaced"
    contents = [m["content"] for m in results if m["content"]]
    summary: dict[str, Any] | None = None
    if contents:
        if all(isinstance(c, str) for c in contents):
            content: Any = "\n\n".join(contents)
        else:
            content = [
                part
                for c in contents
                for part in (c if isinstance(c, list) else [{"type": "text", "text": c}])
            ]
        summary = {
            "id": f"s{sid_n}.summary",
            "role": "user",
            "content": content,
            "partition": "memory",
        }
    left = log.untouched()
    if not left:
        if summary is not None:
            log.add(summary)
        return
    if summary is not None:
        op = {"action": "summarize", "targets": left, "result": summary, "reason": reason}
    else:
        op = {"action": "drop", "targets": left, "reason": reason}
    log.stage([op], reason=reason)


def _boundary(step: dict[str, Any]) -> str | None:
    """The kind of context reset a step declares, or None for a step that declares
    none: ``extra.context_management`` (v1.7), or Terminus-2's handoff step."""
    extra = step.get("extra")
    managed = extra.get("context_management") if isinstance(extra, dict) else None
    if isinstance(managed, dict) and managed.get("boundary") == "replace":
        kind = managed.get("type")
        return kind if isinstance(kind, str) else "context management"
    message = step.get("message")
    if step.get("source") == "system" and isinstance(message, str):
        if message.strip() == TERMINUS_RESET:
            return "compaction"
    return None


def _results(
    step: dict[str, Any], at: str, sid_n: Any, started_by: dict[str, Any]
) -> list[dict[str, Any]]:
    """A step's observation results as messages: the results of its tool calls
    (and, on a system step, of what the system did)."""
    out: list[dict[str, Any]] = []
    observation = step.get("observation")
    results = observation.get("results") if isinstance(observation, dict) else None
    results = results if isinstance(results, list) else []
    for r, result in enumerate(results):
        if not isinstance(result, dict):
            raise TranscriptError(
                f"{at}.observation.results[{r}]", f"must be an object, not {json_kind(result)}"
            )
    unnamed = _unnamed_calls(step, results)
    for r, result in enumerate(results):
        call_id = result.get("source_call_id") or (unnamed.pop(0) if unnamed else None)
        role = "tool" if call_id or step.get("source") == "agent" else "user"
        msg = {"id": f"s{sid_n}.r{r}", "role": role, "content": _content(result.get("content"))}
        if call_id:
            msg["tool_call_id"] = call_id
        refs = result.get("subagent_trajectory_ref")
        for ref in refs if isinstance(refs, list) else []:
            if isinstance(ref, dict) and _named(ref.get("trajectory_id")):
                started_by[ref["trajectory_id"]] = call_id
        out.append(msg)
    return out


def _unnamed_calls(step: dict[str, Any], results: list[dict[str, Any]]) -> list[Any]:
    """The ids of an agent step's tool calls that its results without a
    ``source_call_id`` answer, in order: producers that make one result per call
    often leave the id out (it is optional), and a result that names no call
    counts for no tool. Empty unless those results are as many as the calls no
    result names, when each is taken to answer the next such call."""
    calls = step.get("tool_calls") if step.get("source") == "agent" else None
    named = {r.get("source_call_id") for r in results if r.get("source_call_id")}
    open_calls = [
        c["tool_call_id"]
        for c in (calls if isinstance(calls, list) else [])
        if isinstance(c, dict)
        and isinstance(c.get("tool_call_id"), str)
        and c["tool_call_id"]
        and c["tool_call_id"] not in named
    ]
    unanswered = [r for r in results if not r.get("source_call_id")]
    return open_calls if len(open_calls) == len(unanswered) else []
