from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextview.core.apply import StepResult, apply_operations, derive_step
from contextview.core.errors import InputError
from contextview.core.model import Message, Operation
from contextview.core.ops import normalize_operations
from tests.core.factories import (
    CONTRACT_ACTION,
    NGINX_LOG,
    QUESTION,
    SUMMARY,
    contexts,
    msg,
    raw,
    seed_context,
)


def ops_of(raw_ops: Any, latest: dict[str, Message] | None = None) -> list[Operation]:
    return normalize_operations(raw_ops, field="body.actions", latest=latest or {})


def apply(before: list[Message], raw_ops: Any, archive: dict[str, Message] | None = None) -> Any:
    return apply_operations(before, ops_of(raw_ops), archive=archive or {})


def ids(messages: list[Message]) -> list[str]:
    return [m.id for m in messages]


def step(
    obs: list[dict[str, Any]],
    actions: Any = None,
    after: list[dict[str, Any]] | None = None,
    latest: dict[str, Message] | None = None,
    archive: dict[str, Message] | None = None,
) -> StepResult:
    return derive_step(
        obs=obs,
        ops_raw=actions,
        ops_field="body.actions",
        after_raw=after,
        latest=latest or {},
        archive=archive or {},
    )


# --- keep, pin, unpin, expire -------------------------------------------------------


def test_it_leaves_the_context_alone_on_keep() -> None:
    before = seed_context()
    out = apply(before, [{"action": "keep", "target": "", "params": {}}])
    assert out.after == before
    assert out.folds == []


def test_it_pins_and_unpins() -> None:
    before = seed_context()
    out = apply(before, [{"action": "pin", "targets": ["u1", "sys"]}])
    assert [m.pinned for m in out.after] == [True, True, False, False]
    assert [m.content for m in out.after] == [m.content for m in before]
    out = apply(out.after, [{"action": "unpin", "target": "u1"}])
    assert [m.pinned for m in out.after] == [True, False, False, False]


def test_it_marks_a_message_expirable() -> None:
    out = apply(seed_context(), [{"action": "expire", "target": "a1"}])
    assert [m.expirable for m in out.after] == [False, False, False, True]
    assert out.folds == []


# --- summarize, fold, merge ---------------------------------------------------------


def test_it_puts_a_summary_in_place_of_its_target() -> None:
    before = seed_context()
    out = apply(
        before,
        [
            {
                "action": "summarize",
                "target": "tool_result_32",
                "result": {"id": "sum_1", "role": "tool", "content": SUMMARY},
            }
        ],
    )
    assert ids(out.after) == ["sys", "u1", "sum_1", "a1"]
    [fold] = out.folds
    assert (fold.op, fold.kind, fold.result_id) == ("summarize", "fold", "sum_1")
    assert fold.originals == (before[2],)


@pytest.mark.parametrize("name", ["fold", "merge", "summarize"])
def test_it_folds_several_targets_into_one_at_the_first_ones_place(name: str) -> None:
    before = seed_context()
    out = apply(
        before,
        [
            {
                "action": name,
                "targets": ["u1", "a1"],
                "result": {"id": "f1", "role": "assistant", "content": "asked about SO20260101007"},
            }
        ],
    )
    assert ids(out.after) == ["sys", "f1", "tool_result_32"]
    [fold] = out.folds
    assert [m.id for m in fold.originals] == ["u1", "a1"]
    assert fold.result_id == "f1"


# --- rewrite, truncate ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["rewrite", "truncate"])
def test_it_replaces_a_message_in_place_keeping_its_id(name: str) -> None:
    before = seed_context()
    out = apply(
        before,
        [
            {
                "action": name,
                "target": "tool_result_32",
                "result": {"id": "tool_result_32", "role": "tool", "content": NGINX_LOG[:80]},
            }
        ],
    )
    assert ids(out.after) == ids(before)
    assert out.after[2].content == NGINX_LOG[:80]
    [fold] = out.folds
    assert fold.originals == (before[2],)
    assert fold.result_id == "tool_result_32"


def test_it_gives_a_result_without_role_the_targets_role_and_partition() -> None:
    before = [msg("doc_3", "retrieved page", "tool", partition="retrieval")]
    out = apply(
        before,
        [{"action": "rewrite", "target": "doc_3", "result": {"id": "doc_3s", "content": "page"}}],
    )
    assert (out.after[0].role, out.after[0].partition) == ("tool", "retrieval")


