"""The public API, version 1 (``../shared/contract.md``), served under /api/v1/."""

from __future__ import annotations

import copy
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.urls import register_converter
from ninja import NinjaAPI, Query, Schema, Swagger
from ninja.errors import AuthenticationError
from ninja.errors import ValidationError as ParameterError
from ninja.security import HttpBearer
from pydantic import BaseModel

from contextview import api_schemas as out
from contextview.api_schemas import ErrorOut
from contextview.core.errors import InputError
from contextview.core.importers import FORMATS
from contextview.core.model import PARTITIONS
from contextview.core.monitors import METRICS
from contextview.core.replay import KEEP_LAST, MAX_TOKENS, policy_from_json
from contextview.ingest.body import (
    BodyError,
    batch_parse,
    json_body,
    json_charset_refused,
    request_body,
)
from contextview.ingest.imports import ImportFailed, transcript_import
from contextview.ingest.ratelimit import rate_limit_check
from contextview.ingest.schemas import Envelope
from contextview.ingest.services import batch_ingest
from contextview.ingest.uploads import uploaded_transcripts
from contextview.ingest.views import OTLP_PATH, PROTOBUF
from contextview.monitors import selectors as monitor_selectors
from contextview.monitors.services import (
    TEXT_LIMITS,
    WINDOW_MINUTES_MAX,
    monitor_create,
    monitor_delete,
)
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
    directive_cursor_pk,
    directive_pk,
)
from contextview.stats.replays import replay_json_chunks
from contextview.stats.selectors import agent_mode_table

# The only methods a read-only key may use: they change no state.
READ_METHODS = ("GET", "HEAD", "OPTIONS")


class ReadOnlyKey(Exception):
    """A key that may only read, used on a route that changes state."""


class SessionIdConverter:
    """A session id in a route: any text, slashes and line breaks included.

    Django's ``path`` converter stops at a line break, and session ids are the
    agent's own strings; the routes below declare the session's own route last so
    that ``.../steps/3`` still reaches the step.
    """

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(SessionIdConverter, "sessionid")


class KeyAuth(HttpBearer):
    """The project key of the request; a read-only key is refused on every route that
    writes, here in one place, so a route added later cannot forget it."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        key = apikey_authenticate(secret=token)
        if (
            key is not None
            and not key.can_write
            and request.method not in READ_METHODS
            and not _reads_by_post(request)
        ):
            raise ReadOnlyKey
        return key


def _body(model: type[BaseModel]) -> dict[str, Any]:
    ref = f"#/components/schemas/{model.__name__}"
    return {"content": {"application/json": {"schema": {"$ref": ref}}}}


# Routes posted to because they take a body, which change nothing: any key may ask.
POSTED_READS = ("/replay",)


def _reads_by_post(request: HttpRequest) -> bool:
    return request.method == "POST" and request.path.endswith(POSTED_READS)


# Answers that come from the API's own machinery rather than from a route's body, and
# which routes can give them; documented on every route they apply to (see below).
_COMMON_ANSWERS: dict[int, tuple[str, type[BaseModel]]] = {
    400: (
        "A path or query parameter is missing, not of its type or out of range, or holds a "
        "NUL character (%00); the answer names it",
        ErrorOut,
    ),
    401: ("Missing, unknown or revoked key", ErrorOut),
    403: ("The key may read but not write (on every route that changes state)", ErrorOut),
}


class DocumentedAPI(NinjaAPI):
    """The OpenAPI document, made whole in one place for every route, old and new.

    Schemas given by a route's ``openapi_extra`` keep their ``$defs`` beside them;
    they move to ``components``, where their ``$ref``s point. Every operation lists
    the answers it can give besides its own: 400 for a parameter refused, 401 where
    a key is required, 403 where a read-only key is refused.
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
                }
                for status, applies in due.items():
                    if applies and status not in answers:
                        description, model = _COMMON_ANSWERS[status]
                        answers[status] = {"description": description, **_body(model)}
        components.setdefault(ErrorOut.__name__, ErrorOut.model_json_schema())
        # Served by a view of its own (the ingest app), outside this API's prefix: the
        # path an OpenTelemetry exporter posts to, documented beside the others.
        schema["paths"][OTLP_PATH] = {"post": _otlp_operation()}
        return schema


