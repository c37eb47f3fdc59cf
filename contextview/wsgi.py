"""WSGI entry point: ``gunicorn contextview.wsgi``."""

import gc
import os
from importlib import import_module

from django.conf import settings
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextview.settings")

application = get_wsgi_application()

# Django imports the URLconf, and with it every view and what they use, on the first
# request a process serves. Done here, a worker pays for that before it takes a
# request: otherwise the first requests after a start wait on it, on every worker at
# once (a second or more in an image that keeps no compiled bytecode).
import_module(settings.ROOT_URLCONF)

# What is loaded by now lives as long as the process. Left to the garbage collector,
# every full collection walks all of it again: 50-130 ms during which the process
# runs nothing else, a few times a minute under OTLP exports (about 3 ms once frozen).
gc.freeze()
