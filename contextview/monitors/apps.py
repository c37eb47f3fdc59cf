from __future__ import annotations

from django.apps import AppConfig


class MonitorsConfig(AppConfig):
    name = "contextview.monitors"
    label = "monitors"
    default_auto_field = "django.db.models.BigAutoField"
