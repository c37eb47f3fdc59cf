"""Issue 6 in the dashboard: annotations, incidents, permalinks, reports, comparisons,
the project overview and the dataset export, through the pages a user opens."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.http import QueryDict
from django.test import Client

from contextview.core.distinct import unranged
from contextview.core.stats import OVER_70, OVER_90
from contextview.demo.scenarios import cm_order_timeout, mode_customer_chat
from contextview.postmortems import reports
from contextview.postmortems.models import Annotation, Incident
from contextview.postmortems.services import annotation_create, incident_mark
from contextview.sessions.models import Session
from contextview.web.selectors import TrendRange, message_anchor
from tests.api_client import Api, step
from tests.web.conftest import order_session_events

HTMX = {"HTTP_HX_REQUEST": "true"}


def _text(response: Any) -> str:
    if response.streaming:
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


def _jsonl(response: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _text(response).splitlines()]


# --- annotations -----------------------------------------------------------------------


def session_notes(client: Client, url: str) -> str:
    return str(client.get(f"{url}?scope=session", **HTMX).content.decode())


def test_it_lets_a_viewer_annotate_but_not_change_anothers_annotation(
    login: Callable[..., Client], order_session: Session
) -> None:
    viewer, other = login("viewer"), login("viewer", "second-viewer")
    url = f"/sessions/{order_session.pk}/notes/"
    posted = viewer.post(url, {"scope": "session", "body": "Lost the **order id**."}, **HTMX)
    assert posted.status_code == 204 and posted["HX-Trigger"] == "annotations-changed"
    mine = Annotation.objects.get()
    assert mine.author.username == "viewer-user" and mine.step_index is None

    page = other.get(f"/sessions/{order_session.pk}/").content.decode()
    assert "Lost the <strong>order id</strong>." in page and "viewer-user" in page
    # Someone else's annotation: no way to change it on the page, nor around it.
    assert f"/notes/{mine.pk}/delete/" not in page and f"/notes/{mine.pk}/edit/" not in page
    base = f"/sessions/{order_session.pk}/notes/{mine.pk}"
    assert other.get(f"{base}/edit/").status_code == 403
    assert other.post(f"{base}/", {"body": "mine now", "label": "note"}).status_code == 403
    assert other.post(f"{base}/delete/", **HTMX).status_code == 403
    mine.refresh_from_db()
    assert mine.body == "Lost the **order id**."

    # Its author edits and deletes it.
    own_page = viewer.get(f"/sessions/{order_session.pk}/").content.decode()
    assert f"/notes/{mine.pk}/delete/" in own_page
    edit = viewer.get(f"{base}/edit/?scope=session", **HTMX).content.decode()
    assert "Lost the **order id**.</textarea>" in edit
    Annotation.objects.filter(pk=mine.pk).update(created_at=mine.created_at - timedelta(hours=1))
    saved = viewer.post(f"{base}/", {"body": "Step 0 lost it.", "label": "root-cause"}, **HTMX)
    assert saved.status_code == 204
    listed = viewer.get(f"{url}?scope=session", **HTMX).content.decode()
    assert "Step 0 lost it." in listed and "root-cause" in listed and "(edited)" in listed
    assert viewer.post(f"{base}/delete/", **HTMX).status_code == 204
    assert not Annotation.objects.exists()


def test_it_annotates_a_step_and_a_message_and_shows_them_there(
    login: Callable[..., Client], order_session: Session
) -> None:
    editor = login("editor")
    url = f"/sessions/{order_session.pk}/notes/"
    editor.post(url, {"scope": "step", "step": "0", "label": "root-cause",
                      "body": "The summary dropped the order id"}, **HTMX)  # fmt: skip
    editor.post(url, {"scope": "step", "step": "0", "message": "sum_1", "label": "contributing",
                      "body": "this summary"}, **HTMX)  # fmt: skip
    step = editor.get(f"/sessions/{order_session.pk}/steps/0/", **HTMX).content.decode()
    assert "The summary dropped the order id" in step and "this summary" in step
    assert 'class="note-badge"' in step  # sum_1 carries a note in the diff
    assert f'href="#{message_anchor("sum_1")}"' in step
    assert (
        "No annotations on this step yet."
        in editor.get(f"/sessions/{order_session.pk}/steps/1/", **HTMX).content.decode()
    )
    # The session's list shows all of them, each with where it sits.
    session = editor.get(f"{url}?scope=session", **HTMX).content.decode()
    assert "/p/acme/order-debug-42/0/#m-sum_1" in session and ">step 0</a>" in session
    # Without JavaScript, the form posts and lands where the annotation is.
    plain = editor.post(url, {"step": "1", "message": "u1", "body": "plain post"})
    assert plain.status_code == 302
    assert plain["Location"] == f"/sessions/{order_session.pk}/steps/1/#m-u1"
    # A screen reader tells one note's buttons from another's: each names its note.
    Annotation.objects.filter(body="this summary").update(
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    )
    names = re.findall(r'aria-label="((?:Edit|Delete) [^"]*)"', session_notes(editor, url))
    assert "Edit the contributing of 2026-01-02 03:04:05" in names
    assert "Delete the contributing of 2026-01-02 03:04:05" in names
    assert len(set(names)) == len(names) == 6


def test_it_renders_annotations_as_sanitized_markdown(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    body = "**bold** <script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=a()>"
    client.post(f"/sessions/{order_session.pk}/notes/", {"body": body}, **HTMX)
    page = client.get(f"/sessions/{order_session.pk}/").content.decode()
    note = page.split('class="markdown"')[1].split("</div>")[0]
    assert "<strong>bold</strong>" in note and "&lt;script&gt;" in note
    # What the markup tried is shown as text, never as elements or links.
    assert "<script" not in note and "<img" not in note and "href" not in note


def test_it_names_the_field_of_an_annotation_it_refuses(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    url = f"/sessions/{order_session.pk}/notes/"
    blank = client.post(url, {"scope": "session", "body": "  "}, **HTMX)
    assert blank.status_code == 200 and "Not saved: body:" in blank.content.decode()
    assert "HX-Trigger" not in blank
    assert client.post(url, {"body": "x", "step": "99"}).status_code == 400
    wrong_label = client.post(url, {"body": "x", "label": "blame"}, **HTMX)
    assert "Not saved: label:" in wrong_label.content.decode()
    assert not Annotation.objects.exists()


def test_it_refuses_a_note_on_a_step_or_message_it_cannot_place(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    url = f"/sessions/{order_session.pk}/notes/"
    # A step that is not a number is refused, not saved as a note on the whole session.
    for index in ("abc", "1.5", "two"):
        refused = client.post(url, {"body": "x", "step": index})
        assert refused.status_code == 400, index
        said = refused.content.decode()
        assert said == f"Not saved: step: a step index (a whole number), not {index!r}"
    # A message the step does not show: its link would lead nowhere.
    refused = client.post(url, {"scope": "step", "step": "0", "message": "u9", "body": "x"}, **HTMX)
    assert "Not saved: message: step 0 has no message &#x27;u9&#x27;" in refused.content.decode()
    assert client.post(url, {"body": "x", "message": "u1"}).status_code == 400  # no step
    assert not Annotation.objects.exists()
    # A message that left in the step (before) and one that came (after) both take notes.
    for message in ("tool_result_32", "sum_1"):
        placed = client.post(url, {"step": "0", "message": message, "body": message})
        assert placed.status_code == 302
    assert sorted(Annotation.objects.values_list("message_id", flat=True)) == [
        "sum_1",
        "tool_result_32",
    ]


# --- incidents -------------------------------------------------------------------------


def test_it_lets_editors_mark_and_resolve_incidents_and_lists_them(
    login: Callable[..., Client], seed: Callable[..., Session], order_session: Session
) -> None:
    other = seed(order_session_events("quiet-run"))
    viewer, editor = login("viewer"), login("editor")
    mark = f"/sessions/{order_session.pk}/incident/"
    assert viewer.post(mark, {"title": "x", "severity": "sev1"}).status_code == 403
    assert "Mark as incident" not in viewer.get(f"/sessions/{order_session.pk}/").content.decode()
    refused = editor.post(mark, {"title": "Lost order", "severity": "sev9"}, **HTMX)
    assert "Not saved: severity:" in refused.content.decode()
    marked = editor.post(mark, {"title": "Order id lost in summary", "severity": "sev2"}, **HTMX)
    assert "Order id lost in summary" in marked.content.decode()
    assert "Resolve" in marked.content.decode()
    editor.post(f"/sessions/{other.pk}/incident/", {"title": "Slow run", "severity": "sev4"})
    viewer_user = User.objects.get(username="viewer-user")
    annotation_create(session=order_session, author=viewer_user, body="The **summary** dropped it",
                      label="root-cause", step_index=0)  # fmt: skip
    # A cause written under a heading is listed by what it says (the heading alone was).
    annotation_create(session=other, author=viewer_user, label="root-cause", step_index=None,
                      body="## Root cause\n\nThe run waited on **the lock**.")  # fmt: skip

    def listed(query: str = "") -> str:
        return viewer.get(f"/projects/acme/incidents/?{query}").content.decode()

    everything = listed()
    assert "Order id lost in summary" in everything and "Slow run" in everything
    assert "The <strong>summary</strong> dropped it" in everything
    assert "The run waited on <strong>the lock</strong>." in everything
    assert "<h2>Root cause</h2>" not in everything
    assert everything.index("sev2") < everything.index("sev4")
    assert "Slow run" not in listed("severity=sev2")
    assert "Order id lost in summary" not in listed("q=slow")
    assert 'title="incident: Order id lost in summary">sev2<' in viewer.get("/").content.decode()

    editor.post(f"/sessions/{order_session.pk}/incident/resolve/")
    resolved = Incident.objects.get(session=order_session)
    assert resolved.resolved_at is not None and resolved.resolved_by is not None
    assert "Order id lost in summary" not in listed("state=open")
    assert "Order id lost in summary" in listed("state=resolved")
    page = editor.get(f"/sessions/{order_session.pk}/").content.decode()
    box = page[page.index('id="incident"') :].split("</div>")[0]
    assert f" by {resolved.resolved_by.get_username()}</span>" in box and ">Reopen<" in box
    # Resolved too soon: opened again (there was no way back).
    reopened = editor.post(
        f"/sessions/{order_session.pk}/incident/resolve/", {"reopen": "1"}, **HTMX
    )
    assert ">open<" in reopened.content.decode() and ">Resolve<" in reopened.content.decode()
    assert Incident.objects.get(session=order_session).resolved_by is None
    assert "Order id lost in summary" in listed("state=open")
    editor.post(f"/sessions/{order_session.pk}/incident/resolve/")
    assert viewer.post(f"/sessions/{other.pk}/incident/resolve/").status_code == 403


# --- permalinks ------------------------------------------------------------------------


def test_it_opens_permalinks_of_a_session_a_step_and_a_fold(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    session_link = client.get("/p/acme/order-debug-42/")
    assert session_link.status_code == 302
    assert session_link["Location"] == f"/sessions/{order_session.pk}/"
    step_link = client.get("/p/acme/order-debug-42/1/")
    assert step_link["Location"] == f"/sessions/{order_session.pk}/steps/1/"
    fold = client.get("/p/acme/order-debug-42/0/?fold=sum_1")
    assert fold["Location"] == f"/sessions/{order_session.pk}/steps/0/?fold=sum_1#fold-panel"
    landed = client.get(fold["Location"]).content.decode()
    panel = landed.split('<div id="fold-panel">')[1]
    assert panel.lstrip().startswith('<section class="fold-view"')
    assert "upstream timed out" in panel
    assert 'href="/p/acme/order-debug-42/0/?fold=sum_1" data-copy' in panel

    page = client.get(f"/sessions/{order_session.pk}/steps/1/").content.decode()
    # Each message carries its anchor once, and a link to it that can be copied.
    assert page.count('id="m-u1"') == 1 and page.count('id="m-a1"') == 1
    assert 'href="/p/acme/order-debug-42/1/#m-u1" data-copy' in page
    assert 'href="/p/acme/order-debug-42/1/" data-copy' in page
    assert client.get("/p/acme/no-such-session/").status_code == 404
    assert client.get("/p/other/order-debug-42/").status_code == 404
    anonymous = Client().get("/p/acme/order-debug-42/1/")
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")


def test_it_keeps_permalinks_working_when_the_data_is_imported_again(
    api: Api, login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    first = seed(order_session_events())
    client = login("viewer")
    link = "/p/acme/order-debug-42/2/#m-tool_result_32"
    assert 'href="' + link + '"' in client.get(f"/sessions/{first.pk}/steps/2/").content.decode()
    first.delete()
    again = seed([{**e, "id": e["id"] + "-again"} for e in order_session_events()])
    assert again.pk != first.pk
    assert client.get(link.split("#")[0])["Location"] == f"/sessions/{again.pk}/steps/2/"


def test_it_finds_sessions_whose_ids_hold_slashes_and_odd_characters(
    api: Api, login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    hello = [{"id": "m 1", "role": "user", "content": "hi"}]
    runs = seed([step("nightly/run/7", 0, hello), step("nightly/run/7", 1, hello)])
    odd = seed([step("<b>a#b?c d</b>", 0, hello)])
    client = login("viewer")
    page = client.get(f"/sessions/{runs.pk}/steps/1/").content.decode()
    assert 'href="/p/acme/nightly/run/7/1/#m-m%201"' in page and 'id="m-m%201"' in page
    assert client.get("/p/acme/nightly/run/7/")["Location"] == f"/sessions/{runs.pk}/"
    assert client.get("/p/acme/nightly/run/7/1/")["Location"] == f"/sessions/{runs.pk}/steps/1/"
    odd_page = client.get(f"/sessions/{odd.pk}/").content.decode()
    link = re.search(r'href="(/p/acme/[^"]*)" data-copy', odd_page)[1]
    assert link == "/p/acme/%3Cb%3Ea%23b%3Fc%20d%3C/b%3E/"
    assert client.get(html.unescape(link))["Location"] == f"/sessions/{odd.pk}/"


# --- reports ---------------------------------------------------------------------------


class _Refs(HTMLParser):
    """Every URL an HTML document would load or link to, and its scripts' text."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []
        self.scripts: list[str] = []
        self.meta_policy = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href", "action", "srcset", "poster", "data") and value is not None:
                self.urls.append((tag, name, value))
        if tag == "meta" and dict(attrs).get("http-equiv") == "Content-Security-Policy":
            self.meta_policy = dict(attrs)["content"] or ""
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


