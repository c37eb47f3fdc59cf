"""Monitors in the dashboard: the overview's form, the alerts page, the header's count."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from html import unescape

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
    # Post/redirect/get: reloading the page that shows the secret makes no second
    # monitor (it made one per reload, each firing alerts of its own).
    page = client.post(f"/projects/{api.project.slug}/monitors/", _form(), follow=True)
    assert page.redirect_chain == [(f"/projects/{api.project.slug}/overview/#monitors", 302)]
    text = page.content.decode()
    monitor = api.get("/monitors").json()["monitors"][0]
    assert monitor["filters"]["agent"] == "support-bot" and monitor["window_minutes"] == 10
    assert 'id="monitor-secret"' in text and page["Cache-Control"] == "no-store"
    again = client.get(f"/projects/{api.project.slug}/overview/").content.decode()
    assert "near the limit" in again and 'id="monitor-secret"' not in again
    assert len(api.get("/monitors").json()["monitors"]) == 1
    # How to write a threshold is said in its label (its placeholder was cut at 800 px).
    label = again[: again.index('name="threshold"')].rsplit("<label>", 1)[1]
    assert label.startswith('Threshold <small class="muted">occupancy as 90% or 0.9')


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


def _sent_back(client: Client, overview: str, **change: str) -> str:
    """The page that comes back from the monitor form of the overview at `overview`,
    sent as a browser sends it (to its action) with `change`d fields."""
    page = client.get(overview).content.decode()
    action = re.search(r'<form method="post" action="([^"]+)" class="new-monitor">', page)
    assert action, "no monitor form"
    answer = client.post(unescape(action.group(1)), _form(**change))
    assert answer.status_code == 400
    return answer.content.decode()


def test_a_refused_monitor_comes_back_as_entered_with_the_error_beside_its_field(
    api: Api, login: Callable[..., Client]
) -> None:
    client = login()
    entered = {"metric": "reload_regrets", "threshold": "lots", "window_minutes": "15",
               "mode": "sliding", "email": "oncall@example.com"}  # fmt: skip
    page = _sent_back(
        client, f"/projects/{api.project.slug}/overview/?range=7d&bucket=hour", **entered
    )
    # The range the overview showed (it came back as the last 30 days, per day).
    assert '<option value="7d" selected>' in page and "<option selected>hour</option>" in page
    assert "<option selected>reload_regrets</option>" in page
    typed = {k: v for k, v in {**_form(), **entered}.items() if k != "metric"}
    for name, value in typed.items():
        assert re.search(rf'name="{name}"[^>]* value="{re.escape(value)}"', page), name
    # The error is beside the threshold (not above the form), which is marked and focused.
    threshold = re.search(r'<input name="threshold"[^>]*>', page)
    assert (
        threshold
        and 'aria-invalid="true"' in threshold.group()
        and "autofocus" in threshold.group()
    )
    assert re.search(
        r'<input name="threshold"[^>]*></label><p class="error field-error" id="field-error" '
        r'role="alert">threshold: must be a number',
        page,
    )
    assert page.count("aria-invalid") == 1 and page.count('class="error') == 1
    assert api.get("/monitors").json()["monitors"] == []


def test_a_refused_filter_is_said_beside_its_field_too(
    api: Api, login: Callable[..., Client]
) -> None:
    page = _sent_back(login(), f"/projects/{api.project.slug}/overview/", agent="a" * 201)
    assert re.search(
        r'<input name="agent"[^>]*aria-invalid="true"[^>]*></label>'
        r'<p class="error field-error" id="field-error" role="alert">agent: must be at most 200',
        page,
    )


def test_the_monitor_form_s_address_opened_again_keeps_the_overview_s_range(
    api: Api, login: Callable[..., Client]
) -> None:
    client = login()
    page = client.get(f"/projects/{api.project.slug}/monitors/?range=90d&bucket=week", follow=True)
    assert page.redirect_chain[0][0].startswith(
        f"/projects/{api.project.slug}/overview/?range=90d&"
    )
    assert page.redirect_chain[0][0].endswith("&bucket=week#monitors")
    assert '<option value="90d" selected>' in page.content.decode()


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
    # The list says whose sessions it shows (every filter read "any"), and keeps the
    # alert when another filter is applied.
    assert f"The sessions of alert {alert.pk} (monitor “near the limit”" in listed
    assert f'<input type="hidden" name="alert" value="{alert.pk}">' in listed
    for bad, said in (("abc", "'abc' is not an alert's number"), ("999999", "no alert 999999")):
        response = client.get("/", {"project": api.project.slug, "alert": bad})
        assert response.status_code == 400 and said in unescape(response.content.decode())


def test_an_alert_of_a_fleet_names_its_first_sessions_and_counts_the_rest(
    api: Api, login: Callable[..., Client]
) -> None:
    client = login()
    monitor_id = _monitor(api, client)
    fleet = [f"agent-{k:03d}" for k in range(300)]
    alert = Alert.objects.create(
        project=api.project, monitor_id=monitor_id, value=2, sessions=fleet
    )
    page = client.get(f"/projects/{api.project.slug}/alerts/").content.decode()
    row = page[page.index(fleet[0]) :].split("</td>")[0]
    assert all(f">{sid}</a>" in row for sid in fleet[:8])
    assert fleet[8] not in row
    assert (
        f'and <a href="/?project={api.project.slug}&amp;alert={alert.pk}">292 more in the list</a>'
        in row
    )


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


def test_a_long_firing_alert_stays_listed_behind_a_page_of_newer_resolved_ones(
    api: Api, login: Callable[..., Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("contextview.web.views.ALERTS_RESOLVED_SHOWN", 3)
    client = login()
    monitor_id = _monitor(api, client)
    now = timezone.now()
    Alert.objects.create(
        project=api.project, monitor_id=monitor_id, value=0.97, sessions=["still-hot"],
        started_at=now - timedelta(days=3),
    )  # fmt: skip
    for hour in range(5):
        Alert.objects.create(
            project=api.project, monitor_id=monitor_id, value=0.95, sessions=[f"calm-{hour}"],
            state="resolved", started_at=now - timedelta(hours=hour + 1), resolved_at=now,
        )  # fmt: skip
    text = client.get(f"/projects/{api.project.slug}/alerts/").content.decode()
    assert "still-hot" in text
    assert "calm-0" in text and "calm-2" in text and "calm-3" not in text
    assert "The 2 older resolved alerts are not listed." in text


def test_an_editor_deletes_a_monitor_from_the_overview_and_a_viewer_cannot(
    api: Api, login: Callable[..., Client]
) -> None:
    editor = login()
    monitor_id = _monitor(api, editor)
    Alert.objects.create(project=api.project, monitor_id=monitor_id, value=0.95, sessions=["a"])
    overview = editor.get(f"/projects/{api.project.slug}/overview/?range=7d").content.decode()
    delete = f"/projects/{api.project.slug}/monitors/{monitor_id}/delete/"
    assert f'action="{delete}?range=7d' in overview
    assert 'data-confirm="Delete the monitor “near the limit” and its alerts?"' in overview
    viewer = login(Membership.Role.VIEWER, username="just-looking")
    assert viewer.post(delete).status_code == 403
    assert (
        "Delete the monitor"
        not in viewer.get(f"/projects/{api.project.slug}/overview/").content.decode()
    )
    gone = editor.post(f"{delete}?range=7d")
    assert gone.status_code == 302
    assert gone["Location"].startswith(f"/projects/{api.project.slug}/overview/?range=7d")
    assert gone["Location"].endswith("#monitors")
    assert api.get("/monitors").json()["monitors"] == []
    assert not Alert.objects.filter(monitor_id=monitor_id).exists()
    assert "1 firing" not in editor.get(f"/projects/{api.project.slug}/alerts/").content.decode()
    assert editor.post(delete).status_code == 404
