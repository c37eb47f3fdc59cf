"""Reads: a project's monitors and alerts, and what a monitor's window holds."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef, QuerySet

from contextview.core.monitors import ToolResult
from contextview.monitors.models import Alert, Monitor, WebhookDelivery
from contextview.projects.models import Project
from contextview.sessions.models import Session, Step
from contextview.stats.blob_info import tokens_by_name_sql


def monitor_list(*, project: Project) -> QuerySet[Monitor]:
    return Monitor.objects.filter(project=project).order_by("id")


def alert_list(*, project: Project, state: str | None = None) -> QuerySet[Alert]:
    alerts = Alert.objects.filter(project=project).select_related("monitor")
    if state:
        alerts = alerts.filter(state=state)
    return alerts.order_by("-started_at", "-id")


def alerts_firing_count(*, project_ids: list[int]) -> int:
    return Alert.objects.filter(project_id__in=project_ids, state=Alert.State.FIRING).count()


def monitor_as_dict(monitor: Monitor) -> dict[str, Any]:
    return {
        "id": monitor.pk,
        "name": monitor.name,
        "metric": monitor.metric,
        "threshold": monitor.threshold,
        "window_minutes": monitor.window_minutes,
        "filters": {"agent": monitor.agent or None, "mode": monitor.mode or None},
        "webhook_url": monitor.webhook_url or None,
        "email": monitor.email or None,
        "state": monitor.state,
        "created_at": monitor.created_at.isoformat(),
    }


def alert_as_dict(alert: Alert) -> dict[str, Any]:
    return {
        "id": alert.pk,
        "monitor_id": alert.monitor_id,
        "state": alert.state,
        "value": alert.value,
        "started_at": alert.started_at.isoformat(),
        "resolved_at": alert.resolved_at.isoformat() if alert.resolved_at else None,
        "sessions": list(alert.sessions),
    }


def delivery_as_dict(delivery: WebhookDelivery) -> dict[str, Any]:
    return {
        "event": delivery.event,
        "attempt": delivery.attempt,
        "status_code": delivery.status_code,
        "error": delivery.error or None,
        "at": delivery.at.isoformat(),
    }


def alerts_with_deliveries(alerts: QuerySet[Alert]) -> list[dict[str, Any]]:
    """Alerts as the API lists them: each with its webhook delivery attempts."""
    listed = list(alerts.prefetch_related("deliveries"))
    return [
        {
            **alert_as_dict(alert),
            "deliveries": [
                delivery_as_dict(d)
                for d in sorted(alert.deliveries.all(), key=lambda d: (d.at, d.pk))
            ],
        }
        for alert in listed
    ]


def window_start(monitor: Monitor, now: datetime) -> datetime:
    return now - timedelta(minutes=monitor.window_minutes)


def window_sessions(*, monitor: Monitor, now: datetime) -> list[tuple[str, dict[str, Any]]]:
    """(external id, aggregates) of the sessions matching the monitor's filters that
    have a step in its window, by the steps' own timestamps; sessions whose
    statistics are not computed yet are left for a later evaluation."""
    recent = Step.objects.filter(
        session_id=OuterRef("pk"), timestamp__gte=window_start(monitor, now)
    )
    sessions = Session.objects.filter(project_id=monitor.project_id, aggregates__isnull=False)
    if monitor.agent:
        sessions = sessions.filter(agent=monitor.agent)
    if monitor.mode:
        sessions = sessions.filter(mode=monitor.mode)
    rows = sessions.filter(Exists(recent)).order_by("id").values_list("external_id", "aggregates")
    return [(sid, aggregates) for sid, aggregates in rows]


def window_tool_results(*, monitor: Monitor, now: datetime) -> list[ToolResult]:
    """The tool results of the window's sessions, in the order the server recorded
    them, with their tokens in the session's encoding (as the statistics worker
    counted them; a result not yet counted is left out)."""
    where = ["s.project_id = %s", "s.aggregates IS NOT NULL"]
    params: list[Any] = [monitor.project_id]
    if monitor.agent:
        where.append("s.agent = %s")
        params.append(monitor.agent)
    if monitor.mode:
        where.append("s.mode = %s")
        params.append(monitor.mode)
    params.append(window_start(monitor, now))
    tokens = tokens_by_name_sql("s.aggregates->>'encoding'")
    sql = f"""
        SELECT s.external_id, m.tool, {tokens}
        FROM cv_session s
        JOIN cv_session_message sm ON sm.session_id = s.id
        JOIN cv_message m ON m.id = sm.message_id AND m.tool IS NOT NULL
             AND m.role IS DISTINCT FROM 'assistant'
        JOIN cv_blob_info i ON i.blob_id = m.blob_id
        WHERE {" AND ".join(where)} AND {tokens} IS NOT NULL
          AND EXISTS (SELECT 1 FROM cv_step st WHERE st.session_id = s.id AND st.timestamp >= %s)
        ORDER BY sm.created_at, sm.seq, sm.session_id
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [ToolResult(session=sid, tool=tool, tokens=tokens) for sid, tool, tokens in cursor]
