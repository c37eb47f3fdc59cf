"""The public API, version 1 (``../shared/contract.md``), served under /api/v1/."""

from __future__ import annotations

import copy
import json
import zlib
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from ninja import NinjaAPI, Query, Schema
from ninja.security import HttpBearer

from contextview.core.errors import InputError
from contextview.core.monitors import METRICS
from contextview.ingest.ratelimit import rate_limit_check
from contextview.ingest.schemas import Envelope
from contextview.ingest.services import batch_ingest
from contextview.monitors import selectors as monitor_selectors
from contextview.monitors.services import monitor_create, monitor_delete
from contextview.postmortems.downloads import as_attachment, download_name
from contextview.postmortems.export import dataset_jsonl
from contextview.postmortems.reports import report_json_chunks, report_markdown, session_report
from contextview.projects.models import ApiKey
from contextview.projects.selectors import apikey_authenticate
from contextview.sessions import selectors
from contextview.sessions.models import Directive, Session
from contextview.sessions.services import (
    directive_ack,
    directive_as_dict,
    directive_create,
    directive_pk,
)
from contextview.stats.selectors import agent_mode_table

# The only methods a read-only key may use: they change no state.
READ_METHODS = ("GET", "HEAD", "OPTIONS")


class ReadOnlyKey(Exception):
    """A key that may only read, used on a route that changes state."""


class KeyAuth(HttpBearer):
    """The project key of the request; a read-only key is refused on every route that
    writes, here in one place, so a route added later cannot forget it."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        key = apikey_authenticate(secret=token)
        if key is not None and not key.can_write and request.method not in READ_METHODS:
            raise ReadOnlyKey
        return key


_ERROR_BODY = {
    "content": {
        "application/json": {
            "schema": {"type": "object", "properties": {"error": {"type": "string"}}}
        }
    }
}
# Answers that come from the API's own machinery rather than from a route's body, and
# which routes can give them; documented on every route they apply to (see below).
_COMMON_ANSWERS = {
    400: "A path or query parameter holds a NUL character (%00)",
    401: "Missing or bad key",
    403: "The key may read but not write (on every route that changes state)",
    422: "A parameter is missing or not of its type (the answer names it)",
}


class DocumentedAPI(NinjaAPI):
    """The OpenAPI document, made whole in one place for every route, old and new.

    Schemas given by a route's ``openapi_extra`` keep their ``$defs`` beside them;
    they move to ``components``, where their ``$ref``s point. Every operation lists
    the answers it can give besides its own: 400 for a NUL in a parameter, 401 where
    a key is required, 403 where a read-only key is refused, 422 where ninja checks a
    parameter's presence or type.
    """

    def get_openapi_schema(self, **kwargs: Any) -> Any:
        # A copy: the document shares dicts with the routes' openapi_extra.
        schema = copy.deepcopy(super().get_openapi_schema(**kwargs))
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for methods in schema["paths"].values():
            for method, operation in methods.items():
                for content in operation.get("requestBody", {}).get("content", {}).values():
                    components.update(content.get("schema", {}).pop("$defs", {}))
                answers = operation["responses"]
                due = {
                    400: True,
                    401: bool(operation.get("security")),
                    403: bool(operation.get("security")) and method.upper() not in READ_METHODS,
                    422: any(_checked(p) for p in operation.get("parameters", [])),
                }
                for status, applies in due.items():
                    if applies and status not in answers:
                        answers[status] = {"description": _COMMON_ANSWERS[status], **_ERROR_BODY}
        return schema


def _checked(parameter: dict[str, Any]) -> bool:
    """Whether ninja may refuse this parameter: required in the query, or not text."""
    kinds = [parameter["schema"]] + parameter["schema"].get("anyOf", [])
    text = any(kind.get("type") == "string" for kind in kinds)
    return not text or (parameter["in"] == "query" and parameter.get("required", False))


api = DocumentedAPI(
    title="contextview",
    version="1",
    description="Ingest and read the working context of LLM agents.",
    urls_namespace="api-v1",
    auth=KeyAuth(),
    openapi_url="/openapi.json",
    docs_url="/docs",
)


@api.exception_handler(ReadOnlyKey)
def _read_only(request: HttpRequest, exc: ReadOnlyKey) -> HttpResponse:
    return _error(403, f"this key may read but not write; {request.method} changes state")


def _error(status: int, message: str, **headers: str) -> JsonResponse:
    response = JsonResponse({"error": message}, status=status)
    for name, value in headers.items():
        response[name] = value
    return response


def _key(request: HttpRequest) -> ApiKey:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def _read_body(request: HttpRequest, limit: int) -> bytes | JsonResponse:
    """The request body, inflated if gzip, refusing past ``limit`` without reading on."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    try:
        length = int(declared)
    except ValueError:
        return _error(400, "Content-Length is not a number")
    encoding = (request.META.get("HTTP_CONTENT_ENCODING") or "identity").strip().lower()
    if encoding not in ("identity", "gzip"):
        return _error(415, f"Content-Encoding {encoding!r} is not supported; use gzip or none")
    if length > limit:
        return _error(413, f"body of {length} bytes is over the limit of {limit} bytes")
    raw = request.read(limit + 1)
    if len(raw) > limit:
        return _error(413, f"body is over the limit of {limit} bytes")
    if encoding == "identity":
        return raw
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        body = inflater.decompress(raw, limit + 1)
    except zlib.error as exc:
        return _error(400, f"body is not valid gzip: {exc}")
    if len(body) > limit or inflater.unconsumed_tail:
        return _error(413, f"body inflates past the limit of {limit} bytes")
    if not inflater.eof:
        return _error(400, "body is not valid gzip: the stream is truncated")
    return body


