"""The OpenAPI document: every reference resolves, every answer a route gives is listed."""

from __future__ import annotations

import json
from typing import Any

from tests.api_client import Api, step
from tests.importers.test_import_api import FIXTURES, _named


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
    document = api.client.get("/api/v1/openapi.json").json()
    paths = document["paths"]
    for path, methods in paths.items():
        for method, operation in methods.items():
            answers = set(operation["responses"])
            assert {"400", "401"} <= answers, (method, path)
            if method != "get":
                assert "403" in answers, (method, path)
    prefix = "/api/v1/sessions/{session_id}"
    step = paths[f"{prefix}/steps/{{index}}"]["get"]["responses"]["400"]
    assert "not of its type" in step["description"]  # /steps/first
    assert "422" not in paths[f"{prefix}/archive"]["get"]["responses"]
    body = paths[f"{prefix}/directives"]["post"]["requestBody"]["content"]["application/json"]
    kinds = [_resolve(document, s["$ref"]) for s in body["schema"]["oneOf"]]
    assert {k["properties"]["type"]["const"] for k in kinds} == {"set_mode", "restore"}


def test_it_refuses_a_parameter_ninja_checks_with_400_naming_it(api: Api) -> None:
    api.ingest({"batch": [{"id": "s", "type": "session", "body": {"session_id": "a"}}]})
    refused = {
        "index: Input should be a valid integer": api.get("/sessions/a/steps/first"),
        "from: Field required": api.get("/sessions/a/diff", to=1),
        "limit: Input should be greater than or equal to 1": api.get("/sessions", limit=0),
    }
    for error, answer in refused.items():
        assert answer.status_code == 400, answer.content
        assert answer.json()["error"].startswith(error), answer.json()
    no_key = api.client.get("/api/v1/sessions/a/archive")
    assert no_key.status_code == 401
    assert no_key.json()["error"].startswith("Authorization: a project key is required")
    assert no_key["WWW-Authenticate"] == "Bearer"
    for path in ("/sessions", "/export/steps.jsonl"):
        for bogus in ("bogus", ""):
            answer = api.get(path, status=bogus)
            assert answer.status_code == 400
            assert answer.json()["error"].startswith("status: Input should be 'running'")
    assert api.get("/sessions", status="failed").status_code == 200
    assert api.get("/alerts", state="open").json()["error"].startswith("state: Input should be")


def _enum_of(parameter: dict[str, Any]) -> list[str]:
    schema = parameter["schema"]
    return next(s["enum"] for s in schema.get("anyOf", [schema]) if "enum" in s)


def test_it_documents_what_each_filter_and_field_takes_as_the_server_checks_it(api: Api) -> None:
    # A generated client (or a fuzzer) that keeps to the document is never refused
    # for a value the document allowed.
    paths = api.client.get("/api/v1/openapi.json").json()["paths"]
    for path in ("/api/v1/sessions", "/api/v1/export/steps.jsonl"):
        status = next(p for p in paths[path]["get"]["parameters"] if p["name"] == "status")
        assert _enum_of(status) == ["running", "succeeded", "failed", "abandoned", "unknown"]
    state = next(p for p in paths["/api/v1/alerts"]["get"]["parameters"] if p["name"] == "state")
    assert _enum_of(state) == ["firing", "resolved"]
    monitor = paths["/api/v1/monitors"]["post"]["requestBody"]["content"]["application/json"]
    fields = monitor["schema"]["properties"]
    assert fields["name"]["minLength"] == 1 and fields["name"]["maxLength"] == 200
    too_long = {"name": "x" * 201, "metric": "peak_occupancy", "threshold": 0.9}
    assert api.post("/monitors", too_long).status_code == 400
    assert fields["window_minutes"]["maximum"] == 44640
    assert fields["filters"]["additionalProperties"] is False
    upload = paths["/api/v1/import"]["post"]["requestBody"]["content"]["multipart/form-data"]
    assert upload["schema"]["properties"]["file"]["minItems"] == 1


