from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from contextview.core.apply import apply_operations
from contextview.core.infer import Inferred, infer_ops, infer_step, is_cut, same_as_sent
from contextview.core.model import Message
from tests.core.factories import NGINX_LOG, SUMMARY, contexts, msg, texts


def loop() -> list[Message]:
    return [
        msg("sys", "You debug orders.", "system"),
        msg("u1", "Why does order SO20260101007 time out?", "user"),
        msg("a1", "Reading the log.", "assistant"),
        msg("t1", NGINX_LOG, "tool", tool="read_file"),
        msg("u2", "And the member A12345?", "user"),
    ]


def shape(inferred: Inferred) -> list[tuple[str, list[str], str | None]]:
    return [
        (op.op, list(op.targets), op.result.id if op.result is not None else None)
        for op in inferred.ops
    ]


def same(kept: list[Message], sent: list[Message]) -> bool:
    return len(kept) == len(sent) and all(map(same_as_sent, kept, sent))


def test_it_infers_nothing_when_messages_were_only_appended() -> None:
    previous = loop()[:3]
    out = infer_step(previous, [*loop(), msg("a2", "Done.", "assistant")])
    assert (out.ops, out.folds, out.appended) == ([], [], 3)


def test_it_infers_nothing_when_only_the_servers_marks_differ() -> None:
    previous = [msg("sys", "s", "system", pinned=True, partition="task"), msg("u1", "q")]
    assert infer_step(previous, [msg("sys", "s", "system"), msg("u1", "q")]).ops == []
    # A summary that took its target's role, sent again without one, is the same message.
    assert infer_step([msg("sum", "x", "tool")], [msg("sum", "x", None)]).ops == []


def test_it_reads_a_silent_compaction_as_a_summary_of_what_left() -> None:
    summary = msg("summary", SUMMARY, "user")
    out = infer_step(loop(), [loop()[0], summary])
    assert shape(out) == [("summarize", ["u1", "a1", "t1", "u2"], "summary")]
    [fold] = out.folds
    assert (fold.kind, fold.result_id) == ("fold", "summary")
    assert [m.id for m in fold.originals] == ["u1", "a1", "t1", "u2"]
    assert out.appended == 0


def test_it_appends_what_came_after_a_summary() -> None:
    out = infer_step(loop(), [loop()[0], msg("s", SUMMARY), msg("u3", "Next?")])
    assert shape(out) == [("summarize", ["u1", "a1", "t1", "u2"], "s")]
    assert out.appended == 1


def test_it_rewrites_a_message_changed_under_its_id() -> None:
    masked = msg("t1", "[tool output omitted]", "tool", tool="read_file")
    out = infer_step(loop(), [*loop()[:3], masked, loop()[4]])
    assert shape(out) == [("rewrite", ["t1"], "t1")]
    assert out.folds[0].originals[0].content == NGINX_LOG


def test_it_rewrites_a_message_changed_at_the_same_position() -> None:
    # Ids derived from content (as OTLP ingest gives them) change with the content.
    replaced = msg("t1-v2", "[tool output omitted]", "tool", tool="read_file")
    out = infer_step(loop(), [*loop()[:3], replaced, loop()[4]])
    assert shape(out) == [("rewrite", ["t1"], "t1-v2")]


def test_it_calls_a_cut_a_truncate() -> None:
    head = msg("t1", NGINX_LOG[:80] + "…", "tool", tool="read_file")
    out = infer_step(loop(), [*loop()[:3], head, loop()[4]])
    assert shape(out) == [("truncate", ["t1"], "t1")]
    assert is_cut("abcdef", "…def") and not is_cut("abcdef", "abcxyz")


def test_it_calls_a_cut_of_a_tool_result_sent_as_parts_a_truncate() -> None:
    # OTLP sends every tool message as tool_result parts; ids digested from the content
    # change with it, so the cut one is found at the same position.
    def result(mid: str, output: str) -> Message:
        part = {"type": "tool_result", "tool_call_id": "call_1", "content": output}
        return msg(mid, [part], "tool", tool="read_file")

    previous = [*loop()[:3], result("t1", NGINX_LOG), loop()[4]]
    for head in (result("t1", NGINX_LOG[:80] + "…"), result("t1-v2", NGINX_LOG[:80])):
        out = infer_step(previous, [*loop()[:3], head, loop()[4]])
        assert shape(out) == [("truncate", ["t1"], head.id)]
    masked = result("t1-v3", "[tool output omitted]")
    assert shape(infer_step(previous, [*loop()[:3], masked, loop()[4]]))[0][0] == "rewrite"


