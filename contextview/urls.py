from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from contextview.api import api
from contextview.ingest.views import OTLP_PATH, otlp_traces
from contextview.web import replay_views, views
from contextview.web.signin import SignInForm

urlpatterns = [
    path("", views.sessions_page, name="sessions"),
    path("healthz", views.healthz, name="healthz"),
    path(
        "login/",
        auth_views.LoginView.as_view(template_name="login.html", authentication_form=SignInForm),
        name="login",
    ),
    path(
        "logout/",
        auth_views.LogoutView.as_view(template_name="signed_out.html"),
        name="logout",
    ),
    path("api/v1/", api.urls),
    # OTLP/HTTP: an OpenTelemetry exporter pointed at the server's root sends here.
    path(OTLP_PATH.lstrip("/"), otlp_traces, name="otlp-traces"),
    path("admin/", admin.site.urls),
    # The dashboard (contextview.web).
    path("sessions/<int:pk>/", views.session_page, name="web-session"),
    path("sessions/<int:pk>/steps/<int:index>/", views.step_page, name="web-step"),
    path("sessions/<int:pk>/steps/<int:index>/fold/", views.fold_page, name="web-fold"),
    path("sessions/<int:pk>/steps/<int:index>/restore/", views.restore_page, name="web-restore"),
    path("sessions/<int:pk>/compare/", views.compare_page, name="web-compare"),
    path("sessions/<int:pk>/compare/rows/", views.compare_rows, name="web-compare-rows"),
    path("sessions/<int:pk>/steps/<int:index>/rows/", views.step_rows, name="web-step-rows"),
    path("sessions/<int:pk>/archive/", views.archive_page, name="web-archive"),
    path("sessions/<int:pk>/replay/", replay_views.replay_panel, name="web-replay"),
    path("sessions/<int:pk>/restore/", views.restore_send, name="web-restore-send"),
    path("sessions/<int:pk>/mode/", views.mode_switch, name="web-mode"),
    path("sessions/<int:pk>/live/", views.live_tail, name="web-live"),
    path("sessions/<int:pk>/notes/", views.notes, name="web-notes"),
    path("sessions/<int:pk>/notes/<int:aid>/", views.note_save, name="web-note"),
    path("sessions/<int:pk>/notes/<int:aid>/edit/", views.note_edit, name="web-note-edit"),
    path("sessions/<int:pk>/notes/<int:aid>/delete/", views.note_delete, name="web-note-delete"),
    path("sessions/<int:pk>/incident/", views.incident_save, name="web-incident"),
    path("sessions/<int:pk>/incident/resolve/", views.incident_close, name="web-incident-resolve"),
    path("sessions/<int:pk>/report.md", views.report_md, name="web-report-md"),
    path("sessions/<int:pk>/report.json", views.report_json, name="web-report-json"),
    path("sessions/<int:pk>/report.html", views.report_page, name="web-report-html"),
    path("projects/<slug:slug>/import/", views.import_upload, name="web-import"),
    path("projects/<slug:slug>/incidents/", views.incidents_page, name="web-incidents"),
    path("projects/<slug:slug>/overview/", views.overview_page, name="web-overview"),
    path(
        "projects/<slug:slug>/overview/replay/",
        replay_views.overview_savings,
        name="web-overview-replay",
    ),
    path("projects/<slug:slug>/monitors/", views.monitor_new, name="web-monitor-new"),
    path(
        "projects/<slug:slug>/monitors/<int:monitor_pk>/delete/",
        views.monitor_remove,
        name="web-monitor-delete",
    ),
    path("projects/<slug:slug>/alerts/", views.alerts_page, name="web-alerts"),
    path("projects/<slug:slug>/compare/", views.sessions_compare_page, name="web-sessions-compare"),
    path("projects/<slug:slug>/export/steps.jsonl", views.export_steps, name="web-export"),
    # Permalinks: project slug, the agent's session id and step index, never database ids.
    path("p/<slug:slug>/<path:rest>", views.permalink, name="web-permalink"),
    path("projects/<slug:slug>/keys/", views.keys_page, name="web-keys"),
    path("projects/<slug:slug>/members/", views.members_page, name="web-members"),
    path("projects/<slug:slug>/members/<int:member_pk>/", views.member_change, name="web-member"),
    path("projects/<slug:slug>/keys/<int:key_pk>/revoke/", views.key_revoke, name="web-key-revoke"),
]

handler400 = "contextview.web.views.bad_request"
handler403 = "contextview.web.views.forbidden"
handler404 = "contextview.web.views.not_found"
handler500 = "contextview.web.views.server_error"
