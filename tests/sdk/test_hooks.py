"""Each hook against a real server: the server ends with the steps, operations and folds
the agent performed.

The managers are the demo fleet's (written as the seeds publish them); each test
keeps its own record of what the manager did, independently of the hook, and
compares it with what the read API shows.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from contextview.demo.fleet import (
    ContextAction,
    ContextBuilder,
    ContextManager,
    ContextModeManager,
    FullPolicy,
    MessageStore,
    SlidingPolicy,
    SummaryPolicy,
    estimate_tokens,
)
from contextview.sdk import Client, apply_edits
from contextview.sdk.hooks import EditHook, watch_builder, watch_manager, wrap_build
from tests.sdk.conftest import Reader

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _ids(messages: list[dict[str, Any]]) -> list[str]:
    return [str(m["id"]) for m in messages]


def _folds(step: dict[str, Any]) -> list[tuple[str | None, list[str]]]:
    return [(f["result_id"], f["originals"]) for f in step["folds"]]


def _tool(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "role": "tool", "tool": "grep", "content": text}


def _planned(
    kind: type[ContextManager], plan: dict[str, ContextAction], summary: str
) -> ContextManager:
    """A manager whose policy acts as `plan` says when the newest message has that id."""
    return kind(
        policy=lambda obs: plan.get(obs["active_context"][-1]["id"], ContextAction("keep", "", {})),
        summarizer=lambda ms: summary,
        estimate_tokens=estimate_tokens,
        max_tokens=100_000,
    )


@pytest.mark.parametrize("capture", ["content", "copy", "shared"])
def test_it_logs_a_seed_000_context_manager_step_by_step(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client], capture: str
) -> None:
    plan = {
        "t2": ContextAction("summarize", "t1", {"reason": "keep error code and timeout"}),
        "t3": ContextAction("drop", "t2", {"reason": "repeated grep"}),
        "u2": ContextAction("reload", "t2", {"reason": "user wants the raw line"}),
        "u3": ContextAction("drop", "t3", {"reason": "answered"}),
    }
    cm = _planned(ContextManager, plan, "504 from inventory after 3 s")
    client = make_client(gunicorn_api, project_key)
    sid = f"seed-000-{capture}"
    session = client.session(sid, agent="cm-bot", mode="summary")
    # Seed 000's manager never edits a message dict in place: sharing them is safe.
    hook = watch_manager(cm, session, capture=capture)
    performed: list[tuple[dict[str, Any], list[str]]] = []
    for message in [
        {"id": "sys", "role": "system", "content": "You debug orders."},
        {"id": "u1", "role": "user", "content": "Why does SO20260101007 time out?"},
        _tool("t1", "upstream timed out (110) while reading response header " * 30),
        _tool("t2", "proxy_read_timeout 3s; proxy_next_upstream off " * 20),
        _tool("t3", "HikariPool-1 - Connection is not available, request timed out " * 20),
        {"id": "u2", "role": "user", "content": "Quote the exact config line."},
    ]:
        action = cm.step(message)
        cm.execute(action)
        performed.append((dict(action.__dict__), _ids(cm.active_context)))
    # A step whose action is never executed is still a step (logged by the next step,
    # or here by flush()).
    cm.step({"id": "u3", "role": "user", "content": "Thanks."})
    hook.flush()
    session.end("succeeded")
    assert client.flush(20), client.problems

    steps = Reader(gunicorn_api, project_key).steps(sid)
    assert len(steps) == len(performed) + 1
    for step, (action, after_ids) in zip(steps, performed, strict=False):
        assert _ids(step["after"]) == after_ids
        assert [op["op"] for op in step["ops"]] == [action["action"]]
        if action["target"]:
            assert step["ops"][0]["targets"] == [action["target"]]
        assert step["reason"] == (action["params"].get("reason") or None)
        assert step["obs_extra"]["max_tokens"] == 100_000
        assert step["after_given"] is False  # the action alone explains the after
    assert _folds(steps[3]) == [("sum_1", ["t1"])]
    assert steps[3]["after"][2]["content"] == "[summary of t1] 504 from inventory after 3 s"
    assert _folds(steps[4]) == [(None, ["t2"])]
    assert steps[5]["ops"][0]["op"] == "reload"
    assert steps[6]["ops"][0]["op"] == "keep"
    assert steps[6]["ops"][0]["params"]["executed"] is False
    assert steps[6]["ops"][0]["params"]["proposed"]["action"] == "drop"
    assert _ids(steps[6]["after"]) == _ids(cm.active_context)
    assert steps[3]["reported"]["before_tokens"] > steps[3]["reported"]["after_tokens"]


class InPlaceManager(ContextManager):
    """A seed 000 manager that writes each summary over its target's dict."""

    def _replace_with_summary(self, target: str, summary: str) -> None:
        original = self._find_target(target)
        self.archive[target] = dict(original)
        original["content"] = f"[summary of {target}] {summary}"


