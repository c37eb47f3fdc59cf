"""OpenHands event streams: a JSON array of events, or one event per line (an event
folder, one event per file, is read by ``folders``).

An event has ``id``, ``source`` (``user``, ``agent``, ``environment``) and either
``action`` (with ``args``) or ``observation`` (with ``content``); an evaluation's
``output.jsonl`` holds one run a line, its events in ``history`` (each run a session
named by its ``instance_id``; OpenDevin's wrote them as pairs of an action and its
observation). The software agent
SDK (OpenHands V1) types its events by ``kind`` instead: ``SystemPromptEvent`` (with
the tools; a ``SystemPromptUpdateEvent``, written when a conversation is restored with
another agent configuration, replaces its prompt and tools), ``MessageEvent``
(``llm_message``), ``ActionEvent`` (``thought``, ``tool_call``; those of one
``llm_response_id`` are one call), ``ObservationEvent`` (``observation.content``),
``Condensation`` (``forgotten_event_ids``, ``summary``). Its events carry no usage:
an event folder's ``base_state.json`` records each call's (``call_usages``). V0's
agent actions that came from one model response share
``tool_call_metadata.model_response.id`` and form one model call, whose usage is
that response's ``usage``, even when the result of each call is logged before the
next call; its tool calls' arguments are the ones the model wrote in that response.
A reply in words has no response beside it: its usage is how much the running total
of tokens each agent action carries (``llm_metrics.accumulated_token_usage``) grew
since the action before. The ``system`` action's ``tools`` are sent with every call.
A ``condensation`` action forgets ``forgotten_event_ids`` (or the range
``forgotten_events_start_id``..``forgotten_events_end_id``), replacing them with its
``summary`` when it has one. ``agent_state_changed`` observations tell how the run
ended. A ``recall`` observation (workspace context, microagent knowledge) is sent as
the user message of the texts in its extras, not its ``content``. So is an ``edit``
observation of OpenHands' own file editor (``impl_source`` ``oh_aci``): the model
reads its ``formatted_output_and_error``, not the diff in its ``content``.

A V0 agent may hand a task to another (``delegate`` action, CodeActAgent's
``delegate_to_browsing_agent``): the delegate's events follow in the same stream
until the ``delegate`` observation brings its answer back, and its calls are a
session of their own (`_Run`). An agent action with no model response whose running
total did not grow came from no model call: it is context, not a step.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, NamedTuple

from contextview.core.importers._log import (
    Event,
    NotFinite,
    SessionLog,
    TranscriptError,
    json_document,
    json_kind,
    json_lines,
    json_loads,
    json_whole,
    openai_usage,
    reading,
    reasoning_parts,
    short_hash,
    text_of,
    token_count,
    unfit,
    usage_cached_inside,
)
from contextview.core.importers._task import Around, inside, plain_text

FORMAT = "openhands"
# Where the prompts OpenHands' benchmark runs send put the issue (SWE-bench and its
# kin: the repository uploaded, then the issue in these tags, then instructions).
_ISSUE: tuple[Around, ...] = (
    ("<issue_description>", "</issue_description>"),
    ("<pr_description>", "</pr_description>"),
)
# Observations that never reach the model (a loop detection only tells the CLI's user).
_SILENT = frozenset(
    {"agent_state_changed", "null", "user_rejected", "agent_condensation", "loop_detection"}
)
_SILENT_ACTIONS = frozenset({"change_agent_state", "recall", "condensation_request"})
# The texts of a workspace-context recall that OpenHands sends the model.
_WORKSPACE_TEXTS = (
    "repo_instructions",
    "conversation_instructions",
    "additional_agent_instructions",
)
_V1_END_STATES = {"finished": "succeeded", "error": "failed", "stuck": "failed"}
_END_STATES = {
    "finished": "succeeded",
    "error": "failed",
    "stopped": "abandoned",
    "rejected": "failed",
}


def _v1(event: Any) -> bool:
    """An event of the OpenHands software agent SDK (V1): typed by ``kind``."""
    return isinstance(event, dict) and isinstance(event.get("kind"), str) and "source" in event


def looks_like_event(event: Any) -> bool:
    return _v1(event) or (
        isinstance(event, dict)
        and "source" in event
        and ("action" in event or "observation" in event)
    )


def looks_like(doc: Any) -> bool:
    return isinstance(doc, list) and (not doc or looks_like_event(doc[0]))


def _usage(meta: Any, where: str) -> dict[str, int] | None:
    response = meta.get("model_response") if isinstance(meta, dict) else None
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None
    # LiteLLM's: it keeps Anthropic's cache writes beside the usage it knows
    # (OpenHands reads them there), and counts them in prompt_tokens.
    return openai_usage(usage, f"{where}: tool_call_metadata.model_response.usage")


def _written_arguments(meta: dict[str, Any]) -> Any:
    """The arguments of the tool call `meta` names as the model wrote them, in the
    model response OpenHands keeps beside the action; None when it keeps none. The
    action's ``args`` are OpenHands' own (its thought, ``blocking``, ``is_input``,
    ``confirmation_state``, ``security_risk``...), not what the model wrote."""
    response = meta.get("model_response")
    choices = response.get("choices") if isinstance(response, dict) else None
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, dict) or call.get("id") != meta.get("tool_call_id"):
                continue
            function = call.get("function")
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if isinstance(arguments, str):
                try:
                    return json_loads(arguments)
                except (ValueError, RecursionError, NotFinite):
                    return arguments  # kept as the text the model wrote
            return arguments
    return None


# The counts of OpenHands' running total of the tokens its calls used.
_TOTALS = ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")


def _totals(event: dict[str, Any], where: str) -> dict[str, int] | None:
    """The tokens used so far by the session's calls, as an agent action carries them
    (``llm_metrics.accumulated_token_usage``); None when it carries none."""
    metrics = event.get("llm_metrics")
    totals = metrics.get("accumulated_token_usage") if isinstance(metrics, dict) else None
    if not isinstance(totals, dict):
        return None
    path = f"{where}: llm_metrics.accumulated_token_usage"
    return {key: token_count(totals.get(key), f"{path}.{key}") or 0 for key in _TOTALS}


def _event_number(mid: str) -> int | None:
    """The event id an ``e<id>`` message id was made from, when it is a number."""
    number = mid[1:]
    return int(number) if number.isdigit() and len(number) < 19 else None


def _v1_parts(content: Any) -> list[Any]:
    """An SDK message's content (``TextContent`` and ``ImageContent`` items) as parts."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        return []
    parts: list[Any] = []
    for item in content:
        if isinstance(item, dict) and item.get("type") == "text":
            parts.append({"type": "text", "text": _text(item.get("text") or "")})
        elif isinstance(item, dict) and item.get("type") == "image":
            parts.extend(_images(item.get("image_urls")))
        else:
            parts.append(item)
    return parts


