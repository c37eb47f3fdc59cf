"""Step statistics, flags, reward and session aggregates."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from contextview.core.apply import apply_operations
from contextview.core.model import Fold, Message, Operation
from contextview.core.needs import link_needs
from contextview.core.stats import FLAGS, StepInput, session_aggregates, step_stats
from contextview.core.tokens import TokenCounter
from tests.core.factories import NGINX_LOG, SUMMARY, msg, seed_context


def words(m: Message) -> int:
    # Flag thresholds are easiest to hit exactly with one "token" per word; the
    # real counter is used where the counts themselves are the point.
    return len(m.text.split())


def text_of(n: int, word: str = "w") -> str:
    return " ".join([word] * n)


def stats(step: StepInput) -> dict[str, Any]:
    return step_stats(step, tokens_of=words)


def summarize(
    before: list[Message], target: str, content: str, *, op: str = "summarize"
) -> StepInput:
    """A step replacing `target` by a message `sum_1` with `content`."""
    original = next(m for m in before if m.id == target)
    result = msg("sum_1", content, original.role, partition=original.partition)
    after = [result if m.id == target else m for m in before]
    return StepInput(
        before=before,
        after=after,
        ops=[Operation(op=op, targets=(target,), result=result)],
        folds=[Fold(0, op, "fold", "sum_1", (original,))],
    )


def drop(before: list[Message], target: str) -> StepInput:
    original = next(m for m in before if m.id == target)
    return StepInput(
        before=before,
        after=[m for m in before if m.id != target],
        ops=[Operation(op="drop", targets=(target,))],
        folds=[Fold(0, "drop", "drop", None, (original,))],
    )


def context_of(n: int, *, tool: int = 0) -> list[Message]:
    """A context of `n` words, `tool` of them in one tool message."""
    messages = [msg("sys", text_of(n - tool), "system")]
    if tool:
        messages.append(msg("t1", text_of(tool), "tool", tool="read_file"))
    return messages


def with_budget(step: StepInput, **budget: Any) -> StepInput:
    return replace(step, budget=budget)


def unchanged(messages: list[Message], **kw: Any) -> StepInput:
    return StepInput(before=messages, after=messages, **kw)


# --- tokens, partitions, occupancy, reported error


def test_it_counts_tokens_per_context_and_partition() -> None:
    before = seed_context()
    step = summarize(before, "tool_result_32", SUMMARY)
    counter = TokenCounter("cl100k_base")
    result = step_stats(step, tokens_of=lambda m: counter.count(m.text))

    expected_before = sum(counter.count(m.text) for m in before)
    expected_after = sum(counter.count(m.text) for m in step.after)
    assert result["tokens"] == {"before": expected_before, "after": expected_after}
    assert result["partitions"]["tool"] == {
        "before": counter.count(NGINX_LOG),
        "after": counter.count(SUMMARY),
    }
    assert list(result["partitions"]) == ["system", "memory", "tool", "question"]
    assert result["encoding"] == "cl100k_base"


def test_it_lists_budgeted_partitions_even_when_empty() -> None:
    result = stats(with_budget(unchanged(context_of(10)), max_tokens=100, partitions={"tool": 5}))
    assert result["partitions"]["tool"] == {"before": 0, "after": 0}


def test_it_leaves_occupancy_null_without_a_budget() -> None:
    result = stats(unchanged(context_of(90)))
    assert result["occupancy"] == {"before": None, "after": None}
    assert not {"over_70", "over_90", "budget_exceeded"} & set(result["flags"])


def test_it_measures_occupancy_against_max_tokens() -> None:
    step = with_budget(drop(context_of(80, tool=30), "t1"), max_tokens=100, reserved_tokens=10)
    assert stats(step)["occupancy"] == {"before": 0.8, "after": 0.5}


def test_it_names_the_context_window_it_measured_occupancy_against() -> None:
    context = [msg("u", text_of(700), "user")]
    out = stats(StepInput(before=context, after=context, context_window=1000))
    assert (out["window"], out["occupancy"]["after"]) == (1000, 0.7)
    budgeted = stats(with_budget(StepInput(before=context, after=context), max_tokens=2000))
    assert "window" not in budgeted and budgeted["occupancy"]["after"] == 0.35


def test_it_measures_the_agents_token_error() -> None:
    step = replace(unchanged(context_of(100)), reported_before=120, reported_after=95)
    result = stats(step)
    assert result["reported_error"] == {"before": pytest.approx(0.2), "after": -0.05}


def test_it_leaves_the_error_null_when_not_reported_or_nothing_measured() -> None:
    assert stats(unchanged(context_of(10)))["reported_error"] == {"before": None, "after": None}
    empty = StepInput(before=[], after=[], reported_before=5, reported_after=5)
    assert stats(empty)["reported_error"] == {"before": None, "after": None}


# --- flags, each raised and not raised


@pytest.mark.parametrize(
    ("after_tokens", "raised"),
    [(71, {"over_70"}), (70, set()), (91, {"over_70", "over_90"}), (90, {"over_70"})],
)
def test_it_flags_occupancy_over_70_and_90(after_tokens: int, raised: set[str]) -> None:
    step = with_budget(unchanged(context_of(after_tokens)), max_tokens=100)
    assert {"over_70", "over_90"} & set(stats(step)["flags"]) == raised


def test_it_looks_at_the_after_context_for_occupancy_flags() -> None:
    step = with_budget(drop(context_of(95, tool=50), "t1"), max_tokens=100)
    assert stats(step)["flags"] == []


@pytest.mark.parametrize(("after_tokens", "raised"), [(91, True), (90, False)])
def test_it_flags_budget_exceeded_past_max_minus_reserved(after_tokens: int, raised: bool) -> None:
    step = with_budget(unchanged(context_of(after_tokens)), max_tokens=100, reserved_tokens=10)
    assert ("budget_exceeded" in stats(step)["flags"]) is raised


@pytest.mark.parametrize(("tool_tokens", "raised"), [(6, True), (5, False)])
def test_it_flags_a_partition_over_its_budget(tool_tokens: int, raised: bool) -> None:
    step = with_budget(
        unchanged(context_of(20, tool=tool_tokens)), max_tokens=1000, partitions={"tool": 5}
    )
    assert ("partition_over" in stats(step)["flags"]) is raised


@pytest.mark.parametrize(("out", "raised"), [(9, True), (8, False)])
def test_it_flags_an_ineffective_ratio(out: int, raised: bool) -> None:
    result = stats(summarize(context_of(20, tool=10), "t1", text_of(out)))
    assert result["ops"][0]["ratio"] == out / 10
    assert ("ratio_ineffective" in result["flags"]) is raised


@pytest.mark.parametrize(("out", "raised"), [(4, True), (5, False)])
def test_it_flags_an_aggressive_ratio(out: int, raised: bool) -> None:
    result = stats(summarize(context_of(200, tool=100), "t1", text_of(out)))
    assert result["ops"][0]["ratio"] == out / 100
    assert ("ratio_aggressive" in result["flags"]) is raised


def test_it_gives_no_ratio_to_operations_that_do_not_replace() -> None:
    result = stats(drop(context_of(200, tool=100), "t1"))
    entry = result["ops"][0]
    assert entry["ratio"] is None
    assert (entry["tokens_in"], entry["tokens_out"]) == (100, 0)
    assert result["flags"] == []


def test_it_flags_a_summary_that_loses_a_key_entity() -> None:
    result = stats(summarize(seed_context(), "tool_result_32", "inventory timed out"))
    entities = result["ops"][0]["entities"]
    assert "entity_loss" in result["flags"]
    assert "SO20260101007" in entities["lost"]
    assert "504" in entities["lost"]
    assert entities["kept"] == entities["total"] - len(entities["lost"])


def test_it_flags_a_summary_that_keeps_an_id_but_drops_its_path() -> None:
    log = "GET /api/orders/SO20260101007 took 3 s " + text_of(40, "ok")
    before = [msg("sys", "You debug orders.", "system"), msg("t1", log, "tool", tool="http")]
    result = stats(summarize(before, "t1", "SO20260101007 took 3s"))
    assert result["ops"][0]["entities"]["lost"] == ["/api/orders/SO20260101007"]
    assert "entity_loss" in result["flags"]


def test_it_lists_first_what_the_task_and_the_question_in_the_context_hold() -> None:
    log = "got E4042 at /srv/app/main.py; ticket INV-5521; host 10.0.0.12 down"
    before = [
        msg("sys", "You keep the shop running.", "system"),
        msg("task", "Resolve ticket INV-5521.", "user", partition="task"),
        msg("u1", "Why is host 10.0.0.12 failing?", "user"),
        msg("t1", log, "tool", tool="read_file"),
    ]
    lost = stats(summarize(before, "t1", "Something failed."))["ops"][0]["entities"]["lost"]
    assert set(lost[:2]) == {"INV-5521", "10.0.0.12"}
    assert set(lost[2:]) == {"E4042", "/srv/app/main.py"}
    # A tool's result sent back in a user message asks for nothing.
    answered = [*before[:3], replace(before[3], role="user", partition="question")]
    answered[3] = replace(answered[3], content=[{"type": "tool_result", "content": log}])
    lost = stats(summarize(answered, "t1", "Something failed."))["ops"][0]["entities"]["lost"]
    assert set(lost[:2]) == {"INV-5521", "10.0.0.12"}


def test_it_does_not_flag_a_summary_that_keeps_its_entities() -> None:
    log = "GET /api/orders/SO20260101007 took 3 s and returned HTTP 504 " + text_of(40, "ok")
    before = [msg("sys", "You debug orders.", "system"), msg("t1", log, "tool", tool="http")]
    result = stats(summarize(before, "t1", "/api/orders/SO20260101007: HTTP 504 after 3s"))
    entities = result["ops"][0]["entities"]
    assert entities["lost"] == []
    assert entities["kept"] == entities["total"] > 0
    assert "entity_loss" not in result["flags"]


def test_it_reports_what_a_drop_took_away_without_flagging_it() -> None:
    result = stats(drop(seed_context(), "tool_result_32"))
    entities = result["ops"][0]["entities"]
    assert "SO20260101007" in entities["lost"]
    assert entities["kept"] == 0
    assert "entity_loss" not in result["flags"]


def reload_step(reloaded: str, folded_earlier: set[str]) -> StepInput:
    original = msg("tool_result_32", NGINX_LOG, "tool", tool="read_file")
    before = [msg("sys", "You debug orders.", "system")]
    return StepInput(
        before=before,
        after=[*before, original],
        ops=[Operation(op="reload", targets=(reloaded,))],
        reloaded=[reloaded],
        folded_earlier=frozenset(folded_earlier),
    )


def test_it_flags_reloading_what_an_earlier_step_folded() -> None:
    result = stats(reload_step("tool_result_32", {"tool_result_32"}))
    assert "reload_regret" in result["flags"]
    assert result["regretted_reloads"] == ["tool_result_32"]
    assert result["ops"][0]["tokens_out"] == len(NGINX_LOG.split())


def test_it_does_not_flag_a_reload_of_something_not_folded_earlier() -> None:
    assert "reload_regret" not in stats(reload_step("tool_result_32", {"other"}))["flags"]


def tool_step(prev_new_tool: str | None, prev_ids: set[str] | None) -> StepInput:
    before = [
        msg("u1", "why does it time out", "user"),
        msg("t1", "old listing", "tool", tool="grep"),
        msg("t2", "new file body", "tool", tool="read_file"),
    ]
    return unchanged(before, prev_new_tool=prev_new_tool, prev_ids=prev_ids)


def test_it_flags_the_same_tool_called_twice_in_a_row() -> None:
    result = stats(tool_step("read_file", {"u1", "t1"}))
    assert "repeated_tool_call" in result["flags"]
    assert result["new_tool"] == "read_file"


def test_it_does_not_flag_a_different_tool_or_an_old_tool_message() -> None:
    assert "repeated_tool_call" not in stats(tool_step("grep", {"u1", "t1"}))["flags"]
    # t2 was already there: this step made no new read_file call.
    old = stats(tool_step("read_file", {"u1", "t1", "t2"}))
    assert "repeated_tool_call" not in old["flags"]
    assert old["new_tool"] is None


def test_it_flags_a_session_pinned_text_that_left() -> None:
    step = replace(drop(seed_context(), "sys"), pinned=["Answer in a table"])
    result = stats(step)
    assert "pinned_missing" in result["flags"]
    assert result["missing_pinned"] == ["Answer in a table"]


def test_it_does_not_flag_a_pinned_text_that_stays() -> None:
    step = replace(drop(seed_context(), "tool_result_32"), pinned=["answer  in a TABLE"])
    assert "pinned_missing" not in stats(step)["flags"]


def test_it_flags_a_pinned_message_that_left_or_changed() -> None:
    before = [msg("m1", "member id A12345", "user", pinned=True), msg("u2", "hello", "user")]
    assert "pinned_missing" in stats(drop(before, "m1"))["flags"]
    assert "pinned_missing" in stats(summarize(before, "m1", "a member"))["flags"]


def test_it_does_not_flag_a_pinned_message_unpinned_in_the_same_step() -> None:
    before = [msg("m1", "member id A12345", "user", pinned=True), msg("u2", "hello", "user")]
    step = drop(before, "m1")
    step = replace(
        step,
        ops=[Operation(op="unpin", targets=("m1",)), *step.ops],
        folds=[replace(step.folds[0], op_index=1)],
    )
    assert "pinned_missing" not in stats(step)["flags"]


def test_it_does_not_flag_a_pinned_message_whose_text_survives() -> None:
    before = [msg("m1", "member id A12345", "user", pinned=True), msg("u2", "hello", "user")]
    assert "pinned_missing" not in stats(unchanged(before))["flags"]
    merged = summarize(before, "m1", "Facts: member id A12345; order SO20260101007.")
    assert "pinned_missing" not in stats(merged)["flags"]


def test_it_flags_an_after_that_differs_from_the_derivation() -> None:
    mismatched = replace(unchanged(context_of(5)), after_mismatch=True)
    assert "after_mismatch" in stats(mismatched)["flags"]
    assert "after_mismatch" not in stats(unchanged(context_of(5)))["flags"]


@pytest.mark.parametrize(("reported", "raised"), [(111, True), (89, True), (110, False)])
def test_it_flags_an_agent_token_estimate_off_by_more_than_10_percent(
    reported: int, raised: bool
) -> None:
    step = replace(unchanged(context_of(100)), reported_before=100, reported_after=reported)
    assert ("token_estimate_off" in stats(step)["flags"]) is raised


def test_it_only_raises_flags_the_contract_names() -> None:
    step = replace(
        with_budget(
            summarize(context_of(200, tool=150), "t1", "x"),
            max_tokens=55,
            reserved_tokens=10,
            partitions={"system": 1},
        ),
        pinned=["nowhere"],
        after_mismatch=True,
        reported_after=1,
    )
    flags = stats(step)["flags"]
    assert flags == sorted(set(flags))
    assert set(flags) <= set(FLAGS)
    assert {"over_90", "budget_exceeded", "partition_over", "ratio_aggressive"} <= set(flags)


# --- reward


def test_it_rewards_a_summary_that_halves_tokens_and_keeps_entities() -> None:
    log = "order SO20260101007 failed with E1001 " + text_of(40, "ok")
    before = [msg("sys", "You debug orders.", "system"), msg("t1", log, "tool", tool="http")]
    step = summarize(before, "t1", "SO20260101007 failed: E1001")
    assert stats(step)["reward"] == 1.0
    # Within a budget, a summarize earns seed 000's +0.2 as well.
    assert stats(with_budget(step, max_tokens=1000))["reward"] == 1.2
    # A rewrite is no summarize.
    rewrite = summarize(before, "t1", "SO20260101007 failed: E1001", op="rewrite")
    assert stats(with_budget(rewrite, max_tokens=1000))["reward"] == 1.0


def test_it_gives_nothing_for_a_summary_that_saves_too_little() -> None:
    step = summarize(context_of(20, tool=10), "t1", text_of(6))
    assert stats(step)["reward"] == 0.0


def test_it_penalizes_needed_loss_reloads_repeats_and_overflow() -> None:
    loss = stats(summarize(seed_context(), "tool_result_32", "inventory timed out"))
    # Losing what no later step needed costs nothing: the summary halved the tokens.
    assert "entity_loss" in loss["flags"] and loss["reward"] == 1.0
    needing = {
        "text": loss["ops"][0]["entities"]["lost"][-1],
        "lost_at": 0,
        "op": 0,
        "how": "asked",
    }
    link_needs({0: loss, 1: {"ops": [], "reward": 0.0, "needs": [needing]}})
    assert loss["reward"] == -0.5
    assert loss["ops"][0]["entities"]["lost"][0] == needing["text"]
    assert stats(reload_step("tool_result_32", {"tool_result_32"}))["reward"] == -1.0
    assert stats(tool_step("read_file", {"u1", "t1"}))["reward"] == -0.3
    # 110 tokens over a limit of 100: -0.5 * (1 + 0.1)
    over = with_budget(unchanged(context_of(110)), max_tokens=120, reserved_tokens=20)
    assert stats(over)["reward"] == -0.55
    # twice the limit or more: -1.0
    far_over = with_budget(unchanged(context_of(300)), max_tokens=120, reserved_tokens=20)
    assert stats(far_over)["reward"] == -1.0


# --- with the real operations of apply.py


def test_it_measures_the_folds_that_apply_produces() -> None:
    before = seed_context()
    result = msg("sum_1", SUMMARY, "tool")
    ops = [
        Operation(op="summarize", targets=("tool_result_32",), result=result),
        Operation(op="drop", targets=("a1",)),
    ]
    applied = apply_operations(before, ops, archive={})
    step = StepInput(before=before, after=applied.after, ops=applied.ops, folds=applied.folds)
    out = stats(step)
    summary, dropped = out["ops"]
    assert summary["op"] == "summarize"
    assert summary["result_id"] == "sum_1"
    assert summary["tokens_in"] == len(NGINX_LOG.split())
    assert summary["entities"]["lost"] == [] or "entity_loss" in out["flags"]
    assert dropped == {
        "op": "drop",
        "targets": ["a1"],
        "result_id": None,
        "tokens_in": len(before[3].text.split()),
        "tokens_out": 0,
        "ratio": None,
        "entities": {"total": 2, "kept": 0, "lost": ["504", "3 s"], "needed_later": []},
    }


def _insert(tokens: int) -> dict[str, object]:
    return {
        "op": "insert", "targets": [], "result_id": "ins", "tokens_in": 0, "tokens_out": tokens,
        "ratio": None, "entities": {"total": 0, "kept": 0, "lost": [], "needed_later": []},
    }  # fmt: skip


def test_what_a_compaction_re_injects_counts_against_what_it_saved() -> None:
    # Codex's compaction: the history summarized, the user's recent prompts put back.
    compaction = stats(summarize(context_of(80, tool=40), "t1", text_of(10)))
    compaction["ops"] += [_insert(7), _insert(5)]
    # A retrieved passage inserted alone saves and costs nothing.
    retrieval = stats(unchanged(context_of(95)))
    retrieval["ops"] = [_insert(50)]
    agg = session_aggregates([compaction, retrieval])
    assert agg["tokens_saved"] == 30 - 7 - 5
    assert agg["ops_by_type"] == {"insert": 3, "summarize": 1}


def test_a_summary_the_provider_encrypted_has_no_ratio_rather_than_zero() -> None:
    # Codex's compaction item: the summary is encrypted, no text to count.
    before = context_of(80, tool=40)
    step = summarize(before, "t1", "")
    opaque = replace(
        step.ops[0].result,
        content=[{"type": "compaction", "encrypted_content": "gAAAAB..."}],
    )
    after = [opaque if m.id == "sum_1" else m for m in step.after]
    out = stats(replace(step, after=after, ops=[replace(step.ops[0], result=opaque)]))
    op = out["ops"][0]
    assert (op["tokens_in"], op["tokens_out"], op["ratio"]) == (40, 0, None)
    assert "ratio_aggressive" not in out["flags"]
    # A summary with text keeps its ratio.
    assert stats(summarize(before, "t1", text_of(10)))["ops"][0]["ratio"] == 0.25


# --- aggregates


def test_it_aggregates_a_session() -> None:
    budget = {"max_tokens": 100, "reserved_tokens": 10}
    steps = [
        stats(with_budget(summarize(context_of(80, tool=40), "t1", text_of(10)), **budget)),
        stats(with_budget(drop(context_of(95, tool=20), "t1"), **budget)),
        stats(with_budget(unchanged(context_of(95)), **budget)),
        stats(reload_step("tool_result_32", {"tool_result_32"})),
    ]
    agg = session_aggregates(steps)
    assert agg["steps"] == 4
    assert agg["peak_occupancy"] == 0.95
    assert agg["mean_occupancy"] == pytest.approx((0.5 + 0.75 + 0.95) / 3)
    assert agg["ops_by_type"] == {"drop": 1, "reload": 1, "summarize": 1}
    assert agg["tokens_saved"] == 30 + 20
    assert agg["mean_ratio"] == 0.25
    assert agg["entity_retention"] is None  # the summarized text held no entity
    assert agg["reload_regrets"] == 1
    assert agg["budget_violations"] == 1
    assert agg["flag_counts"] == {
        "budget_exceeded": 1,
        "over_70": 2,
        "over_90": 1,
        "reload_regret": 1,
    }


def test_it_measures_entity_retention_over_replacing_operations() -> None:
    kept = stats(summarize(seed_context(), "tool_result_32", SUMMARY))
    lost = stats(summarize(seed_context(), "tool_result_32", "inventory timed out"))
    dropped = stats(drop(seed_context(), "tool_result_32"))
    agg = session_aggregates([kept, lost, dropped])
    total = kept["ops"][0]["entities"]["total"] + lost["ops"][0]["entities"]["total"]
    assert agg["entity_retention"] == (kept["ops"][0]["entities"]["kept"]) / total


def test_it_aggregates_an_empty_session() -> None:
    agg = session_aggregates([])
    assert agg["steps"] == 0
    assert agg["peak_occupancy"] is None
    assert agg["mean_ratio"] is None
    assert agg["flag_counts"] == {}


# --- inferred operations -----------------------------------------------------------------


def test_it_measures_inferred_operations_after_the_steps_own_marked_inferred() -> None:
    from contextview.core.infer import infer_step

    previous = [
        *seed_context(),
        msg("pin", "reply before Friday", "user", pinned=True),
    ]
    obs = [previous[0], msg("sum", "The user asks about an order.", "user")]
    inferred = infer_step(previous, obs)
    own = Operation(op="keep", targets=("sys",))
    out = stats(
        StepInput(
            before=obs,
            after=obs,
            ops=[own],
            inferred_ops=inferred.ops,
            inferred_folds=inferred.folds,
        )
    )
    keep, summary = out["ops"]
    assert keep["op"] == "keep" and "inferred" not in keep
    assert (summary["op"], summary["inferred"], summary["result_id"]) == ("summarize", True, "sum")
    assert summary["targets"] == ["u1", "tool_result_32", "a1", "pin"]
    assert summary["ratio"] == summary["tokens_out"] / summary["tokens_in"] < 0.5
    assert "SO20260101007" in summary["entities"]["lost"]
    # The pinned message left with the compaction and its text is nowhere in the context.
    assert {"entity_loss", "pinned_missing"} <= set(out["flags"])
    assert out["missing_pinned"] == ["reply before Friday"]
    assert session_aggregates([out])["ops_by_type"] == {"keep": 1, "summarize": 1}


def test_it_counts_what_an_insert_brings_in() -> None:
    note = msg("note", text_of(7), "user")
    before = seed_context()
    out = stats(
        StepInput(
            before=before,
            after=[*before, note],
            ops=[Operation(op="insert", targets=(), result=note)],
        )
    )
    [entry] = out["ops"]
    assert (entry["tokens_in"], entry["tokens_out"], entry["ratio"]) == (0, 7, None)


# --- contract v1.1: tools, context window, provider usage, estimated parts -------------


def test_it_counts_tool_definitions_in_a_tools_partition_of_both_contexts() -> None:
    context = [msg("u1", text_of(10))]
    got = stats(StepInput(before=context, after=context, tools_tokens=7))
    assert got["tokens"] == {"before": 17, "after": 17}
    assert got["partitions"]["tools"] == {"before": 7, "after": 7}


def test_it_measures_occupancy_against_the_context_window_without_a_budget() -> None:
    context = [msg("u1", text_of(95))]
    got = stats(StepInput(before=context, after=context, context_window=100))
    assert got["occupancy"] == {"before": 0.95, "after": 0.95}
    assert {"over_70", "over_90"} <= set(got["flags"])
    # A budget's max_tokens wins over the window.
    budgeted = StepInput(
        before=context, after=context, context_window=100, budget={"max_tokens": 1000}
    )
    assert stats(budgeted)["occupancy"]["after"] == 0.095


def test_it_takes_the_reported_before_count_from_provider_usage() -> None:
    from contextview.core.stats import reported_before

    usage = {"input_tokens": 40, "cache_read_tokens": 50, "cache_write_tokens": 10}
    assert reported_before(None, usage) == 100
    assert reported_before(90, usage) == 90
    anthropic = {"input_tokens": 5, "cache_read_input_tokens": 7, "cache_creation_input_tokens": 1}
    assert reported_before(None, anthropic) == 13
    assert reported_before(None, {"prompt_tokens": 12, "completion_tokens": 3}) == 12
    assert reported_before(None, {"output_tokens": 3}) is None
    assert reported_before(None, None) is None


def test_it_does_not_flag_provider_usage_as_an_agent_estimate_off() -> None:
    context = [msg("u1", text_of(10))]
    by_usage = StepInput(before=context, after=context, reported_before=30, reported_by_usage=True)
    got = stats(by_usage)
    assert got["reported_error"]["before"] == 2.0
    assert "token_estimate_off" not in got["flags"]
    assert "token_estimate_off" in stats(replace(by_usage, reported_by_usage=False))["flags"]


def test_it_marks_tokens_counted_by_rule_as_estimated() -> None:
    from contextview.core.stats import ContextMeter

    image = msg("u1", [{"type": "text", "text": "see"}, {"type": "image", "media_type": "x"}])
    plain = msg("u2", "nothing to estimate")

    def estimated_of(m: Message) -> int:
        return m.reading.estimated_tokens

    got = step_stats(
        StepInput(before=[image, plain], after=[plain]),
        tokens_of=words,
        estimate_meter=ContextMeter(estimated_of),
    )
    assert got["estimated"] is True
    assert got["estimated_tokens"] == {"before": 1000, "after": 0}
    assert "estimated" not in stats(StepInput(before=[plain], after=[plain]))
