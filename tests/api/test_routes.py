"""Every route of the API, reached the way an agent reaches it: read-only keys refused
wherever state would change, session ids with slashes, NUL characters in parameters."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest
from django.apps import apps
from django.test import Client

from contextview.api import POSTED_READS
from contextview.api import api as ninja_api
from contextview.ingest.views import OTLP_PATH
from contextview.projects.services import apikey_create
from tests.api_client import Api, step

SESSION = "team/agent-7"  # stored by ingest as sent; reached as team%2Fagent-7
SYSTEM = {"id": "sys", "role": "system", "content": "You answer customers."}
CHAT = {"id": "t1", "role": "user", "content": "My member id is A12345."}
WRITES = ("post", "put", "patch", "delete")


def _seed(api: Api) -> str:
    """A session with a dropped message and a pending directive; the directive's id."""
    drop = {"action": "drop", "target": "t1", "reason": "old turn"}
    batch = [
        {"id": "s", "type": "session", "body": {"session_id": SESSION, "agent": "bot"}},
        step(SESSION, 0, [SYSTEM, CHAT], mode="summary", action=drop),
        step(SESSION, 1, [{"id": "sys"}], mode="summary"),
    ]
    assert [r["status"] for r in api.ingest({"batch": batch}).json()["results"]] == [201] * 3
    created = api.post(f"/sessions/{quote(SESSION, safe='')}/directives", _BODIES["directives"])
    assert created.status_code == 201, created.content
    directive_id: str = created.json()["id"]
    return directive_id


# A body each known write route would accept; a route added later gets {} and must
# still be refused before its body is read.
_BODIES: dict[str, Any] = {
    "ingest": {"batch": [step(SESSION, 2, [{"id": "sys"}])]},
    "ack": {"status": "applied", "detail": "done"},
    "directives": {"type": "set_mode", "mode": "sliding"},
    "monitors": {"name": "near the limit", "metric": "peak_occupancy", "threshold": 0.9},
    "replay": {"policy": {"kind": "sliding", "keep_last": 1}},
}