def _images(urls: Any) -> list[Any]:
    """The parts of the images OpenHands keeps by their URLs (``image_urls``)."""
    return [{"type": "image", "url": url} for url in (urls if isinstance(urls, list) else [])]


def _v1_text(items: Iterable[Any]) -> str:
    return "\n\n".join(
        _text(i.get("text") or "") if isinstance(i, dict) else _text(i) for i in items
    )


def _v1_observed(observation: Any) -> Any:
    """What the model reads of an SDK observation: its ``content`` (text, or text and
    image items), after "Tool Execution Error. " when it is an error, as the SDK
    sends it; the ``output`` text of the SDK's first releases, whose observations had
    no ``content``. An observation of another shape is kept whole, as JSON text."""
    if isinstance(observation, dict) and "content" not in observation:
        if isinstance(observation.get("output"), str):
            return observation["output"]
    if not isinstance(observation, dict) or not isinstance(observation.get("content"), str | list):
        return _text(observation)
    content = observation["content"]
    parts = _v1_parts(content)
    if observation.get("is_error") is True:
        parts.insert(0, {"type": "text", "text": "Tool Execution Error. "})
    elif isinstance(content, str):
        return content
    return parts


def _v1_action_parts(event: dict[str, Any]) -> list[Any]:
    """An action's reply: its reasoning, its thought and the tool call it made."""
    parts = reasoning_parts(event)
    parts.extend(_v1_parts(event.get("thought")))
    call = event.get("tool_call")
    call = call if isinstance(call, dict) else {}
    arguments = call.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json_loads(arguments)
        except (ValueError, RecursionError, NotFinite):
            pass  # kept as the text the model wrote
    parts.append(
        {
            "type": "tool_call",
            "id": call.get("id") or event.get("tool_call_id"),
            "name": call.get("name") or event.get("tool_name"),
            "arguments": arguments,
        }
    )
    return parts


