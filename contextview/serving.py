"""How many web processes serve requests and how many threads each runs.

``gunicorn.conf.py`` sizes the server by them, and each web process opens a
connection to Redis per thread as it starts (``contextview.wsgi``): one rule for
both, read from ``WEB_WORKERS`` and ``WEB_THREADS`` (unset or empty: the defaults).
"""

from __future__ import annotations

import os

DEFAULT_THREADS = 4
MAX_DEFAULT_WORKERS = 9


def _count(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {raw!r}") from None
    if value < 1:
        raise ValueError(f"{name} must be at least 1, not {value}")
    return value


def web_workers() -> int:
    """Web processes: two per core and one more, at most nine (``WEB_WORKERS``)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return _count("WEB_WORKERS", min(MAX_DEFAULT_WORKERS, 2 * (cores or 1) + 1))


def web_threads() -> int:
    """Threads per web process (``WEB_THREADS``)."""
    return _count("WEB_THREADS", DEFAULT_THREADS)
