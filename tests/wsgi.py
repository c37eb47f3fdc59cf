"""contextview.wsgi for the ``gunicorn_api`` fixture: Celery messages go to the test queue."""

import os

from contextview.celery import app as celery_app

celery_app.conf.task_default_queue = os.environ["CONTEXTVIEW_TEST_CELERY_QUEUE"]

from contextview.wsgi import application  # noqa: E402

__all__ = ["application"]