def _operations(methods: tuple[str, ...]) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path template, operation) for every route of the OpenAPI document."""
    document = ninja_api.get_openapi_schema(path_prefix="/api/v1/")
    return [
        (method, path, operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if method in methods
    ]


def _url(template: str, directive_id: str) -> str:
    values = {"session_id": SESSION, "directive_id": directive_id, "index": "0", "monitor_id": "1"}
    for name, value in values.items():
        template = template.replace("{" + name + "}", quote(value, safe=""))
    assert "{" not in template, f"no test value for a parameter of {template}"
    return template


def _body(template: str) -> Any:
    return next((b for name, b in _BODIES.items() if template.endswith(name)), {})


def _everything() -> dict[str, list[dict[str, Any]]]:
    """Every row of every table, to tell that nothing changed."""
    return {
        model._meta.label: list(model.objects.order_by("pk").values())
        for model in apps.get_models()
    }


def test_it_lists_every_write_route_of_the_api_in_its_document() -> None:
    routed = {
        (method.lower(), re.sub(r"\{\w+:", "{", f"/api/v1{prefix}{path}"))
        for prefix, router in ninja_api._routers
        for path, view in router.path_operations.items()
        for operation in view.operations
        for method in operation.methods
    }
    routed.add(("post", OTLP_PATH))  # the ingest app's view, documented with the API
    documented = {(m, p) for m, p, _ in _operations(("get",) + WRITES)}
    assert routed == documented
    assert len([r for r in routed if r[0] in WRITES]) >= 3


def test_it_refuses_a_read_only_key_on_every_route_that_writes(
    api: Api, make_api: Callable[[str], Api]
) -> None:
    directive_id = _seed(api)
    reader = Api(Client(), apikey_create(project=api.project, name="r", can_write=False))
    assert reader.get(f"/sessions/{quote(SESSION, safe='')}").status_code == 200
    before = _everything()
    refused = []
    for method, template, _ in _operations(WRITES):
        if template.endswith(POSTED_READS):
            continue
        url = _url(template, directive_id)
        response = reader.client.generic(
            method.upper(), url, _json(_body(template)), "application/json", **reader.auth
        )
        assert response.status_code == 403, (method, url, response.content)
        if template == OTLP_PATH:  # answered as the OTLP specification says: a Status
            assert "may read but not ingest" in response.json()["message"]
        else:
            assert "may read but not write" in response.json()["error"]
        refused.append(template)
    assert _everything() == before
    assert any(t.endswith("/ack") for t in refused) and any(t.endswith("/ingest") for t in refused)
    # The same requests with a key that may write do change things.
    ack = _url("/api/v1/sessions/{session_id}/control/{directive_id}/ack", directive_id)
    assert (
        api.client.post(ack, _json(_BODIES["ack"]), "application/json", **api.auth).json()["status"]
        == "applied"
    )


def _json(value: Any) -> str:
    return json.dumps(value)


def test_it_reaches_a_session_whose_id_holds_a_slash_through_every_route(api: Api) -> None:
    directive_id = _seed(api)
    answers = {}
    for method, template, _ in _operations(("get",) + WRITES):
        if "{session_id}" not in template:
            continue
        url = _url(template, directive_id)
        query = {"from": 0, "to": 1} if template.endswith("/diff") else {}
        if method == "get":
            response = api.client.get(url, query, **api.auth)
        else:
            response = api.client.generic(
                method.upper(), url, _json(_body(template)), "application/json", **api.auth
            )
        answers[template.removeprefix("/api/v1/sessions/{session_id}") or "/"] = (
            response.status_code
        )
        assert response.status_code in (200, 201), (url, response.content)
        if response.get("Content-Type", "").startswith("application/json") and not (
            response.streaming
        ):
            text = response.content.decode()
            assert SESSION in text or "directives" in text, (url, text[:300])
    assert {"/", "/steps/{index}", "/diff", "/archive", "/control", "/directives"} <= set(answers)
    assert api.get(f"/sessions/{quote(SESSION, safe='')}").json()["session_id"] == SESSION
    assert api.get(f"/sessions/{quote(SESSION, safe='')}/steps/1").json()["index"] == 1
    assert api.get("/sessions/team").status_code == 404


def test_it_reaches_a_session_whose_id_holds_a_line_break(api: Api) -> None:
    # Found by the property test: Django's path converter stops at a line break.
    odd = "import\nfrom clipboard"
    batch = [step(odd, 0, [SYSTEM, CHAT]), step(odd, 1, [{"id": "sys"}])]
    assert [r["status"] for r in api.ingest({"batch": batch}).json()["results"]] == [201] * 2
    assert api.get(f"/sessions/{quote(odd, safe='')}").json()["session_id"] == odd
    assert api.get(f"/sessions/{quote(odd, safe='')}/steps/1").json()["index"] == 1
    assert api.get(f"/sessions/{quote(odd, safe='')}/archive").status_code == 200


@pytest.mark.parametrize(
    ("path", "query", "named"),
    [
        ("/sessions", {"agent": "\x00"}, "agent"),
        ("/sessions", {"cursor": "a\x00b"}, "cursor"),
        ("/sessions/a%00b", {}, "session_id"),
        ("/sessions/a%00b/steps/0", {}, "session_id"),
        ("/sessions/x/control", {"after": "\x00"}, "after"),
        ("/export/steps.jsonl", {"mode": "\x00"}, "mode"),
    ],
)
def test_it_answers_a_nul_in_a_parameter_with_400_naming_it(
    api: Api, path: str, query: dict[str, str], named: str
) -> None:
    response = api.get(path, **query)
    assert response.status_code == 400, response.content
    assert response.json()["error"].startswith(f"{named}: must not contain a NUL")


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"type": "set_mode", "mode": "slid\x00ing"}, "mode"),
        ({"type": "set_mode", "mode": "\ud83d"}, "mode"),
        ({"type": "restore", "targets": ["t1", "t\x001"]}, "targets[1]"),
    ],
)
def test_it_answers_a_directive_it_cannot_store_with_400_naming_the_field(
    api: Api, body: dict[str, Any], named: str
) -> None:
    _seed(api)
    response = api.post(f"/sessions/{quote(SESSION, safe='')}/directives", body)
    assert response.status_code == 400, response.content
    assert response.json()["error"].startswith(f"{named}: must not contain")


def test_it_answers_an_acknowledgement_it_cannot_store_with_400(api: Api) -> None:
    directive_id = _seed(api)
    path = f"/sessions/{quote(SESSION, safe='')}/control/{directive_id}/ack"
    response = api.post(path, {"status": "applied", "detail": "ok\x00"})
    assert response.status_code == 400 and response.json()["error"].startswith("detail:")
    assert api.post(path, {"status": "applied", "detail": "ok"}).status_code == 200


def test_it_refuses_a_key_holding_a_nul_as_a_bad_key(api: Api) -> None:
    response = api.client.get("/api/v1/sessions", HTTP_AUTHORIZATION="Bearer cv_ab\x00_cd")
    assert response.status_code == 401


@pytest.mark.django_db
def test_a_route_that_does_not_exist_or_a_method_it_does_not_take_answers_json(
    client: Client,
) -> None:
    missing = client.get("/api/v1/nonexistent")
    assert missing.status_code == 404
    assert missing.json() == {"error": "no such endpoint: /api/v1/nonexistent"}
    assert client.get("/api/v1/").json() == {"error": "no such endpoint: /api/v1/"}
    for method, path, allowed in (
        ("delete", "/api/v1/ingest", "POST"),
        ("put", "/api/v1/sessions", "GET"),
        ("get", "/v1/traces", "POST"),
    ):
        answer = getattr(client, method)(path)
        assert answer.status_code == 405, (method, path)
        assert answer["Allow"] == allowed
        assert answer.json() == {
            "error": f"{method.upper()} is not allowed on {path} (allowed: {allowed})"
        }


@pytest.mark.django_db
def test_a_missing_page_is_a_404_even_before_the_static_files_are_collected(
    client: Client, settings: Any, tmp_path: Any
) -> None:
    # The manifest storage cannot name the page's stylesheet without collectstatic.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    settings.STATIC_ROOT = str(tmp_path)
    page = client.get("/no-such-page/")
    assert page.status_code == 404
    assert "Not found" in page.content.decode()


# What ingest holds an event to: a value nested past 100 levels is refused, named by
# the field it hangs from, three levels down; past Python's own limit, the whole body.
_TOO_DEEP = [
    (2000, "body: nested too deep to read"),
    (120, "j[0][0]: nested deeper than 100 levels"),
]


@pytest.mark.parametrize("route", ["ack", "directives", "replay", "monitors"])
@pytest.mark.parametrize(("depth", "error"), _TOO_DEEP)
def test_it_answers_a_body_nested_too_deep_with_400_naming_it(
    api: Api, route: str, depth: int, error: str
) -> None:
    directive_id = _seed(api)
    session = f"/sessions/{quote(SESSION, safe='')}"
    path = {
        "ack": f"{session}/control/{directive_id}/ack",
        "directives": f"{session}/directives",
        "replay": f"{session}/replay",
        "monitors": "/monitors",
    }[route]
    body = json.dumps(_BODIES[route])[:-1] + ', "j": ' + "[" * depth + "]" * depth + "}"
    before = _everything()
    response = api.client.post(f"/api/v1{path}", body, content_type="application/json", **api.auth)
    assert response.status_code == 400, response.content
    assert response.json() == {"error": error}
    assert _everything() == before


def test_head_on_a_read_answers_as_get_does_without_the_body(api: Api) -> None:
    _seed(api)
    path = f"/api/v1/sessions/{quote(SESSION, safe='')}"
    got = api.client.get(path, **api.auth)
    head = api.client.head(path, **api.auth)
    assert (head.status_code, head["Content-Type"]) == (200, got["Content-Type"])
    assert head.content == b"" and got.json()["session_id"] == SESSION
    assert api.client.head("/api/v1/sessions/nobody", **api.auth).status_code == 404
    assert api.client.head(path).status_code == 401
    refused = api.client.head("/api/v1/ingest", **api.auth)
    assert (refused.status_code, refused["Allow"]) == (405, "POST")


def test_head_on_a_streamed_read_does_not_build_what_it_would_drop() -> None:
    from django.http import StreamingHttpResponse
    from django.test import RequestFactory

    from contextview.web.middleware import HeadAsGetMiddleware

    built: list[str] = []

    def lines() -> Iterator[bytes]:
        built.append("a line")
        yield b"{}\n"

    handler = HeadAsGetMiddleware(lambda request: StreamingHttpResponse(lines()))
    path = "/api/v1/export/steps.jsonl"
    # Iterated as a WSGI server iterates what it sends (gunicorn drops a HEAD's body).
    assert b"".join(handler(RequestFactory().head(path))) == b"" and built == []
    assert b"".join(handler(RequestFactory().get(path))) == b"{}\n" and built == ["a line"]
