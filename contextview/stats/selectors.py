"""Reads for the statistics workers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Exists, OuterRef, Q

from contextview.sessions.models import Session, Step


def sessions_with_stale_work(*, older_than: datetime) -> list[int]:
    """Sessions with a step, or aggregates, pending since before ``older_than``.

    A session with a pending step is itself pending (ingest marks it so), so only
    pending sessions are looked into: quiet since then, or still receiving steps
    while an old one waits.
    """
    old_step = Step.objects.filter(
        session_id=OuterRef("pk"), received_at__lt=older_than, computed__isnull=True
    )
    sessions = Session.objects.filter(
        Q(stats_status="pending") & (Q(last_event_at__lt=older_than) | Exists(old_step))
    ).values_list("pk", flat=True)
    return sorted(sessions)


def agent_mode_table(
    *, project_id: int, start: datetime | None = None, end: datetime | None = None
) -> list[dict[str, Any]]:
    """Per agent and mode (the session's last mode): the comparison of seed 001 section 4.1.

    Success rate counts ended sessions only; tokens per step and entity retention
    are weighted by steps and by entities, not averaged over sessions.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT agent, mode, count(*),
                   count(*) FILTER (WHERE status <> 'running'),
                   count(*) FILTER (WHERE status = 'succeeded'),
                   coalesce(sum((aggregates->>'steps')::bigint), 0)::bigint,
                   coalesce(sum((aggregates->>'tokens_after_total')::bigint), 0)::bigint,
                   coalesce(sum((aggregates->>'entities_total')::bigint), 0)::bigint,
                   coalesce(sum((aggregates->>'entities_kept')::bigint), 0)::bigint,
                   coalesce(sum((aggregates->>'budget_violations')::bigint), 0)::bigint,
                   coalesce(sum((aggregates->>'reload_regrets')::bigint), 0)::bigint
            FROM cv_session WHERE project_id = %s
              AND (%s::timestamptz IS NULL OR started_at >= %s::timestamptz)
              AND (%s::timestamptz IS NULL OR started_at < %s::timestamptz)
            GROUP BY agent, mode ORDER BY agent, mode
            """,
            [project_id, start, start, end, end],
        )
        rows = cursor.fetchall()
    table = []
    for agent, mode, sessions, ended, ok, steps, tokens, ent_total, ent_kept, viol, regrets in rows:
        table.append(
            {
                "agent": agent or None,
                "mode": mode or None,
                "sessions": sessions,
                "ended": ended,
                "success_rate": ok / ended if ended else None,
                "steps": steps,
                "mean_tokens_per_step": tokens / steps if steps else None,
                "entity_retention": ent_kept / ent_total if ent_total else None,
                "budget_violations": viol,
                "reload_regrets": regrets,
            }
        )
    return table
