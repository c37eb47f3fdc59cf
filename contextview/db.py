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


def each_key_sql(keys: str, select: str) -> str:
    """A query that runs `select` once for each key of the array `keys` (an SQL
    expression, usually a ``%b`` parameter), where `select` names the key ``x.k``;
    the rows of all of them.

    For looking up a list of keys: each is found through its index, whatever the
    planner knows of the table, so the work grows with the list and not with the
    table. Written as a filter (``k = ANY(...)``) or as a join with the list, a table
    not yet analyzed could be read whole with each row compared to every key (84 ms
    for 2,238 messages, against 15-21 ms; 25 ms for 300 hashes in a project of 7,000
    messages). ``OFFSET 0`` keeps the planner from turning the lookups back into a join.
    """
    return f"SELECT r.* FROM unnest({keys}) AS x(k), LATERAL ({select} OFFSET 0) r"
