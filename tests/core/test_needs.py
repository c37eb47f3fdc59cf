"""Needed later: what a session lost, and the later steps that needed it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from contextview.core.calls import result_call
from contextview.core.model import Fold, Message, Operation
from contextview.core.needs import LossTracker, link_needs, new_positions
from contextview.core.stats import StepInput, TextCache, step_stats
from tests.core.factories import msg


def words(m: Message) -> int:
    return len(m.text.split())


def call(n: int, args: str = '{"state": "stuck"}') -> Message:
    calls = [{"id": f"c{n}", "function": {"name": "search", "arguments": args}}]
    return msg(f"a{n}", "Searching.", "assistant", extra={"tool_calls": calls})


def result(n: int, content: str = "SO20260101007 stuck for 48h") -> Message:
    return msg(f"t{n}", content, "tool", tool="search", extra={"tool_call_id": f"c{n}"})


class Session:
    """Steps computed in order, as the worker does: stats, then the loss tracker."""

    def __init__(self) -> None:
        self.tracker = LossTracker()
        self.cache = TextCache()
        self.stats: dict[int, dict[str, Any]] = {}
        self.prev_ids: set[str] | None = None
        self.prev_call: tuple[str | None, str | None] = (None, None)

    def step(self, before: list[Message], ops: list[Operation] = (), folds: list[Fold] = ()) -> Any:
        index = len(self.stats)
        after = list(before)
        for op in ops:
            if op.result is not None:
                after = [op.result if m.id == op.targets[0] else m for m in after]
        out = step_stats(
            StepInput(
                before=before,
                after=after,
                ops=ops,
                folds=folds,
                prev_ids=self.prev_ids,
                prev_new_tool=self.prev_call[0],
                prev_new_call=self.prev_call[1],
            ),
            tokens_of=words,
            cache=self.cache,
        )
        reloaded = [t for op in ops if op.op == "reload" for t in op.targets]
        needs, refetches = self.tracker.needs_of(
            index, before, new_positions(before, self.prev_ids), reloaded, self.cache, words
        )
        if needs:
            out["needs"] = needs
            out["flags"].append("amnesia")
        if refetches:
            out["refetches"] = refetches
            out["flags"].append("refetch_after_fold")
        out["folded_calls"] = self.tracker.lose(
            index, out["ops"], [(f, before) for f in folds], self.cache
        )
        self.stats[index] = out
        self.prev_ids = {m.id for m in before}
        self.prev_call = (out["new_tool"], out["new_call"])
        return out


SYS = msg("sys", "You look after orders.", "system")
ASK = msg("u0", "Which orders are stuck?", "user")


def summary_step(s: Session, context: list[Message]) -> list[Message]:
    summary = msg("s1", "One order is stuck.", "tool", tool="search")
    s.step(
        context,
        [Operation(op="summarize", targets=("t1",), result=summary)],
        [Fold(0, "summarize", "fold", "s1", (context[-1],))],
    )
    return [summary if m.id == "t1" else m for m in context]


def test_it_links_a_lost_id_to_the_user_who_asks_for_it_later() -> None:
    s = Session()
    context = [SYS, ASK, call(1), result(1)]
    s.step(context)
    context = summary_step(s, context)
    s.step([*context, msg("u2", "Thanks.", "user")])
    asked = s.step([*context, msg("u2", "Thanks.", "user"), msg("u3", "And SO20260101007?")])
    assert "amnesia" in asked["flags"]
    amnesia, _, changed = link_needs(s.stats)
    assert amnesia == [{"text": "SO20260101007", "lost_at": 1, "needed_at": 3, "how": "asked"}]
    assert changed == [1]
    entities = s.stats[1]["ops"][0]["entities"]
    assert entities["needed_later"] == [{"text": "SO20260101007", "step": 3, "how": "asked"}]
    assert entities["lost"][0] == "SO20260101007"


def test_a_tool_result_in_a_user_message_does_not_ask_for_what_it_holds() -> None:
    # Anthropic's form (Claude Code): tool results come back in user messages. A
    # different command whose output happens to hold a lost entity is no need of it.
    s = Session()
    context = [SYS, ASK, call(1), result(1)]
    s.step(context)
    context = summary_step(s, context)
    other = msg(
        "a2",
        [{"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "ls"}}],
        "assistant",
    )
    back = msg(
        "u2",
        [{"type": "tool_result", "tool_use_id": "toolu_2", "content": "SO20260101007 stuck"}],
        "user",
    )
    out = s.step([*context, other, back])
    assert "amnesia" not in out["flags"], out.get("needs")
    # The same words typed by the user ask for it.
    typed = msg("u3", [{"type": "text", "text": "SO20260101007 stuck"}], "user")
    asked = s.step([*context, other, typed])
    assert asked["needs"] == [{"text": "SO20260101007", "lost_at": 1, "op": 0, "how": "asked"}]


def test_it_finds_what_the_agent_mentions_or_passes_to_a_tool() -> None:
    s = Session()
    context = [SYS, ASK, call(1), result(1)]
    s.step(context)
    context = summary_step(s, context)
    later = call(2, '{"order": "SO20260101007"}')
    out = s.step([*context, later])
    assert out["needs"] == [{"text": "SO20260101007", "lost_at": 1, "op": 0, "how": "mentioned"}]


def test_it_ignores_a_need_for_what_the_context_still_holds() -> None:
    s = Session()
    ask = msg("u0", "Is SO20260101007 stuck?", "user")
    context = [SYS, ask, call(1), result(1)]
    s.step(context)
    context = summary_step(s, context)
    out = s.step([*context, msg("u3", "So what about SO20260101007?")])
    assert "amnesia" not in out["flags"]
    assert link_needs(s.stats)[0] == []


def test_it_counts_a_reload_as_a_need_only_for_what_the_context_no_longer_holds() -> None:
    s = Session()
    ask = msg("u0", "Is SO20260101007 stuck? See /srv/orders.py", "user")
    context = [SYS, ask, call(1), result(1, "SO20260101007 stuck 48h in /srv/inventory.py")]
    s.step(context)
    context = summary_step(s, context)
    out = s.step([*context], [Operation(op="reload", targets=("t1",))])
    # The order number is still in the question: only what left with the result was
    # needed back.
    assert {(n["text"], n["how"]) for n in out["needs"]} == {
        ("48h", "reloaded"),
        ("/srv/inventory.py", "reloaded"),
    }


def test_it_counts_a_refetch_of_a_folded_result_with_its_tokens() -> None:
    s = Session()
    context = [SYS, ASK, call(1), result(1)]
    s.step(context)
    context = summary_step(s, context)
    out = s.step([*context, call(2), result(2)])
    assert "refetch_after_fold" in out["flags"]
    assert {"how": "refetched", "text": "SO20260101007", "lost_at": 1, "op": 0} in out["needs"]
    _, refetches, _ = link_needs(s.stats)
    assert refetches == [{"tool": "search", "lost_at": 1, "refetched_at": 2, "tokens": 4}]


def test_it_does_not_count_the_same_tool_with_other_arguments_as_a_refetch() -> None:
    s = Session()
    context = [SYS, ASK, call(1), result(1)]
    s.step(context)
    context = summary_step(s, context)
    out = s.step([*context, call(2, '{"state": "paid"}'), result(2, "nothing paid")])
    assert "refetch_after_fold" not in out["flags"]


def test_it_repeats_a_tool_call_only_with_the_same_arguments() -> None:
    s = Session()
    s.step([SYS, ASK, call(1), result(1)])
    other = s.step([SYS, ASK, call(1), result(1), call(2, '{"state": "paid"}'), result(2, "none")])
    assert "repeated_tool_call" not in other["flags"]
    same = s.step(
        [SYS, ASK, call(1), result(1), call(2, '{"state": "paid"}'), result(2, "none")]
        + [call(3, '{"state":"paid"}'), result(3, "none")]
    )
    assert "repeated_tool_call" in same["flags"]


def test_it_reads_the_arguments_of_openai_anthropic_and_contract_calls() -> None:
    anthropic = msg(
        "a1",
        [{"type": "tool_use", "id": "tu1", "name": "read", "input": {"path": "a.py"}}],
        "assistant",
    )
    answer = msg("r1", "x", "tool", tool="read", extra={"tool_use_id": "tu1"})
    assert result_call([anthropic, answer], 1) == ("read", '{"path":"a.py"}')
    own = msg("r2", "x", "tool", tool="read", extra={"arguments": '{"path": "a.py"}'})
    assert result_call([own], 0) == ("read", '{"path":"a.py"}')
    assert result_call([msg("r3", "x", "tool", tool="read")], 0) == ("read", None)


def test_it_finds_the_call_of_a_codex_patch_and_of_a_responses_api_result() -> None:
    # Codex's apply_patch is a custom_tool_call; a Responses API function_call has an
    # id of its own beside the call_id its output names.
    patch = msg(
        "a1",
        [{"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "*** x"}],
        "assistant",
    )
    applied = msg("r1", "Done", "tool", extra={"tool_call_id": "c1"})
    assert result_call([patch, applied], 1) == ("apply_patch", "*** x")
    grep = msg(
        "a2",
        [
            {
                "type": "function_call",
                "id": "fc_7",
                "call_id": "call_7",
                "name": "grep",
                "arguments": '{"q": "504"}',
            }
        ],
        "assistant",
    )
    output = msg(
        "r2", [{"type": "function_call_output", "call_id": "call_7", "output": "3 hits"}], "user"
    )
    assert result_call([grep, output], 1) == ("grep", '{"q":"504"}')


def test_it_rebuilds_the_tracker_from_earlier_stats() -> None:
    s = Session()
    context = [SYS, ASK, call(1), result(1)]
    s.step(context)
    context = summary_step(s, context)
    resumed = LossTracker()
    resumed.restore(sorted(s.stats.items()))
    s.tracker = resumed
    out = s.step([*context, msg("u3", "And SO20260101007?")])
    assert out["needs"][0]["how"] == "asked"
    assert resumed.folded_calls  # the folded search, for a refetch later


def test_it_flags_a_pinned_text_in_the_middle_of_a_long_context() -> None:
    filler = " ".join(["w"] * 2000)
    middle = [
        msg("a", filler, "system"),
        msg("b", filler, "user"),
        msg("p", "keep SO20260101007", "user", pinned=True),
        msg("c", filler, "user"),
        msg("d", filler, "user"),
        msg("e", filler, "user"),
    ]
    assert (
        "pinned_mid" in step_stats(StepInput(before=middle, after=middle), tokens_of=words)["flags"]
    )
    start = [middle[2], *middle[:2], *middle[3:]]
    assert (
        "pinned_mid"
        not in step_stats(StepInput(before=start, after=start), tokens_of=words)["flags"]
    )


def test_it_reports_unseen_tokens_from_provider_usage_and_no_estimate_error() -> None:
    context = [msg("u", "one two three four", "user")]
    usage = {"input_tokens": 30, "cache_read_tokens": 70}
    # The reported before count is the provider's (no before_tokens was sent).
    provider = StepInput(
        before=context, after=context, usage=usage, reported_before=100, reported_by_usage=True
    )
    out = step_stats(provider, tokens_of=words)
    assert out["unseen_tokens"] == 96
    assert "token_estimate_off" not in out["flags"]
    agent = step_stats(
        StepInput(before=context, after=context, reported_before=100), tokens_of=words
    )
    assert "token_estimate_off" in agent["flags"] and "unseen_tokens" not in agent
    # The agent's own before_tokens, sent beside usage, is still its own estimate.
    both = step_stats(replace(provider, reported_by_usage=False), tokens_of=words)
    assert both["reported_error"]["before"] == 24.0
    assert "token_estimate_off" in both["flags"] and both["unseen_tokens"] == 96


def test_the_occupancy_flags_read_the_providers_count_alike() -> None:
    # 4 words seen, 9,950 tokens read by the model: over 90% of 10,000 and over the
    # budget's 9,900 both, as one count (budget_exceeded read the 4 words alone).
    context = [msg("u", "one two three four", "user")]
    budget = {"max_tokens": 10_000, "reserved_tokens": 100}
    read = {"input_tokens": 9_950}
    out = step_stats(
        StepInput(before=context, after=context, usage=read, budget=budget), tokens_of=words
    )
    assert out["occupancy"]["after"] == pytest.approx(0.995)
    assert {"over_70", "over_90", "budget_exceeded"} <= set(out["flags"])
    under = step_stats(
        StepInput(before=context, after=context, usage={"input_tokens": 9_850}, budget=budget),
        tokens_of=words,
    )
    assert "over_90" in under["flags"] and "budget_exceeded" not in under["flags"]
