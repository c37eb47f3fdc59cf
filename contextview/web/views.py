"""The dashboard: thin views over contextview.web.selectors and the sessions services.

A page renders its template; asked by htmx, the same view renders only the
fragment that changed (a template of its own under ``templates/session/``, which
the page template includes). Every view starts from the signed-in user's
memberships: a session of a project the user is not in is a 404, a directive or
key change by a user without the role for it a 403.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import (
    FileResponse,
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseForbidden,
    JsonResponse,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.middleware import HtmxDetails

from contextview.core.errors import InputError
from contextview.projects.models import ApiKey
from contextview.projects.services import apikey_create, apikey_revoke
from contextview.sessions.models import Directive, Session, Step
from contextview.sessions.selectors import step_get
from contextview.sessions.services import directive_create
from contextview.web import selectors as web

STEPS_PER_PAGE = 100


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


def _fragment(request: HtmxHttpRequest) -> bool:
    """Whether to answer with a fragment: an htmx request that is not restoring history."""
    return bool(request.htmx) and not request.htmx.history_restore_request


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def _session_or_404(request: HttpRequest, pk: int) -> tuple[Session, web.Access]:
    found = web.session_for_user(user=request.user, pk=pk)
    if found is None:
        raise Http404("no such session")
    session, role = found
    return session, web.Access(project=session.project, role=role)


def _step_or_404(session: Session, index: int) -> Step:
    step = step_get(session=session, index=index)
    if step is None:
        raise Http404("no such step")
    return step


def _page(request: HttpRequest, **context: Any) -> dict[str, Any]:
    """A page's context, with what every page needs: the user's projects for the
    switcher, and the current one (from ``access``)."""
    access: web.Access | None = context.get("access")
    return {
        "accesses": web.user_access(user=request.user),
        "project": access.project if access else None,
        **context,
    }


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
    chosen = request.GET.get("project") or request.session.get("project")
    access = web.access_for(accesses, chosen) or (accesses[0] if accesses else None)
    if access is not None:
        request.session["project"] = access.project.slug
    filters = web.SessionFilters.from_query(request.GET)
    sessions: list[Session] = []
    next_cursor = None
    agents: list[str] = []
    if access is not None:
        sessions, next_cursor = web.session_page(
            project=access.project, filters=filters, cursor=request.GET.get("cursor")
        )
        agents = web.project_agents(project=access.project)
    return render(
        request,
        "sessions.html",
        {
            "accesses": accesses,
            "access": access,
            "project": access.project if access else None,
            "sessions": sessions,
            "next_cursor": next_cursor,
            "paged": bool(request.GET.get("cursor")),
            "filters": filters,
            "agents": agents,
            "statuses": web.STATUSES,
            "modes": web.MODES,
            "flags": web.FLAGS,
        },
    )


# --- one session -----------------------------------------------------------------------


def _steps_window(request: HttpRequest, session: Session) -> dict[str, Any]:
    after, before = _int(request.GET.get("after")), _int(request.GET.get("before"))
    rows, has_prev, has_next = web.step_rows(
        session=session, after=after, before=before, limit=STEPS_PER_PAGE
    )
    return {
        "steps": rows,
        "steps_prev": rows[0].index if rows and has_prev else None,
        "steps_next": rows[-1].index if rows and has_next else None,
    }


@login_required
@require_GET
def session_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session, access = _session_or_404(request, pk)
    window = _steps_window(request, session)
    if _fragment(request) and request.htmx.target == "steps":
        return render(request, "session/_steps.html", {"session": session, **window})
    rows, reported_modes = web.session_chart(session=session)
    directives = web.session_directives(session=session)
    max_tokens, limit = web.session_budget(session)
    chart = {
        "budget": {"max_tokens": max_tokens, "limit": limit},
        "step_url": reverse("web-step", args=[session.pk, 0])[: -len("0/")],
        "directives": [
            {"step": d.applied_step, "label": d.summary, "by": d.created_by}
            for d in directives
            if d.applied_step is not None
        ],
    }
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
            chart_meta=json.dumps(chart),
            chart_rows=rows,
            modes=modes,
            reported_modes=reported_modes,
            directives=directives,
            pending=any(d.directive.status == Directive.Status.PENDING for d in directives),
            flag_help=web.FLAG_HELP,
            **window,
        ),
    )


@login_required
@require_GET
def step_page(request: HtmxHttpRequest, pk: int, index: int) -> HttpResponse:
    session, access = _session_or_404(request, pk)
    step = _step_or_404(session, index)
    view = web.step_view(session=session, step=step)
    context = {"session": session, "access": access, "view": view}
    if _fragment(request):
        return render(request, "session/_step.html", context)
    return render(request, "step.html", _page(request, **context))


@login_required
@require_GET
def compare_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
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
    context = _page(
        request,
        access=access,
        session=session,
        view=view,
        error=error,
        start=start_index,
        end=end_index,
    )
    return render(request, "compare.html", context)


# --- folded originals and restore ------------------------------------------------------


@login_required
@require_GET
def fold_page(request: HtmxHttpRequest, pk: int, index: int) -> HttpResponse:
    session, access = _session_or_404(request, pk)
    step = _step_or_404(session, index)
    result_id = request.GET.get("result", "")
    originals = web.fold_originals(session=session, step=step, result_id=result_id)
    context = {"session": session, "access": access, "step": step, "result_id": result_id,
               "originals": originals}  # fmt: skip
    if _fragment(request):
        return render(request, "session/_fold.html", context)
    return render(
        request,
        "fragment_page.html",
        _page(request, fragment="session/_fold.html", title=f"Fold {result_id}", **context),
    )


@login_required
@require_GET
def archive_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session, access = _session_or_404(request, pk)
    originals, next_after = web.archive_page(session=session, after=_int(request.GET.get("after")))
    last = Step.objects.filter(session=session).order_by("-index").values_list("index", flat=True)
    return render(
        request,
        "archive.html",
        _page(
            request,
            access=access,
            session=session,
            originals=originals,
            next_after=next_after,
            last_step=last.first(),
        ),
    )


@login_required
@require_GET
def restore_page(request: HtmxHttpRequest, pk: int, index: int) -> HttpResponse:
    session, access = _session_or_404(request, pk)
    step = _step_or_404(session, index)
    preview = web.restore_preview(session=session, step=step, ids=request.GET.getlist("id"))
    context = {"session": session, "access": access, "preview": preview}
    if _fragment(request):
        return render(request, "session/_restore.html", context)
    return render(
        request,
        "fragment_page.html",
        _page(request, fragment="session/_restore.html", title="Restore", **context),
    )


def _directives_response(
    request: HtmxHttpRequest, session: Session, *, error: str = "", status: int = 200
) -> HttpResponse:
    directives = web.session_directives(session=session)
    pending = any(d.directive.status == Directive.Status.PENDING for d in directives)
    response = render(
        request,
        "session/_directives.html",
        {"session": session, "directives": directives, "pending": pending, "error": error},
        status=status,
    )
    if request.GET.get("polling") and not pending:
        # The last pending directive settled: the page redraws its overview.
        response["HX-Trigger"] = "directives-settled"
    return response


def _direct(request: HtmxHttpRequest, pk: int, **fields: Any) -> HttpResponse:
    session, access = _session_or_404(request, pk)
    if not access.can_direct:
        return HttpResponseForbidden("Only editors and admins can send directives.")
    try:
        directive_create(session=session, user=request.user, **fields)
    except InputError as exc:
        if _fragment(request):
            return _directives_response(request, session, error=str(exc), status=400)
        return HttpResponse(f"Not sent: {exc}", status=400, content_type="text/plain")
    if _fragment(request):
        response = _directives_response(request, session)
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


@login_required
@require_GET
def directives_fragment(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session, _ = _session_or_404(request, pk)
    return _directives_response(request, session)


# --- API keys --------------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def keys_page(request: HtmxHttpRequest, slug: str) -> HttpResponse:
    access = web.access_for(web.user_access(user=request.user), slug)
    if access is None:
        raise Http404("no such project")
    if not access.can_manage_keys:
        return HttpResponseForbidden("Only the project's admins manage its API keys.")
    issued = None
    if request.method == "POST":
        issued = apikey_create(
            project=access.project,
            name=request.POST.get("name", "").strip()[:200],
            can_write=request.POST.get("can_write") == "on",
            created_by=request.user,
        )
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
        return HttpResponseForbidden("Only the project's admins manage its API keys.")
    key = ApiKey.objects.filter(project=access.project, pk=key_pk).first()
    if key is None:
        raise Http404("no such key")
    apikey_revoke(key=key)
    return redirect("web-keys", slug=slug)


# --- vendored JavaScript ----------------------------------------------


@cache
def plotly_path() -> Path:
    import plotly

    return Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


@cache
def plotly_version() -> str:
    import plotly

    return str(plotly.__version__)


@require_GET
def plotly_js(request: HttpRequest, version: str) -> FileResponse:
    """plotly.js from the installed plotly package: no CDN, so it works air-gapped."""
    if version != plotly_version():
        raise Http404("no such plotly version")
    response = FileResponse(plotly_path().open("rb"), content_type="text/javascript")
    response["Cache-Control"] = "public, max-age=31536000, immutable"
    return response