def _otlp_operation() -> dict[str, Any]:
    """The OTLP/HTTP traces route as the OTLP specification defines it: protobuf or its
    JSON form in, the same encoding out; a refusal is a google.rpc.Status."""
    binary = {"type": "string", "format": "binary"}
    status = {
        "type": "object",
        "description": "google.rpc.Status",
        "properties": {
            "code": {"type": "integer"},
            "message": {"type": "string"},
            "details": {"type": "array", "items": {"type": "object"}},
        },
    }
    wait = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}

    def answer(description: str, json_schema: dict[str, Any], *, retried: bool = False) -> Any:
        out: dict[str, Any] = {
            "description": description,
            "content": {"application/json": {"schema": json_schema}, PROTOBUF: {"schema": binary}},
        }
        if retried:
            out["headers"] = wait
        return out

    accepted = {
        "type": "object",
        "description": "ExportTraceServiceResponse",
        "properties": {
            "partialSuccess": {
                "type": "object",
                "properties": {
                    # int64 in protobuf's JSON form: a string
                    "rejectedSpans": {"type": ["string", "integer"]},
                    "errorMessage": {"type": "string"},
                },
            }
        },
    }
    return {
        "operationId": "otlp_traces",
        "summary": "OTLP/HTTP traces: LLM call spans become steps of their sessions",
        "description": (
            "An ExportTraceServiceRequest in protobuf or in its JSON form, optionally "
            "gzip or deflate encoded. Answered in the request's encoding; spans that "
            "could not be taken are counted and named in partialSuccess, the others "
            "stored. 429 and 503 carry Retry-After and are the only answers to retry."
        ),
        "tags": ["otlp"],
        "security": [{"KeyAuth": []}],
        "requestBody": {
            "required": True,
            "content": {
                PROTOBUF: {"schema": binary},
                "application/json": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "resourceSpans": {"type": "array", "items": {"type": "object"}}
                        },
                    }
                },
            },
        },
        "responses": {
            "200": answer("Stored, all or all but the spans partialSuccess names", accepted),
            "400": answer("The body cannot be decoded", status),
            "401": answer("Missing, unknown or revoked key", status),
            "403": answer("The key may read but not write", status),
            "413": answer("The body (or what it inflates to) is past the limit", status),
            "415": {
                "description": "Another content type or encoding",
                "content": {"application/json": {"schema": status}},
            },
            "429": answer("Rate limited", status, retried=True),
            "503": answer("Cannot take this export now", status, retried=True),
        },
    }


api = DocumentedAPI(
    title="contextview",
    version="1",
    description="Ingest and read the working context of LLM agents.",
    urls_namespace="api-v1",
    auth=KeyAuth(),
    openapi_url="/openapi.json",
    docs_url="/docs",
    # Swagger UI from django-ninja's own static files, started by its script file
    # (no inline script: the CSP runs none); no online validator badge either.
    docs=Swagger(settings={"validatorUrl": None}),
)


@api.exception_handler(ParameterError)
def _parameter_refused(request: HttpRequest, exc: ParameterError) -> HttpResponse:
    """A parameter ninja checked and refused: 400 naming it, as every other refusal."""
    problems = []
    for error in exc.errors[:5]:
        where = [str(p) for p in error.get("loc", ()) if p not in ("query", "path", "body")]
        problems.append(f"{'.'.join(where) or 'request'}: {error.get('msg', 'is not valid')}")
    return _error(400, "; ".join(problems) or "request: a parameter is not valid")