def test_it_keeps_the_targets_partition_for_a_result_of_the_same_role() -> None:
    before = [msg("doc_3", "retrieved page", "tool", partition="retrieval")]
    out = apply(
        before,
        [
            {
                "action": "summarize",
                "target": "doc_3",
                "result": {"id": "s", "role": "tool", "content": "page"},
            }
        ],
    )
    assert out.after[0].partition == "retrieval"


def test_it_gives_a_result_of_another_role_that_roles_partition() -> None:
    before = [msg("doc_3", "retrieved page", "tool", partition="retrieval")]
    out = apply(
        before,
        [
            {
                "action": "summarize",
                "target": "doc_3",
                "result": {"id": "s", "role": "assistant", "content": "page"},
            }
        ],
    )
    assert out.after[0].partition == "memory"


def test_it_keeps_a_results_explicit_partition() -> None:
    before = [msg("doc_3", "retrieved page", "tool", partition="retrieval")]
    result = {"id": "s", "role": "tool", "content": "page", "partition": "memory"}
    out = apply(before, [{"action": "summarize", "target": "doc_3", "result": result}])
    assert out.after[0].partition == "memory"


# --- drop and reload ------------------------------------------------------------------


def test_it_drops_messages_keeping_them_as_originals() -> None:
    before = seed_context()
    out = apply(before, [{"action": "drop", "targets": ["tool_result_32", "u1"]}])
    assert ids(out.after) == ["sys", "a1"]
    [fold] = out.folds
    assert (fold.kind, fold.result_id) == ("drop", None)
    assert [m.id for m in fold.originals] == ["tool_result_32", "u1"]


def test_it_reloads_an_archived_original_at_the_end() -> None:
    before = seed_context()[:2]
    archive = {"tool_result_32": seed_context()[2]}
    out = apply(before, [{"action": "reload", "target": "tool_result_32"}], archive)
    assert ids(out.after) == ["sys", "u1", "tool_result_32"]
    assert out.after[2].content == NGINX_LOG
    assert out.reloaded == ["tool_result_32"]


def test_it_reloads_at_the_position_given() -> None:
    before = seed_context()[:2]
    archive = {"tool_result_32": seed_context()[2]}
    out = apply(
        before,
        [{"action": "reload", "target": "tool_result_32", "params": {"position": 1}}],
        archive,
    )
    assert ids(out.after) == ["sys", "tool_result_32", "u1"]


def test_it_reloads_what_was_folded_earlier_in_the_same_step() -> None:
    before = seed_context()
    out = apply(
        before,
        [
            {
                "action": "summarize",
                "target": "tool_result_32",
                "result": {"id": "sum_1", "role": "tool", "content": SUMMARY},
            },
            {"action": "reload", "target": "tool_result_32", "params": {"position": 3}},
        ],
    )
    assert ids(out.after) == ["sys", "u1", "sum_1", "tool_result_32", "a1"]
    assert out.after[3] == before[2]
    assert out.reloaded == ["tool_result_32"]


def test_it_reloads_a_message_dropped_two_steps_earlier() -> None:
    context = [raw(m) for m in seed_context()]
    s0 = step(context, {"action": "drop", "target": "tool_result_32"})
    archive = {m.id: m for fold in s0.folds for m in fold.originals}
    latest = dict(s0.recorded)

    s1 = step([{"id": m.id} for m in s0.after], {"action": "keep"}, latest=latest, archive=archive)
    latest.update(s1.recorded)

    s2 = step(
        [{"id": m.id} for m in s1.after],
        {"action": "reload", "target": "tool_result_32"},
        latest=latest,
        archive=archive,
    )
    assert ids(s2.after) == ["sys", "u1", "a1", "tool_result_32"]
    assert s2.after[-1].content == NGINX_LOG
    assert s2.reloaded == ["tool_result_32"]


# --- reorder --------------------------------------------------------------------------


def test_it_inserts_a_new_message_at_the_position_given_folding_nothing() -> None:
    before = seed_context()
    note = {"id": "note", "role": "user", "content": "Check the inventory lock."}
    out = apply(before, [{"action": "insert", "result": note, "params": {"position": 2}}])
    assert ids(out.after) == ["sys", "u1", "note", "tool_result_32", "a1"]
    assert out.after[2].partition == "question"
    assert out.folds == []