def _recall_type(event: dict[str, Any]) -> str | None:
    """What a ``recall`` observation recalled (``workspace_context`` or
    ``knowledge``); None for the recalls of OpenHands before microagents."""
    extras = event.get("extras")
    kind = extras.get("recall_type") if isinstance(extras, dict) else None
    return kind if kind in ("workspace_context", "knowledge") else None


def _observed(event: dict[str, Any]) -> str:
    """What the model reads of an observation: its ``content``, but for the edit of
    OpenHands' own file editor, whose ``content`` is a diff of the whole file kept for
    the user and whose result the model reads as the editor wrote it, and for a
    delegate's result, whose ``content`` says which agent finished and whose model
    reads what the delegate answered (its ``outputs.content``). An empty ``content``
    (a command that printed nothing) is what the model read; the event's ``message``,
    a line for the user ("Command executed"), stands in only where there is no
    ``content`` at all."""
    extras = event.get("extras")
    if event.get("observation") == "edit" and isinstance(extras, dict):
        written = extras.get("formatted_output_and_error")
        if extras.get("impl_source") == "oh_aci" and isinstance(written, str):
            return written
    if event.get("observation") == "delegate" and isinstance(extras, dict):
        outputs = extras.get("outputs")
        answer = outputs.get("content") if isinstance(outputs, dict) else None
        if answer is not None:
            return _text(answer)
    if "content" in event:
        content = event["content"]
        return "" if content is None else _text(content)
    return _text(event.get("message") or "")


def _task(content: Any) -> str:
    """What a user's message asks (the session's task): the issue a benchmark's prompt
    holds, or all the text of one a user wrote."""
    return inside(plain_text(content), _ISSUE)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


class Call(NamedTuple):
    """What a V1 conversation's state tells of one model call."""

    usage: dict[str, int] | None
    model: str | None


