"""Pydantic models of the ingest envelope and its events (contract: POST /api/v1/ingest).

Message lists are validated by the core (``contextview.core.messages``), which
also resolves messages sent by id alone; here they are only required to be lists.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from contextview.core.model import MAX_MODE
from contextview.core.times import RFC3339, python_readable


def _a_number(value: Any) -> Any:
    """A count is a JSON number: not true or false (Python would take them as 1 and 0),
    and not a string of digits (which would be taken as its number)."""
    if isinstance(value, bool):
        raise PydanticCustomError("number_type", "must be a number, not true or false")
    if isinstance(value, str):
        raise PydanticCustomError("number_type", "must be a number, not a string")
    return value


Number = BeforeValidator(_a_number)
SessionId = Annotated[str, Field(min_length=1, max_length=200)]
ShortText = Annotated[str, Field(max_length=200)]
# What the store's bigint columns hold.
TokenCount = Annotated[int, Number, Field(ge=0, le=2**63 - 1)]

# Event times the product can show and compute with: any time zone, as long as the
# instant in UTC is in this range (documented in the README, "What it takes in").
EARLIEST_TIMESTAMP = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_TIMESTAMP = datetime(3000, 1, 1, tzinfo=UTC)


def _in_range(value: datetime) -> datetime:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    try:
        utc = aware.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+02:00 is in year 0 in UTC
        utc = None
    if utc is None or not EARLIEST_TIMESTAMP <= utc < LATEST_TIMESTAMP:
        raise PydanticCustomError(
            "timestamp_range",
            "must be from 1970-01-01T00:00:00Z up to (not including) 3000-01-01T00:00:00Z",
        )
    return utc


def _rfc3339(value: Any) -> Any:
    match = RFC3339.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise PydanticCustomError(
            "timestamp_format", "must be an RFC 3339 date-time such as 2026-11-30T09:00:00Z"
        )
    return python_readable(match)


Timestamp = Annotated[datetime, BeforeValidator(_rfc3339), AfterValidator(_in_range)]


class Lenient(BaseModel):
    # Fields the contract does not name are the agent's business; keep going.
    model_config = ConfigDict(extra="allow")


Tokens = Annotated[int, Number, Field(ge=0, le=2**62)]
ContextWindow = Annotated[int, Number, Field(gt=0, le=2**31 - 1)]


class Budget(Lenient):
    max_tokens: Annotated[int, Number, Field(gt=0, le=2**62)] | None = None
    reserved_tokens: Tokens = 0
    partitions: dict[str, Tokens] | None = None

    @model_validator(mode="after")
    def _room_left(self) -> Budget:
        # What the context may hold is max_tokens less reserved_tokens: some room.
        if self.max_tokens is not None and self.reserved_tokens >= self.max_tokens:
            raise PydanticCustomError(
                "budget_reserve",
                "reserved_tokens ({reserved}) must be less than max_tokens ({max})",
                {"reserved": self.reserved_tokens, "max": self.max_tokens},
            )
        return self


class SessionBody(Lenient):
    session_id: SessionId
    agent: ShortText | None = None
    model: ShortText | None = None
    encoding: Annotated[str, Field(max_length=64)] | None = None
    mode: Annotated[str, Field(max_length=MAX_MODE)] | None = None
    budget: Budget | None = None
    context_window: ContextWindow | None = None
    pinned: list[str] | None = None
    metadata: dict[str, Any] | None = None


class Obs(Lenient):
    messages: list[Any]
    # Extension (docs/sdk.md, "Bytes on the wire"): the index of an earlier step of
    # the session whose after context the messages' ``{"$run": [start, count]}``
    # elements are taken from.
    base: Annotated[int, Number, Field(ge=0, le=2**31 - 1)] | None = Field(
        default=None, alias="$base"
    )


class After(Lenient):
    messages: list[Any]


class Usage(Lenient):
    """Token usage as the provider reported it; other fields it reports are kept."""

    input_tokens: Tokens | None = None
    output_tokens: Tokens | None = None
    cache_read_tokens: Tokens | None = None
    cache_write_tokens: Tokens | None = None


class Output(Lenient):
    """What the model returned: its messages (text and tool calls), kept as sent."""

    messages: list[dict[str, Any]]


class StepBody(Lenient):
    session_id: SessionId
    index: Annotated[int, Number, Field(ge=0, le=2**31 - 1)]
    mode: Annotated[str, Field(max_length=MAX_MODE)] | None = None
    obs: Obs
    action: dict[str, Any] | None = None
    actions: list[Any] | None = None
    after: After | None = None
    reason: str | None = None
    before_tokens: TokenCount | None = None
    after_tokens: TokenCount | None = None
    outcome: dict[str, Any] | None = None
    # contract v1.1: the call this step's context was sent with
    model: ShortText | None = None
    tools: list[dict[str, Any]] | None = None
    output: Output | None = None
    usage: Usage | None = None
    context_window: ContextWindow | None = None


class SessionEndBody(Lenient):
    session_id: SessionId
    status: Literal["succeeded", "failed", "abandoned", "unknown"]
    score: Annotated[float, Number, Field(allow_inf_nan=False)] | None = None


class EventHead(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: Annotated[str, Field(min_length=1, max_length=200)]
    type: Literal["session", "step", "session_end"]
    timestamp: Timestamp | None = None
    body: dict[str, Any]


class Envelope(BaseModel):
    """The request body: a batch of events (documented in the OpenAPI schema)."""

    batch: list[EventHead]


BODY_MODELS: dict[str, type[BaseModel]] = {
    "session": SessionBody,
    "step": StepBody,
    "session_end": SessionEndBody,
}


def _loc_path(prefix: str, loc: tuple[int | str, ...]) -> str:
    path = prefix
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path = f"{path}.{part}" if path else str(part)
    return path


def describe_error(exc: ValidationError, *, prefix: str) -> str:
    """The first problem, as ``field.path: what is wrong`` (contract: errors name the field)."""
    err = exc.errors(include_url=False)[0]
    message = str(err["msg"])
    if err["type"] == "missing":
        message = "field required"
    elif message[:1].isupper():
        message = message[0].lower() + message[1:]
    return f"{_loc_path(prefix, tuple(err['loc']))}: {message}"
