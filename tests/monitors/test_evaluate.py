"""Evaluations running at the same time fire an alert once."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from contextview.monitors.models import Alert, Monitor
from contextview.monitors.services import monitor_create, monitor_evaluate
from contextview.sessions.models import Session, Step, StepStats
from tests.api_client import Api

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_fires_once_when_two_evaluations_race(api: Api) -> None:
    # Stored directly, computed already: no statistics task will rewrite its aggregates.
    session = Session.objects.create(
        project=api.project,
        external_id="hot",
        aggregates={"peak_occupancy": 0.97, "encoding": "cl100k_base"},
        stats_status="ready",
    )
    step = Step.objects.create(
        project=api.project,
        session=session,
        index=0,
        timestamp=timezone.now(),
        before_refs=b"",
        after_refs=b"",
        body_hash=b"0" * 32,
    )
    StepStats.objects.create(step=step, session_id=session.pk, index=0, status="ready", stats={})
    rule: dict[str, Any] = {"name": "n", "metric": "peak_occupancy", "threshold": 0.9}
    monitor = monitor_create(project=api.project, payload=rule).monitor
    outcomes: list[str | None] = []
    barrier = threading.Barrier(4)

    def evaluate() -> None:
        barrier.wait()
        try:
            outcomes.append(monitor_evaluate(monitor_id=monitor.pk, now=timezone.now()))
        finally:
            connection.close()

    threads = [threading.Thread(target=evaluate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("fired") == 1 and outcomes.count(None) == 3
    assert Alert.objects.filter(state="firing").count() == 1
    assert Monitor.objects.get().state == "firing"
    assert monitor_evaluate(monitor_id=monitor.pk) is None  # still holds: nothing new
    Session.objects.update(aggregates={"peak_occupancy": 0.5, "encoding": "cl100k_base"})
    assert monitor_evaluate(monitor_id=monitor.pk) == "resolved"
    assert monitor_evaluate(monitor_id=monitor.pk) is None
    assert list(Alert.objects.values_list("state", flat=True)) == ["resolved"]


def test_it_mails_a_monitor_with_an_email_when_mail_is_configured(
    api: Api, settings: Any, mailoutbox: Any
) -> None:
    from contextview.monitors.services import email_send

    settings.EMAIL_HOST = "mail.example.com"
    rule = {"name": "loss", "metric": "amnesia", "threshold": 1, "email": "ops@example.com"}
    monitor = monitor_create(project=api.project, payload=rule).monitor
    alert = Alert.objects.create(project=api.project, monitor=monitor, value=2, sessions=["a"])
    email_send(alert_id=alert.pk, event="firing")
    assert [m.to for m in mailoutbox] == [["ops@example.com"]]
    assert "loss firing" in mailoutbox[0].subject and '"sessions": ["a"]' in mailoutbox[0].body
    assert mailoutbox[0].subject.endswith("(amnesia 2)")


def test_it_mails_an_occupancy_as_a_percentage(api: Api, settings: Any, mailoutbox: Any) -> None:
    from contextview.monitors.services import email_send

    settings.EMAIL_HOST = "mail.example.com"
    rule = {"name": "full", "metric": "peak_occupancy", "threshold": 1, "email": "ops@example.com"}
    monitor = monitor_create(project=api.project, payload=rule).monitor
    alert = Alert.objects.create(project=api.project, monitor=monitor, value=1.066, sessions=["a"])
    email_send(alert_id=alert.pk, event="firing")
    assert mailoutbox[0].subject == "[contextview] full firing (peak_occupancy 107%)"
