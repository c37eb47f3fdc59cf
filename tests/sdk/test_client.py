"""The client without a server: what it sends, when it retries, what it never does to the agent.

A fake ingest endpoint (httpx.MockTransport) answers as the contract says and
records every request, so these tests need neither the database nor Django.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextview.sdk import Client, Directive, Problem, Reject
from contextview.sdk.client import _retry_after
from tests.sdk.conftest import mock_clients
from tests.waiting import wait_for

Handler = Callable[[httpx.Request], httpx.Response | None]


class FakeServer:
    """Answers ingest with 201 per event unless `script` says otherwise; keeps every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[float, str, str, Any]] = []
        self.script: list[Handler] = []
        self.events: list[dict[str, Any]] = []
        self.directives: list[dict[str, Any]] = []
        self.acks: list[tuple[str, dict[str, Any]]] = []
        self.archive: list[dict[str, Any]] = []
        # Answers every request it returns a response for (None: the default answer).
        self.handler: Handler | None = None
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body: Any = None
        if request.content:
            raw = request.content
            if request.headers.get("content-encoding") == "gzip":
                raw = gzip.decompress(raw)
            body = json.loads(raw)
        with self.lock:
            self.requests.append((time.monotonic(), request.method, request.url.path, body))
            scripted = self.script.pop(0)(request) if self.script else None
            if scripted is None and self.handler is not None:
                scripted = self.handler(request)
        if scripted is not None:
            return scripted
        path = request.url.path
        if path.endswith("/ingest"):
            self.events.extend(body["batch"])
            results = [{"id": e["id"], "status": 201} for e in body["batch"]]
            return httpx.Response(207, json={"results": results, "directives": self.directives})
        if path.endswith("/ack"):
            self.acks.append((path.split("/")[-2], body))
            self.directives = [d for d in self.directives if d["id"] != path.split("/")[-2]]
            return httpx.Response(200, json={})
        if path.endswith("/archive"):
            return httpx.Response(200, json={"originals": self.archive})
        if path.endswith("/control"):
            return httpx.Response(200, json={"directives": self.directives, "cursor": None})
        return httpx.Response(404, json={"error": "no such thing"})

    def steps(self) -> list[dict[str, Any]]:
        return [e["body"] for e in self.events if e["type"] == "step"]


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


@pytest.fixture
def make(server: FakeServer) -> Iterator[Callable[..., Client]]:
    yield from mock_clients(server)


SYS = {"id": "sys", "role": "system", "content": "You debug orders."}
ASK = {"id": "u1", "role": "user", "content": "Why does SO20260101007 time out?"}


def test_it_sends_unchanged_messages_by_id_alone(
    server: FakeServer, make: Callable[..., Client]
) -> None:
    client = make(gzip=False)
    session = client.session("s")
    log = {"id": "t1", "role": "tool", "content": "upstream timed out (110)"}
    session.record_step([SYS, ASK])
    session.record_step([SYS, ASK, log])
    changed = dict(ASK, content="Why does SO20260101007 time out? (asked again)")
    session.record_step([SYS, changed, log])
    session.record_step([SYS, changed, dict(log, pinned=True)])
    assert client.flush(5)

    wire = [s["obs"]["messages"] for s in server.steps()]
    assert wire[0] == [SYS, ASK]
    # Two or more in the order of the step before: one run of its after context.
    assert wire[1] == [{"$run": [0, 2]}, log]
    assert wire[2] == [{"id": "sys"}, changed, {"id": "t1"}]
    # Any field that changes what the message is sends it again, not only content.
    assert wire[3] == [{"$run": [0, 2]}, dict(log, pinned=True)]


def test_it_does_not_send_what_a_summary_replaced_as_if_it_were_still_there(
    server: FakeServer, make: Callable[..., Client]
) -> None:
    client = make(gzip=False)
    session = client.session("s")
    log = {"id": "t1", "role": "tool", "content": "upstream timed out (110) " * 20}
    summary = {"id": "t1", "role": "tool", "content": "504 after 3 s"}
    session.record_step([SYS, log], ops=[{"action": "truncate", "target": "t1", "result": summary}])
    # The next step's context holds the summary under the same id: the server has it
    # from the result, so it can go by id; the original must not.
    session.record_step([SYS, summary])
    session.record_step([SYS, log])
    assert client.flush(5)
    wire = [s["obs"]["messages"] for s in server.steps()]
    assert wire[1] == [{"$run": [0, 2]}]
    assert wire[2] == [{"id": "sys"}, log]


