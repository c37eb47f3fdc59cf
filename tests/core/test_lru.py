"""SizedLRU: bounded by size, least recently used out first."""

from __future__ import annotations

from contextview.core.lru import SizedLRU


def test_it_finds_what_it_holds_and_names_what_it_does_not() -> None:
    cache: SizedLRU[int, str] = SizedLRU(100)
    cache.put(1, "one", 10)
    cache.put(2, "two", 10)
    assert cache.get_many([1, 3, 2]) == ({1: "one", 2: "two"}, [3])


def test_past_its_bound_the_least_recently_used_go_first() -> None:
    cache: SizedLRU[int, str] = SizedLRU(30)
    for key in (1, 2, 3):
        cache.put(key, str(key), 10)
    cache.get_many([1])  # 2 is now the least recently used
    cache.put(4, "4", 10)
    found, missing = cache.get_many([1, 2, 3, 4])
    assert sorted(found) == [1, 3, 4] and missing == [2]
    assert cache.size == 30


def test_a_value_bigger_than_the_bound_is_not_kept() -> None:
    cache: SizedLRU[str, str] = SizedLRU(10)
    cache.put("small", "s", 5)
    cache.put("huge", "h" * 50, 50)
    assert cache.get_many(["small", "huge"]) == ({"small": "s"}, ["huge"])


def test_putting_a_key_again_replaces_its_size() -> None:
    cache: SizedLRU[str, str] = SizedLRU(100)
    cache.put("k", "a", 60)
    cache.put("k", "b", 30)
    assert cache.size == 30 and len(cache) == 1
    cache.clear()
    assert cache.size == 0 and cache.get_many(["k"]) == ({}, ["k"])


def test_a_value_taken_out_is_gone_and_frees_its_size() -> None:
    cache: SizedLRU[str, str] = SizedLRU(100)
    cache.put("k", "a", 60)
    assert cache.pop("k") == "a"
    assert cache.pop("k") is None
    assert cache.size == 0 and len(cache) == 0
