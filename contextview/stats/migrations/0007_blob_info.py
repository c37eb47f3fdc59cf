"""Token counts and key entities of a blob are kept in one row (cv_blob_info).

cv_token_count (a row per blob and encoding, keyed by both) and cv_blob_entities
(the entities and their keys as JSON) become one row a blob: the counts in a
column per common encoding, the entities as where they are in the blob's text
(``contextview.stats.blob_info``). Backwards, the two tables are filled again
from it, the keys stored as "" where they are the entities lowercased, as
``0006_entity_keys_lowercase`` left them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import psycopg
from django.db import migrations, models

from contextview.core.entities import entity_key
from contextview.stats.blob_info import TOKEN_COLUMNS, entities_pack, entities_unpack

_BATCH = 2000


def _streamed(schema_editor: Any, sql: str) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of `sql`, a batch at a time, read through a server-side cursor."""
    schema_editor.connection.ensure_connection()
    with psycopg.ServerCursor(schema_editor.connection.connection, "blob_info") as cursor:
        cursor.execute(sql)
        while rows := cursor.fetchmany(_BATCH):
            yield rows


def _cursor(schema_editor: Any) -> psycopg.Cursor[Any]:
    return psycopg.Cursor(schema_editor.connection.connection)


def info_fill(apps: Any, schema_editor: Any) -> None:
    # One row a blob, written once and in blob order (no dead rows, a dense index).
    counts = ", ".join(
        f"max(tokens) FILTER (WHERE encoding = '{e}') AS {c}" for e, c in TOKEN_COLUMNS.items()
    )
    common = ", ".join(f"'{e}'" for e in TOKEN_COLUMNS)
    tokens = (
        f"SELECT blob_id, {counts}, jsonb_object_agg(encoding, tokens) "
        f"FILTER (WHERE encoding NOT IN ({common})) AS other FROM cv_token_count GROUP BY blob_id"
    )
    columns = ", ".join(f"t.{c}" for c in TOKEN_COLUMNS.values())
    rows_sql = (
        f"SELECT b.id, b.text, e.entities, e.keys, {columns}, t.other::text "
        f"FROM ({tokens}) t FULL JOIN cv_blob_entities e ON e.blob_id = t.blob_id "
        "JOIN cv_blob b ON b.id = coalesce(t.blob_id, e.blob_id) ORDER BY b.id"
    )
    insert = (
        f"INSERT INTO cv_blob_info (blob_id, entities, {', '.join(TOKEN_COLUMNS.values())}, "
        "tokens_other) SELECT * FROM unnest(%b::bigint[], %b::bytea[], "
        + "%b::int[], " * len(TOKEN_COLUMNS)
        + "%b::jsonb[])"
    )
    with _cursor(schema_editor) as cursor:
        for rows in _streamed(schema_editor, rows_sql):
            packed = []
            for _, text, entities_json, keys_json, *_ in rows:
                if entities_json is None:
                    packed.append(None)
                    continue
                entities = orjson.loads(entities_json)
                if keys_json is None:  # written before keys were kept
                    keys = list(map(entity_key, entities))
                else:
                    # "": the entities' JSON lowercased (ASCII only, as 0006 stored them)
                    keys = orjson.loads(keys_json or _ascii_lower(entities_json))
                packed.append(entities_pack(entities, keys, text))
            columns_of_rows = list(zip(*rows, strict=True))
            cursor.execute(
                insert, [list(columns_of_rows[0]), packed, *map(list, columns_of_rows[4:])]
            )


def _ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


def info_split(apps: Any, schema_editor: Any) -> None:
    columns = " UNION ALL ".join(
        f"SELECT blob_id, '{e}', {c} FROM cv_blob_info WHERE {c} IS NOT NULL"
        for e, c in TOKEN_COLUMNS.items()
    )
    with _cursor(schema_editor) as cursor:
        cursor.execute(
            f"INSERT INTO cv_token_count (blob_id, encoding, tokens) {columns} UNION ALL "
            "SELECT i.blob_id, o.key, o.value::int FROM cv_blob_info i, "
            "jsonb_each_text(i.tokens_other) o"
        )
        for rows in _streamed(
            schema_editor,
            "SELECT i.blob_id, b.text, i.entities FROM cv_blob_info i "
            "JOIN cv_blob b ON b.id = i.blob_id WHERE i.entities IS NOT NULL ORDER BY 1",
        ):
            entities_column, keys_column = [], []
            for _, text, data in rows:
                entities, keys = entities_unpack(data, text)
                entities_json = orjson.dumps(entities).decode()
                keys_json = orjson.dumps(keys).decode()
                lowered = entities_json.isascii() and keys_json == entities_json.lower()
                entities_column.append(entities_json)
                keys_column.append("" if lowered else keys_json)
            cursor.execute(
                "INSERT INTO cv_blob_entities (blob_id, entities, keys) "
                "SELECT * FROM unnest(%b::bigint[], %b::text[], %b::text[])",
                [[row[0] for row in rows], entities_column, keys_column],
            )


class Migration(migrations.Migration):
    dependencies = [("stats", "0006_entity_keys_lowercase")]

    operations = [
        migrations.CreateModel(
            name="BlobInfo",
            fields=[
                (
                    "blob",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=models.deletion.CASCADE,
                        primary_key=True,
                        serialize=False,
                        to="agent_sessions.blob",
                    ),
                ),
                ("tokens_cl100k", models.IntegerField(null=True)),
                ("tokens_o200k", models.IntegerField(null=True)),
                ("tokens_other", models.JSONField(null=True)),
                ("entities", models.BinaryField(null=True)),
            ],
            options={"db_table": "cv_blob_info"},
        ),
        migrations.RunPython(info_fill, info_split),
        migrations.DeleteModel(name="BlobEntities"),
        migrations.DeleteModel(name="TokenCount"),
    ]