@pytest.mark.parametrize("capture", ["content", "copy"])
def test_it_logs_contents_a_manager_rewrites_in_place_as_each_step_saw_them(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client], capture: str
) -> None:
    raw = "upstream timed out (110) while reading response header, order SO20260101007 " * 8
    plan = {"u2": ContextAction("summarize", "t1", {"reason": "long log"})}
    cm = _planned(InPlaceManager, plan, "a timeout upstream")
    client = make_client(gunicorn_api, project_key)
    sid = f"seed-000-in-place-{capture}"
    watch_manager(cm, client.session(sid, agent="cm-bot"), capture=capture)
    for message in [
        {"id": "u1", "role": "user", "content": "Why does SO20260101007 time out?"},
        _tool("t1", raw),
        {"id": "u2", "role": "user", "content": "Summarize the log."},
    ]:
        cm.execute(cm.step(message))
    # The agent's own code edits a message between two steps, in place too.
    cm.active_context[0]["content"] = "Why does SO20260101007 time out? (asked twice)"
    cm.execute(cm.step({"id": "u3", "role": "user", "content": "Thanks."}))
    assert client.flush(20), client.problems

    steps = Reader(gunicorn_api, project_key).steps(sid)
    summarized = steps[2]
    assert summarized["before"][1]["content"] == raw
    assert summarized["after"][1]["content"] == "[summary of t1] a timeout upstream"
    assert [op["op"] for op in summarized["ops"]] == ["summarize"]
    assert _folds(summarized) == [("t1", ["t1"])]
    # The edit between steps is in the record: in the next step's after at the latest.
    assert steps[3]["after"][0]["content"] == "Why does SO20260101007 time out? (asked twice)"
    assert [op["op"] for op in steps[3]["ops"]] == ["keep", "rewrite"]
    assert steps[2]["after"][0]["content"] == "Why does SO20260101007 time out?"


def test_a_manager_hook_refuses_an_unknown_capture() -> None:
    cm = ContextManager(
        policy=lambda obs: ContextAction("keep", "", {}),
        summarizer=lambda ms: "",
        estimate_tokens=estimate_tokens,
    )
    client = Client("http://127.0.0.1:9", "key")
    try:
        session = client.session("capture-typo")
        with pytest.raises(ValueError, match="capture must be one of content, copy, shared"):
            watch_manager(cm, session, capture="copies")
    finally:
        client.close(timeout=2)
    assert "step" not in vars(cm)  # the manager is left as it was


def test_it_logs_hidden_compactions_of_a_seed_000_manager_as_inferred_operations(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client]
) -> None:
    cm = ContextManager(
        policy=lambda obs: ContextAction("keep", "", {}),
        summarizer=lambda ms: "",
        estimate_tokens=estimate_tokens,
        max_tokens=400,
    )
    client = make_client(gunicorn_api, project_key)
    session = client.session("seed-000-hidden")
    watch_manager(cm, session)
    for n in range(3):
        cm.execute(cm.step(_tool(f"t{n}", f"line {n} upstream timed out " * 40)))
    assert client.flush(20), client.problems

    steps = Reader(gunicorn_api, project_key).steps("seed-000-hidden")
    # _compact_if_needed dropped the oldest tool result without a word in action_log.
    assert [op["op"] for op in steps[1]["ops"]] == ["keep", "drop"]
    assert steps[1]["ops"][1]["targets"] == ["t0"]
    assert steps[1]["ops"][1]["reason"] == "not logged by the manager (inferred by the SDK)"
    assert _ids(steps[1]["after"]) == ["t1"]
    assert _ids(steps[2]["after"]) == _ids(cm.active_context) == ["t2"]