@pytest.fixture
def demo_session(api: Api, seed: Callable[..., Session]) -> Session:
    """The seed-000 demo: a ContextManager whose summaries lose order ids."""
    session = seed(cm_order_timeout())
    author = User.objects.create_user("reviewer")
    annotation_create(session=session, author=author, step_index=3, label="root-cause",
                      body="The error-log summary dropped **SO20260101007**.")  # fmt: skip
    incident_mark(session=session, user=author, title="Order id lost", severity="sev2")
    return session


def test_it_reports_a_demo_session_as_one_self_contained_html_file(
    login: Callable[..., Client], demo_session: Session
) -> None:
    response = login("viewer").get(f"/sessions/{demo_session.pk}/report.html")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="cm-order-timeout.html"'
    page = response.content.decode()
    refs = _Refs()
    refs.feed(page)
    # Nothing to fetch: every link points inside the file, no script or style comes from
    # anywhere else (the agent's own URLs appear as text only).
    assert [u for u in refs.urls if not u[2].startswith("#")] == []
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", page)
    assert "http://10.42.3.56:8081/v2/reservations?order=SO20260101007" in html.unescape(page)
    # The budget line reads as the Markdown report's (partitions included when sent).
    budget = reports.budget_text(demo_session.budget)
    assert f"<dt>Budget</dt><dd>{budget}</dd>" in page and "reserved" in budget
    assert reports.budget_text({"max_tokens": 100, "partitions": {"tool": 40}}) == (
        "100 tokens; partitions: tool 40"
    )
    assert reports.budget_text({"partitions": {"tool": 40}}) == "partitions: tool 40"
    # The chart is drawn already (inline SVG): a band per partition, the budget's
    # lines, a mark linking to each flagged step's row; no script at all.
    chart = page.split('id="occupancy-chart"')[1].split("</svg>")[0]
    assert chart.count('<polygon class="band"') >= 2 and 'class="rule"' in chart
    assert '<a href="#step-3"><rect class="flag-mark"' in chart
    assert refs.scripts == [] and "<script" not in page
    # Its own policy runs no script, and loads nothing.
    assert "script-src 'none'" in refs.meta_policy and "default-src 'none'" in refs.meta_policy
    assert response["Content-Security-Policy"] == refs.meta_policy
    # What a postmortem needs: header, incident, timeline, flagged steps with their
    # diffs and what they lost, annotations.
    body = page
    assert "order-debug-bot" in body and "Incident: Order id lost" in body
    assert body.count('<tr id="step-') == 10
    flagged = body.split('id="flagged-3"')[1].split("</article>")[0]
    assert '<mark class="lost-entity">SO20260101007</mark>' in flagged
    assert "repeated_tool_call" in flagged and "the same tool call (tool and arguments)" in flagged
    removed = flagged.split('class="cell k-removed"')[1].split('class="cell')[0]
    added = flagged.split('class="cell k-added"')[1].split('class="cell')[0]
    assert "tool_result_18" in removed and "upstream timed out" in removed and "sum_2" in added
    assert "The error-log summary dropped <strong>SO20260101007</strong>." in body


