"""schemathesis against a real gunicorn: generated requests for every operation of
openapi.json, each answered without a 500, only with a status the document lists, and
with a body of the shape the document gives for that status.

Bounded: a fixed seed, at most 15 examples per operation and phase, one worker; under
a minute here. Path parameters are drawn half the time from a project that holds a
real session (its id has a slash), steps and a directive, so the routes behind the
404s are reached too; a diff's `from` and `to` most of the time, as both must be steps.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from contextview.projects.services import apikey_create, project_get_or_create
from tests.web.conftest import order_session_events

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance"
SESSION = "team/agent-7"
PLAIN = "order-debug-42"  # schemathesis does not put a slash in a path parameter itself
CONFIG = """
[dictionaries.sessions]
values = ["{session}", "{plain}"]
[dictionaries.directives]
values = ["{directive}"]
[dictionaries.steps]
values = [0, 1, 2]

[parameters]
"path.session_id" = {{ dictionary = "sessions", probability = 0.5 }}
"path.directive_id" = {{ dictionary = "directives", probability = 0.5 }}
"path.index" = {{ dictionary = "steps", probability = 0.5 }}
"query.from" = {{ dictionary = "steps", probability = 0.8 }}
"query.to" = {{ dictionary = "steps", probability = 0.8 }}
"""


def _schemathesis(base: str, key: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run",
         f"{base}/api/v1/openapi.json", "--url", base,
         "--header", f"Authorization: Bearer {key}", "--checks", CHECKS,
         "--phases", "examples,coverage,fuzzing", "--max-examples", "15", "--workers", "1",
         "--seed", "11", "--no-color", "--generation-database", "none",
         "--request-timeout", "20"],
        cwd=config.parent,  # where schemathesis keeps its cache: not the checkout
        capture_output=True,
        text=True,
        timeout=170,
    )  # fmt: skip


@pytest.fixture
def config(gunicorn_api: str, tmp_path: Path) -> tuple[str, Path]:
    """A key of a project with a real session, and the schemathesis config naming it."""
    project, _ = project_get_or_create(slug="fuzzed")
    key = apikey_create(project=project, name="schemathesis").secret
    headers = {"Authorization": f"Bearer {key}"}
    batch = {"batch": order_session_events(SESSION) + order_session_events(PLAIN)}
    answer = httpx.post(f"{gunicorn_api}/api/v1/ingest", json=batch, headers=headers)
    assert [r["status"] for r in answer.json()["results"]] == [201] * 8
    directive = httpx.post(
        f"{gunicorn_api}/api/v1/sessions/{PLAIN}/directives",
        json={"type": "set_mode", "mode": "sliding"},
        headers=headers,
    )
    assert directive.status_code == 201
    path = tmp_path / "schemathesis.toml"
    path.write_text(CONFIG.format(session=SESSION, plain=PLAIN, directive=directive.json()["id"]))
    return key, path


def test_it_answers_every_generated_request_with_a_documented_status(
    gunicorn_api: str, config: tuple[str, Path]
) -> None:
    key, path = config
    done = _schemathesis(gunicorn_api, key, path)
    assert done.returncode == 0, done.stdout[-12000:] + done.stderr[-3000:]
    assert "Missing test data" not in done.stdout, done.stdout[-6000:]
