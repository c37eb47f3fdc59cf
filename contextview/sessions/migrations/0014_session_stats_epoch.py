"""A session's statistics runs are counted (``Session.stats_epoch``), so that a worker
process can carry what a run of its own worked out to the session's next run. The
step's body hash is declared as the 16 bytes stored since migration 0012 (no change
in the database)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agent_sessions", "0013_step_stats_compact"),
    ]

    operations = [
        migrations.AddField(
            model_name="session",
            name="stats_epoch",
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.AlterField(
            model_name="step",
            name="body_hash",
            field=models.BinaryField(max_length=16),
        ),
    ]