@api.exception_handler(AuthenticationError)
def _no_key(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return _error(
        401,
        "Authorization: a project key is required, as 'Authorization: Bearer <key>'; "
        "this one is missing, unknown or revoked",
        **{"WWW-Authenticate": "Bearer"},
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


def _content_type_refused(request: HttpRequest, content_type: str) -> JsonResponse | None:
    """415 for a body of another type than the route takes; None when it is that type.

    A read-only key never gets this far: KeyAuth refuses it on every write route.
    """
    header = request.META.get("CONTENT_TYPE") or ""
    sent = header.split(";")[0].strip().lower()
    if sent != content_type:
        return _error(415, f"Content-Type must be {content_type}, not {sent!r}")
    charset = json_charset_refused(header) if sent == "application/json" else None
    return None if charset is None else _error(415, charset)


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
    response={
        207: out.IngestOut,
        400: ErrorOut,
        401: ErrorOut,
        403: ErrorOut,
        413: ErrorOut,
        415: ErrorOut,
        429: ErrorOut,
    },
    openapi_extra=_ENVELOPE_DOC,
)
def ingest(request: HttpRequest) -> HttpResponse:
    key = _key(request)
    refused = _content_type_refused(request, "application/json")
    if refused is not None:
        return refused
    wait = rate_limit_check(key_prefix=key.prefix)
    if wait is not None:
        return _error(429, "rate limit exceeded; retry later", **{"Retry-After": str(wait)})
    try:
        body = request_body(request, settings.INGEST_MAX_BYTES)
    except BodyError as exc:
        return _error(exc.status, exc.message)
    try:
        batch = batch_parse(body, max_events=settings.INGEST_MAX_EVENTS)
    except BodyError as exc:
        return _error(exc.status, exc.message)
    outcome = batch_ingest(
        project=key.project,
        batch=batch.events,
        needs_escape=batch.needs_escape,
        nesting_checked=True,
    )
    return JsonResponse(outcome.as_dict(), status=207)


_IMPORT_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "type": "array",
                            "items": {"type": "string", "format": "binary"},
                            "minItems": 1,
                            "description": "one or more transcripts",
                        },
                        "format": {
                            "type": "string",
                            "enum": list(FORMATS),
                            "description": "detected from the content when absent",
                        },
                        "session_id": {"type": "string", "description": "with one file only"},
                        "live": {
                            "type": "boolean",
                            "description": "the file is still being written: a last model "
                            "call that may be incomplete waits for the next import",
                        },
                    },
                }
            }
        },
    }
}


# The import's `live` field as a form sends it (absent or empty: not live).
_LIVE_VALUES = {
    "": False,
    "0": False,
    "false": False,
    "no": False,
    "1": True,
    "true": True,
    "yes": True,
}


@api.post(
    "/import",
    summary="Import transcripts agents wrote (Claude Code, Codex, OpenHands, SWE-agent, ATIF)",
    response={
        200: out.ImportOut,
        201: out.ImportOut,
        400: ErrorOut,
        401: ErrorOut,
        403: ErrorOut,
        409: out.ImportErrorOut,
        413: out.ImportErrorOut,
        415: ErrorOut,
        422: out.ImportErrorOut,
    },
    openapi_extra=_IMPORT_DOC,
)
def transcript_upload(request: HttpRequest) -> HttpResponse:
    key = _key(request)
    refused = _content_type_refused(request, "multipart/form-data")
    if refused is not None:
        return refused
    try:
        files = uploaded_transcripts(request)
    except ImportFailed as exc:
        return _error(exc.status, exc.message)
    # The form is read now (a body that is no form was refused above).
    live = _LIVE_VALUES.get(request.POST.get("live", "").strip().lower())
    try:
        if live is None:
            return _error(400, "live: must be 1 (a transcript still being written) or 0")
        outcome = transcript_import(
            project=key.project,
            files=[(f.name or "transcript", f) for f in files],
            format=request.POST.get("format") or None,
            session_id=request.POST.get("session_id") or None,
            live=live,
        )
    except ImportFailed as exc:
        # With the transcripts of the request that were stored, when some were.
        return JsonResponse(exc.as_dict(), status=exc.status)
    finally:
        for f in files:
            f.close()
    return JsonResponse(outcome.as_dict(), status=201 if outcome.created else 200)


def _session_or_404(request: HttpRequest, session_id: str) -> Session | JsonResponse:
    session = selectors.session_get(project=_key(request).project, external_id=session_id)
    if session is None:
        return _error(404, f"no session {session_id!r} in this project")
    return session


