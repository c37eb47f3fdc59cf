"""The Celery application of contextview.

``celery -A contextview worker`` and ``celery -A contextview beat`` find ``app``
here. Configuration comes from Django settings whose names start with
``CELERY_`` (``CELERY_BROKER_URL`` and friends); tasks are found in each
installed app's ``tasks`` module.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextview.settings")

app = Celery("contextview")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
