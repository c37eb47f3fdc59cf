"""The key-entity rules changed: what the old ones found is found again.

2026-12-04: a terminal's colour codes ("\\x1b[0m"), lengths in a style ("width: 8px"),
colours in quotes ("#888"), short tool-call ids of test fixtures (toolu_123), escapes
(\\u001b), words inside base64, flags and handlers named after errors (is_error,
load_errors), calls that look like files (console.log(...)), fences taken for quotes,
quotes paired across a JSON string held in another, and one symbol of code in
backticks (`:line`, `render/2`) are no longer key entities; nor is a string literal
after Elixir's and Ruby's =~, or a key's value on a line that a tool numbered
("139→  uuid: ...").

What was stored is found again (``contextview.stats.rules``).
"""

from __future__ import annotations

from django.db import migrations

from contextview.stats.rules import ENTITIES_AND_STATISTICS_AGAIN


class Migration(migrations.Migration):
    dependencies = [("stats", "0008_replay_totals"), ("agent_sessions", "0017_session_aggregates_inline"), ("web", "0001_step_flagged_index")]

    operations = [
        migrations.RunSQL(
            ENTITIES_AND_STATISTICS_AGAIN, migrations.RunSQL.noop, elidable=True
        )
    ]
