"""Import benchmark: a Claude Code transcript imported and its statistics computed.

    python -m bench.import --database-url postgres://... [--calls 150] [--mb 3]
        [--compact-every 100] [TRANSCRIPT ...]

Builds a synthetic Claude Code transcript (``--calls`` model calls, about ``--mb``
megabytes, streamed replies, tool results logged twice as Claude Code does, a
compaction every ``--compact-every`` calls) and imports it, then each
TRANSCRIPT given, each in a child process of its own against a project of its
own: the import service (``transcript_import``), then the statistics of every
session it made (``session_stats_compute``, as a worker runs it). Reports per
file: seconds to import, seconds until the statistics are ready, the child's peak
RSS after the import and after the statistics (whose caches hold up to
``STATS_CACHE_MB``), and the storage it added (the size of its rows in the tables it writes, and
the growth of those tables with their indexes and TOAST) against the file's
bytes. The child first does what a running server and worker did once already
(tokenizer loaded, broker connected), so the times are those of an import into a
running installation. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.owndb import django_setup

TABLES = (
    "cv_blob",
    "cv_message",
    "cv_step",
    "cv_operation",
    "cv_raw_event",
    "cv_session",
)
# Statistics and bookkeeping tables without a project column: the parent row that carries it.
PARENT_OF = {
    "cv_blob_info": "JOIN cv_blob p ON p.id = t.blob_id",
    "cv_step_stats": "JOIN cv_session p ON p.id = t.session_id",
    "cv_fold": "JOIN cv_session p ON p.id = t.session_id",
    "cv_session_message": "JOIN cv_session p ON p.id = t.session_id",
}
WORDS = (
    "order inventory timeout upstream status retry cache request handler worker queue "
    "SO20260101007 A12345 504 3s 110 /srv/app/inventory.py https://inventory.internal/v2 "
    "def return self value total_seconds round int raise error warning info debug"
).split()


def synthetic_transcript(path: Path, *, calls: int, megabytes: float, compact_every: int) -> None:
    """A Claude Code session as its JSONL would hold it."""
    rng = random.Random(7)
    sid = "bench-" + uuid.uuid4().hex[:8]
    per_call = int(megabytes * 1_000_000 / calls / 2.3)  # the output is logged twice

    def entry(kind: str, uuid_: str, parent: str | None, **fields: Any) -> str:
        head = {"parentUuid": parent, "isSidechain": False, "userType": "external",
                "cwd": "/srv/app", "sessionId": sid, "version": "2.1.40", "gitBranch": "main",
                "type": kind, "uuid": uuid_, "timestamp": f"2026-11-30T10:{n // 60 % 60:02d}:"
                f"{n % 60:02d}.000Z"}  # fmt: skip
        return json.dumps({**head, **fields}) + "\n"

    def text(size: int) -> str:
        out: list[str] = []
        length = 0
        while length < size:
            line = " ".join(rng.choice(WORDS) for _ in range(12))
            out.append(line)
            length += len(line) + 1
        return "\n".join(out)

    n = 0
    with path.open("w") as f:
        f.write(entry("user", "u0", None, message={"role": "user", "content": "Find why order "
                      "SO20260101007 times out and fix it."}))  # fmt: skip
        parent = "u0"
        for n in range(1, calls + 1):
            mid = f"msg_{n:05d}"
            usage = {"input_tokens": 3, "cache_read_input_tokens": 1000 * n,
                     "cache_creation_input_tokens": 500, "output_tokens": 80}  # fmt: skip
            reply = {"model": "claude-sonnet-4-5", "id": mid, "type": "message",
                     "role": "assistant", "usage": usage}  # fmt: skip
            f.write(entry("assistant", f"a{n}", parent, message={**reply, "content": [
                {"type": "text", "text": text(200)}]}))  # fmt: skip
            f.write(entry("assistant", f"b{n}", f"a{n}", message={**reply, "content": [
                {"type": "tool_use", "id": f"toolu_{n}", "name": "Read",
                 "input": {"file_path": f"/srv/app/mod{n % 40}.py"}}]}))  # fmt: skip
            f.write(entry("progress", f"p{n}", f"b{n}", data={"type": "hook_progress"}))
            output = text(per_call)
            f.write(entry("user", f"r{n}", f"b{n}", message={"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": output}]},
                toolUseResult={"type": "text", "file": {"content": output}}))  # fmt: skip
            parent = f"r{n}"
            if n % compact_every == 0 and n < calls:
                meta = {"trigger": "auto", "preTokens": 150000}
                f.write(entry("system", f"c{n}", None, subtype="compact_boundary",
                              content="Conversation compacted", compactMetadata=meta))  # fmt: skip
                f.write(entry("user", f"s{n}", f"c{n}", isCompactSummary=True, message={
                    "role": "user", "content": "Summary: " + text(3000)}))  # fmt: skip
                parent = f"s{n}"


def _table_bytes(cursor: Any, project_id: int) -> tuple[int, int]:
    rows = 0
    for table in TABLES:
        cursor.execute(
            f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {table} t WHERE project_id = %s",
            [project_id],
        )
        rows += int(cursor.fetchone()[0])
    for table, parent in PARENT_OF.items():
        cursor.execute(
            f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM {table} t {parent} "
            "WHERE p.project_id = %s",
            [project_id],
        )
        rows += int(cursor.fetchone()[0])
    cursor.execute(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "WHERE c.relname = ANY(%s) AND c.relkind = 'r'",
        [[*TABLES, *PARENT_OF]],
    )
    return rows, int(cursor.fetchone()[0])


def run_one(path: Path) -> dict[str, Any]:
    """In the child: import one file into a new project, then compute its statistics."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "contextview.settings")
    import django

    django.setup()
    from django.db import connection

    # What a running server and worker have done once already: load the tokenizer,
    # import the task modules and connect to the broker.
    from contextview.celery import app
    from contextview.core.tokens import load_encoding
    from contextview.ingest.imports import transcript_import
    from contextview.projects.services import project_get_or_create
    from contextview.sessions.models import Session
    from contextview.stats import tasks  # noqa: F401
    from contextview.stats.services import session_stats_compute

    load_encoding("cl100k_base")
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1)

    project, _ = project_get_or_create(slug="bench-import-" + uuid.uuid4().hex[:8])
    with connection.cursor() as cursor:
        _, relations_before = _table_bytes(cursor, project.pk)
    started = time.perf_counter()
    with path.open("rb") as f:
        outcome = transcript_import(project=project, files=[(path.name, f)])
    imported = time.perf_counter() - started
    import_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for s in Session.objects.filter(project=project):
        session_stats_compute(session_id=s.pk)
    ready = time.perf_counter() - started
    with connection.cursor() as cursor:
        rows, relations_after = _table_bytes(cursor, project.pk)
    size = path.stat().st_size
    return {
        "file": path.name[:40],
        "mb": round(size / 1e6, 2),
        "steps": sum(s.steps for s in outcome.sessions),
        "operations": sum(s.operations for s in outcome.sessions),
        "import_s": round(imported, 2),
        "stats_ready_s": round(ready, 2),
        "import_rss_mb": round(import_rss / 1024),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "rows_ratio": round(rows / size, 3),
        "relations_ratio": round((relations_after - relations_before) / size, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.import", description=__doc__)
    parser.add_argument("transcripts", nargs="*", type=Path, metavar="TRANSCRIPT")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--calls", type=int, default=150)
    parser.add_argument("--mb", type=float, default=3.0)
    parser.add_argument("--compact-every", type=int, default=100)
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        if args.database_url:
            os.environ["DATABASE_URL"] = args.database_url
        print(json.dumps(run_one(args.one)))
        return 0
    if args.database_url:
        # The children import into the benchmarks' own database (bench.owndb).
        django_setup(args.database_url)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        synthetic = Path(tmp, f"synthetic-{args.calls}-calls.jsonl")
        synthetic_transcript(
            synthetic, calls=args.calls, megabytes=args.mb, compact_every=args.compact_every
        )
        for path in [synthetic, *args.transcripts]:
            child = subprocess.run(
                [sys.executable, "-m", "bench.import", "--one", str(path)],
                capture_output=True,
                text=True,
                check=False,
            )
            if child.returncode != 0:
                print(child.stderr, file=sys.stderr)
                return 1
            rows.append(json.loads(child.stdout.strip().splitlines()[-1]))
    columns = list(rows[0])
    print("  ".join(f"{c:>14}" for c in columns))
    for row in rows:
        print("  ".join(f"{row[c]!s:>14}" for c in columns))
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
