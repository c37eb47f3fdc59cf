"""Replaying a recorded session under another context policy."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextview.core.errors import InputError
from contextview.core.model import Message
from contextview.core.replay import (
    MODE_POLICIES,
    RecordedStep,
    policy_from_json,
    replay,
)
from tests.core.factories import NGINX_LOG, QUESTION, SYSTEM, msg


def words(m: Message) -> int:
    return len(m.text.split())


def count_text(text: str) -> int:
    return len(text.split())


def grown(messages: list[Message]) -> list[RecordedStep]:
    """A session recorded with no manager: each step's context is all that arrived."""
    steps = []
    for k in range(1, len(messages) + 1):
        context = messages[:k]
        steps.append(RecordedStep(k - 1, context, context, sum(map(words, context))))
    return steps


def run(policy: dict[str, Any], steps: list[RecordedStep], **kw: Any) -> Any:
    return replay(policy_from_json(policy), steps, tokens_of=words, count_text=count_text, **kw)


def conversation() -> list[Message]:
    """The member id is given at the start, tools answer at length, the user asks again."""
    out = [msg("sys", SYSTEM, "system"), msg("u1", QUESTION, "user")]
    for n in range(6):
        out.append(msg(f"a{n}", f"Reading log {n}.", "assistant"))
        out.append(msg(f"t{n}", NGINX_LOG, "tool", tool="read_file"))
    out.append(msg("u2", "Is member A12345 still valid?", "user"))
    return out


def test_it_keeps_every_message_under_full() -> None:
    steps = grown(conversation())
    replayed, totals = run({"kind": "full"}, steps)
    assert [s.tokens for s in replayed] == [s.tokens for s in steps]
    assert replayed[-1].messages == [m.id for m in steps[-1].before]
    assert totals.as_dict()["tokens_saved"] == 0
    assert totals.amnesia == 0


def test_it_keeps_system_and_the_last_n_under_sliding() -> None:
    replayed, totals = run({"kind": "sliding", "keep_last": 3}, grown(conversation()))
    assert replayed[-1].messages == ["sys", "a5", "t5", "u2"]
    assert replayed[4].removed == ["u1"]  # the fourth other message pushes the question out
    assert totals.as_dict()["tokens_saved"] > 0
    # The user asks for the member id that left with the question.
    assert replayed[-1].lost_needed == ["A12345"]
    assert totals.amnesia == 1


def test_it_keeps_pinned_messages_in_the_window() -> None:
    messages = conversation()
    messages[1] = msg("u1", QUESTION, "user", pinned=True)
    replayed, totals = run({"kind": "sliding", "keep_last": 3}, grown(messages))
    assert replayed[-1].messages == ["sys", "u1", "a5", "t5", "u2"]
    assert totals.amnesia == 0


def test_it_keeps_messages_holding_a_pinned_text() -> None:
    replayed, totals = run(
        {"kind": "sliding", "keep_last": 3}, grown(conversation()), pinned=["member id is A12345"]
    )
    assert "u1" in replayed[-1].messages
    assert totals.amnesia == 0


def test_it_masks_old_tool_results_with_a_placeholder() -> None:
    replayed, totals = run({"kind": "mask_observations", "keep_last": 2}, grown(conversation()))
    last = replayed[-1]
    # Masked results keep their place: only their content is gone.
    assert last.messages == [m.id for m in conversation()]
    assert [s.removed for s in replayed if s.removed] == [["t0"], ["t1"], ["t2"], ["t3"]]
    placeholder = count_text("[read_file output omitted: 32 tokens]")
    assert words(conversation()[3]) == 32
    assert last.tokens == sum(map(words, conversation())) - 4 * (32 - placeholder)
    # The question is never masked: nothing needed was lost.
    assert totals.amnesia == 0


def test_it_finds_a_needed_entity_a_mask_took() -> None:
    messages = conversation()[:4] + [
        msg("a9", "Now something else.", "assistant"),
        msg("t9", "ok", "tool", tool="noop"),
        msg("a10", "The lock at http://inventory:8080/lock answered 504.", "assistant"),
    ]
    replayed, totals = run({"kind": "mask_observations", "keep_last": 1}, grown(messages))
    assert replayed[5].removed == ["t0"]
    # The agent writes what only the masked log held.
    assert sorted(replayed[-1].lost_needed) == ["504", "http://inventory:8080/lock"]
    assert totals.amnesia == 2


