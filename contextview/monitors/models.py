"""Monitors (rules over a project's recent sessions), the alerts they raise, and the
webhook deliveries that tell someone about them."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from contextview.projects.models import Project


class Monitor(models.Model):
    class State(models.TextChoices):
        OK = "ok"
        FIRING = "firing"

    project = models.ForeignKey(Project, on_delete=models.CASCADE)
    name = models.CharField(max_length=200)
    metric = models.CharField(max_length=32)
    threshold = models.FloatField()
    window_minutes = models.IntegerField()
    agent = models.CharField(max_length=200, blank=True, default="")
    mode = models.CharField(max_length=64, blank=True, default="")
    webhook_url = models.URLField(max_length=2000, blank=True, default="")
    email = models.EmailField(blank=True, default="")
    # Kept as given, not hashed: every webhook body is signed with it.
    secret = models.CharField(max_length=64)
    # Claimed with conditional UPDATEs: only the evaluation that moves it fires or resolves.
    state = models.CharField(max_length=8, choices=State.choices, default=State.OK)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "cv_monitor"


class Alert(models.Model):
    class State(models.TextChoices):
        FIRING = "firing"
        RESOLVED = "resolved"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False)
    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="alerts")
    state = models.CharField(max_length=8, choices=State.choices, default=State.FIRING)
    value = models.FloatField()
    started_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    # External ids of the sessions that made the rule hold when it fired.
    sessions = models.JSONField(default=list)

    class Meta:
        db_table = "cv_alert"
        constraints = [
            # A backstop to the claim on Monitor.state: never two firing alerts at once.
            models.UniqueConstraint(
                fields=["monitor"],
                condition=models.Q(state="firing"),
                name="alert_one_firing",
            )
        ]
        indexes = [models.Index(fields=["project", "-started_at", "-id"], name="alert_recent")]


class WebhookDelivery(models.Model):
    """One attempt to POST an alert's firing or resolving to its monitor's webhook."""

    alert = models.ForeignKey(Alert, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=8)
    attempt = models.IntegerField()
    status_code = models.IntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "cv_webhook_delivery"