def test_it_explains_a_tool_result_cut_in_its_parts_as_a_truncate_for_the_sdk() -> None:
    def result(output: str) -> dict[str, Any]:
        part = {"type": "tool_result", "tool_use_id": "toolu_1", "content": output}
        return {"id": "t1", "role": "user", "content": [part]}

    ops = infer_ops([result(NGINX_LOG)], [result(NGINX_LOG[:80] + "...")])
    assert [op["action"] for op in ops] == ["truncate"]
    assert infer_ops([result(NGINX_LOG)], [result("[omitted]")])[0]["action"] == "rewrite"


def test_it_drops_what_left_with_nothing_in_its_place() -> None:
    out = infer_step(loop(), [loop()[0], *loop()[3:]])
    assert shape(out) == [("drop", ["u1", "a1"], None)]
    assert out.folds[0].kind == "drop"


def test_it_inserts_a_new_message_inside_the_context() -> None:
    note = msg("note", "Remember: answer in a table.", "system")
    out = infer_step(loop(), [loop()[0], note, *loop()[1:]])
    assert shape(out) == [("insert", [], "note")]
    assert out.ops[0].params == {"position": 1}
    assert out.folds == []


def test_it_takes_a_compaction_part_as_the_summary_wherever_it_stands() -> None:
    compaction = msg("c", [{"type": "compaction", "text": SUMMARY}], "assistant")
    # The summary sits after the last kept message, the messages that left before it.
    out = infer_step(loop(), [loop()[0], loop()[4], compaction])
    assert shape(out)[0] == ("summarize", ["u1", "a1", "t1"], "c")
    assert out.appended == 0


def test_it_takes_the_first_newcomer_as_the_summary_when_the_call_says_compacted() -> None:
    previous = loop()
    obs = [previous[0], previous[4], msg("x", "what happened so far")]
    assert shape(infer_step(previous, obs)) == [("drop", ["u1", "a1", "t1"], None)]
    out = infer_step(previous, obs, compacted=True)
    assert shape(out) == [("summarize", ["u1", "a1", "t1"], "x"), ("reorder", [], None)]
    assert out.appended == 0


# --- applying what was inferred gives the step's context -------------------------------


@st.composite
def changed(draw: st.DrawFn) -> tuple[list[Message], list[Message]]:
    previous = draw(contexts(max_size=10))
    obs: list[Message] = []
    for m in previous:
        fate = draw(st.sampled_from(["keep", "keep", "gone", "rewrite", "renew"]))
        if fate == "keep":
            obs.append(m)
        elif fate == "rewrite":
            obs.append(msg(m.id, draw(texts), m.role))
        elif fate == "renew":
            obs.append(msg(m.id + "'", draw(texts), draw(st.sampled_from([m.role, "user"]))))
    for k in range(draw(st.integers(0, 4))):
        compaction = draw(st.booleans()) and draw(st.booleans())
        content: Any = [{"type": "compaction", "text": "s"}] if compaction else draw(texts)
        at = draw(st.integers(0, len(obs)))
        obs.insert(at, msg(f"new{k}", content, "assistant"))
    if draw(st.booleans()):
        obs = draw(st.permutations(obs))
    return previous, obs


@given(changed(), st.booleans())
def test_it_infers_operations_that_give_the_steps_context_exactly(
    case: tuple[list[Message], list[Message]], compacted: bool
) -> None:
    previous, obs = case
    out = infer_step(previous, obs, compacted=compacted)
    applied = apply_operations(previous, out.ops, archive={})
    rest = obs[len(obs) - out.appended :]
    assert same(applied.after + rest, obs)
    assert applied.folds == out.folds
    old = {m.id for m in previous}
    assert not any(m.id in old for m in rest), "only new messages are appended"
    for op in out.ops:
        assert op.op in ("summarize", "rewrite", "truncate", "drop", "insert", "reorder")
