"""Settings, read from the environment through small strict helpers.

Every variable has a default that works for local use; a malformed value stops
the process with a message naming the variable instead of limping on.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured
from whitenoise.compress import Compressor

from contextview.core.cost import PRICES, Price, prices_from_json

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


def envint(name: str, default: str, *, minimum: int | None = None) -> int:
    value = os.environ.get(name, default)
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be {minimum} or more, not {number}")
    return number


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def envprices(name: str) -> dict[str, Price]:
    """The built-in price table, with the models a JSON object in `name` sets."""
    value = os.environ.get(name, "").strip()
    try:
        return {**PRICES, **(prices_from_json(value) if value else {})}
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None


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
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "localhost,127.0.0.1")

# HTTPS. The defaults suit plain HTTP on a developer's machine; behind HTTPS in
# production set SECURE_COOKIES, SECURE_HSTS_SECONDS and, unless the proxy already
# redirects, SECURE_SSL_REDIRECT (README, "Operating it").
# BEHIND_PROXY: a reverse proxy that sets X-Forwarded-Proto and appends to
# X-Forwarded-For stands in front (docker-compose.yml's nginx); trust those headers.
# Without one, a client could claim HTTPS or another address by sending them itself.
BEHIND_PROXY = envbool("BEHIND_PROXY", "false")
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if BEHIND_PROXY else None
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = envbool("SECURE_COOKIES", "false")
SECURE_HSTS_SECONDS = envint("SECURE_HSTS_SECONDS", "0", minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("SECURE_HSTS_INCLUDE_SUBDOMAINS", "false")
SECURE_SSL_REDIRECT = envbool("SECURE_SSL_REDIRECT", "false")
# Health checks probe the container over plain HTTP from inside.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")
CSRF_FAILURE_VIEW = "contextview.web.views.csrf_failure"

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
    "axes",
    # Only for its static files and templates: the API explorer's Swagger UI, served
    # from here rather than a CDN.
    "ninja",
    "contextview.projects",
    "contextview.sessions",
    "contextview.ingest",
    "contextview.stats",
    "contextview.postmortems",
    "contextview.monitors",
    "contextview.web",
]

MIDDLEWARE = [
    # Outermost, so it sees every answer, however early a later one gave it.
    "contextview.web.middleware.DrainUnreadBodyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "contextview.web.middleware.RefuseNulMiddleware",
    "contextview.web.middleware.MachineErrorsMiddleware",
    "contextview.web.middleware.HeadAsGetMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "contextview.web.middleware.ContentSecurityPolicyMiddleware",
    # Last, as django-axes asks: it answers a locked-out sign-in.
    "axes.middleware.AxesMiddleware",
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
# Sign-in throttling (django-axes): after SIGNIN_FAILURE_LIMIT failed attempts for
# one username from one address, that pair is refused (429) for
# SIGNIN_LOCKOUT_MINUTES; other users, and the same user elsewhere, sign in as usual.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = envint("SIGNIN_FAILURE_LIMIT", "5", minimum=1)
# At least a minute: no cool-off at all would make django-axes lock out for good.
AXES_COOLOFF_TIME = timedelta(minutes=envint("SIGNIN_LOCKOUT_MINUTES", "15", minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_DISABLE_ACCESS_LOG = True
AXES_LOCKOUT_CALLABLE = "contextview.web.signin.lockout_page"
AXES_CLIENT_IP_CALLABLE = "contextview.web.signin.client_address"
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "contextview.web.staticfiles.PlotlyFinder",  # vendor/plotly.min.js from the package
]
STATIC_ROOT = Path(envstr("STATIC_ROOT", str(BASE_DIR / "data" / "staticfiles")))
# Served by the app itself through WhiteNoise (no CDN, no separate web server):
# collectstatic writes each file under a name with its content's hash, plus gzip and
# brotli copies, and WhiteNoise sends the compressed copy the browser accepts, cached
# for a year. Pages name the hashed files, so run collectstatic before serving
# (`python -m contextview.devstack run` and the Dockerfile do). With DEBUG, or before
# collectstatic has run, files are named and found in place, uncompressed.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "contextview.web.staticfiles.HashedStaticStorage"},
}
# Only the hashed names are kept and compressed, and source maps (read by a browser's
# developer tools alone) are not compressed: collectstatic then takes seconds, not minutes.
WHITENOISE_KEEP_ONLY_HASHED_FILES = True
WHITENOISE_SKIP_COMPRESS_EXTENSIONS = [*Compressor.SKIP_COMPRESS_EXTENSIONS, "map"]
WHITENOISE_USE_FINDERS = DEBUG or not (STATIC_ROOT / "staticfiles.json").is_file()
WHITENOISE_AUTOREFRESH = DEBUG

# Ingest limits of the contract; configurable.
INGEST_MAX_EVENTS = envint("INGEST_MAX_EVENTS", "1000")
INGEST_MAX_BYTES = envint("INGEST_MAX_BYTES", str(20 * 1024 * 1024))
# POST /api/v1/import: the largest upload taken (the contract asks for at least 200 MiB).
IMPORT_MAX_BYTES = envint("IMPORT_MAX_BYTES", str(256 * 1024 * 1024))
# Requests per second per API key; 0 disables the limit.
INGEST_RATE_LIMIT = envint("INGEST_RATE_LIMIT", "50")
# POST /v1/traces: the body limit after decompression (the OTel exporters' own default
# request limit is 64 MiB), and how long a request waits for another one holding the
# same session before it is answered 503 (retried by the exporter).
OTLP_MAX_BYTES = envint("OTLP_MAX_BYTES", str(64 * 1024 * 1024))
OTLP_LOCK_TIMEOUT_MS = envint("OTLP_LOCK_TIMEOUT_MS", "2000")
# How many exports all web processes store at once; more are answered 503 to be retried
# (0: no bound). About the number of cores: past that they only slow each other down.
OTLP_MAX_CONCURRENT = envint("OTLP_MAX_CONCURRENT", "4")
# How long an export waits for one of those to come free before it is answered 503.
OTLP_SLOT_WAIT_MS = envint("OTLP_SLOT_WAIT_MS", "500")
# A late span is put in its place by storing the steps after it again, up to this many;
# a span later than that is added at the end of its session.
OTLP_REORDER_MAX_STEPS = envint("OTLP_REORDER_MAX_STEPS", "1000")

CELERY_BROKER_URL = envstr("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
# The queue tasks are sent to, from the web and from tasks that queue others (beat's
# sweeps, an evaluation queueing its webhooks).
CELERY_TASK_DEFAULT_QUEUE = envstr("CELERY_TASK_DEFAULT_QUEUE", "celery")
# Statistics queues. With N > 1, a session's computations always go to the same one of
# N queues (``stats.0`` ... ``stats.<N-1>``, each consumed by one worker process of
# concurrency 1): the process that computed a live session's last step computes its
# next one from what it kept, rather than reading back every step before it. 1: all on
# the default queue.
STATS_QUEUES = envint("STATS_QUEUES", "1", minimum=1)
# How much lower than the web a worker process runs (os.nice; 0: the same).
WORKER_NICE = envint("WORKER_NICE", "10", minimum=0)
CELERY_TASK_ROUTES = ("contextview.stats.scheduling.stats_route",)
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
    "filters": {"refusals": {"()": "contextview.web.logs.RefusalsInOneLine"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["refusals"]}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "WARNING")},
}

# Statistics workers: steps left pending longer than this are re-queued by beat.
STATS_SWEEP_AFTER_SECONDS = envint("STATS_SWEEP_AFTER_SECONDS", "60")
# Per worker process: messages, token counts and entities kept between tasks.
STATS_CACHE_MB = envint("STATS_CACHE_MB", "256")
# Work a statistics worker commits at once: a killed worker loses at most about this.
STATS_CHUNK_MS = envint("STATS_CHUNK_MS", "1000")
# A running session with no event for this long is shown as stale (its agent taken
# for gone) and its pending directives as expired; its page polls for new steps
# every LIVE_POLL_SECONDS.
# Cost: US dollars per million tokens (input, cached input, output) by model; the
# table is contextview.core.cost.PRICES, and MODEL_PRICES (a JSON object) adds or
# replaces models.
MODEL_PRICES = envprices("MODEL_PRICES")
SESSION_STALE_AFTER_SECONDS = envint("SESSION_STALE_AFTER_SECONDS", "900", minimum=1)
LIVE_POLL_SECONDS = envint("LIVE_POLL_SECONDS", "3", minimum=1)
CELERY_BEAT_SCHEDULE = {
    "sweep-pending-stats": {
        "task": "contextview.stats.tasks.sweep_pending_stats",
        "schedule": float(envint("STATS_SWEEP_EVERY_SECONDS", "30")),
    }
}

# Monitors: how often beat evaluates every rule (at most a minute, as the contract
# asks), the hosts webhooks may be sent to (empty: any; set it so the server cannot
# be made to call inside its own network), and how webhooks are retried.
MONITOR_EVERY_SECONDS = envint("MONITOR_EVERY_SECONDS", "60", minimum=1)
if MONITOR_EVERY_SECONDS > 60:
    raise ImproperlyConfigured("MONITOR_EVERY_SECONDS must be 60 or less")
MONITOR_WEBHOOK_ALLOWED_HOSTS = [h.lower() for h in envlist("MONITOR_WEBHOOK_ALLOWED_HOSTS", "")]
MONITOR_WEBHOOK_TIMEOUT_SECONDS = envint("MONITOR_WEBHOOK_TIMEOUT_SECONDS", "5", minimum=1)
MONITOR_WEBHOOK_MAX_RETRIES = envint("MONITOR_WEBHOOK_MAX_RETRIES", "6", minimum=0)
# First retry after this many seconds, doubling each time (at most 10 minutes).
MONITOR_WEBHOOK_BACKOFF_SECONDS = envint("MONITOR_WEBHOOK_BACKOFF_SECONDS", "5", minimum=1)
# Email: sent to a monitor's `email` through Django's email backend when EMAIL_HOST is set.
EMAIL_HOST = envstr("EMAIL_HOST", "")
EMAIL_PORT = envint("EMAIL_PORT", "25")
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "contextview@localhost")
CELERY_BEAT_SCHEDULE["evaluate-monitors"] = {
    "task": "contextview.monitors.tasks.evaluate_monitors",
    "schedule": float(MONITOR_EVERY_SECONDS),
    # A backed-up worker runs the latest evaluation, not a queue of stale ones.
    "options": {"expires": float(MONITOR_EVERY_SECONDS)},
}