class _Reader:
    def __init__(self, session_id: str, usages: dict[str, Call] | None = None) -> None:
        # the usage and model of each V1 call, by its response id
        self.usages = usages or {}
        self.log = SessionLog(session_id, session_body={"agent": "openhands", "metadata": {}})
        self.call_key: Any = None
        self.call: dict[str, Any] | None = None
        self.status: str | None = None
        self.last_ts: str | None = None
        # the tool definitions the agent's system prompt came with
        self.tools: list[dict[str, Any]] | None = None
        # the microagents whose knowledge a recall has sent
        self.microagents: set[str] = set()
        # the message of the system prompt the model is sent now (OpenHands V1)
        self.system_prompt: str | None = None
        # the running total of the tokens used, as the last agent action carried it
        self.totals: dict[str, int] | None = None
        # a delegate's: the running total its parent's last action carried, and
        # whether its own actions went on counting from it (see `spent`)
        self.parent_totals: dict[str, int] | None = None
        self.shares_totals = False
        # a delegate's: its end is the first state it reached that ends a run
        self.delegate = False
        # a delegate's task as its parent gave it (the action's ``inputs.task``)
        self.given_task = False
        # whether the agent action read last came from no model call (see `spent`)
        self.idle = False

    def spent(self, event: dict[str, Any], where: str) -> dict[str, int] | None:
        """The usage of the model call an agent action came from, told by how much its
        running total of tokens grew since the action before it (OpenHands keeps the
        total on each action, its condenser's calls counted in: a condensation action
        carries the total its own call reached). For a reply with no model response
        beside it (a message the agent wrote), the only usage OpenHands logs of it."""
        self.idle = False
        totals = _totals(event, where)
        if totals is None:
            return None
        before = self.totals
        if before is None and self.parent_totals is not None:
            # A delegate's first total. OpenHands has counted a delegate's calls in
            # two ways: on with its parent's total (the conversation's metrics, shared),
            # or from nothing (the delegate's own LLM). A total short of the parent's
            # cannot have gone on from it.
            parent = self.parent_totals
            self.shares_totals = all(totals[key] >= parent[key] for key in _TOTALS)
            before = parent if self.shares_totals else None
        # An action whose total is the one before, when something was counted, came
        # from no model call (an agent that answers from what it already has: the
        # browsing agent's last message and finish repeat what it was sent).
        self.idle = before == totals and any(totals.values())
        before, self.totals = before or dict.fromkeys(_TOTALS, 0), totals
        grown = {key: totals[key] - before[key] for key in _TOTALS}
        if min(grown.values()) < 0 or not grown["prompt_tokens"] + grown["completion_tokens"]:
            return None  # a total that restarted, or no call since the action before
        return usage_cached_inside(
            grown["prompt_tokens"],
            grown["cache_read_tokens"],
            grown["completion_tokens"],
            grown["cache_write_tokens"],
        )

    def finish(self) -> Iterator[Event]:
        call = self.call
        if call is None:
            return
        self.call, self.call_key = None, None
        log = self.log
        if not log.started and call["model"]:
            log.session_body["model"] = call["model"]  # the list shows the session's model
        later = log.context[call["obs_at"] :]
        log.context = log.context[: call["obs_at"]]
        yield from log.step(
            timestamp=call["timestamp"],
            fields={
                "model": call["model"],
                "usage": call["usage"],
                "output": {"messages": call["outputs"]},
                "tools": self.tools,
            },
        )
        log.context.extend(later)

    def event(self, where: str, event: Any) -> Iterator[Event]:
        reading(where)
        if not looks_like_event(event):
            raise TranscriptError(
                where, "is not an OpenHands event (needs source and action or observation)"
            )
        mid = f"e{event.get('id', where)}"
        self.last_ts = event.get("timestamp") or self.last_ts
        if _v1(event):
            yield from self.v1_event(mid, event)
            return
        for kind in ("observation", "action"):
            if kind in event and not isinstance(event[kind], str):
                raise TranscriptError(
                    f"{where}: {kind}",
                    f"must be a string naming the event, not {json_kind(event[kind])}",
                )
        spent = self.spent(event, where)
        if "observation" in event:
            kind = event["observation"]
            if kind == "agent_state_changed":
                state = (event.get("extras") or {}).get("agent_state")
                if isinstance(state, str) and state in _END_STATES:
                    # OpenHands stops a delegate that finished (or failed) when it
                    # hands back to its parent: that stop is not how it ended.
                    if not (self.delegate and state == "stopped" and self.status):
                        self.status = _END_STATES[state]
            if kind in _SILENT:
                return
            if kind == "recall" and _recall_type(event) is not None:
                recalled = self.recalled(mid, event)
                if recalled is not None:
                    yield from self.heard(recalled)
                return
            meta = event.get("tool_call_metadata") or {}
            msg: dict[str, Any] = {
                "id": mid,
                "role": "tool" if meta else "user",
                "content": _observed(event),
            }
            if isinstance(meta, dict) and meta.get("tool_call_id"):
                msg["tool_call_id"] = meta["tool_call_id"]
            yield from self.heard(msg)
            return
        action = event["action"]
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        if action == "condensation":
            yield from self.finish()
            self.condense(args)
            return
        if action in _SILENT_ACTIONS:
            return
        tools = args.get("tools")
        if action == "system" and isinstance(tools, list):
            if all(isinstance(t, dict) for t in tools):
                self.tools = tools or None  # the system message's, sent with every call
        if event.get("source") != "agent":
            role = "system" if action == "system" else "user"
            content: Any = _text(args.get("content") or event.get("message") or "")
            images = _images(args.get("image_urls")) if action == "message" else []
            if images:
                # the images a user attached, which OpenHands sends after the text
                content = [{"type": "text", "text": content}, *images]
            yield from self.heard({"id": mid, "role": role, "content": content})
            if action == "message" and event.get("source") == "user" and not self.given_task:
                self.log.asked(_task(content))
            return
        meta = (
            event.get("tool_call_metadata")
            if isinstance(event.get("tool_call_metadata"), dict)
            else None
        )
        if action == "system":
            self.log.add({"id": mid, "role": "system", "content": _text(args.get("content") or "")})
            return
        response = (meta or {}).get("model_response") or {}
        if not isinstance(response, dict):
            response = {}
        if meta:
            written = _written_arguments(meta)
            part: dict[str, Any] = {
                "type": "tool_call",
                "id": meta.get("tool_call_id"),
                "name": meta.get("function_name") or action,
                "arguments": args if written is None else written,
            }
            parts: list[Any] = [part]
            thought = args.get("thought")
            if isinstance(thought, str) and thought:
                parts.insert(0, {"type": "text", "text": thought})
        else:
            parts = [
                {"type": "text", "text": _text(args.get("content") or event.get("message") or "")}
            ]
            if self.idle:
                yield from self.heard({"id": mid, "role": "assistant", "content": parts})
                return
        yield from self.call_output(
            event,
            response.get("id"),
            {"id": mid, "role": "assistant", "content": parts},
            usage=lambda: _usage(meta, where) or spent,
            model=response.get("model"),
        )

    def call_output(
        self,
        event: dict[str, Any],
        key: Any,
        msg: dict[str, Any],
        *,
        usage: Callable[[], dict[str, int] | None] = lambda: None,
        model: Any = None,
    ) -> Iterator[Event]:
        """`msg`, a part of the reply of the model call `key` names (a response id):
        the call that was open ends first when it is another one. A call opened here
        takes its `usage` (read then) and `model`."""
        if self.call is None or key is None or key != self.call_key:
            yield from self.finish()
            self.call_key = key
            self.call = {
                "timestamp": event.get("timestamp"),
                "obs_at": len(self.log.context),
                "outputs": [],
                "calls": set(),
                "usage": usage(),
                "model": model,
            }
        self.call["outputs"].append(msg)
        for part in msg["content"] if isinstance(msg["content"], list) else []:
            if isinstance(part, dict) and part.get("type") == "tool_call":
                if isinstance(part.get("id"), str):
                    self.call["calls"].add(part["id"])
        self.log.add(msg)

    def heard(self, msg: dict[str, Any]) -> Iterator[Event]:
        """`msg` added to the context by someone other than the model: the call ends,
        unless `msg` is the result of one of its own tool calls. OpenHands runs the calls
        of one response one at a time, each result logged before the next call (``run``,
        its observation, ``run``, its observation, all of one ``model_response``): they
        are still one model call, whose later calls the earlier results did not reach."""
        call_id = msg.get("tool_call_id")
        if self.call is None or not isinstance(call_id, str) or call_id not in self.call["calls"]:
            yield from self.finish()
        self.log.add(msg)

    def v1_event(self, mid: str, event: dict[str, Any]) -> Iterator[Event]:
        kind = event["kind"]
        if kind == "SystemPromptEvent":
            tools = event.get("tools")
            if isinstance(tools, list) and all(isinstance(t, dict) for t in tools):
                self.tools = tools  # sent with every call from here on
            parts = [event.get("system_prompt"), event.get("dynamic_context")]
            self.system_prompt = mid
            yield from self.heard(
                {"id": mid, "role": "system", "content": _v1_text(p for p in parts if p)}
            )
        elif kind == "SystemPromptUpdateEvent":
            yield from self.finish()
            self.prompt_updated(mid, event)
        elif kind == "MessageEvent":
            message = event.get("llm_message")
            message = message if isinstance(message, dict) else {}
            said = [
                *_v1_parts(message.get("content")),
                *_v1_parts(event.get("extended_content")),
            ]
            if event.get("source") == "agent":
                reply = [*reasoning_parts(message), *said]
                msg = {"id": mid, "role": "assistant", "content": reply}
                yield from self.v1_reply(event, msg)
            else:
                role = message.get("role") if message.get("role") in ("user", "system") else "user"
                yield from self.heard({"id": mid, "role": role, "content": said})
                if role == "user" and event.get("source") == "user":
                    # What the user wrote, without the knowledge OpenHands extended it with.
                    self.log.asked(_task(_v1_parts(message.get("content"))))
        elif kind == "ActionEvent":
            msg = {"id": mid, "role": "assistant", "content": _v1_action_parts(event)}
            yield from self.v1_reply(event, msg)
        elif kind in ("ObservationEvent", "UserRejectObservation", "AgentErrorEvent"):
            if kind == "ObservationEvent":
                content: Any = _v1_observed(event.get("observation"))
            elif kind == "UserRejectObservation":
                content = f"Action rejected: {event.get('rejection_reason') or ''}"
            else:
                content = _text(event.get("error") or "")
            msg = {"id": mid, "role": "tool", "content": content}
            if isinstance(event.get("tool_call_id"), str):
                msg["tool_call_id"] = event["tool_call_id"]
            yield from self.heard(msg)
        elif kind == "CondensationSummaryEvent":
            summary = {"id": mid, "role": "user", "content": _text(event.get("summary") or "")}
            yield from self.heard({**summary, "partition": "memory"})
        elif kind == "Condensation":
            yield from self.finish()
            self.condense(event)
        elif kind == "ConversationStateUpdateEvent":
            value = event.get("value")
            status = value.get("execution_status") if isinstance(value, dict) else None
            if event.get("key") == "execution_status":
                status = value
            if isinstance(status, str) and status in _V1_END_STATES:
                self.status = _V1_END_STATES[status]
        # other events (pauses, condensation requests, hooks) never reach the model

    def v1_reply(self, event: dict[str, Any], msg: dict[str, Any]) -> Iterator[Event]:
        """`msg`, a part of the reply of the V1 call its ``llm_response_id`` names, with
        the usage and model the conversation's state recorded for that call."""
        key = event.get("llm_response_id")
        call = self.usages.get(key) if isinstance(key, str) else None
        yield from self.call_output(
            event,
            key,
            msg,
            usage=lambda: call.usage if call else None,
            model=call.model if call else None,
        )

    def prompt_updated(self, mid: str, event: dict[str, Any]) -> None:
        """A ``SystemPromptUpdateEvent``: the calls from here on are sent its tools,
        and its prompt in place of the one before (OpenHands sends the latest only)."""
        tools = event.get("tools")
        if isinstance(tools, list) and all(isinstance(t, dict) for t in tools):
            self.tools = tools
        prompt = event.get("system_prompt")
        if not prompt:
            return
        message = {"id": mid, "role": "system", "content": _v1_text([prompt])}
        old = self.system_prompt
        if old is None or old not in self.log.untouched():
            self.log.add(message)
        elif self.log.hash_of(old) == short_hash(text_of(message["content"])):
            return  # the same prompt: its message stays as it was
        else:
            reason = f"system prompt updated ({event.get('reason') or 'unknown reason'})"
            op = {"action": "rewrite", "target": old, "result": message, "reason": reason}
            self.log.stage([op], reason=reason)
        self.system_prompt = mid

    def recalled(self, mid: str, event: dict[str, Any]) -> dict[str, Any] | None:
        """A ``recall`` observation as the user message OpenHands sends for it, or None
        when it sends none. Its ``content`` only says what was added ("Added workspace
        context"): what the model reads is in its extras, the instructions of the
        workspace and the repository and the knowledge of each microagent triggered.
        The message holds those texts; the template OpenHands puts around them (and
        the date, hosts and repository facts it adds) is its own and is left out. A
        microagent recalled again for knowledge is sent once, as OpenHands does."""
        extras = event.get("extras")
        extras = extras if isinstance(extras, dict) else {}
        kind = _recall_type(event)
        texts: list[str] = []
        if kind == "workspace_context":
            for key in _WORKSPACE_TEXTS:
                value = extras.get(key)
                if isinstance(value, str) and value.strip():
                    texts.append(value)
        knowledge = extras.get("microagent_knowledge")
        for agent in knowledge if isinstance(knowledge, list) else []:
            if not isinstance(agent, dict) or not isinstance(agent.get("content"), str):
                continue
            name = agent.get("name")
            if kind == "knowledge" and name in self.microagents:
                continue
            if isinstance(name, str):
                self.microagents.add(name)
            if agent["content"].strip():
                texts.append(agent["content"])
        if not texts:
            return None
        return {"id": mid, "role": "user", "content": "\n\n".join(texts)}

    def condense(self, args: dict[str, Any]) -> None:
        forgotten = args.get("forgotten_event_ids")
        if isinstance(forgotten, list):
            ids = {f"e{i}" for i in forgotten}
        else:
            # A range, told by the ids in the context (it may span more events than exist).
            start, end = args.get("forgotten_events_start_id"), args.get("forgotten_events_end_id")
            ids = set()
            if isinstance(start, int) and isinstance(end, int):
                for m in self.log.context:
                    number = _event_number(m)
                    if number is not None and start <= number <= end:
                        ids.add(m)
        left = [m for m in self.log.context if m in ids]
        if not left:
            return
        reason = f"condensation forgot {len(left)} event(s)"
        summary = args.get("summary")
        if isinstance(summary, str) and summary:
            result = {
                "id": f"cond-{left[0]}",
                "role": "user",
                "content": summary,
                "partition": "memory",
            }
            op = {"action": "summarize", "targets": left, "result": result, "reason": reason}
        else:
            op = {"action": "drop", "targets": left, "reason": reason}
        self.log.stage([op], reason=reason)

    def close(self) -> Iterator[Event]:
        yield from self.finish()
        if self.status is not None and self.log.started:
            yield self.log.end(status=self.status, timestamp=self.last_ts)


