"""Sessions, their steps, and the content-addressed store those steps point into.

Storage grows with distinct content: a message's text lives once per project in
``Blob``; a message (id, role, partition, ... and its blob) lives once per
project in ``Message``; a step keeps its before and after contexts as compact
ordered lists of ``Message`` ids (see ``contextview.core.refs``). Every large
table carries ``project_id`` and a time column so it can later be partitioned by
time and distributed by project.

The high-volume tables (blobs, messages, steps, operations, folds) reference
their parents without database foreign-key constraints: rows are only ever
written by the ingest service, in one transaction with their parents, and a
deferred check per row costs more at commit than the whole insert (and stands in
the way of distributing the tables by project later).
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models.fields.json import KT, KeyTransform
from django.db.models.functions import Coalesce
from django.utils import timezone

from contextview.core import liveness
from contextview.core.importers import IMPORTED, IMPORTED_UNTIMED
from contextview.core.model import MAX_MODE
from contextview.core.tokens import EncodingChoice, resolve_encoding
from contextview.projects.models import ApiKey, Project
from contextview.sessions import stats_storage, step_storage


class StatsStatus(models.TextChoices):
    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"


class Session(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        ABANDONED = "abandoned"
        UNKNOWN = "unknown"  # ended with no verdict (an interactive session)

    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False)
    external_id = models.CharField(max_length=200)
    agent = models.CharField(max_length=200, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    encoding = models.CharField(max_length=64, blank=True, default="")
    mode = models.CharField(max_length=MAX_MODE, blank=True, default="")
    budget = models.JSONField(null=True, blank=True)
    # The model's window in tokens: occupancy is measured against it without a budget.
    context_window = models.IntegerField(null=True, blank=True)
    pinned = models.JSONField(default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # What the session was asked to do, in a line (``core.layout.task_line``), for the
    # sessions list: its metadata's "task", else the task or question of its first step.
    task = models.CharField(max_length=200, blank=True, default="", db_default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    score = models.FloatField(null=True, blank=True)
    # Whether a `session` event has been received (a step may come first).
    declared = models.BooleanField(default=False)
    started_at = models.DateTimeField(default=timezone.now)
    ended_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(auto_now_add=True)
    step_count = models.IntegerField(default=0)
    # Counter for SessionMessage.seq: which recording of an id is the latest.
    record_seq = models.BigIntegerField(default=0)
    aggregates = models.JSONField(null=True, blank=True)
    stats_status = models.CharField(
        max_length=8, choices=StatsStatus.choices, default=StatsStatus.PENDING
    )
    # Steps whose statistics are computed, as of the workers' last commit: how far
    # a long computation has got (of step_count).
    stats_steps_done = models.IntegerField(default=0, db_default=0)
    # Bumped by every statistics run, in the transaction of each chunk it commits: a
    # worker process that finds it as its own last run left it knows that no other
    # run changed the session's statistics since (``stats.services._carried``).
    stats_epoch = models.BigIntegerField(default=0, db_default=0)

    class Meta:
        db_table = "cv_session"
        constraints = [
            models.UniqueConstraint(fields=["project", "external_id"], name="session_unique_id")
        ]
        indexes = [
            models.Index(fields=["project", "-started_at", "-id"], name="session_recent"),
            models.Index(fields=["project", "agent"], name="session_agent"),
            models.Index(fields=["project", "status"], name="session_status"),
        ]

    @property
    def imported_from(self) -> str:
        """The transcript format an import read this session from ("" for a session an
        agent sends as it runs): its metadata's ``imported``, which the import service
        (``ingest.imports``) sets. No agent listens to such a session: it is not live,
        and directives cannot reach it."""
        found = self._import_mark(IMPORTED)
        return found if isinstance(found, str) else ""

    @property
    def times_from_import(self) -> bool:
        """Whether its times (started, last event, ended, each step's) are only when it was
        imported: its transcript wrote none (SWE-agent's trajectories), so each event was
        stamped on arrival. The pages and the reports then show no age or duration of it,
        but when it was imported. The import service sets the mark (``imported_untimed``)."""
        return self._import_mark(IMPORTED_UNTIMED) in (True, "true")

    def _import_mark(self, key: str) -> Any:
        if "metadata" in self.get_deferred_fields():
            # A list that leaves the metadata out reads the marks alone (`import_marks`).
            return getattr(self, f"{key}_mark", None)
        return self.metadata.get(key) if isinstance(self.metadata, dict) else None

    @property
    def status_shown(self) -> list[str]:
        """Its status as the pages and the reports name it (`core.liveness.status_shown`)."""
        return liveness.status_shown(self.status, imported=bool(self.imported_from))

    @property
    def mode_shown(self) -> str:
        """Its mode as the pages and the reports name it (`core.liveness.mode_shown`)."""
        return liveness.mode_shown(self.mode, imported=bool(self.imported_from))

    @staticmethod
    def import_marks() -> dict[str, KT]:
        """The marks of `imported_from` and `times_from_import` as a query reads them: the
        annotations of a query that defers the metadata."""
        return {f"{key}_mark": KT(f"metadata__{key}") for key in (IMPORTED, IMPORTED_UNTIMED)}

    def encoding_choice(self) -> EncodingChoice:
        """The encoding this session's tokens are counted with: the one rule
        (`core.tokens.resolve_encoding`) that the worker, the page and the read API use."""
        return resolve_encoding(encoding=self.encoding or None, model=self.model or None)

    def __str__(self) -> str:
        return self.external_id


class Blob(models.Model):
    """A message content, stored once per project, addressed by its hash."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )
    hash = models.BinaryField(max_length=16)
    text = models.TextField()
    # The content as sent when it was a list of parts; None for a plain string.
    parts = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "cv_blob"
        constraints = [models.UniqueConstraint(fields=["project", "hash"], name="blob_unique")]


class Message(models.Model):
    """A message as the agent framed it (id, role, partition, ...), stored once per project."""

    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )
    hash = models.BinaryField(max_length=16)
    blob = models.ForeignKey(Blob, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    msg_id = models.CharField(max_length=200)
    role = models.CharField(max_length=32, null=True, blank=True)
    partition = models.CharField(max_length=64)
    tool = models.CharField(max_length=200, null=True, blank=True)
    pinned = models.BooleanField(default=False)
    expirable = models.BooleanField(default=False)
    extra = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "cv_message"
        constraints = [models.UniqueConstraint(fields=["project", "hash"], name="message_unique")]


class SessionMessage(models.Model):
    """Which messages a session has recorded; the highest ``seq`` per id is the latest.

    Keyed by (session, msg_id, message): a message's id is part of what it is, so
    the key is unique exactly when (session, message) is, and its one index also
    finds an id's recordings, of which there are mostly one. The project is the
    session's, and nothing reads a row by a number of its own.
    """

    pk = models.CompositePrimaryKey("session", "msg_id", "message")
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )
    msg_id = models.CharField(max_length=200)
    message = models.ForeignKey(
        Message, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )
    seq = models.BigIntegerField()

    class Meta:
        db_table = "cv_session_message"


# The operations' entities that statistics read by a step query left to be filled in
# (``stats_storage.unresolved``): all of a query's rows at once, see `StepQuerySet`.
_READING = threading.local()


def _lost_read(todo: list[stats_storage.OpEntities]) -> None:
    """Fill in the lost entities of `todo` from their contents' entities."""
    from contextview.stats.services import entities_of_blobs  # the app that stores them

    stats_storage.resolve(todo, entities_of_blobs(stats_storage.blobs_of(todo)))


def stats_read(stored: Any) -> Any:
    """A stored statistics value (as ``cv_step_stats.stats`` holds it) as readers get it."""
    stats = stats_storage.unpack(stored)
    todo = stats_storage.unresolved(stats)
    if todo:
        batch = getattr(_READING, "todo", None)
        if batch is not None:
            batch += todo  # a step query's rows: read together once fetched
        else:
            _lost_read(todo)
    return stats


class StepQuerySet(models.QuerySet["Step"]):
    def _fetch_all(self) -> None:
        # Statistics name the contents their lost entities came from: what a query's
        # rows name is read in one go once they are fetched, not row by row.
        if self._result_cache is not None or getattr(_READING, "todo", None) is not None:
            super()._fetch_all()
            return
        _READING.todo = todo = []
        try:
            super()._fetch_all()
        finally:
            _READING.todo = None
        if todo:
            _lost_read(todo)

    def with_stats(self) -> StepQuerySet:
        """Steps with ``stats_status`` (pending while no statistics are stored) and
        ``stats`` (null until then) read alongside, in the same query."""
        return self.annotate(
            stats=models.F("computed__stats"),
            stats_status=Coalesce("computed__status", models.Value(StatsStatus.PENDING)),
        )


class UsageField(models.BinaryField):
    """A call's token usage, stored packed (``step_storage``): every reader through
    the ORM gets the usage as sent, every write through it packs it."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        return step_storage.usage_unpacked(value)

    def get_prep_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            packed = step_storage.usage_packed(value)
            value = packed if packed is not None else step_storage.usage_text(value)
        return super().get_prep_value(value)


class Step(models.Model):
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )
    index = models.IntegerField()
    timestamp = models.DateTimeField()
    received_at = models.DateTimeField(default=timezone.now)
    mode = models.CharField(max_length=MAX_MODE, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    reported_before = models.BigIntegerField(null=True, blank=True)
    reported_after = models.BigIntegerField(null=True, blank=True)
    # obs fields other than messages (summary_index, used_tokens, ...), kept as given,
    # but for an OTLP trace and span id: those are `span_ids` (``step_storage``).
    obs_extra = models.JSONField(null=True, blank=True)
    span_ids = models.BinaryField(null=True, blank=True)
    outcome = models.JSONField(null=True, blank=True)
    # The call's model when it is not the session's, as sent ("" for the session's).
    model = models.CharField(max_length=200, blank=True, default="")
    # The tool definitions sent with the call: a blob (once per distinct list).
    tools_blob = models.ForeignKey(
        Blob, null=True, blank=True, on_delete=models.SET_NULL, db_index=False, db_constraint=False
    )
    # The model's reply: as sent, or what is left of it once the texts of its
    # messages are blobs, named in order by `output_blobs` (``step_storage``).
    output = models.JSONField(null=True, blank=True)
    output_blobs = models.BinaryField(null=True, blank=True)
    usage = UsageField(null=True, blank=True)
    context_window = models.IntegerField(null=True, blank=True)
    before_refs = models.BinaryField()
    # NULL when the after is the before (no operation changed it, the usual case).
    after_refs = models.BinaryField(null=True, blank=True)
    after_given = models.BooleanField(default=False)
    after_mismatch = models.BooleanField(default=False)
    # Tells a body sent again at this index from another: 16 bytes of its sha256.
    body_hash = models.BinaryField(max_length=16)

    objects = StepQuerySet.as_manager()

    def after_context_refs(self) -> bytes:
        """The after context's references (the before's when no operation changed it)."""
        return bytes(self.before_refs if self.after_refs is None else self.after_refs)

    def obs_fields(self) -> dict[str, Any] | None:
        """The obs fields other than messages, as sent (trace and span id included)."""
        return step_storage.span_ids_joined(self.obs_extra, self.span_ids)

    class Meta:
        db_table = "cv_step"
        constraints = [
            models.UniqueConstraint(fields=["session", "index"], name="step_unique_index")
        ]


# A step's after context's references, in a query: the before's when no operation
# changed it (``after_refs`` is then NULL).
AFTER_REFS = Coalesce("after_refs", "before_refs")


# The predicate of the step view's "previous/next flagged step" ([ and ]) queries and
# of the partial index that serves them, word for word so PostgreSQL uses the index.
FLAGGED_SQL = "jsonb_typeof(stats->'flags') = 'array' AND jsonb_array_length(stats->'flags') > 0"


class StatsField(models.JSONField):  # type: ignore[type-arg]
    """A step's statistics, stored packed (``stats_storage``): every reader
    through the ORM gets them unpacked, every write through it packs them."""

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        value = super().from_db_value(value, expression, connection)
        if isinstance(expression, KeyTransform):
            return value  # a part of the stored form, asked for as such
        return stats_read(value)

    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)
        return stats_storage.pack(value) if isinstance(value, dict) else value


class StepStats(models.Model):
    """A step's statistics, written by the statistics workers once they are computed.

    Kept apart from ``Step`` so that a step row is written once: were they columns
    of ``cv_step``, storing them would rewrite the whole step (its references, its
    output) and leave the old version behind until vacuum, about doubling the
    table. A step without a row is pending; ``StepQuerySet.with_stats`` reads a
    step with its status and statistics.
    """

    step = models.OneToOneField(
        Step,
        on_delete=models.CASCADE,
        primary_key=True,
        db_constraint=False,
        related_name="computed",
    )
    session_id = models.BigIntegerField()
    index = models.IntegerField()
    status = models.CharField(max_length=8, choices=StatsStatus.choices)
    # The contract's step ``stats`` when ready; {"error": ...} when failed. Stored
    # packed: SQL that reads inside it goes by ``stats_storage``'s description.
    stats = StatsField()

    class Meta:
        db_table = "cv_step_stats"
        constraints = [
            models.UniqueConstraint(fields=["session_id", "index"], name="step_stats_index")
        ]
        # and step_stats_flagged, a partial index on FLAGGED_SQL (migration 0006)


class Operation(models.Model):
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )
    step = models.ForeignKey(Step, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    position = models.IntegerField()
    op = models.CharField(max_length=16)
    form = models.CharField(max_length=8)
    targets = models.JSONField(default=list)
    result = models.ForeignKey(
        Message,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        db_index=False,
        db_constraint=False,
    )
    reason = models.TextField(blank=True, default="")
    params = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "cv_operation"
        constraints = [
            models.UniqueConstraint(fields=["step", "position"], name="operation_unique")
        ]


def fold_key(session_id: int, msg_id: str) -> int:
    """The key an archived original is found by in ``cv_fold``'s index: its session
    and message id hashed to a signed 32-bit integer. Keys of different ids can
    meet, so a lookup by key checks the original's message id too."""
    digest = hashlib.blake2b(
        msg_id.encode("utf-8", "surrogatepass"),
        digest_size=4,
        key=session_id.to_bytes(8, "big", signed=True),
    ).digest()
    return int.from_bytes(digest, "big", signed=True)


