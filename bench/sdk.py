"""SDK benchmark: what a hook costs the agent's step, and what a session costs on the wire.

    python -m bench.sdk [--url http://127.0.0.1:8000 --key cv_...] [--steps 1000]
        [--context 100] [--think-ms 2] [--json]

Three measurements:

- **hook time**: wall time of `Session.record_step` (capturing contents, the
  default, and copying the message dicts) on the agent's thread for a
  context of `--context` messages (each step adds a tool result and drops the
  oldest message), p50 / p99 over `--steps` steps; and the time `watch_manager`
  adds to a seed 000 ContextManager's ``step`` + ``execute`` (median with the
  hook minus median without), for each way of capturing a context: contents
  (the default), whole message copies, and shared dicts. The agent "thinks"
  `--think-ms` between steps, as an agent waiting for its model does, which is
  when the SDK's thread works.
- **bytes**: the 1,000-step session of ``bench.ingest_gen`` (1-4 KB tool
  results, compactions every time the context reaches its cap) sent through
  `record_step` with gzip off, against the distinct message content it carries
  and against resending every message in full at every step; for contexts of
  up to 100, 200 and 400 messages (``--bytes-contexts``). Also what the id-alone
  references alone cost.
- **gzip**: the same session with gzip on.

Without ``--url`` the server is an in-process fake that answers 207 at once
(so only the SDK is measured); with ``--url`` and ``--key`` (loopback hosts
only) the sessions go to that server too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx

from bench.ingest import is_loopback_host, percentile
from bench.ingest_gen import distinct_content_bytes, long_session
from contextview.demo.fleet import ContextAction, ContextManager
from contextview.sdk import Client
from contextview.sdk._wire import encode_json
from contextview.sdk.hooks import watch_manager


class FakeIngest:
    """Answers every ingest with 201 per event; keeps the events it was sent."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        raw = request.content
        if request.headers.get("content-encoding") == "gzip":
            raw = gzip.decompress(raw)
        batch = json.loads(raw)["batch"]
        self.events.extend(batch)
        results = [{"id": e["id"], "status": 201} for e in batch]
        return httpx.Response(207, json={"results": results, "directives": []})


def make_client(args: argparse.Namespace, fake: FakeIngest, **options: Any) -> Client:
    options.setdefault("poll_interval", 0)
    if args.url:
        return Client(args.url, args.key, **options)
    return Client("http://bench.invalid", "bench", transport=httpx.MockTransport(fake), **options)


def _tool(n: int) -> dict[str, Any]:
    text = f"2026-01-01T02:20:{n % 60:02d}Z WARN [inventory-svc] reserve order=SO2026{n:07d} "
    return {"id": f"t{n}", "role": "tool", "tool": "grep", "content": text * 20}


def hook_time(args: argparse.Namespace, prefix: str, capture: str = "content") -> dict[str, Any]:
    """record_step on a context of `args.context` messages, each step one in, one out."""
    fake = FakeIngest()
    client = make_client(args, fake)
    session = client.session(f"{prefix}-latency-{capture}", agent="bench-sdk")
    context = [{"id": "sys", "role": "system", "content": "You are an operations agent."}]
    context += [_tool(n) for n in range(args.context - 1)]
    timings: list[float] = []
    cpu: list[float] = []
    think = args.think_ms / 1000
    for n in range(args.steps):
        context = context[:1] + context[2:] + [_tool(args.context + n)]
        started, started_cpu = time.perf_counter(), time.thread_time()
        session.record_step(context, capture=capture)
        timings.append((time.perf_counter() - started) * 1e6)
        cpu.append((time.thread_time() - started_cpu) * 1e6)
        if think:
            time.sleep(think)
    session.end("succeeded")
    delivered = client.flush(120)
    client.close()
    return {
        "capture": capture,
        "context_messages": len(context),
        "steps": args.steps,
        "p50_us": round(percentile(timings, 50) or 0, 1),
        "p99_us": round(percentile(timings, 99) or 0, 1),
        # CPU time of the agent's thread: the same work, without what a busy
        # machine adds (another process or the SDK's own thread holding the CPU).
        "cpu_p50_us": round(percentile(cpu, 50) or 0, 1),
        "delivered": delivered,
        "stats": client.stats,
    }


def manager_hook_time(
    args: argparse.Namespace, prefix: str, capture: str = "content"
) -> dict[str, Any]:
    """What watch_manager adds to a seed 000 ContextManager's step + execute.

    Two managers, one watched, take turns step by step, so that whatever else
    the machine does weighs on both alike.
    """

    def policy(obs: dict[str, Any]) -> ContextAction:
        # Keeps the context at its size the way a manager does: inside execute().
        return ContextAction("drop", obs["active_context"][0]["id"], {"reason": "oldest"})

    def manager() -> ContextManager:
        cm = ContextManager(
            policy=policy,
            summarizer=lambda ms: "",
            estimate_tokens=lambda text: 1,  # the agent's own cost out of the way
            max_tokens=10**9,
        )
        cm.active_context = [_tool(n) for n in range(args.context)]
        return cm

    fake = FakeIngest()
    client = make_client(args, fake)
    plain, hooked = manager(), manager()
    session = client.session(f"{prefix}-manager-{capture}", agent="bench-sdk")
    watch_manager(hooked, session, capture=capture)
    wall: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for n in range(args.steps):
        for watched, cm in ((False, plain), (True, hooked)):
            started, started_cpu = time.perf_counter(), time.thread_time()
            cm.execute(cm.step(_tool(args.context + n)))
            wall[watched].append((time.perf_counter() - started) * 1e6)
            cpu[watched].append((time.thread_time() - started_cpu) * 1e6)
            if args.think_ms:
                time.sleep(args.think_ms / 1000)
    client.flush(120)
    client.close()
    median = statistics.median
    return {
        "capture": capture,
        "without_p50_us": round(median(wall[False]), 1),
        "with_p50_us": round(median(wall[True]), 1),
        "added_p50_us": round(median(wall[True]) - median(wall[False]), 1),
        "added_cpu_p50_us": round(median(cpu[True]) - median(cpu[False]), 1),
    }


