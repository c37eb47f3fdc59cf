"""Pydantic models of the ingest envelope and its events (contract: POST /api/v1/ingest).

Message lists are validated by the core (``contextview.core.messages``), which
also resolves messages sent by id alone; here they are only required to be lists.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

SessionId = Annotated[str, Field(min_length=1, max_length=200)]
ShortText = Annotated[str, Field(max_length=200)]


class Lenient(BaseModel):
    # Fields the contract does not name are the agent's business; keep going.
    model_config = ConfigDict(extra="allow")


class Budget(Lenient):
    max_tokens: Annotated[int, Field(gt=0)] | None = None
    reserved_tokens: Annotated[int, Field(ge=0)] = 0
    partitions: dict[str, Annotated[int, Field(ge=0)]] | None = None


Tokens = Annotated[int, Field(ge=0, le=2**62)]
ContextWindow = Annotated[int, Field(gt=0, le=2**31 - 1)]


class SessionBody(Lenient):
    session_id: SessionId
    agent: ShortText | None = None
    model: ShortText | None = None
    encoding: Annotated[str, Field(max_length=64)] | None = None
    mode: Annotated[str, Field(max_length=64)] | None = None
    budget: Budget | None = None
    context_window: ContextWindow | None = None
    pinned: list[str] | None = None
    metadata: dict[str, Any] | None = None


class Obs(Lenient):
    messages: list[Any]
    # Extension (docs/sdk.md, "Bytes on the wire"): the index of an earlier step of
    # the session whose after context the messages' ``{"$run": [start, count]}``
    # elements are taken from.
    base: Annotated[int, Field(ge=0, le=2**31 - 1)] | None = Field(default=None, alias="$base")


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
    index: Annotated[int, Field(ge=0, le=2**31 - 1)]
    mode: Annotated[str, Field(max_length=64)] | None = None
    obs: Obs
    action: dict[str, Any] | None = None
    actions: list[Any] | None = None
    after: After | None = None
    reason: str | None = None
    before_tokens: Annotated[int, Field(ge=0)] | None = None
    after_tokens: Annotated[int, Field(ge=0)] | None = None
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
    score: float | None = None


class EventHead(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: Annotated[str, Field(min_length=1, max_length=200)]
    type: Literal["session", "step", "session_end"]
    timestamp: datetime | None = None
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
