"""A real ``celery beat`` evaluating monitors every second, and a webhook receiver."""

from __future__ import annotations

import hashlib
import hmac
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, _log_tail, _process_env, _stop, database_url


@pytest.fixture(scope="module")
def celery_beat_process(
    django_db_setup: None, django_db_blocker: Any, _celery_test_queue: str
) -> Iterator[subprocess.Popen[bytes]]:
    """``celery -A contextview beat`` with MONITOR_EVERY_SECONDS=1, sending to this
    session's queue (pair it with ``celery_worker_process``); stopped after the
    module, so that tests evaluating monitors themselves are not raced by it."""
    from django.conf import settings
    from django.db import connection

    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    folder = tempfile.mkdtemp(prefix="contextview-beat-")
    log = Path(folder) / "beat.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "contextview", "beat", "-l", "info",
             "-s", str(Path(folder) / "schedule"), "--pidfile", str(Path(folder) / "pid")],
            cwd=ROOT,
            env=_process_env(
                DATABASE_URL=url,
                CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
                CELERY_TASK_DEFAULT_QUEUE=_celery_test_queue,
                MONITOR_EVERY_SECONDS="1",
            ),
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while "evaluate-monitors" not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"celery beat did not start:\n{_log_tail(str(log))}")
            time.sleep(0.2)
        yield proc
    finally:
        _stop(proc)


@dataclass
class Received:
    body: bytes
    signature: str


@dataclass
class Receiver:
    """A webhook receiver on 127.0.0.1; answers ``statuses`` in turn, then 200."""

    url: str = ""
    statuses: list[int] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    answered: list[int] = field(default_factory=list)

    def events(self) -> list[str]:
        import json

        return [
            json.loads(r.body)["event"]
            for r, status in zip(self.requests, self.answered, strict=True)
            if status == 200
        ]


def signed_by(secret: str, received: Received) -> bool:
    expected = "sha256=" + hmac.new(secret.encode(), received.body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, received.signature)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                status = state.statuses.pop(0) if state.statuses else 200
                state.requests.append(
                    Received(body, self.headers.get("X-Contextview-Signature", ""))
                )
                state.answered.append(status)
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
