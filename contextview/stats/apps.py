from __future__ import annotations

from django.apps import AppConfig


class StatsConfig(AppConfig):
    name = "contextview.stats"
    label = "stats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Create the Celery app in every Django process (web, worker, commands), so
        # that @shared_task binds to it and sends to the configured broker.
        from contextview import celery  # noqa: F401
