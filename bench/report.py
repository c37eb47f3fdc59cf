"""Report benchmark: server time of a long session's reports and exports.

    python -m bench.report --database-url postgres://... [--steps 1000] [--context 200]
        [--repeat 3]

Builds (once; reused on later runs, as ``bench.pages`` builds its own) a session of
``--steps`` steps from ``bench.ingest_gen``, whose contexts grow to ``--context``
messages and are resent whole at every step, ingested through the ingest service
and computed by the statistics service, and a 10-step session to compare it with.
Then, through Django's test client in this process (server time, no network), it
asks for each report and export the README lists, reading a streamed answer to its
end: the Markdown and JSON reports and the archive through the API, the HTML report
and the two sessions compared as pages, and the training set (``steps.jsonl``) of
the session's project. Prints, per format, the best of ``--repeat`` times after one
warm-up request, the answer's size and its number of queries, then one JSON line.
What a report costs should follow its content, not its context's length times its
steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from bench.ingest import require_loopback_database
from bench.owndb import django_setup, static_collected
from bench.pages import session_built


def _measure(client: Any, url: str, repeat: int, **headers: str) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times, size, queries = [], 0, 0
    for n in range(repeat + 1):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url, **headers)
            if response.status_code != 200:
                raise SystemExit(f"{url} answered {response.status_code}")
            body = (
                b"".join(response.streaming_content)
                if response.streaming
                else bytes(response.content)
            )
            elapsed = time.perf_counter() - started
        if n:  # the first request warms the caches, as the page's first visitor did
            times.append(elapsed)
        size, queries = len(body), len(captured)
    return {"best_s": round(min(times), 3), "kb": round(size / 1024), "queries": queries}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.report",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--database-url", required=True, help="a postgres:// URL (loopback)")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--context", type=int, default=200, help="messages contexts grow to")
    parser.add_argument("--repeat", type=int, default=3, help="timed requests per format")
    args = parser.parse_args(argv)
    if not 20 <= args.context <= 2000 or not 1 <= args.steps <= 100_000:
        parser.error("--steps must be in [1, 100000] and --context in [20, 2000]")
    if not 1 <= args.repeat <= 100:
        parser.error("--repeat must be in [1, 100]")
    require_loopback_database(parser, args.database_url)
    django_setup(args.database_url)
    static_collected()

    from django.contrib.auth.models import User
    from django.test import Client

    from contextview.projects.models import Membership
    from contextview.projects.services import (
        apikey_create,
        membership_set,
        project_get_or_create,
    )

    # A project per shape, so its training set is this session's and the small one's.
    slug = f"bench-report-{args.steps}-{args.context}"
    project, _ = project_get_or_create(slug=slug)
    user, _ = User.objects.get_or_create(username="bench-report")
    membership_set(user=user, project=project, role=Membership.Role.VIEWER)
    big = session_built(project, f"{slug}-long", args.steps, args.context)
    small = session_built(project, f"{slug}-short", 10, args.context)
    key = apikey_create(project=project, name="bench-report").secret

    client = Client()
    client.force_login(user)
    api = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    sid = big.external_id
    formats = (
        ("report.md", f"/api/v1/sessions/{sid}/report.md", api),
        ("report.json", f"/api/v1/sessions/{sid}/report.json", api),
        ("report.html", f"/sessions/{big.pk}/report.html", {}),
        ("steps.jsonl", "/api/v1/export/steps.jsonl", api),
        ("compare", f"/projects/{slug}/compare/?s={sid}&s={small.external_id}", {}),
        ("archive", f"/api/v1/sessions/{sid}/archive", api),
    )
    print(f"{big.step_count} steps, contexts up to {args.context} messages")
    rows = [
        {"format": name, **_measure(client, url, args.repeat, **headers)}
        for name, url, headers in formats
    ]
    for row in rows:
        print(
            f"{row['format']:12} {row['best_s']:7.3f} s {row['kb']:7} KB {row['queries']:3} queries"
        )
    print(json.dumps({"bench": "report", "steps": big.step_count, "results": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
