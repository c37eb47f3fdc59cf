from __future__ import annotations

from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "contextview.ingest"
    label = "ingest"
    default_auto_field = "django.db.models.BigAutoField"
