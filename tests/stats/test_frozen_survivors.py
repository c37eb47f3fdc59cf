"""What a statistics run leaves alive, frozen in a worker process (run fresh in a
subprocess, as a worker process starts)."""

from __future__ import annotations

from tests.fresh import run_fresh

_PRELUDE = (
    "import gc, weakref, django\n"
    "django.setup()\n"
    "from contextview.stats import services\n"
    "class Node: pass\n"
)


def _run(script: str) -> list[str]:
    return run_fresh(_PRELUDE + script, DJANGO_SETTINGS_MODULE="contextview.settings")


def test_cycles_frozen_with_a_runs_survivors_are_collected_once_enough_grew() -> None:
    script = (
        "gc.freeze()\n"  # as contextview.celery does when a worker process starts
        "services.FROZEN_GROWTH = 1000\n"
        "a = Node(); a.me = a; gone = weakref.ref(a); del a\n"  # garbage, in a cycle
        "with services._cyclic_gc_paused(): pass\n"  # a run ends: what is alive is frozen
        "gc.collect(); print(gone() is not None)\n"  # frozen: no collection finds it
        "with services._cyclic_gc_paused():\n"
        "    kept = [[] for _ in range(2000)]\n"  # what the next run leaves alive
        "print(gone() is None, gc.get_freeze_count() > 2000)\n"
    )
    assert _run(script) == ["True", "True", "True"]


def test_cycles_frozen_between_runs_are_collected_every_so_many_runs() -> None:
    script = (
        "gc.freeze()\n"
        "services.FULL_EVERY_RUNS = 3\n"
        "a = Node(); a.me = a; gone = weakref.ref(a); del a\n"  # left by other work
        "seen = []\n"
        "for _ in range(3):\n"
        "    with services._cyclic_gc_paused(): pass\n"  # runs that leave nothing new
        "    gc.collect(); seen.append(gone() is None)\n"
        "print(*seen)\n"
    )
    assert _run(script) == ["False", "False", "True"]


def test_a_process_that_froze_nothing_collects_as_usual() -> None:
    script = (
        "a = Node(); a.me = a; gone = weakref.ref(a); del a\n"
        "with services._cyclic_gc_paused(): pass\n"
        "gc.collect(); print(gone() is None, gc.get_freeze_count())\n"
    )
    assert _run(script) == ["True", "0"]
