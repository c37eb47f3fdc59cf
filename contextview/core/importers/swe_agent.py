"""SWE-agent and mini-swe-agent trajectories (``.traj``, one JSON document).

SWE-agent writes ``trajectory`` (one entry per model call, newer versions with the
``messages`` the model was sent), ``history`` (every message) and ``info``
(``exit_status``, ``model_stats``). An observation that a later call received
cut down (``last_n_observations`` leaves "Old environment output: (N lines
omitted)") becomes a ``truncate`` of that observation at that call.
SWE-agent 1.x names each call's messages ``query`` (some versions ``messages``);
older versions log none. A call's reply is the assistant message its history keeps
(with the reply's tool calls), not the step's ``response``, which is only its text.
Its session's model is the one its ``replay_config`` names. Run with a retry loop,
SWE-agent keeps each attempt's run in ``attempts`` and copies the one it chose to the
file's own fields: the others are sessions of their own (``<session>:attempt-<i>``)
whose ``metadata.parent_session`` names the file's; a file saved before it chose
(``attempts`` alone) is a session for each attempt.
mini-swe-agent writes ``messages`` alone, each reply with the model's whole response
in ``extra.response`` (its ``model`` and ``usage``); with a Responses API model (its
``litellm_response`` models) the reply is that response object itself (``object``
``response``, its ``output`` items) and each result the ``function_call_output`` item
sent back. Its sessions are the agent ``mini-swe-agent``, their model the one its
``info.config`` names.
Without per-call messages the context of each call is the history before its
assistant message. The thinking a reply keeps (LiteLLM's ``thinking_blocks`` or
``reasoning_content``) comes first in its content.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from contextview.core.errors import short_repr
from contextview.core.importers._log import (
    Event,
    NotFinite,
    SessionLog,
    TranscriptError,
    json_document,
    json_kind,
    json_loads,
    openai_usage,
    reading,
    reasoning_parts,
    short_hash,
    text_of,
    unfit,
)
from contextview.core.importers._task import Around, around, inside, plain_text

FORMAT = "swe-agent"
# Keys of a message that the model reads besides role and content.
_MESSAGE_KEYS = ("tool_calls", "tool_call_ids", "tool_call_id", "name")
# What SWE-agent (``problem_statement``) and mini-swe-agent (``task``) call the issue
# in their instance templates.
_TASK_NAMES = ("problem_statement", "task")
# Where the templates they ship with put it, for a trajectory that keeps no template.
_STOCK: tuple[Around, ...] = (
    ("ISSUE:", "INSTRUCTIONS:"),  # SWE-agent's default before 1.0, and its demonstrations'
    ("Consider the following PR description:", "</pr_description>"),  # mini's SWE-bench
    ("<pr_description>", "</pr_description>"),  # SWE-agent 1.x
    ("Please solve this issue:", "You can execute bash commands"),  # mini-swe-agent
)


def looks_like(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    attempts = doc.get("attempts")
    if isinstance(attempts, list) and attempts and all(_run_like(a) for a in attempts):
        return True
    return _run_like(doc)


def _run_like(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    if isinstance(doc.get("trajectory"), list):
        # Known by its calls' responses; an entry that is no call (null, a number) is
        # refused by name when the run is read.
        steps = doc["trajectory"]
        return not steps or any(isinstance(s, dict) and "response" in s for s in steps)
    return isinstance(doc.get("history"), list) or (
        isinstance(doc.get("messages"), list) and "info" in doc
    )


# The Responses API items mini-swe-agent sends a command's result back as (its
# litellm_response model), which carry no role.
_RESULT_ITEMS = ("function_call_output", "custom_tool_call_output")


def _message(where: str, mid: str, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise TranscriptError(where, f"must be a message object, not {json_kind(raw)}")
    if "role" not in raw and raw.get("type") in _RESULT_ITEMS:
        output = raw.get("output")
        if not isinstance(output, str | list):
            output = "" if output is None else text_of(output)
        result: dict[str, Any] = {"id": mid, "role": "tool", "content": output}
        if isinstance(raw.get("call_id"), str):
            result["tool_call_id"] = raw["call_id"]
        return result
    content = raw.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str | list):
        raise TranscriptError(
            f"{where}.content", f"must be a string or a list of parts, not {json_kind(content)}"
        )
    content = _unmarked(content)
    role = raw.get("role")
    if not isinstance(role, str):
        raise TranscriptError(f"{where}.role", unfit(raw, "role", "a string"))
    # a reply's thinking, which both agents keep as LiteLLM gave it
    thinking = reasoning_parts(raw) if role == "assistant" else []
    if thinking:
        said = content if isinstance(content, list) else [{"type": "text", "text": content}]
        content = [*thinking, *(part for part in said if part != {"type": "text", "text": ""})]
    msg: dict[str, Any] = {"id": mid, "role": role, "content": content}
    msg.update({k: raw[k] for k in _MESSAGE_KEYS if raw.get(k) is not None})
    return msg


def _unmarked(content: str | list[Any]) -> str | list[Any]:
    """A message's content without the cache breakpoints SWE-agent marks on its last
    messages (``cache_control``, on a content of one text part): it moves them to the
    newest messages at every call, so a message would otherwise differ from one call
    to the next, as if cut down, when only its mark moved."""
    if isinstance(content, str):
        return content
    parts = [
        {k: v for k, v in part.items() if k != "cache_control"} if isinstance(part, dict) else part
        for part in content
    ]
    only = parts[0] if len(parts) == 1 else None
    if isinstance(only, dict) and only.keys() == {"type", "text"} and only["type"] == "text":
        return only["text"] if isinstance(only["text"], str) else parts
    return parts


def _before_last_assistant(messages: list[Any]) -> int:
    for j in range(len(messages) - 1, -1, -1):
        if isinstance(messages[j], dict) and messages[j].get("role") == "assistant":
            return j
    return len(messages)


def _status(info: dict[str, Any]) -> str | None:
    exit_status = info.get("exit_status")
    if not isinstance(exit_status, str) or not exit_status:
        return None
    return "succeeded" if exit_status.lower().startswith("submitted") else "failed"


def read(
    stream: IO[bytes],
    *,
    session_id: str | None = None,
    fallback: str = "swe-agent",
    live: bool = False,  # a whole document is complete when it parses
) -> Iterator[Event]:
    doc = json_document(stream)
    if not looks_like(doc):
        raise TranscriptError("file", "is not a SWE-agent trajectory (no trajectory or history)")
    sid = session_id or fallback
    own = _run_of(doc)
    if own:
        yield from _run(doc, sid, where="", parent=None)
    # SWE-agent's retry loop keeps each attempt's run; the one it chose is the file's own.
    attempts = doc.get("attempts")
    for i, attempt in enumerate(attempts if isinstance(attempts, list) else []):
        if not (isinstance(attempt, dict) and _run_of(attempt)):
            continue
        if own and attempt.get("trajectory") == doc.get("trajectory"):
            continue
        yield from _run(
            attempt, f"{sid}:attempt-{i}", where=f"attempts[{i}].", parent=sid if own else None
        )


def _run_of(doc: dict[str, Any]) -> bool:
    """Whether a document (or an attempt of one) holds a run of its own."""
    return any(isinstance(doc.get(k), list) for k in ("trajectory", "history", "messages"))


def _run(doc: dict[str, Any], sid: str, *, where: str, parent: str | None) -> Iterator[Event]:
    """The events of one run (`where` prefixes its JSON paths): the file's, or an
    attempt's, a session of its own under the file's (`parent`)."""
    kept = doc.get("info")
    info: dict[str, Any] = kept if isinstance(kept, dict) else {}
    metadata: dict[str, Any] = {}
    if isinstance(info.get("model_stats"), dict):
        metadata["model_stats"] = info["model_stats"]
    if parent is not None:
        metadata["parent_session"] = parent
    body: dict[str, Any] = {"agent": _agent(doc, info), "metadata": metadata}
    model = _configured_model(info) or _replayed_model(doc)
    if model is not None:
        body["model"] = model
    log = SessionLog(sid, session_body=body)
    log.asked(_task(doc, info))
    trajectory = doc.get("trajectory")
    steps: list[Any] = trajectory if isinstance(trajectory, list) else []
    for k, entry in enumerate(steps):
        if not isinstance(entry, dict):
            raise TranscriptError(
                f"{where}trajectory[{k}]", f"must be an object (a step), not {short_repr(entry)}"
            )
        for key in ("query", "messages"):
            # What the call was sent: read as the context, so one of another shape
            # is not passed over for the history.
            if entry.get(key) is not None and not isinstance(entry[key], list):
                raise TranscriptError(
                    f"{where}trajectory[{k}].{key}", unfit(entry, key, "a list of messages")
                )
    if steps and all(isinstance(_sent(s), list) for s in steps):
        yield from _per_call_messages(log, steps, doc.get("history"), where)
    else:
        history = (
            doc.get("history") if isinstance(doc.get("history"), list) else doc.get("messages")
        )
        key = "history" if "history" in doc else "messages"
        yield from _from_history(log, history or [], f"{where}{key}")
    status = _status(info)
    if status is not None and log.started:
        yield log.end(status=status, timestamp=None)


def _task(doc: dict[str, Any], info: dict[str, Any]) -> str:
    """What the run was asked to do: the problem statement SWE-agent keeps in its
    ``replay_config``, else what its first instance message holds where its instance
    template put the issue (the template the run was configured with, else the ones
    SWE-agent and mini-swe-agent ship with), else that whole message."""
    replay = _replay_config(doc)
    text = _dig(replay, "problem_statement", "text")
    if isinstance(text, str) and text.strip():
        return text
    templates = (
        _dig(replay, "agent", "templates", "instance_template"),
        _dig(info, "config", "agent", "instance_template"),  # mini-swe-agent
    )
    return inside(
        plain_text(_instance_message(doc)), [*(around(t, _TASK_NAMES) for t in templates), *_STOCK]
    )


def _replay_config(doc: dict[str, Any]) -> Any:
    """The configuration SWE-agent 1.x ran with (``replay_config``, JSON text)."""
    replay = doc.get("replay_config")
    if isinstance(replay, str):
        try:
            replay = json_loads(replay)
        except (ValueError, RecursionError, NotFinite):
            replay = None
    return replay


def _replayed_model(doc: dict[str, Any]) -> str | None:
    """The model SWE-agent 1.x was configured with (``replay_config.agent.model.name``)."""
    name = _dig(_replay_config(doc), "agent", "model", "name")
    return name if isinstance(name, str) and name else None


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _instance_message(doc: dict[str, Any]) -> Any:
    """The content of the first user message that is not a demonstration's (SWE-agent
    can put a demonstration's messages ahead of the run's own, marked ``is_demo``)."""
    steps = doc.get("trajectory")
    first = _sent(steps[0]) if isinstance(steps, list) and steps else None
    for messages in (doc.get("history"), doc.get("messages"), first):
        for m in messages if isinstance(messages, list) else []:
            if isinstance(m, dict) and m.get("role") == "user" and not _demo(m):
                return m.get("content")
    return None


def _demo(message: dict[str, Any]) -> bool:
    """A message of a demonstration SWE-agent shows the model (``is_demo``, or the
    ``demonstration`` message that holds one whole): an example, not a call of the run."""
    return bool(message.get("is_demo")) or message.get("message_type") == "demonstration"


def _agent(doc: dict[str, Any], info: dict[str, Any]) -> str:
    """The agent that wrote a trajectory: mini-swe-agent names its format
    (``trajectory_format`` ``mini-swe-agent-1``...) and version (``info.mini_version``)."""
    written = doc.get("trajectory_format")
    if (
        isinstance(written, str) and written.startswith("mini-swe-agent")
    ) or "mini_version" in info:
        return "mini-swe-agent"
    return "swe-agent"


def _configured_model(info: dict[str, Any]) -> str | None:
    """The model mini-swe-agent was configured with (``info.config.model.model_name``),
    the session's model: each call's own, where its reply keeps one, is the step's."""
    config = info.get("config")
    model = config.get("model") if isinstance(config, dict) else None
    name = model.get("model_name") if isinstance(model, dict) else None
    return name if isinstance(name, str) and name else None


