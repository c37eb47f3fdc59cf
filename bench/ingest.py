"""Ingest benchmark: how fast a contextview server takes long sessions, and what they cost.

    python -m bench.ingest --url http://127.0.0.1:8000 --key cv_... \\
        [--sessions 4] [--steps 300] [--workers 2] [--mode both] \\
        [--database-url postgres://...]

For each mode (`by-id`: unchanged messages sent by id alone; `runs`: the last
step's after context as one run plus the new messages, the `$base` extension the
SDK uses; `full`: every message with its content at every step; `full-reverse` and
`full-shuffled`: the same, the steps posted last first or in a seeded random
order) it posts N generated sessions (bench/ingest_gen.py) in batches of up to 100
events, with W concurrent clients, one session per client at a time so a
session's steps arrive in the mode's order. It reports events accepted per
second and the p50/p99 latency of a batch; given --database-url, also how much
the public tables grew (sum of pg_total_relation_size) per accepted step and per
byte of distinct message content. Prints a table and then one JSON line.

Only talks to the --url and --database-url given, and refuses hosts that are
not loopback. Every loop is bounded by --sessions x --steps and by --time-limit.
"""

from __future__ import annotations

import argparse
import gzip
import ipaddress
import itertools
import json
import math
import random
import socket
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx
import psycopg
from psycopg.conninfo import conninfo_to_dict

from bench.ingest_gen import distinct_content_bytes, long_session, session_event
from contextview.demo.post import IngestError, post_body

# mode: (by_id, runs) for long_session
MODES = {
    "by-id": (True, False),
    "runs": (True, True),
    "full": (False, False),
    "full-reverse": (False, False),
    "full-shuffled": (False, False),
}
# Modes whose steps are posted out of order (full content: nothing refers to a step
# not yet sent): last step first, or in a seeded random order.
REORDERED = {"full-reverse", "full-shuffled"}
MODE_GROUPS = {
    "both": ["by-id", "full"],
    "all": ["by-id", "runs", "full"],
    "orders": ["full", "full-reverse", "full-shuffled"],
}
MAX_SESSIONS = 1000
MAX_STEPS = 100_000
MAX_WORKERS = 64

TABLE_SIZE_SQL = """
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm')
"""


@dataclass
class ModeStats:
    mode: str
    sessions: int = 0
    steps_sent: int = 0
    events_sent: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    batches: int = 0
    failed_batches: int = 0
    bytes_sent: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    steps_per_session: dict[str, int] = field(default_factory=dict)
    timed_out: bool = False
    wall_s: float = 0.0
    db_growth: int | None = None
    distinct_bytes: int = 0

    def merge(self, other: ModeStats) -> None:
        self.sessions += other.sessions
        self.steps_sent += other.steps_sent
        self.events_sent += other.events_sent
        self.statuses.update(other.statuses)
        self.batches += other.batches
        self.failed_batches += other.failed_batches
        self.bytes_sent += other.bytes_sent
        self.latencies_ms.extend(other.latencies_ms)
        self.errors.extend(other.errors[: 10 - len(self.errors)])
        self.steps_per_session.update(other.steps_per_session)
        self.timed_out = self.timed_out or other.timed_out

    @property
    def accepted(self) -> int:
        return self.statuses["201"] + self.statuses["200"]

    @property
    def rejected(self) -> int:
        return sum(n for status, n in self.statuses.items() if is_error(status))


def is_error(status: str) -> bool:
    return status.isdigit() and int(status) >= 400


class Aborted(RuntimeError):
    """Something no further request can fix (a bad key, a wrong URL)."""


