from __future__ import annotations

import pytest

from contextview.core.errors import InputError
from contextview.core.model import OP_NAMES, Message, Operation
from contextview.core.ops import normalize_operations
from tests.core.factories import CONTRACT_ACTION, SUMMARY, msg


def test_it_normalizes_the_contracts_named_action() -> None:
    [op] = normalize_operations(CONTRACT_ACTION, field="body.action", latest={})
    assert op == Operation(
        op="summarize",
        targets=("tool_result_32",),
        form="named",
        # partition "" means "as the target", settled when applied
        result=Message(
            id="sum_1", role="tool", content="504 from inventory after 3s", partition=""
        ),
        reason="log body is normal; keep error code and timeout",
        params={"max_tokens": 400},
    )
    assert op.origin == "body.action"


def test_it_reads_seed_000s_keep_with_an_empty_target() -> None:
    raw = {"action": "keep", "target": "", "params": {"time": "2026-01-01T10:23:11"}}
    [op] = normalize_operations(raw, field="body.action", latest={})
    assert (op.op, op.targets, op.params) == ("keep", (), {"time": "2026-01-01T10:23:11"})


def test_it_reads_a_targets_list() -> None:
    raw = {
        "action": "fold",
        "targets": ["read_file_12", "api_call_09", 7],
        "result": {"id": "fold_1", "role": "tool", "content": SUMMARY},
    }
    [op] = normalize_operations(raw, field="body.action", latest={})
    assert op.targets == ("read_file_12", "api_call_09", "7")


@pytest.mark.parametrize("name", ["drop", "pin", "unpin", "expire", "keep", "reload"])
def test_it_leaves_out_a_result_sent_with_an_operation_that_has_none(name: str) -> None:
    raw = {"action": name, "target": "a1", "result": {"id": "r1", "content": "ignored"}}
    [op] = normalize_operations(raw, field="body.action", latest={})
    assert (op.op, op.targets, op.result) == (name, ("a1",), None)


def test_it_rejects_an_unknown_action_listing_the_valid_ones() -> None:
    with pytest.raises(InputError) as e:
        normalize_operations({"action": "compress", "target": "a1"}, field="body.action", latest={})
    assert (e.value.field, e.value.status) == ("body.action.action", 400)
    assert "'compress'" in e.value.message
    assert all(name in e.value.message for name in OP_NAMES)


@pytest.mark.parametrize("content", ["", None, []])
def test_it_turns_an_edit_with_empty_content_into_a_drop(content: object) -> None:
    raw = {"ids": ["m2", "m3"], "role": "user", "justification": "stale", "new_content": content}
    [op] = normalize_operations(raw, field="body.action", latest={})
    assert (op.op, op.form, op.targets, op.result, op.reason) == (
        "drop",
        "edit",
        ("m2", "m3"),
        None,
        "stale",
    )


def test_it_turns_an_edit_without_new_content_into_a_drop() -> None:
    [op] = normalize_operations({"ids": ["m2"]}, field="body.action", latest={})
    assert (op.op, op.form) == ("drop", "edit")


def test_it_turns_an_edit_of_one_id_into_a_rewrite() -> None:
    raw = {"ids": ["m4"], "justification": "keep only the 504", "new_content": SUMMARY}
    [op] = normalize_operations(raw, field="body.action", latest={})
    assert (op.op, op.form, op.targets) == ("rewrite", "edit", ("m4",))
    assert op.result == Message(id="m4", role=None, content=SUMMARY, partition="")
    assert op.reason == "keep only the 504"


def test_it_turns_an_edit_of_several_ids_into_a_merge() -> None:
    raw = {"ids": ["m4", "m5", "m6"], "role": "assistant", "new_content": SUMMARY}
    [op] = normalize_operations(raw, field="body.action", latest={})
    assert (op.op, op.form, op.targets) == ("merge", "edit", ("m4", "m5", "m6"))
    assert op.result is not None
    assert (op.result.id, op.result.role) == ("m4", "assistant")


def test_it_normalizes_a_list_mixing_named_actions_and_edits() -> None:
    raw = [
        {"action": "pin", "target": "u1"},
        {"ids": ["m2"], "new_content": ""},
        {"ids": ["m3", "m4"], "new_content": SUMMARY},
    ]
    ops = normalize_operations(raw, field="body.actions", latest={})
    assert [(op.op, op.form, op.origin) for op in ops] == [
        ("pin", "named", "body.actions[0]"),
        ("drop", "edit", "body.actions[1]"),
        ("merge", "edit", "body.actions[2]"),
    ]


def test_it_keeps_a_missing_result_for_apply_to_judge() -> None:
    [op] = normalize_operations(
        {"action": "summarize", "target": "tool_result_32"}, field="body.action", latest={}
    )
    assert op.result is None


def test_it_resolves_a_result_sent_by_id_alone() -> None:
    latest = {"sum_1": msg("sum_1", SUMMARY, "tool")}
    [op] = normalize_operations(
        {"action": "rewrite", "target": "tool_result_32", "result": {"id": "sum_1"}},
        field="body.action",
        latest=latest,
    )
    assert op.result == latest["sum_1"]


def test_it_resolves_a_result_recorded_by_an_earlier_operation_of_the_step() -> None:
    raw = [
        {
            "action": "summarize",
            "target": "tool_result_32",
            "result": {"id": "sum_1", "role": "tool", "content": SUMMARY, "partition": "tool"},
        },
        {"action": "rewrite", "target": "tool_result_40", "result": {"id": "sum_1"}},
    ]
    ops = normalize_operations(raw, field="body.actions", latest={})
    assert ops[1].result == ops[0].result


def test_it_rejects_a_result_id_never_recorded() -> None:
    with pytest.raises(InputError) as e:
        normalize_operations(
            [{"action": "keep"}, {"action": "summarize", "target": "t", "result": {"id": "s9"}}],
            field="body.actions",
            latest={},
        )
    assert (e.value.field, e.value.status) == ("body.actions[1].result.id", 422)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ([{"action": "keep"}, {"target": "u1"}], "body.actions[1]"),
        ([{"action": "keep"}, "drop u1"], "body.actions[1]"),
        ("drop", "body.actions"),
        ([{"action": "keep", "params": [1]}], "body.actions[0].params"),
        ([{"action": "drop", "targets": "u1"}], "body.actions[0].targets"),
        ([{"action": "drop", "target": ["u1"]}], "body.actions[0].target"),
        ([{"ids": []}], "body.actions[0].ids"),
        ([{"ids": "m1"}], "body.actions[0].ids"),
        ([{"ids": ["m1"], "new_content": 3}], "body.actions[0].new_content"),
        ([{"action": "keep", "reason": 3}], "body.actions[0].reason"),
        ([{"action": "rewrite", "target": "u1", "result": "text"}], "body.actions[0].result"),
    ],
)
def test_it_rejects_malformed_operations_naming_the_field(raw: object, field: str) -> None:
    with pytest.raises(InputError) as e:
        normalize_operations(raw, field="body.actions", latest={})
    assert (e.value.field, e.value.status) == (field, 400)


def test_it_reads_no_operations_as_none() -> None:
    assert normalize_operations(None, field="body.actions", latest={}) == []
    assert normalize_operations([], field="body.actions", latest={}) == []
