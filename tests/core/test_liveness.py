from __future__ import annotations

from datetime import UTC, datetime, timedelta

from contextview.core.liveness import Liveness, directive_expiry, duration_text, liveness

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
STALE = timedelta(minutes=15)


def _state(status: str, **ago: float) -> str:
    return liveness(
        status=status, last_event_at=NOW - timedelta(**ago), now=NOW, stale_after=STALE
    ).state


def test_it_tells_live_quiet_stale_and_ended_apart() -> None:
    assert _state("running", seconds=5) == "live"
    assert _state("running", seconds=90) == "quiet"
    assert _state("running", minutes=15) == "stale"
    assert _state("succeeded", minutes=60) == "ended"
    assert _state("running", seconds=-30) == "live"  # an agent clock ahead of ours


def test_it_expires_only_pending_directives_of_stale_or_ended_sessions() -> None:
    stale = liveness(status="running", last_event_at=NOW - timedelta(hours=2), now=NOW,
                     stale_after=STALE)  # fmt: skip
    live = liveness(status="running", last_event_at=NOW, now=NOW, stale_after=STALE)
    ended = liveness(status="failed", last_event_at=NOW, now=NOW, stale_after=STALE)

    def why(state: Liveness, pending: bool = True) -> str:
        return directive_expiry(pending=pending, session=state, session_status="failed",
                                stale_after=STALE)  # fmt: skip

    assert why(live) == "" and why(stale, pending=False) == ""
    assert why(stale) == "no event from the agent for 2 h (sessions are stale after 15 min)"
    assert why(ended) == "the session ended (failed) before the agent answered"


def test_it_reads_durations_shortly() -> None:
    assert [duration_text(timedelta(seconds=s)) for s in (0, 59, 60, 3725, 7200, 3 * 86400)] == [
        "0 s", "59 s", "1 min", "1 h 2 min", "2 h", "3 d"]  # fmt: skip


def test_an_imported_session_is_neither_live_nor_stale() -> None:
    imported = liveness(status="running", last_event_at=NOW - timedelta(days=3), now=NOW,
                        stale_after=STALE, imported=True)  # fmt: skip
    assert imported.state == "imported" and not imported.stale
    ended = liveness(status="succeeded", last_event_at=NOW, now=NOW, stale_after=STALE,
                     imported=True)  # fmt: skip
    assert ended.state == "ended"
    assert directive_expiry(pending=True, session=imported, session_status="running",
                            stale_after=STALE) == (
        "the session was imported from a transcript: no agent reads directives"
    )  # fmt: skip