_ENVELOPE_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": Envelope.model_json_schema(ref_template="#/components/schemas/{model}")
            }
        },
    }
}


@api.post(
    "/ingest",
    summary="Ingest a batch of session, step and session_end events",
    response={207: dict, 400: dict, 401: dict, 403: dict, 413: dict, 415: dict, 429: dict},
    openapi_extra=_ENVELOPE_DOC,
)
def ingest(request: HttpRequest) -> HttpResponse:
    key = _key(request)
    if not key.can_write:
        return _error(403, "this key may read but not ingest")
    content_type = (request.META.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
    if content_type != "application/json":
        return _error(415, f"Content-Type must be application/json, not {content_type!r}")
    wait = rate_limit_check(key_id=key.pk)
    if wait is not None:
        return _error(429, "rate limit exceeded; retry later", **{"Retry-After": str(wait)})
    body = _read_body(request, settings.INGEST_MAX_BYTES)
    if isinstance(body, JsonResponse):
        return body
    try:
        envelope = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        return _error(400, f"body is not JSON: {exc}")
    if not isinstance(envelope, dict):
        return _error(
            400, 'body must be an object {"batch": [events]}, not a JSON ' + _kind(envelope)
        )
    batch = envelope.get("batch")
    if not isinstance(batch, list):
        return _error(
            400,
            "batch: field required, a list of events"
            if batch is None
            else f"batch: must be a list of events, not {_kind(batch)}",
        )
    if len(batch) > settings.INGEST_MAX_EVENTS:
        return _error(
            413, f"batch has {len(batch)} events; the limit is {settings.INGEST_MAX_EVENTS}"
        )
    outcome = batch_ingest(project=key.project, batch=batch)
    return JsonResponse(outcome.as_dict(), status=207)


def _kind(value: Any) -> str:
    return {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def _session_or_404(request: HttpRequest, session_id: str) -> Session | JsonResponse:
    session = selectors.session_get(project=_key(request).project, external_id=session_id)
    if session is None:
        return _error(404, f"no session {session_id!r} in this project")
    return session


@api.get("/sessions", summary="List sessions, newest first", response={200: dict, 400: dict})
def sessions_list(
    request: HttpRequest,
    agent: str | None = None,
    mode: str | None = None,
    status: str | None = None,
    cursor: str | None = None,
    limit: int = Query(50, ge=1, le=200),
) -> Any:
    after = None
    if cursor:
        after = selectors.decode_cursor(cursor)
        if after is None:
            return _error(400, "cursor: not a cursor this API gave out")
    page, next_cursor = selectors.session_list(
        project=_key(request).project,
        agent=agent,
        mode=mode,
        status=status,
        after=after,
        limit=limit,
    )
    return {
        "sessions": [selectors.session_as_dict(s) for s in page],
        "next_cursor": next_cursor,
    }


@api.get(
    "/sessions/{path:session_id}/steps/{index}",
    summary="One step: contexts before and after, operations (own and inferred), folds, statistics",
    response={200: dict, 404: dict},
)
def step_detail(request: HttpRequest, session_id: str, index: int) -> Any:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    step = selectors.step_get(session=session, index=index)
    if step is None:
        return _error(404, f"session {session_id!r} has no step {index}")
    return selectors.step_as_dict(session=session, step=step)


@api.get(
    "/sessions/{path:session_id}/diff",
    summary="How the context changed from step I's before to step J's after",
    response={200: dict, 404: dict},
)
def step_diff(
    request: HttpRequest,
    session_id: str,
    start: int = Query(..., alias="from", ge=0),
    to: int = Query(..., ge=0),
) -> Any:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    first = selectors.step_get(session=session, index=start)
    last = selectors.step_get(session=session, index=to)
    if first is None or last is None:
        missing = start if first is None else to
        return _error(404, f"session {session_id!r} has no step {missing}")
    return selectors.steps_diff(session=session, start=first, end=last)


@api.get(
    "/sessions/{path:session_id}/archive",
    summary="Folded and dropped originals of a session",
    response={200: dict, 404: dict},
)
def session_archive(request: HttpRequest, session_id: str) -> Any:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    return {
        "session_id": session.external_id,
        "originals": selectors.session_archive(session=session),
    }


@api.get(
    "/stats/agents",
    summary="Per agent and mode: sessions, success rate, tokens per step, retention, violations",
    response={200: dict},
)
def stats_agents(request: HttpRequest) -> Any:
    return {"rows": agent_mode_table(project_id=_key(request).project.pk)}


@api.get(
    "/export/steps.jsonl",
    summary="Every step as a JSON line (obs, operations, after, reward, outcome), streamed",
)
def export_steps(
    request: HttpRequest,
    agent: str | None = None,
    mode: str | None = None,
    status: str | None = None,
) -> StreamingHttpResponse:
    lines = dataset_jsonl(project=_key(request).project, agent=agent, mode=mode, status=status)
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    as_attachment(response, "steps.jsonl")
    return response


@api.get(
    "/sessions/{path:session_id}/report.md",
    summary="A Markdown report of the session for an incident review",
    response={200: str, 404: dict},
)
def report_md(request: HttpRequest, session_id: str) -> HttpResponse:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    response = HttpResponse(
        report_markdown(session_report(session)), content_type="text/markdown; charset=utf-8"
    )
    as_attachment(response, f"{download_name(session_id)}.md")
    return response


@api.get(
    "/sessions/{path:session_id}/report.json",
    summary="The session report and every step as the read API gives it, streamed",
    response={200: dict, 404: dict},
)
def report_json(request: HttpRequest, session_id: str) -> HttpResponse:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    response = StreamingHttpResponse(report_json_chunks(session), content_type="application/json")
    as_attachment(response, f"{download_name(session_id)}.json")
    return response


@api.get(
    "/sessions/{path:session_id}/control",
    summary="Pending directives for the agent",
    response={200: dict, 400: dict, 404: dict},
)
def control_list(request: HttpRequest, session_id: str, after: str | None = None) -> Any:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    after_pk = 0
    if after:
        parsed = (
            directive_pk(after)
            if after.startswith("d-")
            else (int(after) if after.isdigit() else None)
        )
        if parsed is None:
            return _error(400, "after: not a cursor this API gave out")
        after_pk = parsed
    pending = list(
        Directive.objects.filter(session=session, status=Directive.Status.PENDING, pk__gt=after_pk)
        .select_related("session")
        .order_by("id")
    )
    # Always a cursor to pass back: the last directive given, else where the reader was.
    cursor = pending[-1].public_id if pending else f"d-{after_pk}"
    return {"directives": [directive_as_dict(d) for d in pending], "cursor": cursor}


def _json_body_doc(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


@api.post(
    "/sessions/{path:session_id}/control/{directive_id}/ack",
    summary="Acknowledge a directive as applied or rejected",
    response={200: dict, 400: dict, 404: dict, 409: dict},
    openapi_extra=_json_body_doc(
        {
            "type": "object",
            "required": ["status"],
            "properties": {
                "status": {"enum": ["applied", "rejected"]},
                "detail": {"type": "string"},
            },
        }
    ),
)
def control_ack(request: HttpRequest, session_id: str, directive_id: str) -> Any:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    pk = directive_pk(directive_id)
    directive = (
        Directive.objects.filter(session=session, pk=pk).select_related("session").first()
        if pk is not None
        else None
    )
    if directive is None:
        return _error(404, f"no directive {directive_id!r} for session {session_id!r}")
    payload = _json_object(request)
    if isinstance(payload, JsonResponse):
        return payload
    detail = payload.get("detail") or ""
    if not isinstance(detail, str):
        return _error(400, "detail: must be a string")
    try:
        ok = directive_ack(directive=directive, status=payload.get("status"), detail=detail)
    except InputError as exc:
        return _error(400, str(exc))
    if not ok:
        return _error(409, f"directive {directive_id} was already {directive.status}")
    return directive_as_dict(directive, full=True)


@api.post(
    "/sessions/{path:session_id}/directives",
    summary="Create a set_mode or restore directive",
    response={201: dict, 400: dict, 403: dict, 404: dict, 422: dict},
    openapi_extra=_json_body_doc(
        {
            "oneOf": [
                {
                    "type": "object",
                    "required": ["type", "mode"],
                    "properties": {"type": {"const": "set_mode"}, "mode": {"type": "string"}},
                },
                {
                    "type": "object",
                    "required": ["type", "targets"],
                    "properties": {
                        "type": {"const": "restore"},
                        "targets": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                        "step": {"type": "integer", "minimum": 0},
                    },
                },
            ]
        }
    ),
)
def directive_new(request: HttpRequest, session_id: str) -> Any:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    payload = _json_object(request)
    if isinstance(payload, JsonResponse):
        return payload
    try:
        directive = directive_create(
            session=session,
            type=payload.get("type"),
            mode=payload.get("mode"),
            targets=payload.get("targets"),
            step=payload.get("step"),
            key=_key(request),
        )
    except InputError as exc:
        return _error(exc.status, str(exc))
    directive.session = session
    return JsonResponse(directive_as_dict(directive, full=True), status=201)


class MonitorFilters(Schema):
    agent: str | None = None
    mode: str | None = None


class MonitorOut(Schema):
    id: int
    name: str
    metric: str
    threshold: float
    window_minutes: int
    filters: MonitorFilters
    webhook_url: str | None = None
    state: str
    created_at: str


class MonitorCreatedOut(MonitorOut):
    secret: str


class MonitorListOut(Schema):
    monitors: list[MonitorOut]


class DeliveryOut(Schema):
    event: str
    attempt: int
    status_code: int | None = None
    error: str | None = None
    at: str


class AlertOut(Schema):
    id: int
    monitor_id: int
    state: str
    value: float
    started_at: str
    resolved_at: str | None = None
    sessions: list[str]
    deliveries: list[DeliveryOut]


class AlertListOut(Schema):
    alerts: list[AlertOut]


class ErrorOut(Schema):
    error: str


@api.post(
    "/monitors",
    summary="Create a monitor; its webhook secret is in this answer only",
    response={201: MonitorCreatedOut, 400: ErrorOut},
    openapi_extra=_json_body_doc(
        {
            "type": "object",
            "required": ["name", "metric", "threshold"],
            "properties": {
                "name": {"type": "string"},
                "metric": {"enum": list(METRICS)},
                "threshold": {"type": "number", "minimum": 0},
                "window_minutes": {"type": "integer", "minimum": 1, "default": 60},
                "filters": {
                    "type": "object",
                    "properties": {"agent": {"type": "string"}, "mode": {"type": "string"}},
                },
                "webhook_url": {"type": "string", "format": "uri"},
                "email": {"type": "string", "format": "email"},
            },
        }
    ),
)
def monitors_create(request: HttpRequest) -> Any:
    payload = _json_object(request)
    if isinstance(payload, JsonResponse):
        return payload
    try:
        created = monitor_create(project=_key(request).project, payload=payload)
    except InputError as exc:
        return _error(400, str(exc))
    body = {**monitor_selectors.monitor_as_dict(created.monitor), "secret": created.secret}
    return JsonResponse(body, status=201)


@api.get("/monitors", summary="The project's monitors", response={200: MonitorListOut})
def monitors_list(request: HttpRequest) -> Any:
    monitors = monitor_selectors.monitor_list(project=_key(request).project)
    return {"monitors": [monitor_selectors.monitor_as_dict(m) for m in monitors]}


@api.delete(
    "/monitors/{monitor_id}",
    summary="Delete a monitor and its alerts",
    response={204: None, 404: ErrorOut},
)
def monitors_delete(request: HttpRequest, monitor_id: int) -> Any:
    if not monitor_delete(project=_key(request).project, monitor_id=monitor_id):
        return _error(404, f"no monitor {monitor_id} in this project")
    return HttpResponse(status=204)


@api.get("/alerts", summary="The project's alerts, newest first", response={200: AlertListOut})
def alerts_list(request: HttpRequest, state: str | None = None) -> Any:
    if state not in (None, "firing", "resolved"):
        return _error(400, "state: must be firing or resolved")
    alerts = monitor_selectors.alert_list(project=_key(request).project, state=state)
    return {"alerts": monitor_selectors.alerts_with_deliveries(alerts[:500])}


# Session ids may hold slashes (`team/agent-7`, sent as `team%2Fagent-7`, which the
# server decodes before routing): every route takes the id as a path, and this one,
# which would otherwise swallow `<id>/steps/3` and the rest, is declared last.
@api.get(
    "/sessions/{path:session_id}",
    summary="One session with its aggregates",
    response={200: dict, 404: dict},
)
def session_detail(request: HttpRequest, session_id: str) -> Any:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    return selectors.session_as_dict(session)


def _json_object(request: HttpRequest) -> dict[str, Any] | JsonResponse:
    try:
        payload = json.loads(request.body or b"{}")
    except ValueError as exc:
        return _error(400, f"body is not JSON: {exc}")
    if not isinstance(payload, dict):
        return _error(400, "body must be a JSON object")
    return payload
