"""An index for the step view's "previous/next flagged step" ([ and ]).

Finding the nearest flagged step otherwise reads every step's statistics between
here and there; in a long session with few flags that is thousands of rows. The
predicate is the one ``contextview.web.selectors.step_neighbors`` queries with,
word for word, so PostgreSQL can use this partial index for it.
"""

from __future__ import annotations

from django.db import migrations

FLAGGED = "jsonb_typeof(stats->'flags') = 'array' AND jsonb_array_length(stats->'flags') > 0"


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0001_initial")]

    operations = [
        migrations.RunSQL(
            f"CREATE INDEX IF NOT EXISTS step_flagged ON cv_step (session_id, index) WHERE {FLAGGED}",
            "DROP INDEX IF EXISTS step_flagged",
        )
    ]