def test_it_inserts_at_the_end_without_a_position() -> None:
    out = apply(seed_context(), [{"action": "insert", "result": {"id": "n", "content": "x"}}])
    assert ids(out.after)[-1] == "n"


def test_it_rejects_an_insert_without_result_or_of_an_id_in_the_context() -> None:
    with pytest.raises(InputError, match=r"body.actions\[0\].result: 'insert' needs a result"):
        apply(seed_context(), [{"action": "insert"}])
    with pytest.raises(InputError, match=r"result.id: id 'u1' is already in the context"):
        apply(seed_context(), [{"action": "insert", "result": {"id": "u1", "content": "x"}}])
    bad = {"action": "insert", "result": {"id": "n", "content": "x"}, "params": {"position": "1"}}
    with pytest.raises(InputError, match=r"params.position: must be an integer"):
        apply(seed_context(), [bad])
    before_start = {**bad, "params": {"position": -1}}
    with pytest.raises(InputError, match=r"params.position: must be an integer >= 0"):
        apply(seed_context(), [before_start])


def test_it_reorders_by_params_order() -> None:
    out = apply(
        seed_context(),
        [{"action": "reorder", "params": {"order": ["sys", "tool_result_32", "a1", "u1"]}}],
    )
    assert ids(out.after) == ["sys", "tool_result_32", "a1", "u1"]


@pytest.mark.parametrize(
    "order",
    [
        ["sys", "u1", "a1"],
        ["sys", "u1", "a1", "tool_result_32", "ghost"],
        ["sys", "u1", "a1", "tool_result_32", "u1"],
    ],
)
def test_it_rejects_an_order_not_listing_every_id_once(order: list[str]) -> None:
    with pytest.raises(InputError) as e:
        apply(seed_context(), [{"action": "reorder", "params": {"order": order}}])
    assert (e.value.field, e.value.status) == ("body.actions[0].params.order", 422)


# --- edits (seed 003) -----------------------------------------------------------------


def test_it_deletes_the_messages_of_an_empty_edit() -> None:
    before = seed_context()
    out = apply(before, [{"ids": ["a1", "tool_result_32"], "new_content": ""}])
    assert ids(out.after) == ["sys", "u1"]
    [fold] = out.folds
    assert (fold.kind, [m.id for m in fold.originals]) == ("drop", ["a1", "tool_result_32"])


def test_it_rewrites_the_message_of_a_one_id_edit_keeping_the_rest_of_it() -> None:
    before = seed_context()
    out = apply(before, [{"ids": ["tool_result_32"], "new_content": SUMMARY}])
    assert out.after[2] == replace(before[2], content=SUMMARY)
    assert out.after[2].tool == "read_file"
    assert out.folds[0].originals == (before[2],)


def test_it_gives_an_edit_the_role_it_names() -> None:
    out = apply(seed_context(), [{"ids": ["a1"], "role": "user", "new_content": "check A12345"}])
    assert (out.after[3].role, out.after[3].partition) == ("user", "question")


def test_it_merges_the_messages_of_a_several_id_edit_at_the_first_ones_place() -> None:
    before = seed_context()
    out = apply(
        before,
        [{"ids": ["u1", "a1"], "role": "user", "new_content": "SO20260101007 times out: 504"}],
    )
    assert ids(out.after) == ["sys", "u1", "tool_result_32"]
    assert (out.after[1].content, out.after[1].role) == ("SO20260101007 times out: 504", "user")
    [fold] = out.folds
    assert (fold.result_id, [m.id for m in fold.originals]) == ("u1", ["u1", "a1"])


# --- errors ---------------------------------------------------------------------------


def test_it_rejects_a_target_not_in_the_context() -> None:
    with pytest.raises(InputError) as e:
        apply(seed_context(), [{"action": "keep"}, {"action": "drop", "target": "tool_result_99"}])
    assert (e.value.field, e.value.status) == ("body.actions[1].target", 422)
    assert "'tool_result_99'" in e.value.message


def test_it_names_the_position_of_a_missing_target_in_a_list() -> None:
    with pytest.raises(InputError) as e:
        apply(seed_context(), [{"ids": ["u1", "m9"], "new_content": "x"}])
    assert e.value.field == "body.actions[0].ids[1]"


def test_it_rejects_a_replacing_operation_without_result() -> None:
    with pytest.raises(InputError) as e:
        apply_operations(
            seed_context(),
            normalize_operations(
                {"action": "summarize", "target": "tool_result_32"}, field="body.action", latest={}
            ),
            archive={},
        )
    assert (e.value.field, e.value.status) == ("body.action.result", 422)


