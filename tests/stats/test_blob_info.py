"""The stored form of a blob's entities (``contextview.stats.blob_info``): where they
are in its text, given back exactly as extracted."""

from __future__ import annotations

import orjson
import pytest

from contextview.core.entities import entity_key, extract_entities_keyed
from contextview.stats.blob_info import (
    entities_pack,
    entities_unpack,
    tokens_sql,
)
from tests.core.entity_corpus import LABELLED

LOG = (
    "2026-01-15T10:02:11Z GET /api/orders/SO20260101007 504 upstream inventory-svc "
    "timed out after 3 s (ERR_TIMEOUT); retry 2 of 3 to http://10.0.3.7:8080/v2/stock "
    "failed with ECONNRESET, see /var/log/app/orders.log line 355\n"
)


def _round_trip(text: str) -> tuple[list[str], list[str]]:
    keyed = extract_entities_keyed(text)
    return entities_unpack(entities_pack(*keyed, text), text)


@pytest.mark.parametrize("text", [text for text, _ in LABELLED] + [LOG, LOG * 40, ""])
def test_it_gives_back_the_entities_and_keys_it_extracted(text: str) -> None:
    assert _round_trip(text) == extract_entities_keyed(text)


def test_it_stores_a_log_in_a_fraction_of_its_entities_json() -> None:
    text = LOG.replace("3 s", "3s")  # every key the entity lowercased
    entities, keys = extract_entities_keyed(text)
    packed = entities_pack(entities, keys, text)
    # two bytes an entity and a head byte, where their JSON took eight times that
    assert len(packed) == 1 + 2 * len(entities)
    assert len(packed) * 8 < len(orjson.dumps(entities))
    # "3 s" has the key "3s": only that key is stored as itself
    entities, keys = extract_entities_keyed(LOG)
    assert len(entities_pack(entities, keys, LOG)) < len(packed) + 20


def test_it_keeps_entities_that_are_not_where_the_text_has_them() -> None:
    text = "see SO20260101007 and A12345 at /srv/app/x.py"
    # Not in the text; found only before the previous one; a key of its own.
    entities = ["SO20260101007", "NOT-THERE-42", "/srv/app/x.py", "A12345", "3 s"]
    keys = [entity_key(e) for e in entities]
    assert entities_unpack(entities_pack(entities, keys, text), text) == (entities, keys)


def test_it_reaches_far_into_long_texts() -> None:
    text = "x" * 70_000 + " SO20260101007 " + "y" * 300 + " A12345"
    keyed = extract_entities_keyed(text)
    assert keyed[0] == ["SO20260101007", "A12345"]
    packed = entities_pack(*keyed, text)
    assert packed[0] & 7 == 4  # offsets past 65,535 take four bytes
    assert entities_unpack(packed, text) == keyed


def test_it_keeps_keys_that_are_not_the_entities_lowercased() -> None:
    text = "Die Überweisung E1234 dauerte 3 s, Fehler ÄRGER-42"
    keyed = extract_entities_keyed(text)
    assert keyed[1] != [e.lower() for e in keyed[0]]
    assert entities_unpack(entities_pack(*keyed, text), text) == keyed


def test_it_names_the_column_of_each_encoding() -> None:
    assert tokens_sql("cl100k_base") == "i.tokens_cl100k"
    assert tokens_sql("p50k_base", "r") == "(r.tokens_other->>'p50k_base')::int"
    with pytest.raises(ValueError):
        tokens_sql("x'; DROP TABLE cv_blob; --")
