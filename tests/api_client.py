from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from contextview.projects.models import Membership
from contextview.projects.services import (
    IssuedKey,
    apikey_create,
    membership_set,
    project_get_or_create,
)


class Api:
    """A client that speaks to the API with one project's key, as an agent would."""

    def __init__(self, client: Client, issued: IssuedKey) -> None:
        self.client = client
        self.issued = issued
        self.project = issued.key.project

    @property
    def auth(self) -> dict[str, str]:
        return {"HTTP_AUTHORIZATION": f"Bearer {self.issued.secret}"}

    def ingest(self, batch: Any, *, raw: bytes | None = None, **headers: str) -> Any:
        body = raw if raw is not None else json.dumps(batch).encode()
        kwargs = {"content_type": "application/json", **self.auth, **headers}
        return self.client.generic("POST", "/api/v1/ingest", body, **kwargs)

    def ingest_gzip(self, batch: Any) -> Any:
        data = gzip.compress(json.dumps(batch).encode())
        return self.ingest(None, raw=data, HTTP_CONTENT_ENCODING="gzip")

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(f"/api/v1{path}", params, **self.auth)

    def post(self, path: str, payload: Any) -> Any:
        return self.client.post(
            f"/api/v1{path}", json.dumps(payload), content_type="application/json", **self.auth
        )


def signed_in(api: Api, username: str = "reader") -> Client:
    """A test client signed in as a new viewer of the `api` project, for its pages."""
    user = User.objects.create_user(username)  # signed in directly: no password to hash
    membership_set(user=user, project=api.project, role=Membership.Role.VIEWER)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def make_api(db: None) -> Callable[[str], Api]:
    def make(slug: str = "acme") -> Api:
        project, _ = project_get_or_create(slug=slug)
        return Api(Client(), apikey_create(project=project, name="test"))

    return make


@pytest.fixture
def api(make_api: Callable[[str], Api]) -> Api:
    return make_api("acme")


def step(session: str, index: int, messages: list[dict[str, Any]], **body: Any) -> dict[str, Any]:
    return {
        "id": f"{session}-step-{index}",
        "type": "step",
        "body": {"session_id": session, "index": index, "obs": {"messages": messages}, **body},
    }


def results(response: Any) -> list[dict[str, Any]]:
    """The per-event results of an ingest answer, which must be a 207."""
    assert response.status_code == 207, response.content
    return response.json()["results"]
