"""The statistics path end to end: ingest, a real broker, real worker processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from contextview.core.tokens import load_encoding
from contextview.sessions.models import Session, Step, stats_read
from contextview.stats.tasks import sweep_pending_stats
from tests.api_client import Api, step
from tests.conftest import ROOT, _process_env, _stop, database_url
from tests.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LOG = (
    "2026/01/15 10:00:03 [error] 1234#0: *88 upstream timed out (110: Connection timed out) "
    "while reading response header from upstream, client: 10.0.0.7, server: shop, "
    'request: "GET /api/orders/SO20260101007 HTTP/1.1", upstream: "http://inventory-svc:8080", '
    "status 504 after 3 s"
)


def test_it_fills_in_stats_through_a_real_worker(api: Api, celery_worker_process: Any) -> None:
    session = {
        "id": "sess",
        "type": "session",
        "body": {
            "session_id": "orders",
            "encoding": "cl100k_base",
            "budget": {"max_tokens": 120, "reserved_tokens": 10},
            "pinned": ["SO20260101007"],
        },
    }
    first = step(
        "orders",
        0,
        [
            {"id": "u1", "role": "user", "content": "Why does order SO20260101007 time out?"},
            {"id": "log", "role": "tool", "tool": "read_file", "content": LOG},
        ],
        action={
            "action": "summarize",
            "target": "log",
            "result": {"id": "sum", "role": "tool", "content": "inventory-svc timed out"},
        },
        before_tokens=10,
    )
    assert api.ingest({"batch": [session, first]}).status_code == 207

    def ready() -> bool:
        return api.get("/sessions/orders/steps/0").json()["stats_status"] == "ready"

    wait_for(ready)
    got = api.get("/sessions/orders/steps/0").json()
    stats = got["stats"]
    enc = load_encoding("cl100k_base")
    assert stats["encoding"] == "cl100k_base"
    assert stats["ops"][0]["tokens_in"] == len(enc.encode_ordinary(LOG))
    assert stats["ops"][0]["tokens_out"] == len(enc.encode_ordinary("inventory-svc timed out"))
    lost = stats["ops"][0]["entities"]["lost"]
    assert "status 504" in lost and "3 s" in lost
    assert any("SO20260101007" in entity for entity in lost)
    assert "entity_loss" in stats["flags"]
    assert "token_estimate_off" in stats["flags"]
    assert {m["tokens"] for m in got["before"]} == {
        len(enc.encode_ordinary("Why does order SO20260101007 time out?")),
        len(enc.encode_ordinary(LOG)),
    }
    wait_for(lambda: api.get("/sessions/orders").json()["stats_status"] == "ready")
    aggregates = api.get("/sessions/orders").json()["aggregates"]
    assert aggregates["steps"] == 1
    assert aggregates["flag_counts"]["entity_loss"] == 1


@contextlib.contextmanager
def _own_queue(name: str) -> Iterator[str]:
    """Send this test's tasks to a queue no other worker of the session consumes."""
    from contextview.celery import app

    previous = app.conf.task_default_queue
    queue = f"{previous}-{name}"

    def switch(to: str) -> None:
        app.conf.task_default_queue = to
        for cached in ("queues", "default_queue", "router", "send_task_message"):
            app.amqp.__dict__.pop(cached, None)

    switch(queue)
    try:
        yield queue
    finally:
        switch(previous)


