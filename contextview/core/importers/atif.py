"""ATIF, the Agent Trajectory Interchange Format (Harbor; one JSON document).

``{"schema_version": "ATIF-v1.x", "session_id", "agent": {"name", "model_name"},
"steps": [...], "final_metrics"}``. A step's ``source`` is ``system``, ``user`` or
``agent``; an agent step is one model call (its ``message``, ``reasoning_content``
and ``tool_calls``; ``metrics`` with ``prompt_tokens``, ``completion_tokens``,
``cached_tokens``), its ``observation.results`` the tool results that follow it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from contextview.core.importers._log import (
    Event,
    SessionLog,
    TranscriptError,
    json_document,
    token_count,
    usage_cached_inside,
)

FORMAT = "atif"


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

    # ATIF counts cached tokens inside prompt_tokens, as OpenAI does.
    return usage_cached_inside(
        count("prompt_tokens"), count("cached_tokens") or 0, count("completion_tokens")
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
    agent = doc.get("agent") if isinstance(doc.get("agent"), dict) else {}
    own = doc.get("session_id")
    sid = session_id or (own if isinstance(own, str) and own else fallback)
    body: dict[str, Any] = {"agent": agent.get("name") or "atif", "metadata": {}}
    if isinstance(agent.get("model_name"), str):
        body["model"] = agent["model_name"]
    if isinstance(doc.get("final_metrics"), dict):
        body["metadata"]["final_metrics"] = doc["final_metrics"]
    log = SessionLog(sid, session_body=body)
    for n, step in enumerate(doc.get("steps") or []):
        where = f"steps[{n}]"
        if not isinstance(step, dict):
            raise TranscriptError(where, "must be an object")
        source = step.get("source")
        sid_n = step.get("step_id", n)
        if source not in ("system", "user", "agent"):
            raise TranscriptError(f"{where}.source", "must be system, user or agent")
        if source != "agent":
            log.add({"id": f"s{sid_n}", "role": source, "content": _content(step.get("message"))})
            continue
        parts: list[Any] = []
        if step.get("reasoning_content"):
            parts.append({"type": "thinking", "thinking": step["reasoning_content"]})
        text = _content(step.get("message"))
        parts.extend(
            text if isinstance(text, list) else [{"type": "text", "text": text}] if text else []
        )
        for c, call in enumerate(step.get("tool_calls") or []):
            if not isinstance(call, dict):
                raise TranscriptError(f"{where}.tool_calls[{c}]", "must be an object")
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("tool_call_id"),
                    "name": call.get("function_name"),
                    "arguments": call.get("arguments"),
                }
            )
        reply = {"id": f"s{sid_n}", "role": "assistant", "content": parts}
        yield from log.step(
            timestamp=step.get("timestamp"),
            fields={
                "model": step.get("model_name") or body.get("model"),
                "usage": _usage(step.get("metrics"), where),
                "output": {"messages": [reply]},
            },
        )
        log.add(reply)
        observation = step.get("observation")
        results = observation.get("results") if isinstance(observation, dict) else None
        for r, result in enumerate(results or []):
            if not isinstance(result, dict):
                raise TranscriptError(f"{where}.observation.results[{r}]", "must be an object")
            msg = {
                "id": f"s{sid_n}.r{r}",
                "role": "tool",
                "content": _content(result.get("content")),
            }
            if result.get("source_call_id"):
                msg["tool_call_id"] = result["source_call_id"]
            log.add(msg)
