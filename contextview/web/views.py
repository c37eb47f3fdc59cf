"""The dashboard: thin views over contextview.web.selectors and the sessions services.

A page renders its template; asked by htmx, the same view renders only the
fragment that changed (a template of its own under ``templates/session/``, which
the page template includes). Every view starts from the signed-in user's
memberships: a session of a project the user is not in is a 404, a directive or
key change by a user without the role for it a 403.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, RequestDataTooBig, TooManyFieldsSent
from django.db import connection
from django.db.models import Max
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotFound,
    HttpResponseServerError,
    JsonResponse,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.middleware import HtmxDetails

from contextview.core.errors import InputError
from contextview.core.monitors import METRICS
from contextview.core.needs import in_view
from contextview.core.numbers import signed_value
from contextview.core.svgchart import PARTITION_COLORS
from contextview.ingest.imports import ImportFailed, transcript_import
from contextview.ingest.uploads import guard_upload, uploaded_transcripts
from contextview.monitors import selectors as monitors
from contextview.monitors.models import Alert, Monitor
from contextview.monitors.selectors import alerts_firing_count
from contextview.monitors.services import CreatedMonitor, monitor_create, monitor_delete
from contextview.postmortems import selectors as postmortems
from contextview.postmortems.downloads import as_attachment, download_name
from contextview.postmortems.export import sessions_jsonl
from contextview.postmortems.models import Annotation, Incident
from contextview.postmortems.reports import report_json_chunks, report_markdown, session_report
from contextview.postmortems.services import (
    NotAllowed,
    annotation_create,
    annotation_delete,
    annotation_update,
    incident_mark,
    incident_reopen,
    incident_resolve,
)
from contextview.projects.models import ApiKey, Membership
from contextview.projects.services import (
    ROLES,
    IssuedKey,
    apikey_create,
    apikey_revoke,
    membership_add,
    membership_remove,
    membership_role_change,
)
from contextview.sessions.models import Directive, Session, Step
from contextview.sessions.selectors import rebilled_results, session_get, step_get
from contextview.sessions.services import directive_create
from contextview.stats.selectors import agent_mode_table
from contextview.web import selectors as web
from contextview.web.middleware import is_machine_path
from contextview.web.report_html import report_html

STEPS_PER_PAGE = 100


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _fragment(request: HtmxHttpRequest) -> bool:
    """Whether to answer with a fragment: an htmx request that is not restoring history."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def _int(value: str | None) -> int | None:
    """The whole number a page's address or form carries (a step, a row, how many a page
    passed over), or None: ASCII digits a bigint holds, as an OFFSET must be."""
    return signed_value((value or "").strip())


def _session_or_404(request: HttpRequest, pk: int) -> tuple[Session, web.Access]:
    found = web.session_for_user(user=request.user, pk=pk)
    if found is None:
        raise Http404("no such session")
    session, role = found
    return session, web.Access(project=session.project, role=role)


def _step_or_404(session: Session, index: int) -> Step:
    step = step_get(session=session, index=index)
    if step is None:
        # Said with where the session ends: a link to a step past it (a guessed index,
        # a session still running) then reads as a step not recorded yet.
        last = Step.objects.filter(session=session).aggregate(last=Max("index"))["last"]
        ends = "no step recorded yet" if last is None else f"its last step is {last}"
        raise Http404(f"{session.external_id} has no step {index} ({ends})")
    return step


def _page(request: HttpRequest, **context: Any) -> dict[str, Any]:
    """A page's context, with what every page needs: the user's projects for the
    switcher (``accesses``, read when not given), and the current one (from ``access``)."""
    access: web.Access | None = context.get("access")
    if "accesses" not in context:
        context["accesses"] = web.user_access(user=request.user)
    return {
        "project": access.project if access else None,
        "firing_alerts": alerts_firing_count(project_ids=[access.project.pk]) if access else 0,
        **context,
    }


def _current_access(
    request: HttpRequest, accesses: list[web.Access], asked: str | None = None
) -> web.Access | None:
    """The project a page without one in its address is about: the one `asked` for,
    else the one the user last worked in (the sessions list keeps it), else their first."""
    session = getattr(request, "session", None)
    chosen = asked or (session.get("project") if session is not None else None)
    return web.access_for(accesses, chosen) or (accesses[0] if accesses else None)


def _page_of_no_project(request: HttpRequest, **context: Any) -> dict[str, Any]:
    """`_page` for a page of no project of its own (a 404, a refusal): its top bar still
    leads back to the project the user was working in."""
    accesses = web.user_access(user=request.user)
    return _page(request, accesses=accesses, access=_current_access(request, accesses), **context)


def _project_or_404(request: HttpRequest, slug: str) -> web.Access:
    access = web.access_for(web.user_access(user=request.user), slug)
    if access is None:
        raise Http404("no such project")
    return access


def _chart_meta(session: Session, directives: list[web.DirectiveRow], **extra: Any) -> str:
    """The occupancy chart's settings, as JSON for a data- attribute."""
    max_tokens, limit = web.session_budget(session)
    return json.dumps(
        {
            "budget": {"max_tokens": max_tokens, "limit": limit},
            "lines": web.occupancy_lines(web.limit_name(session)),
            "colors": PARTITION_COLORS,
            **extra,
            "directives": [
                {"step": d.applied_step, "label": d.summary, "by": d.created_by}
                for d in directives
                if d.applied_step is not None
            ],
        }
    )


