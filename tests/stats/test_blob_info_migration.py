"""Migration 0007 moves cv_token_count and cv_blob_entities into cv_blob_info and
back, without changing what the workers and the read API get from them."""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from contextview.core.entities import extract_entities_keyed
from contextview.sessions.selectors import token_counts
from contextview.stats import services

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BEFORE = [("stats", "0006_entity_keys_lowercase")]
AFTER = [("stats", "0007_blob_info")]

TEXTS = [
    "order SO20260101007 failed with E1234 at /var/Log/X.txt",
    "the call took 3 s and returned 512MB",
    'the bank said "Überweisung Fehlt" for A12345',
    "GET https://shop.example/api/orders/SO20260101042 returned 504",
    "nothing to keep here",
    "tools: no entities were ever extracted from this one, v2 E7",
]


def _keys_stored(entities_json: str, keys: list[str]) -> str:
    """The keys as 0006 stored them: "" when they are the entities' JSON lowercased."""
    keys_json = orjson.dumps(keys).decode()
    lowered = entities_json.isascii() and keys_json == entities_json.lower()
    return "" if lowered else keys_json


def _migrate(targets: list[tuple[str, str]] | None = None) -> None:
    """To `targets`, or to every app's latest migration: going back to stats 0006 took
    back the later migrations of other apps that depend on it, and the tests after
    this one need them."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets or executor.loader.graph.leaf_nodes())


@pytest.fixture
def old_rows() -> Iterator[dict[int, str]]:
    """Blobs with counts and entities as 0006 stored them: keys "" when lowercased,
    null on rows from before keys were kept."""
    _migrate(BEFORE)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO projects_project (name, slug, created_at) "
                "VALUES ('p', 'p', now()) RETURNING id"
            )
            (project,) = cursor.fetchone()
            texts = {}
            for n, text in enumerate(TEXTS):
                cursor.execute(
                    "INSERT INTO cv_blob (project_id, hash, text) VALUES (%s, %s, %s) RETURNING id",
                    [project, bytes([n]), text],
                )
                (pk,) = cursor.fetchone()
                texts[pk] = text
                cursor.execute(
                    "INSERT INTO cv_token_count (blob_id, encoding, tokens) VALUES "
                    "(%s, 'cl100k_base', %s), (%s, 'p50k_base', %s)",
                    [pk, 10 + n, pk, 20 + n],
                )
                if n == len(TEXTS) - 1:
                    continue  # counted, never extracted
                entities, keys = extract_entities_keyed(text)
                entities_json = orjson.dumps(entities).decode()
                cursor.execute(
                    "INSERT INTO cv_blob_entities (blob_id, entities, keys) VALUES (%s, %s, %s)",
                    [pk, entities_json, None if n == 0 else _keys_stored(entities_json, keys)],
                )
        yield texts
    finally:
        _migrate()


def _old_tables() -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM cv_token_count ORDER BY 1, 2")
        counts = cursor.fetchall()
        cursor.execute("SELECT blob_id, entities, keys FROM cv_blob_entities ORDER BY 1")
        entities = cursor.fetchall()
    return counts, entities


def test_it_moves_counts_and_entities_both_ways(old_rows: dict[int, str]) -> None:
    counts_before, entities_before = _old_tables()
    _migrate(AFTER)
    services.caches_clear()
    extracted = dict(list(old_rows.items())[:-1])
    assert services.entities_for_blobs(blobs=extracted) == {
        pk: extract_entities_keyed(text) for pk, text in extracted.items()
    }
    pks = list(old_rows)
    assert token_counts(blob_pks=pks, encoding="cl100k_base") == {
        pk: 10 + n for n, pk in enumerate(pks)
    }
    assert token_counts(blob_pks=pks, encoding="p50k_base") == {
        pk: 20 + n for n, pk in enumerate(pks)
    }
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(entities) FROM cv_blob_info")
        assert cursor.fetchone() == (len(TEXTS), len(TEXTS) - 1)

    _migrate(BEFORE)
    counts_after, entities_after = _old_tables()
    assert counts_after == counts_before
    # The row from before keys were kept comes back with its keys.
    first = entities_before[0]
    keys = _keys_stored(first[1], extract_entities_keyed(old_rows[first[0]])[1])
    assert entities_after[0] == (*first[:2], keys)
    assert entities_after[1:] == entities_before[1:]
