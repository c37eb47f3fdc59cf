from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from contextview.projects.models import Project
from contextview.sessions.selectors import decode_cursor, session_list


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})


@login_required
@require_GET
def sessions_page(request: HttpRequest) -> HttpResponse:
    projects = list(Project.objects.filter(membership__user=request.user).order_by("slug"))
    chosen = request.GET.get("project")
    project = next((p for p in projects if p.slug == chosen), projects[0] if projects else None)
    sessions: list = []
    next_cursor = None
    if project is not None:
        cursor = request.GET.get("cursor")
        after = decode_cursor(cursor) if cursor else None
        sessions, next_cursor = session_list(project=project, after=after, limit=50)
    return render(
        request,
        "sessions.html",
        {
            "projects": projects,
            "project": project,
            "sessions": sessions,
            "next_cursor": next_cursor,
        },
    )
