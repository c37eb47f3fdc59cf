"""WSGI entry point: ``gunicorn contextview.wsgi``."""

import gc
import os
from importlib import import_module

from django.conf import settings
from django.core.wsgi import get_wsgi_application

from contextview.celery import app as celery_app

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextview.settings")

application = get_wsgi_application()

# Django imports the URLconf, and with it every view and what they use, on the first
# request a process serves. Done here, a worker pays for that before it takes a
# request: otherwise the first requests after a start wait on it, on every worker at
# once (a second or more in an image that keeps no compiled bytecode).
import_module(settings.ROOT_URLCONF)

# Likewise the first statistics task a worker queues (after its first stored export or
# batch) would finish setting Celery up in the middle of that request: the app's task
# registry and its producers, 12 of the 22-29 ms that first task took. Neither connects
# to the broker: the first task does, when there is one to send.
celery_app.finalize(auto=True)
celery_app.producer_pool  # noqa: B018 - made on first use

# What is loaded by now lives as long as the process. Left to the garbage collector,
# every full collection walks all of it again: 50-130 ms during which the process
# runs nothing else, a few times a minute under OTLP exports (about 3 ms once frozen).
gc.freeze()
