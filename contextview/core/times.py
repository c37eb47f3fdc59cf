"""Event times as the contract takes them: RFC 3339 date-times."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

# RFC 3339's date-time; without an offset the time is taken as UTC. Its fraction of a
# second may have any number of digits, and its second may be 60 (a leap second).
RFC3339 = re.compile(
    r"(?P<until_second>\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:)(?P<second>\d{2})"
    r"(?:\.(?P<fraction>\d+))?(?P<offset>[Zz]|[+-]\d{2}:\d{2})?"
)
# Epoch numbers past this are milliseconds (this many seconds is the year 5138).
_MILLISECONDS_FROM = 1e11


def python_readable(match: re.Match[str]) -> str:
    """An RFC 3339 date-time (a match of RFC3339) as Python's parsers take it: the
    fraction cut to microseconds, and a leap second (23:59:60) read as the last
    microsecond before it, which keeps its place among the times around it."""
    second, fraction = match["second"], (match["fraction"] or "")[:6]
    if second == "60":
        second, fraction = "59", "999999"
    return (
        match["until_second"]
        + second
        + (f".{fraction}" if fraction else "")
        + (match["offset"] or "")
    )


def as_rfc3339(value: Any) -> str | None:
    """A time an agent's log wrote, as an RFC 3339 date-time: such a string as it is,
    seconds or milliseconds since the epoch converted; None for anything else."""
    if isinstance(value, str):
        return value if RFC3339.fullmatch(value) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        seconds = value / 1000 if value >= _MILLISECONDS_FROM else value
        try:
            return datetime.fromtimestamp(seconds, UTC).isoformat()
        except (OverflowError, OSError, ValueError):
            return None
    return None


def as_datetime(value: Any) -> datetime | None:
    """A time an agent's log wrote (as `as_rfc3339` takes it) as an aware datetime, in
    UTC when it names no offset; None for anything else, or a day no calendar has."""
    text = as_rfc3339(value)
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