def test_it_logs_each_build_of_a_seed_001_mode_manager(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client]
) -> None:
    manager = ContextModeManager(
        8000,
        {
            "full": FullPolicy(),
            "sliding": SlidingPolicy(window_turns=2),
            "summary": SummaryPolicy(recent_keep=1, compact_threshold=2,
                                     summarizer=lambda ms: f"{len(ms)} messages, no ids"),
        },
    )  # fmt: skip
    client = make_client(gunicorn_api, project_key)
    session = client.session("seed-001", agent="chat-bot", mode="sliding")
    wrap_build(manager, session)
    store = MessageStore(
        [{"id": "sys", "role": "system", "content": "Be brief.", "scope": "system"}]
    )
    store.immutable_items = ["member id A12345"]
    built: list[list[str]] = []
    modes = ["sliding"] * 4 + ["summary"] * 3
    for turn, mode in enumerate(modes, 1):
        text = "member id A12345" if turn == 1 else f"question {turn}"
        store.messages.append({"id": f"u{turn}", "role": "user", "content": text, "scope": "chat"})
        context = manager.build(mode, store, text)["messages"]
        built.append(_ids(context))
        store.messages.append(
            {"id": f"a{turn}", "role": "assistant", "content": f"answer {turn}", "scope": "chat"}
        )
    assert client.flush(20), client.problems

    reader = Reader(gunicorn_api, project_key)
    steps = reader.steps("seed-001")
    assert [_ids(s["after"]) for s in steps] == built
    assert [s["mode"] for s in steps] == modes
    assert all(not s["after_given"] for s in steps), [s["index"] for s in steps if s["after_given"]]
    # Sliding: turn 3 pushes turn 1 out of the two-turn window.
    assert steps[2]["ops"][0]["op"] == "drop" and steps[2]["ops"][0]["targets"] == ["u1", "a1"]
    # Summary: the dropped turns are not folded again; what the window still held is.
    summarize = [op for s in steps for op in s["ops"] if op["op"] == "summarize"]
    assert summarize and summarize[0]["result_id"] == "summary_1"
    assert steps[0]["before"][0]["partition"] == "system"
    assert steps[0]["obs_extra"]["mode_snapshot"]["mode"] == "sliding"
    assert reader.get("/sessions/seed-001")["pinned"] == ["member id A12345"]


@pytest.mark.parametrize("kind", [list, deque], ids=["list", "deque"])
def test_a_seed_001_store_that_is_rewritten_is_read_whole_again(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client], kind: type
) -> None:
    manager = ContextModeManager(8000, {"full": FullPolicy()})
    client = make_client(gunicorn_api, project_key)
    sid = f"seed-001-rewritten-{kind.__name__}"
    wrap_build(manager, client.session(sid, agent="chat-bot", mode="full"))
    system = {"id": "sys", "role": "system", "content": "Be brief.", "scope": "system"}
    store = MessageStore(kind([system]))
    for n in range(1, 4):
        store.messages.append({"id": f"u{n}", "role": "user", "content": f"q{n}", "scope": "chat"})
        manager.build("full", store, f"q{n}")
    # The agent rewrites its store (not only appends): u2 goes, a correction comes in.
    store.messages = kind([store.messages[0], store.messages[1], store.messages[3]])
    store.messages.append({"id": "u4", "role": "user", "content": "q4, corrected", "scope": "chat"})
    manager.build("full", store, "q4")
    assert client.flush(20), client.problems

    steps = Reader(gunicorn_api, project_key).steps(sid)
    assert [_ids(s["after"]) for s in steps] == [
        ["sys", "u1"],
        ["sys", "u1", "u2"],
        ["sys", "u1", "u2", "u3"],
        ["sys", "u1", "u3", "u4"],
    ]
    assert _ids(steps[3]["before"]) == ["sys", "u1", "u2", "u3", "u4"]
    assert [(op["op"], op["targets"]) for op in steps[3]["ops"]] == [("drop", ["u2"])]


