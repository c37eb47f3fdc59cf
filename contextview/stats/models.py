from __future__ import annotations

from django.db import models

from contextview.sessions.models import Blob


class TokenCount(models.Model):
    """Measured tokens of one distinct content in one encoding: counted once, reused.

    Identified by (blob, encoding), its primary key: a surrogate id would add a
    column and a second index to a row that is otherwise three values.
    """

    pk = models.CompositePrimaryKey("blob", "encoding")
    blob = models.ForeignKey(Blob, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    encoding = models.CharField(max_length=64)
    tokens = models.IntegerField()

    class Meta:
        db_table = "cv_token_count"


class BlobEntities(models.Model):
    """Key entities of one distinct content (no pinned texts): extracted once, reused."""

    blob = models.OneToOneField(
        Blob, on_delete=models.CASCADE, primary_key=True, db_constraint=False
    )
    # JSON arrays kept as text: workers read them whole, never query inside, and
    # text comes back without the jsonb-to-text conversion (half the read time).
    entities = models.TextField(default="[]")
    # Each entity's normalized key (``entity_key``), so that no worker normalizes
    # them again; null on rows written before keys were kept, "" when they are
    # the entities' JSON lowercased (read through ``stats.services._KEYS_SQL``).
    keys = models.TextField(null=True, blank=True)

    class Meta:
        db_table = "cv_blob_entities"
