"""README.md's "Send OpenTelemetry" example, run as written against a real server."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

README = Path(__file__).resolve().parents[2] / "README.md"


def section_blocks(language: str) -> list[str]:
    text = README.read_text()
    section = text.split("## Send OpenTelemetry", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def test_it_runs_the_readme_example(
    gunicorn_api: str, model_api: str, transactional_db: None, monkeypatch: Any
) -> None:
    pytest.importorskip("openinference.instrumentation.openai")
    from openinference.instrumentation.openai import OpenAIInstrumentor

    from contextview.projects.services import apikey_create, project_get_or_create

    project, _ = project_get_or_create(slug="readme-otel")
    key = apikey_create(project=project, name="readme").secret
    (shell,) = section_blocks("sh")
    for name, value in re.findall(r"export (\w+)=\"?([^\"\s]+)\"?", shell):
        value = value.replace("$KEY", key).replace("http://127.0.0.1:8000", gunicorn_api)
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_BASE_URL", model_api)
    monkeypatch.setenv("OPENAI_API_KEY", "stand-in")
    (example,) = section_blocks("python")
    try:
        exec(compile(example, "README.md", "exec"), {})
    finally:
        OpenAIInstrumentor().uninstrument()
    with httpx.Client(
        base_url=f"{gunicorn_api}/api/v1", headers={"Authorization": f"Bearer {key}"}
    ) as api:
        assert api.get("/sessions/order-42").json()["steps"] == 1
        step = api.get("/sessions/order-42/steps/0").json()
    assert step["before"][0]["content"] == "Why does order SO20260101007 time out?"