def test_it_drops_by_partition_order_until_under_budget() -> None:
    steps = grown(conversation())
    replayed, _ = run({"kind": "budget", "max_tokens": 120, "order": ["tool", "memory"]}, steps)
    for step in replayed:
        assert step.tokens <= 120
    last = replayed[-1].messages
    # Tool results go first, oldest first; the system prompt and questions stay.
    assert last[:2] == ["sys", "u1"] and "u2" in last
    assert "t0" not in last and "t5" in last
    assert all(f"a{n}" in last for n in range(6))


def test_it_stays_over_budget_when_the_order_has_nothing_left() -> None:
    replayed, _ = run(
        {"kind": "budget", "max_tokens": 5, "order": ["retrieval"]}, grown(conversation())
    )
    assert replayed[-1].removed == []
    assert replayed[-1].tokens == sum(map(words, conversation()))


def test_it_ignores_what_the_recorded_manager_made() -> None:
    messages = conversation()[:4]
    summary = msg("s1", "Summary: 504 from inventory.", "assistant")
    steps = [
        RecordedStep(0, messages, [messages[0], summary], 10),
        RecordedStep(
            1, [messages[0], summary, messages[1]], [messages[0], summary, messages[1]], 12
        ),
    ]
    replayed, totals = run({"kind": "full"}, steps)
    assert "s1" not in replayed[1].messages
    assert replayed[1].messages == ["sys", "u1", "a0", "t0"]
    assert totals.recorded == 22


def test_it_ignores_a_summary_the_recorded_manager_sent_silently_as_a_compaction_part() -> None:
    messages = conversation()[:4]
    summary = msg("cmp", [{"type": "compaction", "content": "Earlier: 504s."}], "user")
    asked = msg("u3", "And now?", "user")
    compacted = [messages[0], summary, asked]
    steps = [
        RecordedStep(0, messages, messages, 10),
        RecordedStep(1, compacted, compacted, 6),
    ]
    replayed, _ = run({"kind": "full"}, steps)
    assert replayed[1].messages == ["sys", "u1", "a0", "t0", "u3"]


def test_it_counts_a_refetch_of_a_dropped_result_as_needed() -> None:
    def result(n: int) -> Message:
        return msg(
            f"t{n}",
            "SO20260101007 stuck for 48h",
            "tool",
            tool="search",
            extra={"tool_call_id": f"c{n}"},
        )

    def call(n: int) -> Message:
        calls = [{"id": f"c{n}", "function": {"name": "search", "arguments": '{"s": 1}'}}]
        return msg(f"a{n}", "Searching.", "assistant", extra={"tool_calls": calls})

    messages = [msg("sys", SYSTEM, "system"), call(1), result(1)]
    messages += [msg(f"x{n}", "fine", "assistant") for n in range(3)]
    messages += [call(2), result(2)]
    replayed, totals = run({"kind": "sliding", "keep_last": 2}, grown(messages))
    assert replayed[4].removed == ["t1"]
    # The same call again brings back what the window had dropped.
    assert sorted(replayed[-1].lost_needed) == ["48h", "SO20260101007"]
    assert totals.amnesia == 2


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        ({"kind": "lru"}, "policy.kind"),
        ({}, "policy.kind"),
        ({"kind": {}}, "policy.kind"),
        ({"kind": ["sliding"]}, "policy.kind"),
        ([], "policy"),
        ({"kind": "sliding"}, "policy.keep_last"),
        ({"kind": "sliding", "keep_last": -1}, "policy.keep_last"),
        ({"kind": "sliding", "keep_last": "20"}, "policy.keep_last"),
        ({"kind": "sliding", "keep_last": True}, "policy.keep_last"),
        ({"kind": "sliding", "keep_last": 2, "max_tokens": 3}, "policy.max_tokens"),
        ({"kind": "mask_observations", "keep_last": 2.5}, "policy.keep_last"),
        ({"kind": "budget", "order": ["tool"]}, "policy.max_tokens"),
        ({"kind": "budget", "max_tokens": 0, "order": ["tool"]}, "policy.max_tokens"),
        ({"kind": "budget", "max_tokens": 10}, "policy.order"),
        ({"kind": "budget", "max_tokens": 10, "order": []}, "policy.order"),
        ({"kind": "budget", "max_tokens": 10, "order": ["tool", "logs"]}, "policy.order[1]"),
    ],
)
def test_it_names_the_field_of_a_bad_policy(policy: Any, field: str) -> None:
    with pytest.raises(InputError) as caught:
        policy_from_json(policy)
    assert caught.value.field == field


