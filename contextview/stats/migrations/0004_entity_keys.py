from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("stats", "0003_app_enforced_references"),
    ]

    operations = [
        migrations.AlterField(
            model_name="blobentities",
            name="entities",
            field=models.TextField(default="[]"),
        ),
        migrations.AddField(
            model_name="blobentities",
            name="keys",
            field=models.TextField(blank=True, null=True),
        ),
    ]
