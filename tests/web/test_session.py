from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

from django.test import Client

from contextview.sessions.models import Directive, Session
from tests.api_client import Api, step
from tests.web.conftest import NGINX_504, live_url

HTMX = {"HTTP_HX_REQUEST": "true"}


def _chart(page: str, name: str) -> Any:
    """The chart's data-rows or data-meta, as the browser's script reads them."""
    match = re.search(rf'data-{name}="([^"]*)"', page)
    assert match, name
    return json.loads(html.unescape(match.group(1)))


def test_it_shows_the_session_header_chart_data_and_steps(
    login: Callable[..., Client], order_session: Session
) -> None:
    page = login("viewer").get(f"/sessions/{order_session.pk}/").content.decode()
    for text in ["support-bot", "gpt-4o", "cl100k_base", "400 tokens", "40 reserved",
                 "member id A12345", "summarize", "reload"]:  # fmt: skip
        assert text in page, text
    rows = _chart(page, "rows")
    assert [r[0] for r in rows] == [0, 1, 2]
    index, mode, before, after, partitions, flags, _, reported_after, ops, lo, hi, unseen = rows[0]
    assert unseen is None  # no provider usage: nothing hidden from the log
    assert mode == "summary" and ops == "summarize" and reported_after == 60
    assert index == lo == hi == 0
    assert after < before and sum(partitions.values()) == after
    assert "entity_loss" in flags
    meta = _chart(page, "meta")
    assert meta["budget"] == {"max_tokens": 400, "limit": 360}
    assert meta["step_url"] == f"/sessions/{order_session.pk}/steps/"


def test_it_shows_what_the_session_was_asked_under_its_id(
    api: Api, login: Callable[..., Client]
) -> None:
    asked = "Why does <b>checkout</b> fail? " + "The log says 504 again. " * 10
    label = {"session_id": "long-ask", "metadata": {"task": asked}}
    short = {"id": "u1", "role": "user", "content": "Is SO20260101042 shipped?"}
    api.ingest({"batch": [{"id": "l-start", "type": "session", "body": label},
                          step("long-ask", 0, [short]), step("short-ask", 0, [short]),
                          step("silent", 0, [])]})  # fmt: skip
    client = login("viewer")

    def header(external_id: str) -> str:
        session = Session.objects.get(external_id=external_id)
        page = client.get(f"/sessions/{session.pk}/").content.decode()
        return page.split('<dl class="facts">', 1)[0]

    asked_line = r'<p [^>]*class="session-asked" title="([^"]*)">([^<]*)</p>'
    line = re.search(asked_line, header("long-ask"))
    assert line is not None
    title, shown = html.unescape(line.group(1)), html.unescape(line.group(2))
    # Cut at 120 characters; the line the list keeps (200) in its title.
    assert shown == " ".join(asked.split())[:119].rstrip() + "…"
    assert title == " ".join(asked.split())[:199].rstrip() + "…"
    assert "<b>" not in line.group(0)  # what an agent sent is text, never markup
    assert (
        'class="session-asked" title="Is SO20260101042 shipped?">Is SO20260101042 shipped?</p>'
        in header("short-ask")
    )
    assert re.search(r'class="session-asked" hidden></p>', header("silent"))


