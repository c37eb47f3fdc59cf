"""Queueing statistics work; called after ingest commits."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger(__name__)

COMPUTE_TASK = "contextview.stats.tasks.compute_session_stats"


def stats_queue_name(n: int) -> str:
    """The name of the n-th statistics queue, which one worker process consumes."""
    return f"stats.{n}"


def stats_queue(session_id: int) -> str | None:
    """The queue of a session's statistics (settings.STATS_QUEUES); None: the default."""
    from django.conf import settings

    count = settings.STATS_QUEUES
    return None if count <= 1 else stats_queue_name(session_id % count)


def stats_route(
    name: str, args: Sequence[Any], kwargs: dict[str, Any], options: dict[str, Any],
    task: Any = None, **_: Any,
) -> dict[str, str] | None:  # fmt: skip
    """Celery's router (``CELERY_TASK_ROUTES``): a session's computation, however it is
    queued (after ingest, by the sweep, as a retry), goes to the session's queue."""
    if name != COMPUTE_TASK or not args or not isinstance(args[0], int):
        return None
    queue = stats_queue(args[0])
    return None if queue is None else {"queue": queue}


def stats_producers_connect(count: int) -> None:
    """Connect `count` of the producers that `stats_schedule` sends with (one per thread
    that may send at once), each with the statistics queues declared, so that the
    first exports and batches a web process stores do not each connect and declare
    while their agents wait. Raises what the broker's client raises when it cannot be
    reached."""
    from django.conf import settings

    from contextview.celery import app

    # Every queue a session's computation may go to (`stats_queue`).
    names = {
        stats_queue(n) or app.conf.task_default_queue for n in range(max(1, settings.STATS_QUEUES))
    }
    queues = [app.amqp.queues[name] for name in sorted(names)]
    held = []
    try:
        for _ in range(count):
            producer = app.producer_pool.acquire(block=True, timeout=5)
            held.append(producer)
            for queue in queues:
                producer.maybe_declare(queue)
    finally:
        for producer in held:
            producer.release()


def stats_schedule(*, session_ids: Sequence[int]) -> None:
    """Queue one computation per session; if the broker is down, the sweep finds them later."""
    from contextview.stats.tasks import compute_session_stats

    for session_id in session_ids:
        try:
            compute_session_stats.delay(session_id)
        except Exception:  # noqa: BLE001 - any broker failure; the data is already committed
            log.warning("could not queue statistics for session %s; the sweep will", session_id)
            return
