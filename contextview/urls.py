from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from contextview.api import api
from contextview.web import views

urlpatterns = [
    path("", views.sessions_page, name="sessions"),
    path("healthz", views.healthz, name="healthz"),
    path("login/", auth_views.LoginView.as_view(template_name="login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", api.urls),
    path("admin/", admin.site.urls),
]