def test_it_renders_a_session_before_its_statistics(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    from tests.web.conftest import order_session_events

    session = seed(order_session_events("fresh"), stats=False)
    client = login("viewer")
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "statistics pending" in page
    fragment = client.get(f"/sessions/{session.pk}/steps/0/", **HTMX).content.decode()
    assert "Statistics pending" in fragment and "tool_result_32" in fragment


def test_it_shows_how_far_the_statistics_have_got(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    from tests.web.conftest import order_session_events

    session = seed(order_session_events("halfway"), stats=False)
    # As a worker leaves it between two chunks of a long session.
    Session.objects.filter(pk=session.pk).update(stats_steps_done=2)
    client = login("viewer")
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert "(statistics for 2 so far)" in page
    listing = client.get("/").content.decode()
    assert "pending (2 of 3 steps)" in listing


def test_it_shows_a_step_as_a_fragment_or_a_page(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    url = f"/sessions/{order_session.pk}/steps/1/"
    fragment = client.get(url, **HTMX).content.decode()
    assert "<html" not in fragment and 'id="step-view"' in fragment
    page = client.get(url).content.decode()
    assert "<html" in page and 'id="step-view"' in page
    restored = client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    assert "<html" in restored.content.decode()
    assert client.get(f"/sessions/{order_session.pk}/steps/99/").status_code == 404


def test_it_diffs_a_step_message_by_message(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    first = client.get(f"/sessions/{order_session.pk}/steps/0/", **HTMX).content.decode()
    # The log was folded into the summary: both sides of one row, with a fold marker.
    assert 'data-kind="summary"' in first
    assert "folded into tool result: “504 from inventory-svc after 3 s” (summarize)" in first
    assert "Open fold" in first
    assert "log body is normal; keep error code and timeout" in first
    assert 'class="lost-entity">SO20260101007<' in first  # lost in the summary
    assert "entity_loss" in first and "did not survive" in first

    second = client.get(f"/sessions/{order_session.pk}/steps/1/", **HTMX).content.decode()
    assert 'data-kind="dropped"' in second and "dropped (drop)" in second
    assert "<ins> at checkout since Monday</ins>" in second  # word-level change
    assert "Justification: add what the customer said" in second
    assert 'data-kind="changed"' in second

    third = client.get(f"/sessions/{order_session.pk}/steps/2/", **HTMX).content.decode()
    assert 'data-kind="reloaded"' in third and "reload_regret" in third


def test_it_links_neighbouring_and_flagged_steps(
    login: Callable[..., Client], order_session: Session
) -> None:
    fragment = (
        login("viewer").get(f"/sessions/{order_session.pk}/steps/1/", **HTMX).content.decode()
    )
    assert f'data-key="k" href="/sessions/{order_session.pk}/steps/0/"' in fragment
    assert f'data-key="j" href="/sessions/{order_session.pk}/steps/2/"' in fragment
    assert f'data-key="[" href="/sessions/{order_session.pk}/steps/0/"' in fragment
    assert f'data-key="]" href="/sessions/{order_session.pk}/steps/2/"' in fragment


def test_it_compares_two_steps_with_token_deltas(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    page = client.get(f"/sessions/{order_session.pk}/compare/?from=0&to=2").content.decode()
    assert "Tokens per partition" in page and "tool_result_32" in page
    assert "at checkout since Monday" in page
    tool_row = page.split("<td>tool</td>")[1].split("</tr>")[0]
    assert 'class="num delta">+' in tool_row  # summary and reloaded log add to the tool partition
    missing = client.get(f"/sessions/{order_session.pk}/compare/?from=0&to=7").content.decode()
    assert "no step 7" in missing
    assert "A dash means" not in page  # every message counted: no dash to explain


def test_a_comparison_explains_its_dashes_only_when_it_shows_some(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    events = [step("uncounted", n, [{"id": f"m{n}", "role": "user", "content": f"turn {n}"}])
              for n in range(2)]  # fmt: skip
    session = seed(events, stats=False)
    page = login("viewer").get(f"/sessions/{session.pk}/compare/?from=0&to=1").content.decode()
    assert "A dash means some message's tokens are not counted yet" in page
    assert "—" in page.split("Tokens per partition", 1)[1].split("A dash means", 1)[0]


def test_it_pages_the_step_list(api: Api, login: Callable[..., Client], seed) -> None:
    events = [step("long-run", n, [{"id": f"m{n}", "role": "user", "content": f"turn {n}"}])
              for n in range(230)]  # fmt: skip
    session = seed(events, stats=False)
    client = login("viewer")
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="step-row-99"' in page and 'id="step-row-100"' not in page
    later = client.get(f"/sessions/{session.pk}/?after=99", HTTP_HX_REQUEST="true",
                       HTTP_HX_TARGET="steps").content.decode()  # fmt: skip
    assert "<html" not in later and 'id="step-row-100"' in later and 'id="step-row-199"' in later
    assert 'id="step-row-200"' not in later and "?before=100" in later and "?after=199" in later
    earlier = client.get(f"/sessions/{session.pk}/?before=100").content.decode()
    assert 'id="step-row-0"' in earlier and 'id="step-row-99"' in earlier


def test_it_keeps_the_query_count_flat_as_sessions_grow(
    login: Callable[..., Client], seed, django_assert_max_num_queries
) -> None:
    client = login("viewer")

    def session_of(n: int, name: str) -> Session:
        context = [{"id": f"m{k}", "role": "user", "content": f"message {k}"} for k in range(n)]
        return seed([step(name, i, context, action={"action": "drop", "target": f"m{i}"})
                     for i in range(n)])  # fmt: skip

    small, large = session_of(3, "small"), session_of(40, "large")
    counts = {}
    for session in (small, large):
        for url in [f"/sessions/{session.pk}/", f"/sessions/{session.pk}/steps/1/",
                    f"/sessions/{session.pk}/compare/?from=0&to=2"]:  # fmt: skip
            from django.db import connection
            from django.test.utils import CaptureQueriesContext

            with CaptureQueriesContext(connection) as captured:
                assert client.get(url).status_code == 200
            counts.setdefault(url.replace(str(session.pk), "S"), []).append(len(captured))
    for url, (small_count, large_count) in counts.items():
        assert large_count == small_count, (url, small_count, large_count)


def test_it_opens_a_fold_and_previews_a_restore(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    fold = client.get(f"/sessions/{order_session.pk}/steps/0/fold/?result=sum_1", **HTMX)
    text = fold.content.decode()
    assert "tool_result_32" in text and "upstream timed out" in text
    assert "folded at step 0 by summarize" in text and " tok<" in text

    preview = client.get(f"/sessions/{order_session.pk}/steps/1/restore/?id=tool_result_32", **HTMX)
    text = preview.content.decode()
    assert 'class="restored"' in text
    assert "of the budget (400 tokens). Anything they were folded into" in text
    # A viewer sees the preview but cannot send it.
    assert "Send to agent" not in text and "needs an editor" in text
    # The fold's form posts the checked ids: a compaction's hundreds are too many for
    # a URL (gunicorn answers 414 past 4 KB of it).
    assert 'method="post"' in fold.content.decode()
    posted = client.post(
        f"/sessions/{order_session.pk}/steps/1/restore/", {"id": ["tool_result_32"]}, **HTMX
    )
    assert posted.status_code == 200 and 'class="restored"' in posted.content.decode()
    archive = client.get(f"/sessions/{order_session.pk}/archive/").content.decode()
    assert "tool_result_32" in archive and "a1" in archive and "at step 2" in archive


def test_it_warns_when_a_restore_would_not_fit(
    api: Api, login: Callable[..., Client], seed
) -> None:
    big = "\n".join(f"2026/01/15 10:00:{s:02d} [error] upstream 504 order SO2026010{s:04d}"
                    for s in range(60))  # fmt: skip
    session = seed([
        {"id": "tight", "type": "session",
         "body": {"session_id": "tight", "budget": {"max_tokens": 200, "reserved_tokens": 20}}},
        step("tight", 0, [{"id": "log", "role": "tool", "content": big}],
             action={"action": "drop", "target": "log"}),
    ])  # fmt: skip
    text = login("editor").get(f"/sessions/{session.pk}/steps/0/restore/?id=log").content.decode()
    assert "It would not fit" in text and "Send to agent" in text


def test_a_restore_preview_counts_what_the_provider_counted_beyond_the_log(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    # A Claude Code transcript holds no system prompt or tool definitions: the provider's
    # usage counts them, and the step list's Occ. with them. A preview without them said
    # restoring gave 37% where the step alone was at 66%.
    log = {"id": "log", "role": "tool", "content": NGINX_504}
    ask = {"id": "u1", "role": "user", "content": "Why the 504?"}
    usage = {"input_tokens": 120_000, "output_tokens": 30}
    session = seed([
        {"id": "cc", "type": "session", "body": {"session_id": "cc", "model": "claude-sonnet-4-5"}},
        step("cc", 0, [ask, log], action={"action": "drop", "target": "log"}, usage=usage),
        step("cc", 1, [{"id": "u1"}], usage=usage),
    ])  # fmt: skip
    client = login("viewer")
    row = client.get(f"/sessions/{session.pk}/").content.decode()
    row = row[row.index('id="step-row-1"') :]
    occupancy = int(re.search(r'<td class="num">(\d+)%</td>', row).group(1))
    assert occupancy >= 50
    text = client.get(f"/sessions/{session.pk}/steps/1/restore/?id=log", **HTMX).content.decode()
    shown = int(re.search(r", (?:&lt;)?(\d+)% of the context window", text).group(1))
    # Putting a message back cannot leave the context smaller than the step's own.
    assert shown >= occupancy
    assert "the provider counted at this step beyond the log" in text


def test_the_step_list_says_why_occupancy_is_above_the_tokens_beside_it(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    # 36 tokens in the log and 13% of a 200,000-token window: the provider counted the
    # system prompt and tools the transcript does not hold. The header says so.
    usage = {"input_tokens": 26_000, "output_tokens": 30}
    ask = {"id": "u1", "role": "user", "content": "Why the 504?"}
    session = seed([
        {"id": "cc", "type": "session", "body": {"session_id": "cc", "model": "claude-sonnet-4-5"}},
        step("cc", 0, [ask], usage=usage),
    ])  # fmt: skip
    client = login("viewer")
    for url in (f"/sessions/{session.pk}/", f"/sessions/{session.pk}/report.html"):
        page = client.get(url).content.decode()
        head = page[page.index("Tokens before → after") :]
        head = head[: head.index("</tr>")]
        assert re.search(r'<abbr title="occupancy after the step: [^"]*system prompt', head), url


def test_it_sends_a_restore_directive_for_editors(
    api: Api, login: Callable[..., Client], order_session: Session
) -> None:
    editor = login("editor")
    sent = editor.post(f"/sessions/{order_session.pk}/restore/",
                       {"id": ["a1"], "step": "2"}, **HTMX)  # fmt: skip
    assert sent.status_code == 200 and "restore a1 at step 2" in sent.content.decode()
    assert "pending" in sent.content.decode() and "editor-user" in sent.content.decode()
    control = api.get(f"/sessions/{order_session.external_id}/control").json()
    assert control["directives"][0]["type"] == "restore"
    assert control["directives"][0]["targets"] == ["a1"] and control["directives"][0]["step"] == 2
    unknown = editor.post(f"/sessions/{order_session.pk}/restore/", {"id": ["sys"]}, **HTMX)
    assert unknown.status_code == 400 and "not folded or dropped" in unknown.content.decode()


def test_it_switches_modes_and_shows_pending_then_applied(
    api: Api, login: Callable[..., Client], order_session: Session
) -> None:
    editor = login("editor")
    url = live_url(editor.get(f"/sessions/{order_session.pk}/").content.decode())
    response = editor.post(f"/sessions/{order_session.pk}/mode/", {"mode": "hybrid"}, **HTMX)
    assert (
        "mode → hybrid" in response.content.decode()
        and "state-pending" in response.content.decode()
    )
    directive = Directive.objects.get(session=order_session)
    assert directive.created_by_user.username == "editor-user"

    # The page's live tail brings the step in the new mode: the directive applied at
    # that step, and the header's mode.
    api.ingest({"batch": [step("order-debug-42", 3, [{"id": "sys"}], mode="hybrid")]})
    text = editor.get(url, **HTMX).content.decode()
    panel = text[text.index('id="directives-panel" hx-swap-oob="true"') :]
    assert "state-applied" in panel and "at step 3" in panel
    assert '<dd id="current-mode" hx-swap-oob="true">hybrid</dd>' in text
    page = editor.get(f"/sessions/{order_session.pk}/").content.decode()
    meta = _chart(page, "meta")
    assert meta["directives"] == [{"step": 3, "label": "mode → hybrid", "by": "editor-user"}]


def test_it_says_an_acknowledged_mode_switch_waits_for_its_step(
    api: Api, login: Callable[..., Client], order_session: Session
) -> None:
    editor = login("editor")
    editor.post(f"/sessions/{order_session.pk}/mode/", {"mode": "hybrid"}, **HTMX)
    url = live_url(editor.get(f"/sessions/{order_session.pk}/").content.decode())
    directive = Directive.objects.get(session=order_session)
    # The SDK acknowledges first and sends the step in the new mode a moment later.
    acked = api.post(
        f"/sessions/{order_session.external_id}/control/{directive.public_id}/ack",
        {"status": "applied", "detail": "building in hybrid mode"},
    )
    assert acked.status_code == 200, acked.text
    text = editor.get(url, **HTMX).content.decode()
    panel = text[text.index('id="directives-panel"') :]
    assert "state-applied" in panel and "waiting for the agent's next step" in panel
    # The header keeps the mode the agent last reported.
    assert '<dd id="current-mode" hx-swap-oob="true">sliding</dd>' in text

    api.ingest({"batch": [step("order-debug-42", 3, [{"id": "sys"}], mode="hybrid")]})
    text = editor.get(live_url(text), **HTMX).content.decode()
    assert "at step 3 (acknowledged)" in text[text.index('id="directives-panel"') :]
    assert '<dd id="current-mode" hx-swap-oob="true">hybrid</dd>' in text


def test_it_lets_viewers_look_but_not_direct(
    api: Api, login: Callable[..., Client], order_session: Session
) -> None:
    viewer = login("viewer")
    page = viewer.get(f"/sessions/{order_session.pk}/").content.decode()
    assert "Switch mode" not in page and "need an editor" in page
    assert viewer.post(f"/sessions/{order_session.pk}/mode/", {"mode": "rag"}).status_code == 403
    restore = viewer.post(f"/sessions/{order_session.pk}/restore/", {"id": ["a1"]})
    assert restore.status_code == 403
    assert not Directive.objects.filter(session=order_session).exists()


def test_it_offers_the_modes_the_session_reported(login: Callable[..., Client], seed) -> None:
    session = seed([step("odd", 0, [{"id": "u", "role": "user", "content": "hi"}],
                         mode="window-64k")])  # fmt: skip
    page = login("editor").get(f"/sessions/{session.pk}/").content.decode()
    for mode in ["full", "sliding", "summary", "rag", "hybrid"]:
        assert f'<option value="{mode}"' in page
    assert 'value="window-64k"' in page and "window-64k (reported)</option>" in page


def test_it_draws_a_long_session_in_buckets_that_keep_the_peaks(
    login: Callable[..., Client], seed: Callable[..., Session], monkeypatch: Any
) -> None:
    from contextview.web import selectors

    monkeypatch.setattr(selectors, "CHART_POINTS", 4)
    sizes = [1, 3, 2, 9, 1, 1, 4, 2, 2, 5]
    events = [
        step("spiky", n, [{"id": f"log{n}", "role": "tool",
                           "content": " ".join(["504 upstream timeout"] * size)}])
        for n, size in enumerate(sizes)
    ]  # fmt: skip
    session = seed(events)
    rows = _chart(login("viewer").get(f"/sessions/{session.pk}/").content.decode(), "rows")
    # 10 steps in 4 points: buckets of 3 steps, each drawn at its fullest step.
    assert [(r[0], r[9], r[10]) for r in rows] == [(1, 0, 2), (3, 3, 5), (6, 6, 8), (9, 9, 9)]


def test_it_uses_the_users_own_role_in_a_shared_project(
    login: Callable[..., Client], order_session: Session
) -> None:
    login("admin")  # another member, with more rights
    viewer = login("viewer")
    assert viewer.post(f"/sessions/{order_session.pk}/mode/", {"mode": "rag"}).status_code == 403
    assert "Switch mode" not in viewer.get(f"/sessions/{order_session.pk}/").content.decode()


def test_it_shows_what_changed_since_the_previous_step_for_a_step_without_operations(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    sys_msg = {"id": "sys", "role": "system", "content": "You debug orders."}
    turns = [
        {"id": f"u{k}", "role": "user", "content": f"Question {k} about SO2026010100{k}"}
        for k in range(6)
    ]
    summary = {"id": "summary", "role": "user", "content": "Six questions about orders."}
    u6 = {"id": "u6", "role": "user", "content": "One more question."}
    session = seed(
        [
            step("plain", 0, [sys_msg, *turns[:5]]),
            step("plain", 1, [sys_msg, *turns]),
            step("plain", 2, [sys_msg, summary, u6]),
        ]
    )
    client = login("viewer")
    loop = client.get(f"/sessions/{session.pk}/steps/1/", **HTMX).content.decode()
    # Six messages unchanged since step 0, collapsed with their count; one new message.
    assert "6 unchanged messages" in loop
    assert loop.count('data-kind="added"') == 1 and "Question 5" in loop
    assert "After step 0" in loop and "Inferred operations" not in loop

    compacted = client.get(f"/sessions/{session.pk}/steps/2/", **HTMX).content.decode()
    assert "Inferred operations" in compacted
    assert "summarized from u0, u1, u2, u3, u4, u5 (summarize)" in compacted
    assert 'data-kind="summary"' in compacted and "Open fold" in compacted
    assert compacted.count('data-kind="folded"') == 5  # the sixth stands beside the summary
    fold = client.get(f"/sessions/{session.pk}/steps/2/fold/?result=summary", **HTMX)
    text = fold.content.decode()
    assert "Question 3 about SO20260101003" in text and "folded at step 2 by summarize" in text


def test_it_links_a_sub_agent_and_the_session_that_started_it(
    api: Api, login: Callable[..., Client]
) -> None:
    from pathlib import Path

    fixtures = Path(__file__).resolve().parents[1] / "importers" / "fixtures"
    with (fixtures / "claude_code.jsonl").open("rb") as f:
        answer = api.client.post("/api/v1/import", {"file": f}, **api.auth)
    assert answer.status_code == 201, answer.content
    parent = Session.objects.get(external_id="cc-7f3a")
    child = Session.objects.get(external_id="cc-7f3a:agent-b7e1")
    client = login("viewer")
    sub = client.get(f"/sessions/{child.pk}/").content.decode()
    assert f'Sub-agent of <a href="/sessions/{parent.pk}/">cc-7f3a</a>' in sub
    main = client.get(f"/sessions/{parent.pk}/").content.decode()
    assert f'<a href="/sessions/{child.pk}/">cc-7f3a:agent-b7e1</a>' in main


def test_it_names_the_limit_occupancy_is_measured_against(
    api: Api, login: Callable[..., Client]
) -> None:
    window_only = [
        {"id": "w-start", "type": "session",
         "body": {"session_id": "windowed", "model": "gpt-4o", "context_window": 128000}},
        step("windowed", 0, [{"id": "u", "role": "user", "content": "hello"}]),
    ]  # fmt: skip
    assert api.ingest({"batch": window_only}).status_code == 207
    session = Session.objects.get(external_id="windowed")
    client = login("viewer")
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    lines = json.loads(html.unescape(re.search(r'data-meta="([^"]*)"', page)[1]))["lines"]
    assert lines[0]["label"] == "context window"


def test_a_reorder_shows_its_order_by_length_not_as_a_python_list(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    # A compaction's reorder names every id of the new context in params.order
    # (the Codex sample's: 41 of them).
    ids = [f"m{k}" for k in range(30)]
    messages = [{"id": i, "role": "user", "content": f"note {i}"} for i in ids]
    order = list(reversed(ids))
    session = seed(
        [
            {"type": "session", "id": "ro-start", "body": {"session_id": "ro"}},
            step(
                "ro",
                0,
                messages,
                action={
                    "action": "reorder",
                    "params": {"order": order, "why": {"by": "age"}},
                    "reason": "newest first",
                },
            ),
        ]  # fmt: skip
    )
    page = login("viewer").get(f"/sessions/{session.pk}/steps/0/").content.decode()
    params = page[page.index('class="muted params"') :]
    params = params[: params.index("</div>")]
    assert "<summary>order: 30 items</summary>" in params
    assert "<code>m29, m28, m27" in params
    assert "[&#x27;" not in params and "&#x27;m29&#x27;" not in params
    assert "why={&quot;by&quot;: &quot;age&quot;}" in params
