"""Entity keys that are the entities' JSON lowercased are stored as "".

Nearly every blob's keys are: identifiers, codes and paths whose key is their
lowercase form. Readers expand "" back (``contextview.stats.services._KEYS_SQL``).
"""

from __future__ import annotations

from django.db import migrations

_LOWERCASED = "keys = lower(entities COLLATE \"C\")"


class Migration(migrations.Migration):
    dependencies = [("stats", "0005_token_count_composite_key")]

    operations = [
        migrations.RunSQL(
            f"UPDATE cv_blob_entities SET keys = '' WHERE {_LOWERCASED}",
            "UPDATE cv_blob_entities SET keys = lower(entities COLLATE \"C\") WHERE keys = ''",
            elidable=True,
        )
    ]