def _sent(step: Any) -> Any:
    """The messages of a trajectory step: ``query`` (what its call was sent) or
    ``messages`` (the history after it, its reply and observation included)."""
    if not isinstance(step, dict):
        return None
    return step["query"] if isinstance(step.get("query"), list) else step.get("messages")


def _reply(steps: list[dict[str, Any]], k: int, sent: int, history: Any) -> Any:
    """The message SWE-agent made of call `k`'s reply (its tool calls with its text),
    where the trajectory keeps it: after the `sent` messages the call was sent, in the
    history its step kept (``messages``) or the next call was sent, or for the last
    call, the run's ``history`` when it holds one reply for each call. None where it
    keeps none: the step's ``response`` is then all that is known of the reply."""
    if not isinstance(steps[k].get("query"), list):
        after = steps[k].get("messages")
    elif k + 1 < len(steps):
        after = _sent(steps[k + 1])
    else:
        replies = [
            m
            for m in (history if isinstance(history, list) else [])
            if isinstance(m, dict) and m.get("role") == "assistant" and not _demo(m)
        ]
        return replies[-1] if len(replies) == len(steps) else None
    found = after[sent] if isinstance(after, list) and sent < len(after) else None
    return found if isinstance(found, dict) and found.get("role") == "assistant" else None