def test_it_says_when_a_report_details_only_the_first_flagged_steps(
    login: Callable[..., Client], order_session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reports, "MAX_FLAGGED", 1)
    client = login("viewer")
    timeline = json.loads(_text(client.get(f"/sessions/{order_session.pk}/report.json")))
    flagged = [t["index"] for t in timeline["report"]["timeline"] if t.get("flags")]
    assert len(flagged) > 1
    assert timeline["report"]["flagged_total"] == len(flagged)
    said = f"The first 1 of {len(flagged)} flagged steps in detail"
    text = _text(client.get(f"/sessions/{order_session.pk}/report.md"))
    assert said in text.split("## Flagged steps")[1].split("### Step")[0]
    page = _text(client.get(f"/sessions/{order_session.pk}/report.html"))
    assert said in page and f"Flagged steps (1 of {len(flagged)})" in page
    # The timeline links only to the steps the report details: no link leads nowhere.
    assert page.count('href="#flagged-') == 1 and f'id="flagged-{flagged[0]}"' in page
    assert f'href="#flagged-{flagged[1]}"' not in page


def test_it_reports_a_demo_session_as_markdown_and_json(
    login: Callable[..., Client], demo_session: Session
) -> None:
    client = login("viewer")
    markdown = client.get(f"/sessions/{demo_session.pk}/report.md")
    assert markdown["Content-Type"].startswith("text/markdown")
    text = markdown.content.decode()
    assert "SO20260101007" in text.split("## Lost entities")[1].split("## Annotations")[0]
    assert "**root-cause** by reviewer on step 3" in text
    assert "Incident (sev2):** Order id lost" in text

    data = json.loads(_text(client.get(f"/sessions/{demo_session.pk}/report.json")))
    assert [s["index"] for s in data["steps"]] == list(range(10))
    api_step = data["steps"][3]
    assert {"before", "after", "ops", "folds", "reported", "stats", "stats_status"} <= set(api_step)
    # Messages by number, each given once, in the first step that holds it.
    messages = {n: m for s in data["steps"] for n, m in s["messages"].items()}
    after = [messages[str(n)] for n in unranged(api_step["after"])]
    assert after[0]["tokens"] > 0 and all("id" in m for m in after)
    assert data["report"]["annotations"][0]["label"] == "root-cause"
    lost = {e for entry in data["report"]["lost_entities"] for e in entry["entities"]}
    assert "SO20260101007" in lost


