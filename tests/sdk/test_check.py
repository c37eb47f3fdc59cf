"""`python -m contextview.sdk check`, run as an engineer runs it on an agent's machine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, _free_port

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _check(*args: str, **env: str) -> tuple[int, list[str]]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXTVIEW_")}
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-m", "contextview.sdk", "check", "--timeout", "5", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, done.stdout.splitlines()


def test_it_passes_with_the_agents_settings_from_the_environment(
    gunicorn_api: str, project_key: str, tmp_path: Path
) -> None:
    status, lines = _check(
        CONTEXTVIEW_URL=gunicorn_api,
        CONTEXTVIEW_KEY=project_key,
        CONTEXTVIEW_SPOOL=str(tmp_path / "spool"),
    )
    assert status == 0, lines
    assert [line.split()[0] for line in lines] == ["ok", "ok", "ok", "ok"]
    assert lines[0].startswith(f"ok    server {gunicorn_api} answers (")
    assert lines[1] == f"ok    key {project_key[:12]}… may ingest"
    assert lines[2] == f"ok    spool {tmp_path / 'spool'} can be written"
    assert lines[3] == f"ok    spool {tmp_path / 'spool'}: no events set aside"


def test_it_says_what_is_wrong_with_a_key(gunicorn_api: str, project_key: str) -> None:
    from contextview.projects.models import Project
    from contextview.projects.services import apikey_create

    status, lines = _check("--url", gunicorn_api, "--key", project_key[:-4] + "xxxx")
    assert status == 1
    assert lines[0].startswith("ok    server")
    assert lines[1].startswith("FAIL  key cv_") and "answered 401" in lines[1]
    assert "does not know this key" in lines[1]

    reader = apikey_create(project=Project.objects.get(slug="sdk"), can_write=False).secret
    status, lines = _check("--url", gunicorn_api, "--key", reader)
    assert status == 1 and "answered 403" in lines[1] and "may only read" in lines[1]

    status, lines = _check("--url", gunicorn_api)
    assert status == 1 and lines[1] == "FAIL  key: none given (--key, or CONTEXTVIEW_KEY)"


def test_it_fails_on_a_server_that_is_not_there_and_a_spool_it_cannot_write(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    url = f"http://127.0.0.1:{_free_port()}"
    status, lines = _check("--url", url, "--key", "cv_x", "--spool", str(blocker / "spool"))
    assert status == 1
    assert lines[0].startswith(f"FAIL  server {url}: cannot connect")
    assert lines[1].startswith("FAIL  key cv_x: the ingest request failed")
    assert lines[2].startswith(f"FAIL  spool {blocker / 'spool'}: cannot write there")
