"""Statistics queues: a session's computations go to one queue, and every queue has a
worker wherever the app is run with more than one."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from django.test import override_settings

from contextview.celery import app
from contextview.devstack import worker_commands
from contextview.stats.tasks import compute_session_stats, sweep_pending_stats

ROOT = Path(__file__).resolve().parents[2]


def queue_of(task: object, *args: object) -> str:
    return app.amqp.router.route({}, task.name, args, {})["queue"].name  # type: ignore[attr-defined]


def test_a_session_always_goes_to_the_same_of_its_queues() -> None:
    default = app.conf.task_default_queue
    assert queue_of(compute_session_stats, 7) == default  # STATS_QUEUES is 1 by default
    with override_settings(STATS_QUEUES=3):
        assert {queue_of(compute_session_stats, 7) for _ in range(5)} == {"stats.1"}
        assert [queue_of(compute_session_stats, pk) for pk in (0, 1, 2, 3)] == [
            "stats.0", "stats.1", "stats.2", "stats.0",
        ]  # fmt: skip
        # Other tasks keep the default queue.
        assert queue_of(sweep_pending_stats) == default


def _queues_consumed(command: list[str]) -> set[str]:
    return set(command[command.index("-Q") + 1].split(",")) if "-Q" in command else set()


@pytest.mark.parametrize("count", ["1", "2", "4"])
def test_scripts_run_starts_a_worker_for_every_statistics_queue(count: str) -> None:
    commands = [c for _, c in worker_commands("python", {"STATS_QUEUES": count})]
    if count == "1":
        [command] = commands
        assert _queues_consumed(command) == set()  # the default queue
        return
    assert len(commands) == int(count)
    consumed = [_queues_consumed(c) for c in commands]
    assert all("celery" in queues and c[c.index("--concurrency") + 1] == "1"
               for queues, c in zip(consumed, commands, strict=True))  # fmt: skip
    assert set().union(*consumed) - {"celery"} == {f"stats.{n}" for n in range(int(count))}


def test_the_compose_file_runs_a_worker_for_every_statistics_queue() -> None:
    document = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    count = int(document["x-app-env"]["STATS_QUEUES"])
    workers = [s for s in document["services"].values() if "worker" in s.get("command", [])]
    consumed = set().union(*(_queues_consumed(w["command"]) for w in workers))
    assert consumed == {"celery", *(f"stats.{n}" for n in range(count))}
    for worker in workers:
        assert worker["environment"]["STATS_QUEUES"] == str(count)