def _worker(name: str, **env: str) -> subprocess.Popen[bytes]:
    from django.conf import settings

    from contextview.celery import app

    node = f"{name}-{os.getpid()}@{socket.gethostname()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "contextview", "worker", "--pool", "solo",
         "-l", "warning", "-Q", app.conf.task_default_queue, "-n", node,
         "--without-gossip", "--without-mingle"],
        cwd=ROOT,
        env=_process_env(
            DATABASE_URL=database_url(connection.settings_dict),
            CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
            **env,
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return proc


def test_it_loses_nothing_when_the_worker_is_killed_mid_batch(api: Api) -> None:
    with _own_queue(f"kill-{os.getpid()}"):
        _kill_mid_batch(api)


# Sessions in the batch: enough that the worker, a session at a time, is still at work
# a moment after it finished the first (it computes one of these in some 20 ms).
KILLED_SESSIONS = 30


def _kill_mid_batch(api: Api) -> None:
    events = []
    for s in range(KILLED_SESSIONS):
        context = [{"id": "sys", "role": "system", "content": "You read logs."}]
        for i in range(60):
            context = [
                *context,
                {
                    "id": f"l{i}",
                    "role": "tool",
                    "tool": "grep",
                    "content": f"{LOG} line {i} of session {s}",
                },
            ]
            events.append(step(f"s{s}", i, list(context)))
    for start in range(0, len(events), 600):
        assert api.ingest({"batch": events[start : start + 600]}).status_code == 207
    total = Step.objects.count()
    assert total == 60 * KILLED_SESSIONS

    doomed = _worker("doomed")
    try:
        wait_for(
            lambda: Step.objects.with_stats().filter(stats_status="ready").exists(), seconds=60
        )
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
    finally:
        _stop(doomed)
    assert Step.objects.with_stats().filter(stats_status="pending").exists(), (
        "the worker was killed mid-batch"
    )

    # A new worker, and the sweep that finds what the lost messages left pending.
    survivor = _worker("survivor")
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("django.conf.settings.STATS_SWEEP_AFTER_SECONDS", -1)
            sweep_pending_stats()
        wait_for(
            lambda: not Step.objects.with_stats().exclude(stats_status="ready").exists(), seconds=90
        )
        wait_for(lambda: not Session.objects.exclude(stats_status="ready").exists(), seconds=30)
    finally:
        _stop(survivor)
    assert Step.objects.with_stats().filter(stats_status="ready").count() == total
    for session in Session.objects.all():
        assert session.aggregates["steps"] == 60
        assert session.step_count == 60


def test_it_resumes_a_killed_worker_from_its_last_committed_chunk(api: Api) -> None:
    with _own_queue(f"resume-{os.getpid()}"):
        _kill_mid_session(api)


def _ready_rows(session: Session) -> dict[int, tuple[str, Any]]:
    """Per ready step: the transaction that wrote it (xmin) and its stats."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT index, xmin::text, stats FROM cv_step_stats "
            "WHERE session_id = %s AND status = 'ready'",
            [session.pk],
        )
        return {index: (xmin, stats) for index, xmin, stats in cursor.fetchall()}


def _unpacked(stats: Any) -> dict[str, Any]:
    """A stored stats value (packed, ``stats_storage``) as the readers get it."""
    return stats_read(json.loads(stats))


def _needed_later(stats: Any) -> bool:
    return any(op["entities"].get("needed_later") for op in _unpacked(stats)["ops"])


def _unlinked(stats: Any) -> dict[str, Any]:
    """Step stats without what aggregation links to them (needed_later, reward, lost order)."""
    out = _unpacked(stats)
    out.pop("reward")
    for op in out["ops"]:
        op["entities"].pop("needed_later")
        op["entities"]["lost"] = sorted(op["entities"]["lost"])
    return out


def _commits(session: Session) -> int:
    return len({xmin for xmin, _ in _ready_rows(session).values()})


def _kill_mid_session(api: Api) -> None:
    from bench.ingest_gen import long_session, session_event
    from contextview.stats.services import caches_clear, stats_recompute

    *events, step_2000 = [
        session_event("long"),
        *long_session("long", 2001, 200, seed=5, by_id=True),
    ]
    for start in range(0, len(events), 250):
        assert api.ingest({"batch": events[start : start + 250]}).status_code == 207
    session = Session.objects.get(external_id="long")

    # Chunks of about 0.1 s: a few dozen commits in a 2,000-step session.
    doomed = _worker("doomed", STATS_CHUNK_MS="100")
    try:
        wait_for(lambda: _commits(session) >= 3, seconds=60, what="three chunks committed")
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
    finally:
        _stop(doomed)
    kept = _ready_rows(session)
    assert 0 < len(kept) < 2000, "the worker was killed mid-session"
    commits = _commits(session)
    shown = api.get("/sessions/long").json()
    assert shown["stats_status"] == "pending"
    assert shown["stats_steps_done"] <= len(kept) and shown["steps"] == 2000

    survivor = _worker("survivor")
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("django.conf.settings.STATS_SWEEP_AFTER_SECONDS", -1)
            sweep_pending_stats()
        # A step that arrives while the survivor computes is computed too.
        wait_for(lambda: _commits(session) > commits, seconds=60, what="the survivor's chunk")
        assert api.ingest({"batch": [step_2000]}).status_code == 207
        wait_for(
            lambda: (
                len(_ready_rows(session)) == 2001
                and Session.objects.get(pk=session.pk).stats_status == "ready"
            ),
            seconds=120,
            what="the survivor to finish the session",
        )
    finally:
        _stop(survivor)
    resumed = _ready_rows(session)
    # What the killed worker committed was kept, not computed again: only the links
    # to later steps that needed what it lost were added, when the session was summed.
    amended = {i for i in kept if _needed_later(resumed[i][1])}
    assert {i: resumed[i] for i in kept if i not in amended} == {
        i: kept[i] for i in kept if i not in amended
    }
    assert {i: _unlinked(resumed[i][1]) for i in amended} == {
        i: _unlinked(kept[i][1]) for i in amended
    }
    shown = api.get("/sessions/long").json()
    assert (shown["stats_steps_done"], shown["aggregates"]["steps"]) == (2001, 2001)

    # The same statistics as one uninterrupted run, by a process with nothing cached.
    aggregates = Session.objects.get(pk=session.pk).aggregates
    caches_clear()
    assert stats_recompute(session_ids=[session.pk]) == 2001
    uninterrupted = _ready_rows(session)
    assert {i: stats for i, (_, stats) in resumed.items()} == {
        i: stats for i, (_, stats) in uninterrupted.items()
    }
    assert Session.objects.get(pk=session.pk).aggregates == aggregates


def test_it_can_send_every_periodic_task_beat_schedules() -> None:
    from django.conf import settings

    from contextview.celery import app

    app.loader.import_default_modules()  # every app's tasks, as beat and the worker load them
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        # Sending checks the task's options (time limits) as beat would.
        app.tasks[entry["task"]].apply_async()