def test_it_gives_stable_ids_to_openai_style_messages(
    server: FakeServer, make: Callable[..., Client]
) -> None:
    client = make(gzip=False)
    session = client.session("s")
    messages: list[dict[str, Any]] = [{"role": "system", "content": "Be brief."}]
    session.record_step(messages)
    messages.append({"role": "user", "content": "hi"})
    session.record_step(messages)
    # A framework that rebuilds every dict each call still gets the same ids.
    session.record_step([dict(m) for m in messages])
    assert client.flush(5)
    wire = [s["obs"]["messages"] for s in server.steps()]
    assert wire[1] == [{"id": "m1"}, {"id": "m2", "role": "user", "content": "hi"}]
    assert wire[2] == [{"$run": [0, 2]}]


def test_a_message_without_an_id_takes_the_id_it_had_in_the_last_step(
    server: FakeServer, make: Callable[..., Client]
) -> None:
    client = make(gzip=False)
    session = client.session("s")
    session.record_step([{"id": "sys", "role": "system", "content": "Be brief."}])
    session.record_step(
        [{"id": "sys", "role": "system", "content": "Be brief."},
         {"id": "q1", "role": "user", "content": "Where is SO20260101007?"}]
    )  # fmt: skip
    # A framework that drops the ids it was given: the same message keeps its id.
    session.record_step(
        [{"role": "system", "content": "Be brief."},
         {"role": "user", "content": "Where is SO20260101007?"},
         {"role": "user", "content": "And SO20260101008?"}]
    )  # fmt: skip
    assert client.flush(5)
    ids = [[m.get("id") for m in s["obs"]["messages"]] for s in server.steps()]
    assert ids[2] == [None, "m1"]  # the run of sys and q1, then a new message
    assert server.steps()[2]["obs"]["messages"][0] == {"$run": [0, 2]}


def test_it_gzips_batches(server: FakeServer, make: Callable[..., Client]) -> None:
    client = make()
    session = client.session("s")
    for n in range(20):
        session.record_step([SYS, ASK, {"id": f"t{n}", "role": "tool", "content": "x " * 500}])
    assert client.flush(5)
    assert len(server.steps()) == 20
    stats = client.stats
    assert stats["bytes_sent"] * 5 < stats["bytes_raw"]


def test_it_retries_with_backoff_and_honours_retry_after(
    server: FakeServer, make: Callable[..., Client]
) -> None:
    server.script = [
        lambda r: httpx.Response(503, headers={"Retry-After": "0.3"}, json={"error": "down"}),
        lambda r: httpx.Response(429, headers={"Retry-After": "0.2"}, json={"error": "slow"}),
        lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused")),
        lambda r: httpx.Response(502, text="bad gateway"),
        # After a 502, an empty batch asks whether the server fails on everything (yes).
        lambda r: httpx.Response(502, text="bad gateway"),
    ]
    client = make(backoff_base=0.05, backoff_max=0.2)
    session = client.session("s")
    session.record_step([SYS, ASK])
    assert client.flush(10)

    sends = [(t, body) for t, _, path, body in server.requests if path.endswith("/ingest")]
    assert [bool(body["batch"]) for _, body in sends] == [True] * 4 + [False, True]
    times = [t for t, body in sends if body["batch"]]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps[0] >= 0.3 and gaps[1] >= 0.2
    assert all(g < 1.0 for g in gaps)
    stats = client.stats
    assert stats["sent"] == 2 and stats["dropped"] == 0
    assert stats["retried"] >= 4  # every event of every failed attempt
    assert [e["id"] for e in server.events] == [e["id"] for e in server.requests[-1][3]["batch"]]


def test_it_treats_other_client_errors_as_final_and_reports_them(
    server: FakeServer, make: Callable[..., Client]
) -> None:
    problems: list[Problem] = []
    refuse = threading.Event()
    refuse.set()
    server.handler = lambda r: (
        httpx.Response(401, json={"detail": "Unauthorized"}) if refuse.is_set() else None
    )
    client = make(on_error=problems.append)
    session = client.session("s")
    session.record_step([SYS])
    assert client.flush(5)
    attempts = len(server.requests)
    refuse.clear()
    session.record_step([SYS, ASK])
    assert client.flush(5)
    assert client.stats["rejected"] == 2 and client.stats["sent"] == 1
    assert [p.status for p in problems] == [401, 401]
    assert len(server.requests) == attempts + 1  # refused once, never retried
    # The refused step's messages never reached the server: the next step resends them.
    assert server.steps()[0]["obs"]["messages"] == [SYS, ASK]


