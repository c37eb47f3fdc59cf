"""Key entities of distinct contents, stored once per blob (``cv_blob_entities``)."""

from __future__ import annotations

import pytest
from django.db import connection

from contextview.core.entities import extract_entities_keyed
from contextview.projects.models import Project
from contextview.sessions.models import Blob
from contextview.stats import services

TEXTS = {
    "codes": "order SO20260101007 failed with E1234 at /var/Log/X.txt",
    "units": "the call took 3 s and returned 512MB",  # "3 s" has the key "3s"
    "accents": 'the bank said "Überweisung Fehlt" for A12345',  # not ASCII: kept as is
    "none": "nothing to keep here",
}


def _stored_keys() -> dict[str, str | None]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT b.text, e.keys FROM cv_blob_entities e JOIN cv_blob b ON b.id = e.blob_id"
        )
        return dict(cursor.fetchall())


@pytest.mark.django_db
def test_it_reads_back_the_keys_it_stored_as_lowercased_entities() -> None:
    project = Project.objects.create(name="p")
    blobs = {
        Blob.objects.create(project=project, hash=name.encode(), text=text).pk: text
        for name, text in TEXTS.items()
    }
    extracted = services.entities_for_blobs(blobs=blobs)
    assert extracted == {pk: extract_entities_keyed(text) for pk, text in blobs.items()}
    stored = _stored_keys()
    # Lowercasing the entities gives the keys: stored as "". Not for the others.
    assert stored[TEXTS["codes"]] == stored[TEXTS["none"]] == ""
    assert stored[TEXTS["units"]] and stored[TEXTS["accents"]]

    # As a fresh worker reads them: the keys alone, and with the entities.
    for read in (services.entity_keys_for_blobs, services.entities_for_blobs):
        services.caches_clear()
        found = read(blobs=blobs)
        assert {pk: (v[1] if isinstance(v, tuple) else v) for pk, v in found.items()} == {
            pk: extract_entities_keyed(text)[1] for pk, text in blobs.items()
        }