def test_it_maps_every_replayable_mode_to_a_valid_policy() -> None:
    assert set(MODE_POLICIES) == {"full", "sliding", "summary", "hybrid"}
    for raw in MODE_POLICIES.values():
        assert policy_from_json(raw).as_dict() == raw


def test_it_keeps_user_messages_with_key_entities_under_hybrid() -> None:
    replayed, totals = run({"kind": "hybrid", "keep_last": 3}, grown(conversation()))
    assert "u1" in replayed[-1].messages
    assert totals.amnesia == 0


_roles = st.sampled_from(["user", "assistant", "tool", "system"])
_texts = st.sampled_from([QUESTION, NGINX_LOG, "ok", "A12345 again", "see SO20260101007"])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_roles, _texts), min_size=1, max_size=25),
    st.sampled_from(
        [
            {"kind": "full"},
            {"kind": "sliding", "keep_last": 2},
            {"kind": "mask_observations", "keep_last": 1},
            {"kind": "budget", "max_tokens": 60, "order": ["tool", "memory", "question"]},
            {"kind": "hybrid", "keep_last": 1},
        ]
    ),
)
def test_it_holds_only_what_arrived_and_counts_it(
    spec: list[tuple[str, str]], policy: dict[str, Any]
) -> None:
    messages = [msg(f"m{k}", text, role) for k, (role, text) in enumerate(spec)]
    steps = grown(messages)
    replayed, totals = run(policy, steps)
    again, _ = run(policy, steps)
    assert replayed == again  # deterministic
    arrived: list[str] = []
    gone: set[str] = set()
    for step, recorded in zip(replayed, steps, strict=True):
        arrived.append(recorded.before[-1].id)
        gone.update(i for i in step.removed if i not in step.messages)
        assert set(step.messages) <= set(arrived)
        assert not gone & set(step.messages)  # a removed message never comes back
        # order as they arrived
        assert step.messages == [i for i in arrived if i in set(step.messages)]
        assert step.tokens <= recorded.tokens
    assert totals.as_dict()["tokens_saved"] == totals.recorded - totals.tokens >= 0
    if policy["kind"] == "sliding":
        # The window, worked out the plain way at every step.
        for step, recorded in zip(replayed, steps, strict=True):
            held = list(recorded.before)
            others = [m.id for m in held if m.role != "system"][-policy["keep_last"] :]
            assert step.messages == [m.id for m in held if m.role == "system" or m.id in others]
    assert totals.amnesia == sum(len(s.lost_needed) for s in replayed)


@pytest.mark.parametrize(
    "policy",
    [
        {"kind": "sliding", "keep_last": 2},
        {"kind": "mask_observations", "keep_last": 1},
        {"kind": "hybrid", "keep_last": 1},
    ],
)
def test_it_finds_the_same_needs_whatever_the_blocks_it_searches(
    policy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextview.core import replay as module

    FILLER = "the carrier kept retrying the warehouse pickup and gave up at noon"  # noqa: N806

    messages = [msg("sys", SYSTEM, "system"), msg("u1", QUESTION, "user")]
    for n in range(8):
        messages.append(msg(f"a{n}", f"Reading batch {n}.", "assistant"))
        messages.append(
            msg(f"t{n}", f"order SO2026020{n:04d} stalled 4{n}h; {FILLER}", "tool", tool="q")
        )
    messages.append(msg("a9", "SO20260200000 and SO20260200001 stalled first.", "assistant"))
    expected = [s.lost_needed for s in run(policy, grown(messages))[0]]
    assert any(expected)
    for size in (1, 2, 3):
        monkeypatch.setattr(module._KeptIndex, "BLOCK", size)
        assert [s.lost_needed for s in run(policy, grown(messages))[0]] == expected
