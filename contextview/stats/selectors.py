"""Reads for the statistics workers."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Q

from contextview.sessions.models import Session, Step


def sessions_with_stale_work(*, older_than: datetime) -> list[int]:
    """Sessions with a step, or aggregates, pending since before ``older_than``."""
    steps = (
        Step.objects.filter(stats_status="pending", received_at__lt=older_than)
        .values_list("session_id", flat=True)
        .distinct()
    )
    sessions = Session.objects.filter(
        Q(stats_status="pending") & Q(last_event_at__lt=older_than)
    ).values_list("pk", flat=True)
    return sorted(set(steps) | set(sessions))
