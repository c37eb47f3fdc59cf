"""Writes: create and delete monitors, evaluate them into alerts, deliver webhooks.

Firing and resolving are claimed with conditional UPDATEs (of the monitor's state,
then of the alert's), so two evaluations running at once, in two beat runs or two
workers, fire or resolve an alert once; the webhook is queued after the commit and
delivered by another task, so a slow or failing receiver never holds evaluation.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from contextview.core.errors import InputError
from contextview.core.monitors import (
    TOOL_RESULT_JUMP,
    Reading,
    metric_check,
    metric_text,
    sessions_reading,
    threshold_check,
    tool_jump_reading,
)
from contextview.monitors.models import Alert, Monitor, WebhookDelivery
from contextview.monitors.selectors import alert_as_dict, window_sessions, window_tool_results
from contextview.projects.models import Project
from contextview.sessions.services import text_storable

SIGNATURE_HEADER = "X-Contextview-Signature"


@dataclass(frozen=True)
class CreatedMonitor:
    monitor: Monitor
    secret: str


# The longest text each field takes (the API's document says so too), and the longest
# window a monitor may watch: a month.
TEXT_LIMITS = {"name": 200, "agent": 200, "mode": 64, "webhook_url": 2000, "email": 254}
WINDOW_MINUTES_MAX = 60 * 24 * 31


def _text(payload: dict[str, Any], name: str, *, required: bool = False, within: str = "") -> str:
    """A text field of `payload`, at most its TEXT_LIMITS long; errors name it under
    `within` (``filters.agent``)."""
    limit = TEXT_LIMITS[name]
    value = payload.get(name)
    field = f"{within}{name}"
    if value is None or value == "":
        if required:
            raise InputError(field, "field required")
        return ""
    if not isinstance(value, str):
        raise InputError(field, f"must be a string, not {value!r}")
    if len(value) > limit:
        raise InputError(field, f"must be at most {limit} characters")
    return text_storable(field, value)


def webhook_url_check(value: str) -> str:
    """An http(s) URL whose host the settings allow (any, when none are listed)."""
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:  # an unclosed [IPv6 bracket, a port that is not a number
        host = None
    if host is None or parts.scheme not in ("http", "https"):
        raise InputError("webhook_url", f"must be an http:// or https:// URL, not {value!r}")
    allowed = settings.MONITOR_WEBHOOK_ALLOWED_HOSTS
    if allowed and host.lower() not in allowed:
        raise InputError("webhook_url", f"host {host!r} is not in MONITOR_WEBHOOK_ALLOWED_HOSTS")
    return value


def monitor_create(*, project: Project, payload: dict[str, Any]) -> CreatedMonitor:
    """A monitor from the API's (or the form's) fields; InputError names a bad one."""
    name = _text(payload, "name", required=True)
    metric = metric_check(payload.get("metric"))
    if "threshold" not in payload:
        raise InputError("threshold", "field required")
    threshold = threshold_check(payload["threshold"])
    window = payload.get("window_minutes", 60)
    if isinstance(window, bool) or not isinstance(window, int):
        raise InputError("window_minutes", f"must be a whole number of minutes, not {window!r}")
    if not 1 <= window <= WINDOW_MINUTES_MAX:
        raise InputError(
            "window_minutes", f"must be from 1 to {WINDOW_MINUTES_MAX} minutes, not {window}"
        )
    # Absent or null means no filter; an empty list or string is refused, not read as none.
    filters = payload.get("filters")
    if filters is None:
        filters = {}
    if not isinstance(filters, dict):
        raise InputError("filters", "must be an object {agent, mode}")
    unknown = sorted(set(filters) - {"agent", "mode"})
    if unknown:
        raise InputError(f"filters.{unknown[0]}", "unknown filter; use agent or mode")
    agent = _text(filters, "agent", within="filters.")
    mode = _text(filters, "mode", within="filters.")
    webhook = _text(payload, "webhook_url")
    if webhook:
        webhook = webhook_url_check(webhook)
    email = _text(payload, "email")
    if email and "@" not in email:
        raise InputError("email", f"must be an email address, not {email!r}")
    secret = secrets.token_hex(32)
    monitor = Monitor.objects.create(
        project=project,
        name=name,
        metric=metric,
        threshold=threshold,
        window_minutes=window,
        agent=agent,
        mode=mode,
        webhook_url=webhook,
        email=email,
        secret=secret,
    )
    return CreatedMonitor(monitor=monitor, secret=secret)


def monitor_delete(*, project: Project, monitor_id: int) -> bool:
    deleted, _ = Monitor.objects.filter(project=project, pk=monitor_id).delete()
    return deleted > 0


def monitor_read(monitor: Monitor, now: datetime) -> Reading:
    if monitor.metric == TOOL_RESULT_JUMP:
        return tool_jump_reading(monitor.threshold, window_tool_results(monitor=monitor, now=now))
    return sessions_reading(
        monitor.metric, monitor.threshold, window_sessions(monitor=monitor, now=now)
    )


def monitor_evaluate(*, monitor_id: int, now: datetime | None = None) -> str | None:
    """Evaluate one monitor: "fired", "resolved", or None when nothing changed."""
    monitor = Monitor.objects.filter(pk=monitor_id).first()
    if monitor is None:
        return None
    now = now or timezone.now()
    reading = monitor_read(monitor, now)
    Monitor.objects.filter(pk=monitor.pk).update(evaluated_at=now)
    if reading.holds and monitor.state == Monitor.State.OK:
        return "fired" if _fire(monitor, reading, now) else None
    if not reading.holds and monitor.state == Monitor.State.FIRING:
        return "resolved" if _resolve(monitor, now) else None
    return None


def _fire(monitor: Monitor, reading: Reading, now: datetime) -> bool:
    try:
        with transaction.atomic():
            claimed = Monitor.objects.filter(pk=monitor.pk, state=Monitor.State.OK).update(
                state=Monitor.State.FIRING
            )
            if not claimed:
                return False
            alert = Alert.objects.create(
                project_id=monitor.project_id,
                monitor=monitor,
                value=reading.value if reading.value is not None else 0.0,
                started_at=now,
                sessions=list(reading.sessions),
            )
            _notify_on_commit(monitor, alert, "firing")
    except IntegrityError:  # another evaluation's alert is firing already
        return False
    return True


def _resolve(monitor: Monitor, now: datetime) -> bool:
    with transaction.atomic():
        alert = Alert.objects.filter(monitor=monitor, state=Alert.State.FIRING).first()
        claimed = (
            Alert.objects.filter(pk=alert.pk, state=Alert.State.FIRING).update(
                state=Alert.State.RESOLVED, resolved_at=now
            )
            if alert is not None
            else 0
        )
        Monitor.objects.filter(pk=monitor.pk, state=Monitor.State.FIRING).update(
            state=Monitor.State.OK
        )
        if not claimed or alert is None:
            return False
        alert.state, alert.resolved_at = Alert.State.RESOLVED, now
        _notify_on_commit(monitor, alert, "resolved")
    return True


def notification_body(monitor: Monitor, alert: Alert, event: str) -> bytes:
    """The JSON a webhook receives: the event, the alert object and the monitor's name."""
    body = {"event": event, "monitor": monitor.name, "alert": alert_as_dict(alert)}
    return json.dumps(body, sort_keys=True).encode()


