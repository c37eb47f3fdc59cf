"""The benchmarks' own database, beside the one they are pointed at.

The benchmarks that ingest and compute statistics in their own process (``bench.stats``,
``bench.pages``, ``bench.replay``, ``bench.import``) work in a database of their own on
the server of the ``--database-url`` given: its name with ``_bench`` appended, created
and migrated when missing. A running stack's worker (``scripts/run``) computes every
session of its database that it is told of or finds pending: in that database it would
race a benchmark for its sessions (the benchmark's computation finding the session
busy) and change its figures. Nothing of the stack's own data is touched either.
"""

from __future__ import annotations

import os
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import psycopg
from psycopg import sql

SUFFIX = "_bench"


def own_database(database_url: str) -> str:
    """The URL of the benchmarks' database on `database_url`'s server, created if missing."""
    parts = urlsplit(database_url)
    name = unquote(parts.path.lstrip("/")) or "postgres"
    own = name if name.endswith(SUFFIX) else name + SUFFIX
    with psycopg.connect(database_url, autocommit=True, connect_timeout=10) as connection:
        found = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [own])
        if found.fetchone() is None:
            connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(own)))
    return urlunsplit(parts._replace(path="/" + quote(own, safe="")))


def django_setup(database_url: str) -> None:
    """Django on the benchmarks' own database (see the module), migrated."""
    os.environ["DATABASE_URL"] = own_database(database_url)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextview.settings")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)


def static_collected() -> None:
    """Collect the static files when they have not been: the pages a benchmark renders
    name them by their hashed names, read from the manifest (as a served page does)."""
    from pathlib import Path

    from django.conf import settings
    from django.core.management import call_command

    if not Path(settings.STATIC_ROOT, "staticfiles.json").exists():
        call_command("collectstatic", interactive=False, verbosity=0)
