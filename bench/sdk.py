"""SDK benchmark: what a hook costs the agent's step, and what a session costs on the wire.

    python -m bench.sdk [--url http://127.0.0.1:8000 --key cv_...] [--steps 1000]
        [--context 100] [--think-ms 2] [--repeat 1] [--bytes-contexts 100,200,400] [--json]

Three measurements:

- **hook time**: wall time of `Session.record_step` (capturing contents, the
  default, and copying the message dicts) on the agent's thread for a
  context of `--context` messages (each step adds a tool result and drops the
  oldest message), p50 / p99 over `--steps` steps; and the time `watch_manager`
  adds to a seed 000 ContextManager's ``step`` + ``execute`` (median with the
  hook minus median without), for each way of capturing a context: contents
  (the default), whole message copies, and shared dicts; and what the seed 001,
  002 and 003 hooks add to a build or an edit pass of as many messages. The agent "thinks"
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
from contextview.demo.fleet import (
    ContextAction,
    ContextBuilder,
    ContextManager,
    ContextModeManager,
    MessageStore,
    SlidingPolicy,
    estimate_tokens,
)
from contextview.sdk import Client, apply_edits
from contextview.sdk._wire import encode_json
from contextview.sdk.hooks import EditHook, watch_builder, watch_manager, wrap_build


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
        "rejected": client.stats["rejected"],
        "p50_us": round(percentile(timings, 50) or 0, 1),
        "p99_us": round(percentile(timings, 99) or 0, 1),
        # CPU time of the agent's thread: the same work, without what a busy
        # machine adds (another process or the SDK's own thread holding the CPU).
        "cpu_p50_us": round(percentile(cpu, 50) or 0, 1),
        "delivered": delivered,
        "stats": client.stats,
    }


StepFn = Callable[[int], Any]


def added_time(
    args: argparse.Namespace,
    hook: str,
    plain: StepFn,
    hooked: StepFn,
    client: Client,
    between: Callable[[], Any] | None = None,
) -> dict[str, Any]:
    """What a hook adds to an agent's step: `plain(n)` and `hooked(n)` take turns.

    Both do the same agent work, one with the hook on; taking turns step by step,
    whatever else the machine does weighs on both alike. The figure is the median
    with the hook minus the median without, in wall time and in the thread's CPU.
    `between` runs after each step, untimed (the agent's own time between steps).
    """
    wall: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for n in range(args.steps):
        for watched, step in ((False, plain), (True, hooked)):
            started, started_cpu = time.perf_counter(), time.thread_time()
            step(n)
            wall[watched].append((time.perf_counter() - started) * 1e6)
            cpu[watched].append((time.thread_time() - started_cpu) * 1e6)
            if between is not None:
                between()
            if args.think_ms:
                time.sleep(args.think_ms / 1000)
    client.flush(120)
    client.close()
    median = statistics.median
    return {
        "hook": hook,
        "without_p50_us": round(median(wall[False]), 1),
        "with_p50_us": round(median(wall[True]), 1),
        "added_p50_us": round(median(wall[True]) - median(wall[False]), 1),
        "added_cpu_p50_us": round(median(cpu[True]) - median(cpu[False]), 1),
        "rejected": client.stats["rejected"],
    }


def manager_hook_time(
    args: argparse.Namespace, prefix: str, capture: str = "content"
) -> dict[str, Any]:
    """Seed 000: what watch_manager adds to a ContextManager's step + execute."""

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

    client = make_client(args, FakeIngest())
    plain, hooked = manager(), manager()
    session = client.session(f"{prefix}-manager-{capture}", agent="bench-sdk")
    watch_manager(hooked, session, capture=capture)

    def step(cm: ContextManager) -> StepFn:
        return lambda n: cm.execute(cm.step(_tool(args.context + n)))

    return added_time(
        args, f"watch_manager(capture={capture!r})", step(plain), step(hooked), client
    )


def _chat(n: int) -> dict[str, Any]:
    role = "user" if n % 2 == 0 else "assistant"
    text = f"turn {n}: where is order SO2026{n:07d}, member id A12345? "
    return {"id": f"m{n}", "role": role, "content": text * 6, "scope": "chat"}


def modes_hook_time(args: argparse.Namespace, prefix: str) -> dict[str, Any]:
    """Seed 001: what wrap_build adds to a sliding-mode build of `--context` messages.

    The store grows by a turn per build (starting at ten times the window), as a
    long chat does; the mode builds the system message and the last turns.
    """
    client = make_client(args, FakeIngest())
    stores: list[MessageStore] = []
    builds: list[StepFn] = []
    for watched in (False, True):
        manager = ContextModeManager(10**9, {"sliding": SlidingPolicy(args.context // 2)})
        system = {"id": "sys", "role": "system", "content": "You help.", "scope": "system"}
        store = MessageStore(
            messages=[system] + [_chat(k) for k in range(10 * args.context)],
            immutable_items=["member id A12345"],
        )
        if watched:
            wrap_build(manager, client.session(f"{prefix}-modes", agent="bench-sdk"))
        stores.append(store)

        def build(n: int, manager: Any = manager, store: MessageStore = store) -> Any:
            store.messages.append(_chat(10 * args.context + n))
            return manager.build("sliding", store, "where is my order?")

        builds.append(build)
    return added_time(args, "wrap_build (seed 001, sliding)", builds[0], builds[1], client)


def builder_hook_time(args: argparse.Namespace, prefix: str) -> dict[str, Any]:
    """Seed 002: what watch_builder adds to a build of `--context` messages, degrading.

    Six blocks, retrieval a list of passages (one message each); the budget is
    small enough that every build runs the degradation order.
    """
    client = make_client(args, FakeIngest())
    builds: list[StepFn] = []
    passages = [f"passage {k} on order SO2026{k:07d} " * 5 for k in range(args.context - 5)]
    for watched in (False, True):
        builder = ContextBuilder(estimate_tokens, budget=2000)
        if watched:
            session = client.session(f"{prefix}-builder", agent="bench-sdk")
            watch_builder(builder, session, partition_budgets={"tool": 600, "retrieval": 800})

        def build(n: int, builder: ContextBuilder = builder) -> Any:
            return builder.build(
                "You audit orders.",
                "Find the stalled orders.",
                "CS-1042 is open\nSO20260101007 stalled at the Wuhan hub",
                f"query_orders #{n}: " + "row " * 100,
                passages,
                f"What happened to order {n}?",
            )

        builds.append(build)
    return added_time(args, "watch_builder (seed 002)", builds[0], builds[1], client)


def edits_hook_time(args: argparse.Namespace, prefix: str) -> dict[str, Any]:
    """Seed 003: what EditHook.apply adds to applying one edit to `--context` messages.

    Applying edits copies the messages; the context a step replaced is released
    between steps, for both agents: the hook keeps it until the SDK's thread has
    read it, and its release would otherwise count as time the hook saves.
    """
    client = make_client(args, FakeIngest())
    hook = EditHook(client.session(f"{prefix}-edits", agent="bench-sdk"))
    contexts = [[_tool(k) for k in range(args.context)] for _ in range(2)]
    replaced: list[Any] = []

    def edited(which: int, apply: Callable[..., list[Any]]) -> StepFn:
        def step(n: int) -> None:
            context = contexts[which] + [_tool(args.context + n)]
            oldest = context[0]["id"]
            edits = [{"ids": [oldest], "justification": "stale", "new_content": ""}]
            replaced.append(contexts[which])
            contexts[which] = apply(context, edits)

        return step

    return added_time(
        args,
        "EditHook.apply (seed 003)",
        edited(0, apply_edits),
        edited(1, hook.apply),
        client,
        between=replaced.clear,
    )


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
    parser.add_argument("--steps", type=int, default=1000, help="steps per measurement")
    parser.add_argument("--context", type=int, default=100, help="messages in the hook context")
    parser.add_argument("--think-ms", type=float, default=2.0, help="agent time between steps")
    parser.add_argument(
        "--bytes-contexts",
        type=_caps,
        default=(100, 200, 400),
        metavar="N,N,..",
        help="message caps of the bytes sessions (default 100,200,400)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure the hooks this many times and report the median run (default 1)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON line only")
    return parser


Rows = list[dict[str, Any]]


def _hook_rows(args: argparse.Namespace, prefix: str) -> tuple[Rows, Rows]:
    """record_step's time, and what each hook adds, measured once."""
    return (
        [hook_time(args, prefix, capture) for capture in ("content", "copy")],
        [
            *(manager_hook_time(args, prefix, how) for how in ("content", "copy", "shared")),
            modes_hook_time(args, prefix),
            builder_hook_time(args, prefix),
            edits_hook_time(args, prefix),
        ],
    )


def _median_run(rows: Rows, key: str) -> dict[str, Any]:
    """The row whose `key` is the median of the runs, with every run's figure."""
    ordered = sorted(rows, key=lambda row: float(row[key]))
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    chosen["runs"] = [row[key] for row in rows]
    return chosen


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
    # Each repetition measures every hook once, so that a slow spell of the machine
    # weighs on all of them; each row is then the run with the median figure.
    repeats = [_hook_rows(args, f"{prefix}-r{k}") for k in range(args.repeat)]
    results: dict[str, Any] = {
        "hook_time": [
            _median_run([r[0][i] for r in repeats], "p50_us") for i in range(len(repeats[0][0]))
        ],
        "hooks_time": [
            _median_run([r[1][i] for r in repeats], "added_p50_us")
            for i in range(len(repeats[0][1]))
        ],
        "bytes": [session_bytes(args, prefix, cap, False) for cap in args.bytes_contexts],
        "bytes_gzip": session_bytes(args, prefix, 100, True),
    }
    if not args.json:
        _print_table(results)
    print(json.dumps(results))
    rejected = [
        row.get("hook") or row.get("capture") or f"bytes {row['max_context']}"
        for row in [*results["hook_time"], *results["hooks_time"], *results["bytes"]]
        if (row.get("rejected") or row.get("stats", {}).get("rejected"))
    ]
    if rejected:
        print(f"the server refused events of: {', '.join(rejected)}", file=sys.stderr)
        return 1
    return 0


def _runs(row: dict[str, Any]) -> str:
    runs = row.get("runs") or []
    return f" [median of {len(runs)} runs: {', '.join(map(str, runs))}]" if len(runs) > 1 else ""


def _print_table(results: dict[str, Any]) -> None:
    line: Callable[..., None] = print
    for hook in results["hook_time"]:
        line(
            f"record_step(capture={hook['capture']!r}), {hook['context_messages']}-message "
            f"context, {hook['steps']} steps: p50 {hook['p50_us']} µs, p99 {hook['p99_us']} µs "
            f"(thread CPU p50 {hook['cpu_p50_us']} µs)" + _runs(hook)
        )
    for hook in results["hooks_time"]:
        line(
            f"{hook['hook']}: step {hook['without_p50_us']} → {hook['with_p50_us']} µs "
            f"(p50 added {hook['added_p50_us']} µs, thread CPU {hook['added_cpu_p50_us']} µs)"
            + _runs(hook)
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
            f"({row['distinct_content_bytes']:,} B); resend-all {row['resend_all_ratio']}x; "
            f"recorded and sent in {row['seconds']} s" + extra
        )


if __name__ == "__main__":
    sys.exit(main())
