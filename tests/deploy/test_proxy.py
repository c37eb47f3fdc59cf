"""The production route: nginx in front of gunicorn, as docker-compose.yml runs it.

There is no container engine here, so the compose file and the proxy's configuration
are checked as files; where nginx is installed, the same configuration also runs
against a real gunicorn and faces slow clients.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.conf import settings
from django.db import connection

from tests.conftest import (
    ROOT,
    _free_port,
    _gunicorn_env,
    _stop,
    _wait_answering,
    database_url,
)
from tests.sdk.conftest import OwnServer

TEMPLATE = ROOT / "deploy" / "nginx.conf.template"
COMPOSE = ROOT / "docker-compose.yml"
NGINX = shutil.which("nginx") or next(
    (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
)
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed here")


def _compose() -> dict[str, dict[str, dict[str, object]]]:
    document: dict[str, dict[str, dict[str, object]]] = yaml.safe_load(COMPOSE.read_text())
    return document


def _directives(text: str) -> dict[str, list[str]]:
    """Every `name value;` of an nginx file, by name (comments left out)."""
    found: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if match := re.fullmatch(r"([a-z_0-9]+)\s+(.*);", line):
            found.setdefault(match[1], []).append(match[2].strip())
    return found


def render(values: dict[str, str]) -> str:
    """The template as the nginx image's envsubst fills it: only names it is given."""
    return re.sub(r"\$\{(\w+)\}", lambda m: values.get(m[1], m[0]), TEMPLATE.read_text())


def test_it_publishes_only_the_proxy_in_the_compose_file() -> None:
    services = _compose()["services"]
    published = {name for name, service in services.items() if service.get("ports")}
    assert published == {"proxy"}
    proxy = services["proxy"]
    assert (
        "./deploy/nginx.conf.template:/etc/nginx/templates/default.conf.template:ro"
        in (
            proxy["volumes"]  # type: ignore[operator]
        )
    )
    environment = proxy["environment"]
    assert environment["CONTEXTVIEW_UPSTREAM"] == "web:8000"  # type: ignore[index]
    assert str(proxy["ports"][0]).endswith(f":{environment['PROXY_PORT']}")  # type: ignore[index]
    web_env = yaml.safe_load(COMPOSE.read_text())["x-app-env"]
    assert web_env["BEHIND_PROXY"] == "true"
    # The app and the proxy read the same body limits, with the app's defaults.
    for name, mib in (("INGEST_MAX_BYTES", 20), ("OTLP_MAX_BYTES", 64), ("IMPORT_MAX_BYTES", 256)):
        default = f"${{{name}:-{mib * 1024 * 1024}}}"
        assert web_env[name] == environment[name] == default, name  # type: ignore[index]
        assert getattr(settings, name) == mib * 1024 * 1024, name


def test_it_buffers_requests_and_answers_with_the_apps_limits() -> None:
    directives = _directives(TEMPLATE.read_text())
    assert directives["proxy_request_buffering"] == ["on"]
    assert directives["proxy_buffering"] == ["on"]
    assert directives["client_max_body_size"] == [
        "${INGEST_MAX_BYTES}",
        "${OTLP_MAX_BYTES}",
        "${IMPORT_MAX_BYTES}",
    ]
    for timeout in ("client_header_timeout", "client_body_timeout", "proxy_read_timeout"):
        assert re.fullmatch(r"\d+s", directives[timeout][0]), timeout
    headers = {value.split()[0]: value.split()[1] for value in directives["proxy_set_header"]}
    assert headers["X-Forwarded-Proto"] == "$scheme"
    assert headers["X-Forwarded-For"] == "$proxy_add_x_forwarded_for"
    assert headers["Host"] == "$http_host"
    assert set(re.findall(r"\$\{(\w+)\}", TEMPLATE.read_text())) == {
        "CONTEXTVIEW_UPSTREAM",
        "PROXY_PORT",
        "INGEST_MAX_BYTES",
        "OTLP_MAX_BYTES",
        "IMPORT_MAX_BYTES",
    }


# --- with a real nginx ------------------------------------------------------------------


@pytest.fixture
def proxy(gunicorn_api: str) -> Iterator[str]:
    """A local nginx with the repository's configuration in front of the test gunicorn."""
    with nginx_in_front_of(gunicorn_api) as base:
        yield base


