from __future__ import annotations

import pytest

from contextview.sessions.models import Session, Step, StepStats
from contextview.stats.services import session_stats_compute
from tests.api_client import Api, step

SYSTEM = {"id": "sys", "role": "system", "content": "You read logs."}
LOG = {"id": "log", "role": "tool", "tool": "grep", "content": "504 from inventory-svc after 3 s"}


@pytest.mark.django_db
def test_it_recomputes_later_steps_when_an_earlier_one_arrives_late(api: Api) -> None:
    grep_1 = {"id": "g1", "role": "tool", "tool": "grep", "content": "no match in access.log"}
    grep_2 = {"id": "g2", "role": "tool", "tool": "grep", "content": "no match in error.log"}
    late = step("s", 0, [SYSTEM, grep_1])
    early = step("s", 1, [SYSTEM, grep_1, grep_2])
    api.ingest({"batch": [early]})
    session = Session.objects.get(external_id="s")
    session_stats_compute(session_id=session.pk)
    # Alone, step 1 has no previous step to repeat.
    assert "repeated_tool_call" not in Step.objects.with_stats().get(index=1).stats["flags"]

    api.ingest({"batch": [late]})
    session_stats_compute(session_id=session.pk)
    # Step 0 now precedes it with a grep of its own: step 1 is computed again.
    assert "repeated_tool_call" in Step.objects.with_stats().get(index=1).stats["flags"]
    assert Session.objects.get().aggregates["steps"] == 2


@pytest.mark.django_db
def test_it_flags_a_reload_of_what_an_earlier_step_dropped(api: Api) -> None:
    batch = [
        step("s", 0, [SYSTEM, LOG], action={"action": "drop", "target": "log"}),
        step("s", 1, [{"id": "sys"}], action={"action": "reload", "target": "log"}),
    ]
    api.ingest({"batch": batch})
    session_stats_compute(session_id=Session.objects.get(external_id="s").pk)
    assert "reload_regret" in Step.objects.with_stats().get(index=1).stats["flags"]
    assert Session.objects.get().aggregates["reload_regrets"] == 1


@pytest.mark.django_db
def test_what_a_worker_keeps_between_chunks_changes_no_statistic(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chunks of two steps: each later chunk finds the earlier contexts cached.
    from bench.ingest_gen import long_session, session_event
    from contextview.stats import services

    events = [session_event("long"), *long_session("long", 12, 30, seed=3, by_id=True)]
    assert api.ingest({"batch": events}).status_code == 207
    session = Session.objects.get(external_id="long")

    def computed(chunk: int) -> list[dict[str, object]]:
        StepStats.objects.filter(session_id=session.pk).delete()
        monkeypatch.setattr(services, "CHUNK", chunk)
        assert services.session_stats_compute(session_id=session.pk) == 12
        return list(
            Step.objects.with_stats()
            .filter(session=session)
            .order_by("index")
            .values_list("stats", flat=True)
        )

    services.caches_clear()
    fresh = computed(12)
    hot = computed(2)  # every message, count and entity now comes from the cache
    assert hot == fresh
    assert any(s["ops"] for s in fresh) and all(s["tokens"]["after"] > 0 for s in fresh)


@pytest.mark.django_db
def test_it_recomputes_every_later_chunk_when_an_early_step_arrives_late(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextview.stats import services

    monkeypatch.setattr(services, "CHUNK", 2)
    grep_1 = {"id": "g1", "role": "tool", "tool": "grep", "content": "no match in access.log"}
    grep_2 = {"id": "g2", "role": "tool", "tool": "grep", "content": "no match in error.log"}
    late = step("s", 0, [SYSTEM, grep_1])
    # Alone, step 1 brings grep_1 in, so step 2's grep repeats its tool call.
    later = [step("s", 1, [SYSTEM, grep_1]), step("s", 2, [SYSTEM, grep_1, grep_2])]
    later += [step("s", i, [SYSTEM, grep_1, grep_2]) for i in (3, 4)]
    assert api.ingest({"batch": later}).status_code == 207
    session = Session.objects.get(external_id="s")
    assert services.session_stats_compute(session_id=session.pk) == 4
    assert "repeated_tool_call" in Step.objects.with_stats().get(index=2).stats["flags"]

    assert api.ingest({"batch": [late]}).status_code == 207
    # Chunks of two: step 2, in the chunk after the late step's, is computed again.
    assert services.session_stats_compute(session_id=session.pk) == 5
    assert "repeated_tool_call" not in Step.objects.with_stats().get(index=2).stats["flags"]
    session.refresh_from_db()
    assert session.aggregates["flag_counts"].get("repeated_tool_call", 0) == 0
    assert session.stats_status == "ready" and session.stats_steps_done == 5
