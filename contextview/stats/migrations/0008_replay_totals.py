"""What a session's replay under a policy summed, for the overview's savings table."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0014_session_stats_epoch"),
        ("stats", "0007_blob_info"),
    ]

    operations = [
        migrations.CreateModel(
            name="ReplayTotals",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("policy", models.TextField()),
                ("step_count", models.IntegerField()),
                ("stats_epoch", models.BigIntegerField()),
                ("totals", models.JSONField()),
                (
                    "session",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="agent_sessions.session",
                    ),
                ),
            ],
            options={
                "db_table": "cv_replay_totals",
                "constraints": [
                    models.UniqueConstraint(
                        fields=("session", "policy"), name="replay_totals_policy"
                    )
                ],
            },
        ),
    ]
