"""POST /v1/traces: OTLP/HTTP (contract v1.1, "OTLP/HTTP ingest").

Answers as the OTLP/HTTP specification says: 200 with an ExportTraceServiceResponse
in the request's encoding (protobuf or the OTLP JSON mapping), its partial_success
counting the refused spans; errors with a google.rpc.Status in that encoding; 429
and 503, the only answers an exporter retries, with Retry-After.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
from typing import Any

import psycopg
from django.conf import settings
from django.db import OperationalError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from contextview.core.textsafe import text_problem
from contextview.ingest.body import OTLP_ENCODINGS, BodyError, json_charset_refused, request_body
from contextview.ingest.ratelimit import rate_limit_check
from contextview.ingest.traces import ServerBusy, traces_ingest
from contextview.projects.selectors import apikey_authenticate

log = logging.getLogger(__name__)

PROTOBUF = "application/x-protobuf"
# Where an OTLP/HTTP exporter sends spans, given the server's address as its endpoint.
OTLP_PATH = "/v1/traces"
JSON = "application/json"
# Seconds an exporter is asked to wait when the server cannot take more now.
RETRY_AFTER = 1


def _answer(status: int, message: Any, *, as_json: bool, **headers: str) -> HttpResponse:
    if as_json:
        body = json_format.MessageToJson(message, indent=None).encode()
    else:
        body = message.SerializeToString()
    response = HttpResponse(body, status=status, content_type=JSON if as_json else PROTOBUF)
    for name, value in headers.items():
        response[name] = value
    return response


def _error(status: int, code: int, text: str, *, as_json: bool, **headers: str) -> HttpResponse:
    return _answer(status, status_pb2.Status(code=code, message=text), as_json=as_json, **headers)


@csrf_exempt
@require_POST
def otlp_traces(request: HttpRequest) -> HttpResponse:
    content_type = (request.META.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
    as_json = content_type == JSON
    scheme, _, secret = (request.META.get("HTTP_AUTHORIZATION") or "").partition(" ")
    key = apikey_authenticate(secret=secret.strip()) if scheme.lower() == "bearer" else None
    if key is None:
        return _error(
            401,
            code_pb2.UNAUTHENTICATED,
            "missing or bad project key: send the header Authorization: Bearer <key>",
            as_json=as_json,
        )
    if not key.can_write:
        return _error(
            403, code_pb2.PERMISSION_DENIED, "this key may read but not ingest", as_json=as_json
        )
    if content_type not in (PROTOBUF, JSON):
        return _error(
            415,
            code_pb2.INVALID_ARGUMENT,
            f"Content-Type must be {PROTOBUF} or {JSON}, not {content_type!r}",
            as_json=True,
        )
    charset = json_charset_refused(request.META.get("CONTENT_TYPE") or "") if as_json else None
    if charset is not None:
        return _error(415, code_pb2.INVALID_ARGUMENT, charset, as_json=True)
    wait = rate_limit_check(key_prefix=key.prefix)
    if wait is not None:
        return _error(
            429,
            code_pb2.RESOURCE_EXHAUSTED,
            "rate limit exceeded; retry later",
            as_json=as_json,
            **{"Retry-After": str(wait)},
        )
    try:
        body = request_body(request, settings.OTLP_MAX_BYTES, OTLP_ENCODINGS)
    except BodyError as exc:
        return _error(exc.status, code_pb2.INVALID_ARGUMENT, exc.message, as_json=as_json)
    try:
        export, unread = _decode_json(body) if as_json else (_decode_protobuf(body), [])
    except ValueError as exc:
        return _error(400, code_pb2.INVALID_ARGUMENT, str(exc), as_json=as_json)
    try:
        outcome = traces_ingest(project=key.project, request=export, refused=unread)
    except ServerBusy:
        return _error(
            503,
            code_pb2.UNAVAILABLE,
            f"the server is storing {settings.OTLP_MAX_CONCURRENT} exports already; retry later",
            as_json=as_json,
            **{"Retry-After": str(RETRY_AFTER)},
        )
    except (OperationalError, psycopg.OperationalError) as exc:
        # A session held by another request past the lock timeout, or the database
        # unreachable: nothing was stored, and the exporter tries again.
        log.warning("OTLP export answered 503: %s", exc)
        return _error(
            503,
            code_pb2.UNAVAILABLE,
            "the server cannot take this export now; retry later",
            as_json=as_json,
            **{"Retry-After": str(RETRY_AFTER)},
        )
    answer = ExportTraceServiceResponse()
    if outcome.rejected or outcome.errors:
        answer.partial_success.rejected_spans = outcome.rejected
        answer.partial_success.error_message = outcome.error_message
    return _answer(200, answer, as_json=as_json)


def _decode_protobuf(body: bytes) -> ExportTraceServiceRequest:
    export = ExportTraceServiceRequest()
    try:
        export.ParseFromString(body)
    except DecodeError as exc:
        raise ValueError(f"body is not an ExportTraceServiceRequest in protobuf: {exc}") from None
    return export


# OTLP JSON writes trace and span ids as hex, where protobuf's JSON mapping has base64.
_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


def _ids_to_base64(node: dict[str, Any], where: str) -> None:
    for name in _ID_FIELDS:
        value = node.get(name)
        if isinstance(value, str) and value:
            try:
                node[name] = base64.b64encode(bytes.fromhex(value)).decode()
            except ValueError:
                raise ValueError(f"{where}.{name}: {value!r} is not hex") from None


def _span_ids_to_base64(span: dict[str, Any], where: str) -> None:
    """A span's ids and its links', as protobuf's JSON mapping reads them."""
    _ids_to_base64(span, where)
    for k, link in enumerate(_items(span, "links", "links")):
        if isinstance(link, dict):
            _ids_to_base64(link, f"{where}.links[{k}]")


