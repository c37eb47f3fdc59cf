"""The WSGI module read fresh in a subprocess, as a gunicorn worker reads it."""

from __future__ import annotations

from tests.fresh import run_fresh as _run


def test_it_imports_the_urlconf_and_the_views_before_the_first_request() -> None:
    script = (
        "import sys, contextview.wsgi; "
        "print('contextview.urls' in sys.modules, 'contextview.ingest.views' in sys.modules)"
    )
    assert _run(script) == ["True", "True"]


def test_it_leaves_what_it_loaded_out_of_the_garbage_collectors_walks() -> None:
    # Frozen objects are skipped by every collection (none are frozen unless asked).
    script = "import gc, contextview.wsgi; print(gc.get_freeze_count() > 0)"
    assert _run(script) == ["True"]


def test_it_sets_up_celerys_sending_side_and_starts_without_a_broker() -> None:
    # A broker on a port nothing listens on: loading must not fail.
    script = (
        "import os; os.environ['CELERY_BROKER_URL'] = 'redis://127.0.0.1:9/0'; "
        "import contextview.wsgi as w; app = w.celery_app; "
        "print(app.finalized, app._pool is not None)"
    )
    assert _run(script) == ["True", "True"]


def test_it_opens_a_redis_connection_per_thread_before_the_first_request() -> None:
    # The rate limiter's, idle in its pool: the first requests do not each open one.
    script = (
        "import contextview.wsgi; from django.conf import settings; "
        "from contextview.ingest.ratelimit import _client; "
        "print(len(_client(settings.CELERY_BROKER_URL).connection_pool._available_connections))"
    )
    assert _run(script, WEB_THREADS="3") == ["3"]
