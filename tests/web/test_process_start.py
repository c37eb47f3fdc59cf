"""A web process as gunicorn starts it (``contextview.wsgi``): its connections to Redis
opened before it serves (one per thread), and started all the same without a broker."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import ROOT, _process_env, database_url

pytestmark = pytest.mark.django_db

OPENED = (
    "import contextview.wsgi\n"
    "from django.conf import settings\n"
    "from contextview.ingest.ratelimit import _client\n"
    "pool = _client(settings.CELERY_BROKER_URL).connection_pool\n"
    "print(len(pool._available_connections))\n"
)


def _start(broker: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = _process_env(
        DATABASE_URL=database_url(connection.settings_dict),
        CELERY_BROKER_URL=broker,
        WEB_THREADS="3",
        ALLOWED_HOSTS="127.0.0.1",
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", OPENED], env=env, cwd=ROOT, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    return done, time.monotonic() - started


def test_a_web_process_opens_a_redis_connection_per_thread_before_it_serves() -> None:
    done, _ = _start(settings.CELERY_BROKER_URL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "3"  # the rate limiter's, idle in its pool


def test_a_web_process_starts_without_a_broker() -> None:
    done, took = _start("redis://127.0.0.1:9/0")  # nothing listens on the discard port
    assert done.returncode == 0, done.stderr
    assert took < 60, took
