"""Queueing statistics work; called after ingest commits."""

from __future__ import annotations

import logging
from collections.abc import Sequence

log = logging.getLogger(__name__)


def stats_schedule(*, session_ids: Sequence[int]) -> None:
    """Queue one computation per session; if the broker is down, the sweep finds them later."""
    from contextview.stats.tasks import compute_session_stats

    for session_id in session_ids:
        try:
            compute_session_stats.delay(session_id)
        except Exception:  # noqa: BLE001 - any broker failure; the data is already committed
            log.warning("could not queue statistics for session %s; the sweep will", session_id)
            return
