"""Project admins manage members in the dashboard; nobody else can, and a project
always keeps an admin."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth.models import User
from django.test import Client

from contextview.projects.models import Membership
from contextview.projects.services import project_get_or_create
from tests.api_client import Api


def _role(api: Api, username: str) -> str | None:
    found = Membership.objects.filter(project=api.project, user__username=username).first()
    return found.role if found else None


def test_it_lets_an_admin_add_change_and_remove_a_member(
    api: Api, login: Callable[..., Client]
) -> None:
    admin = login("admin")
    User.objects.create_user("newcomer", password="pw")
    url = f"/projects/{api.project.slug}/members/"
    added = admin.post(url, {"username": "newcomer", "role": "viewer"})
    assert added.status_code == 302 and _role(api, "newcomer") == "viewer"
    page = admin.get(url).content.decode()
    assert 'data-member="newcomer"' in page and 'data-member="admin-user"' in page

    member = Membership.objects.get(project=api.project, user__username="newcomer")
    admin.post(f"{url}{member.pk}/", {"role": "editor"})
    assert _role(api, "newcomer") == "editor"
    admin.post(f"{url}{member.pk}/", {"remove": "1"})
    assert _role(api, "newcomer") is None


def test_it_says_what_was_wrong_with_an_addition(api: Api, login: Callable[..., Client]) -> None:
    admin = login("admin")
    url = f"/projects/{api.project.slug}/members/"
    missing = admin.post(url, {"username": "nobody", "role": "viewer"})
    assert missing.status_code == 400
    assert "username: no user named &#x27;nobody&#x27;" in missing.content.decode()
    again = admin.post(url, {"username": "admin-user", "role": "viewer"})
    assert again.status_code == 400 and "already a member" in again.content.decode()
    User.objects.create_user("newcomer", password="pw")
    bad_role = admin.post(url, {"username": "newcomer", "role": "owner"})
    assert bad_role.status_code == 400 and "role: must be one of viewer, editor, admin" in (
        bad_role.content.decode()
    )
    assert _role(api, "newcomer") is None


def test_it_keeps_the_last_admin(api: Api, login: Callable[..., Client]) -> None:
    admin = login("admin")
    me = Membership.objects.get(project=api.project, user__username="admin-user")
    url = f"/projects/{api.project.slug}/members/{me.pk}/"
    for change in ({"role": "editor"}, {"remove": "1"}):
        refused = admin.post(url, change)
        assert refused.status_code == 400 and "at least one admin" in refused.content.decode()
        assert _role(api, "admin-user") == "admin"
    # With a second admin, the first may step down.
    second = login("admin", username="second-admin")
    assert second.get(f"/projects/{api.project.slug}/members/").status_code == 200
    assert admin.post(url, {"role": "editor"}).status_code == 302
    assert _role(api, "admin-user") == "editor"


def test_it_shows_members_to_others_but_lets_only_admins_change_them(
    api: Api, login: Callable[..., Client]
) -> None:
    editor = login("editor")
    User.objects.create_user("newcomer", password="pw")
    url = f"/projects/{api.project.slug}/members/"
    page = editor.get(url).content.decode()
    assert 'data-member="editor-user"' in page and "Add member" not in page
    assert "only the project's admins add and remove members" in page
    assert editor.post(url, {"username": "newcomer", "role": "admin"}).status_code == 403
    me = Membership.objects.get(project=api.project, user__username="editor-user")
    assert editor.post(f"{url}{me.pk}/", {"role": "admin"}).status_code == 403
    assert _role(api, "newcomer") is None and _role(api, "editor-user") == "editor"


def test_it_hides_other_projects_members(api: Api, login: Callable[..., Client]) -> None:
    admin = login("admin")
    other, _ = project_get_or_create(slug="other")
    stranger = Membership.objects.create(
        project=other, user=User.objects.create_user("stranger"), role="admin"
    )
    assert admin.get("/projects/other/members/").status_code == 404
    mine = f"/projects/{api.project.slug}/members/{stranger.pk}/"
    assert admin.post(mine, {"remove": "1"}).status_code == 404
    assert Membership.objects.filter(pk=stranger.pk).exists()
