"""contextview's Python SDK: send an agent's working context to a contextview server.

    from contextview.sdk import Client

    cv = Client("http://127.0.0.1:8000", "cv_...", spool_dir="/var/spool/contextview")
    session = cv.session("order-debug-42", agent="support-bot", mode="summary")
    session.record_step(messages)                      # every step, before the LLM call
    session.record_step(messages, after=compacted)     # a step that compacted the context
    session.end("succeeded")

Hooks for the seeds' context managers are in `contextview.sdk.hooks`. The SDK
needs httpx, orjson and the standard library; it imports nothing of Django (only the
pure ``contextview.core`` it shares with the server).
"""

from __future__ import annotations

from contextview.sdk.client import Client, Counters, Directive, Problem, Reject, Session
from contextview.sdk.ops import apply_edits, infer_ops

__all__ = [
    "Client",
    "Counters",
    "Directive",
    "Problem",
    "Reject",
    "Session",
    "apply_edits",
    "infer_ops",
]