def test_it_never_raises_into_the_agent(server: FakeServer, make: Callable[..., Client]) -> None:
    def broken(problem: Problem) -> None:
        raise RuntimeError("a broken on_error")

    client = make(on_error=broken)
    session = client.session("s")

    class Odd:
        def __repr__(self) -> str:
            raise ValueError("no repr either")

    assert session.record_step([SYS, 42, {"role": "user", "content": Odd()}]) == 0
    assert session.record_step(None) == -1  # type: ignore[arg-type]
    assert session.record_step([SYS], ops="summarize everything") == -1  # type: ignore[arg-type]
    session.record_step([SYS], ops=[{"action": "drop", "target": "nowhere"}])
    assert client.flush(5)
    assert client.stats["rejected"] == 0  # nothing raised, whatever the server makes of it
    assert len(client.problems) >= 2


def test_it_never_blocks_the_agent_and_counts_what_it_cannot_keep(
    server: FakeServer, make: Callable[..., Client]
) -> None:
    release = threading.Event()
    server.script = [lambda r: (release.wait(5), None)[1]]
    client = make(max_queue=5, max_buffer_events=10)
    session = client.session("s")
    session.record_step([SYS])
    # The server records a request before its script holds it: the sender is then stuck.
    wait_for(lambda: server.requests, 5, "the sender's first request")
    slowest = 0.0
    for n in range(100):
        started = time.perf_counter()
        session.record_step([SYS, {"id": f"u{n}", "role": "user", "content": f"turn {n}"}])
        slowest = max(slowest, time.perf_counter() - started)
    release.set()
    assert client.flush(10)
    assert slowest < 0.05
    stats = client.stats
    assert stats["dropped"] >= 100 - 5
    assert stats["sent"] == stats["recorded"]
    assert stats["sent"] + stats["dropped"] == 2 + 100
    # What was kept still reads right: dropped steps never made the mirror run ahead.
    assert all("content" in m for m in server.steps()[1]["obs"]["messages"][1:])


