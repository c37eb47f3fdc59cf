"""The ingest benchmark's pure parts: batching, percentiles, what it agrees to talk to."""

from __future__ import annotations

import gzip
import json

import pytest

from bench.ingest import batches, build_parser, is_loopback_host, percentile, validate
from bench.ingest_gen import long_session
from contextview.demo.post import encode_batch, summarize_session
from contextview.demo.scenarios import all_demo_sessions


def test_it_batches_100_events_per_request_when_they_are_small() -> None:
    events = list(long_session("b-small", steps=250, by_id=True))
    groups = list(batches(iter(events), 100, 16 * 1024 * 1024))
    assert [len(g) for g, _ in groups] == [100, 100, 50]
    for group, body in groups:
        assert json.loads(body) == {"batch": group}


def test_it_splits_full_resends_before_a_body_passes_the_size_limit() -> None:
    events = list(long_session("b-full", steps=120, by_id=False))
    limit = 2 * 1024 * 1024
    groups = list(batches(iter(events), 100, limit))
    assert sum(len(g) for g, _ in groups) == 120
    assert len(groups) > 2
    assert all(len(body) <= limit for _, body in groups)
    assert [e for g, _ in groups for e in g] == events


def test_it_takes_nearest_rank_percentiles() -> None:
    values = [float(n) for n in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None


def test_it_only_talks_to_loopback_hosts() -> None:
    assert is_loopback_host("127.0.0.1")
    assert is_loopback_host("localhost")
    assert is_loopback_host("::1")
    assert is_loopback_host(None)  # unix socket, no host
    assert not is_loopback_host("10.1.2.3")
    parser = build_parser()
    args = parser.parse_args(["--url", "http://10.1.2.3:8000", "--key", "k"])
    with pytest.raises(SystemExit):
        validate(parser, args)
    args = parser.parse_args(["--url", "http://127.0.0.1:8000", "--key", "k", "--steps", "0"])
    with pytest.raises(SystemExit):
        validate(parser, args)


def test_it_encodes_envelopes_plain_or_gzipped() -> None:
    events = all_demo_sessions()[0][:3]
    body, headers = encode_batch(events)
    assert headers == {"Content-Type": "application/json"}
    assert json.loads(body) == {"batch": events}
    body, headers = encode_batch(events, gzip=True)
    assert headers["Content-Encoding"] == "gzip"
    assert json.loads(gzip.decompress(body)) == {"batch": events}


def test_it_summarizes_a_session_in_one_line() -> None:
    events = all_demo_sessions()[0][:3]
    results = [
        {"id": events[0]["id"], "status": 201},
        {"id": events[1]["id"], "status": 200, "duplicate": True},
        {"id": events[2]["id"], "status": 400, "error": "body.index: field required"},
    ]
    line = summarize_session(events, results)
    assert "\n" not in line
    assert line.startswith("cm-order-timeout")
    assert "201×1" in line and "400×1" in line and "1 duplicate" in line
    assert "body.index: field required" in line
