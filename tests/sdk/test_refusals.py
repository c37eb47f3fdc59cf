"""What the server refuses for good never holds up the rest: splitting, setting aside, waiting.

A stand-in ingest endpoint (the resolving fake of ``test_runs``, in process) fails
on a marked event the way a server fails on a value it should have refused: a
500 for the whole batch, or a batch that times out. The real server's refusals
are in ``test_delivery``.
"""

from __future__ import annotations

import gzip
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from contextview.sdk import Client, Problem
from contextview.sdk._spool import read_dead_letters
from tests.sdk.conftest import mock_clients
from tests.sdk.test_runs import SYS, ResolvingServer, _tool

Message = dict[str, Any]


class StandIn(ResolvingServer):
    """`fail(batch)` may answer a request before the resolving server sees it."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[dict[str, Any]]] = []
        self.fail: Callable[[list[dict[str, Any]]], httpx.Response | None] = lambda b: None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        raw = request.content
        if request.headers.get("content-encoding") == "gzip":
            raw = gzip.decompress(raw)
        batch = json.loads(raw)["batch"]
        with self.lock:
            self.batches.append(batch)
        answer = self.fail(batch)
        return answer if answer is not None else super().__call__(request)


def poisoned(event: dict[str, Any]) -> bool:
    return event["type"] == "step" and event["body"].get("reason") == "poison"


def five_hundred_on_poison(batch: list[dict[str, Any]]) -> httpx.Response | None:
    if any(map(poisoned, batch)):
        return httpx.Response(500, text="<h1>Server Error (500)</h1>")
    return None


@pytest.fixture
def server() -> StandIn:
    return StandIn()


@pytest.fixture
def make(server: StandIn) -> Iterator[Callable[..., Client]]:
    yield from mock_clients(server, gzip=False, backoff_base=0.05, backoff_max=0.2)


def record_two_sessions(client: Client, *, poison_at: int, steps: int = 8) -> dict[str, list[Any]]:
    """Sessions "a" (its step `poison_at` marked) and "b", step by step in turn."""
    sessions = {sid: client.session(sid) for sid in ("a", "b")}
    contexts: dict[str, list[Any]] = {"a": [], "b": []}
    for n in range(steps):
        for sid, session in sessions.items():
            context = [SYS, *(_tool(k) for k in range(n + 1))]
            reason = "poison" if sid == "a" and n == poison_at else None
            session.record_step(context, reason=reason)
            contexts[sid].append(context)
    return contexts


def test_it_splits_a_batch_the_server_fails_on_until_the_event_at_fault_stands_alone(
    server: StandIn, make: Callable[..., Client], tmp_path: Path
) -> None:
    server.fail = five_hundred_on_poison
    problems: list[Problem] = []
    client = make(spool_dir=tmp_path, flush_interval=0.5, on_error=problems.append)
    contexts = record_two_sessions(client, poison_at=2)
    assert client.flush(10), client.stats

    # Every other step is stored as the agent had it, a's later steps included.
    stored = {sid: [server.contexts.get((sid, n)) for n in range(8)] for sid in ("a", "b")}
    assert stored["b"] == contexts["b"]
    assert stored["a"] == [c if n != 2 else None for n, c in enumerate(contexts["a"])]
    # The event at fault, alone and set aside, reported once.
    dead = read_dead_letters(tmp_path)
    assert dead.count == 1 and dead.last is not None
    assert (dead.last["status"], dead.last["session_id"]) == (500, "a")
    assert dead.last["event"]["body"]["index"] == 2
    assert dead.last["event"]["body"]["obs"]["messages"] == contexts["a"][2]  # in full
    assert [(p.kind, p.status, p.event_id) for p in problems] == [
        ("rejected", 500, dead.last["event_id"])
    ]
    assert problems[0].dead_letter == str(tmp_path / "dead-letter.jsonl")
    stats = client.stats
    assert stats["rejected"] == stats["dead_lettered"] == 1 and stats["splits"] >= 1
    # Found by halving, not by sending the events one by one; the server was asked,
    # with an empty batch, whether it fails on everything before the event was set aside.
    events = sum(len(b) for b in server.batches if not any(map(poisoned, b)))
    assert len(server.batches) < 2 * math.log2(events) + 8, [len(b) for b in server.batches]
    assert [] in server.batches


def test_it_waits_out_a_server_that_fails_on_everything_and_sets_nothing_aside(
    server: StandIn, make: Callable[..., Client], tmp_path: Path
) -> None:
    # A database outage: every request answers 500, an empty batch too.
    healthy = threading.Event()
    server.fail = lambda batch: None if healthy.is_set() else httpx.Response(500, text="down")
    client = make(spool_dir=tmp_path, flush_interval=0.3)
    contexts = record_two_sessions(client, poison_at=-1, steps=5)
    time.sleep(1.5)
    assert client.stats["sent"] == 0
    healthy.set()
    assert client.flush(10), client.stats

    for sid in ("a", "b"):
        assert [server.contexts[(sid, n)] for n in range(5)] == contexts[sid]
    assert client.stats["rejected"] == client.stats["dropped"] == 0
    assert read_dead_letters(tmp_path).count == 0
    # Waiting backed off: a few dozen requests in 1.5 s, not a busy loop.
    assert len(server.batches) < 60


def test_a_batch_too_big_for_the_server_goes_again_in_smaller_batches(
    server: StandIn, make: Callable[..., Client]
) -> None:
    server.fail = lambda batch: (
        httpx.Response(413, json={"error": "batch: over 3 events"}) if len(batch) > 3 else None
    )
    client = make(flush_interval=0.5)
    contexts = record_two_sessions(client, poison_at=-1, steps=6)
    assert client.flush(10), client.stats

    for sid in ("a", "b"):
        assert [server.contexts[(sid, n)] for n in range(6)] == contexts[sid]
    assert client.stats["rejected"] == client.stats["dropped"] == 0
    assert client.stats["splits"] >= 1


def test_a_batch_that_keeps_timing_out_while_the_server_answers_is_split_too(
    server: StandIn, make: Callable[..., Client], tmp_path: Path
) -> None:
    # A worker that dies on one event: the gateway answers a timeout, again and again.
    def time_out_on_poison(batch: list[dict[str, Any]]) -> httpx.Response | None:
        if any(map(poisoned, batch)):
            raise httpx.ReadTimeout("timed out")
        return None

    server.fail = time_out_on_poison
    problems: list[Problem] = []
    client = make(spool_dir=tmp_path, flush_interval=0.5, on_error=problems.append)
    contexts = record_two_sessions(client, poison_at=1, steps=4)
    assert client.flush(15), client.stats

    assert [server.contexts.get(("b", n)) for n in range(4)] == contexts["b"]
    assert [server.contexts.get(("a", n)) for n in range(4)] == [
        c if n != 1 else None for n, c in enumerate(contexts["a"])
    ]
    assert [(p.kind, p.status) for p in problems] == [("rejected", 500)]
    assert "ReadTimeout" in problems[0].detail
    assert read_dead_letters(tmp_path).count == 1


def test_events_spooled_through_an_outage_are_split_and_set_aside_the_same_way(
    server: StandIn, make: Callable[..., Client], tmp_path: Path
) -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    first = Client(
        "http://cv.test", "k", transport=httpx.MockTransport(down), spool_dir=tmp_path,
        flush_interval=0.02, backoff_base=0.05, backoff_max=0.1, max_buffer_events=3,
    )  # fmt: skip
    contexts = record_two_sessions(first, poison_at=3, steps=6)
    first.close(timeout=0.5)
    assert first.stats["sent"] == 0 and first.stats["rejected"] == 0
    assert list(tmp_path.glob("seg-*.jsonl"))

    # The next process sends the spool to a server that fails on the marked step.
    server.fail = five_hundred_on_poison
    problems: list[Problem] = []
    second = make(spool_dir=tmp_path, on_error=problems.append)
    second.session("c").record_step([SYS])
    assert second.flush(10), second.stats

    assert [server.contexts.get(("b", n)) for n in range(6)] == contexts["b"]
    assert [server.contexts.get(("a", n)) for n in range(6)] == [
        c if n != 3 else None for n, c in enumerate(contexts["a"])
    ]
    dead = read_dead_letters(tmp_path)
    assert dead.count == 1 and dead.last is not None
    assert dead.last["event"]["body"]["index"] == 3
    assert [p.event_id for p in problems] == [dead.last["event_id"]]
    assert not list(tmp_path.glob("seg-*.jsonl"))
