"""Monitors in the dashboard: the overview's form, the alerts page, the header's count."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from contextview.monitors.models import Alert
from contextview.projects.models import Membership
from tests.api_client import Api

pytestmark = pytest.mark.django_db


def _form(**change: str) -> dict[str, str]:
    return {
        "name": "near the limit",
        "metric": "peak_occupancy",
        "threshold": "0.9",
        "window_minutes": "10",
        "agent": "support-bot",
        "webhook_url": "https://hooks.example.com/cv",
        **change,
    }


def _monitor(api: Api, client: Client) -> int:
    """A monitor made with the overview's form; its id."""
    client.post(f"/projects/{api.project.slug}/monitors/", _form())
    return int(api.get("/monitors").json()["monitors"][0]["id"])


def test_it_creates_a_monitor_from_the_overview_and_shows_its_secret_once(
    api: Api, login: Callable[..., Client]
) -> None:
    client = login()
    page = client.post(f"/projects/{api.project.slug}/monitors/", _form())
    assert page.status_code == 200
    text = page.content.decode()
    monitor = api.get("/monitors").json()["monitors"][0]
    assert monitor["filters"]["agent"] == "support-bot" and monitor["window_minutes"] == 10
    assert 'id="monitor-secret"' in text and page["Cache-Control"] == "no-store"
    again = client.get(f"/projects/{api.project.slug}/overview/").content.decode()
    assert "near the limit" in again and 'id="monitor-secret"' not in again


def test_the_address_a_new_monitor_leaves_in_the_bar_leads_back_to_the_overview(
    api: Api, login: Callable[..., Client]
) -> None:
    # After the form, the bar reads /monitors/: opened again, it was an empty 405 page.
    client = login()
    page = client.get(f"/projects/{api.project.slug}/monitors/", follow=True)
    assert page.redirect_chain == [(f"/projects/{api.project.slug}/overview/#monitors", 302)]
    assert "Create monitor" in page.content.decode()
    assert api.get("/monitors").json()["monitors"] == []


def test_it_names_the_field_of_a_bad_monitor_on_the_overview(
    api: Api, login: Callable[..., Client]
) -> None:
    page = login().post(f"/projects/{api.project.slug}/monitors/", _form(threshold="lots"))
    assert page.status_code == 400
    assert "threshold: must be a number" in page.content.decode()
    assert api.get("/monitors").json()["monitors"] == []


def test_it_lets_only_editors_create_monitors(api: Api, login: Callable[..., Client]) -> None:
    viewer = login(Membership.Role.VIEWER)
    assert viewer.post(f"/projects/{api.project.slug}/monitors/", _form()).status_code == 403


def test_it_lists_firing_alerts_first_and_counts_them_in_the_header(
    api: Api, login: Callable[..., Client]
) -> None:
    client = login()
    monitor_id = _monitor(api, client)
    now = timezone.now()
    Alert.objects.create(
        project=api.project, monitor_id=monitor_id, value=0.95, sessions=["old"],
        state="resolved", started_at=now - timedelta(hours=2), resolved_at=now,
    )  # fmt: skip
    Alert.objects.create(
        project=api.project, monitor_id=monitor_id, value=0.97, sessions=["team/a"],
        started_at=now - timedelta(hours=3),
    )  # fmt: skip
    text = client.get(f"/projects/{api.project.slug}/alerts/").content.decode()
    assert text.index("team/a") < text.index("old")  # firing first, though older
    assert f'href="/p/{api.project.slug}/team/a/"' in text
    assert "1 firing" in text


def test_it_filters_the_sessions_list_on_an_alerts_sessions(
    api: Api, login: Callable[..., Client]
) -> None:
    for sid in ("hot-1", "hot-2", "calm"):
        head = {"id": sid, "type": "session", "body": {"session_id": sid}}
        assert api.ingest({"batch": [head]}).status_code == 207
    client = login()
    monitor_id = _monitor(api, client)
    alert = Alert.objects.create(
        project=api.project, monitor_id=monitor_id, value=2, sessions=["hot-1", "hot-2"]
    )
    alerts = client.get(f"/projects/{api.project.slug}/alerts/").content.decode()
    assert f"alert={alert.pk}" in alerts
    listed = client.get("/", {"project": api.project.slug, "alert": alert.pk}).content.decode()
    assert "hot-1" in listed and "hot-2" in listed and "calm" not in listed


def test_it_shows_occupancy_as_a_percentage_and_counts_with_separators(
    api: Api, login: Callable[..., Client]
) -> None:
    client = login()
    client.post(f"/projects/{api.project.slug}/monitors/", _form(threshold="92.5%"))
    rule = _form(name="lost a lot", metric="amnesia", threshold="1000")
    client.post(f"/projects/{api.project.slug}/monitors/", rule)
    monitors = api.get("/monitors").json()["monitors"]
    assert {m["name"]: m["threshold"] for m in monitors}["near the limit"] == 0.925  # "92.5%"
    by_name = {m["name"]: m["id"] for m in monitors}
    Alert.objects.create(
        project=api.project, monitor_id=by_name["near the limit"], value=1.066, sessions=["a"]
    )
    Alert.objects.create(
        project=api.project, monitor_id=by_name["lost a lot"], value=1234.0, sessions=["b"]
    )
    alerts = client.get(f"/projects/{api.project.slug}/alerts/").content.decode()
    assert "(peak_occupancy ≥ 92.5%)" in alerts and '<td class="num">107%</td>' in alerts
    assert "(amnesia ≥ 1,000)" in alerts and '<td class="num">1,234</td>' in alerts
    assert "1.066" not in alerts
    overview = client.get(f"/projects/{api.project.slug}/overview/").content.decode()
    assert '<td class="num">92.5%</td>' in overview and '<td class="num">1,000</td>' in overview


def test_it_lists_an_alerts_session_whose_id_no_address_keeps(
    api: Api, login: Callable[..., Client]
) -> None:
    # An id with a newline has no permalink: reversing one made the alerts page a 500.
    client = login()
    monitor_id = _monitor(api, client)
    alert = Alert.objects.create(
        project=api.project, monitor_id=monitor_id, value=2, sessions=["line\nbreak", ".."]
    )
    response = client.get(f"/projects/{api.project.slug}/alerts/")
    assert response.status_code == 200
    in_list = f'href="/?project={api.project.slug}&amp;alert={alert.pk}">line\nbreak</a>'
    assert in_list in response.content.decode()
