"""Page benchmark: server time and query counts of the dashboard's heaviest pages.

    python -m bench.pages --database-url postgres://... [--steps 10000] [--context 300]

Builds (once; reused on later runs) a session of ``--steps`` steps whose contexts
grow to ``--context`` messages, ingested through the ingest service and computed
by the statistics service, plus a 10-step session. Then, through Django's test
client in this process (server time, no network), it requests the session page
and the step fragment (as htmx asks for it) ``--requests`` times each and prints
p50/p95 server time and the number of queries per request for both sessions:
the query count must not grow with the number of steps or messages.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any

from bench.ingest_gen import long_session, session_event
from bench.owndb import django_setup, static_collected


def session_built(project: Any, sid: str, steps: int, context: int) -> Any:
    from contextview.ingest.services import batch_ingest
    from contextview.sessions.models import Session
    from contextview.stats.services import session_stats_compute

    existing = Session.objects.filter(project=project, external_id=sid).first()
    if existing is None or existing.step_count < steps:
        started = time.perf_counter()
        events = [session_event(sid), *long_session(sid, steps, context, seed=3, by_id=True)]
        for i in range(0, len(events), 200):
            batch_ingest(project=project, batch=events[i : i + 200])
        print(f"# ingested {sid}: {steps} steps in {time.perf_counter() - started:.1f} s")
        existing = Session.objects.get(project=project, external_id=sid)
    started = time.perf_counter()
    session_stats_compute(session_id=existing.pk)
    print(f"# statistics of {sid} ready in {time.perf_counter() - started:.1f} s")
    existing.refresh_from_db()
    return existing


def _measure(client: Any, url: str, n: int, **headers: str) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    times, queries = [], []
    for _ in range(n):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            response = client.get(url, **headers)
            times.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}")
        queries.append(len(captured))
    times.sort()
    return {
        "p50_ms": round(statistics.median(times) * 1000, 1),
        "p95_ms": round(times[max(0, int(len(times) * 0.95) - 1)] * 1000, 1),
        "queries": max(queries),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.pages",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--database-url", required=True, help="a postgres:// URL (loopback)")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--context", type=int, default=300, help="messages contexts grow to")
    parser.add_argument("--requests", type=int, default=40, help="requests per page")
    args = parser.parse_args(argv)
    django_setup(args.database_url)
    static_collected()

    from django.contrib.auth.models import User
    from django.test import Client

    from contextview.projects.models import Membership
    from contextview.projects.services import membership_set, project_get_or_create

    project, _ = project_get_or_create(slug="bench-pages")
    user, _ = User.objects.get_or_create(username="bench-pages")
    membership_set(user=user, project=project, role=Membership.Role.VIEWER)
    big = session_built(project, f"bench-pages-{args.steps}", args.steps, args.context)
    small = session_built(project, "bench-pages-10", 10, args.context)

    client = Client()
    client.force_login(user)
    rng = random.Random(1)
    rows = []
    for session in (small, big):
        for page, url, headers in (
            ("session page", f"/sessions/{session.pk}/", {}),
            (
                "step fragment",
                f"/sessions/{session.pk}/steps/{rng.randrange(session.step_count)}/",
                {"HTTP_HX_REQUEST": "true"},
            ),
        ):
            _measure(client, url, 3, **headers)  # warm caches, as a browsing engineer would
            row = {"session_steps": session.step_count, "page": page}
            row.update(_measure(client, url, args.requests, **headers))
            rows.append(row)
            print(
                f"{page:14} steps={session.step_count:6}  p50={row['p50_ms']:7.1f} ms  "
                f"p95={row['p95_ms']:7.1f} ms  queries={row['queries']}"
            )
    print(json.dumps({"bench": "pages", "results": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
