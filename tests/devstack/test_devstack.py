"""The devstack helpers and the process fixtures of tests/conftest.py."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from contextview.devstack import _with_redis_db, build_parser
from contextview.settings import database_from_url
from tests.conftest import ROOT, database_url


@pytest.mark.parametrize(
    "url",
    [
        "postgres://postgres@127.0.0.1:5432/postgres",
        "postgres://app:s%40cret@db.example:6543/contextview?sslmode=require",
        "postgresql://postgres:@/test_contextview?host=/srv/data/pg",
    ],
)
def test_database_url_is_the_inverse_of_the_settings_parser(url: str) -> None:
    entry = database_from_url(url)
    assert database_from_url(database_url(entry)) == entry


def test_a_broker_url_gets_another_redis_database() -> None:
    assert _with_redis_db("redis://127.0.0.1:6391/0", 15) == "redis://127.0.0.1:6391/15"
    assert _with_redis_db("redis://:pw@host:1", 3) == "redis://:pw@host:1/3"


def test_the_cli_explains_itself() -> None:
    for command in ("run", "test", "stop"):
        assert command in build_parser().format_help()
    out = subprocess.run(
        [sys.executable, "-m", "contextview.devstack", "test", "--help"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "pytest" in out and "DATABASE_URL" in out


def test_exec_and_manage_run_a_command_against_the_stacks_servers(db: None) -> None:
    """With the servers' URLs set, nothing embedded starts; the command gets them, its
    standard output stays its own (devstack's lines go to stderr), its code is kept."""
    import os

    from django.db import connection

    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict),
           "CELERY_BROKER_URL": "redis://127.0.0.1:6379/7"}  # fmt: skip
    ran = subprocess.run(
        [sys.executable, "-m", "contextview.devstack", "exec", "sh", "-c",
         'echo "$DATABASE_URL"; exit 3'],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert ran.returncode == 3
    assert ran.stdout == env["DATABASE_URL"] + "\n"
    assert "using DATABASE_URL from the environment" in ran.stderr
    manage = subprocess.run(
        [sys.executable, "-m", "contextview.devstack", "manage", "exportdataset", "--help"],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert manage.returncode == 0 and "project slug" in manage.stdout
    assert "exec" in build_parser().format_help() and "manage" in build_parser().format_help()


def test_the_readmes_commands_reach_the_embedded_stack_through_devstack() -> None:
    """README.md's shell commands must work as written with DATABASE_URL and
    CELERY_BROKER_URL unset: manage.py, celery and gunicorn run bare would reach
    127.0.0.1:5432 and :6379, not the embedded servers."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```sh\n(.*?)^```", readme, re.S | re.M)
    lines = [line for block in blocks for line in block.splitlines()]
    bare = [
        line
        for line in lines
        for found in re.finditer(r"python manage\.py|celery -A|gunicorn contextview", line)
        if not line[: found.start()].endswith("contextview.devstack exec ")
    ]
    assert len(lines) > 20 and not bare, bare


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_celery_worker_works_on_the_test_database(
    celery_worker_process: subprocess.Popen[bytes],
) -> None:
    from django.db import connection

    from contextview.celery import app

    name = connection.settings_dict["NAME"]
    assert name.startswith("test_")
    env = _environ(celery_worker_process.pid)
    assert database_from_url(env["DATABASE_URL"])["NAME"] == name
    assert celery_worker_process.poll() is None
    assert app.control.ping(timeout=2)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_gunicorn_serves_healthz(gunicorn_api: str) -> None:
    with urllib.request.urlopen(f"{gunicorn_api}/healthz", timeout=10) as response:
        assert response.status == 200


@pytest.mark.django_db(transaction=True)
def test_the_live_server_serves_healthz(live_api: str) -> None:
    with urllib.request.urlopen(f"{live_api}/healthz", timeout=10) as response:
        assert response.status == 200