def _reason(exception: Exception) -> str:
    """What a view said when it raised Http404 or PermissionDenied ("" if nothing)."""
    return exception.args[0] if exception.args and isinstance(exception.args[0], str) else ""


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Our 404 page: what was asked for, and why it is not there when a view said. A
    path programs call gets ``{"error"}`` instead, which needs no template."""
    if is_machine_path(request.path_info):
        # The API's own views answer their 404s; this is a route that does not exist.
        return JsonResponse({"error": f"no such endpoint: {request.path_info}"}, status=404)
    context = _page_of_no_project(request, request_path=request.path, reason=_reason(exception))
    try:
        return render(request, "404.html", context, status=404)
    except Exception:  # noqa: BLE001 - a 404 must not become a 500 (static files not collected)
        return HttpResponseNotFound("<!doctype html><title>Not found</title><h1>Not found</h1>")


def _refusal(
    request: HttpRequest, *, title: str, reason: str, hint: str = "", status: int = 403
) -> HttpResponse:
    """A 403 (or 400) as the asker can show it: JSON to a script that asked for JSON, the
    reason in plain text to htmx (said above the page it was asked from), else a page of
    the site with a way back."""
    if "application/json" in request.headers.get("Accept", ""):
        return JsonResponse({"error": reason}, status=status)
    if request.headers.get("HX-Request"):
        return HttpResponse(reason, status=status, content_type="text/plain")
    referer = request.headers.get("Referer", "")
    back = referer if url_has_allowed_host_and_scheme(referer, {request.get_host()}) else ""
    context = _page_of_no_project(request, title=title, reason=reason, hint=hint, back=back)
    return render(request, "403.html", context, status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Our 400 page: a request Django would not read (a form too large, too many fields),
    said plainly where Django's own page said only "Bad Request"."""
    if isinstance(exception, RequestDataTooBig):
        reason = (
            f"The form sent more than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes, "
            "the most this site reads from one form."
        )
    elif isinstance(exception, TooManyFieldsSent):
        reason = (
            f"The form sent more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS:,} fields, "
            "the most this site reads from one form."
        )
    else:
        # Say no more: a bad Host header, say, is not the asker's to be told about, and
        # this request's host cannot be read for a page.
        return HttpResponse("The request could not be read.", status=400, content_type="text/plain")
    if is_machine_path(request.path_info):
        return JsonResponse({"error": reason}, status=400)
    return _refusal(request, title="Not sent", reason=reason, status=400)


def forbidden(request: HttpRequest, exception: Exception) -> HttpResponse:
    """Our 403 page: a user without the role for what was asked."""
    reason = _reason(exception) or "Your role here does not allow this."
    return _refusal(request, title="Not allowed", reason=reason)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A form sent without its page's current security token (CSRF_FAILURE_VIEW)."""
    return _refusal(
        request,
        title="Not sent",
        reason="The form was refused: it came without this site's current security token.",
        hint="Its page was likely opened before you last signed in, or cookies are off for "
        "this site: reload the page and send it again.",
    )


def server_error(request: HttpRequest) -> HttpResponse:
    """Our 500 page, without the request's context (which may be what failed); plain
    HTML if even the template cannot be rendered."""
    try:
        html = render_to_string("500.html")
    except Exception:  # noqa: BLE001 - the last resort must not fail
        html = "<!doctype html><title>Server error</title><h1>Something went wrong</h1>"
    return HttpResponseServerError(html)


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})


# --- sessions list ---------------------------------------------------------------------


@login_required
@require_GET
def sessions_page(request: HtmxHttpRequest) -> HttpResponse:
    accesses = web.user_access(user=request.user)
    access = _current_access(request, accesses, asked=request.GET.get("project"))
    if access is not None:
        request.session["project"] = access.project.slug
    filters, errors = web.SessionFilters.parse(request.GET)
    sessions: list[Session] = []
    next_cursor = None
    agents: list[str] = []
    modes: list[str] = []
    hits: dict[int, web.SearchHit] = {}
    alert: Alert | None = None
    if access is not None:
        sessions, next_cursor = web.session_page(
            project=access.project, filters=filters, cursor=request.GET.get("cursor")
        )
        agents = web.project_agents(project=access.project)
        modes = web.project_modes(project=access.project)
        hits = web.search_hits(project=access.project, sessions=sessions, q=filters.q)
        if filters.alert:
            found = Alert.objects.filter(project=access.project, pk=int(filters.alert))
            alert = found.select_related("monitor").first()
            if alert is None:
                errors.append(f"alert: there is no alert {filters.alert} in this project")
    return render(
        request,
        "sessions.html",
        {
            "accesses": accesses,
            "access": access,
            "project": access.project if access else None,
            "sessions": [(s, hits.get(s.pk)) for s in sessions],
            "next_cursor": next_cursor,
            "paged": bool(request.GET.get("cursor")),
            "filters": filters,
            "errors": errors,
            "alert": alert,
            "agents": agents,
            "statuses": web.LIST_STATUSES,
            "modes": modes,
            "flags": web.FLAGS,
            "sorts": web.SORTS,
            "export_query": urlencode(filters.as_query()),
        },
        status=400 if errors else 200,
    )


def _sessions_list(access: web.Access) -> HttpResponse:
    """To the sessions list of the project, where its import form is."""
    return redirect(f"{reverse('sessions')}?project={access.project.slug}")


@csrf_exempt
@login_required
@require_http_methods(["GET", "POST"])
def import_upload(request: HttpRequest, slug: str) -> HttpResponse:
    """Transcripts dropped on the sessions list, imported as POST /api/v1/import does.

    Answers JSON to the page's script (which shows the upload's progress) and
    redirects back to the list when the form was sent without it. The CSRF check
    reads the form, so it runs only once the upload's size guard is in place
    (Django's way to change upload handlers in a view). Opened as an address (the
    bar after a form sent without the script), it leads to the list's import form.
    """
    if request.method == "GET":
        access = _project_or_404(request, slug)
        return _sessions_list(access)
    guard_upload(request)
    return _import_upload(request, slug)


@csrf_protect
def _import_upload(request: HttpRequest, slug: str) -> HttpResponse:
    access = _project_or_404(request, slug)
    wants_json = "application/json" in request.headers.get("Accept", "")
    if not access.can_direct:
        status, body = 403, {"error": "importing needs an editor or admin of this project"}
    else:
        try:
            files = uploaded_transcripts(request)
            try:
                outcome = transcript_import(
                    project=access.project, files=[(f.name or "transcript", f) for f in files]
                )
            finally:
                for f in files:
                    f.close()
            status, body = (201 if outcome.created else 200), outcome.as_dict()
        except ImportFailed as exc:
            status, body = exc.status, exc.as_dict()
    if wants_json:
        return JsonResponse(body, status=status)
    if status >= 400:
        return HttpResponse(body["error"], status=status, content_type="text/plain")
    return _sessions_list(access)


# --- one session -----------------------------------------------------------------------


def _steps_window(
    request: HttpRequest, session: Session, around: int | None = None
) -> dict[str, Any]:
    """The page of the step list the request asks for; with `around` (a step opened
    directly) or ``?step=N`` (a step the page opened that its list does not show),
    the page that shows that step."""
    after, before = _int(request.GET.get("after")), _int(request.GET.get("before"))
    if around is None:
        around = _int(request.GET.get("step"))
    if around is not None and after is None and before is None and around >= STEPS_PER_PAGE:
        after = around - STEPS_PER_PAGE // 2
    return _window(session, after=after, before=before)


