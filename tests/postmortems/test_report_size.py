"""Reports and exports carry each distinct message once: a session whose context is
resent at every call stays a report a few times the size of what the agent sent. The
HTML report too: its chart is inline SVG, not a charting library."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from contextview.core.distinct import unranged
from contextview.projects.services import membership_set
from contextview.sessions.models import Session, Step
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


def _by_runs(sid: str = "by-runs", start: int = 2000, steps: int = 40) -> list[dict[str, Any]]:
    """A context of `start` short messages, then one tool result more a step, each step
    sent as a run of the one before and its new message (the SDK's and importers' form)."""
    first = [{"id": f"m{k}", "role": "user", "content": f"note {k}"} for k in range(start)]
    events = [{"id": f"{sid}-start", "type": "session", "body": {"session_id": sid}}]
    events.append(step(sid, 0, first))
    for i in range(1, steps):
        new = {"id": f"r{i}", "role": "tool", "content": f"result {i}"}
        event = step(sid, i, [{"$run": [0, start + i - 1]}, new])
        event["body"]["obs"]["$base"] = i - 1
        events.append(event)
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
@pytest.mark.parametrize(
    "events", [_growing, compaction_events, _by_runs], ids=["growing", "compaction", "by-runs"]
)
def test_it_keeps_reports_and_exports_a_few_times_the_transcript(api: Api, events: Any) -> None:
    sent, report, export = _sizes(api, events())
    print(f"sent {sent:,} B, report.json {report:,} B, steps.jsonl {export:,} B")
    assert report <= 3 * sent, (sent, report)
    assert export <= 2 * sent, (sent, export)


@pytest.mark.django_db
def test_it_writes_a_long_context_as_ranges_of_its_messages_numbers(api: Api) -> None:
    _sizes(api, _by_runs())
    report = json.loads(b"".join(api.get("/sessions/by-runs/report.json").streaming_content))
    last = report["steps"][-1]
    # 2,039 messages: those of the first step, numbered as they came, then one a step.
    assert len(json.dumps(last["before"])) < 200, last["before"]
    numbers = {}
    for s in report["steps"]:
        numbers.update(s["messages"])
    ids = [numbers[str(n)]["id"] for n in unranged(last["before"])]
    read = api.get("/sessions/by-runs/steps/39").json()
    assert ids == [m["id"] for m in read["before"]] and len(ids) == 2039
    (row,) = [
        json.loads(line)
        for line in b"".join(api.get("/export/steps.jsonl").streaming_content).splitlines()
        if json.loads(line)["index"] == 39
    ]
    assert unranged(row["obs"]) == unranged(last["before"]) and len(json.dumps(row["obs"])) < 200


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


# What an agent that rebuilds its context at every call resends (the demo's order
# audit): the same long tool result, which its builder truncates again at every step.
ORDERS = " ".join(
    f"order SO2026{n:07d} shipped by ZTO{n:09d} on 2026-01-{n % 28 + 1:02d};" for n in range(300)
)


def rebuilt_events(sid: str, steps: int) -> list[dict[str, Any]]:
    """`steps` flagged steps (a budget the context is always over), each with a new
    1 KB question and the same 20 KB tool result, which it truncates to one line."""
    events: list[dict[str, Any]] = [
        {"id": f"{sid}-start", "type": "session",
         "body": {"session_id": sid, "model": "gpt-4o", "budget": {"max_tokens": 1000}}},
    ]  # fmt: skip
    for i in range(steps):
        asked = [{"id": f"q{k}"} for k in range(i)]
        new = {"id": f"q{i}", "role": "user", "content": f"question {i}: " + "which orders? " * 70}
        tool = {"id": "orders", "role": "tool", "content": ORDERS}
        short = {"id": "orders", "role": "tool", "content": "300 orders shipped"}
        cut = {"action": "truncate", "target": "orders", "result": short}
        events.append(step(sid, i, [*asked, new, tool], action=cut))
    return events


def _report_sizes(api: Api, sid: str, steps: int) -> tuple[int, int]:
    """(report.html, report.md) of a `rebuilt_events` session of `steps` steps, in bytes."""
    assert api.ingest({"batch": rebuilt_events(sid, steps)}).status_code == 207
    session = Session.objects.get(project=api.project, external_id=sid)
    session_stats_compute(session_id=session.pk)
    flagged = [s for s in Step.objects.filter(session=session).with_stats() if s.stats["flags"]]
    assert len(flagged) == steps
    viewer = Client()
    viewer.force_login(User.objects.get_or_create(username="reader")[0])
    page = viewer.get(f"/sessions/{session.pk}/report.html")
    markdown = api.get(f"/sessions/{sid}/report.md")
    assert page.status_code == markdown.status_code == 200
    return len(page.content), len(markdown.content)


@pytest.mark.django_db
def test_it_grows_a_report_with_what_changed_not_with_steps_times_context(api: Api) -> None:
    membership_set(user=User.objects.create_user("reader"), project=api.project, role="viewer")
    html_20, md_20 = _report_sizes(api, "twenty", 20)
    html_40, md_40 = _report_sizes(api, "forty", 40)
    # Each step resends the same 20 KB result, truncates it and loses the same entities:
    # the report writes them once, and a step more costs it its timeline row, flags and
    # operations (written at every step, they cost some 80 KB of HTML a step).
    print(f"20 steps: html {html_20:,} md {md_20:,}; 40 steps: html {html_40:,} md {md_40:,}")
    assert (html_40 - html_20) / 20 < len(ORDERS) / 4, (html_20, html_40)
    assert (md_40 - md_20) / 20 < len(ORDERS) / 10, (md_20, md_40)