def percentile(values: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def is_loopback_host(host: str | None) -> bool:
    if not host or host.startswith("/"):
        return True  # no host or a unix socket directory: this machine
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    return bool(infos) and all(
        ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos
    )


def database_size(database_url: str) -> int:
    with psycopg.connect(database_url, connect_timeout=10) as connection:
        row = connection.execute(TABLE_SIZE_SQL).fetchone()
    return int(row[0]) if row else 0


def database_host(database_url: str) -> str | None:
    host = conninfo_to_dict(database_url).get("host")
    return str(host) if host is not None else None


def batches(
    events: Iterator[dict[str, Any]], batch_size: int, max_body_bytes: int
) -> Iterator[tuple[list[dict[str, Any]], bytes]]:
    """Group events into envelopes of at most `batch_size` events and `max_body_bytes`.

    Each event is serialized once; an event larger than the limit goes alone (and
    the server answers 413, which is counted, not hidden).
    """
    group: list[dict[str, Any]] = []
    parts: list[bytes] = []
    size = len(b'{"batch":[]}')
    for event in events:
        part = json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()
        if group and (len(group) >= batch_size or size + len(part) + 1 > max_body_bytes):
            yield group, b'{"batch":[' + b",".join(parts) + b"]}"
            group, parts, size = [], [], len(b'{"batch":[]}')
        group.append(event)
        parts.append(part)
        size += len(part) + 1
    if group:
        yield group, b'{"batch":[' + b",".join(parts) + b"]}"


def prepare(
    args: argparse.Namespace, mode: str, session_ids: list[str]
) -> list[tuple[str, list[tuple[list[dict[str, Any]], bytes]]]]:
    """Generate and serialize every batch before the clock starts: the server is measured."""
    by_id, runs = MODES[mode]
    prepared = []
    for session_id in session_ids:
        steps: Iterable[dict[str, Any]] = long_session(
            session_id, args.steps, args.max_context, args.seed, by_id=by_id, runs=runs
        )
        if mode in REORDERED:
            steps = list(steps)
            if mode == "full-reverse":
                steps.reverse()
            else:
                random.Random(f"{args.seed}-{session_id}").shuffle(steps)
        events = itertools.chain([session_event(session_id, seed=args.seed, by_id=by_id)], steps)
        bodies = [
            (group, gzip.compress(body, compresslevel=5) if args.gzip else body)
            for group, body in batches(events, args.batch_size, args.max_body_bytes)
        ]
        prepared.append((session_id, bodies))
    return prepared


def run_worker(
    args: argparse.Namespace,
    mode: str,
    prepared: list[tuple[str, list[tuple[list[dict[str, Any]], bytes]]]],
    deadline: float,
) -> ModeStats:
    stats = ModeStats(mode)
    headers = {"Content-Type": "application/json"}
    if args.gzip:
        headers["Content-Encoding"] = "gzip"
    with httpx.Client(timeout=args.request_timeout) as client:
        for session_id, bodies in prepared:
            if time.monotonic() > deadline:
                stats.timed_out = True
                break
            stats.sessions += 1
            stats.steps_per_session[session_id] = 0
            for group, body in bodies:
                if time.monotonic() > deadline:
                    stats.timed_out = True
                    break
                started = time.perf_counter()
                try:
                    answer = post_body(client, args.url, args.key, body, headers)
                except IngestError as error:
                    if error.status in (401, 403, 404, 415):
                        raise Aborted(str(error)) from error
                    stats.failed_batches += 1
                    stats.statuses[str(error.status)] += len(group)
                    stats.errors.append(str(error))
                    continue
                except httpx.HTTPError as error:
                    raise Aborted(f"{type(error).__name__}: {error}") from error
                finally:
                    stats.latencies_ms.append((time.perf_counter() - started) * 1000)
                    stats.batches += 1
                    stats.bytes_sent += len(body)
                    stats.events_sent += len(group)
                steps = sum(1 for e in group if e["type"] == "step")
                stats.steps_sent += steps
                stats.steps_per_session[session_id] += steps
                for result in answer.get("results", []):
                    status = str(result.get("status"))
                    stats.statuses[status] += 1
                    if is_error(status) and len(stats.errors) < 10:
                        stats.errors.append(f"{result.get('id')}: {status} {result.get('error')}")
    return stats


def run_mode(args: argparse.Namespace, mode: str) -> ModeStats:
    session_ids = [f"{args.prefix}-{mode}-{n:03d}" for n in range(args.sessions)]
    before = database_size(args.database_url) if args.database_url else None
    shares = [session_ids[w :: args.workers] for w in range(args.workers)]
    prepared = [prepare(args, mode, share) for share in shares if share]
    total = ModeStats(mode)
    deadline = time.monotonic() + args.time_limit
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        futures = [pool.submit(run_worker, args, mode, share, deadline) for share in prepared]
        for future in futures:
            total.merge(future.result())
    total.wall_s = time.perf_counter() - started
    if args.database_url and before is not None:
        time.sleep(args.settle)
        total.db_growth = database_size(args.database_url) - before
    # Same content in both modes for a given session id, so computing it the cheap way
    # (by id) is exact; only the steps actually posted count.
    total.distinct_bytes = sum(
        distinct_content_bytes(
            itertools.islice(
                long_session(sid, args.steps, args.max_context, args.seed, by_id=True), count
            )
        )
        for sid, count in total.steps_per_session.items()
    )
    return total


def result_record(stats: ModeStats) -> dict[str, Any]:
    wall = stats.wall_s or float("nan")
    record: dict[str, Any] = {
        "mode": stats.mode,
        "sessions": stats.sessions,
        "steps": stats.steps_sent,
        "events": stats.events_sent,
        "accepted": stats.accepted,
        "rejected": stats.rejected,
        "statuses": dict(stats.statuses),
        "batches": stats.batches,
        "failed_batches": stats.failed_batches,
        "bytes_sent": stats.bytes_sent,
        "wall_s": round(stats.wall_s, 3),
        "events_per_s": round(stats.accepted / wall, 1) if stats.wall_s else None,
        "batch_p50_ms": _round(percentile(stats.latencies_ms, 50)),
        "batch_p99_ms": _round(percentile(stats.latencies_ms, 99)),
        "distinct_content_bytes": stats.distinct_bytes,
        "db_growth_bytes": stats.db_growth,
        "db_bytes_per_step": None,
        "db_bytes_per_content_byte": None,
        "timed_out": stats.timed_out,
    }
    if stats.db_growth is not None and stats.steps_sent:
        record["db_bytes_per_step"] = round(stats.db_growth / stats.steps_sent, 1)
    if stats.db_growth is not None and stats.distinct_bytes:
        record["db_bytes_per_content_byte"] = round(stats.db_growth / stats.distinct_bytes, 3)
    return record


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def print_table(records: list[dict[str, Any]]) -> None:
    columns = [
        ("mode", "mode", "{}"),
        ("sessions", "sessions", "{}"),
        ("steps", "steps", "{}"),
        ("accepted", "accepted", "{}"),
        ("rejected", "rejected", "{}"),
        ("batches", "batches", "{}"),
        ("MB sent", "bytes_sent", "{:.1f}"),
        ("wall s", "wall_s", "{:.1f}"),
        ("events/s", "events_per_s", "{:.1f}"),
        ("p50 ms", "batch_p50_ms", "{:.1f}"),
        ("p99 ms", "batch_p99_ms", "{:.1f}"),
        ("content MB", "distinct_content_bytes", "{:.2f}"),
        ("db MB", "db_growth_bytes", "{:.2f}"),
        ("db B/step", "db_bytes_per_step", "{:.0f}"),
        ("db B/content B", "db_bytes_per_content_byte", "{:.2f}"),
    ]
    megabytes = {"bytes_sent", "distinct_content_bytes", "db_growth_bytes"}
    rows = [[title for title, _, _ in columns]]
    for record in records:
        row = []
        for _, key, fmt in columns:
            value = record.get(key)
            if value is None:
                row.append("-")
                continue
            if key in megabytes:
                value = value / 1e6
            row.append(fmt.format(value))
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    for n, row in enumerate(rows):
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * width for width in widths))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ingest",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "Sessions of the two modes get different ids, hence different content, so the "
            "second mode's database growth is not hidden by deduplication. Statistics "
            "workers may keep writing after the posts end: use --settle to wait before the "
            "second size measurement."
        ),
    )
    parser.add_argument("--url", required=True, help="server base URL (loopback only)")
    parser.add_argument("--key", required=True, help="project API key (Authorization: Bearer)")
    parser.add_argument("--sessions", type=int, default=4, help="sessions per mode (default: 4)")
    parser.add_argument(
        "--steps", type=int, default=300, help="steps per session (default: %(default)s)"
    )
    parser.add_argument(
        "--max-context",
        type=int,
        default=200,
        help="messages the contexts grow to (default: %(default)s)",
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="concurrent clients (default: %(default)s)"
    )
    parser.add_argument(
        "--mode",
        choices=[*MODES, *MODE_GROUPS],
        default="both",
        help="by-id: unchanged messages sent by id alone; runs: the last step's after as one "
        "run and the new messages (the $base extension, what the SDK sends); full: full "
        "content at every step; full-reverse, full-shuffled: full content, the steps posted "
        "last first or in a random order; both: by-id then full; all: by-id, runs and full; "
        "orders: the three full modes (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=100, help="events per request (default: %(default)s)"
    )
    parser.add_argument(
        "--max-body-mb",
        type=float,
        default=16.0,
        help="start a new batch before a body would pass this many MiB; full mode needs it, "
        "100 steps of 200 messages are ~22 MB (default: %(default)s)",
    )
    parser.add_argument("--gzip", action="store_true", help="gzip request bodies")
    parser.add_argument(
        "--database-url",
        help="postgres URL of the server's database, to measure table growth (loopback only)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds to wait after posting before measuring the database (default: 0)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=600.0,
        help="seconds allowed per mode; posting stops there (default: %(default)s)",
    )
    parser.add_argument(
        "--request-timeout", type=float, default=120.0, help="seconds per request (default: 120)"
    )
    parser.add_argument("--seed", type=int, default=0, help="generator seed (default: 0)")
    parser.add_argument(
        "--prefix",
        default=f"bench-{time.strftime('%Y%m%d-%H%M%S')}",
        help="session id prefix (default: bench-<now>, so every run has fresh sessions)",
    )
    return parser


