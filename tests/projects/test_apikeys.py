from __future__ import annotations

from io import StringIO

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