def test_it_rejects_an_operation_without_target() -> None:
    with pytest.raises(InputError) as e:
        apply(seed_context(), [{"action": "drop", "target": ""}])
    assert (e.value.field, e.value.status) == ("body.actions[0].target", 422)


def test_it_rejects_a_reload_of_something_never_archived() -> None:
    with pytest.raises(InputError) as e:
        apply(seed_context(), [{"action": "reload", "target": "tool_result_31"}])
    assert e.value.field == "body.actions[0].target"
    assert "archive" in e.value.message


def test_it_rejects_a_reload_of_something_already_in_the_context() -> None:
    archive = {"u1": msg("u1", QUESTION)}
    with pytest.raises(InputError) as e:
        apply(seed_context(), [{"action": "reload", "target": "u1"}], archive)
    assert "already in the context" in e.value.message


def test_it_reloads_the_original_of_a_rewrite_that_kept_its_id_over_the_rewrite() -> None:
    # The contract lets a rewrite keep the target's id; its original stays retrievable.
    context = [raw(m) for m in seed_context()]
    short = {"id": "tool_result_32", "role": "tool", "content": "upstream timed out"}
    s0 = step(context, {"action": "rewrite", "target": "tool_result_32", "result": short})
    assert [m.content for m in s0.after if m.id == "tool_result_32"] == ["upstream timed out"]
    archive = {m.id: m for fold in s0.folds for m in fold.originals}

    back = apply(s0.after, [{"action": "reload", "target": "tool_result_32"}], archive)
    assert ids(back.after) == ["sys", "u1", "a1", "tool_result_32"]
    assert back.after[-1].content == NGINX_LOG
    assert back.reloaded == ["tool_result_32"]
    placed = apply(
        s0.after,
        [{"action": "reload", "target": "tool_result_32", "params": {"position": 1}}],
        archive,
    )
    assert ids(placed.after) == ["sys", "tool_result_32", "u1", "a1"]


def test_it_rejects_a_result_whose_id_is_already_in_the_context() -> None:
    with pytest.raises(InputError) as e:
        apply(
            seed_context(),
            [
                {
                    "action": "summarize",
                    "target": "tool_result_32",
                    "result": {"id": "u1", "content": SUMMARY},
                }
            ],
        )
    assert e.value.field == "body.actions[0].result.id"


def test_it_skips_failing_operations_when_not_strict() -> None:
    before = seed_context()
    out = apply_operations(
        before,
        ops_of(
            [
                {"action": "drop", "target": "tool_result_99"},
                {"action": "summarize", "target": "tool_result_32"},
                {"action": "drop", "target": "a1"},
            ]
        ),
        archive={},
        strict=False,
    )
    assert ids(out.after) == ["sys", "u1", "tool_result_32"]
    assert out.errors == [
        "body.actions[0].target: 'tool_result_99' is not in the context",
        "body.actions[1].result: 'summarize' needs a result message",
    ]
    assert [f.op_index for f in out.folds] == [2]


# --- derive_step ----------------------------------------------------------------------

CONTRACT_OBS = [
    {"id": "sys", "role": "system", "content": "You debug orders.", "partition": "system"},
    {"id": "u1", "role": "user", "content": "Why does order SO20260101007 time out?"},
    {"id": "tool_result_32", "role": "tool", "tool": "read_file", "content": "...1000 lines..."},
]


def test_it_derives_the_contracts_example_step() -> None:
    s = step(CONTRACT_OBS, CONTRACT_ACTION)
    assert ids(s.before) == ["sys", "u1", "tool_result_32"]
    assert ids(s.after) == ["sys", "u1", "sum_1"]
    assert s.after[2].partition == "tool"
    assert (s.after_given, s.after_mismatch, s.errors) == (False, False, [])
    assert [(f.result_id, [m.id for m in f.originals]) for f in s.folds] == [
        ("sum_1", ["tool_result_32"])
    ]
    assert set(s.recorded) == {"sys", "u1", "tool_result_32", "sum_1"}


def test_it_resolves_ids_alone_from_earlier_steps() -> None:
    s0 = step(CONTRACT_OBS, CONTRACT_ACTION)
    s1 = step(
        [
            {"id": "sys"},
            {"id": "u1"},
            {"id": "sum_1"},
            {"id": "a2", "role": "assistant", "content": "Checking inventory."},
        ],
        latest=s0.recorded,
    )
    assert s1.after[2].content == "504 from inventory after 3s"
    assert s1.after == s1.before


