"""A session's sums stay in its row, compressed (``SET STORAGE MAIN``).

Past 2 kB PostgreSQL compresses a value and, by default, moves it out of line when
the row is still over 2 kB. A session's aggregates (its lists of lost entities,
amnesia links, refetches and unreferenced results) compress to some 2-3 kB, so each
went to the table's TOAST relation: a chunk row, its index entry, and that
relation's own pages and free-space map, read back through an extra lookup on
every page that shows the session's sums. Stored as MAIN they are still
compressed, and leave the row only when it would not fit in a page.
"""

from django.db import migrations

INLINE = "ALTER TABLE cv_session ALTER COLUMN aggregates SET STORAGE MAIN"
DEFAULT = "ALTER TABLE cv_session ALTER COLUMN aggregates SET STORAGE EXTENDED"


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0016_session_task"),
    ]

    operations = [migrations.RunSQL(INLINE, DEFAULT)]
