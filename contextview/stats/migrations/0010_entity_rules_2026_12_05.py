"""The key-entity rules changed, and so did what a step needed: what was stored is
found again (``contextview.stats.rules``).

2026-12-05: a name with parts that someone put in double or single quotes
("inventory.timeout", 'use_cache') is a key entity, as the contract's quoted strings
are; a quoted key of a Ruby, Elixir or PHP map ("file_path" => ...) is not. And what
the agent wrote in reply to a call (the step's output) is a need of that step.
"""

from __future__ import annotations

from django.db import migrations

from contextview.stats.rules import ENTITIES_AND_STATISTICS_AGAIN


class Migration(migrations.Migration):
    dependencies = [("stats", "0009_entity_rules_2026_12_04")]

    operations = [
        migrations.RunSQL(ENTITIES_AND_STATISTICS_AGAIN, migrations.RunSQL.noop, elidable=True)
    ]
