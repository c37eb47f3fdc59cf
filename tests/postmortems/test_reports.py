from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from contextview.core.errors import InputError
from contextview.postmortems.models import Annotation
from contextview.postmortems.services import (
    NotAllowed,
    annotation_create,
    annotation_delete,
    annotation_update,
    incident_mark,
    incident_resolve,
)
from contextview.sessions.models import Session, Step
from contextview.stats.services import session_stats_compute
from tests.api_client import Api, step

LOG = "upstream inventory-svc timed out after 3 s, status 504 for order SO20260101007"


@pytest.fixture
def lossy_session(api: Api) -> Session:
    batch = [
        {
            "id": "s",
            "type": "session",
            "body": {"session_id": "orders", "agent": "ops", "pinned": ["answer in a table"]},
        },
        step(
            "orders",
            0,
            [{"id": "log", "role": "tool", "tool": "grep", "content": LOG}],
            action={
                "action": "summarize",
                "target": "log",
                "reason": "long log",
                "result": {"id": "sum", "role": "tool", "content": "inventory timed out"},
            },
        ),
        step("orders", 1, [{"id": "sum"}]),
    ]
    assert api.ingest({"batch": batch}).status_code == 207
    session = Session.objects.get(external_id="orders")
    session_stats_compute(session_id=session.pk)
    return session


@pytest.mark.django_db
def test_it_reports_lost_entities_annotations_and_directives_in_markdown(
    api: Api, lossy_session: Session
) -> None:
    alice = User.objects.create(username="alice")
    annotation_create(
        session=lossy_session,
        author=alice,
        step_index=0,
        label="root-cause",
        body="The summary dropped **SO20260101007**.",
    )
    incident_mark(session=lossy_session, user=alice, title="Order lost in summary", severity="sev2")
    api.post("/sessions/orders/directives", {"type": "restore", "targets": ["log"], "step": 0})

    response = api.get("/sessions/orders/report.md")
    assert response.status_code == 200
    text = response.content.decode()
    assert "Incident (sev2):** Order lost in summary" in text
    assert "### Step 0" in text
    assert "SO20260101007" in text.split("## Lost entities")[1]
    assert "**root-cause** by alice on step 0" in text
    assert "restore log: pending" in text


@pytest.mark.django_db
def test_the_markdown_report_heads_the_figures_and_the_incidents_state_as_the_page_does(
    api: Api, lossy_session: Session
) -> None:
    alice = User.objects.create(username="alice")
    annotation_create(
        session=lossy_session, author=alice, step_index=None, label="root-cause",
        body="## Root cause\n\nThe summary dropped the order id.",
    )  # fmt: skip
    incident = incident_mark(session=lossy_session, user=alice, title="Lost", severity="sev2")
    note = annotation_create(
        session=lossy_session, author=alice, step_index=0, label="note", body="First take."
    )
    Annotation.objects.filter(pk=note.pk).update(created_at=note.created_at - timedelta(hours=1))
    note.refresh_from_db()
    annotation_update(annotation=note, user=alice, body="Second take.", label="note")
    text = api.get("/sessions/orders/report.md").content.decode()
    assert "**Incident (sev2):** Lost (open), marked by alice " in text
    assert ", edited " in text.split("Second take.")[0].rsplit("**note**", 1)[1]
    data = json.loads(b"".join(api.get("/sessions/orders/report.json").streaming_content))
    assert data["report"]["incident"]["marked_by"] == "alice"
    edited = [a["edited_at"] for a in data["report"]["annotations"]]
    assert edited.count(None) == 1 and len(edited) == 2
    aggregates = Session.objects.get(pk=lossy_session.pk).aggregates
    peak = aggregates["peak_occupancy"]
    peak = "-" if peak is None else f"{peak:.0%}"
    saved = f"tokens saved: {aggregates['tokens_saved']:,}"
    assert f"- peak occupancy: {peak}; {saved}; entity retention: " in text
    assert "- flags: entity_loss x 1" in text
    # The note's heading goes under the report's Annotations, not beside it.
    assert "\n##### Root cause\n" in text and "\n## Root cause" not in text
    incident_resolve(incident=incident, user=alice)
    text = api.get("/sessions/orders/report.md").content.decode()
    assert "**Incident (sev2):** Lost (resolved " in text and " by alice)" in text