def _called(step: dict[str, Any]) -> bool:
    """Whether a trajectory step was a model call: the step SWE-agent adds when it
    stops on an error (``exit_cost``, ``exit_context``, ``exit_format``: its message
    the step's response) was sent nothing, its query left as ``[{}]``."""
    return any(isinstance(m, dict) and m for m in _sent(step))


def _per_call_messages(
    log: SessionLog, steps: list[dict[str, Any]], history: Any, where: str
) -> Iterator[Event]:
    """Each call's context as SWE-agent logged it, message j of every call the same id."""
    called = [k for k, step in enumerate(steps) if _called(step)]
    calls = [steps[k] for k in called]
    for n, k in enumerate(called):
        step = steps[k]
        at = f"{where}trajectory[{k}]"
        reading(at)
        messages = _sent(step)
        key = "query" if isinstance(step.get("query"), list) else "messages"
        seen = messages if key == "query" else messages[: _before_last_assistant(messages)]
        cuts: list[dict[str, Any]] = []
        for j, raw in enumerate(seen):
            msg = _message(f"{at}.{key}[{j}]", f"m{j}", raw)
            mid = msg["id"]
            if mid not in log.context:
                log.add(msg)
                continue
            before = log.hash_of(mid)
            if before != short_hash(text_of(msg["content"])):
                cuts.append(msg)
        if cuts:
            reason = f"{len(cuts)} old observation(s) elided (last_n_observations)"
            log.stage(
                [
                    {"action": "truncate", "target": m["id"], "result": m, "reason": reason}
                    for m in cuts
                ],
                reason=reason,
            )
        response = step.get("response")
        reply = _reply(calls, n, len(seen), history)
        if reply is not None:
            output = [_message(f"{at} reply", f"m{len(seen)}", reply)]
        elif isinstance(response, str):
            output = [{"id": f"m{len(seen)}", "role": "assistant", "content": response}]
        else:
            output = None
        yield from log.step(
            timestamp=None,
            fields={"output": {"messages": output} if output else None},
        )