_SCOPES = ("scopeSpans", "scope_spans")


def _items(node: dict[str, Any], camel: str, snake: str) -> list[Any]:
    found = node.get(camel, node.get(snake))
    return found if isinstance(found, list) else []


# A surrogate code point left in decoded JSON: one whose \u escape had no pair (a
# pair decodes to the one character it stands for).
_SURROGATE = re.compile("[\ud800-\udfff]")


def _unpaired(node: Any, where: str, *, skip: tuple[str, ...] = ()) -> str | None:
    """Why `node` (a decoded JSON value at `where`) cannot be read into the protobuf
    message, which holds only valid Unicode: the path of a string of it with an
    unpaired surrogate, or None. Its fields `skip` are not looked into. Walked without
    recursion: the JSON may nest as deep as its decoder allows."""
    stack: list[tuple[Any, str]] = [(node, where)]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            found = _SURROGATE.search(value)
            if found is not None:
                return f"{path}: {text_problem(found.group())}"
        elif isinstance(value, dict):
            stack.extend(
                (v, f"{path}.{k}") for k, v in value.items() if path != where or k not in skip
            )
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{k}]") for k, v in enumerate(value))
    return None


def _span_name(span: Any, where: str) -> str:
    """A span as the answer names it: by its id as sent, else by where it stands."""
    span_id = span.get("spanId", span.get("span_id")) if isinstance(span, dict) else None
    return f"span {span_id}" if isinstance(span_id, str) and span_id else where


def _decode_json(body: bytes) -> tuple[ExportTraceServiceRequest, list[str]]:
    """The export, and why each span left out of it was: a span refused costs only
    itself, as one the decoder refuses later does.

    Left out here: a span whose ids are not hex, and one holding a string with an
    unpaired surrogate, which protobuf cannot hold (as one whose JSON text attribute
    holds one is refused later); one in a resource or scope that holds such a string
    goes with it.
    """
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("body must be a JSON object with resourceSpans")
    # A surrogate can only come from a \\u escape (raw, it is no UTF-8): without one in
    # the body, nothing is walked for it.
    walk = b"\\ud" in body or b"\\uD" in body
    refused: list[str] = []
    for r, resource in enumerate(_items(data, "resourceSpans", "resource_spans")):
        if not isinstance(resource, dict):
            continue
        where_r = f"resourceSpans[{r}]"
        bad_resource = _unpaired(resource, where_r, skip=_SCOPES) if walk else None
        for s, scope in enumerate(_items(resource, *_SCOPES)):
            if not isinstance(scope, dict):
                continue
            where_s = f"{where_r}.scopeSpans[{s}]"
            around = bad_resource or (_unpaired(scope, where_s, skip=("spans",)) if walk else None)
            spans = _items(scope, "spans", "spans")
            kept = []
            for i, span in enumerate(spans):
                where = f"{where_s}.spans[{i}]"
                problem = around or (_unpaired(span, where) if walk else None)
                if problem is not None:
                    refused.append(f"{_span_name(span, where)}: {problem}")
                    continue
                if isinstance(span, dict):
                    try:
                        _span_ids_to_base64(span, where)
                    except ValueError as exc:
                        refused.append(str(exc))
                        continue
                kept.append(span)
            if len(kept) < len(spans):
                spans[:] = kept
            if around is not None:
                scope.clear()  # its spans refused, what is left cannot be read
        if bad_resource is not None:
            resource.clear()
    export = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(data, export, ignore_unknown_fields=True)
    except (json_format.ParseError, binascii.Error, RecursionError) as exc:
        raise ValueError(f"body is not an ExportTraceServiceRequest in OTLP JSON: {exc}") from None
    return export, refused
