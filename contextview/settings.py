"""Settings, read from the environment through small strict helpers.

Every variable has a default that works for local use; a malformed value stops
the process with a message naming the variable instead of limping on.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def envstr(name: str, default: str) -> str:
    return os.environ.get(name, default)


def envbool(name: str, default: str) -> bool:
    value = os.environ.get(name, default).strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ImproperlyConfigured(f"{name} must be true or false, not {value!r}")


def envint(name: str, default: str) -> int:
    value = os.environ.get(name, default)
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from None


def database_from_url(url: str) -> dict[str, object]:
    """A Django DATABASES entry from a postgres:// URL (``?host=`` may name a socket folder)."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ImproperlyConfigured(f"DATABASE_URL must be a postgres:// URL, not {url!r}")
    query = parse_qs(parts.query)
    host = query.pop("host", [parts.hostname or ""])[0]
    options: dict[str, object] = {k: v[0] for k, v in query.items()}
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "postgres",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": host,
        "PORT": str(parts.port or ""),
        "OPTIONS": options,
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }


DEBUG = envbool("DEBUG", "false")
SECRET_KEY = envstr("SECRET_KEY", "contextview-local-development-key-not-for-production")
ALLOWED_HOSTS = [h.strip() for h in envstr("ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")]

DATABASES = {
    "default": database_from_url(
        envstr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/contextview")
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "contextview.projects",
    "contextview.sessions",
    "contextview.ingest",
    "contextview.stats",
    "contextview.postmortems",
    "contextview.web",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "contextview.web.middleware.ContentSecurityPolicyMiddleware",
]

ROOT_URLCONF = "contextview.urls"
WSGI_APPLICATION = "contextview.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

AUTH_PASSWORD_VALIDATORS: list[dict[str, str]] = []
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "data" / "staticfiles"
# Serve static files from the app itself (no CDN, no separate web server needed);
# with DEBUG they are found in place, so tests and development need no collectstatic.
WHITENOISE_USE_FINDERS = DEBUG
WHITENOISE_AUTOREFRESH = DEBUG

# Ingest limits of the contract; configurable.
INGEST_MAX_EVENTS = envint("INGEST_MAX_EVENTS", "1000")
INGEST_MAX_BYTES = envint("INGEST_MAX_BYTES", str(20 * 1024 * 1024))
# POST /api/v1/import: the largest upload taken (the contract asks for at least 200 MiB).
IMPORT_MAX_BYTES = envint("IMPORT_MAX_BYTES", str(256 * 1024 * 1024))
# Requests per second per API key; 0 disables the limit.
INGEST_RATE_LIMIT = envint("INGEST_RATE_LIMIT", "50")

CELERY_BROKER_URL = envstr("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = envint("CELERY_TASK_TIME_LIMIT", "300")
CELERY_TASK_SOFT_TIME_LIMIT = envint("CELERY_TASK_SOFT_TIME_LIMIT", "240")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Ingest queues work after commit; with the broker down it must give up quickly
# (the periodic sweep finds the work later) rather than hold the agent's request.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.5,
}
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 1}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "WARNING")},
}

# Statistics workers: steps left pending longer than this are re-queued by beat.
STATS_SWEEP_AFTER_SECONDS = envint("STATS_SWEEP_AFTER_SECONDS", "60")
# Per worker process: messages, token counts and entities kept between tasks.
STATS_CACHE_MB = envint("STATS_CACHE_MB", "256")
CELERY_BEAT_SCHEDULE = {
    "sweep-pending-stats": {
        "task": "contextview.stats.tasks.sweep_pending_stats",
        "schedule": float(envint("STATS_SWEEP_EVERY_SECONDS", "30")),
    }
}
