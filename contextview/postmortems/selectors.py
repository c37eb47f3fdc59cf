"""Reads for reviews across sessions: project trends and two sessions side by side."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import connection

from contextview.postmortems.reports import session_timeline
from contextview.projects.models import Project
from contextview.sessions.models import Session
from contextview.sessions.selectors import session_as_dict

BUCKETS = ("hour", "day", "week")


def project_trends(
    *, project: Project, start: datetime, end: datetime, bucket: str = "day"
) -> list[dict[str, Any]]:
    """Per time bucket of session start: sessions, tokens, compressions, retention, violations."""
    if bucket not in BUCKETS:
        raise ValueError(f"bucket must be one of {', '.join(BUCKETS)}")
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT date_trunc(%s, started_at) AS t, count(*),
                   count(*) FILTER (WHERE status = 'succeeded'),
                   count(*) FILTER (WHERE status <> 'running'),
                   coalesce(sum((aggregates->>'steps')::bigint), 0)::bigint,
                   coalesce(sum((aggregates->>'tokens_after_total')::bigint), 0)::bigint,
                   coalesce(sum((aggregates->>'tokens_saved')::bigint), 0)::bigint,
                   coalesce(sum(
                       coalesce((aggregates->'ops_by_type'->>'summarize')::bigint, 0)
                       + coalesce((aggregates->'ops_by_type'->>'fold')::bigint, 0)
                       + coalesce((aggregates->'ops_by_type'->>'merge')::bigint, 0)
                       + coalesce((aggregates->'ops_by_type'->>'rewrite')::bigint, 0)
                       + coalesce((aggregates->'ops_by_type'->>'truncate')::bigint, 0)
                   ), 0)::bigint,
                   coalesce(sum((aggregates->>'entities_total')::bigint), 0)::bigint,
                   coalesce(sum((aggregates->>'entities_kept')::bigint), 0)::bigint,
                   coalesce(sum((aggregates->>'budget_violations')::bigint), 0)::bigint,
                   coalesce(sum((aggregates->>'reload_regrets')::bigint), 0)::bigint
            FROM cv_session
            WHERE project_id = %s AND started_at >= %s AND started_at < %s
            GROUP BY t ORDER BY t
            """,
            [bucket, project.pk, start, end],
        )
        rows = cursor.fetchall()
    out = []
    for t, n, ok, ended, steps, tokens, saved, compressions, ent_t, ent_k, viol, regrets in rows:
        out.append(
            {
                "t": t.isoformat(),
                "sessions": n,
                "success_rate": ok / ended if ended else None,
                "steps": steps,
                "tokens_per_step": tokens / steps if steps else None,
                "tokens_saved": saved,
                "compressions": compressions,
                "entity_retention": ent_k / ent_t if ent_t else None,
                "budget_violations": viol,
                "reload_regrets": regrets,
            }
        )
    return out


def sessions_compare(*, first: Session, second: Session) -> dict[str, Any]:
    """Two sessions (say, one task in two modes) side by side, step by step."""
    sides = []
    for session in (first, second):
        timeline = list(session_timeline(session))
        sides.append(
            {
                "session": session_as_dict(session),
                "curve": [
                    {
                        "index": t["index"],
                        "tokens_after": t.get("tokens_after"),
                        "occupancy_after": t.get("occupancy_after"),
                        "ops": t.get("ops", []),
                        "flags": t.get("flags", []),
                    }
                    for t in timeline
                ],
                "lost_entities": [
                    {"step": t["index"], "entities": t["lost"]} for t in timeline if t.get("lost")
                ],
            }
        )
    return {"sessions": sides}
