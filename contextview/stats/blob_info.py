"""How the workers store what they work out once per distinct content (``cv_blob_info``).

One row a blob holds its tokens in each encoding it was counted with and its key
entities with their keys (``entity_key``).

Tokens: the encodings sessions nearly always use have a column each (null until
counted); any other is a key of the JSON object ``tokens_other``.

Entities are nearly always substrings of the text they were extracted from, in
order of appearance, so they are stored as where they are in that text (the
blob's text, which every reader holds when it reads them):

- a head byte, whose low three bits give the width of every number that follows
  (1, 2 or 4 bytes, little-endian) and whose bit ``_TAIL`` says a tail follows;
- with a tail, the number of entities (4 bytes);
- a pair of numbers per entity: the characters from the start of the previous
  entity to its start (entities follow one another in the text, an identifier
  found inside a path or URL starting within it), then its length. An entity not
  found in the text from there is the pair (0, 0), and its text is in the tail;
- the tail: a JSON array of those entities' texts and of the keys that are not
  their entity lowercased (most are), by the entity's position.

Most texts need one byte a number: two bytes an entity, where their JSON took 16.
"""

from __future__ import annotations

import re
import struct
import sys
from array import array
from collections.abc import Iterator
from itertools import accumulate

import orjson

# Encodings with a column of their own: the default and current OpenAI models'.
TOKEN_COLUMNS = {"cl100k_base": "tokens_cl100k", "o200k_base": "tokens_o200k"}
# What an encoding kept in ``tokens_other`` may be called (it is written into SQL).
_ENCODING_NAME = re.compile(r"[a-z0-9_]{1,64}")

_TAIL = 8
_TYPECODES = {1: "B", 2: "H", 4: "I"}
_SWAP = sys.byteorder != "little"


def tokens_sql(encoding: str, row: str = "i") -> str:
    """The SQL value of the tokens in `encoding` of `row` (a cv_blob_info row), null
    when they were not counted in it."""
    column = TOKEN_COLUMNS.get(encoding)
    if column is not None:
        return f"{row}.{column}"
    return f"({row}.tokens_other->>'{_checked(encoding)}')::int"


def tokens_write_sql(encoding: str, tokens: str) -> tuple[str, str, str]:
    """How to write `tokens` (an SQL value, null when not counted) in `encoding`
    into cv_blob_info: (column, value to insert, assignment on conflict), the
    assignment keeping what the row held."""
    column = TOKEN_COLUMNS.get(encoding)
    if column is not None:
        return column, tokens, f"{column} = coalesce(cv_blob_info.{column}, EXCLUDED.{column})"
    name = _checked(encoding)
    value = f"CASE WHEN {tokens} IS NOT NULL THEN jsonb_build_object('{name}', {tokens}) END"
    merged = "EXCLUDED.tokens_other || coalesce(cv_blob_info.tokens_other, '{}')"
    return (
        "tokens_other",
        value,
        f"tokens_other = coalesce({merged}, cv_blob_info.tokens_other)",
    )


def _checked(encoding: str) -> str:
    if not _ENCODING_NAME.fullmatch(encoding):
        raise ValueError(f"not an encoding name: {encoding!r}")
    return encoding


def entities_pack(entities: list[str], keys: list[str], text: str) -> bytes:
    """The stored form of `text`'s entities and their keys (see the module)."""
    numbers: list[int] = []
    literals: list[str] = []
    start = 0
    for entity in entities:
        at = text.find(entity, start) if entity else -1
        if at < 0:
            numbers += (0, 0)
            literals.append(entity)
        else:
            numbers += (at - start, len(entity))
            start = at
    top = max(numbers, default=0)
    width = 1 if top < 1 << 8 else 2 if top < 1 << 16 else 4
    packed = array(_TYPECODES[width], numbers)
    if _SWAP:
        packed.byteswap()
    own_keys = {
        str(n): key
        for n, (entity, key) in enumerate(zip(entities, keys, strict=True))
        if key != entity.lower()
    }
    if not literals and not own_keys:
        return bytes((width,)) + packed.tobytes()
    return (
        struct.pack("<BI", width | _TAIL, len(entities))
        + packed.tobytes()
        + orjson.dumps([literals, own_keys])
    )


def entities_unpack(
    data: bytes, text: str, keys: list[str] | None = None
) -> tuple[list[str], list[str]]:
    """(entities, keys) from what `entities_pack` gave for `text`; `keys`, when the
    caller has them already (`entity_keys_unpack` of the same), are not cut again."""
    if data[0] == 1:  # one byte a number and no tail: nearly always
        entities = _cut(text, data)
        return entities, list(map(str.lower, entities)) if keys is None else keys
    starts, lengths, literals, own_keys = _spans(data)
    entities = [text[at : at + n] for at, n in zip(starts, lengths, strict=True)]
    if literals:
        held = iter(literals)
        entities = [entity or next(held) for entity in entities]
    if keys is not None:
        return entities, keys
    keys = list(map(str.lower, entities))
    for n, key in own_keys.items():
        keys[int(n)] = key
    return entities, keys


def entity_keys_unpack(data: bytes, text: str) -> list[str]:
    """The keys alone of `entities_unpack` (what most readers want): for an ASCII
    text, cut from the text lowercased, without the entities."""
    if data[0] == 1 and text.isascii():
        return _cut(text.lower(), data)
    return entities_unpack(data, text)[1]


def _cut(source: str, data: bytes) -> list[str]:
    """The spans of a form with one byte a number and no tail, cut from `source`."""
    starts = accumulate(data[1::2])
    return [source[at : at + n] for at, n in zip(starts, data[2::2], strict=True)]


def _spans(data: bytes) -> tuple[Iterator[int], array[int], list[str], dict[str, str]]:
    """Where the entities start, their lengths, the literal entities and the own keys."""
    head = data[0]
    width = head & 7
    literals: list[str] = []
    own_keys: dict[str, str] = {}
    if head & _TAIL:
        start = 5
        end = start + 2 * width * struct.unpack_from("<I", data, 1)[0]
        literals, own_keys = orjson.loads(data[end:])
    else:
        start, end = 1, len(data)
    numbers = array(_TYPECODES[width], data[start:end])
    if _SWAP:
        numbers.byteswap()
    return accumulate(numbers[::2]), numbers[1::2], literals, own_keys