@pytest.mark.django_db
def test_it_exports_the_report_and_every_step_as_json(api: Api, lossy_session: Session) -> None:
    response = api.get("/sessions/orders/report.json")
    data = json.loads(b"".join(response.streaming_content))
    assert data["report"]["session"]["session_id"] == "orders"
    assert [s["index"] for s in data["steps"]] == [0, 1]
    assert data["steps"][0]["folds"] == [{"op_index": 0, "result_id": "sum", "originals": ["log"]}]
    first, second = data["steps"]
    before = [first["messages"][str(n)] for n in first["before"]]
    assert before[0]["id"] == "log" and before[0]["tokens"] > 0
    # A message the first step gave is only named by the second.
    assert (
        second["before"][0] == first["after"][0]
        and str(second["before"][0]) not in (second["messages"])
    )
    flagged = data["report"]["flagged_steps"][0]
    assert {f["flag"] for f in flagged["flags"]} >= {"entity_loss", "pinned_missing"}


@pytest.mark.django_db
def test_it_lets_only_the_author_change_an_annotation(lossy_session: Session) -> None:
    alice, bob = User.objects.create(username="alice"), User.objects.create(username="bob")
    note = annotation_create(session=lossy_session, author=alice, body="look at step 0")
    with pytest.raises(NotAllowed):
        annotation_update(annotation=note, user=bob, body="mine now", label="note")
    with pytest.raises(NotAllowed):
        annotation_delete(annotation=note, user=bob)
    annotation_update(annotation=note, user=alice, body="step 0 lost the order", label="root-cause")
    annotation_delete(annotation=note, user=alice)
    with pytest.raises(InputError, match="step"):
        annotation_create(session=lossy_session, author=alice, body="x", step_index=9)


@pytest.mark.django_db
def test_it_refuses_an_incident_title_longer_than_it_keeps(lossy_session: Session) -> None:
    alice = User.objects.create(username="alice")
    with pytest.raises(InputError, match="title: at most 200 characters, not 201"):
        incident_mark(session=lossy_session, user=alice, title="t" * 201, severity="sev2")
    # Kept whole, never cut: 200 characters once the spaces around them are trimmed.
    title = "Order SO20260101007 lost in the summary; " * 4 + "x" * 36
    incident = incident_mark(
        session=lossy_session, user=alice, title=f"  {title}\n", severity="sev2"
    )
    assert len(title) == 200 and incident.title == title


def test_it_renders_annotation_markdown_without_active_content() -> None:
    from contextview.postmortems.markdown import render_markdown

    html = render_markdown(
        "**bold** <script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=alert(1)>"
    )
    assert "<strong>bold</strong>" in html
    # What the markup tried is shown as text, never as elements or links.
    assert "<script" not in html and "<img" not in html and "href=" not in html
    assert "&lt;script&gt;" in html


@pytest.mark.django_db
def test_it_writes_agent_text_into_markdown_as_literal_text(api: Api) -> None:
    hostile = "<img src=x onerror=alert(1)> **bold** [link](http://evil.example)"
    batch = [
        step(
            "s",
            0,
            [{"id": "log", "role": "tool", "content": LOG}],
            reason=hostile,
            action={
                "action": "summarize",
                "target": "log",
                "result": {"id": "sum", "role": "tool", "content": "timed out"},
            },
        ),
    ]
    api.ingest({"batch": batch})
    session_stats_compute(session_id=Session.objects.get(external_id="s").pk)
    text = api.get("/sessions/s/report.md").content.decode()
    reason = next(line for line in text.splitlines() if line.startswith("Reason:"))
    # Every sign Markdown or HTML could act on comes escaped.
    assert not re.search(r"(?<!\\)[<>*\[\]]", reason.removeprefix("Reason: "))
    assert "\\<img src=x onerror=alert(1)\\>" in reason


