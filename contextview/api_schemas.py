"""The shapes of the API's answers, for the OpenAPI document and generated clients.

Each model is what a route already returns (``sessions.selectors``,
``sessions.services``, ``stats.selectors``), written down. They are open: fields
an agent sent beyond these (a message's ``tool_calls`` or ``name``, a provider's
own usage counts) pass through as sent, and routes dump them with
``exclude_unset`` so that a field a message did not have does not appear as null.
Numbers that may be either kind are ``int | float``, so ninja never turns one
into the other.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Number = int | float
StatsStatus = Literal["pending", "ready", "failed"]


# What a session's status and an alert's state may be: the read API's answers, and
# the filters that take them (a generated client offers no other).
SessionStatusName = Literal["running", "succeeded", "failed", "abandoned", "unknown"]
AlertState = Literal["firing", "resolved"]


class Open(BaseModel):
    """A shape that keeps every field it is given, declared or not."""

    model_config = ConfigDict(extra="allow")


class ErrorOut(BaseModel):
    error: str = Field(description="What was wrong, naming the field or the missing thing")


class MessageOut(Open):
    """A message of a context, its content as it was sent; other fields the agent sent
    with it (``tool_calls``, ``name``, ``tool_call_id`` ...) follow as sent."""

    id: str
    role: str | None
    partition: str
    content: str | list[Any] | None = Field(description="A string, or content parts as sent")
    tokens: int | None = Field(description="Measured tokens; null until the workers count it")
    tool: str | None = Field(default=None, description="Only on tool messages that name one")
    pinned: bool | None = Field(default=None, description="Only when true")
    expirable: bool | None = Field(default=None, description="Only when true")


class OperationOut(Open):
    op: str
    form: str = Field(description="How the agent wrote it: an action or an edit")
    targets: list[str]
    result_id: str | None
    reason: str | None
    params: dict[str, Any]
    inferred: bool | None = Field(default=None, description="Only on inferred operations")


class FoldOut(Open):
    op_index: int
    result_id: str | None
    originals: list[str]
    inferred: bool | None = Field(default=None, description="Only on inferred operations' folds")


class ReportedOut(Open):
    before_tokens: Number | None
    after_tokens: Number | None


class SidesOut(Open):
    """A measure of the step's context before and after its operations."""

    before: Number | None = None
    after: Number | None = None


class NeededOut(Open):
    text: str
    step: int = Field(description="The later step that needed it")
    how: str = Field(description="asked, mentioned, refetched or reloaded")


class EntitiesOut(Open):
    total: int | None = None
    kept: int | None = None
    lost: list[str] | None = Field(default=None, description="Most likely to matter first")
    needed_later: list[NeededOut] | None = None


class StatOpOut(Open):
    """What one operation (own or inferred) did to the context."""

    op: str | None = None
    targets: list[str] | None = None
    result_id: str | None = None
    tokens_in: Number | None = None
    tokens_out: Number | None = None
    ratio: Number | None = Field(default=None, description="tokens_out / tokens_in")
    entities: EntitiesOut | None = None
    inferred: bool | None = Field(default=None, description="Only on inferred operations")


class StatsOut(Open):
    """A step's statistics, by the contract's names (and more the README lists). A step
    whose statistics could not be computed has only `error`."""

    tokens: SidesOut | None = None
    partitions: dict[str, SidesOut] | None = None
    occupancy: SidesOut | None = Field(
        default=None, description="Tokens over the budget's max_tokens; null without one"
    )
    reported_error: SidesOut | None = Field(
        default=None, description="(reported - measured) / measured"
    )
    ops: list[StatOpOut] | None = None
    flags: list[str] | None = None
    reward: Number | None = None
    encoding: str | None = Field(default=None, description="The encoding tokens were counted in")
    unseen_tokens: Number | None = Field(
        default=None, description="With provider usage: reported minus measured"
    )
    error: str | None = None


class AmnesiaOut(Open):
    text: str
    lost_at: int
    needed_at: int
    how: str