@contextlib.contextmanager
def nginx_in_front_of(upstream: str) -> Iterator[str]:
    """Base URL of a local nginx running the repository's configuration before `upstream`."""
    assert NGINX is not None
    folder = Path(tempfile.mkdtemp(prefix="contextview-nginx-"))
    folder.chmod(0o755)
    for name in ("body", "proxy"):
        (folder / name).mkdir(mode=0o777)
        (folder / name).chmod(0o777)
    port = _free_port()
    (folder / "contextview.conf").write_text(
        render(
            {
                "CONTEXTVIEW_UPSTREAM": upstream.removeprefix("http://"),
                "PROXY_PORT": f"127.0.0.1:{port}",
                "INGEST_MAX_BYTES": str(settings.INGEST_MAX_BYTES),
                "OTLP_MAX_BYTES": str(settings.OTLP_MAX_BYTES),
                "IMPORT_MAX_BYTES": str(settings.IMPORT_MAX_BYTES),
            }
        )
    )
    (folder / "nginx.conf").write_text(
        ("user root;\n" if os.geteuid() == 0 else "")
        + f"""worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    include {folder}/contextview.conf;
}}
"""
    )
    argv = [NGINX, "-p", str(folder), "-e", str(folder / "error.log"), "-c"]
    argv += [str(folder / "nginx.conf"), "-g", "daemon off;"]
    checked = subprocess.run([*argv, "-t"], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_answering(f"{base}/healthz", proc, str(folder / "error.log"), 30, "nginx")
        yield base
    finally:
        _stop(proc)
        shutil.rmtree(folder, ignore_errors=True)


class SlowClients:
    """`count` connections that send a request's first line and then one byte of
    header every 0.2 s, never finishing, until stopped."""

    def __init__(self, base: str, count: int) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.sockets = [
            socket.create_connection((host, int(port)), timeout=5) for _ in range(count)
        ]
        for sock in self.sockets:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        while not self.done.wait(0.2):
            for sock in self.sockets:
                try:
                    sock.send(b"a")
                except OSError:
                    pass

    def stop(self) -> None:
        self.done.set()
        self.thread.join()
        for sock in self.sockets:
            sock.close()


def _answered(base: str, probes: int, timeout: float) -> int:
    """How many of `probes` concurrent GET /healthz are answered within `timeout`."""
    results: list[bool] = []

    def probe() -> None:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=timeout) as response:
                results.append(response.status == 200)
        except OSError:
            results.append(False)

    threads = [threading.Thread(target=probe) for _ in range(probes)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(results)


@needs_nginx
@pytest.mark.django_db(transaction=True)
def test_it_keeps_answering_while_slow_clients_trickle_their_headers(
    proxy: str, gunicorn_api: str
) -> None:
    # Straight at gunicorn, 16 slow clients hold its threads (4 here): most health
    # checks go unanswered. That is what the proxy is for.
    slow = SlowClients(gunicorn_api, 16)
    try:
        time.sleep(0.5)
        direct = _answered(gunicorn_api, 8, timeout=3)
    finally:
        slow.stop()
    assert direct < 8
    slow = SlowClients(proxy, 64)
    try:
        time.sleep(0.5)
        started = time.monotonic()
        through_proxy = _answered(proxy, 8, timeout=3)
        elapsed = time.monotonic() - started
    finally:
        slow.stop()
    print(f"answered: {direct}/8 straight, {through_proxy}/8 through nginx in {elapsed:.2f} s")
    assert through_proxy == 8, f"{through_proxy} of 8 answered through nginx"
    assert elapsed < 3


@needs_nginx
@pytest.mark.django_db(transaction=True)
def test_it_refuses_a_body_over_the_limit_as_json_even_chunked(proxy: str) -> None:
    too_big = b"x" * (settings.INGEST_MAX_BYTES + 1)
    for chunked in (False, True):
        body = iter([too_big]) if chunked else too_big
        request = urllib.request.Request(
            f"{proxy}/api/v1/ingest",
            data=body,  # type: ignore[arg-type]
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": "Bearer x"}
            | ({"Transfer-Encoding": "chunked"} if chunked else {}),
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 413, chunked
        assert b"over the limit" in refused.value.read()


@needs_nginx
@pytest.mark.django_db(transaction=True)
def test_it_lets_exports_and_uploads_larger_than_a_batch_through_to_the_app(
    proxy: str, gunicorn_api: str
) -> None:
    # Over the ingest limit, under the OTLP and import ones: the app answers (401 for
    # the made-up key), not the proxy's 413. The app refuses before reading the body,
    # and reads the rest only then, so neither nginx (which would answer 502) nor a
    # client straight at gunicorn sees the connection reset under it.
    body = b"x" * (settings.INGEST_MAX_BYTES + 1)
    routes = (("/v1/traces", "application/x-protobuf"), ("/api/v1/import", "text/plain"))
    for base, (path, kind) in itertools.product((proxy, gunicorn_api), routes):
        request = urllib.request.Request(
            f"{base}{path}",
            data=body,
            method="POST",
            headers={"Content-Type": kind, "Authorization": "Bearer x"},
        )
        with pytest.raises(urllib.error.HTTPError) as answer:
            urllib.request.urlopen(request, timeout=60)
        assert answer.value.code == 401, (base, path, answer.value.code)


@needs_nginx
@pytest.mark.django_db(transaction=True)
def test_it_tells_the_app_the_scheme_the_client_used(
    django_db_blocker: Any, _celery_test_queue: str
) -> None:
    with django_db_blocker.unblock():
        url = database_url(connection.settings_dict)
    env = _gunicorn_env(url, _celery_test_queue, BEHIND_PROXY="true", SECURE_SSL_REDIRECT="true")
    app = OwnServer(env=env)
    app.start()
    try:
        with nginx_in_front_of(app.url) as base:
            # Plain HTTP through nginx: the app hears "http" and redirects to HTTPS,
            # keeping the host and port the client asked for.
            assert _first_answer(f"{base}/login/") == (301, f"https://{base[7:]}/login/")
            # A client claiming HTTPS itself is not believed: nginx says what it saw.
            spoofed = _first_answer(f"{base}/login/", {"X-Forwarded-Proto": "https"})
            assert spoofed[0] == 301
        # The app trusts the header (BEHIND_PROXY): from the proxy, "https" is served.
        assert _first_answer(f"{app.url}/login/", {"X-Forwarded-Proto": "https"})[0] == 200
    finally:
        app.stop()


def _first_answer(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """Status and Location of `url`'s answer, redirects not followed."""
    request = urllib.request.Request(url, headers=headers or {})
    opener = urllib.request.build_opener(_NoRedirects)
    try:
        with opener.open(request, timeout=10) as response:
            return response.status, response.headers.get("Location", "")
    except urllib.error.HTTPError as answer:
        return answer.code, answer.headers.get("Location", "")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None
