"""The settings module read fresh in a subprocess, as a server process reads it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAMES = [
    "SESSION_COOKIE_SECURE",
    "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_PROXY_SSL_HEADER",
    "SECURE_SSL_REDIRECT",
    "CSRF_TRUSTED_ORIGINS",
    "AXES_FAILURE_LIMIT",
]
VARIABLES = [
    "BEHIND_PROXY",
    "SECURE_COOKIES",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_SSL_REDIRECT",
    "CSRF_TRUSTED_ORIGINS",
    "SIGNIN_FAILURE_LIMIT",
    "SIGNIN_LOCKOUT_MINUTES",
]


def _settings(**env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    script = (
        "import json, contextview.settings as s; "
        f"print(json.dumps({{n: getattr(s, n) for n in {NAMES!r}}}))"
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _read(**env: str) -> dict[str, object]:
    done = _settings(**env)
    assert done.returncode == 0, done.stderr
    values: dict[str, object] = json.loads(done.stdout)
    return values


def test_it_defaults_to_plain_http_for_local_use() -> None:
    assert _read() == {
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_HSTS_SECONDS": 0,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": False,
        "SECURE_PROXY_SSL_HEADER": None,
        "SECURE_SSL_REDIRECT": False,
        "CSRF_TRUSTED_ORIGINS": [],
        "AXES_FAILURE_LIMIT": 5,
    }


def test_it_reads_the_https_settings_from_the_environment() -> None:
    assert _read(
        BEHIND_PROXY="true",
        SECURE_COOKIES="yes",
        SECURE_HSTS_SECONDS="31536000",
        SECURE_HSTS_INCLUDE_SUBDOMAINS="1",
        SECURE_SSL_REDIRECT="on",
        CSRF_TRUSTED_ORIGINS="https://cv.example.com, https://cv2.example.com",
        SIGNIN_FAILURE_LIMIT="3",
    ) == {
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "SECURE_SSL_REDIRECT": True,
        "CSRF_TRUSTED_ORIGINS": ["https://cv.example.com", "https://cv2.example.com"],
        "AXES_FAILURE_LIMIT": 3,
    }


def test_it_stops_on_a_bad_value_naming_the_variable() -> None:
    for name, value in [
        ("SECURE_COOKIES", "maybe"),
        ("SECURE_HSTS_SECONDS", "a year"),
        ("SECURE_HSTS_SECONDS", "-1"),
        ("BEHIND_PROXY", "nginx"),
        ("SIGNIN_LOCKOUT_MINUTES", "0"),
        ("SIGNIN_FAILURE_LIMIT", "0"),
    ]:
        done = _settings(**{name: value})
        assert done.returncode != 0
        assert name in done.stderr.splitlines()[-1], done.stderr


SERVE = """
import json, django
django.setup()
from django.conf import settings
from django.test import Client
from tests.plainstatic import plain_storages
settings.STORAGES = plain_storages(settings.STORAGES)
client = Client()
secure = client.get("/login/", HTTP_X_FORWARDED_PROTO="https")
plain = client.get("/login/")
print(json.dumps({
    "status": secure.status_code,
    "hsts": secure.get("Strict-Transport-Security"),
    "cookie_secure": bool(secure.cookies["csrftoken"]["secure"]),
    "plain": [plain.status_code, plain.get("Location")],
}))
"""


def test_it_serves_https_behind_the_proxy_as_configured() -> None:
    environ = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    environ.update(
        DJANGO_SETTINGS_MODULE="contextview.settings",
        ALLOWED_HOSTS="testserver",
        BEHIND_PROXY="true",
        SECURE_COOKIES="true",
        SECURE_HSTS_SECONDS="3600",
        SECURE_SSL_REDIRECT="true",
    )
    done = subprocess.run(
        [sys.executable, "-c", SERVE], cwd=ROOT, env=environ, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "status": 200,
        "hsts": "max-age=3600",
        "cookie_secure": True,
        "plain": [301, "https://testserver/login/"],
    }
