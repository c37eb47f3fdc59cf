"""OTLP benchmark: an agent that resends its growing context on every call, traced with
the GenAI semantic conventions and sent by the official OTLP/HTTP exporter.

    python -m bench.otlp --url http://127.0.0.1:8000 --key cv_... \\
        --database-url postgres://... [--sessions 4] [--calls 300] [--batch 100]

Each session starts with a context of --context messages (a system prompt, then
user, assistant and tool messages of 100 B to 3 KB) and every call adds the
previous reply and a tool result; every --compact-every calls the agent compacts:
the oldest half of its history becomes one summary message (and the call reports
``gen_ai.conversation.compacted``). Each session is an agent in a process of its
own, as separate agents are (threads of one process would wait on each other's
encoding, which holds the interpreter: a limit of the client, not of the server).
It makes its spans with the OpenTelemetry SDK before the clock starts, which also
waits for the server to answer (``/healthz``, then a few empty exports at once: a
server still starting is not measured); then every agent exports its calls in
order, in exports of --batch spans, through an ``OTLPSpanExporter`` of its own.

Reports spans accepted per second (the exports alone), spans per second end to end
(until every step's statistics are ready: run a worker), the p50/p99 latency of an
export, and how much the database grew (sum of pg_total_relation_size of the public
tables) per byte of distinct message content. Prints a table and one JSON line.

Only talks to the --url and --database-url given, and refuses hosts that are not
loopback. Every loop is bounded by --sessions x --calls and by --time-limit.
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import random
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit

import psycopg
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from bench.ingest import database_host, database_size, is_loopback_host, percentile

_WORDS = (
    "order inventory reservation timeout upstream gateway checkout retry latency pool "
    "connection index query customer parcel carrier tracking warehouse refund voucher "
    "schema migration deploy rollback replica shard cache eviction budget summary context"
).split()


def _text(rng: random.Random, low: int, high: int) -> str:
    target = rng.randint(low, high)
    words: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(_WORDS)
        if rng.random() < 0.05:
            word = f"SO2026{rng.randint(10**6, 10**7 - 1)}"
        words.append(word)
        size += len(word) + 1
    return " ".join(words)


def _message(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "parts": [{"type": "text", "content": content}]}


def _tool_result(rng: random.Random, call: str) -> dict[str, Any]:
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": call, "response": _text(rng, 800, 3000)}],
    }


class Session:
    """One agent's calls: its context before each, as GenAI span attributes."""

    def __init__(self, name: str, args: argparse.Namespace, seed: int) -> None:
        self.name = name
        self.rng = random.Random(seed)
        self.args = args
        rng = self.rng
        self.system = _text(rng, 1500, 2500)
        self.history: list[dict[str, Any]] = [_message("user", _text(rng, 100, 400))]
        roles = ("assistant", "tool", "user")
        while len(self.history) < args.context - 1:
            role = roles[len(self.history) % 3]
            if role == "tool":
                self.history.append(_tool_result(rng, f"call-{len(self.history)}"))
            else:
                self.history.append(_message(role, _text(rng, 100, 400)))
        self.distinct: dict[str, int] = {}
        self._count(_message("system", self.system))
        for m in self.history:
            self._count(m)

    def _count(self, message: dict[str, Any]) -> None:
        key = json.dumps(message, sort_keys=True)
        self.distinct.setdefault(key, len(key.encode()))

    def attributes(self, n: int) -> dict[str, Any]:
        rng, args = self.rng, self.args
        compacted = n > 0 and n % args.compact_every == 0
        if compacted:
            half = len(self.history) // 2
            summary = _message("user", "Summary of the earlier work: " + _text(rng, 600, 1200))
            self.history = [summary, *self.history[half:]]
            self._count(summary)
        reply = _text(rng, 100, 400)
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.conversation.id": self.name,
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": self.system}]),
            "gen_ai.input.messages": json.dumps(self.history),
            "gen_ai.output.messages": json.dumps([_message("assistant", reply)]),
            "gen_ai.usage.input_tokens": 30 * len(self.history),
            "gen_ai.usage.output_tokens": 80,
        }
        if compacted:
            attrs["gen_ai.conversation.compacted"] = True
        for message in (_message("assistant", reply), _tool_result(rng, f"call-{self.name}-{n}")):
            self.history.append(message)
            self._count(message)
        return attrs