def signature(secret: str, body: bytes) -> str:
    """The X-Contextview-Signature of a body: ``sha256=`` and the hex HMAC-SHA256."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _notify_on_commit(monitor: Monitor, alert: Alert, event: str) -> None:
    from contextview.monitors.tasks import deliver_email, deliver_webhook

    if monitor.webhook_url:
        body = notification_body(monitor, alert, event).decode()
        transaction.on_commit(lambda: _send_quietly(deliver_webhook.delay, alert.pk, event, body))
    if monitor.email and settings.EMAIL_HOST:
        transaction.on_commit(lambda: _send_quietly(deliver_email.delay, alert.pk, event))


def _send_quietly(send: Callable[..., Any], *args: Any) -> None:
    # The broker being down must not undo or fail an evaluation already committed.
    try:
        send(*args)
    except Exception:  # noqa: BLE001
        import logging

        logging.getLogger(__name__).exception("could not queue a monitor notification")


class DeliveryFailed(Exception):
    """A webhook attempt that may succeed if tried again."""


def webhook_attempt(*, alert_id: int, event: str, body: str, attempt: int) -> None:
    """POST one notification and record the attempt; DeliveryFailed to retry."""
    alert = Alert.objects.select_related("monitor").filter(pk=alert_id).first()
    if alert is None or not alert.monitor.webhook_url:
        return
    monitor = alert.monitor
    data = body.encode()
    status: int | None = None
    error = ""
    try:
        webhook_url_check(monitor.webhook_url)  # the allow-list may have changed since
        request = urllib.request.Request(
            monitor.webhook_url,
            data=data,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "User-Agent": "contextview-monitors",
                SIGNATURE_HEADER: signature(monitor.secret, data),
            },
        )
        with urllib.request.urlopen(  # noqa: S310 (http(s) only, checked above)
            request, timeout=settings.MONITOR_WEBHOOK_TIMEOUT_SECONDS
        ) as response:
            status = response.status
    except InputError as exc:
        WebhookDelivery.objects.create(alert=alert, event=event, attempt=attempt, error=str(exc))
        return  # not allowed now: trying again would not help
    except urllib.error.HTTPError as exc:
        status, error = exc.code, f"answered {exc.code}"
    except (OSError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
    WebhookDelivery.objects.create(
        alert=alert, event=event, attempt=attempt, status_code=status, error=error
    )
    if error:
        raise DeliveryFailed(error)


def email_send(*, alert_id: int, event: str) -> None:
    alert = Alert.objects.select_related("monitor").filter(pk=alert_id).first()
    if alert is None or not alert.monitor.email:
        return
    value = metric_text(alert.monitor.metric, alert.value)
    subject = f"[contextview] {alert.monitor.name} {event} ({alert.monitor.metric} {value})"
    send_mail(
        subject,
        notification_body(alert.monitor, alert, event).decode(),
        settings.DEFAULT_FROM_EMAIL,
        [alert.monitor.email],
    )