class Fold(models.Model):
    """What one operation took out of the context: its originals, and what replaced them.

    One row per operation (a step's own, or one the statistics worker inferred,
    ``op_position`` then counting the step's inferred operations), its originals
    in order as three parallel arrays: their stored messages (whose ``msg_id`` is
    the original's id), their keys (``fold_key``, indexed: the archive is looked
    up by session and message id) and, where a reload brought one back, the step
    index that did (null while none was). Bookkeeping of a session's steps, it has
    no project or time of its own (as ``StepStats``): it goes with its session.
    """

    pk = models.CompositePrimaryKey("session", "step", "inferred", "op_position")
    session = models.ForeignKey(
        Session, on_delete=models.CASCADE, db_index=False, db_constraint=False
    )
    step = models.ForeignKey(Step, on_delete=models.CASCADE, db_index=False, db_constraint=False)
    inferred = models.BooleanField(default=False)
    op_position = models.IntegerField()
    op = models.CharField(max_length=16)
    # The message that replaced the originals; none when they were dropped.
    result_msg_id = models.CharField(max_length=200, null=True, blank=True)
    originals = ArrayField(models.BigIntegerField())
    keys = ArrayField(models.IntegerField())
    reloaded_at = ArrayField(models.IntegerField(null=True), null=True, blank=True)

    class Meta:
        db_table = "cv_fold"
        indexes = [GinIndex(fields=["keys"], name="fold_by_original", fastupdate=False)]


# What a directive's public id puts before its pk (``d-7``).
DIRECTIVE_PREFIX = "d-"


class Directive(models.Model):
    class Type(models.TextChoices):
        SET_MODE = "set_mode"
        RESTORE = "restore"

    class Status(models.TextChoices):
        PENDING = "pending"
        APPLIED = "applied"
        REJECTED = "rejected"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, db_index=False)
    type = models.CharField(max_length=16, choices=Type.choices)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    detail = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    created_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_by_key = models.ForeignKey(
        ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    resolved_at = models.DateTimeField(null=True, blank=True)
    # "ack" when the agent acknowledged it, "step" when a later step showed it applied.
    resolved_via = models.CharField(max_length=8, blank=True, default="")

    class Meta:
        db_table = "cv_directive"
        indexes = [models.Index(fields=["session", "status", "id"], name="directive_by_session")]

    @property
    def public_id(self) -> str:
        return f"{DIRECTIVE_PREFIX}{self.pk}"
