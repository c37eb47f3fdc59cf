from __future__ import annotations

from django.db import models
from django.utils import timezone

from contextview.projects.models import Project


class RawEvent(models.Model):
    """An accepted event id and the hash of its content, so retries are recognised.

    Only the hash is kept: the content itself lives, deduplicated, in the session
    tables, and keeping every raw body would make storage grow with resent text.
    """

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )
    event_id = models.CharField(max_length=200)
    type = models.CharField(max_length=16)
    body_hash = models.BinaryField(max_length=32)
    session_external_id = models.CharField(max_length=200, blank=True, default="")
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "cv_raw_event"
        constraints = [
            models.UniqueConstraint(fields=["project", "event_id"], name="raw_event_unique")
        ]
