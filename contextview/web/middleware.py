from __future__ import annotations

import time
from collections.abc import Callable

from django.conf import settings
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    JsonResponse,
    QueryDict,
)

# Agent content is untrusted: no inline script or style may run, whatever it carries.
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.setdefault("Content-Security-Policy", POLICY)
        response.setdefault("X-Content-Type-Options", "nosniff")
        return response


def is_machine_path(path: str) -> bool:
    """Whether `path` is one that programs call (the JSON API, OTLP), which answer
    errors as JSON ``{"error": ...}``, not as pages."""
    return path.startswith(("/api/", "/v1/"))


class MachineErrorsMiddleware:
    """A 405 of a path programs call (a method a route does not take), which Django and
    django-ninja answer in bare text, becomes ``{"error": ...}`` saying what was asked,
    as every other error of the API is, its Allow header kept. (A route that does not
    exist is the 404 handler's: ``web.views.not_found``.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or not is_machine_path(request.path_info):
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        message = f"{request.method} is not allowed on {request.path_info}"
        allowed = response.get("Allow")
        if allowed:
            message += f" (allowed: {allowed})"
        answer = JsonResponse({"error": message}, status=405)
        if allowed:
            answer["Allow"] = allowed
        return answer


class HeadAsGetMiddleware:
    """HEAD on a path programs call is answered as GET is, without the body (the server
    leaves it out): a client checking that a session or a report exists asks for its
    headers only. django-ninja routes a method only to what declares it, so HEAD was a
    405 on every read of the API. The request says HEAD again once answered, so a 405
    (a route without GET) names the method that was asked."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method != "HEAD" or not is_machine_path(request.path_info):
            return self.get_response(request)
        request.method = "GET"
        try:
            response = self.get_response(request)
        finally:
            request.method = "HEAD"
        if response.streaming:
            # Not built only to be dropped: a streamed read (an export, a replay) would
            # still run to its end for an answer that carries no body.
            response.streaming_content = iter(())
        return response


NUL = "\x00"


class RefuseNulMiddleware:
    """Answers 400, naming the parameter, when a path or query parameter (or a field of
    a page's form) holds a NUL.

    PostgreSQL text cannot hold the character, so such a value would otherwise fail
    deep inside a query (a 500). No session id, filter or cursor has one legitimately.
    Runs once the URL is resolved, so a path parameter is named as the route names it.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self,
        request: HttpRequest,
        view_func: Callable[..., HttpResponse],
        view_args: tuple[object, ...],
        view_kwargs: dict[str, object],
    ) -> HttpResponse | None:
        api = request.path_info.startswith("/api/")
        named = [name for name, value in view_kwargs.items() if NUL in str(value)]
        named += _named(request.GET)
        if not api and request.method == "POST":
            named += _named(request.POST)  # the pages' forms; the API reads its own bodies
        if not named:
            return None
        name = named[0] if NUL not in named[0] else repr(named[0])
        message = f"{name}: must not contain a NUL character (%00)"
        if api:
            return JsonResponse({"error": message}, status=400)
        return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")


def _named(params: QueryDict) -> list[str]:
    return [name for name, values in params.lists() if NUL in name or NUL in "".join(values)]


class DrainUnreadBodyMiddleware:
    """Reads and discards what is left of a request body the app answered without
    reading (a bad key on a 20 MiB export, a refused upload), before the answer goes.

    gunicorn closes such a connection with the body still unread, and the kernel then
    resets it: nginx, still sending the body it buffered, or a client that sends its
    whole body before reading, gets a broken connection (nginx answers 502) instead of
    the app's 401 or 400. A body past every limit of the app is left alone: it is
    answered 413 without being read, as the contract says, and the reset is expected.
    The reading stops after DRAIN_SECONDS, so a client trickling its body cannot hold
    the thread.
    """

    DRAIN_SECONDS = 10.0
    CHUNK = 256 * 1024

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.cap = max(
            settings.INGEST_MAX_BYTES, settings.OTLP_MAX_BYTES, settings.IMPORT_MAX_BYTES
        )

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 413:
            self._drain(request)
        return response

    def _drain(self, request: HttpRequest) -> None:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or "0")
        except ValueError:
            return
        stream = getattr(request, "_stream", None)
        if not 0 < length <= self.cap or stream is None or hasattr(request, "_body"):
            return
        deadline = time.monotonic() + self.DRAIN_SECONDS
        try:
            while stream.read(self.CHUNK) and time.monotonic() < deadline:
                pass
        except OSError:
            pass  # the client went away; nothing is owed to it