def test_it_rejects_an_obs_id_never_recorded() -> None:
    with pytest.raises(InputError) as e:
        step([{"id": "sys"}], latest={})
    assert (e.value.field, e.value.status) == ("body.obs.messages[0].id", 422)


def test_it_rejects_an_obs_that_is_not_a_list() -> None:
    with pytest.raises(InputError) as e:
        derive_step(obs={"messages": []}, ops_raw=None, after_raw=None, latest={}, archive={})
    assert e.value.field == "body.obs.messages"


def test_it_resolves_an_after_reference_to_a_result_of_the_same_step() -> None:
    s = step(
        CONTRACT_OBS,
        CONTRACT_ACTION,
        after=[{"id": "sys"}, {"id": "u1"}, {"id": "sum_1"}],
    )
    assert s.after_given and not s.after_mismatch
    assert s.after[2].content == "504 from inventory after 3s"


def test_it_resolves_an_after_reference_to_an_edited_message_as_edited() -> None:
    s = step(
        CONTRACT_OBS,
        {"ids": ["tool_result_32"], "new_content": "504 after 3s"},
        after=[{"id": "sys"}, {"id": "u1"}, {"id": "tool_result_32"}],
    )
    assert s.after[2].content == "504 after 3s"
    assert not s.after_mismatch
    assert s.recorded["tool_result_32"].content == "504 after 3s"


def test_it_lets_a_different_given_after_win_and_flags_it() -> None:
    given = [
        {"id": "sys"},
        {"id": "sum_1", "role": "tool", "content": "inventory 504"},
    ]
    s = step(CONTRACT_OBS, CONTRACT_ACTION, after=given)
    assert s.after_mismatch
    assert ids(s.after) == ["sys", "sum_1"]
    assert s.after[1].content == "inventory 504"
    assert s.recorded["sum_1"].content == "inventory 504"
    # what the operations said is still what they said
    assert [f.result_id for f in s.folds] == ["sum_1"]


@pytest.mark.parametrize(
    "name, actions, resent",
    [
        # A summary without a role, sent again in the after as it was sent.
        (
            "result without role",
            {
                "action": "summarize",
                "target": "tool_result_32",
                "result": {"id": "s", "content": "504"},
            },
            {"id": "s", "content": "504"},
        ),
        (
            "rewrite without role",
            {
                "action": "rewrite",
                "target": "tool_result_32",
                "result": {"id": "tool_result_32", "content": "504"},
            },
            {"id": "tool_result_32", "content": "504"},
        ),
        # A message this step pinned, sent again by id alone or as it was.
        ("pinned, by id", {"action": "pin", "target": "tool_result_32"}, {"id": "tool_result_32"}),
        (
            "expired, by id",
            {"action": "expire", "target": "tool_result_32"},
            {"id": "tool_result_32"},
        ),
    ],
)
def test_it_takes_an_after_that_leaves_out_what_the_operations_set_as_the_same(
    name: str, actions: dict[str, Any], resent: dict[str, Any]
) -> None:
    derived = step(CONTRACT_OBS, actions).after
    s = step(CONTRACT_OBS, actions, after=[{"id": "sys"}, {"id": "u1"}, resent])
    assert not s.after_mismatch, name
    assert s.after == derived
    assert s.recorded[resent["id"]] == derived[2]


@pytest.mark.parametrize("named", [{"role": "assistant"}, {"pinned": False}])
def test_it_flags_an_after_reference_that_names_another_role_or_mark(
    named: dict[str, Any],
) -> None:
    pin = {"action": "pin", "target": "tool_result_32"}
    s = step(
        CONTRACT_OBS, pin, after=[{"id": "sys"}, {"id": "u1"}, {"id": "tool_result_32", **named}]
    )
    assert s.after_mismatch
    assert {k: getattr(s.after[2], k) for k in named} == named


def test_it_does_not_raise_for_a_failing_operation_when_after_is_given() -> None:
    s = step(
        CONTRACT_OBS,
        [{"action": "drop", "target": "tool_result_99"}],
        after=CONTRACT_OBS,
    )
    assert s.errors == ["body.actions[0].target: 'tool_result_99' is not in the context"]
    assert not s.after_mismatch


