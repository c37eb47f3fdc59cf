"""contextview: a Django project for viewing the context of LLM sessions."""

# Create the Celery app whenever Django starts, so that @shared_task binds to it.
# This imports neither Django settings nor any app: both load lazily.
from .celery import app as celery_app

__all__ = ("celery_app",)
