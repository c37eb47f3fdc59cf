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
from tests.importers.test_import_api import upload
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

    imported = Session.objects.get(project=api.project, external_id="cc-refund")
    page = client.get(f"/sessions/{imported.pk}/").content.decode()
    assert 'class="mode-form"' not in page and "Send to agent" not in page
    assert "No mode switch: this session was imported from a claude-code transcript" in page
    assert "Stale:" not in page and "Imported from a transcript" in page
    agent = Session.objects.get(project=api.project, external_id="live-bot")
    assert 'class="mode-form"' in client.get(f"/sessions/{agent.pk}/").content.decode()
