"""The Celery application read fresh in a subprocess, as a worker process starts it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from contextview.celery import AUTOGROUP
from tests.fresh import run_fresh


def test_a_worker_process_leaves_what_it_started_with_out_of_the_collectors_walks() -> None:
    # Celery sends worker_process_init in each pool process once it is set up; nothing
    # is frozen unless asked, so the count says whether the app's handler ran.
    script = (
        "import gc; from contextview.celery import app; "
        "from celery.signals import worker_process_init; "
        "print(gc.get_freeze_count()); worker_process_init.send(sender=None); "
        "print(gc.get_freeze_count() > 0)"
    )
    assert run_fresh(script) == ["0", "True"]


def test_a_worker_process_runs_below_the_web_by_worker_nice() -> None:
    script = (
        "import os; from contextview.celery import app; "
        "from celery.signals import worker_process_init; "
        "before = os.nice(0); worker_process_init.send(sender=None); print(os.nice(0) - before)"
    )
    for setting, lowered in (("7", "7"), ("0", "0")):
        assert run_fresh(script, WORKER_NICE=setting) == [lowered]


@pytest.mark.skipif(not os.path.exists(AUTOGROUP), reason="the kernel groups no sessions")
def test_a_worker_process_lowers_a_scheduling_group_of_its_own() -> None:
    # With autogroups, CPU is shared between sessions' groups before nice counts: the
    # worker process leads a session of its own and lowers its group, not the group
    # of the session it was started in (the web's, when one command starts both).
    script = (
        "import os; from contextview.celery import app, AUTOGROUP; "
        "from celery.signals import worker_process_init; "
        "started_in = os.getsid(0); worker_process_init.send(sender=None); "
        "print(os.getsid(0) == os.getpid(), os.getsid(0) != started_in, "
        "open(AUTOGROUP).read().split()[-1])"
    )
    group_before = Path(AUTOGROUP).read_text()
    for setting, expected in (("7", ["True", "True", "7"]), ("0", ["False", "False", "0"])):
        assert run_fresh(script, WORKER_NICE=setting) == expected
    # The session the tests run in kept its group as it was.
    assert Path(AUTOGROUP).read_text() == group_before
