from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from contextview.projects.models import ApiKey
from contextview.projects.services import apikey_revoke


@pytest.mark.django_db
def test_it_prints_a_working_key_once_and_stores_only_its_hash() -> None:
    out, err = StringIO(), StringIO()
    call_command("createapikey", "acme", "--create-project", stdout=out, stderr=err)
    secret = out.getvalue().strip().splitlines()[-1]
    key = ApiKey.objects.get()
    assert secret.startswith(f"cv_{key.prefix}_")
    assert secret.encode() not in bytes(key.secret_hash)
    assert "cannot be shown again" in err.getvalue()
    response = Client().get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200

    apikey_revoke(key=key)
    response = Client().get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 401


@pytest.mark.django_db
def test_it_refuses_an_unknown_project_without_create() -> None:
    with pytest.raises(CommandError, match="--create-project"):
        call_command("createapikey", "nowhere", stdout=StringIO(), stderr=StringIO())


@pytest.mark.django_db
def test_it_reuses_the_demo_key_on_every_start_of_the_run_command(tmp_path: Path) -> None:
    key_file = tmp_path / "demo.key"
    for _ in range(3):
        call_command("demosetup", "--key-file", str(key_file), stdout=StringIO())
    assert ApiKey.objects.filter(project__slug="demo", revoked_at__isnull=True).count() == 1
    secret = key_file.read_text().strip()
    response = Client().get("/api/v1/sessions", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert response.status_code == 200

    # A revoked demo key is replaced by a new one, written to the file.
    apikey_revoke(key=ApiKey.objects.get())
    call_command("demosetup", "--key-file", str(key_file), stdout=StringIO())
    assert key_file.read_text().strip() != secret
    assert ApiKey.objects.filter(project__slug="demo", revoked_at__isnull=True).count() == 1


@pytest.mark.django_db
def test_addmember_makes_a_new_projects_first_admin_who_then_sees_it(
    django_user_model: Any,
) -> None:
    call_command("createapikey", "fresh", "--create-project", stdout=StringIO(), stderr=StringIO())
    ops = django_user_model.objects.create_user("ops", password="ops-password-1")
    client = Client()
    client.force_login(ops)
    assert "not a member of any project" in client.get("/").content.decode()

    out = StringIO()
    call_command("addmember", "fresh", "ops", "--role", "admin", stdout=out)
    assert out.getvalue().strip() == "ops is now admin of fresh"
    assert "not a member of any project" not in client.get("/").content.decode()
    assert client.get("/projects/fresh/members/").status_code == 200

    with pytest.raises(CommandError, match="already a member"):
        call_command("addmember", "fresh", "ops")
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("addmember", "fresh", "nobody")
    with pytest.raises(CommandError, match="no project 'gone'"):
        call_command("addmember", "gone", "ops")