def test_it_logs_a_seed_002_builder_with_its_degradation_order(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client]
) -> None:
    builder = ContextBuilder(estimate_tokens, budget=2000)
    client = make_client(gunicorn_api, project_key)
    session = client.session("seed-002", agent="audit-bot")
    hook = watch_builder(builder, session, partition_budgets={"tool": 800})
    rows = [{"order_id": f"SO202601{n:05d}", "status": "shipped"} for n in range(200)]
    rows.append({"order_id": "SO20260101007", "status": "exception", "exception_reason": "stalled"})
    orders = json.dumps({"code": 0, "data": {"list": rows}})
    memory = "Ticket CS-20260114-0031 resumed.\nWuhan hub has weather delays.\n" * 3
    sops = [f"SOP {n}: " + "escalate after 48 h. " * 20 for n in range(5)]
    assembled = []
    hook.tool = "query_orders"
    assembled.append(
        builder.build("You audit orders.", "Audit today.", memory, None, sops[:2], "Q1")
    )
    assembled.append(builder.build("You audit orders.", "Audit today.", memory, orders, sops, "Q2"))
    assert client.flush(20), client.problems

    steps = Reader(gunicorn_api, project_key).steps("seed-002")
    assert len(steps) == 2
    assert [op["op"] for op in steps[0]["ops"]] == ["keep"]
    second = steps[1]
    assert [(op["op"], op["targets"]) for op in second["ops"]] == [
        ("truncate", ["tool"]),
        ("summarize", ["memory"]),
        ("drop", ["retrieval.3", "retrieval.4"]),
    ]
    assert [m["partition"] for m in second["after"]] == [
        "system", "task", "memory", "tool", "retrieval", "retrieval", "retrieval", "question",
    ]  # fmt: skip
    texts = [m["content"].split("] ", 1)[1] for m in assembled[1]]
    assert [m["content"] for m in second["after"]] == texts
    assert "SO20260101007 stalled" in second["after"][3]["content"]
    assert second["before"][3]["tool"] == "query_orders"
    assert "forced degradation" in second["reason"]


def test_it_logs_seed_003_edits_as_they_were_applied(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client]
) -> None:
    client = make_client(gunicorn_api, project_key)
    session = client.session("seed-003", agent="research-agent")
    hook = EditHook(session)
    context = [
        {"id": "sys", "role": "system", "content": "Research carefully."},
        {"id": "q", "role": "user", "content": "When did the Sydney Opera House open?"},
        {"id": "a1", "role": "assistant", "content": "search('Sydney Opera House')"},
        {"id": "o1", "role": "user", "content": "Opened by Queen Elizabeth II on 20 October 1973."},
        {"id": "a2", "role": "assistant", "content": "search('Utzon resignation')"},
        {"id": "o2", "role": "user", "content": "Utzon resigned in February 1966."},
    ]
    passes = [
        [],
        [{"ids": ["a1", "o1"], "role": "assistant", "justification": "merge hop 1",
          "new_content": "Hop 1: opened 1973."}],
        [{"ids": ["a2", "o2"], "justification": "side track", "new_content": ""},
         {"ids": ["q"], "new_content": "When did it open?"}],
    ]  # fmt: skip
    expected = []
    for edits in passes:
        after = apply_edits(context, edits)
        expected.append(after)
        context = hook.apply(context, edits)
        assert context == after
    assert client.flush(20), client.problems

    steps = Reader(gunicorn_api, project_key).steps("seed-003")
    for step, after in zip(steps, expected, strict=True):
        assert [(m["id"], m["content"]) for m in step["after"]] == [
            (m["id"], m["content"]) for m in after
        ]
    assert steps[0]["ops"] == []
    assert [(op["op"], op["form"]) for op in steps[1]["ops"]] == [("merge", "edit")]
    assert _folds(steps[1]) == [("a1", ["a1", "o1"])]
    assert steps[1]["ops"][0]["reason"] == "merge hop 1"
    assert [op["op"] for op in steps[2]["ops"]] == ["drop", "rewrite"]
    assert steps[2]["after"][1]["role"] == "user"
