"""What a new user trying the product from its README ran into, each fixed."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.contrib.auth.models import User
from django.test import Client, RequestFactory

from contextview.projects.services import demo_setup
from contextview.sessions.models import Session
from contextview.web.views import server_error
from tests.api_client import Api, step
from tests.web.conftest import order_session_events


def _session_start(session_id: str, **body: object) -> dict[str, object]:
    return {"id": f"{session_id}-start", "type": "session",
            "body": {"session_id": session_id, **body}}  # fmt: skip


def test_it_serves_the_api_explorer_from_local_files_without_inline_script(
    client: Client, db: None
) -> None:
    response = client.get("/api/v1/docs")
    assert response.status_code == 200
    page = response.content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in page and "/static/ninja/swagger-ui.css" in page
    assert "cdn" not in page.lower()
    # Every script is a file of ours, or data the CSP never runs.
    for tag in re.findall(r"<script[^>]*>", page):
        assert "src=" in tag or 'type="application/json"' in tag, tag
    assert '"validatorUrl": null' in page


def test_it_signs_out_to_a_page_of_its_own(login: Callable[..., Client], api: Api) -> None:
    client = login("viewer")
    page = client.post("/logout/").content.decode()
    assert "You are signed out" in page and 'href="/login/"' in page
    assert "quality time" not in page
    assert client.get("/").status_code == 302  # really signed out


def test_it_answers_a_missing_page_with_its_own_404(login: Callable[..., Client], api: Api) -> None:
    client = login("viewer")
    response = client.get("/sessions/999999/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "Not found" in page and "no such session" in page and "/sessions/999999/" in page
    assert "contextview.css" in page  # the dashboard's own look
    assert client.get("/no/such/page").status_code == 404


def test_it_leads_from_a_missing_or_refused_page_back_to_the_users_project(
    login: Callable[..., Client], api: Api
) -> None:
    client = login("viewer")
    slug = api.project.slug
    client.get(f"/?project={slug}")  # the sessions list remembers the project
    missing = client.get("/sessions/999999/").content.decode()
    refused = client.post(f"/projects/{slug}/monitors/", {"name": "x"})
    assert refused.status_code == 403
    for page in (missing, refused.content.decode()):
        nav = page.split('<nav class="top-links">', 1)[1].split("</nav>", 1)[0]
        assert f'href="/projects/{slug}/overview/"' in nav and "Alerts" in nav, nav


def test_it_answers_a_server_error_with_its_own_500_page(db: None) -> None:
    response = server_error(RequestFactory().get("/"))
    assert response.status_code == 500
    page = response.content.decode()
    assert "Something went wrong on the server" in page
    # Its first link goes past the top bar, as on every other page.
    assert re.search(r'<body>\s*<a class="skip-link" href="#main">Skip to main content</a>', page)
    assert '<main id="main" tabindex="-1">' in page


def test_it_names_the_demo_login_on_the_sign_in_page_when_there_is_a_demo(
    client: Client, db: None
) -> None:
    assert "demo-password" not in client.get("/login/").content.decode()
    demo_setup(username="demo", password="demo-password", project_slug="demo")
    page = client.get("/login/").content.decode()
    assert "<strong>demo</strong> / <strong>demo-password</strong>" in page
    assert 'class="sign-in"' in page and 'autocomplete="current-password"' in page
    failed = client.post("/login/", {"username": "demo", "password": "wrong"})
    assert 'role="alert"' in failed.content.decode()


def test_it_shows_an_empty_session_without_an_axis_or_a_step_minus_one(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    session = seed([_session_start("empty-one", agent="a")])
    page = login("viewer").get(f"/sessions/{session.pk}/").content.decode()
    assert "No steps yet" in page
    assert 'id="occupancy-chart"' not in page and 'value="-1"' not in page
    assert 'class="compare-form"' not in page


def test_it_refuses_to_compare_more_than_two_sessions(
    login: Callable[..., Client], seed: Callable[..., Session], api: Api
) -> None:
    for sid in ("a", "b", "c"):
        seed(order_session_events(sid))
    client = login("viewer")
    response = client.get(f"/projects/{api.project.slug}/compare/?s=a&s=b&s=c")
    assert response.status_code == 400
    page = response.content.decode()
    assert "Compare takes two sessions; 3 were picked (a, b, c)" in page
    assert 'id="compare-chart"' not in page
    # One checked box showed the form and nothing else.
    one = client.get(f"/projects/{api.project.slug}/compare/?s=a").content.decode()
    assert "Compare takes two sessions; only a was picked. Give the second above" in one


def test_a_date_range_that_ends_before_it_starts_says_so(
    login: Callable[..., Client], order_session: Session
) -> None:
    response = login("viewer").get("/?since=2026-12-01&until=2026-11-01")
    assert response.status_code == 400
    assert (
        "since: 2026-12-01 is after until (2026-11-01); no day is in that range"
        in response.content.decode()
    )


def test_it_says_which_filter_values_were_wrong(
    login: Callable[..., Client], order_session: Session
) -> None:
    response = login("viewer").get("/?flag=nonsense&since=notadate&status=lost")
    assert response.status_code == 400
    page = response.content.decode()
    assert "flag: &#x27;nonsense&#x27; is not one of over_70" in page
    assert "since: &#x27;notadate&#x27; is not a date; use YYYY-MM-DD" in page
    assert "status: &#x27;lost&#x27; is not one of" in page
    assert "order-debug-42" in page  # the other filters still apply: none here


def test_it_says_which_step_matched_a_search_and_marks_the_match(
    login: Callable[..., Client], order_session: Session
) -> None:
    page = login("viewer").get("/?q=upstream+timed").content.decode()
    hit = page.split('class="search-hit"')[1].split("</p>")[0]
    assert f'href="/sessions/{order_session.pk}/steps/0/#m-tool_result_32"' in hit
    assert "message tool_result_32" in hit and "<mark>upstream timed</mark> out" in hit
    # A message that first appears at step 1 is found there.
    page = login("viewer", "other").get("/?q=since+Monday").content.decode()
    assert f"/sessions/{order_session.pk}/steps/1/#m-u1" in page
    assert "<mark>since Monday</mark>" in page


def test_it_offers_the_agents_and_modes_that_exist(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    seed(order_session_events("s1"))
    seed([_session_start("s2", agent="order-audit-bot", mode="rag"),
          step("s2", 0, [{"id": "u", "role": "user", "content": "x"}])])  # fmt: skip
    page = login("viewer").get("/?agent=support-bot").content.decode()
    agents = page.split('name="agent"')[1].split("</select>")[0]
    assert re.findall(r"<option[^>]*>([^<]*)</option>", agents) == [
        "any", "order-audit-bot", "support-bot"
    ]  # fmt: skip
    assert "<option selected>support-bot</option>" in agents
    modes = page.split('name="mode"')[1].split("</select>")[0]
    # A session's mode is the one its last step reported: s1 ended in sliding.
    assert re.findall(r"<option[^>]*>([^<]*)</option>", modes) == ["any", "rag", "sliding"]


def test_it_sorts_the_sessions_by_steps_peak_and_tokens(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    long = seed(order_session_events("long"))  # three steps, the older one
    filler = {"id": "u", "role": "user", "content": "hi " * 80}
    short = seed([_session_start("short", budget={"max_tokens": 100}), step("short", 0, [filler])])
    client = login("viewer")

    def order(query: str) -> list[str]:
        page = client.get("/" + query).content.decode()
        return re.findall(r'aria-label="compare ([^"]+)"', page)

    assert order("") == ["short", "long"]  # newest first
    assert order("?sort=steps") == ["long", "short"]
    assert order("?sort=peak") == ["short", "long"]
    assert short.aggregates["peak_occupancy"] > long.aggregates["peak_occupancy"]
    tokens = order("?sort=tokens")
    totals = {s.external_id: s.aggregates["tokens_after_total"] for s in (long, short)}
    assert tokens == sorted(totals, key=totals.__getitem__, reverse=True)
    page = client.get("/?sort=steps").content.decode()
    assert '<span aria-sort="descending">Steps ↓</span>' in page
    assert User.objects.count() == 1


def test_it_opens_a_step_url_as_the_whole_session_page_with_that_step(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    page = client.get(f"/sessions/{order_session.pk}/steps/1/").content.decode()
    assert 'id="occupancy-chart"' in page and 'id="step-row-2"' in page
    panel = page.split('id="step-panel"')[1]
    assert '<article class="step-view" id="step-view" data-step="1">' in panel
    assert "<title>Step 1 · order-debug-42" in page
    # Asked by htmx, the same address answers with the panel alone.
    fragment = client.get(f"/sessions/{order_session.pk}/steps/1/", HTTP_HX_REQUEST="true")
    assert 'id="step-view" data-step="1"' in fragment.content.decode()
    assert 'id="occupancy-chart"' not in fragment.content.decode()


def test_a_nearly_empty_context_reads_under_one_percent_not_zero() -> None:
    from contextview.web.templatetags.contextview import percent

    assert [percent(v) for v in (80 / 16_000, 0, 0.734, None)] == ["<1%", "0%", "73%", "—"]


def test_it_reads_no_number_from_digits_int_refuses_in_the_list_parameters(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    # "²" is a digit to str.isdigit, not to int(): each of these answered 500.
    seed(order_session_events("long"))
    client = login("viewer")
    for query, status in (
        ("?sort=steps&cursor=²", 200),
        ("?sort=steps&cursor=" + "9" * 30, 200),
        ("?alert=²", 400),  # said, as a bad date is: "Some filters were not applied"
    ):
        page = client.get("/" + query)
        assert page.status_code == status, query
        assert 'aria-label="compare long"' in page.content.decode()


def test_a_step_past_the_sessions_end_says_where_the_session_ends(
    login: Callable[..., Client], order_session: Session
) -> None:
    client = login("viewer")
    for address in (
        f"/sessions/{order_session.pk}/steps/9999/",
        f"/p/{order_session.project.slug}/order-debug-42/9999/",
    ):
        page = client.get(address, follow=True)
        assert page.status_code == 404
        assert "order-debug-42 has no step 9999 (its last step is 2)" in page.content.decode()


def test_a_step_list_page_past_the_last_step_says_so_not_that_there_are_none(
    login: Callable[..., Client], seed: Callable[..., Session]
) -> None:
    ask = {"id": "u1", "role": "user", "content": "Where is SO20260101007?"}
    session = seed([_session_start("paged"), step("paged", 0, [ask]), step("paged", 1, [ask])])
    client = login("viewer")
    page = client.get(f"/sessions/{session.pk}/?after=99999").content.decode()
    # It said "No steps recorded for this session yet." of a session with steps.
    assert "No steps recorded" not in page
    assert "No steps on this page of the list: the session has 2 steps." in page
    first = client.get(f"/sessions/{session.pk}/?after=-1", HTTP_HX_REQUEST="true")
    assert 'id="step-row-0"' in first.content.decode()