# Read answers that are not one JSON document: a Markdown file, a stream of JSON lines.
NOT_JSON = (".md", ".jsonl")


def test_it_documents_the_shape_of_every_read_answer_and_of_a_directive(api: Api) -> None:
    document = api.client.get("/api/v1/openapi.json").json()
    paths = document["paths"]
    reads = [p for p, methods in paths.items() if "get" in methods and not p.endswith(NOT_JSON)]
    assert len(reads) >= 10
    for path in reads:
        answer = paths[path]["get"]["responses"]["200"]["content"]["application/json"]
        schema = _resolve(document, answer["schema"]["$ref"])
        assert schema["type"] == "object" and schema["properties"], path
    directive = "/api/v1/sessions/{session_id}/directives"
    created = paths[directive]["post"]["responses"]["201"]["content"]["application/json"]
    assert created["schema"]["$ref"] == "#/components/schemas/DirectiveOut"
    # Errors the API's machinery gives have their own, real shape.
    step = paths["/api/v1/sessions/{session_id}/steps/{index}"]["get"]["responses"]
    assert _resolve(document, step["401"]["content"]["application/json"]["schema"]["$ref"])[
        "required"
    ] == ["error"]


def test_real_answers_conform_to_the_document_and_keep_every_field_sent(api: Api) -> None:
    import jsonschema_rs  # schemathesis's own validator

    from tests.web.conftest import compute_stats, order_session_events

    message = {"id": "t9", "role": "tool", "content": "ok", "tool": "Bash",
               "tool_call_id": "call_9", "custom": {"k": 1}}  # fmt: skip
    usage = {"input_tokens": 12, "provider_own": 1.5}
    events = [
        *order_session_events("order"),
        step("agent", 0, [message], usage=usage, tools=[{"name": "Bash"}], model="gpt-4o"),
    ]
    assert api.ingest({"batch": events}).status_code == 207
    compute_stats(api.project, "order")
    assert (
        api.post("/sessions/order/directives", {"type": "set_mode", "mode": "rag"}).status_code
        == 201
    )
    document = api.client.get("/api/v1/openapi.json").json()

    def conforms(path: str, route: str, **params: Any) -> Any:
        response = api.get(path, **params)
        assert response.status_code == 200, (path, response.content)
        schema = document["paths"][route]["get"]["responses"]["200"]["content"]
        validator = jsonschema_rs.validator_for(
            {
                "$ref": schema["application/json"]["schema"]["$ref"],
                "components": document["components"],
            }
        )
        validator.validate(response.json())
        return response.json()

    prefix = "/api/v1/sessions/{session_id}"
    got = conforms("/sessions/agent/steps/0", f"{prefix}/steps/{{index}}")
    # Fields beyond the documented ones are returned as sent, and none is added.
    sent = {k: v for k, v in got["before"][0].items() if k not in ("partition", "tokens")}
    assert sent == message and "pinned" not in got["before"][0]
    assert got["usage"] == usage
    for index in range(3):
        conforms(f"/sessions/order/steps/{index}", f"{prefix}/steps/{{index}}")
    diff = conforms("/sessions/order/diff", f"{prefix}/diff", **{"from": 0, "to": 2})
    assert (diff["from"], diff["to"]) == (0, 2)
    conforms("/sessions/order", prefix)
    conforms("/sessions/order/archive", f"{prefix}/archive")
    conforms("/sessions/order/control", f"{prefix}/control")
    conforms("/sessions", "/api/v1/sessions")
    conforms("/stats/agents", "/api/v1/stats/agents")


