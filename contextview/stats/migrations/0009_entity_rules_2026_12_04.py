"""The key-entity rules changed: what the old ones found is found again.

2026-12-04: a terminal's colour codes ("\\x1b[0m"), lengths in a style ("width: 8px"),
colours in quotes ("#888"), short tool-call ids of test fixtures (toolu_123), escapes
(\\u001b), words inside base64, flags and handlers named after errors (is_error,
load_errors), calls that look like files (console.log(...)), fences taken for quotes,
quotes paired across a JSON string held in another, and one symbol of code in
backticks (`:line`, `render/2`) are no longer key entities; nor is a string literal
after Elixir's and Ruby's =~, or a key's value on a line that a tool numbered
("139→  uuid: ...").

Entities are stored once per content (cv_blob_info.entities), and an operation's
lost entities as places in them, so both go together: the stored entities are set to
null, to be extracted again when next asked for, and every session's step statistics
are deleted, the session pending with its epoch moved on (kept replay totals are
summed again), for the statistics workers' sweep to compute them again.
"""

from __future__ import annotations

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("stats", "0008_replay_totals"), ("agent_sessions", "0017_session_aggregates_inline"), ("web", "0001_step_flagged_index")]

    operations = [
        migrations.RunSQL(
            [
                "UPDATE cv_blob_info SET entities = NULL WHERE entities IS NOT NULL",
                "TRUNCATE cv_step_stats",
                "UPDATE cv_session SET stats_status = 'pending', stats_steps_done = 0, "
                "stats_epoch = stats_epoch + 1",
            ],
            migrations.RunSQL.noop,
            elidable=True,
        )
    ]
