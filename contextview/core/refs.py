"""A compact encoding of a context as the list of its messages' database ids.

A step stores its contexts as references to content-addressed messages. Ids of
one session grow together, so a context is mostly increasing ids a small step
apart: stored as zigzag varints of successive differences, most cost one byte.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from itertools import accumulate
from typing import Generic, TypeVar

from contextview.core.sequences import common_prefix

_MAX_ID = (1 << 63) - 1
# What `decode_many` gives: each list's ids, the list it was decoded after (its
# base), and how many of the base's first ids it shares.
Decoded = dict[bytes, tuple[list[int], bytes | None, int]]
Made = TypeVar("Made")


def varint_append(out: bytearray, value: int) -> None:
    """Append `value` (0 or more) as a varint: 7 bits a byte, low bits first."""
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def varint_read(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` in `data`, and where the next value starts."""
    value = 0
    shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def encode_refs(ids: Iterable[int], *, after: int = 0) -> bytes:
    """`ids` encoded; `after`: the id before the first, when they continue a list
    encoded already (its bytes and these, joined, are the whole list's)."""
    out = bytearray()
    previous = after
    for value in ids:
        if not 0 < value <= _MAX_ID:
            raise ValueError(f"reference {value!r} is not a positive 64-bit id")
        delta = value - previous
        previous = value
        # zigzag: small steps back cost as little as small steps forward
        varint_append(out, delta << 1 if delta >= 0 else (-delta << 1) - 1)
    return bytes(out)


# Zigzag value of every one-byte varint: most deltas of a context's references.
_ZIGZAG = tuple((z >> 1) if not z & 1 else -((z + 1) >> 1) for z in range(0x80))
_HIGH_BYTE = re.compile(rb"[\x80-\xff]")


def decode_refs(data: bytes, start: int = 0) -> list[int]:
    """The references `data` encodes; `start`: the reference before the first, if cut."""
    # Runs of one-byte varints (most deltas of a context) are decoded at C speed;
    # a varint of several bytes (the first reference, a long jump) byte by byte.
    ids: list[int] = []
    value = start
    pos = 0
    end = len(data)
    zigzag = _ZIGZAG.__getitem__
    while pos < end:
        found = _HIGH_BYTE.search(data, pos)
        stop = found.start() if found is not None else end
        if stop > pos:
            run = accumulate(map(zigzag, data[pos:stop]), initial=value)
            next(run)
            ids.extend(run)
            value = ids[-1]
            pos = stop
        if pos < end:
            # One varint of several bytes (the first reference, or a long jump).
            z, pos = varint_read(data, pos)
            value += (z >> 1) if not z & 1 else -((z + 1) >> 1)
            ids.append(value)
    return ids


def decode_many(blobs: Iterable[bytes]) -> Decoded:
    """Each distinct reference list decoded once: `(ids, base, shared)`.

    A session's consecutive contexts mostly share their head; each list is
    decoded after the head it shares with the list before it, whose first
    `shared` ids it repeats (`base` is that list, None when nothing is shared),
    so callers can build on what they made of `base` too.
    """
    out: Decoded = {}
    previous: bytes | None = None
    for data in blobs:
        if data in out:
            continue
        if previous is None:
            out[data] = (decode_refs(data), None, 0)
        else:
            out[data] = _decode_after(data, previous, out[previous][0])
        previous = data
    return out


def _decode_after(
    data: bytes, base: bytes, base_ids: list[int]
) -> tuple[list[int], bytes | None, int]:
    n = common_prefix(data, base)
    while n and data[n - 1] & 0x80:
        n -= 1  # back to the end of a whole varint
    # Every varint ends with its one byte below 0x80.
    shared = n - len(_HIGH_BYTE.findall(data, 0, n))
    if not shared:
        return decode_refs(data), None, 0
    return base_ids[:shared] + decode_refs(data[n:], base_ids[shared - 1]), base, shared


def held_ids(decoded: Decoded) -> set[int]:
    """Every id the lists `decode_many` decoded hold, read past each list's shared
    head only (the head is in its base)."""
    held: set[int] = set()
    for ids, _, shared in decoded.values():
        held.update(ids[shared:])
    return held


class OnBases(Generic[Made]):
    """A list made of each reference list `decode_many` decoded, each made only past
    the head it shares with its base: the head is what its base's list became.

    `make` turns ids into items (messages, what a report writes of them). Consecutive
    contexts of a session share all but their last messages, so a session's lists
    cost its new messages and a copy of each head at C speed, not every message of
    every context again. Lists are made when first asked for, in that order (a base
    before what builds on it), and shared with every caller: callers only read them.
    """

    def __init__(self, decoded: Decoded, make: Callable[[list[int]], list[Made]]) -> None:
        self._decoded = decoded
        self._make = make
        self._made: dict[bytes, list[Made]] = {}

    def __getitem__(self, data: bytes) -> list[Made]:
        made = self._made.get(data)
        if made is not None:
            return made
        waiting = [data]  # the lists to make, each made on the one that follows it here
        base = self._decoded[data][1]
        while base is not None and base not in self._made:
            waiting.append(base)
            base = self._decoded[base][1]
        for key in reversed(waiting):
            ids, base, shared = self._decoded[key]
            made = self._made[base][:shared] if base is not None else []
            made += self._make(ids[shared:])
            self._made[key] = made
        return self._made[data]