@api.get(
    "/sessions",
    summary="List sessions, newest first",
    response={200: out.SessionListOut, 400: ErrorOut},
    exclude_unset=True,
)
def sessions_list(
    request: HttpRequest,
    agent: str | None = None,
    mode: str | None = None,
    status: out.SessionStatusName | None = None,
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
    "/sessions/{sessionid:session_id}/steps/{index}",
    summary="One step: contexts before and after, operations (own and inferred), folds, statistics",
    response={200: out.StepOut, 404: ErrorOut},
    exclude_unset=True,
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
    "/sessions/{sessionid:session_id}/diff",
    summary="How the context changed from step I's before to step J's after",
    response={200: out.DiffOut, 404: ErrorOut},
    exclude_unset=True,
    by_alias=True,
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
    "/sessions/{sessionid:session_id}/archive",
    summary="Folded and dropped originals of a session",
    response={200: out.ArchiveOut, 404: ErrorOut},
    exclude_unset=True,
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
    response={200: out.AgentModeTableOut},
    exclude_unset=True,
)
def stats_agents(request: HttpRequest) -> Any:
    return {"rows": agent_mode_table(project_id=_key(request).project.pk)}


def _text_answer_doc(media_type: str, description: str) -> dict[str, Any]:
    """The 200 of a route whose answer is text of another type than JSON."""
    content = {media_type: {"schema": {"type": "string"}}}
    return {"responses": {200: {"description": description, "content": content}}}


@api.get(
    "/export/steps.jsonl",
    summary="Every step as a JSON line (obs, operations, after, reward, outcome), streamed",
    openapi_extra=_text_answer_doc("application/x-ndjson", "One JSON object a line, a step each"),
)
def export_steps(
    request: HttpRequest,
    agent: str | None = None,
    mode: str | None = None,
    status: out.SessionStatusName | None = None,
) -> HttpResponse:
    lines = dataset_jsonl(project=_key(request).project, agent=agent, mode=mode, status=status)
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    as_attachment(response, "steps.jsonl")
    return response


@api.get(
    "/sessions/{sessionid:session_id}/report.md",
    summary="A Markdown report of the session for an incident review",
    response={404: ErrorOut},
    openapi_extra=_text_answer_doc("text/markdown", "The report, in Markdown"),
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
    "/sessions/{sessionid:session_id}/report.json",
    summary="The session report and every step as the read API gives it, streamed",
    response={200: out.ReportOut, 404: ErrorOut},
)
def report_json(request: HttpRequest, session_id: str) -> HttpResponse:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    response = StreamingHttpResponse(report_json_chunks(session), content_type="application/json")
    as_attachment(response, f"{download_name(session_id)}.json")
    return response


@api.get(
    "/sessions/{sessionid:session_id}/control",
    summary="Pending directives for the agent",
    response={200: out.ControlOut, 400: ErrorOut, 404: ErrorOut},
    exclude_unset=True,
)
def control_list(request: HttpRequest, session_id: str, after: str | None = None) -> Any:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    after_pk = 0
    if after:
        parsed = directive_cursor_pk(after)
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


def _models_doc(*models: type[BaseModel]) -> dict[str, Any]:
    """A request body that is one of `models`, each a named schema of the document."""
    refs = [{"$ref": f"#/components/schemas/{m.__name__}"} for m in models]
    defs = {m.__name__: m.model_json_schema() for m in models}
    return _json_body_doc({**(refs[0] if len(refs) == 1 else {"oneOf": refs}), "$defs": defs})


