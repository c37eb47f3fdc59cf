"""A step's statistics stay in its row up to a page's worth (``toast_tuple_target``).

The statistics of a step that summarized or dropped many messages (their ids, where
their lost entities sit) run to a few kilobytes, past the 2 kB at which PostgreSQL
moves a value out to the table's TOAST relation. Those ids compress poorly, so each
such value went out of line whole: a TOAST row per 2 kB chunk, an index entry per
chunk, and the TOAST relation's own free-space map, for values that fit in the row.
Kept in the row, they cost their bytes alone and are read without the extra
lookup; a value past a page still goes out of line.

``cv_session_message`` loses ``created_at``, which nothing read (nor showed): eight
bytes on every message a session records.
"""

from django.db import migrations

INLINE = "ALTER TABLE cv_step_stats SET (toast_tuple_target = 8160)"
DEFAULT = "ALTER TABLE cv_step_stats RESET (toast_tuple_target)"


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0014_session_stats_epoch"),
    ]

    operations = [
        migrations.RunSQL(INLINE, DEFAULT),
        migrations.RemoveField(model_name="sessionmessage", name="created_at"),
    ]
