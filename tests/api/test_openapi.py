"""The OpenAPI document: every reference resolves, every answer a route gives is listed."""

from __future__ import annotations

from typing import Any

from tests.api_client import Api


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


def _resolve(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def test_it_serves_a_document_whose_references_all_resolve(api: Api) -> None:
    document = api.client.get("/api/v1/openapi.json").json()
    refs = _refs(document)
    assert "#/components/schemas/EventHead" in refs
    for ref in refs:
        assert isinstance(_resolve(document, ref), dict), ref
    assert "$defs" not in str(document["paths"])


def test_it_lists_the_answers_every_route_can_give(api: Api) -> None:
    paths = api.client.get("/api/v1/openapi.json").json()["paths"]
    for path, methods in paths.items():
        for method, operation in methods.items():
            answers = set(operation["responses"])
            assert {"400", "401"} <= answers, (method, path)
            if method != "get":
                assert "403" in answers, (method, path)
    prefix = "/api/v1/sessions/{session_id}"
    assert "422" in paths[f"{prefix}/steps/{{index}}"]["get"]["responses"]
    assert "422" in paths[f"{prefix}/diff"]["get"]["responses"]
    assert "422" in paths["/api/v1/sessions"]["get"]["responses"]  # limit out of range
    assert "422" not in paths[f"{prefix}/archive"]["get"]["responses"]
    body = paths[f"{prefix}/directives"]["post"]["requestBody"]["content"]["application/json"]
    assert {s["properties"]["type"]["const"] for s in body["schema"]["oneOf"]} == {
        "set_mode",
        "restore",
    }


def test_it_answers_what_the_document_says_where_ninja_checks(api: Api) -> None:
    api.ingest({"batch": [{"id": "s", "type": "session", "body": {"session_id": "a"}}]})
    assert api.get("/sessions/a/steps/first").status_code == 422
    assert api.get("/sessions/a/diff", to=1).status_code == 422
    assert api.get("/sessions", limit=0).status_code == 422
    assert api.client.get("/api/v1/sessions/a/archive").status_code == 401
