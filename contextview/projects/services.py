"""Writes for projects, memberships and API keys."""

from __future__ import annotations

import hashlib
import os
import secrets
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from contextview.core.errors import InputError
from contextview.projects.models import ApiKey, Membership, Project

KEY_PREFIX = "cv"
# The demo's project and login, as demosetup creates them (the password may be set
# with CONTEXTVIEW_DEMO_PASSWORD).
DEMO_PROJECT = "demo"
DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-password"


def demo_password() -> str:
    return os.environ.get("CONTEXTVIEW_DEMO_PASSWORD") or DEMO_PASSWORD


@dataclass(frozen=True)
class IssuedKey:
    key: ApiKey
    secret: str  # the whole key; shown once, never stored


def secret_digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


def project_get_or_create(*, slug: str, name: str | None = None) -> tuple[Project, bool]:
    return Project.objects.get_or_create(slug=slug, defaults={"name": name or slug})


def apikey_create(
    *, project: Project, name: str = "", can_write: bool = True, created_by: User | None = None
) -> IssuedKey:
    """A new key ``cv_<prefix>_<secret>``; the prefix stays visible to tell keys apart."""
    prefix = secrets.token_hex(4)
    while ApiKey.objects.filter(prefix=prefix).exists():
        prefix = secrets.token_hex(4)
    secret = f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(24)}"
    key = ApiKey.objects.create(
        project=project,
        name=name,
        prefix=prefix,
        secret_hash=secret_digest(secret),
        can_write=can_write,
        created_by=created_by,
    )
    return IssuedKey(key=key, secret=secret)


def apikey_revoke(*, key: ApiKey) -> None:
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])


def membership_set(*, user: User, project: Project, role: str) -> Membership:
    membership, _ = Membership.objects.update_or_create(
        user=user, project=project, defaults={"role": role}
    )
    return membership


ROLES = tuple(Membership.Role.values)


def _role(role: str) -> str:
    if role not in ROLES:
        raise InputError("role", f"must be one of {', '.join(ROLES)}, not {role[:40]!r}")
    return role


def _keep_an_admin(project: Project, leaving: Membership) -> None:
    """Refuse a change that would leave the project without an admin.

    The project's admin rows are locked first, so two admins demoting each other at
    once cannot both succeed.
    """
    admins = list(
        Membership.objects.select_for_update()
        .filter(project=project, role=Membership.Role.ADMIN)
        .values_list("pk", flat=True)
    )
    if admins == [leaving.pk]:
        raise InputError(
            "role", "a project needs at least one admin: make another member admin first"
        )


@transaction.atomic
def membership_add(*, project: Project, username: str, role: str) -> Membership:
    """Add an existing user to the project with `role`."""
    _role(role)
    username = username.strip()
    if not username:
        raise InputError("username", "required")
    user = User.objects.filter(username=username).first()
    if user is None:
        raise InputError(
            "username", f"no user named {username[:150]!r}: they need an account first"
        )
    if Membership.objects.filter(project=project, user=user).exists():
        raise InputError("username", f"{username} is already a member: change their role below")
    return Membership.objects.create(project=project, user=user, role=role)


@transaction.atomic
def membership_role_change(*, membership: Membership, role: str) -> Membership:
    _role(role)
    if membership.role == Membership.Role.ADMIN and role != Membership.Role.ADMIN:
        _keep_an_admin(membership.project, membership)
    membership.role = role
    membership.save(update_fields=["role"])
    return membership


@transaction.atomic
def membership_remove(*, membership: Membership) -> None:
    if membership.role == Membership.Role.ADMIN:
        _keep_an_admin(membership.project, membership)
    membership.delete()


@transaction.atomic
def demo_setup(
    *, username: str, password: str, project_slug: str, secret: str | None = None
) -> tuple[Project, IssuedKey]:
    """The demo project, an admin user who belongs to it, and its ingest key: `secret`
    again when it is still a live key of the demo project that may write (each start of
    the run command would otherwise leave one more active key), else a new one."""
    from contextview.projects.selectors import apikey_authenticate

    project, _ = project_get_or_create(slug=project_slug, name="Demo agents")
    user, created = User.objects.get_or_create(username=username)
    if created or not user.check_password(password):
        user.set_password(password)
        user.is_staff = True
        user.save()
    membership_set(user=user, project=project, role=Membership.Role.ADMIN)
    key = apikey_authenticate(secret=secret) if secret else None
    if secret and key is not None and key.project_id == project.pk and key.can_write:
        return project, IssuedKey(key=key, secret=secret)
    return project, apikey_create(project=project, name="demo agents", created_by=user)
