"""A session imported from a transcript has no agent behind it: the pages say it was
imported, where a live session says running or stale, and offer no mode switch."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from contextview.sessions.models import Session
from tests.api_client import Api, step
from tests.importers.test_import_api import fixture, upload
from tests.web.test_imported_task_line import _claude_code, _user

pytestmark = pytest.mark.django_db


def _row(listing: str, session_id: str) -> str:
    match = re.search(rf"<tr>(?:(?!</tr>).)*?{re.escape(session_id)}.*?</tr>", listing, re.S)
    assert match, session_id
    return match.group(0)


def test_it_shows_an_imported_session_as_imported_without_a_mode_switch(
    api: Api, login: Callable[..., Client], seed: Callable[..., Session], tmp_path: Path
) -> None:
    transcript = _claude_code("cc-refund", _user("Why was refund R-77 sent twice?"))
    assert upload(api, ("cc-refund.jsonl", transcript)).status_code == 201
    # The same file again stores nothing, and the session stays imported.
    assert upload(api, ("cc-refund.jsonl", transcript)).status_code == 200
    path = tmp_path / "cc-ledger.jsonl"
    path.write_bytes(_claude_code("cc-ledger", _user("Reconcile the ledger for May.")))
    call_command("importtranscript", api.project.slug, str(path))
    # An agent sending its steps as it runs, for comparison.
    seed([step("live-bot", 0, [{"id": "u1", "role": "user", "content": "Hello"}])])
    # Long silent: an agent would be stale by now; a transcript is not.
    Session.objects.filter(project=api.project).update(
        last_event_at=timezone.now() - timedelta(days=3)
    )

    client = login()
    listing = client.get(f"/?project={api.project.slug}").content.decode()
    for session_id in ("cc-refund", "cc-ledger"):
        row = _row(listing, session_id)
        assert ">imported</span>" in row and "Imported from a claude-code transcript" in row
        assert ">running<" not in row and ">stale<" not in row
        assert re.search(r'title="Imported from a claude-code transcript[^"]*">n/a</span>', row)
    live = _row(listing, "live-bot")
    assert ">running<" in live and ">stale<" in live and ">imported<" not in live
    # The status filter finds them by what the list shows them as (no status did).
    picked = client.get(f"/?project={api.project.slug}&status=imported").content.decode()
    assert "<option selected>imported</option>" in picked
    assert re.findall(r'aria-label="compare ([^"]+)"', picked) == ["cc-ledger", "cc-refund"]

    imported = Session.objects.get(project=api.project, external_id="cc-refund")
    page = client.get(f"/sessions/{imported.pk}/").content.decode()
    assert 'class="mode-form"' not in page and "Send to agent" not in page
    assert "No mode switch: this session was imported from a claude-code transcript" in page
    assert "Stale:" not in page and "Imported from a transcript" in page
    agent = Session.objects.get(project=api.project, external_id="live-bot")
    assert 'class="mode-form"' in client.get(f"/sessions/{agent.pk}/").content.decode()


def _header(markdown: str) -> str:
    return markdown.split("## Timeline")[0]


def test_its_reports_say_imported_and_mode_n_a_as_its_page_does(
    api: Api, login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    assert (
        upload(api, ("cc-refund.jsonl", _claude_code("cc-refund", _user("Why?")))).status_code
        == 201
    )
    # SWE-agent's log ends with its verdict: "succeeded", and still imported.
    assert upload(api, fixture("swe_agent.traj")).status_code == 201
    seed([step("live-bot", 0, [{"id": "u1", "role": "user", "content": "Hello"}])])
    client = login()
    for session_id, verdict in (("cc-refund", ""), ("swe_agent", "succeeded")):
        session = Session.objects.get(project=api.project, external_id=session_id)
        html = client.get(f"/sessions/{session.pk}/report.html").content.decode()
        head = html.split("</dl>")[0]
        title = head.split("<h1>")[1].split("</h1>")[0]
        assert ">imported</span>" in title and ">running<" not in title
        assert (f">{verdict}</span>" in title) == bool(verdict)
        mode = re.search(r"<dt>Mode</dt><dd>(.*?)</dd>", head, re.S)
        assert mode and ">n/a</span>" in mode.group(1) and "—" not in mode.group(1)

        markdown = _header(client.get(f"/sessions/{session.pk}/report.md").content.decode())
        fmt = session.imported_from
        status = f"{verdict}, imported" if verdict else "imported"
        assert f"- status: {status} (from a {fmt} transcript);" in markdown
        assert "mode: n/a" in markdown and "running" not in markdown

    live = Session.objects.get(project=api.project, external_id="live-bot")
    html = client.get(f"/sessions/{live.pk}/report.html").content.decode()
    assert ">running</span>" in html.split("</h1>")[0] and "<dt>Mode</dt><dd>—</dd>" in html
    markdown = _header(client.get(f"/sessions/{live.pk}/report.md").content.decode())
    assert "- status: running;" in markdown and "mode: -" in markdown


def test_a_transcript_without_times_shows_when_it_was_imported_not_an_age_or_times(
    api: Api, login: Callable[..., Client]
) -> None:
    # A SWE-agent trajectory writes no times; a Claude Code transcript does.
    assert upload(api, fixture("swe_agent.traj")).status_code == 201
    assert upload(api, fixture("swe_agent.traj")).status_code == 200  # again: still untimed
    transcript = _claude_code("cc-refund", _user("Why was refund R-77 sent twice?"))
    assert upload(api, ("cc-refund.jsonl", transcript)).status_code == 201
    untimed = Session.objects.get(project=api.project, external_id="swe_agent")
    imported = untimed.last_event_at
    today = f"{imported:%Y-%m-%d}"
    client = login()

    listing = client.get(f"/?project={api.project.slug}").content.decode()
    row = _row(listing, "swe_agent")
    assert f"<span>{today}</span>" not in row  # no start: it is the import's
    assert "wrote no times" in row
    # Listed among the others by its import, which the empty start says.
    assert "the list orders it by when it was imported" in row
    assert re.search(r">imported</span> <time[^>]*>(just now|[^<]* ago)<", row)
    timed = _row(listing, "cc-refund")
    assert "<span>2026-12-01</span>" in timed and ">imported</span> <time" not in timed

    step = client.get(f"/sessions/{untimed.pk}/steps/0/").content.decode()
    assert "No time: its swe-agent transcript wrote none" in step
    assert f">{imported:%Y-%m-%d %H:%M:%S}</time>" not in step

    html = client.get(f"/sessions/{untimed.pk}/report.html").content.decode()
    head, timeline = html.split("</dl>")[0], html.split('id="timeline"')[1].split("</table>")[0]
    assert re.search(r"<dt>Started</dt><dd[^>]*>not in the transcript</dd>", head)
    assert f"<dt>Imported</dt><dd>{imported:%Y-%m-%d %H:%M:%S} UTC</dd>" in head
    assert "<dt>Ended</dt>" not in head and today not in timeline
    assert "transcript wrote no times: its steps have none" in timeline

    markdown = client.get(f"/sessions/{untimed.pk}/report.md").content.decode()
    assert f"started: not in the transcript, which wrote no times (imported {today}" in markdown
    timed_md = client.get(
        f"/sessions/{Session.objects.get(external_id='cc-refund').pk}/report.md"
    ).content.decode()
    assert "started 2026-12-01 09:00:" in timed_md and "not in the transcript" not in timed_md


def test_the_comparison_and_the_incidents_list_say_imported_and_n_a_as_the_list_does(
    api: Api, login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    from django.contrib.auth.models import User

    from contextview.postmortems.services import incident_mark

    for name in ("cc-refund", "cc-ledger"):
        transcript = _claude_code(name, _user(f"Look into {name}."))
        assert upload(api, (f"{name}.jsonl", transcript)).status_code == 201
    client = login()
    imported = Session.objects.get(project=api.project, external_id="cc-refund")
    incident_mark(
        session=imported, user=User.objects.first(), title="Refund twice", severity="sev2"
    )
    slug = api.project.slug
    # They said "running" for a transcript no agent is behind, and "—" for its mode.
    for page in (
        client.get(f"/projects/{slug}/compare/?s=cc-refund&s=cc-ledger").content.decode(),
        client.get(f"/projects/{slug}/incidents/").content.decode(),
    ):
        assert ">imported</span>" in page and ">running<" not in page
        assert re.search(r'title="Imported from a claude-code transcript[^"]*">n/a</span>', page)


def test_the_training_set_gives_an_imported_transcripts_outcome_as_unknown_not_running(
    api: Api, login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    import json

    assert (
        upload(api, ("cc-refund.jsonl", _claude_code("cc-refund", _user("Why?")))).status_code
        == 201
    )
    assert upload(api, fixture("swe_agent.traj")).status_code == 201  # its log gives a verdict
    seed([step("live-bot", 0, [{"id": "u1", "role": "user", "content": "Hello"}])])
    response = login().get(f"/projects/{api.project.slug}/export/steps.jsonl")
    rows = [json.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    outcome = {row["session_id"]: row["outcome"]["status"] for row in rows}
    assert outcome["cc-refund"] == "unknown"  # a finished transcript, no verdict: was "running"
    assert outcome["swe_agent"] == "succeeded" and outcome["live-bot"] == "running"


def test_the_dashboard_sends_no_directive_to_an_imported_transcript(
    api: Api, login: Callable[..., Client]
) -> None:
    from contextview.sessions.models import Directive

    assert (
        upload(api, ("cc-refund.jsonl", _claude_code("cc-refund", _user("Why?")))).status_code
        == 201
    )
    session = Session.objects.get(project=api.project, external_id="cc-refund")
    client = login("editor")
    # The page offers no form; a POST made one anyway, expired at once.
    for url, data in ((f"/sessions/{session.pk}/mode/", {"mode": "sliding"}),
                      (f"/sessions/{session.pk}/restore/", {"id": ["m1"]})):  # fmt: skip
        response = client.post(url, data)
        assert response.status_code == 409, url
        assert "imported from a claude-code transcript" in response.content.decode()
    assert not Directive.objects.filter(session=session).exists()
