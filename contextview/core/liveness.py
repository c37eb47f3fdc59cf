"""Whether a session's agent is still talking: live, quiet, stale or ended.

A running session has no end event until its agent sends one; an agent that died
never does. Time since the last event tells the three apart: a live agent sends
within seconds, a quiet one has paused, a stale one is taken for gone (its
session is shown as stale and what was sent to it as expired). Plain logic, so
the session list, the session page and the directives panel share one rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

# Past this, a running session's page says its agent went quiet.
QUIET_AFTER = timedelta(seconds=60)

RUNNING = "running"


# What a session read from a transcript shows for its status, and for a mode it never sent.
IMPORTED = "imported"
NO_MODE = "n/a"


def status_shown(status: str, *, imported: bool) -> list[str]:
    """A session's status as the list, its page and its reports name it. One read from a
    transcript has no agent to be running: "imported", after the verdict its log gave
    (``succeeded``, ``failed``), if it gave one."""
    if not imported:
        return [status]
    return [IMPORTED] if status == RUNNING else [status, IMPORTED]


def mode_shown(mode: str, *, imported: bool) -> str:
    """A session's mode as the list, its page and its reports name it: "n/a" for one read
    from a transcript that sent none (its agent handled its context itself, and no mode
    can be switched), "" when none is known yet."""
    return mode or (NO_MODE if imported else "")


@dataclass(frozen=True)
class Liveness:
    state: str  # "live", "quiet", "stale", "imported" or "ended"
    silent_for: timedelta  # since the last event (zero when ended)

    @property
    def stale(self) -> bool:
        return self.state == "stale"

    @property
    def polls(self) -> bool:
        """Whether a page should keep watching for new events."""
        return self.state != "ended"


def liveness(
    *,
    status: str,
    last_event_at: datetime,
    now: datetime,
    stale_after: timedelta,
    imported: bool = False,
) -> Liveness:
    """`imported`: the session was read from a transcript, so no agent talks to it
    (its log may simply never have said how it ended): it is neither live nor stale."""
    if status != RUNNING:
        return Liveness("ended", timedelta(0))
    silent = max(now - last_event_at, timedelta(0))
    if imported:
        return Liveness("imported", silent)
    if silent >= stale_after:
        return Liveness("stale", silent)
    if silent >= QUIET_AFTER:
        return Liveness("quiet", silent)
    return Liveness("live", silent)


def time_text(moment: Any) -> str:
    """A time (a datetime, or ISO 8601 text as a report's data holds it) as every page
    and report writes one: "2026-02-11 21:41:48 UTC"; "" for none."""
    if isinstance(moment, str):
        try:
            moment = datetime.fromisoformat(moment)
        except ValueError:
            return ""
    if not isinstance(moment, datetime):
        return ""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration_text(span: timedelta) -> str:
    """A short reading of a span: "40 s", "3 min", "2 h 5 min", "3 d"."""
    seconds = int(span.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} d"


def directive_expiry(
    *, pending: bool, session: Liveness, session_status: str, stale_after: timedelta
) -> str:
    """Why a directive no longer waits for its agent ("" while it still does).

    Only a pending directive expires: one the agent answered keeps its answer.
    """
    if not pending:
        return ""
    if session.state == "ended":
        return f"the session ended ({session_status}) before the agent answered"
    if session.state == "imported":
        return "the session was imported from a transcript: no agent reads directives"
    if session.stale:
        return (
            f"no event from the agent for {duration_text(session.silent_for)} "
            f"(sessions are stale after {duration_text(stale_after)})"
        )
    return ""
