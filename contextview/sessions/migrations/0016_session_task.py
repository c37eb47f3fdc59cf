"""A session keeps what it was asked to do, in a line (``Session.task``), so that the
sessions list shows it with no query per row. Ingest fills it from then on; here the
sessions already stored get theirs: their metadata's "task", else the task or
question of their first step's context, read a batch of sessions at a time."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models

_BATCH = 200

# Each session of a batch, its metadata's task when that is a text, and its first
# step's context (none for a session without steps).
_FIRSTS_SQL = (
    "SELECT s.id, CASE WHEN jsonb_typeof(s.metadata->'task') = 'string' "
    "THEN s.metadata->>'task' END, st.before_refs FROM cv_session s "
    "LEFT JOIN LATERAL (SELECT before_refs FROM cv_step WHERE session_id = s.id "
    "ORDER BY index LIMIT 1) st ON true WHERE s.id > %s ORDER BY s.id LIMIT %s"
)


def tasks_filled(apps: Any, schema_editor: Any) -> None:
    from contextview.core.layout import one_line, task_line
    from contextview.sessions.selectors import contexts_by_refs

    with schema_editor.connection.cursor() as cursor:
        last = 0
        while True:
            cursor.execute(_FIRSTS_SQL, [last, _BATCH])
            rows = cursor.fetchall()
            if not rows:
                return
            last = rows[-1][0]
            refs = [bytes(r) for _, task, r in rows if r is not None and not (task or "").strip()]
            contexts = contexts_by_refs(refs)
            ids, tasks = [], []
            for pk, task, r in rows:
                if (task or "").strip():
                    line = one_line(task)
                elif r is not None:
                    line = task_line([stored.message for stored in contexts[bytes(r)]])
                else:
                    line = ""
                if line:
                    ids.append(pk)
                    tasks.append(line)
            if ids:
                cursor.execute(
                    "UPDATE cv_session SET task = x.t "
                    "FROM unnest(%s::bigint[], %s::text[]) AS x(i, t) WHERE id = x.i",
                    [ids, tasks],
                )


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0015_step_stats_inline"),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="task",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.RunPython(tasks_filled, migrations.RunPython.noop, elidable=True),
    ]
