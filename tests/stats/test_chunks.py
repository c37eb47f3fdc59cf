"""A session computed chunk by chunk: what a run that dies keeps, and who may compute."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from django.db import connection

from bench.ingest_gen import long_session, session_event
from contextview.sessions.models import Session, Step, StepStats
from contextview.stats import services
from tests.api_client import Api
from tests.conftest import database_url
from tests.waiting import wait_for


def _stats(session: Session) -> list[Any]:
    return list(
        Step.objects.with_stats()
        .filter(session=session)
        .order_by("index")
        .values_list("stats", flat=True)
    )


@pytest.fixture
def session(api: Api) -> Session:
    events = [session_event("long"), *long_session("long", 12, 30, seed=3, by_id=True)]
    assert api.ingest({"batch": events}).status_code == 207
    return Session.objects.get(external_id="long")


@pytest.mark.django_db
def test_it_keeps_the_chunks_a_failed_run_committed_and_resumes_after_them(
    api: Api, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert services.session_stats_compute(session_id=session.pk) == 12
    uninterrupted = _stats(session)
    aggregates = Session.objects.get(pk=session.pk).aggregates
    StepStats.objects.filter(session_id=session.pk).delete()
    Session.objects.filter(pk=session.pk).update(stats_status="pending", stats_steps_done=0)

    monkeypatch.setattr(services, "CHUNK", 2)
    compute_steps = services._compute_steps
    calls: list[int] = []

    def dies_in_the_third_chunk(*args: Any) -> Any:
        calls.append(len(args[1]))
        if len(calls) == 3:
            raise RuntimeError("worker lost")
        return compute_steps(*args)

    monkeypatch.setattr(services, "_compute_steps", dies_in_the_third_chunk)
    with pytest.raises(RuntimeError):
        services.session_stats_compute(session_id=session.pk)
    ready = Step.objects.with_stats().filter(session=session, stats_status="ready")
    assert sorted(ready.values_list("index", flat=True)) == [0, 1, 2, 3]
    shown = api.get("/sessions/long").json()
    assert (shown["stats_status"], shown["stats_steps_done"], shown["steps"]) == ("pending", 4, 12)

    monkeypatch.setattr(services, "_compute_steps", compute_steps)
    services.caches_clear()  # as a new worker process starts
    assert services.session_stats_compute(session_id=session.pk) == 8  # not the first 4 again
    assert _stats(session) == uninterrupted
    session.refresh_from_db()
    assert session.aggregates == aggregates
    assert (session.stats_status, session.stats_steps_done) == ("ready", 12)


@pytest.mark.django_db
def test_it_leaves_a_session_to_the_worker_that_holds_its_lock(session: Session) -> None:
    other = psycopg.connect(database_url(connection.settings_dict), autocommit=True)
    try:
        other.execute("SELECT pg_advisory_lock(%s, %s)", [services._LOCK_NAMESPACE, session.pk])
        with pytest.raises(services.SessionBusy):
            services.session_stats_compute(session_id=session.pk)
        assert not Step.objects.with_stats().filter(session=session, stats_status="ready").exists()
    finally:
        other.close()  # a worker that dies: its connection, and so its lock, go with it

    def computed() -> int:
        try:
            return services.session_stats_compute(session_id=session.pk)
        except services.SessionBusy:  # the server ends the closed connection's backend
            return 0

    assert wait_for(computed, seconds=10, what="the closed connection's lock to go") == 12


def _step_versions(session: Session) -> dict[int, str]:
    """Each step row's version: the transaction that last wrote it (xmin)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT index, xmin::text FROM cv_step WHERE session_id = %s", [session.pk])
        return dict(cursor.fetchall())


@pytest.mark.django_db
def test_computing_statistics_never_rewrites_a_step_row(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rewriting a step would leave its old version (contexts, output) in the table
    # until vacuum: statistics go to rows of their own.
    written = _step_versions(session)
    monkeypatch.setattr(services, "CHUNK", 5)  # chunks that mark later steps pending too
    assert services.session_stats_compute(session_id=session.pk) == 12
    assert services.stats_recompute(session_ids=[session.pk]) == 12
    assert _step_versions(session) == written
    assert len(_stats(session)) == 12 and None not in _stats(session)


@pytest.mark.django_db
def test_giving_up_marks_the_pending_steps_failed_and_keeps_the_computed_ones(
    api: Api, session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        services, "_compute_chunks", lambda sid: services._compute_chunk(sid, 5, services._Run())[0]
    )
    assert services.session_stats_compute(session_id=session.pk) == 5  # one chunk, then lost
    services.stats_mark_failed(session_id=session.pk, error="worker lost " * 300)
    statuses = dict(Step.objects.with_stats().values_list("index", "stats_status"))
    assert statuses == {i: "ready" if i < 5 else "failed" for i in range(12)}
    shown = api.get("/sessions/long/steps/7").json()
    assert shown["stats_status"] == "failed" and len(shown["stats"]["error"]) == 2000
    assert api.get("/sessions/long").json()["stats_status"] == "failed"
    # A run queued before the worker gave up (the sweep's) finds nothing to compute:
    # the session stays failed, not pending for ever.
    assert services.session_stats_compute(session_id=session.pk) == 0
    assert api.get("/sessions/long").json()["stats_status"] == "failed"
    # A recompute starts them again.
    monkeypatch.undo()
    assert services.stats_recompute(session_ids=[session.pk]) == 12
    assert set(Step.objects.with_stats().values_list("stats_status", flat=True)) == {"ready"}


@pytest.mark.django_db
def test_the_recompute_command_names_each_session_as_its_agent_sent_it(
    api: Api, session: Session, capsys: pytest.CaptureFixture[str]
) -> None:
    from django.core.management import call_command

    StepStats.objects.filter(session_id=session.pk).delete()
    call_command("recomputestats", api.project.slug)
    out = capsys.readouterr()
    assert "[1/1] session long: 12 steps" in out.err
    assert "recomputed 1 session in" in out.out
    assert StepStats.objects.filter(session_id=session.pk, status="ready").count() == 12
