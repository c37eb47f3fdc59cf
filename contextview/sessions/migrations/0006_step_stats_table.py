"""Step statistics move from columns of cv_step to cv_step_stats (see ``StepStats``).

Ready and failed statistics are copied; a pending step simply has no row. The
partial index for the step view's flagged-step navigation moves with them.
"""

from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models

from contextview.sessions.models import FLAGGED_SQL


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0005_step_model_tools_usage"),
        ("web", "0001_step_flagged_index"),
    ]

    operations = [
        migrations.CreateModel(
            name="StepStats",
            fields=[
                (
                    "step",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="computed",
                        serialize=False,
                        to="agent_sessions.step",
                    ),
                ),
                ("session_id", models.BigIntegerField()),
                ("index", models.IntegerField()),
                (
                    "status",
                    models.CharField(
                        choices=[("pending", "Pending"), ("ready", "Ready"), ("failed", "Failed")],
                        max_length=8,
                    ),
                ),
                ("stats", models.JSONField()),
            ],
            options={"db_table": "cv_step_stats"},
        ),
        migrations.AddConstraint(
            model_name="stepstats",
            constraint=models.UniqueConstraint(
                fields=("session_id", "index"), name="step_stats_index"
            ),
        ),
        migrations.RunSQL(
            "INSERT INTO cv_step_stats (step_id, session_id, index, status, stats) "
            "SELECT id, session_id, index, stats_status, stats FROM cv_step "
            "WHERE stats_status <> 'pending' AND stats IS NOT NULL",
            migrations.RunSQL.noop,
        ),
        migrations.RunSQL(
            "CREATE INDEX step_stats_flagged ON cv_step_stats (session_id, index) "
            f"WHERE {FLAGGED_SQL}",
            "DROP INDEX IF EXISTS step_stats_flagged",
        ),
        migrations.RemoveIndex(model_name="step", name="step_pending"),
        migrations.RemoveField(model_name="step", name="stats"),
        migrations.RemoveField(model_name="step", name="stats_status"),
    ]
