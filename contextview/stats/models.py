from __future__ import annotations

from django.db import models

from contextview.sessions.models import Blob, Session


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


class ReplayTotals(models.Model):
    """What a session's replay under one policy summed (``core.replay.Totals``), kept
    so that the project overview's savings table replays a session again only once
    it changed: its step count (a new or late step) or its statistics epoch (which
    every recomputation of its steps moves) differ from those stored here."""

    # found by the unique (session, policy) index
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, db_constraint=False, db_index=False, related_name="+"
    )
    # the policy as sorted JSON, after the version of the replay that summed it
    policy = models.TextField()
    step_count = models.IntegerField()
    stats_epoch = models.BigIntegerField()
    totals = models.JSONField()

    class Meta:
        db_table = "cv_replay_totals"
        constraints = [
            models.UniqueConstraint(fields=["session", "policy"], name="replay_totals_policy")
        ]