def _delegation(event: Any) -> str | None:
    """Whether a V0 event starts a delegate (``start``: an ``AgentDelegateAction``)
    or hands back to the agent that started it (``end``: its
    ``AgentDelegateObservation``); None for any other event."""
    if not isinstance(event, dict) or _v1(event):
        return None
    if event.get("action") == "delegate" and event.get("source") == "agent":
        return "start"
    if event.get("observation") == "delegate":
        return "end"
    return None


class _Run:
    """The sessions of one event stream: its agent's, and those of the delegates it
    started. OpenHands (V0) logs a delegate's events in the stream of the agent that
    started it, between the ``delegate`` action and the ``delegate`` observation
    that brings back its answer: the delegate's calls are a session of their own,
    ``<session>:delegate-<id of the delegate action>``, whose ``metadata``
    names its ``parent_session`` (and the tool call that started it); the parent's
    context holds the action and the observation, as its model saw them. A delegate
    may delegate in turn."""

    def __init__(
        self,
        session_id: str,
        usages: dict[str, Call] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.usages = usages or {}
        # the agent whose events are being read last, the ones that started it before
        self.readers = [_Reader(session_id, self.usages)]
        self.readers[0].log.session_body["metadata"].update(metadata or {})

    def event(self, where: str, event: Any) -> Iterator[Event]:
        kind = _delegation(event)
        if kind == "end" and len(self.readers) > 1:
            delegate = self.readers.pop()
            yield from delegate.close()
            if delegate.shares_totals and delegate.totals is not None:
                self.readers[-1].totals = delegate.totals  # counted on past the parent's
        parent = self.readers[-1]
        yield from parent.event(where, event)
        if kind == "start":
            self.readers.append(self.delegate_of(parent, event))

    def delegate_of(self, parent: _Reader, action: dict[str, Any]) -> _Reader:
        sid = f"{parent.log.session_id}:delegate-{action.get('id', len(self.readers))}"
        reader = _Reader(sid, self.usages)
        reader.delegate = True
        reader.parent_totals = parent.totals
        metadata = reader.log.session_body["metadata"]
        metadata["parent_session"] = parent.log.session_id
        meta = action.get("tool_call_metadata")
        if isinstance(meta, dict) and isinstance(meta.get("tool_call_id"), str):
            metadata["parent_tool_call_id"] = meta["tool_call_id"]
        args = action.get("args")
        args = args if isinstance(args, dict) else {}
        if isinstance(args.get("agent"), str):
            metadata["delegate_agent"] = args["agent"]
        inputs = args.get("inputs")
        task = inputs.get("task") if isinstance(inputs, dict) else None
        if isinstance(task, str) and task.strip():
            reader.log.asked(task)
            reader.given_task = True
        return reader

    def close(self) -> Iterator[Event]:
        # A stream that ends inside a delegate (a run stopped while it worked).
        while self.readers:
            yield from self.readers.pop().close()


def looks_like_row(row: Any) -> bool:
    """A row of an evaluation's ``output.jsonl`` (``instance_id``, ``history`` the
    run's events, ``metrics``, ``test_result``)."""
    history = row.get("history") if isinstance(row, dict) else None
    events = _history_events(history) if isinstance(history, list) else []
    return bool(events) and looks_like_event(events[0][1])


def _history_events(history: list[Any]) -> list[tuple[str, Any]]:
    """The events of a row's ``history``, each with its path in it: OpenHands' own
    list of events, or the pairs of an action and its observation that OpenDevin's
    evaluations wrote (``[[action, observation], ...]``), in the order they came."""
    out: list[tuple[str, Any]] = []
    for i, item in enumerate(history):
        if isinstance(item, list):
            out.extend((f"history[{i}][{j}]", event) for j, event in enumerate(item))
        else:
            out.append((f"history[{i}]", item))
    return out


def _read(stream: IO[bytes], session_id: str | None, fallback: str, live: bool) -> Iterator[Event]:
    # A generator, so that a file that cannot be read fails where the reader's
    # events are taken, as every reader's does (`guarded`), not when it is opened.
    head = stream.read(1)
    while head in (b" ", b"\n", b"\r", b"\t"):
        head = stream.read(1)
    stream.seek(0)
    if head == b"[":
        doc = json_document(stream)
        events: Iterable[tuple[str, Any]] = ((f"[{n}]", e) for n, e in enumerate(doc))
        yield from read_events(events, session_id=session_id or fallback, live=live)
        return
    if head == b"{" and not _one_line_json(stream.readline()):
        stream.seek(0)
        rows: Iterable[tuple[str, Any]] = [("file", json_document(stream))]  # one row, indented
    else:
        stream.seek(0)
        rows = ((f"line {n}", e) for n, e in json_lines(stream, live=live))
    first = True
    for n, (where, value) in enumerate(rows):
        if first and not looks_like_row(value):
            # an event stream, one event a line
            stream.seek(0)
            lines = ((f"line {n}", e) for n, e in json_lines(stream, live=live))
            yield from read_events(lines, session_id=session_id or fallback, live=live)
            return
        first = False
        yield from _row(where, value, n, session_id, fallback)


def _one_line_json(line: bytes) -> bool:
    try:
        json_loads(line)
    except (ValueError, RecursionError, NotFinite):
        return False
    return True


def _row(where: str, row: Any, n: int, session_id: str | None, fallback: str) -> Iterator[Event]:
    """One evaluation row: a session of its own, named by its ``instance_id``."""
    if not isinstance(row, dict):
        raise TranscriptError(where, f"must be an object, not {json_kind(row)}")
    if not isinstance(row.get("history"), list):
        problem = unfit(row, "history", "a list", "the run's list of events")
        raise TranscriptError(where, f"history: {problem}")
    instance = row.get("instance_id")
    named = str(instance) if isinstance(instance, str | int) and instance != "" else None
    if session_id:
        sid = session_id if n == 0 else f"{session_id}:{named or n}"
    else:
        sid = named or f"{fallback}:{n}"
    run = _Run(sid)
    if named is not None:
        run.readers[0].log.session_body["metadata"]["instance_id"] = named
    for at, event in _history_events(row["history"]):
        yield from run.event(f"{where}: {at}", event)
    yield from run.close()


def event_of(data: bytes, where: str) -> Any:
    """One event stored as a file of its own (an event folder's ``N.json``)."""
    return json_whole(data, where)


def call_usages(state: Any, where: str) -> dict[str, Call]:
    """The usage and model of each model call a V1 conversation's state records
    (``base_state.json``: ``stats.usage_to_metrics``, each LLM's ``token_usages``),
    by the id of the response its events name (``llm_response_id``). The events
    themselves carry none."""
    stats = state.get("stats") if isinstance(state, dict) else None
    by_llm = stats.get("usage_to_metrics") if isinstance(stats, dict) else None
    found: dict[str, Call] = {}
    for name, metrics in by_llm.items() if isinstance(by_llm, dict) else ():
        usages = metrics.get("token_usages") if isinstance(metrics, dict) else None
        for n, usage in enumerate(usages if isinstance(usages, list) else []):
            response = usage.get("response_id") if isinstance(usage, dict) else None
            if not isinstance(response, str) or not response:
                continue
            path = f"{where}: stats.usage_to_metrics.{name}.token_usages[{n}]"

            def count(key: str, usage: dict[str, Any] = usage, path: str = path) -> int | None:
                return token_count(usage.get(key), f"{path}.{key}")

            model = usage.get("model") or metrics.get("model_name")
            found[response] = Call(
                usage=usage_cached_inside(
                    count("prompt_tokens"),
                    count("cache_read_tokens") or 0,
                    count("completion_tokens"),
                    count("cache_write_tokens"),
                ),
                model=model if isinstance(model, str) and model != "default" else None,
            )
    return found


def read_events(
    events: Iterable[tuple[str, Any]],
    *,
    session_id: str,
    live: bool = False,
    usages: dict[str, Call] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Iterator[Event]:
    """The ingest events of OpenHands events given as (where, event), in order;
    `usages` the usage of each V1 call, by its response id (`call_usages`);
    `metadata` the session's own (a sub-agent's ``parent_session``)."""
    run = _Run(session_id, usages, metadata)
    for where, event in events:
        yield from run.event(where, event)
    if not live:
        yield from run.close()


def read(
    stream: IO[bytes],
    *,
    session_id: str | None = None,
    fallback: str = "openhands",
    live: bool = False,
) -> Iterator[Event]:
    return _read(stream, session_id, fallback, live)