def session_spans(args: argparse.Namespace, name: str, seed: int) -> tuple[list[ReadableSpan], int]:
    """One session's spans, in call order, and its distinct content bytes."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench.otlp")
    session = Session(name, args, seed)
    start = time.time_ns()
    for n in range(args.calls):
        at = start + n * 1_000_000_000
        tracer.start_span("chat gpt-4o", attributes=session.attributes(n), start_time=at).end(
            end_time=at + 500_000_000
        )
    spans = list(memory.get_finished_spans())
    provider.shutdown()
    return spans, sum(session.distinct.values())


def server_ready(url: str, key: str, callers: int, wait_s: float = 60.0) -> None:
    """Wait until the server answers: ``/healthz``, then `callers` empty exports at
    once, so web workers that are still starting (importing the URLconf) are not
    what the clock measures. Empty exports store nothing."""
    base = url.rstrip("/")
    deadline = time.monotonic() + wait_s

    def answered(request: urllib.request.Request) -> bool:
        while True:
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    return bool(response.status == 200)
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.2)

    if not answered(urllib.request.Request(f"{base}/healthz")):
        raise SystemExit(f"{base}/healthz did not answer 200 within {wait_s:.0f} s")
    empty = urllib.request.Request(
        f"{base}/v1/traces",
        data=b"",
        method="POST",
        headers={"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {key}"},
    )
    with ThreadPoolExecutor(max_workers=callers) as pool:
        if not all(pool.map(lambda _: answered(empty), range(callers))):
            raise SystemExit(f"{base}/v1/traces did not take an empty export")


def export_session(
    exporter: OTLPSpanExporter, spans: list[ReadableSpan], batch: int, deadline: float
) -> tuple[int, int, list[float]]:
    sent = failed = 0
    latencies: list[float] = []
    for i in range(0, len(spans), batch):
        if time.monotonic() > deadline:
            break
        group = spans[i : i + batch]
        started = time.perf_counter()
        result = exporter.export(group)
        latencies.append((time.perf_counter() - started) * 1000)
        if result is SpanExportResult.SUCCESS:
            sent += len(group)
        else:
            failed += len(group)
    return sent, failed, latencies


def steps_ready(database_url: str, session_ids: list[str]) -> tuple[int, int]:
    with psycopg.connect(database_url, connect_timeout=10) as connection:
        row = connection.execute(
            "SELECT count(*) FILTER (WHERE t.status = 'ready'), count(*) FROM cv_step st "
            "JOIN cv_session s ON s.id = st.session_id "
            "LEFT JOIN cv_step_stats t ON t.step_id = st.id WHERE s.external_id = ANY(%s)",
            [session_ids],
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


class _Retries(logging.Handler):
    """Counts the exporter's retries (after a 429, a 503 or a lost connection)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "retrying" in record.getMessage():
            self.count += 1


# How long the agents wait for each other to be ready.
_READY_S = 120.0


def _agent(
    index: int, name: str, args: argparse.Namespace, deadline: float, start_line: Any, out: Any
) -> None:
    """One agent, in a process of its own: makes its session's spans, then, once every
    agent is ready, sends them through an exporter of its own; (sent, failed,
    latencies, retries, distinct content bytes) go to `out`, whatever happens."""
    retries = _Retries()
    logging.getLogger("opentelemetry").addHandler(retries)
    result: tuple[int, int, list[float], int, int] = (0, args.calls, [], 0, 0)
    try:
        spans, distinct = session_spans(args, name, args.seed + index)
        exporter = OTLPSpanExporter(
            endpoint=f"{args.url.rstrip('/')}/v1/traces",
            headers={"Authorization": f"Bearer {args.key}"},
            timeout=args.export_timeout,
        )
        start_line.wait(timeout=_READY_S)
        sent, failed, latencies = export_session(exporter, spans, args.batch, deadline)
        exporter.shutdown()
        result = (sent, failed, latencies, retries.count, distinct)
    except BaseException:
        start_line.abort()  # the others go, and the run reports this one's calls failed
        raise
    finally:
        out.put(result)


