"""Who is signing in, for django-axes' throttling of failed attempts."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def client_address(request: HttpRequest) -> str:
    """The address a sign-in comes from.

    Behind the proxy every request arrives from the proxy itself, so the client is
    the last address in X-Forwarded-For: the one the proxy appended. Addresses
    before it are whatever the client chose to send.
    """
    if settings.BEHIND_PROXY:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")[-1].strip()
        if forwarded:
            return forwarded
    return str(request.META.get("REMOTE_ADDR", ""))


def lockout_page(
    request: HttpRequest, response: HttpResponse | None, credentials: dict[str, Any] | None
) -> HttpResponse:
    """What a throttled sign-in gets: 429 and a page saying why and for how long."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    minutes = max(1, round(settings.AXES_COOLOFF_TIME.total_seconds() / 60))
    context = {"username": username, "failures": settings.AXES_FAILURE_LIMIT, "minutes": minutes}
    return render(request, "login_locked.html", context, status=429)