def _ops(body: dict[str, Any]) -> list[dict[str, Any]] | None:
    if "actions" in body:
        return body["actions"]
    return [body["action"]] if "action" in body else None


def session_bytes(
    args: argparse.Namespace, prefix: str, max_context: int, gzip_on: bool
) -> dict[str, Any]:
    """The ingest_gen session through record_step: bytes on the wire vs distinct content."""
    sid = f"{prefix}-bytes-{max_context}-{'gz' if gzip_on else 'raw'}"
    full = list(long_session(sid, steps=1000, max_context=max_context, by_id=False))
    fake = FakeIngest()
    client = make_client(args, fake, gzip=gzip_on)
    session = client.session(sid, agent="bench-sdk")
    started = time.perf_counter()
    for event in full:
        body = event["body"]
        session.record_step(
            body["obs"]["messages"],
            ops=_ops(body),
            before_tokens=body.get("before_tokens"),
            after_tokens=body.get("after_tokens"),
        )
    session.end("succeeded")
    delivered = client.flush(300)
    client.close()
    elapsed = time.perf_counter() - started
    distinct = distinct_content_bytes(full)
    resend = sum(len(encode_json(e)) for e in full)
    stats = client.stats
    out: dict[str, Any] = {
        "max_context": max_context,
        "gzip": gzip_on,
        "distinct_content_bytes": distinct,
        "sdk_bytes": stats["bytes_sent"],
        "sdk_ratio": round(stats["bytes_sent"] / distinct, 3),
        "resend_all_bytes": resend,
        "resend_all_ratio": round(resend / distinct, 1),
        "delivered": delivered,
        "rejected": stats["rejected"],
        "seconds": round(elapsed, 2),
    }
    if not args.url and not gzip_on:
        # What the id-alone references cost, and what is left without them.
        steps = [e["body"] for e in fake.events if e["type"] == "step"]
        refs = sum(
            len(encode_json(m)) + 1 for s in steps for m in s["obs"]["messages"] if len(m) == 1
        )
        out["id_reference_bytes"] = refs
        out["ratio_without_references"] = round((stats["bytes_sent"] - refs) / distinct, 3)
    return out


def _caps(text: str) -> tuple[int, ...]:
    try:
        caps = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of numbers: {text!r}"
        ) from None
    if not caps or min(caps) < 20:
        raise argparse.ArgumentTypeError("each context cap must be at least 20 messages")
    return caps


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.sdk", description=__doc__.split("\n")[0])
    parser.add_argument("--url", default=None, help="a contextview server (loopback only)")
    parser.add_argument("--key", default=None, help="a project key that may ingest")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--context", type=int, default=100, help="messages in the hook context")
    parser.add_argument("--think-ms", type=float, default=2.0, help="agent time between steps")
    parser.add_argument(
        "--bytes-contexts",
        type=_caps,
        default=(100, 200, 400),
        metavar="N,N,..",
        help="message caps of the bytes sessions (default 100,200,400)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line only")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.url:
        if not args.key:
            print("--url needs --key", file=sys.stderr)
            return 2
        if not is_loopback_host(urlsplit(args.url).hostname):
            print("refusing a server that is not on this machine", file=sys.stderr)
            return 2
    prefix = f"bench-sdk-{int(time.time())}"
    results: dict[str, Any] = {
        "hook_time": [hook_time(args, prefix, capture) for capture in ("content", "copy")],
        "manager_hook_time": [
            manager_hook_time(args, prefix, capture) for capture in ("content", "copy", "shared")
        ],
        "bytes": [session_bytes(args, prefix, cap, False) for cap in args.bytes_contexts],
        "bytes_gzip": session_bytes(args, prefix, 100, True),
    }
    if not args.json:
        _print_table(results)
    print(json.dumps(results))
    return 0


def _print_table(results: dict[str, Any]) -> None:
    line: Callable[..., None] = print
    for hook in results["hook_time"]:
        line(
            f"record_step(capture={hook['capture']!r}), {hook['context_messages']}-message "
            f"context, {hook['steps']} steps: p50 {hook['p50_us']} µs, p99 {hook['p99_us']} µs "
            f"(thread CPU p50 {hook['cpu_p50_us']} µs)"
        )
    for manager in results["manager_hook_time"]:
        line(
            f"watch_manager(capture={manager['capture']!r}) on step+execute: "
            f"{manager['without_p50_us']} → {manager['with_p50_us']} µs "
            f"(p50 added {manager['added_p50_us']} µs, "
            f"thread CPU {manager['added_cpu_p50_us']} µs)"
        )
    for row in results["bytes"] + [results["bytes_gzip"]]:
        extra = ""
        if "id_reference_bytes" in row:
            extra = (
                f"; id references {row['id_reference_bytes']:,} B, "
                f"{row['ratio_without_references']}x without them"
            )
        line(
            f"1000 steps, context ≤ {row['max_context']}, gzip {'on' if row['gzip'] else 'off'}: "
            f"SDK {row['sdk_bytes']:,} B = {row['sdk_ratio']}x distinct "
            f"({row['distinct_content_bytes']:,} B); resend-all {row['resend_all_ratio']}x" + extra
        )


if __name__ == "__main__":
    sys.exit(main())
