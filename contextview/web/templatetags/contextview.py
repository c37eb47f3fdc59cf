"""Small presentation helpers for the dashboard templates."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from contextview.web.views import plotly_version

register = template.Library()


@register.simple_tag
def plotly_src() -> str:
    return reverse("web-plotly", args=[plotly_version()])


@register.filter
def percent(value: Any) -> str:
    """0.734 -> "73%"; nothing for a missing value."""
    if value is None or value == "":
        return "—"
    try:
        return f"{float(value) * 100:.0f}%"
    except (TypeError, ValueError):
        return "—"


@register.filter
def signed(value: Any) -> str:
    if value is None:
        return "—"
    return f"{value:+d}" if isinstance(value, int) else str(value)


@register.filter
def ratio(value: Any) -> str:
    try:
        return f"{float(value):.2f}"
    except (TypeError, ValueError):
        return "—"


@register.filter
def get(mapping: Any, key: Any) -> Any:
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def first_line(text: str, limit: int = 140) -> str:
    line = (text or "").strip().split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


@register.filter
def tokens(value: Any) -> str:
    return "—" if value is None else f"{value:,}"
