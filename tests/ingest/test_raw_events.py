"""Accepted events are kept by a key of their id (``ingest.models.RawEvent``): retries
are recognised as before, and going back and forth through the migration keeps them so."""

from __future__ import annotations

from importlib import import_module

from django.db import connection

from contextview.ingest.models import RawEvent, event_key
from tests.api_client import Api, results, step

migration = import_module("contextview.ingest.migrations.0004_raw_event_keys")

SYSTEM = {"id": "sys", "role": "system", "content": "You debug orders."}


def test_it_keeps_an_event_by_a_key_of_its_id(api: Api) -> None:
    event = step("s", 0, [SYSTEM])
    assert results(api.ingest({"batch": [event]}))[0]["status"] == 201
    kept = RawEvent.objects.get()
    assert kept.event_key == event_key("s-step-0") and len(bytes(kept.body_hash)) == 16
    assert results(api.ingest({"batch": [event]}))[0] == {
        "id": "s-step-0",
        "status": 200,
        "duplicate": True,
    }
    other = dict(step("s", 1, [SYSTEM]), id="s-step-0")
    assert results(api.ingest({"batch": [other]}))[0]["status"] == 409


def test_it_recognises_retries_after_the_migration_went_back_and_forth(api: Api) -> None:
    first = step("s", 0, [SYSTEM])
    results(api.ingest({"batch": [first]}))
    with connection.cursor() as cursor:
        cursor.execute(migration.BACKWARD)
        cursor.execute("SELECT event_id, length(body_hash) FROM cv_raw_event")
        (event_id, hash_bytes), *_ = cursor.fetchall()
        assert event_id == f"sha256-16:{event_key('s-step-0').hex}" and hash_bytes == 16
        # Accepted by the code of before, with its id as text and a 32-byte hash.
        cursor.execute(
            "INSERT INTO cv_raw_event (event_id, type, body_hash, session_external_id, "
            "received_at, project_id) SELECT 's-step-1', 'step', body_hash || body_hash, 's', "
            "now(), project_id FROM cv_raw_event"
        )
        cursor.execute(migration.FORWARD)
    assert RawEvent.objects.count() == 2
    answers = results(api.ingest({"batch": [first]}))
    assert answers == [{"id": "s-step-0", "status": 200, "duplicate": True}]
    assert RawEvent.objects.filter(event_key=event_key("s-step-1")).exists()