def _schema_of(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """The object schema `node` stands for: itself, its $ref, or the one object of its
    anyOf (a field that may also be null)."""
    for option in node.get("anyOf", [node]):
        if "$ref" in option:
            return _resolve(document, option["$ref"])  # type: ignore[no-any-return]
        if option.get("type") == "object" and option.get("properties"):
            return option
    raise AssertionError(f"no object schema in {node}")


def _answer(document: dict[str, Any], path: str, method: str, status: str) -> dict[str, Any]:
    answer = document["paths"][path][method]["responses"][status]
    return answer["content"]["application/json"]["schema"]  # type: ignore[no-any-return]


def _validates(document: dict[str, Any], schema: dict[str, Any], body: Any) -> None:
    import jsonschema_rs

    jsonschema_rs.validator_for({**schema, "components": document["components"]}).validate(body)


def test_it_documents_the_answer_of_an_ingest_and_its_refusals(api: Api) -> None:
    """A client generated from the document reads each event's result and the pending
    directives, and every refusal of the whole request as an error."""
    api.ingest({"batch": [{"id": "s", "type": "session", "body": {"session_id": "a"}}]})
    assert api.post("/sessions/a/directives", {"type": "set_mode", "mode": "rag"}).status_code
    document = api.client.get("/api/v1/openapi.json").json()
    schema = _answer(document, "/api/v1/ingest", "post", "207")
    answer = _schema_of(document, schema)
    assert {"results", "directives"} <= set(answer["required"])
    result = _schema_of(document, answer["properties"]["results"]["items"])
    assert {"id", "status", "error", "duplicate"} <= set(result["properties"])
    for status in ("400", "413", "415", "429"):
        refusal = _answer(document, "/api/v1/ingest", "post", status)
        assert refusal == {"$ref": "#/components/schemas/ErrorOut"}, status
    batch = [
        {"id": "s", "type": "session", "body": {"session_id": "a"}},
        {"id": "t", "type": "step", "body": {"session_id": "a"}},
    ]
    got = api.ingest({"batch": batch}).json()
    assert [r["status"] for r in got["results"]] == [200, 400] and got["directives"]
    _validates(document, schema, got)


STEP_STATS = {"tokens", "partitions", "occupancy", "reported_error", "ops", "flags", "reward"}
STAT_OP = {"op", "targets", "result_id", "tokens_in", "tokens_out", "ratio", "entities"}
AGGREGATES = {
    "steps", "peak_occupancy", "mean_occupancy", "ops_by_type", "tokens_saved", "mean_ratio",
    "entity_retention", "reload_regrets", "budget_violations", "flag_counts",
    "amnesia", "refetches",
}  # fmt: skip


def test_it_documents_the_names_of_step_statistics_and_session_aggregates(api: Api) -> None:
    document = api.client.get("/api/v1/openapi.json").json()
    schemas = document["components"]["schemas"]
    stats = _schema_of(document, schemas["StepOut"]["properties"]["stats"])
    assert STEP_STATS <= set(stats["properties"])
    for pair in ("tokens", "occupancy", "reported_error"):
        sides = _schema_of(document, stats["properties"][pair])
        assert {"before", "after"} <= set(sides["properties"])
    op = _schema_of(document, stats["properties"]["ops"]["anyOf"][0]["items"])
    assert STAT_OP <= set(op["properties"])
    entities = _schema_of(document, op["properties"]["entities"])
    assert {"total", "kept", "lost", "needed_later"} <= set(entities["properties"])
    aggregates = _schema_of(document, schemas["SessionOut"]["properties"]["aggregates"])
    assert AGGREGATES <= set(aggregates["properties"])


def test_it_documents_the_answers_of_a_replay_and_an_import(api: Api) -> None:
    from tests.web.conftest import compute_stats, order_session_events

    assert api.ingest({"batch": order_session_events("order")}).status_code == 207
    compute_stats(api.project, "order")
    document = api.client.get("/api/v1/openapi.json").json()
    replay_path = "/api/v1/sessions/{session_id}/replay"
    schema = _answer(document, replay_path, "post", "200")
    replay = _schema_of(document, schema)
    assert {"policy", "steps", "totals"} <= set(replay["properties"])
    totals = _schema_of(document, replay["properties"]["totals"])
    assert {"tokens", "tokens_saved", "peak_tokens", "amnesia"} <= set(totals["properties"])
    got = api.post("/sessions/order/replay", {"policy": {"kind": "sliding", "keep_last": 1}})
    _validates(document, schema, json.loads(b"".join(got.streaming_content)))
    assert _answer(document, replay_path, "post", "400") == {
        "$ref": "#/components/schemas/ErrorOut"
    }
    imported = _schema_of(document, _answer(document, "/api/v1/import", "post", "201"))
    one = _schema_of(document, imported["properties"]["sessions"]["items"])
    assert {"session_id", "format", "steps", "operations"} <= set(one["properties"])
    refused = _schema_of(document, _answer(document, "/api/v1/import", "post", "422"))
    assert {"error", "errors", "sessions"} <= set(refused["properties"])
    assert refused["required"] == ["error"]
    # Some transcripts of an upload imported, one not: the answer is what it documents.
    claude = (FIXTURES / "claude_code.jsonl").read_bytes()
    got = api.client.post(
        "/api/v1/import",
        {"file": [_named("notes.txt", b"notes\n"), _named("cc.jsonl", claude)]},
        **api.auth,
    )
    assert got.status_code == 422
    _validates(document, _answer(document, "/api/v1/import", "post", "422"), got.json())


def test_it_documents_the_media_type_of_every_read_answer(api: Api) -> None:
    """A client generated from the document expects the type it names: a Markdown
    report is not JSON, and the dataset export is JSON lines."""
    from tests.web.conftest import order_session_events

    assert api.ingest({"batch": order_session_events("order")}).status_code == 207
    document = api.client.get("/api/v1/openapi.json").json()
    values = {"{session_id}": "order", "{index}": "0"}
    checked = []
    for path, methods in document["paths"].items():
        if "get" not in methods or "{monitor_id}" in path or path.endswith("/openapi.json"):
            continue
        url = path
        for name, value in values.items():
            url = url.replace(name, value)
        query = {"from": 0, "to": 1} if path.endswith("/diff") else {}
        answer = api.client.get(url, query, **api.auth)
        assert answer.status_code == 200, (url, answer.content[:200])
        served = answer["Content-Type"].split(";")[0]
        assert served in methods["get"]["responses"]["200"].get("content", {}), (path, served)
        checked.append(served)
    assert {"application/json", "text/markdown", "application/x-ndjson"} <= set(checked)


def test_it_documents_the_otlp_route_with_its_real_answers(api: Api) -> None:
    """An OpenTelemetry exporter posts beside the API; the document says what it sends
    and gets, and what the server answers is what it says."""
    document = api.client.get("/api/v1/openapi.json").json()
    operation = document["paths"]["/v1/traces"]["post"]
    assert set(operation["requestBody"]["content"]) == {
        "application/x-protobuf",
        "application/json",
    }
    assert {"200", "400", "401", "413", "415", "429", "503"} <= set(operation["responses"])
    assert "Retry-After" in operation["responses"]["503"]["headers"]
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "chat gpt-4o",
        "startTimeUnixNano": "1800000000000000000",
        "endTimeUnixNano": "1800000001000000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.conversation.id", "value": {"stringValue": "documented"}},
            {"key": "gen_ai.input.messages", "value": {"stringValue": "not json"}},
        ],
    }
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}

    def post(**headers: str) -> Any:
        return api.client.post(
            "/v1/traces", json.dumps(body), content_type="application/json", **headers
        )

    refused = post(**api.auth)
    assert refused.status_code == 200
    assert refused.json()["partialSuccess"]["rejectedSpans"] == "1"
    _validates(document, _answer(document, "/v1/traces", "post", "200"), refused.json())
    unknown = post()
    assert unknown.status_code == 401
    _validates(document, _answer(document, "/v1/traces", "post", "401"), unknown.json())
