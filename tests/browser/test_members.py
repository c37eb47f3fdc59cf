"""A project admin manages its members from the dashboard, with the keyboard too."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from contextview.projects.models import Membership
from tests.api_client import Api
from tests.browser.conftest import Watched

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_adds_promotes_and_removes_a_member(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    User.objects.create_user("newcomer", password="pw")
    watched = open_page(api.project, "admin")
    page = watched.page
    confirms: list[str] = []
    page.remove_listener("dialog", watched._dialog)
    page.on("dialog", lambda d: (confirms.append(d.message), d.accept()))

    page.goto(f"{live_server.url}/?project={api.project.slug}")
    page.click("nav.top-links a:text-is('Members')")
    page.wait_for_selector("h1:has-text('Members')")
    page.fill("input[name=username]", "nobody")
    page.press("input[name=username]", "Enter")
    assert "no user named 'nobody'" in page.locator("p.error").inner_text()

    page.fill("input[name=username]", "newcomer")
    page.select_option("form.new-member select[name=role]", "viewer")
    page.press("input[name=username]", "Enter")
    row = page.locator('tr[data-member="newcomer"]')
    row.wait_for()
    row.locator("select").select_option("editor")
    row.locator("button:text-is('Set role')").click()
    page.wait_for_load_state("load")
    assert page.locator('tr[data-member="newcomer"] select').input_value() == "editor"
    assert Membership.objects.get(user__username="newcomer").role == "editor"

    # The only admin cannot step down.
    page.locator('tr[data-member="admin-in-browser"] select').select_option("viewer")
    page.locator('tr[data-member="admin-in-browser"] button:text-is("Set role")').click()
    assert "at least one admin" in page.locator("p.error").inner_text()

    page.locator('tr[data-member="newcomer"] button:text-is("Remove")').click()
    page.wait_for_function("() => !document.querySelector('tr[data-member=\"newcomer\"]')")
    assert confirms == [f"Remove newcomer from {api.project.name}?"]
    assert not Membership.objects.filter(user__username="newcomer").exists()
    # The two refusals are answered 400, which the console reports; nothing else.
    assert len(watched.errors) == 2 and all("status of 400" in e for e in watched.errors)
