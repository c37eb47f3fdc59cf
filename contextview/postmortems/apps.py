from __future__ import annotations

from django.apps import AppConfig


class PostmortemsConfig(AppConfig):
    name = "contextview.postmortems"
    label = "postmortems"
    default_auto_field = "django.db.models.BigAutoField"
