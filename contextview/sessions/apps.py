from __future__ import annotations

from django.apps import AppConfig


class SessionsConfig(AppConfig):
    name = "contextview.sessions"
    label = "agent_sessions"
    default_auto_field = "django.db.models.BigAutoField"