class RefetchOut(Open):
    tool: str | None
    lost_at: int
    refetched_at: int
    tokens: Number | None


class AggregatesOut(Open):
    """A session's aggregates, by the contract's names (and more the README lists)."""

    steps: int | None = None
    peak_occupancy: Number | None = None
    mean_occupancy: Number | None = None
    ops_by_type: dict[str, int] | None = None
    tokens_saved: Number | None = None
    mean_ratio: Number | None = None
    entity_retention: Number | None = None
    reload_regrets: int | None = None
    budget_violations: int | None = None
    flag_counts: dict[str, int] | None = None
    amnesia: list[AmnesiaOut] | None = None
    refetches: list[RefetchOut] | None = None


class StepOut(Open):
    """One step: the contexts before and after, operations, folds and statistics."""

    session_id: str
    index: int
    timestamp: str
    mode: str | None
    reason: str | None
    obs_extra: dict[str, Any] | None
    trace_id: str | None = Field(description="The OTLP trace of the call's span, if any")
    span_id: str | None = Field(description="The OTLP span of the call, if any")
    outcome: dict[str, Any] | None
    before: list[MessageOut]
    after: list[MessageOut]
    after_given: bool
    ops: list[OperationOut]
    inferred_ops: list[OperationOut]
    folds: list[FoldOut]
    reported: ReportedOut
    model: str | None
    tools: list[Any] | None
    output: dict[str, Any] | None
    usage: dict[str, Any] | None
    context_window: int | None
    stats: StatsOut | None = Field(description="null until computed")
    stats_status: StatsStatus


class SessionOut(Open):
    session_id: str
    agent: str | None
    model: str | None
    encoding: str | None
    mode: str | None
    budget: dict[str, Any] | None
    context_window: int | None
    pinned: list[Any]
    metadata: dict[str, Any] | None
    task: str | None = Field(
        description="What the session was asked to do, on one line of at most 200 characters "
        "(as the sessions list shows it): its metadata's task, else the first task or "
        "user question of its contexts; null when none was said"
    )
    status: SessionStatusName
    score: Number | None
    started_at: str
    ended_at: str | None
    last_event_at: str
    steps: int
    aggregates: AggregatesOut | None = Field(description="null until computed")
    stats_status: StatsStatus
    stats_steps_done: int


class SessionListOut(Open):
    sessions: list[SessionOut]
    next_cursor: str | None = Field(description="For ?cursor=, the next page; null at the end")


class DiffMessageOut(Open):
    id: str
    role: str | None
    partition: str
    content: str | list[Any] | None


class ChangedOut(Open):
    id: str
    before: DiffMessageOut
    after: DiffMessageOut
    words: list[list[str]] = Field(description="[tag, text] pairs: equal, insert, delete")


class MovedOut(Open):
    id: str
    from_index: int
    to_index: int


class DiffOut(Open):
    session_id: str
    start: int = Field(alias="from")
    to: int
    added: list[DiffMessageOut]
    removed: list[DiffMessageOut]
    changed: list[ChangedOut]
    moved: list[MovedOut]
    unchanged: int


class ArchivedOut(Open):
    id: str
    kind: str = Field(description="fold or drop")
    step: int
    op_index: int
    op: str
    inferred: bool
    result_id: str | None
    reloaded: bool
    reloaded_at: int | None
    message: MessageOut


class ArchiveOut(Open):
    session_id: str
    originals: list[ArchivedOut]


class AgentModeOut(Open):
    agent: str | None
    mode: str | None
    sessions: int
    ended: int
    success_rate: float | None
    steps: int
    mean_tokens_per_step: float | None
    entity_retention: float | None
    budget_violations: int
    reload_regrets: int


class AgentModeTableOut(Open):
    rows: list[AgentModeOut]