def validate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if not 1 <= args.sessions <= MAX_SESSIONS:
        parser.error(f"--sessions must be between 1 and {MAX_SESSIONS}")
    if not 1 <= args.steps <= MAX_STEPS:
        parser.error(f"--steps must be between 1 and {MAX_STEPS}")
    if not 1 <= args.workers <= MAX_WORKERS:
        parser.error(f"--workers must be between 1 and {MAX_WORKERS}")
    if not 20 <= args.max_context <= 10_000:
        parser.error("--max-context must be between 20 and 10000")
    if not 1 <= args.batch_size <= 1000:
        parser.error("--batch-size must be between 1 and 1000")
    if not 0 < args.time_limit <= 24 * 3600 or not 0 <= args.settle <= 600:
        parser.error("--time-limit must be in (0, 86400] and --settle in [0, 600]")
    args.max_body_bytes = int(args.max_body_mb * 1024 * 1024)
    if args.max_body_bytes < 1024:
        parser.error("--max-body-mb is too small")
    url = httpx.URL(args.url)
    if url.scheme not in ("http", "https") or not is_loopback_host(url.host):
        parser.error("--url must be an http(s) URL on a loopback host")
    if args.database_url:
        require_loopback_database(parser, args.database_url)


def require_loopback_database(parser: argparse.ArgumentParser, database_url: str) -> None:
    """Stop with a usage error unless `database_url` is a database on this machine."""
    try:
        host = database_host(database_url)
    except psycopg.Error as error:
        parser.error(f"--database-url: {error}")
    if not is_loopback_host(host):
        parser.error("--database-url must point at a loopback host or a local socket")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    validate(parser, args)
    modes = MODE_GROUPS.get(args.mode, [args.mode])
    records = []
    for mode in modes:
        print(
            f"# {mode}: {args.sessions} sessions x {args.steps} steps, {args.workers} workers",
            file=sys.stderr,
        )
        try:
            stats = run_mode(args, mode)
        except Aborted as error:
            print(f"aborted: {error}", file=sys.stderr)
            return 2
        except psycopg.Error as error:
            print(f"database: {error}", file=sys.stderr)
            return 2
        for line in stats.errors[:5]:
            print(f"  error: {line}", file=sys.stderr)
        records.append(result_record(stats))
    print_table(records)
    print(
        json.dumps(
            {
                "bench": "ingest",
                "url": args.url,
                "workers": args.workers,
                "max_context": args.max_context,
                "results": records,
            }
        )
    )
    return 0 if all(r["rejected"] == 0 for r in records) else 1


if __name__ == "__main__":
    raise SystemExit(main())
