from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from contextview.sessions.models import Session


class Annotation(models.Model):
    """A note on a session, one of its steps, or one message of a step."""

    class Label(models.TextChoices):
        NOTE = "note"
        ROOT_CAUSE = "root-cause"
        CONTRIBUTING = "contributing"
        FIXED_BY = "fixed-by"

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="annotations")
    step_index = models.IntegerField(null=True, blank=True)
    message_id = models.CharField(max_length=200, blank=True, default="")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    label = models.CharField(max_length=16, choices=Label.choices, default=Label.NOTE)
    body = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "cv_annotation"
        indexes = [models.Index(fields=["session", "step_index"], name="annotation_by_step")]

    @property
    def edited(self) -> bool:
        """Whether it was changed after it was written (what the page marks "(edited)"
        and the reports give as ``edited_at``)."""
        return self.updated_at - self.created_at > timedelta(seconds=1)


class Incident(models.Model):
    """A session marked as an incident for review."""

    class Severity(models.TextChoices):
        SEV1 = "sev1"
        SEV2 = "sev2"
        SEV3 = "sev3"
        SEV4 = "sev4"

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="incident")
    title = models.CharField(max_length=200)
    severity = models.CharField(max_length=8, choices=Severity.choices, default=Severity.SEV3)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    created_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    # Who resolved it (null while open, and for incidents resolved before this was kept).
    resolved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        db_table = "cv_incident"
