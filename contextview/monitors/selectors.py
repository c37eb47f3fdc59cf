"""Reads: a project's monitors and alerts, and what a monitor's window holds."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef, QuerySet

from contextview.core.monitors import ToolResult
from contextview.monitors.models import Alert, Monitor, WebhookDelivery
from contextview.projects.models import Project
from contextview.sessions.models import Session, StatsStatus, Step


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
    """The tool results that arrived in the contexts of the window's steps, in the
    order they arrived, each under the tool of the call it answers and with its
    tokens, as the statistics worker found them: its waste tracker's ``new`` events
    (``core.waste``), which name the tool of a result in any spelling (a ``tool``
    message, an Anthropic ``tool_result`` block, an OTel result part). A result the
    same as one still in the context is that result again, not a new one; one whose
    call is not in the context (no tool to compare with) and steps not computed yet
    are left out."""
    where = ["s.project_id = %s"]
    params: list[Any] = [window_start(monitor, now), StatsStatus.READY, monitor.project_id]
    if monitor.agent:
        where.append("s.agent = %s")
        params.append(monitor.agent)
    if monitor.mode:
        where.append("s.mode = %s")
        params.append(monitor.mode)
    # "new" is a key of the packed statistics' text only inside "waste" (the other
    # keys that start so are "new_tool" and "new_call"): a step without it is not parsed.
    sql = f"""
        SELECT s.external_id, e.item ->> 1, (e.item ->> 2)::bigint
        FROM cv_session s
        JOIN cv_step st ON st.session_id = s.id AND st.timestamp >= %s
        JOIN cv_step_stats ss ON ss.step_id = st.id AND ss.status = %s
             AND strpos(ss.stats ->> 'z', '"new":') > 0
        CROSS JOIN LATERAL (SELECT (ss.stats ->> 'z')::jsonb -> 'waste' -> 'new' AS new) w
        CROSS JOIN LATERAL jsonb_array_elements(
            CASE WHEN jsonb_typeof(w.new) = 'array' THEN w.new END
        ) WITH ORDINALITY AS e(item, n)
        WHERE {" AND ".join(where)} AND coalesce(e.item ->> 1, '') <> ''
        ORDER BY st.timestamp, st.session_id, st.index, e.n
    """
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [ToolResult(session=sid, tool=tool, tokens=tokens) for sid, tool, tokens in cursor]
