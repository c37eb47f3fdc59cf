"""Database helpers shared by the apps' services."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.db import connection


@contextmanager
def binary_cursor() -> Iterator[psycopg.Cursor[Any]]:
    """A server-side-binding cursor on Django's connection, in its transaction.

    Django binds parameters client-side, escaping every value into the SQL text;
    bulk statements carry megabytes of text and JSON, which go much faster as
    binary arrays (``%b``) bound by the server.
    """
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        yield cursor
