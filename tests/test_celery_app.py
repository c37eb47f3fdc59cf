"""The Celery application read fresh in a subprocess, as a worker process starts it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_worker_process_leaves_what_it_started_with_out_of_the_collectors_walks() -> None:
    # Celery sends worker_process_init in each pool process once it is set up; nothing
    # is frozen unless asked, so the count says whether the app's handler ran.
    script = (
        "import gc; from contextview.celery import app; "
        "from celery.signals import worker_process_init; "
        "print(gc.get_freeze_count()); worker_process_init.send(sender=None); "
        "print(gc.get_freeze_count() > 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True"]


def test_a_worker_process_runs_below_the_web_by_worker_nice() -> None:
    script = (
        "import os; from contextview.celery import app; "
        "from celery.signals import worker_process_init; "
        "before = os.nice(0); worker_process_init.send(sender=None); print(os.nice(0) - before)"
    )
    for setting, lowered in (("7", "7"), ("0", "0")):
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
            timeout=60, env={**os.environ, "WORKER_NICE": setting},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [lowered]
