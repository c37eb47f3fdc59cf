"""cv_blob and cv_message lose created_at, which nothing read: content is stored
once per project, and when a session recorded it is cv_session_message's.
Their address columns are 16 bytes wide (0009)."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0009_content_addresses_16_bytes")]

    operations = [
        migrations.RemoveField(model_name="blob", name="created_at"),
        migrations.RemoveField(model_name="message", name="created_at"),
        migrations.AlterField(
            model_name="blob", name="hash", field=models.BinaryField(max_length=16)
        ),
        migrations.AlterField(
            model_name="message", name="hash", field=models.BinaryField(max_length=16)
        ),
    ]

