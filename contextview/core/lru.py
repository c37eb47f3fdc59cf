"""A least-recently-used map bounded by the summed size of its values."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SizedLRU(Generic[K, V]):
    """Values by key; once their sizes sum past `max_size`, the least recently used go.

    Sizes are whatever unit the caller gives (bytes, roughly). A value larger
    than the whole bound is not kept. Safe to share between threads.
    """

    def __init__(self, max_size: int) -> None:
        self.max_size = max_size
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    @property
    def size(self) -> int:
        return self._size

    def get_many(self, keys: Iterable[K]) -> tuple[dict[K, V], list[K]]:
        """(the values found, by key; the keys not found)."""
        found: dict[K, V] = {}
        missing: list[K] = []
        with self._lock:
            data = self._data
            for key in keys:
                entry = data.get(key)
                if entry is None:
                    missing.append(key)
                else:
                    data.move_to_end(key)
                    found[key] = entry[0]
        return found, missing

    def pop(self, key: K) -> V | None:
        """Take the value of `key` out (None when there is none)."""
        with self._lock:
            entry = self._data.pop(key, None)
            if entry is None:
                return None
            self._size -= entry[1]
            return entry[0]

    def put(self, key: K, value: V, size: int) -> None:
        self.put_many(((key, value, size),))

    def put_many(self, items: Iterable[tuple[K, V, int]]) -> None:
        """`put` each (key, value, size), under one hold of the lock."""
        with self._lock:
            data = self._data
            total = self._size
            for key, value, size in items:
                old = data.pop(key, None)
                if old is not None:
                    total -= old[1]
                if size > self.max_size:
                    continue
                data[key] = (value, size)
                total += size
            while total > self.max_size:
                _, (_, dropped) = data.popitem(last=False)
                total -= dropped
            self._size = total

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._size = 0