@pytest.mark.django_db
def test_it_writes_a_markdown_report_a_reader_can_read(api: Api) -> None:
    batch = [
        {
            "id": "start",
            "type": "session",
            "body": {
                "session_id": "order-debug-bot-7",
                "agent": "order-debug-bot",
                "budget": {"max_tokens": 16000, "reserved_tokens": 1200,
                           "partitions": {"tool": 4800}},
            },
        },
        step("order-debug-bot-7", 0, [{"id": "u1", "role": "user", "content": "hi"}]),
    ]  # fmt: skip
    api.ingest({"batch": batch})
    session = Session.objects.get(external_id="order-debug-bot-7")
    session_stats_compute(session_id=session.pk)
    annotation_create(
        session=session,
        author=User.objects.create(username="alice"),
        body="**Look** <script>alert(1)</script> here",
    )
    text = api.get("/sessions/order-debug-bot-7/report.md").content.decode()
    assert "- budget: 16,000 tokens, 1,200 reserved; partitions: tool 4,800" in text
    assert "{" not in text.split("- budget:")[1].splitlines()[0]
    assert "# Session order-debug-bot-7" in text and "agent: order-debug-bot;" in text
    assert "<script" not in text and "**Look** &lt;script>alert(1)" in text


@pytest.mark.django_db
def test_it_sets_every_section_of_a_markdown_report_apart(api: Api) -> None:
    batch = [step("quiet", 0, [{"id": "u1", "role": "user", "content": "hi"}])]
    api.ingest({"batch": batch})
    session = Session.objects.get(external_id="quiet")
    session_stats_compute(session_id=session.pk)
    text = api.get("/sessions/quiet/report.md").content.decode()
    assert "No step raised a flag." in text and "No annotations." in text
    lines = text.splitlines()
    # A heading stands after a blank line, never glued to the sentence before it.
    assert all(lines[n - 1] == "" for n, line in enumerate(lines) if n and line.startswith("#"))
    annotation_create(session=session, author=User.objects.create(username="_ops_"), body="x")
    text = api.get("/sessions/quiet/report.md").content.decode()
    assert "**note** by \\_ops\\_ on session" in text  # a username read as is, not in italics


@pytest.mark.django_db
def test_an_incident_edited_by_another_stays_marked_by_its_first_author(
    lossy_session: Session,
) -> None:
    alice, bob = User.objects.create(username="alice"), User.objects.create(username="bob")
    incident_mark(session=lossy_session, user=alice, title="Order id lost", severity="sev3")
    edited = incident_mark(session=lossy_session, user=bob, title="Order id lost", severity="sev1")
    assert (edited.severity, edited.created_by.username) == ("sev1", "alice")


@pytest.mark.django_db
def test_the_markdown_report_writes_counts_in_thousands(api: Api) -> None:
    log = " ".join(f"order SO2026{n:07d} shipped from warehouse {n % 7}" for n in range(400))
    batch = [
        step("bulky", 0, [{"id": "log", "role": "tool", "tool": "grep", "content": log}],
             action={"action": "summarize", "target": "log", "reason": "long log",
                     "result": {"id": "sum", "role": "tool", "content": "400 orders shipped"}}),
        step("bulky", 1, [{"id": "sum"}]),
    ]  # fmt: skip
    assert api.ingest({"batch": batch}).status_code == 207
    session = Session.objects.get(external_id="bulky")
    session_stats_compute(session_id=session.pk)
    session.refresh_from_db()
    refetch = {"tool": "grep", "lost_at": 0, "refetched_at": 1, "tokens": 7051}
    Session.objects.filter(pk=session.pk).update(
        aggregates={**session.aggregates, "refetches": [refetch]}
    )
    text = api.get("/sessions/bulky/report.md").content.decode()
    stats = Step.objects.with_stats().get(session=session, index=0).stats
    before, (op,) = stats["tokens"]["before"], stats["ops"]
    assert before > 1000 and op["tokens_in"] > 1000
    assert f"| 0 | - | {before:,} | " in text and f"| {before} |" not in text
    assert f"log → sum: {op['tokens_in']:,} → {op['tokens_out']:,} tokens" in text
    assert "| grep | 0 | 1 | 7,051 |" in text