def _response(raw: dict[str, Any], where: str) -> tuple[Any, dict[str, int] | None]:
    """The model and usage of the response mini-swe-agent keeps with a reply (LiteLLM's
    chat completion, whose prompt_tokens hold the cached and cache-written tokens)."""
    extra = raw.get("extra")
    response = extra.get("response") if isinstance(extra, dict) else None
    if not isinstance(response, dict):
        return None, None
    model = response.get("model") if isinstance(response.get("model"), str) else None
    return model, openai_usage(response.get("usage"), f"{where}.extra.response.usage")


def _responses_reply(
    raw: dict[str, Any], where: str, mid: str
) -> tuple[dict[str, Any], str | None, dict[str, int] | None]:
    """A reply mini-swe-agent kept as the Responses API's whole response object
    (``object`` ``response``): one model call, whose reply is its ``output`` items (a
    message's parts in place of the message), its model and usage the response's."""
    output = raw.get("output")
    if not isinstance(output, list):
        problem = unfit(raw, "output", "a list", "the response's list of items")
        raise TranscriptError(f"{where}.output", problem)
    parts: list[Any] = []
    for item in output:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(item, dict) and item.get("type") == "message" and isinstance(content, list):
            parts.extend(content)
        else:
            parts.append(item)
    counted = openai_usage(raw.get("usage"), f"{where}.usage")
    model = raw.get("model") if isinstance(raw.get("model"), str) else None
    return {"id": mid, "role": "assistant", "content": parts}, model, counted


def _from_history(log: SessionLog, history: list[Any], where: str) -> Iterator[Event]:
    for j, raw in enumerate(history):
        reading(f"{where}[{j}]")
        if isinstance(raw, dict) and raw.get("object") == "response":
            msg, model, usage = _responses_reply(raw, f"{where}[{j}]", f"m{j}")
            fields = {"output": {"messages": [msg]}, "model": model, "usage": usage}
            yield from log.step(timestamp=None, fields=fields)
            log.add(msg)
            continue
        msg = _message(f"{where}[{j}]", f"m{j}", raw)
        if msg["role"] == "assistant" and not _demo(raw):
            model, usage = _response(raw, f"{where}[{j}]")
            fields = {"output": {"messages": [msg]}, "model": model, "usage": usage}
            yield from log.step(timestamp=None, fields=fields)
        log.add(msg)
