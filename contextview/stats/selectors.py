"""Reads for the statistics workers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Exists, OuterRef, Q

from contextview.core.cost import summed_cost
from contextview.core.stats import BILLED_FIELDS
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
    usage = _usage_by_agent_mode(project_id=project_id, start=start, end=end)
    table = []
    for agent, mode, sessions, ended, ok, steps, tokens, ent_total, ent_kept, viol, regrets in rows:
        cost = summed_cost(usage.get((agent, mode), {}), settings.MODEL_PRICES)
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
                # by the price table, from the usage the worker summed by model
                "cost_usd": cost.usd if cost is not None and cost.priced else None,
                "calls_priced": cost.priced if cost is not None else 0,
                "calls_unpriced": cost.unpriced if cost is not None else 0,
            }
        )
    return table


def _usage_by_agent_mode(
    *, project_id: int, start: datetime | None, end: datetime | None
) -> dict[tuple[str, str], dict[str, dict[str, int]]]:
    """The calls' usage summed by model (``aggregates.usage_by_model``) over the
    sessions of each agent and mode: {(agent, mode): {model: {calls, counts...}}}."""
    sums = ", ".join(f"sum((u.value->>'{name}')::bigint)::bigint" for name in BILLED_FIELDS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT s.agent, s.mode, u.key, {sums}
            FROM cv_session s
            CROSS JOIN LATERAL jsonb_each(
                CASE WHEN jsonb_typeof(s.aggregates->'usage_by_model') = 'object'
                     THEN s.aggregates->'usage_by_model' END
            ) AS u
            WHERE s.project_id = %s
              AND (%s::timestamptz IS NULL OR s.started_at >= %s::timestamptz)
              AND (%s::timestamptz IS NULL OR s.started_at < %s::timestamptz)
            GROUP BY s.agent, s.mode, u.key
            """,
            [project_id, start, start, end, end],
        )
        found: dict[tuple[str, str], dict[str, dict[str, int]]] = {}
        for agent, mode, model, *counts in cursor.fetchall():
            by_model = found.setdefault((agent, mode), {})
            by_model[model] = dict(zip(BILLED_FIELDS, (c or 0 for c in counts), strict=True))
    return found
