"""contextview.wsgi for the test servers (``gunicorn_api`` and the like).

Celery messages go to the test queue, and pages name static files unhashed, as in
the in-process tests (``_static_files_in_place`` in conftest): no test runs
collectstatic before it starts a server, except the one that tests its output.
"""

import os

from contextview.celery import app as celery_app

celery_app.conf.task_default_queue = os.environ["CONTEXTVIEW_TEST_CELERY_QUEUE"]

from django.conf import settings  # noqa: E402

from contextview.wsgi import application  # noqa: E402
from tests.plainstatic import plain_storages  # noqa: E402

if not os.environ.get("CONTEXTVIEW_TEST_HASHED_STATIC"):
    # Nothing has opened a storage yet: the first use reads this.
    settings.STORAGES = plain_storages(settings.STORAGES)

__all__ = ["application"]
