from __future__ import annotations

from django.db import models

from contextview.sessions.models import Blob


class BlobInfo(models.Model):
    """What the workers work out once per distinct content and reuse: its measured
    tokens per encoding and its key entities (no pinned texts).

    One row a blob: written whole when the content is first seen (see
    ``contextview.stats.blob_info`` for the stored forms).
    """

    blob = models.OneToOneField(
        Blob, on_delete=models.CASCADE, primary_key=True, db_constraint=False
    )
    # Tokens in the encodings of ``blob_info.TOKEN_COLUMNS``; null until counted.
    tokens_cl100k = models.IntegerField(null=True)
    tokens_o200k = models.IntegerField(null=True)
    # Tokens in any other encoding, by its name.
    tokens_other = models.JSONField(null=True)
    # Where the entities are in the blob's text, and their keys (``entity_key``)
    # unless they are the entities lowercased; null until extracted.
    entities = models.BinaryField(null=True)

    class Meta:
        db_table = "cv_blob_info"