class DirectiveOut(Open):
    """A directive; the fields after `step` are in answers about one directive only."""

    id: str
    session_id: str
    type: Literal["set_mode", "restore"]
    mode: str | None = Field(default=None, description="set_mode only")
    targets: list[str] | None = Field(default=None, description="restore only")
    step: int | None = Field(default=None, description="restore only")
    status: Literal["pending", "applied", "rejected"] | None = None
    detail: str | None = None
    created_at: str | None = None
    created_by: str | None = None
    resolved_at: str | None = None
    resolved_via: str | None = None


class SetModeIn(BaseModel):
    """Ask the agent to switch to another mode."""

    type: Literal["set_mode"]
    mode: str = Field(min_length=1, max_length=64, description="For example sliding")


class RestoreIn(BaseModel):
    """Ask the agent to put folded or dropped originals back into its context."""

    type: Literal["restore"]
    targets: list[str] = Field(min_length=1, description="Ids of archived originals")
    step: int | None = Field(default=None, ge=0, description="The step to restore them at")


class AckIn(BaseModel):
    status: Literal["applied", "rejected"]
    detail: str | None = None


class ControlOut(Open):
    directives: list[DirectiveOut]
    cursor: str = Field(description="Pass back as ?after= to get only newer directives")


class ReportStepOut(StepOut):
    """A step of ``report.json``: its contexts by number, each distinct message once
    (under ``messages`` in the first step that uses it), three or more consecutive
    numbers as ``[first, last]`` (docs/api.md)."""

    before: list[int | list[int]]  # type: ignore[assignment]
    after: list[int | list[int]]  # type: ignore[assignment]
    tools: int | None  # type: ignore[assignment]
    messages: dict[str, MessageOut] = Field(
        default_factory=dict, description="The messages this step is the first to use"
    )
    tool_lists: dict[str, list[Any]] = Field(
        default_factory=dict, description="The tool lists this step is the first to use"
    )


class ReportOut(Open):
    report: dict[str, Any] = Field(description="Header, timeline, flagged steps, annotations")
    steps: list[ReportStepOut]


class EventResultOut(Open):
    """What became of one event of an ingested batch, in the order sent."""

    id: str | None = Field(description="The event's id; null when it sent none that is a string")
    status: int = Field(
        description="201 stored, 200 already stored alike, 409 its id or step index "
        "was used for other content, 400 or 422 refused"
    )
    error: str | None = Field(default=None, description="Why it was refused, naming the field")
    duplicate: bool | None = Field(default=None, description="true on a 200")


class IngestOut(Open):
    results: list[EventResultOut]
    directives: list[DirectiveOut] = Field(description="Pending for the batch's sessions")


class ReplayStepOut(Open):
    index: int
    tokens: int = Field(description="The tokens of the messages the policy's context holds")
    messages: list[str] = Field(description="Ids of the messages the policy's context holds")
    removed: list[str] = Field(description="Ids the policy took out at this step")
    lost_needed: list[str] = Field(
        description="Entities this step needs that the policy had removed by then"
    )


class ReplayTotalsOut(Open):
    tokens: int
    tokens_saved: int = Field(description="The recorded total minus the policy's")
    peak_tokens: int
    amnesia: int = Field(description="How many lost_needed entries the steps hold")


class ReplayOut(Open):
    policy: dict[str, Any] = Field(description="The policy replayed, as understood")
    steps: list[ReplayStepOut]
    totals: ReplayTotalsOut


class ImportedOut(Open):
    session_id: str
    format: str
    steps: int
    operations: int


class ImportOut(Open):
    sessions: list[ImportedOut] = Field(description="One per session the files hold")


class ImportFailureOut(BaseModel):
    status: int = Field(description="The status the transcript alone would have had")
    error: str


class ImportErrorOut(BaseModel):
    error: str = Field(
        description="What was wrong, naming the file and its line (or JSON path); with more "
        "than one transcript, the first that could not be imported"
    )
    errors: list[ImportFailureOut] | None = Field(
        default=None,
        description="When other transcripts of the request were imported: each that was not",
    )
    sessions: list[ImportedOut] | None = Field(
        default=None,
        description="When other transcripts of the request were imported: what they hold "
        "(stored: each transcript is imported whole or not at all)",
    )
