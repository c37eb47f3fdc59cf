"""Replay benchmark: how long a recorded session takes to replay under a policy.

    python -m bench.replay [--steps 1000] [--messages 200] [--repeat 3]
        [--database-url postgres://... [--db-steps 10000]]

The session is ``bench.ingest_gen``'s (a system prompt, a task, then an assistant
message and a 1-4 KB tool result a step, a user message now and then; the agent
compacts its context near `--messages`), its contexts derived by the core. As in
the service, every message's tokens are known (the stored counts) and its key
entities too (the stored index), so what is timed is the replay itself: for each
policy, the best of `--repeat` runs, and the first (its placeholders counted
with tiktoken). Prints one row per policy, then all as one JSON line.

With ``--database-url``, a session of ``--db-steps`` steps is also built there
(once; reused on later runs, as ``bench.pages`` builds its own) and replayed as
a user would ask: ``POST /api/v1/sessions/{id}/replay`` under one policy (time
to the first bytes and to the whole streamed answer), the session page's replay
panel (the chosen policy) and the comparison rows the page then asks for, and the
page without JavaScript (one replay too).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench.ingest_gen import long_session
from bench.stats import derived_steps

POLICIES = (
    {"kind": "full"},
    {"kind": "sliding", "keep_last": 20},
    {"kind": "mask_observations", "keep_last": 3},
    {"kind": "hybrid", "keep_last": 10},
    {"kind": "budget", "max_tokens": 60_000, "order": ["tool", "memory", "retrieval"]},
)


def bench(steps: int, messages: int, repeat: int) -> list[dict[str, Any]]:
    from contextview.core.entities import extract_entities_keyed
    from contextview.core.replay import RecordedStep, policy_from_json, replay
    from contextview.core.stats import TextCache
    from contextview.core.tokens import TokenCounter

    events = list(long_session("bench-replay", steps, messages, seed=0, by_id=True))
    derived = [result for _, result in derived_steps(events)]
    counter = TokenCounter("cl100k_base")
    tokens: dict[int, int] = {}
    entities: dict[str, tuple[list[str], list[str]]] = {}
    for result in derived:
        for m in (*result.before, *result.after):
            if id(m) not in tokens:
                tokens[id(m)] = counter.count(m.text)
                if m.text not in entities:
                    entities[m.text] = extract_entities_keyed(m.text)

    def tokens_of(m: Any) -> int:
        return tokens[id(m)]

    recorded = [
        RecordedStep(k, r.before, r.after, sum(map(tokens_of, r.after)))
        for k, r in enumerate(derived)
    ]
    rows = []
    for raw in POLICIES:
        policy = policy_from_json(raw)
        timings = []
        for _ in range(repeat):
            cache = TextCache()
            for text, (found, keys) in entities.items():
                cache.prime(text, found, keys)
            started = time.perf_counter()
            _, totals = replay(
                policy, recorded, tokens_of=tokens_of, count_text=counter.count, cache=cache
            )
            timings.append(time.perf_counter() - started)
        rows.append(
            {
                "policy": raw,
                "steps": len(recorded),
                "context_max": max(len(r.before) for r in recorded),
                "first_s": round(timings[0], 3),
                "best_s": round(min(timings), 3),
                "tokens_saved": totals.as_dict()["tokens_saved"],
                "amnesia": totals.amnesia,
            }
        )
    return rows


def bench_database(database_url: str, steps: int, messages: int) -> list[dict[str, Any]]:
    from bench.owndb import django_setup, static_collected
    from bench.pages import session_built

    django_setup(database_url)
    static_collected()
    from django.contrib.auth.models import User
    from django.test import Client

    from contextview.projects.models import Membership
    from contextview.projects.services import apikey_create, membership_set, project_get_or_create

    project, _ = project_get_or_create(slug="bench-replay")
    session = session_built(project, f"bench-replay-{steps}", steps, messages)
    key = apikey_create(project=project, name="bench").secret
    user, _ = User.objects.get_or_create(username="bench-replay")
    membership_set(user=user, project=project, role=Membership.Role.VIEWER)
    client = Client()
    rows = []
    policy = {"kind": "sliding", "keep_last": 20}
    started = time.perf_counter()
    answer = client.post(
        f"/api/v1/sessions/{session.external_id}/replay",
        json.dumps({"policy": policy}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    chunks = iter(answer.streaming_content)
    first = next(chunks)
    first_s = time.perf_counter() - started
    size = len(first) + sum(len(c) for c in chunks)
    rows.append(
        {
            "part": "api",
            "steps": session.step_count,
            "policy": policy,
            "first_bytes_s": round(first_s, 3),
            "total_s": round(time.perf_counter() - started, 3),
            "megabytes": round(size / 1e6, 1),
        }
    )
    client.force_login(user)
    # The panel (the chosen policy) and, as the page then asks, each compared row; and
    # the page without JavaScript, which replays the chosen policy alone too.
    for part, query in (
        ("panel", {"kind": "sliding", "keep_last": "20"}),
        ("row", {"kind": "full", "row": "1"}),
        ("row", {"kind": "mask_observations", "keep_last": "3", "row": "1"}),
        ("row", {"kind": "hybrid", "keep_last": "10", "row": "1"}),
        ("page without JavaScript", {"kind": "mask_observations", "keep_last": "3"}),
    ):
        htmx = {} if part.startswith("page") else {"HTTP_HX_REQUEST": "true"}
        started = time.perf_counter()
        answer = client.get(f"/sessions/{session.pk}/replay/", query, **htmx)
        assert answer.status_code == 200
        rows.append(
            {
                "part": part,
                "steps": session.step_count,
                "policy": query,
                "total_s": round(time.perf_counter() - started, 3),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.replay", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=200, help="context size it keeps near")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--database-url", help="also replay a stored session (postgres://)")
    parser.add_argument("--db-steps", type=int, default=10_000)
    args = parser.parse_args()
    rows = bench(args.steps, args.messages, args.repeat)
    for row in rows:
        print(
            f"{json.dumps(row['policy']):<75} {row['steps']} steps, contexts up to "
            f"{row['context_max']}: {row['best_s']:.3f} s (first {row['first_s']:.3f} s), "
            f"saved {row['tokens_saved']:,} tokens, amnesia {row['amnesia']}"
        )
    if args.database_url:
        stored = bench_database(args.database_url, args.db_steps, args.messages)
        for row in stored:
            print(json.dumps(row))
        rows += stored
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
