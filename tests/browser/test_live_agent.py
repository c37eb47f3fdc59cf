"""A live demo fleet agent, running through the SDK against the server the browser uses,
applies what an engineer sends by clicking in the dashboard: a mode switch and a restore.

The agent's client and the browser talk to the same pytest-django ``live_server``, with a
key of the project the signed-in engineer is an editor of, so the directives the page
creates are the ones the agent polls for.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.api_client import Api
from tests.browser.conftest import Watched
from tests.sdk.conftest import Reader, live_agent
from tests.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WAIT_MS = 30_000


def _open_session(watched: Watched, live_server: Any, sid: str) -> Any:
    page = watched.page
    page.goto(f"{live_server.url}/")
    page.click(f'table a:text-is("{sid}")')
    page.wait_for_selector("#occupancy-chart .main-svg")
    return page


def test_a_live_chat_agent_applies_a_mode_switch_sent_from_the_page(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    sid = "live-chat-sliding"
    reader = Reader(live_server.url, api.issued.secret)
    with live_agent(live_server.url, api.issued.secret, name="chat-sliding", pace=0.1):
        watched = open_page(api.project, "editor")
        # Past its 20 scripted turns, the agent lingers on the session.
        wait_for(lambda: reader.has_step(sid, 21))
        page = _open_session(watched, live_server, sid)
        session_url = page.url
        assert page.locator("#current-mode").inner_text() == "sliding"

        page.select_option("#mode-select", "hybrid")
        page.click(".mode-form button[type=submit]")
        page.wait_for_selector("#directives-panel .state-pending")
        assert "mode → hybrid" in page.locator("#directives-panel").inner_text()

        # The agent picks it up on its next build; the panel, polling, shows it applied
        # and, once the step in the new mode is in (the acknowledgement comes a moment
        # before it), the header is redrawn in the new mode.
        page.wait_for_selector("#directives-panel .state-applied", timeout=WAIT_MS)
        expect(page.locator("#current-mode")).to_have_text("hybrid", timeout=WAIT_MS)
        page.wait_for_selector(
            '#occupancy-chart .annotation-text:has-text("mode → hybrid")', timeout=WAIT_MS
        )

        # A later step was built in hybrid mode: the member id is back in front of the model.
        def hybrid_step() -> dict[str, Any] | None:
            count = reader.get(f"/sessions/{sid}")["steps"]
            last = reader.get(f"/sessions/{sid}/steps/{count - 1}")
            return last if last["mode"] == "hybrid" else None

        step = wait_for(hybrid_step)
        assert any("A12345" in m["content"] for m in step["after"])
        page.goto(f"{session_url}steps/{step['index']}/")
        expect(page.locator("#step-view h2 .muted")).to_have_text("hybrid")
        constraint = page.locator("#step-view .cell.right", has_text="A12345").first
        # Unchanged since the step before, it may sit in a collapsed run: open it as a user would.
        constraint.wait_for(state="attached")
        run = page.locator(
            "#step-view details.unchanged-run",
            has=page.locator(".cell.right", has_text="A12345"),
        )
        if run.count():
            run.first.locator("> summary").click()
        expect(constraint).to_be_visible()
        assert api.get(f"/sessions/{sid}").json()["mode"] == "hybrid"
        assert api.get(f"/sessions/{sid}/control").json()["directives"] == []
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)


def test_a_live_debugging_agent_reloads_an_original_restored_from_the_page(
    api: Api, open_page: Callable[..., Watched], live_server: Any
) -> None:
    sid = "live-nginx-504-hunt"
    reader = Reader(live_server.url, api.issued.secret)
    with live_agent(live_server.url, api.issued.secret, name="nginx-504-hunt", pace=0.1):
        watched = open_page(api.project, "editor")
        wait_for(lambda: reader.has_step(sid, 12))
        # The step whose summary replaced the access log (tool_result_12).
        folded_at = next(
            index
            for index in range(reader.get(f"/sessions/{sid}")["steps"])
            if any(op["op"] == "summarize" and op["targets"] == ["tool_result_12"]
                   for op in reader.get(f"/sessions/{sid}/steps/{index}")["ops"])
        )  # fmt: skip
        page = _open_session(watched, live_server, sid)
        session_url = page.url

        # Open that step, then its fold: the original access log, in place.
        page.click(f'table.steps a[data-step="{folded_at}"]')
        page.wait_for_selector(f'#step-view[data-step="{folded_at}"]')
        page.click("a.open-fold")
        page.wait_for_selector(".fold-view")
        assert page.locator(".fold-view .original .msg-id").all_inner_texts() == ["tool_result_12"]

        # Preview putting it back, then send the restore to the agent.
        page.click(".fold-view button[type=submit]")
        page.wait_for_selector(".restore-view")
        assert "tool_result_12" in page.locator(".preview li.restored").inner_text()
        page.click(".restore-send button[type=submit]")
        page.wait_for_selector("#directives-panel .state-pending")
        assert f"restore tool_result_12 at step {folded_at}" in (
            page.locator("#directives-panel").inner_text()
        )

        page.wait_for_selector("#directives-panel .state-applied", timeout=WAIT_MS)

        # The agent acknowledges before it sends the step that reloads: wait for that step.
        scanned = [folded_at + 1]

        def reloading_step() -> dict[str, Any] | None:
            while scanned[0] < reader.get(f"/sessions/{sid}")["steps"]:
                step = reader.get(f"/sessions/{sid}/steps/{scanned[0]}")
                scanned[0] += 1
                if any(op["op"] == "reload" and op["targets"] == ["tool_result_12"]
                       for op in step["ops"]):  # fmt: skip
                    return step
            return None

        step = wait_for(reloading_step)

        # The archive says when it came back; that step's operations show the reload.
        page.click(".session-actions a:text('Folded originals (archive)')")
        row = page.locator("table.archive tbody tr").filter(
            has=page.locator("code", has_text=re.compile(r"^tool_result_12$"))
        )
        expect(row.first).to_contain_text(f"at step {step['index']}")
        page.goto(f"{session_url}steps/{step['index']}/")
        expect(page.locator("#step-view li.op-reload")).to_contain_text("tool_result_12")
        assert "tool_result_12" in [m["id"] for m in step["after"]]
        assert api.get(f"/sessions/{sid}/control").json()["directives"] == []
    assert not watched.dialogs and not watched.errors, (watched.dialogs, watched.errors)
