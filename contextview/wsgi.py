"""WSGI entry point: ``gunicorn contextview.wsgi``."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextview.settings")

application = get_wsgi_application()
