"""WSGI entry point: ``gunicorn contextview.wsgi``."""

import gc
import logging
import os
from importlib import import_module

from django.conf import settings
from django.core.wsgi import get_wsgi_application

from contextview.celery import app as celery_app
from contextview.ingest.ratelimit import rate_limit_connect
from contextview.serving import web_threads
from contextview.stats.scheduling import stats_producers_connect

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextview.settings")

application = get_wsgi_application()

# Django imports the URLconf, and with it every view and what they use, on the first
# request a process serves. Done here, a worker pays for that before it takes a
# request: otherwise the first requests after a start wait on it, on every worker at
# once (a second or more in an image that keeps no compiled bytecode).
import_module(settings.ROOT_URLCONF)

# Likewise the first statistics task a worker queues (after its first stored export or
# batch) would finish setting Celery up in the middle of that request: the app's task
# registry, its result backend (found among the installed packages' entry points) and
# its producers. And each of the first requests that threads serve at once would open
# its own connection to Redis, for the rate limiter and for the task: about a tenth of
# the web's time in the first seconds of OTLP exports. Both are opened here, one per
# thread; a broker not there yet is no reason not to serve (requests connect later).
celery_app.finalize(auto=True)
celery_app.backend  # noqa: B018 - made on first use
celery_app.producer_pool  # noqa: B018 - made on first use
_threads = web_threads()
try:
    rate_limit_connect(_threads)
    stats_producers_connect(_threads)
except Exception:  # noqa: BLE001 - whatever the clients raise; requests connect later
    logging.getLogger(__name__).info("broker not reachable at start; connecting on use")

# What is loaded by now lives as long as the process. Left to the garbage collector,
# every full collection walks all of it again: 50-130 ms during which the process
# runs nothing else, a few times a minute under OTLP exports (about 3 ms once frozen).
gc.freeze()