def test_it_still_raises_for_a_failing_operation_without_after() -> None:
    with pytest.raises(InputError) as e:
        step(CONTRACT_OBS, [{"action": "drop", "target": "tool_result_99"}])
    assert e.value.field == "body.actions[0].target"


def test_it_takes_a_missing_summary_from_the_given_after() -> None:
    # seed 000 logs the action before its summarizer runs: the result is only in the after
    s = step(
        CONTRACT_OBS,
        {"action": "summarize", "target": "tool_result_32", "params": {"max_tokens": 400}},
        after=[{"id": "sys"}, {"id": "u1"}, {"id": "sum_1", "role": "tool", "content": SUMMARY}],
    )
    assert (s.after_mismatch, s.errors) == (False, [])
    assert [(f.result_id, [m.id for m in f.originals]) for f in s.folds] == [
        ("sum_1", ["tool_result_32"])
    ]
    assert s.ops[0].result is not None and s.ops[0].result.content == SUMMARY


def test_it_does_not_take_a_reloaded_original_for_a_missing_result() -> None:
    archive = {"tool_result_31": msg("tool_result_31", "GET /api/orders 200", "tool")}
    s = step(
        CONTRACT_OBS,
        [
            {"action": "reload", "target": "tool_result_31", "params": {"position": 2}},
            {"action": "summarize", "target": "tool_result_32"},
        ],
        after=[
            {"id": "sys"},
            {"id": "u1"},
            {"id": "tool_result_31"},
            {"id": "sum_1", "role": "tool", "content": SUMMARY},
        ],
        archive=archive,
    )
    assert (s.after_mismatch, s.errors) == (False, [])
    assert [f.result_id for f in s.folds] == ["sum_1"]


def test_it_takes_a_missing_in_place_rewrite_from_the_given_after() -> None:
    s = step(
        CONTRACT_OBS,
        {"action": "truncate", "target": "tool_result_32"},
        after=[*CONTRACT_OBS[:2], {**CONTRACT_OBS[2], "content": "...last 50 lines..."}],
    )
    assert (s.after_mismatch, s.errors) == (False, [])
    assert s.folds[0].originals[0].content == "...1000 lines..."


def test_it_does_not_flag_an_after_that_only_leaves_out_an_inherited_partition() -> None:
    obs = [{"id": "doc_3", "role": "tool", "content": "page", "partition": "retrieval"}]
    s = step(
        obs,
        {
            "action": "summarize",
            "target": "doc_3",
            "result": {"id": "s1", "role": "tool", "content": "p"},
        },
        after=[{"id": "s1", "role": "tool", "content": "p"}],
    )
    assert not s.after_mismatch
    assert s.after[0].partition == "retrieval"


def test_it_flags_an_after_that_differs_only_in_pinned() -> None:
    s = step(CONTRACT_OBS, {"action": "pin", "target": "u1"}, after=CONTRACT_OBS)
    assert s.after_mismatch
    assert not s.after[1].pinned


# --- properties -----------------------------------------------------------------------


@given(contexts())
def test_it_changes_nothing_without_operations_or_with_keep(before: list[Message]) -> None:
    assert apply_operations(before, [], archive={}).after == before
    keeps = [Operation(op="keep", targets=())] * 3
    out = apply_operations(before, keeps, archive={})
    assert (out.after, out.folds, out.reloaded) == (before, [], [])


@given(contexts(min_size=1), st.data())
def test_it_drops_any_subset_keeping_the_rest_in_order(
    before: list[Message], data: st.DataObject
) -> None:
    dropped = data.draw(st.lists(st.sampled_from(ids(before)), min_size=1, unique=True))
    out = apply_operations(before, [Operation(op="drop", targets=tuple(dropped))], archive={})
    assert out.after == [m for m in before if m.id not in dropped]
    [fold] = out.folds
    assert {m.id for m in fold.originals} == set(dropped)
    assert all(m in before for m in fold.originals)


@given(contexts(min_size=1), st.data())
def test_it_reloads_exactly_what_it_dropped(before: list[Message], data: st.DataObject) -> None:
    dropped = data.draw(st.lists(st.sampled_from(ids(before)), min_size=1, unique=True))
    ops = [
        Operation(op="drop", targets=tuple(dropped)),
        Operation(op="reload", targets=tuple(dropped)),
    ]
    out = apply_operations(before, ops, archive={})
    assert out.after == [m for m in before if m.id not in dropped] + [
        next(m for m in before if m.id == d) for d in dropped
    ]
