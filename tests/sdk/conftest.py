"""Fixtures for the SDK's tests: a project key, the server's view of a session, own servers,
a live agent of the demo fleet.

Tests against a real server use ``gunicorn_api`` (shared, never stopped) or
``own_server`` (a gunicorn of their own, which they may stop, restart and
configure through environment variables). Both see only committed rows: mark
those tests ``django_db(transaction=True)``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextview.demo.fleet import run_fleet
from contextview.sdk import Client
from tests.conftest import (
    ROOT,
    START_TIMEOUT,
    _free_port,
    _gunicorn_argv,
    _gunicorn_env,
    _stop,
    _wait_answering,
    database_url,
)


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
            _gunicorn_argv(self.port), cwd=ROOT, env=self.env, stdout=handle,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        handle.close()
        _wait_answering(f"{self.url}/healthz", self.proc, self.log, START_TIMEOUT, "own gunicorn")

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
    from django.db import connection

    servers: list[OwnServer] = []

    def make(**env: str) -> OwnServer:
        server = OwnServer(
            env=_gunicorn_env(database_url(connection.settings_dict), _celery_test_queue, **env)
        )
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.stop()


@contextmanager
def live_agent(
    client: Client | str,
    key: str = "",
    *,
    name: str,
    pace: float,
    linger: int = 400,
    check: bool = True,
) -> Iterator[Client]:
    """Agent `name` of the demo fleet, live on its session ``live-<name>`` until the block ends.

    `client` is the agent's Client, or the server's URL: the agent then talks to it
    with `key` through a client of its own, closed at the end. Leaving the block
    stops the fleet and waits for the agent. With `check`, it then flushes and
    asserts that the agent stopped, everything was delivered and nothing refused.
    """
    own = isinstance(client, str)
    if isinstance(client, str):
        client = Client(client, key, flush_interval=0.05, poll_interval=0.5, backoff_max=2.0)
    stop = threading.Event()
    thread = threading.Thread(
        target=run_fleet,
        args=(client,),
        kwargs={"names": [name], "prefix": "live-", "forever": True, "stop": stop,
                "pace": pace, "linger": linger},
        daemon=True,
    )  # fmt: skip
    thread.start()
    try:
        yield client
    finally:
        stop.set()
        thread.join(30)
        flushed = check and client.flush(20)
        if own:
            # Closed before the test's database flush: a client still polling the control
            # channel would read the tables being truncated.
            client.close(timeout=2)
    if check:
        assert not thread.is_alive()
        assert flushed, client.stats
        assert client.stats["rejected"] == 0, list(client.problems)


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
