from __future__ import annotations

import hashlib
import uuid

from django.db import models
from django.utils import timezone

from contextview.projects.models import Project


class RawEvent(models.Model):
    """An accepted event id and the hash of its content, so retries are recognised.

    Only hashes are kept: the content itself lives, deduplicated, in the session
    tables, and keeping every raw body would make storage grow with resent text.
    An event id is only ever looked up, never shown: it is kept as 16 bytes of its
    sha256 (``event_key``), the content as 16 bytes of the event's (``body_hash``).
    Its session is the step's or session's row: nothing looks events up by it.
    """

    pk = models.CompositePrimaryKey("project", "event_key")
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )
    received_at = models.DateTimeField(default=timezone.now)
    # A uuid column holds 16 bytes without the length byte of a bytea: the primary
    # key's entries are 32 bytes rather than 40.
    event_key = models.UUIDField()
    body_hash = models.BinaryField(max_length=16)
    type = models.CharField(max_length=16)

    class Meta:
        db_table = "cv_raw_event"


# Bytes kept of a sha256 that only tells values apart (an event id, a body): 2^64
# values before two are likely to share them, per project.
KEY_BYTES = 16


def event_key(event_id: str) -> uuid.UUID:
    """What an event id is stored and looked up as: 16 bytes of its sha256."""
    return uuid.UUID(bytes=hashlib.sha256(event_id.encode()).digest()[:KEY_BYTES])


class ToolRun(models.Model):
    """A tool the agent ran, from an OTLP tool span (contract v1.1: spans that are not
    LLM calls are not steps). Shown beside the step of the call that asked for it:
    the session's step that started last before it, in its trace or its session."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )
    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    # The session by the span's own attributes (conversation, session, else trace id).
    session_external_id = models.CharField(max_length=200)
    name = models.CharField(max_length=200)
    call_id = models.CharField(max_length=200, blank=True, default="")
    started_at = models.DateTimeField()
    duration_ms = models.FloatField()
    status = models.CharField(max_length=8)
    status_message = models.TextField(blank=True, default="")
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "cv_tool_run"
        constraints = [
            models.UniqueConstraint(
                fields=["project", "trace_id", "span_id"], name="tool_run_unique"
            )
        ]
        indexes = [
            models.Index(
                fields=["project", "session_external_id", "started_at"],
                name="tool_run_session",
            )
        ]
