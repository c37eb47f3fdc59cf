"""A real browser for the dashboard tests: Debian's chromium driven by Playwright.

No browser is downloaded: Playwright launches /usr/bin/chromium. The pages come
from pytest-django's ``live_server``; data goes in through the real ingest API.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from contextview.projects.services import membership_set
from contextview.sessions.models import Session
from scripts.chromium import CHROMIUM, CHROMIUM_ARGS
from tests.api_client import Api
from tests.web.conftest import compute_stats

# Playwright's sync API keeps an event loop in the test thread; Django would then
# refuse ORM calls from the tests themselves, which run synchronously all the same.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def seed_session(api: Api, events: list[dict[str, Any]]) -> Session:
    """Post `events` through the ingest API, compute statistics, return the session."""
    response = api.ingest({"batch": events})
    assert response.status_code == 207
    assert all(r["status"] < 300 for r in response.json()["results"]), response.json()
    return compute_stats(api.project, events[0]["body"]["session_id"])


def open_session(page: Any, session_id: str) -> None:
    """From the session list the page shows, open `session_id`'s page, its chart drawn."""
    page.click(f"text={session_id}")
    page.wait_for_selector("#occupancy-chart .main-svg")


class Watched:
    """A page, and every dialog, console error and page error it raised."""

    def __init__(self, page: Any) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()


@pytest.fixture
def open_page(browser: Any, live_server: Any) -> Iterator[Callable[..., Watched]]:
    """Sign in a new user with `role` in `project` and return its watched page."""
    contexts: list[Any] = []

    def open_as(project: Any, role: str = "editor", username: str | None = None) -> Watched:
        name = username or f"{role}-in-browser"
        user = User.objects.create_user(name, password="browser-pw")
        membership_set(user=user, project=project, role=role)
        context = browser.new_context(viewport={"width": 1500, "height": 1000})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(10_000)
        watched = Watched(page)
        page.goto(f"{live_server.url}/login/")
        page.fill("#id_username", name)
        page.fill("#id_password", "browser-pw")
        page.click("form.login button[type=submit]")
        page.wait_for_url(f"{live_server.url}/")
        return watched

    yield open_as
    for context in contexts:
        context.close()
