"""Reads for projects and API keys."""

from __future__ import annotations

import hmac
from datetime import timedelta

from django.db import DatabaseError
from django.utils import timezone

from contextview.projects.models import ApiKey, Membership
from contextview.projects.services import (
    DEMO_PROJECT,
    DEMO_USERNAME,
    KEY_PREFIX,
    demo_password,
    secret_digest,
)


def apikey_authenticate(*, secret: str) -> ApiKey | None:
    """The live key a bearer secret belongs to, or None."""
    parts = secret.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_PREFIX or "\x00" in secret:
        return None
    key = (
        ApiKey.objects.select_related("project")
        .filter(prefix=parts[1], revoked_at__isnull=True)
        .first()
    )
    if key is None or not hmac.compare_digest(bytes(key.secret_hash), secret_digest(secret)):
        return None
    now = timezone.now()
    # Marking use on every request would turn each read into a write.
    if key.last_used_at is None or now - key.last_used_at > timedelta(minutes=1):
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key


def demo_login() -> dict[str, str] | None:
    """The demo's login, for the sign-in page, when this server has the demo project
    and its user is a member of it; None otherwise."""
    try:
        demo = Membership.objects.filter(
            project__slug=DEMO_PROJECT, user__username=DEMO_USERNAME
        ).exists()
    except DatabaseError:  # a hint only: the sign-in page renders without it
        return None
    if not demo:
        return None
    return {"username": DEMO_USERNAME, "password": demo_password()}
