"""Signing in: the form, and who is signing in for django-axes' throttling of failed
attempts."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.validators import MaxLengthValidator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class SignInForm(AuthenticationForm):
    """Django's sign-in form, refusing a username longer than any user's before trying
    it: django-axes records each failed try's username in 255 characters."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        username = self.fields["username"]
        # Django sets the field's max_length for the browser but checks no length.
        username.validators.append(MaxLengthValidator(username.max_length))


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
