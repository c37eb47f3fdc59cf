from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from contextview.core.messages import canonical_json
from contextview.core.textsafe import (
    ESCAPE,
    NUL_SYMBOL,
    escape,
    escape_json,
    json_needs_escape,
    restore,
    restore_json,
    text_problem,
    written_json_needs_escape,
)

# Any code point, lone surrogates included, and the codec's own characters often.
TEXT = st.text(
    st.one_of(
        st.characters(codec=None),
        st.sampled_from(["\x00", "\ud83d", "\ude00", NUL_SYMBOL, ESCAPE, "D", "8", "F"]),
    )
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(TEXT)
def test_it_gives_back_any_text_as_it_was_sent(text: str) -> None:
    stored = escape(text)
    assert restore(stored) == text
    # What is stored is text PostgreSQL and UTF-8 can hold.
    assert "\x00" not in stored
    stored.encode("utf-8")


@given(JSON)
def test_it_gives_back_any_json_value_keys_included(value: object) -> None:
    assert restore_json(escape_json(value)) == value


@given(JSON, st.booleans())
def test_it_tells_from_the_json_text_alone_when_nothing_needs_escaping(
    value: object, ascii_only: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    if any("\ud800" <= c <= "\udfff" for c in text):
        text = json.dumps(value)  # a lone surrogate is not UTF-8: sent as its escape
    if not json_needs_escape(text):
        assert escape_json(json.loads(text)) == value


@given(JSON)
def test_it_tells_from_the_canonical_json_alone_when_nothing_needs_escaping(
    value: object,
) -> None:
    if not written_json_needs_escape(canonical_json(value)):
        assert escape_json(value) == value
    assert written_json_needs_escape(canonical_json(["a\x00b"]))
    assert written_json_needs_escape(canonical_json({"k\ud83d": 1}))
    assert not written_json_needs_escape(canonical_json({"ascii": "\\u0041 é"}))


def test_it_leaves_clean_text_alone_and_stores_nul_readably() -> None:
    assert escape("a plain log line") == "a plain log line"
    assert escape("ELF\x00\x01") == "ELF\u2400\x01"
    assert escape("cut \ud83d") == "cut \u241bD83D"
    assert escape("\u2400\u241b") == "\u241b\u2400\u241b\u241b"


def test_it_names_what_an_identifier_must_not_hold() -> None:
    assert text_problem("session-1") is None
    assert text_problem("a\x00b") == "must not contain NUL (\\u0000)"
    assert text_problem("a\ud83d") == "must not contain an unpaired surrogate (\\ud83d)"