def run(args: argparse.Namespace) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:8]
    session_ids = [f"bench-otlp-{run_id}-{i}" for i in range(args.sessions)]
    size_before = database_size(args.database_url)
    server_ready(args.url, args.key, 2 * args.sessions)
    deadline = time.monotonic() + args.time_limit
    context = multiprocessing.get_context("fork")
    start_line = context.Barrier(args.sessions + 1)
    out = context.SimpleQueue()
    agents = [
        context.Process(target=_agent, args=(i, name, args, deadline, start_line, out))
        for i, name in enumerate(session_ids)
    ]
    for agent in agents:
        agent.start()
    with suppress(threading.BrokenBarrierError):
        start_line.wait(timeout=_READY_S)
    started = time.monotonic()
    done = [out.get() for _ in agents]
    exported_s = time.monotonic() - started
    for agent in agents:
        agent.join()
    distinct = sum(d[4] for d in done)
    sent = sum(d[0] for d in done)
    failed = sum(d[1] for d in done)
    latencies = [ms for d in done for ms in d[2]]
    ready = total = 0
    while sent and time.monotonic() < deadline:
        ready, total = steps_ready(args.database_url, session_ids)
        if total and ready >= total:
            break
        time.sleep(0.2)
    ready_s = time.monotonic() - started
    growth = database_size(args.database_url) - size_before
    return {
        "sessions": args.sessions,
        "calls": args.calls,
        "batch": args.batch,
        "spans_sent": sent,
        "spans_failed": failed,
        "export_retries": sum(d[3] for d in done),
        "steps_stored": total,
        "steps_ready": ready,
        "export_s": round(exported_s, 2),
        "spans_per_s": round(sent / exported_s, 1) if exported_s else None,
        "end_to_end_s": round(ready_s, 2),
        "end_to_end_spans_per_s": round(ready / ready_s, 1) if ready_s and ready else None,
        "export_p50_ms": _round(percentile(latencies, 50)),
        "export_p99_ms": _round(percentile(latencies, 99)),
        "distinct_content_bytes": distinct,
        "db_growth_bytes": growth,
        "db_growth_per_distinct_byte": round(growth / distinct, 2) if distinct else None,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.otlp", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--url", required=True, help="contextview base URL (loopback only)")
    parser.add_argument("--key", required=True, help="a project key allowed to write")
    parser.add_argument("--database-url", required=True, help="the server's database (loopback)")
    parser.add_argument("--sessions", type=int, default=4, help="agents (2 to 8)")
    parser.add_argument("--calls", type=int, default=300, help="calls per session (200 to 500)")
    parser.add_argument("--context", type=int, default=100, help="messages a session starts with")
    parser.add_argument("--compact-every", type=int, default=25, help="calls between compactions")
    parser.add_argument("--batch", type=int, default=100, help="spans per export")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument(
        "--export-timeout", type=float, default=10.0, help="seconds per export (the SDK's)"
    )
    parser.add_argument("--time-limit", type=float, default=900.0, help="seconds in all")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 64 or not 1 <= args.calls <= 10_000:
        parser.error("--sessions must be 1..64 and --calls 1..10000")
    if not 2 <= args.context <= 1000 or not 1 <= args.batch <= 10_000:
        parser.error("--context must be 2..1000 and --batch 1..10000")
    if args.compact_every < 2:
        parser.error("--compact-every must be at least 2")
    if not is_loopback_host(urlsplit(args.url).hostname) or not is_loopback_host(
        database_host(args.database_url)
    ):
        parser.error("--url and --database-url must be on this machine")
    record = run(args)
    width = max(len(k) for k in record)
    for name, value in record.items():
        print(f"{name:<{width}}  {value}")
    print(json.dumps(record))
    return 0 if record["spans_failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
