"""Steps sent against the step before them: ``"$base"`` and ``{"$run": [start, count]}``.

The fake ingest endpoint here resolves what it is sent as the server does (an id
alone: what the session last recorded under it; a run: messages of the base
step's after context; the after derived by the core), so the tests check what
each step meant to the server, not only its bytes. The last test sends such
steps to a real server (``gunicorn_api``) and reads them back.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextview.core.apply import derive_step
from contextview.core.errors import InputError
from contextview.core.runs import RUN_KEY, expand_runs
from contextview.sdk import Client
from contextview.sdk._wire import SessionWire, StepDraft, encode_json
from tests.sdk.conftest import Reader, mock_clients

Message = dict[str, Any]
Refusal = Callable[[dict[str, Any]], "tuple[int, str] | None"]


class ResolvingServer:
    """Ingest that stores each step's context in full, resolving ids and runs.

    `refuse(event)` may answer an event with (status, error) before it is taken.
    """

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []  # every event as it came, refused or not
        self.contexts: dict[tuple[str, int], list[Message]] = {}
        self.after_of: dict[tuple[str, int], list[Message]] = {}
        self.latest: dict[tuple[str, str], Message] = {}
        self.refuse: Refusal | None = None
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        raw = request.content
        if request.headers.get("content-encoding") == "gzip":
            raw = gzip.decompress(raw)
        results = []
        with self.lock:
            for event in json.loads(raw)["batch"]:
                self.sent.append(event)
                answer = self.refuse(event) if self.refuse is not None else None
                if answer is None and event["type"] == "step":
                    answer = self._take(event["body"])
                if answer is None:
                    results.append({"id": event["id"], "status": 201})
                else:
                    results.append({"id": event["id"], "status": answer[0], "error": answer[1]})
        return httpx.Response(207, json={"results": results, "directives": []})

    def _resolve(
        self, sid: str, messages: list[Message], base: list[Message] | None, field: str
    ) -> list[Message] | tuple[int, str]:
        if base is None and any(RUN_KEY in m for m in messages):
            return 400, "body.obs.$base: runs need a base"
        try:  # the server's own expansion
            messages, _ = expand_runs(messages, base or [], field=field)
        except InputError as exc:
            return exc.status, str(exc)
        full: list[Message] = []
        for k, m in enumerate(messages):
            if "content" not in m:
                known = self.latest.get((sid, str(m["id"])))
                if known is None:
                    return 422, f"{field}[{k}].id: id {m['id']!r} was never recorded"
                full.append({**known, **m})
            else:
                full.append(m)
        return full

    def _take(self, body: dict[str, Any]) -> tuple[int, str] | None:
        sid = body["session_id"]
        obs = body["obs"]
        base = None
        if "$base" in obs:
            base = self.after_of.get((sid, obs["$base"]))
            if base is None:
                return (
                    422,
                    f"body.obs.$base: step {obs['$base']} was never recorded for this session",
                )
        before = self._resolve(sid, obs["messages"], base, "body.obs.messages")
        if isinstance(before, tuple):
            return before
        given: list[Message] | None = None
        if "after" in body:
            resolved = self._resolve(sid, body["after"]["messages"], None, "body.after.messages")
            if isinstance(resolved, tuple):
                return resolved
            given = resolved
        ops = body.get("actions") or ([body["action"]] if "action" in body else None)
        result = derive_step(obs=before, ops_raw=ops, after_raw=given, latest={}, archive={})
        by_id = {str(m["id"]): m for m in before}
        for op in ops or ():
            if isinstance(op.get("result"), dict):
                by_id[str(op["result"]["id"])] = op["result"]
        by_id.update((str(m["id"]), m) for m in given or ())
        after = [by_id[m.id] for m in result.after]
        for mid, m in by_id.items():
            self.latest[(sid, mid)] = m
        self.contexts[(sid, body["index"])] = before
        self.after_of[(sid, body["index"])] = after
        return None

    def steps(self, session_id: str) -> list[dict[str, Any]]:
        """The step events of a session as they were last sent, by index."""
        last: dict[int, dict[str, Any]] = {}
        for event in self.sent:
            body = event["body"]
            if event["type"] == "step" and body["session_id"] == session_id:
                last[body["index"]] = body
        return [last[index] for index in sorted(last)]


@pytest.fixture
def server() -> ResolvingServer:
    return ResolvingServer()


@pytest.fixture
def make(server: ResolvingServer) -> Iterator[Callable[..., Client]]:
    yield from mock_clients(server, gzip=False)


SYS = {"id": "sys", "role": "system", "content": "You debug orders."}


def _tool(n: int, text: str = "upstream timed out (110)") -> Message:
    return {"id": f"t{n}", "role": "tool", "tool": "grep", "content": f"{text} #{n} " * 8}


def _draft(index: int, before: list[Message], obs: dict[str, Any] | None = None) -> StepDraft:
    return StepDraft(
        index=index, timestamp=time.time(), before=before, before_copy=[dict(m) for m in before],
        after=None, after_copy=None, ops=None, infer=True, fields={}, obs_extra=obs,
    )  # fmt: skip


def _obs(data: bytes) -> dict[str, Any]:
    obs: dict[str, Any] = json.loads(data)["body"]["obs"]
    return obs


def _runs_and_ids(messages: list[Message]) -> list[Message]:
    return [m for m in messages if "content" not in m]


def test_an_appending_agent_sends_each_step_as_one_run_and_what_it_added(
    server: ResolvingServer, make: Callable[..., Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    def run_agent(sid: str) -> tuple[Client, list[list[Message]]]:
        client = make()
        session = client.session(sid)
        context = [SYS] + [_tool(n) for n in range(150)]
        had: list[list[Message]] = []
        for n in range(150, 200):
            context = context + [_tool(n)]
            session.record_step(context)
            had.append(context)
        assert client.flush(10)
        return client, had

    client, had = run_agent("appending")
    steps = server.steps("appending")
    assert [server.contexts[("appending", s["index"])] for s in steps] == had
    assert "$base" not in steps[0]["obs"]
    for previous, step, context in zip(steps, steps[1:], had[1:], strict=False):
        assert step["obs"]["$base"] == previous["index"]
        assert step["obs"]["messages"] == [{"$run": [0, len(context) - 1]}, context[-1]]

    # The same agent with ids alone (no base): what the references cost there is saved.
    wire_obs = SessionWire._wire_obs

    def ids_alone(self: SessionWire, *args: Any) -> int:
        before, parsed, _, wire, expand = args
        return wire_obs(self, before, parsed, None, wire, expand)

    monkeypatch.setattr(SessionWire, "_wire_obs", ids_alone)
    plain, _ = run_agent("ids-alone")
    references = sum(
        len(encode_json(m)) + 1
        for s in server.steps("ids-alone")
        for m in _runs_and_ids(s["obs"]["messages"])
    )
    assert references > 49 * 150 * len('{"id":"t100"},')
    saved = plain.stats["bytes_raw"] - client.stats["bytes_raw"]
    assert saved > 0.95 * references


def test_runs_stand_for_exactly_the_messages_the_agent_had(
    server: ResolvingServer, make: Callable[..., Client]
) -> None:
    client = make()
    session = client.session("compacting")
    had: list[list[Message]] = []

    def step(before: list[Message], after: list[Message] | None = None, **kw: Any) -> None:
        session.record_step(before, after, **kw)
        had.append(list(before))

    def without(context: list[Message], *ids: str) -> list[Message]:
        return [m for m in context if m["id"] not in ids]

    context = [SYS] + [_tool(n) for n in range(12)]
    step(context)
    context = context + [_tool(12)]
    step(context)
    # A compaction step: the next step is a run of what it left.
    step(context, without(context, "t3", "t4", "t7"))
    context = without(context, "t3", "t4", "t7") + [_tool(13)]
    step(context)
    # Messages the agent dropped between steps: runs either side of each gap.
    context = without(context, "t1", "t9")
    step(context)
    # A message rewritten in the middle breaks the run; it goes in full.
    edited = dict(context[5], content="504 after 3 s")
    context = context[:5] + [edited] + context[6:]
    step(context)
    # A summary replaces three tools; the step after it is one run of its after.
    summary = {"id": "s1", "role": "assistant", "content": "t0, t2, t5: 504s from inventory"}
    step(context, ops=[{"action": "summarize", "targets": ["t0", "t2", "t5"], "result": summary}])
    context = [SYS, summary] + without(context[1:], "t0", "t2", "t5")
    step(context)
    # Reordered: a run per stretch that kept its order; a single message by id alone.
    context = context[:1] + context[3:] + context[1:3] + [_tool(14)]
    step(context)
    assert client.flush(10)

    steps = server.steps("compacting")
    assert [server.contexts[("compacting", s["index"])] for s in steps] == had
    wire = [s["obs"]["messages"] for s in steps]
    assert wire[1] == [{"$run": [0, 13]}, _tool(12)]
    assert wire[2] == [{"$run": [0, 14]}]
    assert wire[3] == [{"$run": [0, 11]}, _tool(13)]
    assert wire[4] == [{"$run": [0, 2]}, {"$run": [3, 4]}, {"$run": [8, 4]}]
    assert wire[5] == [{"$run": [0, 5]}, edited, {"$run": [6, 4]}]
    assert wire[6] == [{"$run": [0, 10]}]
    assert wire[7] == [{"$run": [0, 8]}]
    assert wire[8] == [{"id": "sys"}, {"$run": [3, 5]}, {"$run": [1, 2]}, _tool(14)]
    assert all(s["obs"]["$base"] == s["index"] - 1 for s in steps[1:])


def test_a_step_whose_base_was_refused_is_resent_in_full(
    server: ResolvingServer, make: Callable[..., Client]
) -> None:
    def refuse_step_0(event: dict[str, Any]) -> tuple[int, str] | None:
        if event["type"] == "step" and event["body"]["index"] == 0:
            return 400, "body.reason: no"
        return None

    server.refuse = refuse_step_0
    client = make(flush_interval=0.3)  # both steps in one batch
    session = client.session("refused-base")
    first = [SYS, _tool(0), _tool(1)]
    second = first + [_tool(2)]
    session.record_step(first)
    session.record_step(second)
    assert client.flush(5)

    tries = [e["body"] for e in server.sent if e["type"] == "step" and e["body"]["index"] == 1]
    assert tries[0]["obs"] == {"$base": 0, "messages": [{"$run": [0, 3]}, _tool(2)]}
    assert tries[-1]["obs"] == {"messages": second}
    assert server.contexts[("refused-base", 1)] == second
    assert client.stats["rejected"] == 1 and client.stats["sent"] == 2


def test_a_base_the_server_lost_makes_the_step_go_again_in_full(
    server: ResolvingServer, make: Callable[..., Client]
) -> None:
    lost: list[str] = []

    def forget_the_base_once(event: dict[str, Any]) -> tuple[int, str] | None:
        base = event["body"].get("obs", {}).get("$base")
        if base is None or lost:
            return None
        lost.append(event["id"])
        return 422, f"body.obs.$base: step {base} was never recorded for this session"

    server.refuse = forget_the_base_once
    client = make()
    session = client.session("lost-base")
    contexts = [[SYS, *map(_tool, range(n))] for n in (2, 3, 4, 5)]
    for context in contexts:
        session.record_step(context)
        assert client.flush(5)

    steps = server.steps("lost-base")
    assert [server.contexts[("lost-base", s["index"])] for s in steps] == contexts
    resent = [e["body"]["obs"] for e in server.sent if e["id"] == lost[0]]
    assert len(resent) == 2 and "$base" in resent[0]
    assert resent[1] == {"messages": contexts[1]}
    # The mirror starts over: the next step in full, the one after against it again.
    assert steps[2]["obs"] == {"messages": contexts[2]}
    run = {"$run": [0, len(contexts[2])]}
    assert steps[3]["obs"] == {"$base": 2, "messages": [run, contexts[3][-1]]}
    assert client.stats["sent"] == 5 and client.stats["rejected"] == 0


def test_after_a_reset_no_base_is_used() -> None:
    wire = SessionWire("s")
    first = [SYS, _tool(0), _tool(1)]
    wire.encode_step(_draft(0, first), "e0")
    second, _ = wire.encode_step(_draft(1, first + [_tool(2)]), "e1")
    assert _obs(second.data) == {"$base": 0, "messages": [{"$run": [0, 3]}, _tool(2)]}

    wire.reset()
    assert wire.base is None
    third, _ = wire.encode_step(_draft(2, first + [_tool(2), _tool(3)]), "e2")
    assert _obs(third.data) == {"messages": first + [_tool(2), _tool(3)]}
    assert third.expand is None
    fourth, _ = wire.encode_step(_draft(3, first + [_tool(2), _tool(3)]), "e3")
    assert _obs(fourth.data) == {"$base": 2, "messages": [{"$run": [0, 5]}]}


def test_the_base_is_only_the_step_just_encoded() -> None:
    wire = SessionWire("s")
    context = [SYS, _tool(0), _tool(1)]
    wire.encode_step(_draft(0, context), "e0")
    # The same index again cannot be its own base: ids alone.
    again, _ = wire.encode_step(_draft(0, context), "e1")
    assert _obs(again.data) == {"messages": [{"id": "sys"}, {"id": "t0"}, {"id": "t1"}]}
    # A step the server will refuse leaves nothing to build on.
    bad, error = wire.encode_step(_draft(1, [SYS, {"id": "t9"}]), "e2")
    assert error is not None and wire.base is None
    after_bad, _ = wire.encode_step(_draft(2, context), "e3")
    assert "$base" not in _obs(after_bad.data)
    # "$base" is the SDK's: an agent's observation fields cannot set it.
    own, _ = wire.encode_step(_draft(3, [SYS, {"id": "new", "content": "x"}], {"$base": 9}), "e4")
    assert _obs(own.data) == {"messages": [{"id": "sys"}, {"id": "new", "content": "x"}]}


def test_expanding_a_step_puts_back_every_message_its_runs_stood_for() -> None:
    wire = SessionWire("s")
    first = [SYS] + [_tool(n) for n in range(6)]
    wire.encode_step(_draft(0, first), "e0")
    second = [*first[:3], first[5], dict(first[3], content="edited"), first[4], _tool(6)]
    pending, _ = wire.encode_step(_draft(1, second), "e1")
    assert _obs(pending.data)["messages"] == [
        {"$run": [0, 3]}, {"id": "t4"}, dict(first[3], content="edited"), {"id": "t3"}, _tool(6),
    ]  # fmt: skip
    assert pending.expand_all() and pending.expanded
    assert _obs(pending.data) == {"messages": second}
    assert not pending.expand_all()


def test_a_spooled_step_keeps_what_its_runs_stand_for(
    server: ResolvingServer, make: Callable[..., Client], tmp_path: Path
) -> None:
    down = httpx.MockTransport(lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused")))
    first = Client(
        "http://cv.test", "k", transport=down, spool_dir=tmp_path, flush_interval=0.02,
        backoff_base=0.05, backoff_max=0.1, max_buffer_events=2, poll_interval=0,
    )  # fmt: skip
    session = first.session("spooled")
    contexts = [[SYS, *map(_tool, range(n))] for n in range(2, 8)]
    for context in contexts:
        session.record_step(context)
    first.close(timeout=0.5)
    assert first.stats["sent"] == 0 and list(tmp_path.glob("seg-*.jsonl"))

    # The server of the next process lost step 2: step 3 (its base) goes again in full.
    def lose_step_2(event: dict[str, Any]) -> tuple[int, str] | None:
        if event["type"] == "step" and event["body"]["index"] == 2:
            return 400, "body.reason: no"
        return None

    server.refuse = lose_step_2
    second = make(spool_dir=tmp_path)
    second.session("other").record_step([SYS])  # starts its sender, which finds the spool
    assert second.flush(10)
    steps = server.steps("spooled")
    assert [s["index"] for s in steps] == list(range(6))
    assert steps[3]["obs"] == {"messages": contexts[3]}
    for index in (1, 3, 4, 5):
        assert server.contexts[("spooled", index)] == contexts[index]
    run = {"$run": [0, len(contexts[4])]}
    assert steps[5]["obs"] == {"$base": 4, "messages": [run, contexts[5][-1]]}


class Recording(httpx.HTTPTransport):
    """A real transport that keeps the step events it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[dict[str, Any]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/ingest"):
            raw = request.read()
            if request.headers.get("content-encoding") == "gzip":
                raw = gzip.decompress(raw)
            self.steps += [e["body"] for e in json.loads(raw)["batch"] if e["type"] == "step"]
        return super().handle_request(request)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_the_server_stores_steps_sent_as_runs(
    gunicorn_api: str, project_key: str, make_client: Callable[..., Client]
) -> None:
    transport = Recording()
    client = make_client(gunicorn_api, project_key, transport=transport, flush_interval=0.2)
    session = client.session("runs-live", agent="appending")
    context = [SYS] + [_tool(n) for n in range(20)]
    had: list[list[Message]] = []
    for n in range(20, 26):
        context = context + [_tool(n)]
        if n == 23:
            compacted = [m for m in context if m["id"] not in ("t2", "t3")]
            session.record_step(context, compacted, reason="over budget")
            had.append(context)
            context = compacted
            continue
        if n == 25:
            context = context[:4] + [dict(context[4], content="rewritten")] + context[5:]
        session.record_step(context)
        had.append(context)
        if n == 21:
            assert client.flush(20), client.problems  # a base stored in an earlier request
    session.end("succeeded")
    assert client.flush(20), client.problems
    assert client.stats["rejected"] == 0 and client.stats["sent"] == 8

    assert all("$base" in s["obs"] for s in transport.steps[1:])
    assert any(len(s["obs"]["messages"]) > 2 for s in transport.steps[1:])
    steps = Reader(gunicorn_api, project_key).steps("runs-live")
    stored = [[(m["id"], m["content"]) for m in s["before"]] for s in steps]
    assert stored == [[(m["id"], m["content"]) for m in context] for context in had]