@api.post(
    "/sessions/{sessionid:session_id}/control/{directive_id}/ack",
    summary="Acknowledge a directive as applied or rejected",
    response={200: out.DirectiveOut, 400: ErrorOut, 404: ErrorOut, 409: ErrorOut},
    exclude_unset=True,
    openapi_extra=_models_doc(out.AckIn),
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
    "/sessions/{sessionid:session_id}/directives",
    summary="Create a set_mode or restore directive",
    response={
        201: out.DirectiveOut,
        400: ErrorOut,
        403: ErrorOut,
        404: ErrorOut,
        422: ErrorOut,
    },
    openapi_extra=_models_doc(out.SetModeIn, out.RestoreIn),
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


def _policy_doc(kind: str, **parameters: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["kind", *parameters],
        "additionalProperties": False,
        "properties": {"kind": {"const": kind}, **parameters},
    }


_WINDOW = {"type": "integer", "minimum": KEEP_LAST[0], "maximum": KEEP_LAST[1]}
_POLICY_DOC = {
    "oneOf": [
        _policy_doc("full"),
        _policy_doc("sliding", keep_last=_WINDOW),
        _policy_doc("mask_observations", keep_last=_WINDOW),
        _policy_doc("hybrid", keep_last=_WINDOW),
        _policy_doc(
            "budget",
            max_tokens={"type": "integer", "minimum": MAX_TOKENS[0], "maximum": MAX_TOKENS[1]},
            order={"type": "array", "items": {"enum": list(PARTITIONS)}, "minItems": 1},
        ),
    ]
}


@api.post(
    "/sessions/{sessionid:session_id}/replay",
    summary="The session replayed under another context policy, streamed",
    response={200: out.ReplayOut, 400: ErrorOut, 404: ErrorOut},
    openapi_extra=_json_body_doc(
        {"type": "object", "required": ["policy"], "properties": {"policy": _POLICY_DOC}}
    ),
)
def session_replay(request: HttpRequest, session_id: str) -> Any:
    payload = _json_object(request)
    if isinstance(payload, JsonResponse):
        return payload
    try:
        policy = policy_from_json(payload.get("policy"))
    except InputError as exc:
        return _error(400, str(exc))
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    # Streamed: a session of 10,000 steps starts answering at once, in bounded memory.
    return StreamingHttpResponse(
        replay_json_chunks(session=session, policy=policy), content_type="application/json"
    )


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
    email: str | None = None
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


@api.post(
    "/monitors",
    summary="Create a monitor; its webhook secret is in this answer only",
    response={201: MonitorCreatedOut, 400: ErrorOut},
    openapi_extra=_json_body_doc(
        {
            "type": "object",
            "required": ["name", "metric", "threshold"],
            "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": TEXT_LIMITS["name"]},
                "metric": {"enum": list(METRICS)},
                "threshold": {"type": "number", "minimum": 0},
                "window_minutes": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": WINDOW_MINUTES_MAX,
                    "default": 60,
                },
                "filters": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "agent": {"type": "string", "maxLength": TEXT_LIMITS["agent"]},
                        "mode": {"type": "string", "maxLength": TEXT_LIMITS["mode"]},
                    },
                },
                "webhook_url": {
                    "type": "string",
                    "format": "uri",
                    "maxLength": TEXT_LIMITS["webhook_url"],
                },
                "email": {"type": "string", "format": "email", "maxLength": TEXT_LIMITS["email"]},
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
def alerts_list(request: HttpRequest, state: out.AlertState | None = None) -> Any:
    alerts = monitor_selectors.alert_list(project=_key(request).project, state=state)
    return {"alerts": monitor_selectors.alerts_with_deliveries(alerts[:500])}


# Session ids may hold slashes (`team/agent-7`, sent as `team%2Fagent-7`, which the
# server decodes before routing): every route takes the id as a path, and this one,
# which would otherwise swallow `<id>/steps/3` and the rest, is declared last.
@api.get(
    "/sessions/{sessionid:session_id}",
    summary="One session with its aggregates",
    response={200: out.SessionOut, 404: ErrorOut},
    exclude_unset=True,
)
def session_detail(request: HttpRequest, session_id: str) -> Any:
    session = _session_or_404(request, session_id)
    if isinstance(session, JsonResponse):
        return session
    return selectors.session_as_dict(session)


def _json_object(request: HttpRequest) -> dict[str, Any] | JsonResponse:
    try:
        payload = json_body(request.body or b"{}")
    except BodyError as exc:
        return _error(exc.status, exc.message)
    if not isinstance(payload, dict):
        return _error(400, "body must be a JSON object")
    return payload
