"""How much two sequences share at their ends, found with slice comparisons (C speed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items `a` and `b` share (lists compare items by identity first)."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low], a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid
    return low


def common_suffix(a: Sequence[Any], b: Sequence[Any], limit: int) -> int:
    """How many trailing items `a` and `b` share, at most `limit`."""
    if limit <= 0:
        return 0
    la, lb = len(a), len(b)
    if a[la - limit :] == b[lb - limit :]:
        return limit
    low, high = 0, limit
    while high - low > 1:
        mid = (low + high) // 2
        if a[la - mid : la - low] == b[lb - mid : lb - low]:
            low = mid
        else:
            high = mid
    return low
