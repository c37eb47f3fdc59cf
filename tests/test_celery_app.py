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


def test_a_worker_process_has_the_default_tokenizer_before_its_first_session() -> None:
    # Loading it took the first session a process computed 0.2 s more than the next.
    script = (
        "from contextview.celery import app; "
        "from celery.signals import worker_process_init; "
        "from tiktoken.registry import ENCODINGS; "
        "loaded = lambda: sorted(n for n in ENCODINGS if n.startswith('cl100k_base')); "
        "print(loaded()); worker_process_init.send(sender=None); print(len(loaded()))"
    )
    assert run_fresh(script) == ["[]", "1"]


def test_a_worker_process_runs_below_the_web_by_worker_nice() -> None:
    script = (
        "import os; from contextview.celery import app; "
        "from celery.signals import worker_process_init; "
        "before = os.nice(0); worker_process_init.send(sender=None); print(os.nice(0) - before)"
    )
    for setting, lowered in (("7", "7"), ("0", "0")):
        assert run_fresh(script, WORKER_NICE=setting) == [lowered]


def _new_sessions_get_groups() -> bool:
    """Whether a process that starts a session here gets an autogroup of its own.

    The kernel shows none for a process in a CPU cgroup other than the root one (the
    cgroup decides its share there), nor for one still in the group every process
    starts in; `/proc/self/autogroup` is then empty.
    """
    if not os.path.exists(AUTOGROUP):
        return False
    script = f"import os; os.setsid(); print(bool(open({AUTOGROUP!r}).read().strip()))"
    return run_fresh(script) == ["True"]


@pytest.mark.skipif(not _new_sessions_get_groups(), reason="the kernel groups no sessions here")
def test_a_worker_process_lowers_a_scheduling_group_of_its_own() -> None:
    # With autogroups, CPU is shared between sessions' groups before nice counts: the
    # worker process leads a session of its own and lowers its group, not the group
    # of the session it was started in (the web's, when one command starts both).
    # The session the tests run in may be the group every process starts in, which
    # the kernel shows as nothing, so what is read is compared whole.
    script = (
        "import os; from contextview.celery import app, AUTOGROUP; "
        "from celery.signals import worker_process_init; "
        "started_in = os.getsid(0); worker_process_init.send(sender=None); "
        "print(os.getsid(0) == os.getpid(), os.getsid(0) != started_in, "
        "open(AUTOGROUP).read())"
    )
    group_before = Path(AUTOGROUP).read_text()
    lowered = run_fresh(script, WORKER_NICE="7")
    assert lowered[:2] == ["True", "True"] and lowered[-2:] == ["nice", "7"]
    assert lowered[2:] != group_before.split()
    assert run_fresh(script, WORKER_NICE="0") == ["False", "False", *group_before.split()]
    # The session the tests run in kept its group as it was.
    assert Path(AUTOGROUP).read_text() == group_before
