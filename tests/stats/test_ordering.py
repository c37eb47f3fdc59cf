from __future__ import annotations

import pytest

from contextview.sessions.models import Session, Step, StepStats
from contextview.stats.services import session_stats_compute
from tests.api_client import Api, step

SYSTEM = {"id": "sys", "role": "system", "content": "You read logs."}
LOG = {"id": "log", "role": "tool", "tool": "grep", "content": "504 from inventory-svc after 3 s"}
RELOAD = {"action": "reload", "target": "t1"}


def _long_session(api: Api) -> Session:
    """A 12-step session of 30-message contexts, with compactions, ingested."""
    from bench.ingest_gen import long_session, session_event

    events = [session_event("long"), *long_session("long", 12, 30, seed=3, by_id=True)]
    assert api.ingest({"batch": events}).status_code == 207
    return Session.objects.get(external_id="long")


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
    from contextview.stats import services

    session = _long_session(api)

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


def _stats_and_aggregates(session: Session) -> tuple[list[object], dict[str, object]]:
    session.refresh_from_db()
    steps = Step.objects.with_stats().filter(session=session).order_by("index")
    return list(steps.values_list("index", "stats")), session.aggregates


def _computed_whole(session: Session) -> tuple[list[object], dict[str, object]]:
    from contextview.stats import services

    services.caches_clear()  # a new worker process, from what is stored alone
    services.stats_recompute(session_ids=[session.pk])
    return _stats_and_aggregates(session)


def _rebuilds_noted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The first pending steps of the chunks that start from what is stored, not from
    the run carried (``services._stored_taken``), as they happen."""
    from contextview.stats import services

    read_back: list[int] = []
    stored_taken = services._stored_taken
    monkeypatch.setattr(
        services,
        "_stored_taken",
        lambda run, session, first: read_back.append(first) or stored_taken(run, session, first),
    )
    return read_back


@pytest.mark.django_db
def test_a_session_computed_step_by_step_as_it_arrives_has_the_statistics_of_it_whole(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextview.stats import services
    from tests.stats.test_loss import amnesia_session

    # and at the end, the summarized result is reloaded: a regret of what was folded
    events = [*amnesia_session("live"), step("live", 7, [SYSTEM], action=RELOAD)]
    assert api.ingest({"batch": events[:2]}).status_code == 207
    session = Session.objects.get(external_id="live")
    services.session_stats_compute(session_id=session.pk)
    # Every later step's run starts from what this process's last run left: what the
    # session lost so far is not rebuilt from the stored statistics of every step.
    read_back = _rebuilds_noted(monkeypatch)
    for event in events[2:]:
        assert api.ingest({"batch": [event]}).status_code == 207
        assert services.session_stats_compute(session_id=session.pk) == 1
    assert read_back == []
    live = _stats_and_aggregates(session)
    assert live[1]["steps"] == len(events) - 1 and live[1]["amnesia"]
    assert live[1]["reload_regrets"] == 1
    assert live == _computed_whole(session)


@pytest.mark.django_db
def test_a_run_carried_past_another_workers_run_is_not_used(api: Api) -> None:
    from contextview.stats import services
    from tests.stats.test_loss import amnesia_session

    start, *steps = amnesia_session("carried")
    # Steps 0, 1, 3 and 4 first; this process computes them and keeps its run.
    assert api.ingest({"batch": [start, *steps[:2], *steps[3:5]]}).status_code == 207
    session = Session.objects.get(external_id="carried")
    services.session_stats_compute(session_id=session.pk)
    kept = services._CACHE.pop(services._key("run", session.pk))
    assert kept is not None
    # Another worker computes the late step 2 (the summary that loses SO20260101007),
    # and with it steps 3 and 4 again.
    assert api.ingest({"batch": [steps[2]]}).status_code == 207
    services.caches_clear()
    assert services.session_stats_compute(session_id=session.pk) == 3
    # This process's run, from before that, is still at hand when step 5 comes.
    services._CACHE.put(services._key("run", session.pk), kept, 1)
    assert api.ingest({"batch": steps[5:]}).status_code == 207
    assert services.session_stats_compute(session_id=session.pk) == 2
    carried = _stats_and_aggregates(session)
    assert {"text": "SO20260101007", "lost_at": 2, "needed_at": 5, "how": "asked"} in carried[1][
        "amnesia"
    ]
    assert carried == _computed_whole(session)


@pytest.mark.django_db
def test_a_run_past_the_steps_it_carries_reads_the_sums_back_and_nothing_else(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextview.stats import services

    session = _long_session(api)
    whole = _computed_whole(session)
    StepStats.objects.filter(session_id=session.pk).delete()
    # Chunks of two steps, and no more than three steps' statistics kept by a run.
    monkeypatch.setattr(services, "CHUNK", 2)
    monkeypatch.setattr(services, "CARRIED_STEPS", 3)
    read_back = _rebuilds_noted(monkeypatch)
    services.caches_clear()
    assert services.session_stats_compute(session_id=session.pk) == 12
    # The loss tracker went on from chunk to chunk: no chunk started from the store.
    assert read_back == []
    assert _stats_and_aggregates(session) == whole
    assert services._CACHE.pop(services._key("run", session.pk)) is None  # nothing carried
