"""Post contract events to a contextview server, as any agent or script would.

    python -m contextview.demo.post --url http://127.0.0.1:8000 --key cv_... [--sessions N]

A plain HTTP client: it needs httpx and nothing of the server's code.
"""

from __future__ import annotations

import argparse
import gzip as gzip_module
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import httpx

from contextview.demo.recorder import DEMO_START
from contextview.demo.scenarios import SCENARIOS

Event = dict[str, Any]

INGEST_PATH = "/api/v1/ingest"
# A 429 is retried this many times, waiting what Retry-After asks, up to this long.
MAX_RETRIES = 3
MAX_RETRY_WAIT_S = 30.0


class IngestError(RuntimeError):
    """The server did not accept the batch as an envelope (any status but 207)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"ingest answered {status}, expected 207: {detail}")
        self.status = status
        self.detail = detail


def ingest_url(base_url: str) -> str:
    return base_url.rstrip("/") + INGEST_PATH


def encode_batch(batch: Sequence[Event], *, gzip: bool = False) -> tuple[bytes, dict[str, str]]:
    """The request body and headers for one `{"batch": [...]}` envelope."""
    body = json.dumps({"batch": list(batch)}, ensure_ascii=False, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json"}
    if gzip:
        body = gzip_module.compress(body, compresslevel=5)
        headers["Content-Encoding"] = "gzip"
    return body, headers


def _retry_after(response: httpx.Response) -> float:
    try:
        wait = float(response.headers.get("Retry-After", "1"))
    except ValueError:
        wait = 1.0
    return min(max(wait, 0.0), MAX_RETRY_WAIT_S)


def post_body(
    client: httpx.Client, base_url: str, api_key: str, body: bytes, headers: dict[str, str]
) -> dict[str, Any]:
    """POST one encoded envelope; the parsed 207 answer, or IngestError."""
    headers = {**headers, "Authorization": f"Bearer {api_key}"}
    for attempt in range(MAX_RETRIES + 1):
        response = client.post(ingest_url(base_url), content=body, headers=headers)
        if response.status_code == 429 and attempt < MAX_RETRIES:
            time.sleep(_retry_after(response))
            continue
        break
    if response.status_code != 207:
        raise IngestError(response.status_code, response.text[:500])
    answer: dict[str, Any] = response.json()
    return answer


def post_events(
    base_url: str,
    api_key: str,
    events: Sequence[Event],
    *,
    batch_size: int = 100,
    gzip: bool = False,
    timeout: float = 60.0,
    client: httpx.Client | None = None,
) -> list[dict[str, Any]]:
    """Post `events` in order, `batch_size` per request; one result per event.

    Raises IngestError on the first request answered with anything but 207 (the
    events before it are stored; posting again is safe, the server deduplicates).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    own = client is None
    http = client or httpx.Client(timeout=timeout)
    results: list[dict[str, Any]] = []
    try:
        for first in range(0, len(events), batch_size):
            batch = events[first : first + batch_size]
            body, headers = encode_batch(batch, gzip=gzip)
            answer = post_body(http, base_url, api_key, body, headers)
            batch_results = answer.get("results", [])
            if len(batch_results) != len(batch):
                raise IngestError(207, f"{len(batch_results)} results for {len(batch)} events")
            results.extend(batch_results)
    finally:
        if own:
            http.close()
    return results


def summarize_session(events: Sequence[Event], results: Sequence[dict[str, Any]]) -> str:
    """One line: the session id, its event count and how the server answered them."""
    session_id = events[0]["body"]["session_id"]
    statuses = Counter(str(r.get("status")) for r in results)
    duplicates = sum(1 for r in results if r.get("duplicate"))
    tally = " ".join(f"{status}×{count}" for status, count in sorted(statuses.items()))
    line = f"{session_id:<36} {len(events):>3} events  {tally}"
    if duplicates:
        line += f"  ({duplicates} duplicate)"
    errors = [r for r in results if int(r.get("status", 0)) >= 400]
    if errors:
        line += f"  first error: {errors[0].get('id')}: {errors[0].get('error', '')}"
    return line


def _session_copies(count: int, prefix: str) -> list[list[Event]]:
    names = list(SCENARIOS)
    sessions = []
    for n in range(count):
        name = names[n % len(names)]
        round_ = n // len(names)
        suffix = f"-{round_ + 1}" if round_ else ""
        start = DEMO_START + timedelta(days=round_, minutes=20 * (n % len(names)))
        sessions.append(SCENARIOS[name](f"{prefix}{name}{suffix}", start))
    return sessions


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m contextview.demo.post",
        description=(
            "Post the demo sessions (one or more per seed: "
            + ", ".join(SCENARIOS)
            + ") to a contextview server's POST /api/v1/ingest and print one line per "
            "session with the per-event statuses. Events are deterministic, so posting "
            "again answers 200 duplicate; use --prefix for fresh sessions."
        ),
    )
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--key", required=True, help="project API key (Authorization: Bearer)")
    parser.add_argument(
        "--sessions",
        type=int,
        default=len(SCENARIOS),
        metavar="N",
        help=f"number of sessions to post, cycling through the {len(SCENARIOS)} scenarios; "
        "copies past the first round get a -2, -3, ... suffix (default: %(default)s)",
    )
    parser.add_argument("--prefix", default="", help="prepended to every session id")
    parser.add_argument(
        "--batch-size", type=int, default=100, help="events per request (default: %(default)s)"
    )
    parser.add_argument("--gzip", action="store_true", help="send bodies gzip-compressed")
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds per request (default: %(default)s)"
    )
    args = parser.parse_args(argv)
    if not 1 <= args.sessions <= 10_000:
        parser.error("--sessions must be between 1 and 10000")

    sessions = _session_copies(args.sessions, args.prefix)
    failed = 0
    with httpx.Client(timeout=args.timeout) as client:
        for events in sessions:
            try:
                results = post_events(
                    args.url,
                    args.key,
                    events,
                    batch_size=args.batch_size,
                    gzip=args.gzip,
                    client=client,
                )
            except (IngestError, httpx.HTTPError) as error:
                print(f"{events[0]['body']['session_id']:<36} {error}", file=sys.stderr)
                return 1
            failed += sum(1 for r in results if int(r.get("status", 0)) >= 400)
            print(summarize_session(events, results))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
