"""Celery tasks: compute step statistics and session aggregates, and sweep for lost work.

Tasks take ids and are idempotent: computing a session's pending steps twice writes
the same statistics. A session is computed by one worker at a time (an advisory
lock in PostgreSQL), committed chunk by chunk; a task that finds the lock taken
retries shortly, and the periodic sweep re-queues anything left pending, so a lost
broker message or a killed worker delays statistics and loses nothing (a killed
worker's successor resumes after its last committed chunk).
"""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from contextview.stats.selectors import sessions_with_stale_work
from contextview.stats.services import SessionBusy, session_stats_compute, stats_mark_failed


@shared_task(
    bind=True,
    acks_late=True,
    max_retries=8,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
)
def compute_session_stats(self, session_id: int) -> int:  # type: ignore[no-untyped-def]
    try:
        return session_stats_compute(session_id=session_id)
    except SessionBusy as exc:
        raise self.retry(exc=exc, countdown=1) from exc
    except Exception as exc:
        if self.request.retries >= self.max_retries:
            stats_mark_failed(session_id=session_id, error=f"{type(exc).__name__}: {exc}")
            raise
        # Backoff: 2, 4, 8 ... seconds.
        raise self.retry(exc=exc, countdown=min(2 ** (self.request.retries + 1), 120)) from exc


@shared_task(acks_late=True, soft_time_limit=100, time_limit=120)
def sweep_pending_stats() -> int:
    """Re-queue sessions whose steps have waited too long (a lost message, a dead worker)."""
    cutoff = timezone.now() - timedelta(seconds=settings.STATS_SWEEP_AFTER_SECONDS)
    sessions = sessions_with_stale_work(older_than=cutoff)
    for session_id in sessions:
        compute_session_stats.delay(session_id)
    return len(sessions)
