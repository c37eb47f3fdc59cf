"""A per-key request rate limit shared by every web process (kept in Redis)."""

from __future__ import annotations

import logging
import time
from functools import lru_cache

import redis
from django.conf import settings

log = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=0.25, socket_connect_timeout=0.25)


def rate_limit_connect(count: int) -> None:
    """Open `count` connections of the limiter's pool now (one per thread that may
    check at once), so that the first requests a process serves do not each open
    one. Raises redis.RedisError when Redis cannot be reached."""
    if settings.INGEST_RATE_LIMIT <= 0:
        return
    pool = _client(settings.CELERY_BROKER_URL).connection_pool
    opened = []
    try:
        for _ in range(count):
            connection = pool.get_connection()
            opened.append(connection)
            connection.connect()
    finally:
        for connection in opened:
            pool.release(connection)


def rate_limit_check(*, key_prefix: str) -> int | None:
    """None when the request may go on, else the seconds to wait before retrying.

    A fixed one-second window per key. If Redis cannot be reached the request is
    let through: losing the limiter must not lose agents' data.
    """
    limit = settings.INGEST_RATE_LIMIT
    if limit <= 0:
        return None
    window = int(time.time())
    # By the key's prefix (unique and random), not its row id, which databases that
    # share one Redis (test runs side by side) would repeat.
    name = f"cv:rate:{key_prefix}:{window}"
    try:
        client = _client(settings.CELERY_BROKER_URL)
        pipe = client.pipeline()
        pipe.incr(name)
        pipe.expire(name, 2)
        count = pipe.execute()[0]
    except redis.RedisError:
        log.warning("rate limiter unavailable; letting the request through")
        return None
    return 1 if count > limit else None
