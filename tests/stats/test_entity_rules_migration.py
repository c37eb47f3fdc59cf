"""Migrations stats 0009 and 0010: the key-entity rules changed, so what the old rules
stored is found again, and every step's statistics, whose lost entities are places in
those entities, are computed again by the workers' sweep."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from bench.ingest_gen import long_session, session_event
from contextview.core.entities import extract_entities_keyed
from contextview.ingest.services import batch_ingest
from contextview.projects.services import project_get_or_create
from contextview.sessions.models import Session, Step
from contextview.stats import services
from contextview.stats.blob_info import entities_pack
from contextview.stats.selectors import sessions_with_stale_work

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _migrate(targets: list[tuple[str, str]] | None = None) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


def _lost(session: Session) -> list[list[str]]:
    return [
        op["entities"]["lost"]
        for step in Step.objects.filter(session=session).with_stats().order_by("index")
        for op in (step.stats or {}).get("ops", [])
        if op["entities"]["lost"]
    ]


def test_what_the_old_rules_stored_is_found_and_computed_again() -> None:
    _migrate([("stats", "0008_replay_totals")])
    try:
        project, _ = project_get_or_create(slug="rules")
        events = [session_event("rules"), *long_session("rules", 60, 30, seed=3, by_id=True)]
        batch_ingest(project=project, batch=events)
        session = Session.objects.get(project=project, external_id="rules")
        services.session_stats_compute(session_id=session.pk)
        expected = _lost(session)
        assert expected, "the session's compactions lose entities"
        # As older rules left them: each content's entities one fewer.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT i.blob_id, b.text FROM cv_blob_info i JOIN cv_blob b ON b.id = i.blob_id "
                "WHERE i.entities IS NOT NULL"
            )
            for pk, text in cursor.fetchall():
                entities, keys = extract_entities_keyed(text)
                cursor.execute(
                    "UPDATE cv_blob_info SET entities = %s WHERE blob_id = %s",
                    [entities_pack(entities[1:], keys[1:], text), pk],
                )
        epoch = Session.objects.get(pk=session.pk).stats_epoch

        _migrate()
        services.caches_clear()
        session.refresh_from_db()
        assert (session.stats_status, session.stats_steps_done) == ("pending", 0)
        assert session.stats_epoch > epoch  # each rules migration since moves it on
        assert not Step.objects.filter(session=session).with_stats().exclude(stats=None).exists()
        assert sessions_with_stale_work(older_than=timezone.now() + timedelta(seconds=1)) == [
            session.pk
        ]
        services.session_stats_compute(session_id=session.pk)
        session.refresh_from_db()
        assert session.stats_status == "ready"
        assert _lost(session) == expected
    finally:
        _migrate()