def test_it_escapes_what_an_agent_sent_in_the_html_report(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    evil = "</script><script>window.__pwned=1</script><img src=x onerror=alert(1)>"
    session = seed([
        {"id": "e", "type": "session", "body": {"session_id": evil, "agent": evil}},
        step(evil, 0, [{"id": evil, "role": "tool", "content": evil + " SO20260101007"}],
             action={"action": "summarize", "target": evil, "reason": evil,
                     "result": {"id": "s", "role": "tool", "content": "nothing"}}),
    ])  # fmt: skip
    page = login("viewer").get(f"/sessions/{session.pk}/report.html").content.decode()
    refs = _Refs()
    refs.feed(page)
    assert refs.scripts == [] and "<script" not in page
    assert "<img" not in page
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned=1" in page


def test_it_labels_the_reports_step_axis_with_whole_steps(
    login: Callable[..., Client], order_session: Session
) -> None:
    page = login("viewer").get(f"/sessions/{order_session.pk}/report.html").content.decode()
    chart = page.split('id="occupancy-chart"')[1].split("</svg>")[0]
    # Steps 0 to 2: one label each, no 0.5 or 1.5.
    steps = re.findall(r'text-anchor="middle" font-size="11" fill="#4b5563">([^<]*)<', chart)
    assert steps == ["0", "1", "2"]


def test_it_keeps_reports_to_the_sessions_project(
    make_api: Callable[[str], Api], login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    client = login("viewer")
    other = make_api("other-team")
    other.ingest({"batch": order_session_events("theirs")})
    theirs = Session.objects.get(external_id="theirs")
    for kind in ("md", "json", "html"):
        assert client.get(f"/sessions/{theirs.pk}/report.{kind}").status_code == 404
    assert client.get("/projects/other-team/export/steps.jsonl").status_code == 404
    assert client.get("/projects/other-team/overview/").status_code == 404
    assert client.get("/projects/other-team/incidents/").status_code == 404


# --- comparing sessions, project overview ----------------------------------------------


def test_it_compares_two_sessions_side_by_side(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    seed(cm_order_timeout())
    seed(mode_customer_chat())
    client = login("viewer")
    page = client.get(
        "/projects/acme/compare/?s=cm-order-timeout&s=mode-customer-chat"
    ).content.decode()
    series = json.loads(html.unescape(re.search(r'data-series="([^"]*)"', page)[1]))
    assert [s["name"] for s in series] == ["cm-order-timeout", "mode-customer-chat"]
    assert [len(s["curve"]) for s in series] == [10, 20]
    assert all(s["max_tokens"] for s in series)  # both have budgets: occupancy overlaid
    lines = json.loads(html.unescape(re.search(r'data-lines="([^"]*)"', page)[1]))
    assert [(line["flag"], line["at"]) for line in lines] == [
        ("budget", 1.0),
        ("over_90", OVER_90),
        ("over_70", OVER_70),
    ]
    assert "entity_loss" in series[0]["curve"][2]["flags"]
    outcome = page.split('class="compare-outcome"')[1].split("</table>")[0]
    # 9%: the retention of cm-order-timeout's compactions (18 of its 202 key entities)
    assert "succeeded" in outcome and "failed" in outcome and "9%" in outcome
    assert "pinned_missing × 14" in outcome
    steps = page.split('class="compare-steps"')[1].split("<tbody>")[1].split("</tbody>")[0]
    assert steps.count("<tr>") == 20  # one row per step index of either session
    missing = client.get("/projects/acme/compare/?s=cm-order-timeout&s=nope").content.decode()
    assert "No session nope in" in missing and "data-series" not in missing
    session = Session.objects.get(external_id="cm-order-timeout")
    header = client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'name="s" value="cm-order-timeout"' in header  # "compare with" from a session


def test_it_shows_trends_over_a_chosen_range_and_the_agent_mode_table(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    seed(cm_order_timeout())
    seed(mode_customer_chat())
    client = login("viewer")
    page = client.get("/projects/acme/overview/?range=custom&since=2026-11-01&until=2026-11-30")
    text = page.content.decode()
    trends = json.loads(html.unescape(re.search(r'data-rows="([^"]*)"', text)[1]))
    assert [t["sessions"] for t in trends] == [2] and trends[0]["compressions"] == 6
    assert trends[0]["reload_regrets"] == 2 and 0 < trends[0]["entity_retention"] < 1
    assert 'data-bucket="day"' in text and 'value="2026-11-01"' in text
    table = text.split('class="agent-modes"')[1]
    assert "order-debug-bot" in table and "support-bot" in table and "100%" in table
    assert "?project=acme&amp;agent=order-debug-bot&amp;mode=summary" in table
    # Token figures read in thousands, as everywhere else on the dashboard.
    assert re.findall(r'<td class="num">(\d[\d,]{3,})</td>', text)
    assert not re.findall(r'<td class="num">\d{4,}</td>', text)
    # What each pair cost by the price table: these demo agents reported no usage.
    assert '<th class="num">Cost</th>' in table and "unpriced" not in table
    empty = client.get("/projects/acme/overview/?range=custom&since=2020-01-01&until=2020-01-31")
    assert "No sessions started in this time range." in empty.content.decode()
    assert "unsafe-inline" not in page["Content-Security-Policy"]


def test_it_reads_the_time_range_picker() -> None:
    now = datetime(2026, 11, 29, 12, 30, tzinfo=UTC)

    def picked(query: str) -> TrendRange:
        return TrendRange.from_query(QueryDict(query), now=now)

    day = picked("range=24h")
    assert (day.bucket, day.end, now - day.start) == ("hour", now, timedelta(hours=24))
    assert picked("").range == "30d" and picked("").bucket == "day"
    assert picked("range=365d").bucket == "week"
    custom = picked("since=2026-01-01&until=2026-01-01")
    assert custom.range == "custom" and custom.bucket == "hour"
    assert custom.start == datetime(2026, 1, 1, tzinfo=UTC)
    assert custom.end == datetime(2026, 1, 2, tzinfo=UTC)
    assert picked("range=90d&bucket=hour").bucket == "week"  # too many hours: its default
    assert picked("range=7d&bucket=week").bucket == "week"
    backwards = picked("range=custom&since=2026-03-01&until=2026-02-01")
    assert backwards.start < backwards.end


def _overview_of_cm_order_timeout(
    login: Callable[..., Client], seed: Callable[..., Session], *, since: str, until: str
) -> str:
    """The overview from `since` to `until` (dates as the picker sends them) of a project
    holding the demo's cm-order-timeout session."""
    seed(cm_order_timeout())
    query = f"range=custom&since={since}&until={until}"
    return login("viewer").get(f"/projects/acme/overview/?{query}").content.decode()


def test_dates_picked_the_wrong_way_round_show_the_days_between_them(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    page = _overview_of_cm_order_timeout(login, seed, since="2026-12-10", until="2026-11-01")
    assert "Sessions started 2026-11-01 00:00 – 2026-12-11 00:00 UTC" in page
    assert 'name="since" value="2026-11-01"' in page and 'name="until" value="2026-12-10"' in page
    assert "No sessions started in this time range" not in page


# --- dataset export --------------------------------------------------------------------


def test_it_exports_the_steps_of_the_listed_sessions_as_jsonl(
    api: Api, login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    seed(cm_order_timeout())
    seed(mode_customer_chat())
    client = login("viewer")
    listing = client.get("/?status=failed&q=member").content.decode()
    link = html.unescape(re.search(r'class="export-link" href="([^"]*)"', listing)[1])
    assert link == "/projects/acme/export/steps.jsonl?status=failed&q=member"
    response = client.get(link)
    assert response.streaming and response["Content-Type"] == "application/x-ndjson"
    assert response["Content-Disposition"] == 'attachment; filename="acme-steps.jsonl"'
    rows = _jsonl(response)
    assert {r["session_id"] for r in rows} == {"mode-customer-chat"}
    assert [r["index"] for r in rows] == list(range(20))
    first = rows[0]
    assert set(first) >= {"obs", "operations", "after", "reward", "outcome"}
    assert first["outcome"] == {"status": "failed", "score": 0.2}
    assert {r["session_id"] for r in _jsonl(client.get(link.split("?")[0]))} == {
        "cm-order-timeout",
        "mode-customer-chat",
    }
    flagged = _jsonl(client.get("/projects/acme/export/steps.jsonl?flag=reload_regret"))
    assert {r["session_id"] for r in flagged} == {"cm-order-timeout"}
    # A filter it cannot read is said, not dropped for the whole project's steps.
    refused = client.get("/projects/acme/export/steps.jsonl?status=bogus&since=May")
    assert refused.status_code == 400
    assert "status: 'bogus' is not one of" in refused.content.decode()
    assert "since: 'May' is not a date" in refused.content.decode()


def test_it_streams_the_export_a_chunk_of_steps_at_a_time(
    login: Callable[..., Client], seed: Callable[..., Session], monkeypatch: Any
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from contextview.postmortems import export

    monkeypatch.setattr(export, "CHUNK", 3)
    hello = [{"id": "m", "role": "user", "content": "hi"}]
    seed([step("long", n, hello) for n in range(8)])
    response = login("viewer").get("/projects/acme/export/steps.jsonl")
    lines = iter(response.streaming_content)
    with CaptureQueriesContext(connection) as captured:
        first = json.loads(next(lines))
    # The first line comes after reading one chunk of steps, not all eight.
    step_reads = [q["sql"] for q in captured if 'FROM "cv_step"' in q["sql"]]
    assert first["index"] == 0 and len(step_reads) == 1 and "LIMIT 3" in step_reads[0]
    assert [json.loads(line)["index"] for line in lines] == list(range(1, 8))


def test_a_flagged_step_whose_context_did_not_change_says_so(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    ask = " ".join(f"Where is order SO2026{n:07d}?" for n in range(30))
    session = seed([
        {"id": "s", "type": "session",
         "body": {"session_id": "full", "agent": "ops", "budget": {"max_tokens": 300}}},
        step("full", 0, [{"id": "u1", "role": "user", "content": ask}]),
    ])  # fmt: skip
    client = login("viewer")
    markdown = client.get(f"/sessions/{session.pk}/report.md").content.decode()
    flagged = markdown.split("### Step 0")[1].split("## Lost entities")[0]
    assert "over_70" in flagged
    assert "nothing removed, added or changed" in flagged
    assert "Removed: -; added: -; changed: -" not in flagged
    page = client.get(f"/sessions/{session.pk}/report.html").content.decode()
    flagged = page.split('id="flagged-0"')[1].split("</article>")[0]
    assert "The context after this step is the one before it" in flagged
    assert "0 removed · 0 added" not in flagged


def test_the_reports_name_the_context_window_occupancy_is_a_share_of(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    # As an imported transcript: no budget, and the window its calls' usage was read against.
    windowed = seed([step("windowed", 0, [{"id": "u1", "role": "user", "content": "Hi"}])])
    Session.objects.filter(pk=windowed.pk).update(
        aggregates={**windowed.aggregates, "window": 258400}
    )
    budgeted = seed([
        {"id": "s", "type": "session",
         "body": {"session_id": "budgeted", "budget": {"max_tokens": 16000}}},
        step("budgeted", 0, [{"id": "u1", "role": "user", "content": "Hi"}]),
    ])  # fmt: skip
    client = login("viewer")
    markdown = client.get(f"/sessions/{windowed.pk}/report.md").content.decode()
    assert "- context window: 258,400 tokens" in markdown.split("## Timeline")[0]
    page = client.get(f"/sessions/{windowed.pk}/report.html").content.decode()
    assert re.search(r"<dt>Context window</dt><dd[^>]*>258,400 tokens</dd>", page)

    markdown = client.get(f"/sessions/{budgeted.pk}/report.md").content.decode()
    assert "- budget: 16,000 tokens" in markdown and "context window" not in markdown
    page = client.get(f"/sessions/{budgeted.pk}/report.html").content.decode()
    assert "<dt>Context window</dt>" not in page


def test_an_occupancy_flag_of_a_session_without_a_budget_names_the_context_window(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    ask = " ".join(f"Where is order SO2026{n:07d}?" for n in range(30))
    session = seed([
        {"id": "s", "type": "session", "body": {"session_id": "windowed", "context_window": 300}},
        step("windowed", 0, [{"id": "u1", "role": "user", "content": ask}]),
    ])  # fmt: skip
    markdown = login("viewer").get(f"/sessions/{session.pk}/report.md").content.decode()
    flagged = markdown.split("### Step 0")[1].split("## Lost entities")[0]
    (line,) = [ln for ln in flagged.splitlines() if ln.startswith("- **over_")]
    assert "context window" in line


def test_the_markdown_and_html_reports_write_times_alike(
    api: Api, login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    events = order_session_events("timed")
    events[0]["timestamp"] = "2026-11-29T10:00:00.250000Z"
    session = seed(events)
    client = login("viewer", username="reviewer")
    author = User.objects.get(username="reviewer")
    annotation_create(session=session, author=author, step_index=0, body="Lost the order.")
    restore = {"type": "restore", "targets": ["tool_result_32"], "step": 0}
    assert api.post("/sessions/timed/directives", restore).status_code == 201
    markdown = _text(client.get(f"/sessions/{session.pk}/report.md"))
    page = _text(client.get(f"/sessions/{session.pk}/report.html"))

    started = "2026-11-29 10:00:00 UTC"
    assert f"started {started}" in markdown and f"<dt>Started</dt><dd>{started}</dd>" in page
    # The annotation's and the directive's times, as the HTML writes them, no ISO text.
    annotated = re.search(r'class="author">reviewer</strong> ([^<]+?)\s*<', page)
    assert annotated and f"by reviewer on step 0 ({annotated[1]}):" in markdown
    [asked] = re.findall(r"</td><td>(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC)</td>", page)
    assert f"at {asked})" in markdown
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", markdown)


def test_the_html_report_writes_every_missing_fact_alike(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    events = order_session_events("unbudgeted")
    for name in ("budget", "agent", "model"):
        del events[0]["body"][name]
    session = seed(events)
    page = _text(login("viewer").get(f"/sessions/{session.pk}/report.html"))
    facts = dict(re.findall(r"<dt>([^<]+)</dt><dd[^>]*>([^<]*)</dd>", page.split("</dl>")[0]))
    # No budget, agent or model: each as the report writes anything missing.
    assert facts["Budget"] == facts["Agent"] == facts["Model"] == "—"
    assert "-" not in facts.values()


def _forgetful(session_id: str, steps: int) -> list[dict[str, Any]]:
    """Each step reads a log naming an order and an upstream, then summarizes it to a word."""
    events: list[dict[str, Any]] = [
        {"id": f"{session_id}-start", "type": "session", "body": {"session_id": session_id}}
    ]
    for i in range(steps):
        log = {
            "id": f"log_{i}", "role": "tool",
            "content": f"GET /api/orders/SO2026010{i:04d} upstream 10.42.9.{i + 1}:8080 timed out",
        }  # fmt: skip
        gist = {"id": f"gist_{i}", "role": "tool", "content": "a timeout"}
        fold = {"action": "summarize", "target": f"log_{i}", "result": gist, "reason": "long log"}
        events.append(step(session_id, i, [log], action=fold))
    return events


def test_a_compared_session_names_its_first_lossy_steps_and_links_to_the_rest(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    forgetful = seed(_forgetful("forgetful", 8))
    seed(_forgetful("brief", 2))
    page = login("viewer").get("/projects/acme/compare/?s=forgetful&s=brief").content.decode()
    lost = page.split("<th>Lost entities</th>")[1].split("</tr>")[0]
    assert re.findall(r"<div>step (\d+):", lost) == ["0", "1", "2", "3", "4", "0", "1"]
    assert f'and at 3 more steps: <a href="/sessions/{forgetful.pk}/">' in lost


def test_the_compare_page_opened_empty_says_how_to_pick_two_sessions(
    login: Callable[..., Client],
) -> None:
    page = login("viewer").get("/projects/acme/compare/").content.decode()
    assert "Give two session ids of" in page
    assert 'href="/?project=acme">the sessions list</a>' in page


def test_an_overview_range_without_sessions_does_not_say_the_project_has_none(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    page = _overview_of_cm_order_timeout(login, seed, since="2020-01-01", until="2020-01-31")
    table = page.split("Agents × modes")[1].split('<h2 id="monitors">')[0]
    assert "No sessions started in this time range." in table
    assert "No sessions yet" not in page


def test_the_overviews_session_counts_name_what_they_count_when_read_out_alone(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    page = _overview_of_cm_order_timeout(login, seed, since="2026-11-01", until="2026-11-30")
    # A screen reader's list of links reads "1 session of order-debug-bot in summary",
    # not a bare "1".
    assert 'aria-label="1 session of order-debug-bot in summary">1</a>' in page
