"""Token counts and key entities of distinct contents, stored once per blob
(``cv_blob_info``)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection

from contextview.core.entities import extract_entities_keyed
from contextview.projects.models import Project
from contextview.sessions.models import Blob
from contextview.sessions.selectors import token_counts
from contextview.stats import services

TEXTS = {
    "codes": "order SO20260101007 failed with E1234 at /var/Log/X.txt",
    "units": "the call took 3 s and returned 512MB",  # "3 s" has the key "3s"
    "accents": 'the bank said "Überweisung Fehlt" for A12345',  # not ASCII
    "inner": "GET https://shop.example/api/orders/SO20260101042 returned 504",
    "none": "nothing to keep here",
}


@pytest.fixture
def blobs() -> dict[int, str]:
    project = Project.objects.create(name="p")
    return {
        Blob.objects.create(project=project, hash=name.encode(), text=text).pk: text
        for name, text in TEXTS.items()
    }


def _table_writes() -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_stat_get_xact_tuples_inserted('cv_blob_info'::regclass), "
            "pg_stat_get_xact_tuples_updated('cv_blob_info'::regclass)"
        )
        inserted, updated = cursor.fetchone()
    return inserted, updated


@pytest.mark.django_db
def test_it_reads_back_the_entities_and_tokens_it_stored(blobs: dict[int, str]) -> None:
    # The counters are this connection's: earlier tests' may not be flushed yet.
    inserted, updated = _table_writes()
    counts = services.tokens_for_blobs(blobs=dict(blobs), encoding="cl100k_base")
    expected = {pk: extract_entities_keyed(text) for pk, text in blobs.items()}
    assert services.entities_for_blobs(blobs=blobs) == expected
    # Counted and extracted together: one row a blob, written once.
    assert _table_writes() == (inserted + len(blobs), updated)

    # As a fresh worker reads them: the keys alone, and with the entities.
    services.caches_clear()
    assert services.entity_keys_for_blobs(blobs=blobs) == {
        pk: keys for pk, (_, keys) in expected.items()
    }
    services.caches_clear()
    assert services.entities_for_blobs(blobs=blobs) == expected
    # The read API's counts are the worker's.
    assert token_counts(blob_pks=blobs, encoding="cl100k_base") == counts
    assert token_counts(blob_pks=blobs, encoding="o200k_base") == {}


class _Counter:
    def __init__(self, per_char: int) -> None:
        self.per_char = per_char

    def count_readings(self, readings: list[Any]) -> list[int]:
        return [self.per_char * len(r if isinstance(r, str) else r.text) for r in readings]


@pytest.mark.django_db
def test_it_keeps_the_counts_of_each_encoding_apart(
    blobs: dict[int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # o200k_base has a column, p50k_base goes to tokens_other; neither is on this
    # machine, so each counts by a rule of its own.
    rules = {"cl100k_base": 1, "o200k_base": 2, "p50k_base": 3}
    monkeypatch.setattr(services, "token_counter", lambda name: _Counter(rules[name]))
    for encoding in rules:
        services.tokens_for_blobs(blobs=dict(blobs), encoding=encoding)
    services.caches_clear()
    for encoding, per_char in rules.items():
        expected = {pk: per_char * len(text) for pk, text in blobs.items()}
        assert services.tokens_for_blobs(blobs=dict(blobs), encoding=encoding) == expected
        assert token_counts(blob_pks=blobs, encoding=encoding) == expected
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(entities) FROM cv_blob_info")
        assert cursor.fetchone() == (len(blobs), len(blobs))


@pytest.mark.django_db
def test_it_extracts_no_entities_of_tool_definitions(blobs: dict[int, str]) -> None:
    services.tokens_for_blobs(blobs=dict(blobs), encoding="cl100k_base", entities=False)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(entities) FROM cv_blob_info")
        assert cursor.fetchone() == (len(blobs), 0)
    # Content sent as a message after all gets them when they are asked for.
    services.caches_clear()
    assert services.entities_for_blobs(blobs=blobs) == {
        pk: extract_entities_keyed(text) for pk, text in blobs.items()
    }


@pytest.mark.django_db
def test_a_new_worker_measures_inferred_operations_with_the_entities_it_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A silent compaction: the step's context lost what the one before held.
    from contextview.core import stats as core_stats
    from contextview.ingest.services import batch_ingest
    from contextview.sessions.models import Session, StepStats, stats_read

    project = Project.objects.create(name="p")
    history = [
        {"id": f"m{n}", "role": "tool", "content": f"{text} (call {n})"}
        for n, text in enumerate(TEXTS.values())
    ]
    contexts = [history, [{"id": "s", "role": "user", "content": "The order failed."}]]
    batch_ingest(
        project=project,
        batch=[
            {"id": f"e{i}", "type": "step",
             "body": {"session_id": "silent", "index": i, "obs": {"messages": messages}}}
            for i, messages in enumerate(contexts)
        ],
    )  # fmt: skip
    session = Session.objects.get(project=project, external_id="silent")
    services.session_stats_compute(session_id=session.pk)
    first = {s.index: stats_read(s.stats) for s in StepStats.objects.filter(session_id=session.pk)}

    # As a new worker process: the stored entities are read, not extracted again.
    extracted: list[str] = []
    extract = core_stats.extract_entities
    monkeypatch.setattr(core_stats, "extract_entities", lambda t: extracted.append(t) or extract(t))
    services.caches_clear()
    StepStats.objects.filter(session_id=session.pk).delete()
    services.session_stats_compute(session_id=session.pk)
    again = {s.index: stats_read(s.stats) for s in StepStats.objects.filter(session_id=session.pk)}
    assert again == first
    [op] = again[1]["ops"]
    assert op["inferred"] and "SO20260101007" in op["entities"]["lost"]
    assert extracted == []
