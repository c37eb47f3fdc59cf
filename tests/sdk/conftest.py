"""Fixtures for the SDK's tests: a project key, the server's view of a session, own servers.

Tests against a real server use ``gunicorn_api`` (shared, never stopped) or
``own_server`` (a gunicorn of their own, which they may stop, restart and
configure through environment variables). Both see only committed rows: mark
those tests ``django_db(transaction=True)``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextview.sdk import Client
from tests.conftest import ROOT, _free_port, _log_tail, _process_env, _stop, database_url

START_TIMEOUT = 60.0


@pytest.fixture
def project_key(transactional_db: None) -> str:
    from contextview.projects.services import apikey_create, project_get_or_create

    project, _ = project_get_or_create(slug="sdk")
    return apikey_create(project=project, name="sdk tests").secret


class Reader:
    """The read API with the test key: what a person would see of the session."""

    def __init__(self, url: str, key: str) -> None:
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )

    def get(self, path: str, **params: Any) -> Any:
        response = self.http.get(f"/api/v1{path}", params=params)
        assert response.status_code == 200, (path, response.status_code, response.text[:500])
        return response.json()

    def post(self, path: str, payload: Any) -> httpx.Response:
        return self.http.post(f"/api/v1{path}", json=payload)

    def has_step(self, session_id: str, index: int) -> bool:
        response = self.http.get(f"/api/v1/sessions/{session_id}/steps/{index}")
        assert response.status_code in (200, 404), response.text[:500]
        return response.status_code == 200

    def steps(self, session_id: str) -> list[dict[str, Any]]:
        """Every stored step of the session, index 0 upwards (stops at the first gap)."""
        count = self.get(f"/sessions/{session_id}")["steps"]
        found: list[dict[str, Any]] = []
        index = 0
        while True:
            response = self.http.get(f"/api/v1/sessions/{session_id}/steps/{index}")
            if response.status_code == 404:
                break
            assert response.status_code == 200, response.text[:500]
            found.append(response.json())
            index += 1
        assert count == len(found), (count, len(found))
        return found


@pytest.fixture
def make_client(transactional_db: None) -> Iterator[Callable[..., Client]]:
    """Clients closed at the end of the test, before the database is flushed: a client
    still polling the control channel would read tables the flush is truncating."""
    made: list[Client] = []

    def make(url: str, key: str, **options: Any) -> Client:
        options.setdefault("flush_interval", 0.05)
        options.setdefault("poll_interval", 0.5)
        options.setdefault("backoff_max", 2.0)
        client = Client(url, key, **options)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close(timeout=2)


@dataclass
class OwnServer:
    """A gunicorn of a test's own on the test database, which it may stop and start."""

    env: dict[str, str]
    port: int = field(default_factory=_free_port)
    proc: subprocess.Popen[bytes] | None = None
    log: str = ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        handle = tempfile.NamedTemporaryFile(
            prefix="contextview-sdk-gunicorn-", suffix=".log", delete=False
        )
        self.log = handle.name
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "tests.wsgi", "--bind", f"127.0.0.1:{self.port}",
             "--workers", "1", "--timeout", "30", "--no-control-socket"],
            cwd=ROOT, env=self.env, stdout=handle, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        handle.close()
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                urllib.request.urlopen(f"{self.url}/healthz", timeout=2).close()
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"own gunicorn did not start:\n{_log_tail(self.log)}")
            time.sleep(0.1)

    def stop(self, *, kill: bool = False) -> None:
        """Stop it; `kill` is a crash (SIGKILL: requests in flight are cut off)."""
        if self.proc is not None:
            if kill:
                # The whole process group, as a crash of the host would: a killed
                # master alone leaves its workers serving on the inherited socket.
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            else:
                _stop(self.proc)
            self.proc = None
        if self.log:
            Path(self.log).unlink(missing_ok=True)
            self.log = ""


@pytest.fixture
def own_server(
    transactional_db: None, django_db_blocker: Any, _celery_test_queue: str
) -> Iterator[Callable[..., OwnServer]]:
    from django.conf import settings
    from django.db import connection

    servers: list[OwnServer] = []

    def make(**env: str) -> OwnServer:
        server = OwnServer(
            env=_process_env(
                DATABASE_URL=database_url(connection.settings_dict),
                CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
                CONTEXTVIEW_TEST_CELERY_QUEUE=_celery_test_queue,
                ALLOWED_HOSTS="127.0.0.1,localhost",
                **env,
            )
        )
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.stop()


def mock_clients(
    handler: Callable[[httpx.Request], httpx.Response], **defaults: Any
) -> Iterator[Callable[..., Client]]:
    """A fixture body: makes clients talking to `handler` in process, closes them after."""
    made: list[Client] = []

    def make_client(**options: Any) -> Client:
        options.setdefault("flush_interval", 0.02)
        options.setdefault("poll_interval", 0)
        for key, value in defaults.items():
            options.setdefault(key, value)
        client = Client("http://cv.test", "cv_test_key", transport=httpx.MockTransport(handler),
                        **options)  # fmt: skip
        made.append(client)
        return client

    yield make_client
    for client in made:
        client.close(timeout=1)