def test_it_spools_to_disk_and_the_next_client_sends_what_is_left(
    server: FakeServer, make: Callable[..., Client], tmp_path: Path
) -> None:
    down = FakeServer()
    down.script = [lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused"))] * 10_000
    first = Client(
        "http://cv.test", "k", transport=httpx.MockTransport(down), spool_dir=tmp_path,
        flush_interval=0.02, backoff_base=0.05, backoff_max=0.1, max_buffer_events=3,
    )  # fmt: skip
    session = first.session("spooled")
    context = [SYS]
    for n in range(12):
        context = context + [{"id": f"t{n}", "role": "tool", "content": f"timeout {n} " * 30}]
        session.record_step(context)
    session.end("failed")
    first.close(timeout=0.5)
    assert first.stats["spooled"] >= 14 and first.stats["sent"] == 0
    assert list(tmp_path.glob("seg-*.jsonl"))

    second = make(spool_dir=tmp_path)
    second.session("other").record_step([SYS])
    assert second.flush(10)
    ids = [e["id"] for e in server.events]
    assert len(ids) == len(set(ids)) == 14 + 2
    steps = [e["body"] for e in server.events if e["body"]["session_id"] == "spooled"][1:-1]
    assert [s["index"] for s in steps] == list(range(12))
    assert steps[5]["obs"]["$base"] == 4
    assert steps[5]["obs"]["messages"][:1] == [{"$run": [0, 6]}]
    assert not list(tmp_path.glob("seg-*.jsonl"))


def test_it_resends_in_full_what_referred_to_a_refused_event(
    server: FakeServer, make: Callable[..., Client]
) -> None:
    recorded: set[str] = set()

    def refuse_first_step(request: httpx.Request) -> httpx.Response:
        batch = json.loads(request.content)["batch"]
        results = []
        for event in batch:
            if event["type"] != "step":
                results.append({"id": event["id"], "status": 201})
            elif event["body"]["index"] == 0:
                results.append({"id": event["id"], "status": 400, "error": "body.x: no"})
            elif event["body"]["obs"].get("$base") == 0:
                error = "body.obs.$base: step 0 was never recorded for this session"
                results.append({"id": event["id"], "status": 422, "error": error})
            else:
                alone = [m["id"] for m in event["body"]["obs"]["messages"] if len(m) == 1]
                missing = [m for m in alone if m not in recorded]
                if missing:
                    error = f"body.obs.messages[0].id: id '{missing[0]}' was never recorded"
                    results.append({"id": event["id"], "status": 422, "error": error})
                else:
                    recorded.update(m["id"] for m in event["body"]["obs"]["messages"])
                    server.events.append(event)
                    results.append({"id": event["id"], "status": 201})
        return httpx.Response(207, json={"results": results, "directives": []})

    server.handler = refuse_first_step
    client = make(gzip=False, flush_interval=0.3)
    session = client.session("s")
    session.record_step([SYS, ASK])
    session.record_step([SYS, ASK, {"id": "t1", "role": "tool", "content": "504"}])
    assert client.flush(5)
    assert client.stats["rejected"] == 1 and client.stats["sent"] == 2
    resent = server.steps()[-1]["obs"]["messages"]
    assert resent[:2] == [SYS, ASK]


def test_it_brings_directives_to_the_agent_and_acknowledges_them(
    server: FakeServer, make: Callable[..., Client]
) -> None:
    server.directives = [
        {"id": "d-1", "session_id": "s", "type": "set_mode", "mode": "sliding"},
        {"id": "d-2", "session_id": "s", "type": "restore", "targets": ["t1"], "step": 0},
        {"id": "d-3", "session_id": "s", "type": "set_mode", "mode": "telepathy"},
    ]
    server.archive = [
        {"id": "t1", "step": 0, "message": {"id": "t1", "role": "tool", "content": "raw log"}}
    ]
    seen: list[Directive] = []

    def on_set_mode(d: Directive) -> str:
        if d.mode == "telepathy":
            raise Reject("no such mode")
        seen.append(d)
        return "switched"

    def on_restore(d: Directive) -> None:
        seen.append(d)

    client = make()
    session = client.session("s", mode="summary", on_set_mode=on_set_mode, on_restore=on_restore)
    session.record_step([SYS])
    assert client.flush(5)

    def acknowledged() -> bool:
        if len(server.acks) < 3:
            session.record_step([SYS])  # each step applies what has arrived, on this thread
            client.flush(1)
        return len(server.acks) >= 3

    wait_for(acknowledged, 5, "three acknowledgements")
    assert [d.id for d in seen] == ["d-1", "d-2"]
    assert seen[1].originals == {"t1": {"id": "t1", "role": "tool", "content": "raw log"}}
    assert session.mode == "sliding"
    acks = dict(server.acks)
    assert acks["d-1"] == {"status": "applied", "detail": "switched"}
    assert acks["d-2"] == {"status": "applied", "detail": ""}
    assert acks["d-3"] == {"status": "rejected", "detail": "no such mode"}
    # A directive is applied after the step that brought it: the next step shows it.
    session.record_step([SYS])
    assert client.flush(5)
    assert server.steps()[-1]["mode"] == "sliding"


def test_it_reads_retry_after_as_seconds_or_a_date() -> None:
    assert _retry_after("2") == 2.0
    assert _retry_after(None) is None
    assert _retry_after("soon") is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < (_retry_after(later) or 0) <= 30


def test_it_polls_for_directives_while_the_agent_is_idle(
    server: FakeServer, make: Callable[..., Client]
) -> None:
    applied: list[str] = []
    client = make(poll_interval=0.1)
    session = client.session(
        "idle", on_set_mode=lambda d: applied.append(d.mode or ""), deliver="thread"
    )
    session.record_step([SYS])
    assert client.flush(5)
    # Nothing more to send: the directive can only come back by polling.
    server.directives = [{"id": "d-7", "session_id": "idle", "type": "set_mode", "mode": "rag"}]
    wait_for(lambda: server.acks, 5, "the acknowledgement")
    assert applied == ["rag"]
    assert server.acks == [("d-7", {"status": "applied", "detail": ""})]
    assert any(path.endswith("/control") for _, _, path, _ in server.requests)


def test_it_sends_text_cut_inside_a_character_as_escapes_instead_of_losing_the_step(
    server: FakeServer, make: Callable[..., Client]
) -> None:
    client = make()
    session = client.session("cut")
    cut = {"id": "t1", "role": "tool", "content": "fine so far \U0001f600"[:-1] + "\ud83d"}
    session.record_step([SYS, cut])
    assert client.flush(5)
    assert server.steps()[0]["obs"]["messages"][1]["content"].endswith("far \ud83d")
    assert client.stats["sent"] == 2 and not client.problems
