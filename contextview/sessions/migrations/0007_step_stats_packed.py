"""Step statistics are stored packed (``contextview.sessions.stats_storage``).

Rewrites every stored statistics row in its packed form (backwards: unpacked),
in batches. A row already in the form asked for is left alone, so running either
direction twice changes nothing. Failed steps' ``{"error": ...}`` rows are the
same in both forms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from django.db import migrations

import contextview.sessions.models
from contextview.sessions import stats_storage

_BATCH = 2000


def _rewrite(schema_editor: Any, convert: Callable[[dict[str, Any]], dict[str, Any] | None]) -> None:
    with schema_editor.connection.cursor() as cursor:
        last = -1
        while True:
            cursor.execute(
                "SELECT step_id, stats::text FROM cv_step_stats WHERE step_id > %s "
                "ORDER BY step_id LIMIT %s",
                [last, _BATCH],
            )
            rows = cursor.fetchall()
            if not rows:
                return
            last = rows[-1][0]
            ids, values = [], []
            for pk, text in rows:
                stats = orjson.loads(text)
                if type(stats) is dict:
                    converted = convert(stats)
                    if converted is not None:
                        ids.append(pk)
                        values.append(orjson.dumps(converted).decode())
            if ids:
                cursor.execute(
                    "UPDATE cv_step_stats t SET stats = x.s::jsonb "
                    "FROM unnest(%s::bigint[], %s::text[]) AS x(i, s) WHERE t.step_id = x.i",
                    [ids, values],
                )


def _packed(stats: dict[str, Any]) -> dict[str, Any] | None:
    if stats_storage.is_packed(stats):
        return None  # packed already
    packed = stats_storage.pack(stats)
    return None if packed == stats else packed


def _unpacked(stats: dict[str, Any]) -> dict[str, Any] | None:
    if not stats_storage.is_packed(stats):
        return None  # not packed
    return stats_storage.unpack(stats)


def pack_rows(apps: Any, schema_editor: Any) -> None:
    _rewrite(schema_editor, _packed)


def unpack_rows(apps: Any, schema_editor: Any) -> None:
    _rewrite(schema_editor, _unpacked)


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0006_step_stats_table")]

    operations = [
        migrations.AlterField(
            model_name="stepstats",
            name="stats",
            field=contextview.sessions.models.StatsField(),
        ),
        migrations.RunPython(pack_rows, unpack_rows, elidable=True),
    ]
