"""Celery tasks: evaluate every monitor (beat, at least once a minute) and deliver
notifications with retries, apart from evaluation."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from contextview.monitors.models import Monitor
from contextview.monitors.services import (
    DeliveryFailed,
    email_send,
    monitor_evaluate,
    webhook_attempt,
)


@shared_task(acks_late=True, soft_time_limit=50, time_limit=60)
def evaluate_monitors() -> int:
    """Evaluate every monitor; the number of alerts fired or resolved."""
    changed = 0
    for monitor_id in Monitor.objects.order_by("id").values_list("id", flat=True):
        if monitor_evaluate(monitor_id=monitor_id) is not None:
            changed += 1
    return changed


@shared_task(
    bind=True,
    acks_late=True,
    max_retries=settings.MONITOR_WEBHOOK_MAX_RETRIES,
    soft_time_limit=settings.MONITOR_WEBHOOK_TIMEOUT_SECONDS + 20,
    time_limit=settings.MONITOR_WEBHOOK_TIMEOUT_SECONDS + 30,
)
def deliver_webhook(self, alert_id: int, event: str, body: str) -> None:  # type: ignore[no-untyped-def]
    try:
        webhook_attempt(alert_id=alert_id, event=event, body=body, attempt=self.request.retries + 1)
    except DeliveryFailed as exc:
        if self.request.retries >= self.max_retries:
            return  # every attempt is recorded on the alert
        backoff = settings.MONITOR_WEBHOOK_BACKOFF_SECONDS * 2**self.request.retries
        raise self.retry(exc=exc, countdown=min(backoff, 600)) from exc


@shared_task(acks_late=True, max_retries=3, default_retry_delay=30, soft_time_limit=50)
def deliver_email(alert_id: int, event: str) -> None:
    email_send(alert_id=alert_id, event=event)
