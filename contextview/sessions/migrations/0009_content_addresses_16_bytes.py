"""Content and message addresses are 16 bytes of sha256, not 32.

`blob_hash` and `message_hash` (contextview.core.messages) now cut the digest to
16 bytes; a message's address covers its content's address, so both are computed
again from what is stored, in either direction, a batch of rows at a time.
Tool definitions (a step's ``tools_blob``) are addressed as the list they are.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

BATCH = 2000


def _rows(cursor: Any, sql: str) -> Any:
    """The rows of `sql` (which selects an id first and reads ``id > %s``), in batches."""
    last = 0
    while True:
        cursor.execute(sql, [last, BATCH])
        rows = cursor.fetchall()
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def _readdress(size: int) -> Any:
    def run(apps: Any, schema_editor: Any) -> None:
        from contextview.core.messages import blob_hash, message_hash, message_payload
        from contextview.sessions.selectors import json_value, message_from_row

        with schema_editor.connection.cursor() as cursor:
            cursor.execute("SELECT DISTINCT tools_blob_id FROM cv_step WHERE tools_blob_id > 0")
            tools = {row[0] for row in cursor.fetchall()}
            address: dict[int, bytes] = {}
            for rows in _rows(
                cursor, "SELECT id, text, parts FROM cv_blob WHERE id > %s ORDER BY id LIMIT %s"
            ):
                for pk, text, parts in rows:
                    if pk in tools:
                        value = json_value(parts)
                    else:
                        row = (None, None, "", None, False, False, None, text, parts)
                        value = message_payload(message_from_row(row))
                    address[pk] = blob_hash(value, size)
                cursor.execute(
                    "UPDATE cv_blob b SET hash = x.h FROM unnest(%s::bigint[], %s::bytea[]) "
                    "AS x(i, h) WHERE b.id = x.i",
                    [[pk for pk, _, _ in rows], [address[pk] for pk, _, _ in rows]],
                )
            for rows in _rows(
                cursor,
                "SELECT m.id, m.blob_id, m.msg_id, m.role, m.partition, m.tool, m.pinned, "
                "m.expirable, m.extra, b.text, b.parts FROM cv_message m "
                "JOIN cv_blob b ON b.id = m.blob_id WHERE m.id > %s ORDER BY m.id LIMIT %s",
            ):
                hashes = [message_hash(message_from_row(r[2:]), blob=address[r[1]]) for r in rows]
                cursor.execute(
                    "UPDATE cv_message m SET hash = x.h FROM unnest(%s::bigint[], %s::bytea[]) "
                    "AS x(i, h) WHERE m.id = x.i",
                    [[r[0] for r in rows], hashes],
                )

    return run


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0008_session_message_one_key")]

    operations = [migrations.RunPython(_readdress(16), _readdress(32), elidable=False)]
