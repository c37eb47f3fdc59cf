"""Reports and exports carry each distinct message once: a session whose context is
resent at every call stays a report a few times the size of what the agent sent. The
HTML report too: its chart is inline SVG, not a charting library."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from contextview.projects.services import membership_set
from contextview.sessions.models import Session
from contextview.stats.services import session_stats_compute
from tests.api_client import Api, step
from tests.web.test_big_contexts import compaction_events

STEPS = 120


def _growing(sid: str = "growing") -> list[dict[str, Any]]:
    """Each step adds one 800-character tool result; the context keeps them all."""
    events: list[dict[str, Any]] = [
        {"id": f"{sid}-start", "type": "session", "body": {"session_id": sid, "model": "gpt-4o"}}
    ]
    for i in range(STEPS):
        new = {"id": f"r{i}", "role": "tool", "content": f"result {i}: " + "carrier ok. " * 66}
        events.append(step(sid, i, [{"id": f"r{k}"} for k in range(i)] + [new]))
    return events


def _sizes(api: Api, events: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(what the agent sent, report.json, the session's lines of the export), in bytes."""
    sent = json.dumps({"batch": events}).encode()
    assert api.ingest(None, raw=sent).status_code == 207
    sid = events[0]["body"]["session_id"]
    session_stats_compute(session_id=Session.objects.get(external_id=sid).pk)
    report = b"".join(api.get(f"/sessions/{sid}/report.json").streaming_content)
    export = b"".join(api.get("/export/steps.jsonl").streaming_content)
    return len(sent), len(report), len(export)


@pytest.mark.django_db
@pytest.mark.parametrize("events", [_growing, compaction_events], ids=["growing", "compaction"])
def test_it_keeps_reports_and_exports_a_few_times_the_transcript(api: Api, events: Any) -> None:
    sent, report, export = _sizes(api, events())
    print(f"sent {sent:,} B, report.json {report:,} B, steps.jsonl {export:,} B")
    assert report <= 3 * sent, (sent, report)
    assert export <= 2 * sent, (sent, export)


@pytest.mark.django_db
@pytest.mark.parametrize("events", [_growing, compaction_events], ids=["growing", "compaction"])
def test_it_keeps_the_html_report_a_few_times_the_transcript(api: Api, events: Any) -> None:
    sent, _, _ = _sizes(api, events())
    session = Session.objects.get(project=api.project)
    reader = User.objects.create_user("reader")
    membership_set(user=reader, project=api.project, role="viewer")
    viewer = Client()
    viewer.force_login(reader)
    response = viewer.get(f"/sessions/{session.pk}/report.html")
    page = response.content.decode()
    print(f"sent {sent:,} B, report.html {len(response.content):,} B")
    assert response.status_code == 200 and "<polygon" in page  # the chart is there
    assert len(response.content) <= 3 * sent, (sent, len(response.content))
