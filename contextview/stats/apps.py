from __future__ import annotations

from django.apps import AppConfig


class StatsConfig(AppConfig):
    name = "contextview.stats"
    label = "stats"
    default_auto_field = "django.db.models.BigAutoField"