def _window(
    session: Session,
    *,
    after: int | None = None,
    before: int | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """A page of the step list, and the live tail's state for it (`version`: the
    session's ``_live_version`` when the caller worked it out already)."""
    rows, has_prev, has_next = web.step_rows(
        session=session, after=after, before=before, limit=STEPS_PER_PAGE
    )
    start = rows[0].index - 1 if rows else None
    return {
        "steps": rows,
        "steps_prev": rows[0].index if rows and has_prev else None,
        "steps_next": rows[-1].index if rows and has_next else None,
        **_live(session, start=start, tail=not has_next, version=version),
    }


def _live_version(session: Session) -> str:
    """What a watching page has seen of the session: a change means redraw. Besides
    its steps and statistics: the directives it was sent and those answered, whether it
    went stale (which expires those pending), and its mode, which the agent may change
    without a step."""
    return ".".join(
        str(v)
        for v in (session.step_count, session.stats_steps_done, session.stats_status,
                  session.status, session.mode, *web.directives_answered(session=session),
                  web.session_liveness(session).stale)
    )  # fmt: skip


def _live(
    session: Session, *, start: int | None, tail: bool, version: str | None = None
) -> dict[str, Any]:
    """The live tail's state and the address it polls: the list shown starts after
    `start`; at the list's end (`tail`), new steps join it as they arrive."""
    query = {"v": version or _live_version(session), "tail": "1" if tail else ""}
    if start is not None:
        query["after"] = str(start)
    return {
        "live": web.session_liveness(session),
        "live_url": f"{reverse('web-live', args=[session.pk])}?{urlencode(query)}",
        "live_every": settings.LIVE_POLL_SECONDS,
        "stale_after": web.stale_after(),
    }


def _session_page(
    request: HtmxHttpRequest,
    session: Session,
    access: web.Access,
    *,
    window: dict[str, Any],
    **step: Any,
) -> HttpResponse:
    """The whole session page: header, chart, step list and panels; `step` is the
    context of the step shown open in the step panel, if any."""
    rows, reported_modes = web.session_chart(session=session)
    directives = web.session_directives(session=session)
    step_url = reverse("web-step", args=[session.pk, 0])[: -len("0/")]
    modes = list(dict.fromkeys([*web.MODES, *reported_modes]))
    return render(
        request,
        "session.html",
        _page(
            request,
            access=access,
            session=session,
            # JSON in data- attributes (escaped as any attribute): htmx drops
            # <script> elements from swapped content, and the CSP runs none.
            chart_meta=_chart_meta(session, directives, step_url=step_url),
            chart_rows=rows,
            incident=Incident.objects.filter(session=session).first(),
            severities=web.SEVERITIES,
            annotations=web.annotation_views(session=session, user=request.user),
            labels=web.LABELS,
            recent=web.recent_session_ids(project=session.project, limit=100),
            family=web.session_family(session=session),
            # Its re-billed results by what they hold, as the reports name them.
            rebilled=rebilled_results(session),
            modes=modes,
            reported_modes=reported_modes,
            directives=directives,
            flag_help=web.FLAG_HELP,
            # With no step open, the panel says where to look first: its first flagged
            # step (one indexed query), beside what the aggregates say was lost.
            first_flagged=None if step else web.first_flagged_step(session=session),
            **window,
            **step,
        ),
    )


@login_required
@require_GET
def session_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session, access = _session_or_404(request, pk)
    window = _steps_window(request, session)
    if _fragment(request) and request.htmx.target == "steps":
        return render(request, "session/_steps.html", {"session": session, **window})
    return _session_page(request, session, access, window=window)


@login_required
@require_GET
def live_tail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """A running session's page asking what is new (every LIVE_POLL_SECONDS).

    Nothing new: only the live bar, saying how long the agent has been silent.
    New steps or statistics, a directive sent or answered, a new mode: the step list
    (grown at its end when the page showed the end), the chart and flags, the step
    count, what the session was asked (its first steps may say it), the mode, the
    directives panel, and the links of the step open in the
    panel (`open`, sent by the page), whose next step may just have arrived, and, to
    a page that has shown no step yet (`first`), the compare form; the header is
    redrawn by the page when the session ends.
    """
    session, _ = _session_or_404(request, pk)
    version = _live_version(session)
    if request.GET.get("v") == version:
        start = _int(request.GET.get("after"))
        tail = bool(request.GET.get("tail"))
        response = render(
            request,
            "session/_live.html",
            {"session": session, **_live(session, start=start, tail=tail, version=version)},
        )
        response["HX-Retarget"] = "#live-tail"
        response["HX-Reswap"] = "outerHTML"
        return response
    window = _window(session, after=_int(request.GET.get("after")), version=version)
    if request.GET.get("tail") and window["steps_next"] is not None:
        # The end was in view and the list has outgrown its page: show the last page.
        last = web.last_step_index(session=session)
        window = _window(session, before=last + 1, version=version)
    rows, _ = web.session_chart(session=session)
    directives = web.session_directives(session=session)
    step_url = reverse("web-step", args=[session.pk, 0])[: -len("0/")]
    opened = _int(request.GET.get("open"))
    response = render(
        request,
        "session/_live_update.html",
        {
            "session": session,
            "chart_meta": _chart_meta(session, directives, step_url=step_url),
            "chart_rows": rows,
            "flag_help": web.FLAG_HELP,
            "opened": opened,
            "first": bool(request.GET.get("first")),
            "n": None if opened is None else web.step_neighbors(session=session, index=opened),
            "directives": directives,
            **window,
        },
    )
    if session.status != Session.Status.RUNNING:
        response["HX-Trigger"] = "session-ended"
    return response


@login_required
@require_GET
def step_page(request: HtmxHttpRequest, pk: int, index: int) -> HttpResponse:
    """A step in the step panel (asked by htmx), or, loaded directly, reloaded or
    shared, the whole session page with that step open."""
    session, access = _session_or_404(request, pk)
    step = _step_or_404(session, index)
    return _step_response(request, session, access, step, fold=request.GET.get("fold", ""))


def _step_response(
    request: HtmxHttpRequest, session: Session, access: web.Access, step: Step, *, fold: str
) -> HttpResponse:
    """The step panel, or the whole session page with the step open; with `fold` (a
    result id), that fold's originals open in it."""
    index = step.index
    view = web.step_view(session=session, step=step)
    notes = web.annotation_views(session=session, user=request.user, step_index=index)
    context: dict[str, Any] = {
        "session": session,
        "access": access,
        "view": view,
        # The step's permalink, reversed once: each message's link adds its anchor.
        "step_link": permalink_path(session, step.index),
        "annotations": notes,
        "noted": {a.annotation.message_id for a in notes if a.annotation.message_id},
        "labels": web.LABELS,
    }
    if fold:
        # A fold's address: the step, with that fold's originals open.
        context["fold"] = {
            "result_id": fold,
            "originals": web.fold_originals(session=session, step=step, result_id=fold),
        }
    if _fragment(request):
        return render(request, "session/_step.html", context)
    return _session_page(
        request,
        session,
        access,
        window=_steps_window(request, session, around=index),
        view=view,
        step_link=context["step_link"],
        step_annotations=notes,
        noted=context["noted"],
        fold=context.get("fold"),
    )


@login_required
@require_GET
def compare_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Two steps compared: in the step panel (asked by htmx), or, loaded directly or
    reloaded, the whole session page with the comparison open in it."""
    session, access = _session_or_404(request, pk)
    start_index, end_index = _int(request.GET.get("from")), _int(request.GET.get("to"))
    view = None
    error = ""
    if start_index is not None and end_index is not None:
        start = step_get(session=session, index=start_index)
        end = step_get(session=session, index=end_index)
        if start is None or end is None:
            missing = start_index if start is None else end_index
            error = f"This session has no step {missing}."
        else:
            view = web.steps_compare(session=session, start=start, end=end)
    compare = {"view": view, "error": error, "start": start_index, "end": end_index}
    if _fragment(request):
        return render(request, "session/_compare.html", {"session": session, "compare": compare})
    around = end_index if view is not None else None
    return _session_page(
        request, session, access, window=_steps_window(request, session, around=around),
        compare=compare,
    )  # fmt: skip


# --- rows of a long context, on demand ---------------------------------------------------


def _rows_range(request: HttpRequest) -> tuple[int, int]:
    start, end = _int(request.GET.get("start")), _int(request.GET.get("end"))
    if start is None or end is None or not 0 <= start < end:
        raise Http404("start and end must be row numbers, start before end")
    return start, end


def _rows_response(request: HtmxHttpRequest, session: Session, access: web.Access,
                   rows: list[web.Row], **context: Any) -> HttpResponse:  # fmt: skip
    start, end = _rows_range(request)
    context = {"session": session, "access": access,
               "groups": web.row_groups(rows, start, end, first_view=False), **context}  # fmt: skip
    if _fragment(request):
        return render(request, "session/_diff_groups.html", context)
    return render(
        request,
        "fragment_page.html",
        _page(request, fragment="session/_diff_rows.html", title="Messages", **context),
    )


@login_required
@require_GET
def step_rows(request: HtmxHttpRequest, pk: int, index: int) -> HttpResponse:
    """Rows of a step's diff that its first view left out (a long run, a long context)."""
    session, access = _session_or_404(request, pk)
    step = _step_or_404(session, index)
    view = web.step_view(session=session, step=step)
    notes = web.annotation_views(session=session, user=request.user, step_index=index)
    return _rows_response(
        request, session, access, view.rows, step=step,
        rows_url=reverse("web-step-rows", args=[session.pk, index]) + "?",
        step_link=permalink_path(session, index),
        noted={a.annotation.message_id for a in notes if a.annotation.message_id},
    )  # fmt: skip


@login_required
@require_GET
def compare_rows(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Rows of a comparison that its first view left out."""
    session, access = _session_or_404(request, pk)
    start, end = _int(request.GET.get("from")), _int(request.GET.get("to"))
    first = step_get(session=session, index=start) if start is not None else None
    last = step_get(session=session, index=end) if end is not None else None
    if first is None or last is None:
        raise Http404("no such steps")
    view = web.steps_compare(session=session, start=first, end=last)
    query = urlencode({"from": start, "to": end})
    return _rows_response(
        request, session, access, view.rows, step=None,
        rows_url=f"{reverse('web-compare-rows', args=[session.pk])}?{query}&",
    )  # fmt: skip


# --- folded originals and restore ------------------------------------------------------


@login_required
@require_GET
def fold_page(request: HtmxHttpRequest, pk: int, index: int) -> HttpResponse:
    """A fold's originals: in the fold panel of the open step (asked by htmx for it),
    or the step with the fold open, in the step panel or as the whole session page."""
    session, access = _session_or_404(request, pk)
    step = _step_or_404(session, index)
    result_id = request.GET.get("result", "")
    if not (_fragment(request) and request.htmx.target == "fold-panel"):
        return _step_response(request, session, access, step, fold=result_id)
    originals = web.fold_originals(session=session, step=step, result_id=result_id)
    context = {"session": session, "access": access, "step": step, "result_id": result_id,
               "originals": originals}  # fmt: skip
    return render(request, "session/_fold.html", context)


@login_required
@require_GET
def archive_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session, access = _session_or_404(request, pk)
    # ?step=I&id=MSG&mark=TEXT: the original a lost entity came from, the entity marked.
    step = _int(request.GET.get("step"))
    original = request.GET.get("id") or None
    mark = request.GET.get("mark") or ""
    after = _int(request.GET.get("after"))
    originals, next_after = web.archive_page(
        session=session, after=after, step=step, original=original
    )
    last = Step.objects.filter(session=session).order_by("-index").values_list("index", flat=True)
    one = step is not None and original is not None
    return render(
        request,
        "archive.html",
        _page(
            request,
            access=access,
            session=session,
            originals=originals,
            next_after=next_after,
            after=after if after and after > 0 else None,
            last_step=last.first(),
            one=one,
            one_step=step,
            one_id=original,
            mark=mark,
            pieces=web.marked_pieces(originals[0].message.text, mark)
            if one and originals
            else None,
        ),
    )


@login_required
@require_http_methods(["GET", "POST"])
def restore_page(request: HtmxHttpRequest, pk: int, index: int) -> HttpResponse:
    """The preview of putting originals back: one by link (GET ``?id=``), or the ones
    checked in a fold (POST: a compaction's hundreds of ids are too long for a URL).
    Nothing changes until the preview's own form is sent."""
    session, access = _session_or_404(request, pk)
    step = _step_or_404(session, index)
    ids = (request.POST if request.method == "POST" else request.GET).getlist("id")
    preview = web.restore_preview(session=session, step=step, ids=ids)
    context = {"session": session, "access": access, "preview": preview}
    if _fragment(request):
        return render(request, "session/_restore.html", context)
    return render(
        request,
        "fragment_page.html",
        _page(request, fragment="session/_restore.html", title="Restore", **context),
    )


def _directives_response(
    request: HtmxHttpRequest,
    session: Session,
    *,
    error: str = "",
    status: int = 200,
    sent: bool = False,
) -> HttpResponse:
    # The panel has no poll of its own: the live tail redraws it when a directive
    # is sent or answered. With `sent`, the answer to a form also says beside that
    # form what became of it: the panel is far down the page, out of view.
    directives = web.session_directives(session=session)
    return render(
        request,
        "session/_directives.html",
        {"session": session, "directives": directives, "error": error, "sent": sent},
        status=status,
    )


def _direct(request: HtmxHttpRequest, pk: int, **fields: Any) -> HttpResponse:
    session, access = _session_or_404(request, pk)
    if not access.can_direct:
        raise PermissionDenied("Only editors and admins can send directives.")
    error, status = "", 400
    if session.imported_from:
        # The page offers no form: no agent is connected to read one. (It was stored,
        # and expired at once.)
        error, status = (
            (
                f"this session was imported from a {session.imported_from} transcript: "
                "no agent is connected to it to receive a directive"
            ),
            409,
        )
    else:
        try:
            directive_create(session=session, user=request.user, **fields)
        except InputError as exc:
            error = str(exc)
    if error:
        if _fragment(request):
            return _directives_response(request, session, error=error, status=status, sent=True)
        return HttpResponse(f"Not sent: {error}", status=status, content_type="text/plain")
    if _fragment(request):
        response = _directives_response(request, session, sent=True)
        response["HX-Trigger"] = "directive-sent"
        return response
    return redirect(reverse("web-session", args=[session.pk]) + "#directives")


@login_required
@require_POST
def restore_send(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _direct(
        request,
        pk,
        type=Directive.Type.RESTORE,
        targets=request.POST.getlist("id"),
        step=_int(request.POST.get("step")),
    )


@login_required
@require_POST
def mode_switch(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    return _direct(request, pk, type=Directive.Type.SET_MODE, mode=request.POST.get("mode", ""))


# --- annotations -----------------------------------------------------------------------


def _scope(params: Any) -> tuple[str, int | None]:
    """Which list of annotations a request shows: the session's, or one step's."""
    step = _int(params.get("step"))
    if params.get("scope") == "step" and step is not None and step >= 0:
        return "step", step
    return "session", None


def _annotations_response(
    request: HtmxHttpRequest, session: Session, *, scope: str, step: int | None, error: str = ""
) -> HttpResponse:
    return render(
        request,
        "session/_annotations.html",
        {
            "session": session,
            "annotations": web.annotation_views(
                session=session, user=request.user, step_index=step if scope == "step" else None
            ),
            "scope": scope,
            "scope_step": step,
            "error": error,
        },
    )


def _notes_changed() -> HttpResponse:
    """Nothing to swap: every list of annotations on the page (the session's, the open
    step's) hears the event and redraws itself, so they all agree."""
    response = HttpResponse(status=204)
    response["HX-Trigger"] = "annotations-changed"
    return response


def _annotation_url(session: Session, annotation: Annotation | None, step: int | None) -> str:
    """Where an annotation is shown, for answers to plain (non-htmx) form posts."""
    index = annotation.step_index if annotation is not None else step
    if index is None:
        return reverse("web-session", args=[session.pk]) + "#annotations"
    anchor = "notes"
    if annotation is not None and annotation.message_id:
        anchor = web.message_anchor(annotation.message_id)
    return reverse("web-step", args=[session.pk, index]) + "#" + anchor


@login_required
@require_http_methods(["GET", "POST"])
def notes(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET: a list of annotations (the session's, or ``?scope=step&step=N``). POST: a new
    one, on the session, a step (``step``) or one of its messages (``message``).
    Anyone in the project may annotate, viewers included."""
    session, _ = _session_or_404(request, pk)
    params = request.POST if request.method == "POST" else request.GET
    scope, scope_step = _scope(params)
    if request.method == "GET":
        if not _fragment(request):
            return redirect(_annotation_url(session, None, scope_step))
        return _annotations_response(request, session, scope=scope, step=scope_step)
    step_text = request.POST.get("step", "").strip()
    step = _int(step_text)
    try:
        if step_text and step is None:
            # Not the session's note instead: the author meant a step.
            raise InputError("step", f"a step index (a whole number), not {step_text!r}")
        annotation = annotation_create(
            session=session,
            author=request.user,
            body=request.POST.get("body", ""),
            label=request.POST.get("label") or Annotation.Label.NOTE,
            step_index=step,
            message_id=request.POST.get("message", "").strip(),
        )
    except InputError as exc:
        if _fragment(request):
            # In place of the list (htmx swaps 2xx answers only); the form keeps its text.
            return _annotations_response(
                request, session, scope=scope, step=scope_step, error=str(exc)
            )
        return HttpResponse(f"Not saved: {exc}", status=400, content_type="text/plain")
    if not _fragment(request):
        return redirect(_annotation_url(session, annotation, step))
    return _notes_changed()


def _own_annotation(
    request: HtmxHttpRequest, pk: int, aid: int
) -> tuple[Session, web.Access, Annotation]:
    session, access = _session_or_404(request, pk)
    annotation = web.annotation_for(session=session, pk=aid)
    if annotation is None:
        raise Http404("no such annotation")
    return session, access, annotation


def _edit_form(
    request: HtmxHttpRequest,
    session: Session,
    access: web.Access,
    annotation: Annotation,
    params: Any,
    *,
    error: str = "",
) -> HttpResponse:
    scope, scope_step = _scope(params)
    context = {
        "session": session,
        "annotation": annotation,
        "labels": web.LABELS,
        "scope": scope,
        "scope_step": scope_step,
        "error": error,
        "body": params.get("body", annotation.body),
    }
    if _fragment(request):
        return render(request, "session/_annotation_edit.html", context)
    return render(
        request,
        "fragment_page.html",
        _page(
            request,
            fragment="session/_annotation_edit.html",
            in_list=True,
            title="Edit annotation",
            access=access,
            **context,
        ),
        status=400 if error else 200,
    )


@login_required
@require_GET
def note_edit(request: HtmxHttpRequest, pk: int, aid: int) -> HttpResponse:
    session, access, annotation = _own_annotation(request, pk, aid)
    if annotation.author_id != request.user.pk:
        raise PermissionDenied("Only its author may edit an annotation.")
    return _edit_form(request, session, access, annotation, request.GET)


@login_required
@require_POST
def note_save(request: HtmxHttpRequest, pk: int, aid: int) -> HttpResponse:
    session, access, annotation = _own_annotation(request, pk, aid)
    try:
        annotation_update(
            annotation=annotation,
            user=request.user,
            body=request.POST.get("body", ""),
            label=request.POST.get("label") or annotation.label,
        )
    except NotAllowed:
        raise PermissionDenied("Only its author may edit an annotation.") from None
    except InputError as exc:
        annotation.refresh_from_db()
        return _edit_form(request, session, access, annotation, request.POST, error=str(exc))
    if not _fragment(request):
        return redirect(_annotation_url(session, annotation, None))
    return _notes_changed()


@login_required
@require_POST
def note_delete(request: HtmxHttpRequest, pk: int, aid: int) -> HttpResponse:
    session, _, annotation = _own_annotation(request, pk, aid)
    place = _annotation_url(session, None, annotation.step_index)
    try:
        annotation_delete(annotation=annotation, user=request.user)
    except NotAllowed:
        raise PermissionDenied("Only its author may delete an annotation.") from None
    if not _fragment(request):
        return redirect(place)
    return _notes_changed()


# --- incidents -------------------------------------------------------------------------


def _incident_response(
    request: HtmxHttpRequest,
    session: Session,
    access: web.Access,
    *,
    error: str = "",
    incident: Incident | None = None,
) -> HttpResponse:
    """The incident box again (or, without htmx, the session page); `incident` when the
    caller already holds the session's, else it is read."""
    if not _fragment(request):
        if error:
            return HttpResponse(f"Not saved: {error}", status=400, content_type="text/plain")
        return redirect(reverse("web-session", args=[session.pk]) + "#incident")
    if incident is None:
        incident = Incident.objects.filter(session=session).first()
    context = {
        "session": session,
        "access": access,
        "error": error,
        "severities": web.SEVERITIES,
        "incident": incident,
    }
    return render(request, "session/_incident.html", context)


@login_required
@require_POST
def incident_save(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session, access = _session_or_404(request, pk)
    if not access.can_mark_incidents:
        raise PermissionDenied("Only editors and admins mark incidents.")
    try:
        incident = incident_mark(
            session=session,
            user=request.user,
            title=request.POST.get("title", ""),
            severity=request.POST.get("severity", ""),
        )
    except InputError as exc:
        return _incident_response(request, session, access, error=str(exc))
    return _incident_response(request, session, access, incident=incident)


@login_required
@require_POST
def incident_close(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session, access = _session_or_404(request, pk)
    if not access.can_mark_incidents:
        raise PermissionDenied("Only editors and admins resolve incidents.")
    incident = Incident.objects.filter(session=session).first()
    if incident is None:
        raise Http404("this session is not an incident")
    if request.POST.get("reopen"):
        incident_reopen(incident=incident)
    else:
        incident_resolve(incident=incident, user=request.user)
    return _incident_response(request, session, access, incident=incident)


@login_required
@require_GET
def incidents_page(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    access = _project_or_404(request, slug)
    filters = web.IncidentFilters.from_query(request.GET)
    return render(
        request,
        "incidents.html",
        _page(
            request,
            access=access,
            filters=filters,
            rows=web.incident_list(project=access.project, filters=filters),
            severities=web.SEVERITIES,
            agents=web.project_agents(project=access.project),
        ),
    )


# --- permalinks ------------------------------------------------------------------------


def permalink_path(session: Session, index: int | None = None) -> str:
    """A session's or step's address from the project's slug, the session id the agent
    chose and the step index: none of them changes when the data is imported again."""
    path = _permalink(session.project.slug, session.external_id, index)
    if path is not None:
        return path
    if index is None:
        return reverse("web-session", args=[session.pk])
    return reverse("web-step", args=[session.pk, index])


def _permalink(slug: str, session_id: str, index: int | None = None) -> str | None:
    """The permalink of a session (or step) by the id its agent chose; None for an id
    no address keeps."""
    rest = f"{session_id}/" + (f"{index}/" if index is not None else "")
    if any(part in (".", "..") for part in rest.split("/")):
        return None  # a browser would resolve the dots away
    try:
        return reverse("web-permalink", kwargs={"slug": slug, "rest": rest})
    except NoReverseMatch:  # an id with a newline: no path can carry it
        return None


@login_required
@require_GET
def permalink(request: HtmxHttpRequest, slug: str, rest: str) -> HttpResponse:
    """``/p/<project>/<session id>/[<step>/]``, optionally ``?fold=<result id>``; a message
    is ``#m-<id>`` on a step's address, which the browser keeps through the redirect."""
    found = web.permalink_target(user=request.user, slug=slug, rest=rest)
    if found is None:
        raise Http404("no such session")
    session, index = found
    if index is None:
        return redirect("web-session", session.pk)
    url = reverse("web-step", args=[session.pk, index])
    if fold := request.GET.get("fold"):
        url += "?" + urlencode({"fold": fold}) + "#fold-panel"
    return redirect(url)


# --- reports and exports ---------------------------------------------------------------


@login_required
@require_GET
def report_md(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session, _ = _session_or_404(request, pk)
    text = report_markdown(session_report(session))
    response = HttpResponse(text, content_type="text/markdown; charset=utf-8")
    return as_attachment(response, f"{download_name(session.external_id)}.md")


@login_required
@require_GET
def report_json(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The report and every step as the read API gives it, streamed a chunk at a time."""
    session, _ = _session_or_404(request, pk)
    response = StreamingHttpResponse(report_json_chunks(session), content_type="application/json")
    return as_attachment(response, f"{download_name(session.external_id)}.json")


@login_required
@require_GET
def report_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One HTML file that opens offline: its styles and its chart (SVG) inline."""
    session, _ = _session_or_404(request, pk)
    rows, _ = web.session_chart(session=session)
    html, policy = report_html(
        session=session,
        report=session_report(session),
        chart_rows=rows,
        generated_at=timezone.now(),
        link=request.build_absolute_uri(permalink_path(session)),
    )
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    # Its own policy, which lets only its own inline scripts run, whoever opens it.
    response["Content-Security-Policy"] = policy
    return as_attachment(response, f"{download_name(session.external_id)}.html")


@login_required
@require_GET
def export_steps(request: HtmxHttpRequest, slug: str) -> HttpResponse | StreamingHttpResponse:
    """The training dataset of the sessions the list shows with the same filters: one JSON
    line per step, streamed, so a project of any size is never held in memory."""
    access = _project_or_404(request, slug)
    filters, errors = web.SessionFilters.parse(request.GET)
    if errors:
        # Not the whole project instead: a refused filter would filter nothing.
        return HttpResponseBadRequest("\n".join(errors), content_type="text/plain; charset=utf-8")
    sessions = web.session_queryset(project=access.project, filters=filters)
    response = StreamingHttpResponse(sessions_jsonl(sessions), content_type="application/x-ndjson")
    as_attachment(response, f"{download_name(slug)}-steps.jsonl")
    return response


# --- across sessions: compare two, project overview ------------------------------------

COMPARE_ROWS = 1000


@login_required
@require_GET
def sessions_compare_page(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Two sessions side by side (``?s=<id>&s=<id>``): their occupancy curves overlaid,
    then tokens, operations and flags per step, entity retention and outcome."""
    access = _project_or_404(request, slug)
    picked = [i.strip() for i in request.GET.getlist("s") if i.strip()]
    too_many = len(picked) > 2
    # More than two: nothing is compared, rather than silently the first two.
    ids = [] if too_many else picked
    found = [session_get(project=access.project, external_id=i) for i in ids]
    missing = [i for i, s in zip(ids, found, strict=True) if s is None]
    context: dict[str, Any] = {
        "access": access,
        "ids": picked[:2] + [""] * (2 - len(picked[:2])),
        "missing": missing,
        "too_many": picked if too_many else [],
        # One picked (one box checked in the list): the other is still to be given.
        "one": picked[0] if len(picked) == 1 else "",
        "recent": web.recent_session_ids(project=access.project),
    }
    sessions = [s for s in found if s is not None]
    if len(sessions) == 2 and not missing:
        data = postmortems.sessions_compare(first=sessions[0], second=sessions[1])
        sides = data["sessions"]
        for side, session in zip(sides, sessions, strict=True):
            side["pk"] = session.pk
            side["model"] = session  # what the list's status and mode are shown from
        context.update(
            sessions=sessions,
            sides=sides,
            chart=json.dumps(
                [
                    {
                        "name": side["session"]["session_id"],
                        "max_tokens": web.session_budget(session)[0],
                        "curve": side["curve"],
                    }
                    for side, session in zip(sides, sessions, strict=True)
                ]
            ),
            chart_lines=json.dumps(web.occupancy_lines("limit")),
            rows=web.compare_rows([side["curve"] for side in sides], COMPARE_ROWS),
            more_rows=max(len(side["curve"]) for side in sides) > COMPARE_ROWS,
            row_limit=COMPARE_ROWS,
        )
    status = 400 if too_many else 200
    return render(request, "sessions_compare.html", _page(request, **context), status=status)


@login_required
@require_GET
def overview_page(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Trends over a time range, and the per agent x mode table; once after the
    monitor form made a monitor, its secret."""
    access = _project_or_404(request, slug)
    shown = _shown_once(request, CREATED_MONITOR)
    created = None
    if shown is not None:
        monitor = Monitor.objects.filter(project=access.project, pk=shown["pk"]).first()
        created = CreatedMonitor(monitor=monitor, secret=shown["secret"]) if monitor else None
    response = _overview(request, access, created_monitor=created)
    if created is not None:
        response["Cache-Control"] = "no-store"  # the secret is shown once, never cached
    return response


# The session entries holding a secret made by a form until the page it redirects to
# shows it (post/redirect/get: reloading that page makes no second one).
CREATED_MONITOR = "created_monitor"
ISSUED_KEY = "issued_key"


def _keep_once(request: HtmxHttpRequest, entry: str, pk: int, secret: str) -> None:
    request.session[entry] = {"pk": pk, "secret": secret}


def _shown_once(request: HtmxHttpRequest, entry: str) -> dict[str, Any] | None:
    """What `_keep_once` kept, taken out: the next page shows it no more."""
    shown = request.session.pop(entry, None)
    return shown if isinstance(shown, dict) else None


def _overview(request: HtmxHttpRequest, access: web.Access, **extra: Any) -> HttpResponse:
    span = web.TrendRange.from_query(request.GET)
    trends = postmortems.project_trends(
        project=access.project, start=span.start, end=span.end, bucket=span.bucket
    )
    return render(
        request,
        "overview.html",
        _page(
            request,
            access=access,
            span=span,
            ranges=list(web.RANGES),
            buckets=web.BUCKETS,
            trends=trends,
            trends_json=json.dumps(trends),
            table=agent_mode_table(project_id=access.project.pk, start=span.start, end=span.end),
            monitors=monitors.monitor_list(project=access.project),
            metrics=METRICS,
            monitor_fields=MONITOR_FIELDS,
            **extra,
        ),
        status=400 if extra.get("monitor_error") else 200,
    )


@login_required
@require_http_methods(["GET", "POST"])
def monitor_new(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The overview's monitor form: the same rules and errors as the API. A form with
    an error is answered at this address, beside its fields; a new monitor, by a
    redirect to the overview, which shows its secret once (`_keep_once`)."""
    access = _project_or_404(request, slug)
    if request.method == "GET":
        return redirect(_monitors_on_overview(request, access))
    if not access.can_direct:
        raise PermissionDenied("Only the project's editors and admins create monitors.")
    form = request.POST
    payload: dict[str, Any] = {
        "name": form.get("name", "").strip(),
        "metric": form.get("metric", ""),
        "threshold": _number(form.get("threshold", "")),
        "window_minutes": _int(form.get("window_minutes")) or form.get("window_minutes"),
        "filters": {"agent": form.get("agent", "").strip(), "mode": form.get("mode", "").strip()},
        "webhook_url": form.get("webhook_url", "").strip(),
        "email": form.get("email", "").strip(),
    }
    try:
        created = monitor_create(project=access.project, payload=payload)
    except InputError as exc:
        # Said beside the form's field at fault, which the API calls filters.agent.
        error = InputError(exc.field.removeprefix("filters."), exc.message)
        return _overview(request, access, monitor_error=error, monitor_form=form)
    _keep_once(request, CREATED_MONITOR, created.monitor.pk, created.secret)
    return redirect(_monitors_on_overview(request, access))


@login_required
@require_POST
def monitor_remove(request: HtmxHttpRequest, slug: str, monitor_pk: int) -> HttpResponse:
    """The overview's Delete beside a monitor: gone with its alerts, as the API does it."""
    access = _project_or_404(request, slug)
    if not access.can_direct:
        raise PermissionDenied("Only the project's editors and admins delete monitors.")
    if not monitor_delete(project=access.project, monitor_id=monitor_pk):
        raise Http404("no such monitor in this project")
    return redirect(_monitors_on_overview(request, access))


def _monitors_on_overview(request: HtmxHttpRequest, access: web.Access) -> str:
    """The overview's monitors, over the time range the request's address still holds."""
    overview = reverse("web-overview", args=[access.project.slug])
    if request.GET:
        overview += "?" + web.TrendRange.from_query(request.GET).query
    return overview + "#monitors"


# The overview's monitor form's fields, each of which an error is said beside.
MONITOR_FIELDS = (
    "name",
    "metric",
    "threshold",
    "window_minutes",
    "agent",
    "mode",
    "webhook_url",
    "email",
)


def _number(text: str) -> float | str:
    # Occupancy is shown as a percentage: "90%" is typed as readily as 0.9.
    percent = text.strip().endswith("%")
    try:
        return float(text.strip().removesuffix("%")) / (100 if percent else 1)
    except ValueError:
        return text  # refused by the service, naming the field


# Resolved alerts the page lists, newest first; older ones are counted under the table.
ALERTS_RESOLVED_SHOWN = 500
# Sessions an alert's row names; the rest are in the sessions list filtered by the alert.
ALERT_SESSIONS_SHOWN = 8


@login_required
@require_GET
def alerts_page(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """The project's alerts, firing first, each linked to its sessions."""
    access = _project_or_404(request, slug)
    # Every firing alert (one per monitor at most), however long ago it started; then
    # the newest resolved ones: a page of history must not push a firing alert out.
    firing = monitors.alert_list(project=access.project, state=Alert.State.FIRING)
    resolved = monitors.alert_list(project=access.project, state=Alert.State.RESOLVED)
    shown = list(resolved.prefetch_related("deliveries")[: ALERTS_RESOLVED_SHOWN + 1])
    alerts = [*firing.prefetch_related("deliveries"), *shown[:ALERTS_RESOLVED_SHOWN]]
    rows = []
    for alert in alerts:
        in_list = f"{reverse('sessions')}?{urlencode({'project': slug, 'alert': alert.pk})}"
        named = in_view(list(alert.sessions), ALERT_SESSIONS_SHOWN)
        rows.append(
            {
                "alert": alert,
                # A session whose id no address keeps is found in the list of the alert's.
                "sessions": [(sid, _permalink(slug, sid) or in_list) for sid in named],
                "more": len(alert.sessions) - len(named),
                "in_list": in_list,
                "deliveries": sorted(alert.deliveries.all(), key=lambda d: (d.at, d.pk)),
            }
        )
    older = resolved.count() - ALERTS_RESOLVED_SHOWN if len(shown) > ALERTS_RESOLVED_SHOWN else 0
    return render(request, "alerts.html", _page(request, access=access, rows=rows, older=older))


# --- API keys --------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def keys_page(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    access = web.access_for(web.user_access(user=request.user), slug)
    if access is None:
        raise Http404("no such project")
    if not access.can_manage_keys:
        raise PermissionDenied("Only the project's admins manage its API keys.")
    if request.method == "POST":
        issued = apikey_create(
            project=access.project,
            name=request.POST.get("name", "").strip()[:200],
            can_write=request.POST.get("can_write") == "on",
            created_by=request.user,
        )
        _keep_once(request, ISSUED_KEY, issued.key.pk, issued.secret)
        return redirect("web-keys", slug=slug)
    shown = _shown_once(request, ISSUED_KEY)
    issued = None
    if shown is not None:
        key = ApiKey.objects.filter(project=access.project, pk=shown["pk"]).first()
        issued = IssuedKey(key=key, secret=shown["secret"]) if key is not None else None
    response = render(
        request,
        "keys.html",
        _page(request, access=access, keys=web.project_keys(project=access.project), issued=issued),
    )
    if issued is not None:
        response["Cache-Control"] = "no-store"  # the secret is shown once, never cached
    return response


@login_required
@require_POST
def key_revoke(request: HtmxHttpRequest, slug: str, key_pk: int) -> HttpResponse:
    access = web.access_for(web.user_access(user=request.user), slug)
    if access is None:
        raise Http404("no such project")
    if not access.can_manage_keys:
        raise PermissionDenied("Only the project's admins manage its API keys.")
    key = ApiKey.objects.filter(project=access.project, pk=key_pk).first()
    if key is None:
        raise Http404("no such key")
    apikey_revoke(key=key)
    return redirect("web-keys", slug=slug)


# --- members ---------------------------------------------------------------------------


def _members_response(
    request: HtmxHttpRequest, access: web.Access, *, error: str = "", status: int = 200
) -> HttpResponse:
    return render(
        request,
        "members.html",
        _page(
            request,
            access=access,
            members=web.project_members(project=access.project),
            roles=ROLES,
            error=error,
            typed=request.POST if error else {},
        ),
        status=status,
    )


def _member_or_404(access: web.Access, member_pk: int) -> Membership:
    membership = Membership.objects.filter(project=access.project, pk=member_pk).first()
    if membership is None:
        raise Http404("no such member")
    return membership


@login_required
@require_http_methods(["GET", "POST"])
def members_page(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    """Who is in the project, with what role; its admins add members here."""
    access = _project_or_404(request, slug)
    if request.method == "GET":
        return _members_response(request, access)
    if not access.can_manage_members:
        raise PermissionDenied("Only the project's admins manage its members.")
    try:
        membership_add(
            project=access.project,
            username=request.POST.get("username", ""),
            role=request.POST.get("role", ""),
        )
    except InputError as exc:
        return _members_response(request, access, error=str(exc), status=400)
    return redirect("web-members", slug=slug)


@login_required
@require_POST
def member_change(request: HtmxHttpRequest, slug: str, member_pk: int) -> HttpResponse:
    """An admin sets a member's role, or (``remove``) takes them out of the project."""
    access = _project_or_404(request, slug)
    if not access.can_manage_members:
        raise PermissionDenied("Only the project's admins manage its members.")
    membership = _member_or_404(access, member_pk)
    try:
        if request.POST.get("remove"):
            membership_remove(membership=membership)
        else:
            membership_role_change(membership=membership, role=request.POST.get("role", ""))
    except InputError as exc:
        return _members_response(request, access, error=str(exc), status=400)
    return redirect("web-members", slug=slug)
