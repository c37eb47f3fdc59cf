"""The replay form of the session page, rendered with what it needs."""

from __future__ import annotations

from typing import Any

from django import template

from contextview.web.replay_views import replay_form_context

register = template.Library()


@register.inclusion_tag("session/_replay_form.html")
def replay_form(session: Any) -> dict[str, Any]:
    return {"session": session, **replay_form_context(session)}
