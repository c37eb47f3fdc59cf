"""bench.replay on a small session: every policy replays it, and the figures add up."""

from __future__ import annotations

from bench.replay import POLICIES, bench


def test_it_replays_the_generated_session_under_every_policy() -> None:
    rows = bench(steps=40, messages=20, repeat=1)
    assert [r["policy"] for r in rows] == list(POLICIES)
    by_kind = {r["policy"]["kind"]: r for r in rows}
    assert all(r["steps"] == 40 and r["context_max"] <= 24 for r in rows)
    # The recorded agent compacts near 20 messages: keeping everything costs more,
    # a window of 20 about what it paid, masking less than keeping everything.
    assert by_kind["full"]["tokens_saved"] < 0
    assert by_kind["mask_observations"]["tokens_saved"] > by_kind["full"]["tokens_saved"]
