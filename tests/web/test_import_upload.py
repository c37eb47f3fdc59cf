"""Importing transcripts from the sessions list."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from contextview.projects.models import Membership
from contextview.sessions.models import Session
from tests.api_client import Api

FIXTURE = Path(__file__).parent.parent / "importers" / "fixtures" / "swe_agent.traj"


def _file() -> SimpleUploadedFile:
    return SimpleUploadedFile("swe_agent.traj", FIXTURE.read_bytes())


def test_it_offers_an_import_form_with_progress_to_editors(
    api: Api, login: Callable[..., Client]
) -> None:
    page = login().get("/", {"project": api.project.slug}).content.decode()
    assert f'action="/projects/{api.project.slug}/import/"' in page
    assert 'type="file" name="file" multiple' in page and "<progress" in page
    viewer = login(Membership.Role.VIEWER, username="viewer")
    assert "data-import" not in viewer.get("/", {"project": api.project.slug}).content.decode()


def test_it_imports_a_dropped_file_and_answers_the_script(
    api: Api, login: Callable[..., Client]
) -> None:
    client = login()
    url = f"/projects/{api.project.slug}/import/"
    answer = client.post(url, {"file": _file()}, HTTP_ACCEPT="application/json")
    assert answer.status_code == 201
    assert answer.json()["sessions"][0]["steps"] == 3
    again = client.post(url, {"file": _file()}, HTTP_ACCEPT="application/json")
    assert again.status_code == 200
    plain = client.post(url, {"file": _file()})
    assert plain.status_code == 302
    # The address opened again (a reload, a link) leads to the list's import form.
    back = client.get(url, follow=True)
    assert back.status_code == 200 and f'action="{url}"' in back.content.decode()
    assert Session.objects.filter(project=api.project, external_id="swe_agent").exists()


def test_it_refuses_viewers_and_bad_files(api: Api, login: Callable[..., Client]) -> None:
    url = f"/projects/{api.project.slug}/import/"
    viewer = login(Membership.Role.VIEWER, username="viewer")
    refused = viewer.post(url, {"file": _file()}, HTTP_ACCEPT="application/json")
    assert refused.status_code == 403
    bad = login().post(
        url,
        {"file": SimpleUploadedFile("notes.txt", b"hello\nworld\n")},
        HTTP_ACCEPT="application/json",
    )
    assert bad.status_code == 422 and "not a transcript" in bad.json()["error"]
    assert not Session.objects.exists()


def test_it_imports_with_csrf_checks_on_as_in_production(
    api: Api, login: Callable[..., Client]
) -> None:
    user = login().get("/").wsgi_request.user
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/", {"project": api.project.slug})
    token = client.cookies["csrftoken"].value
    url = f"/projects/{api.project.slug}/import/"
    answer = client.post(
        url, {"csrfmiddlewaretoken": token, "file": _file()}, HTTP_ACCEPT="application/json"
    )
    assert answer.status_code == 201, answer.content
    assert client.post(url, {"file": _file()}).status_code == 403  # no token: refused
