"""A compact encoding of a context as the list of its messages' database ids.

A step stores its contexts as references to content-addressed messages. Ids of
one session grow together, so a context is mostly increasing ids a small step
apart: stored as zigzag varints of successive differences, most cost one byte.
"""

from __future__ import annotations

from collections.abc import Iterable

_MAX_ID = (1 << 63) - 1


def encode_refs(ids: Iterable[int]) -> bytes:
    out = bytearray()
    previous = 0
    for value in ids:
        if not 0 < value <= _MAX_ID:
            raise ValueError(f"reference {value!r} is not a positive 64-bit id")
        delta = value - previous
        previous = value
        # zigzag: small steps back cost as little as small steps forward
        z = delta << 1 if delta >= 0 else (-delta << 1) - 1
        while z > 0x7F:
            out.append((z & 0x7F) | 0x80)
            z >>= 7
        out.append(z)
    return bytes(out)


def decode_refs(data: bytes) -> list[int]:
    ids: list[int] = []
    value = 0
    z = 0
    shift = 0
    for byte in data:
        z |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        value += (z >> 1) if not z & 1 else -((z + 1) >> 1)
        ids.append(value)
        z = 0
        shift = 0
    if shift:
        raise ValueError("truncated reference list")
    return ids
