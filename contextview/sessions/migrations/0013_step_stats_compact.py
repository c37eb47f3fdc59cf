"""Step statistics store operations' lost entities as positions in their originals'
entities, and what SQL does not read inside them as one JSON text.

A drop or a summary lost a part of what the originals it folded carried, and
those entities are stored once per content already: a stored list becomes the
originals' blob pks and where in their entities the lost ones are
(``stats_storage.OpEntities``), and the keys SQL does not look into are kept
under ``z`` as text, as the worker now writes them. Backwards, the lists are
written out again and every key is jsonb. Rows in the form asked for are left
alone, so either direction can run twice.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import orjson
from django.db import migrations

from contextview.sessions import stats_storage

_BATCH = 500

# The originals of each step's folds (explicit and inferred), in the order the
# worker reads them (``stats.services._FOLDS_SQL``).
_ORIGINALS_SQL = (
    "SELECT f.step_id, f.inferred, f.op_position, m.blob_id FROM cv_fold f "
    "CROSS JOIN LATERAL unnest(f.originals) WITH ORDINALITY AS u(pk, n) "
    "JOIN cv_message m ON m.id = u.pk WHERE f.step_id = ANY(%s) "
    "ORDER BY f.step_id, f.inferred, f.op_position, u.n"
)


def _rows(cursor: Any, last: int, *, text: bool) -> list[tuple[int, Any]]:
    # Packed rows (``stats_storage.is_packed``) in the form to convert from.
    test = "stats ? 'z'" if text else "stats ? 't' AND NOT stats ? 'z'"
    cursor.execute(
        f"SELECT step_id, stats::text FROM cv_step_stats WHERE step_id > %s AND {test} "
        "ORDER BY step_id LIMIT %s",
        [last, _BATCH],
    )
    return cursor.fetchall()


def _update(cursor: Any, ids: list[int], values: list[str]) -> None:
    if ids:
        cursor.execute(
            "UPDATE cv_step_stats t SET stats = x.s::jsonb "
            "FROM unnest(%s::bigint[], %s::text[]) AS x(i, s) WHERE t.step_id = x.i",
            [ids, values],
        )


def positions_rows(apps: Any, schema_editor: Any) -> None:
    from contextview.stats.services import entities_of_blobs

    with schema_editor.connection.cursor() as cursor:
        last = -1
        while rows := _rows(cursor, last, text=False):
            last = rows[-1][0]
            cursor.execute(_ORIGINALS_SQL, [[pk for pk, _ in rows]])
            originals: dict[tuple[int, bool, int], list[int]] = defaultdict(list)
            for step_pk, inferred, position, blob_pk in cursor.fetchall():
                originals[(step_pk, inferred, position)].append(blob_pk)
            pools = entities_of_blobs({pk for of in originals.values() for pk in of})
            ids, values = [], []
            for pk, text in rows:
                stats = stats_storage.unpack(orjson.loads(text))
                counts = {False: 0, True: 0}
                for op in stats["ops"]:
                    inferred = op.get("inferred") is True
                    position = counts[inferred]
                    counts[inferred] += 1
                    of = originals.get((pk, inferred, position))
                    if of and op["entities"]["lost"]:
                        pool = [entity for blob_pk in of for entity in pools[blob_pk]]
                        op["entities"] = stats_storage.OpEntities(
                            op["entities"], of=of, pool=pool
                        )
                ids.append(pk)
                values.append(stats_storage.packed_json(stats))
            _update(cursor, ids, values)


def lists_rows(apps: Any, schema_editor: Any) -> None:
    from contextview.sessions.models import stats_read

    with schema_editor.connection.cursor() as cursor:
        last = -1
        while rows := _rows(cursor, last, text=True):
            last = rows[-1][0]
            ids, values = [], []
            for pk, text in rows:
                stats = stats_read(orjson.loads(text))
                for op in stats["ops"]:
                    op["entities"] = dict(op["entities"])  # listed, not as positions
                ids.append(pk)
                values.append(orjson.dumps(stats_storage.pack(stats, text=False)).decode())
            _update(cursor, ids, values)


class Migration(migrations.Migration):
    # Its conversion reads the entities as the code reads them now, from cv_blob_info.
    dependencies = [
        ("agent_sessions", "0012_step_compact_columns"),
        ("stats", "0007_blob_info"),
    ]

    operations = [migrations.RunPython(positions_rows, lists_rows, elidable=True)]
