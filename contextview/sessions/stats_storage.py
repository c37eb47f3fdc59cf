"""How a step's statistics are stored: the one place that packs and unpacks them.

A step's ``stats`` (``core.stats.step_stats`` and what the session walk adds) is
about a kilobyte of jsonb, mostly defaults (empty lists, nulls, a reward of 0.0),
session constants (the encoding and its note) and before/after pairs that are
equal. PostgreSQL compresses a value only once its row passes about 2 KB, so those
bytes were stored as they are, once per step: the largest table the statistics
workers write. ``pack`` says the same in about a third of the space; ``unpack``
gives back exactly the dict that was packed, its keys in the order jsonb returns
them (shortest first, then bytewise), so every reader sees what it saw before.

The packed form, recognized by its ``t``:

- ``t`` tokens: N when before == after, else [before, after]
- ``p`` partitions: {name: N | [before, after]} (absent: {})
- ``o`` occupancy, ``e`` reported_error: absent when both are null, X when both
  are the same X, else [before, after]
- ``r`` reward (absent: 0.0), ``b`` reward_base (absent: the reward)
- ``c`` encoding: its index in ``ENCODINGS``, or its name
- ``n`` encoding_note "N is not available offline; counted with <encoding>"
- ``w`` window, ``u`` unseen_tokens, ``m`` missing_pinned and ``g``
  regretted_reloads (absent: [])
- ``ops``: each operation's statistics, packed: ``x`` tokens_in and tokens_out
  (N when equal, else [in, out]); ``q`` the ratio (absent: null, true: out / in);
  ``result_id`` absent when null; ``entities`` without ``kept`` (total minus
  the lost ones), ``total`` (absent: as many as lost) or ``needed_later``
  (absent: []); when the worker knew which contents the operation took in
  (``OpEntities``), ``lost`` is stored as ``of``, those contents' blob pks, and
  ``at``, where in their entities one after another the lost ones are (absent:
  all of them, in order; see ``_positions``)

The stored value keeps as jsonb only what SQL reads inside it (the chart, the
flagged steps' index): ``t``, ``flags`` and ``u``; every other key of the
packed form is under ``z``, one JSON text with its keys sorted, which takes
half the space of the same keys as jsonb (no per-key and per-number headers).
SQL that needs a key of it parses the text (``(stats ->> 'z')::jsonb``: the
chart's partitions at its peaks, the step a worker resumes after), the worker's
restore of earlier losses reads it in Python. Read back, ``z``'s objects get
jsonb's key order, so a reader sees what it saw when every key was jsonb. Keys
not named above (``needs``, ``refetches``, ``closed``, ``waste``,
``folded_calls``, an operation's ``targets`` and ``inferred``, ``new_tool`` and
``new_call`` when not null, ...) are kept as they are. A dict that is not a
step's statistics (a failed step's ``{"error": ...}``) is stored as it is,
wrapped as ``{"~": dict}`` when it has a ``t`` or ``~`` of its own.

An operation's lost entities stored as positions are a part of its originals'
entities, which are stored once per content (``stats.services``): a reader gets
them back from there (``OpEntities``, ``resolve``), and so from the same
extraction the worker measured them with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from typing import Any

import orjson

from contextview.core.entities import entity_key

# Stored as their index: append only, never reorder.
ENCODINGS = ("cl100k_base", "o200k_base", "p50k_base", "r50k_base", "p50k_edit", "gpt2")
_ENCODING_CODES = {name: code for code, name in enumerate(ENCODINGS)}
# ``core.tokens.resolve_encoding``'s note for an encoding that is not installed.
_OFFLINE = " is not available offline; counted with "

_REQUIRED = (
    "tokens",
    "partitions",
    "occupancy",
    "reported_error",
    "ops",
    "flags",
    "reward",
    "encoding",
    "missing_pinned",
    "regretted_reloads",
    "new_tool",
    "new_call",
    "reward_base",
)
_REQUIRED_KEYS = frozenset(_REQUIRED)
_SHORT = frozenset("tpoerbcnwumgz~")
# What SQL reads inside the stored value stays jsonb; the rest is one JSON text.
_AS_JSONB = ("t", "flags", "u")
_RENAMED = {"window": "w", "unseen_tokens": "u"}
_EMPTY_LISTS = (("missing_pinned", "m"), ("regretted_reloads", "g"), ("flags", "flags"))
_NULL_PAIRS = (("occupancy", "o"), ("reported_error", "e"))
_PAIR_KEYS = frozenset(("before", "after"))
_NULLS = ("new_tool", "new_call")
_NULL_PAIR: dict[str, Any] = {"after": None, "before": None}


def _jsonb_order(key: str) -> tuple[int, bytes]:
    raw = key.encode()
    return len(raw), raw


# The keys a step's statistics have, in jsonb's order: an unpacked dict is built
# in it (a dict with other keys is sorted).
_KNOWN = sorted(
    (*_REQUIRED, "encoding_note", *_RENAMED, "waste", "needs", "closed", "refetches",
     "folded_calls", "estimated", "estimated_tokens"),
    key=_jsonb_order,
)  # fmt: skip
_KNOWN_KEYS = frozenset(_KNOWN)

# An operation's statistics (``core.stats._op_stats``), and its entities.
_OP_KEYS = frozenset(("op", "targets", "result_id", "tokens_in", "tokens_out", "ratio", "entities"))
_OP_SHORT = frozenset("xq")
_ENTITY_KEYS = frozenset(("total", "kept", "lost", "needed_later"))


class OpEntities(dict):  # type: ignore[type-arg]
    """An operation's ``entities`` whose lost ones come from contents stored apart.

    ``of`` are the blob pks of what the operation took in and ``pool`` their
    entities one after another (``extract_entities`` of each content), the lost
    ones being among them: ``pack`` stores where, not the entities a second time.
    Read back, ``pool`` is None until ``resolve`` has filled in ``lost``, ``kept``
    and ``total`` from ``packed`` (the stored form).
    """

    __slots__ = ("of", "pool", "packed", "lost_keys")

    def __init__(
        self,
        entities: Mapping[str, Any],
        *,
        of: Sequence[int],
        pool: list[str] | None,
        packed: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(entities)
        self.of = list(of)
        self.pool = pool
        self.packed = packed
        # the ``entity_key`` of each lost entity, when ``resolve`` was given them
        self.lost_keys: list[str] | None = None


def pack(stats: dict[str, Any], *, text: bool = True) -> dict[str, Any]:
    """The form of `stats` that ``cv_step_stats.stats`` stores (`text`: False gives
    the form of migration 0007, every key as jsonb)."""
    packed = _pack(stats)
    if packed is None:
        return {"~": stats} if "t" in stats or "~" in stats else stats
    if not text:
        return packed
    out = {key: packed.pop(key) for key in _AS_JSONB if key in packed}
    if packed:
        # Keys sorted: equal statistics are the same text, however they were built
        # (a step computed again keeps its row when nothing changed).
        out["z"] = orjson.dumps(packed, option=orjson.OPT_SORT_KEYS).decode()
    return out


def packed_json(stats: dict[str, Any]) -> str:
    """`stats` packed, as the JSON text that SQL writing ``cv_step_stats.stats`` binds."""
    return orjson.dumps(pack(stats)).decode()


def is_packed(stored: dict[str, Any]) -> bool:
    """Whether a stored value is in ``pack``'s form (rather than written before it)."""
    return "t" in stored or "~" in stored


def unpack(stored: Any, *, ordered: bool = True) -> Any:
    """The statistics that `stored` (``pack``'s output, as read back) stands for; not
    `ordered`, the keys of what was kept as text are left in its order (a reader
    that never shows them, such as the worker, need not sort them)."""
    if type(stored) is not dict:
        return stored
    if "t" in stored:
        return _unpack(from_text(stored, ordered=ordered))
    if "~" in stored:
        return stored["~"]
    return stored


def from_text(stored: dict[str, Any], *, ordered: bool = True) -> dict[str, Any]:
    """``pack``'s form with the keys kept as text (``z``) read back as jsonb gives them
    (or, not `ordered`, as the text has them)."""
    text = stored.get("z")
    if type(text) is not str:
        return stored
    out = {key: value for key, value in stored.items() if key != "z"}
    loaded = orjson.loads(text)
    out.update(_jsonb_sorted(loaded) if ordered else loaded)
    return out


def _jsonb_sorted(value: Any) -> Any:
    """`value` with its objects' keys in jsonb's order, as a jsonb value is read."""
    if type(value) is dict:
        return {key: _jsonb_sorted(value[key]) for key in sorted(value, key=_jsonb_order)}
    if type(value) is list:
        return [_jsonb_sorted(item) for item in value]
    return value


def _pair(value: Any) -> tuple[Any, Any] | None:
    """(before, after) of exactly {"before": x, "after": y}."""
    if type(value) is not dict or value.keys() != _PAIR_KEYS:
        return None
    return value["before"], value["after"]


def _int_pair(value: Any) -> int | list[int] | None:
    """A pair of ints, packed: one int when they are equal."""
    if type(value) is not dict or value.keys() != _PAIR_KEYS:
        return None
    before, after = value["before"], value["after"]
    if type(before) is not int or type(after) is not int:
        return None
    return before if before == after else [before, after]


def _pack(stats: dict[str, Any]) -> dict[str, Any] | None:
    """The packed form, or None when `stats` is not shaped as a step's statistics."""
    keys = stats.keys()
    if not keys >= _REQUIRED_KEYS or not keys.isdisjoint(_SHORT):
        return None
    encoding = stats["encoding"]
    partitions = stats["partitions"]
    tokens = _int_pair(stats["tokens"])
    if tokens is None or type(encoding) is not str or type(partitions) is not dict:
        return None
    out: dict[str, Any] = {"t": tokens, "c": _ENCODING_CODES.get(encoding, encoding)}
    if partitions:
        p = {}
        for name, value in partitions.items():
            if (packed := _int_pair(value)) is None:
                return None
            p[name] = packed
        out["p"] = p
    for key, short in _NULL_PAIRS:
        pair = _pair(stats[key])
        if pair is None:
            return None
        before, after = pair
        if before is None and after is None:
            continue
        same = type(before) is type(after) and before == after and type(before) is not list
        out[short] = before if same else [before, after]
    reward, base = stats["reward"], stats["reward_base"]
    if type(reward) is not float or reward != 0.0:
        out["r"] = reward
    if type(base) is not type(reward) or base != reward:
        out["b"] = base
    for key, short in _EMPTY_LISTS:
        value = stats[key]
        if type(value) is not list or value:
            out[short] = value
    for key in _NULLS:
        if (value := stats[key]) is not None:
            out[key] = value
    ops = stats["ops"]
    if type(ops) is not list:
        out["ops"] = ops
    elif ops:
        packed_ops = []
        for op in ops:
            if (packed_op := _pack_op(op)) is None:
                return None
            packed_ops.append(packed_op)
        out["ops"] = packed_ops
    for key in keys - _REQUIRED_KEYS:  # a few: the order does not matter to jsonb
        value = stats[key]
        if key == "encoding_note":
            suffix = _OFFLINE + encoding
            if type(value) is str and value.endswith(suffix):
                out["n"] = value[: -len(suffix)]
            else:
                out[key] = value
        else:
            out[_RENAMED.get(key, key)] = value
    return out


def _pack_op(op: Any) -> dict[str, Any] | None:
    """An operation's statistics packed, or None when not shaped as such."""
    if type(op) is not dict:
        return None
    keys = op.keys()
    if not keys >= _OP_KEYS or not keys.isdisjoint(_OP_SHORT):
        return None
    entities, ratio = op["entities"], op["ratio"]
    tokens_in, tokens_out = op["tokens_in"], op["tokens_out"]
    if type(entities) is OpEntities and entities.pool is None:
        raise ValueError("statistics read back are packed again before their losses are read")
    if type(entities) not in (dict, OpEntities) or entities.keys() != _ENTITY_KEYS:
        return None
    total, kept, lost = entities["total"], entities["kept"], entities["lost"]
    if type(total) is not int or type(kept) is not int or type(lost) is not list:
        return None
    if type(tokens_in) is not int or type(tokens_out) is not int or ratio is True:
        return None
    out: dict[str, Any] = {"op": op["op"], "targets": op["targets"]}
    packed_entities: dict[str, Any] = {"lost": lost}
    if lost and type(entities) is OpEntities and entities.pool is not None:
        with suppress(TypeError):  # not all texts: kept as a list
            at = _positions(lost, entities.pool)
            packed_entities = {"of": entities.of} if at is None else {"of": entities.of, "at": at}
    if total != len(lost):
        packed_entities["total"] = total
    if kept != total - len(lost):
        packed_entities["kept"] = kept
    if (needed := entities["needed_later"]) != [] or type(needed) is not list:
        packed_entities["needed_later"] = needed
    out["entities"] = packed_entities
    out["x"] = tokens_in if tokens_in == tokens_out else [tokens_in, tokens_out]
    if ratio is not None:
        derived = type(ratio) is float and tokens_in and ratio == tokens_out / tokens_in
        out["q"] = True if derived else ratio
    if (result_id := op["result_id"]) is not None:
        out["result_id"] = result_id
    for key in keys - _OP_KEYS:
        out[key] = op[key]
    return out


def _positions(lost: list[str], pool: list[str]) -> list[int | str] | None:
    """Where in `pool` the `lost` entities are, or None when they are all of it in order.

    A number N >= 0 is pool[N]; a negative -K after it, the K entities that follow
    N in the pool (a drop loses everything: [0, -559] is 560 entities in order); a
    string stands for itself (a pinned text, which no content's entities hold).
    Lost ones in the pool's order (a summary's) are ["-", the positions not lost].
    """
    if lost == pool:
        return None  # a drop: all of them, as they came
    # The first position of each entity (the later ones overwritten in C).
    first = dict(zip(reversed(pool), range(len(pool) - 1, -1, -1), strict=True))
    found = list(map(first.get, lost))
    if None not in found and found == sorted(set(found)):  # type: ignore[type-var]
        # In the pool's order (a summary's): the positions not lost, after a "-".
        return ["-", *sorted(set(range(len(pool))).difference(found))]
    at: list[int | str] = []
    last = -2
    for entity, position in zip(lost, found, strict=True):
        if position is None:
            if type(entity) is not str or (not at and entity == "-"):
                raise TypeError("only a text (not a leading '-') stands for itself")
            at.append(entity)
            last = -2
            continue
        i = position
        if i == last + 1:
            end = at[-1]
            if type(end) is int and end < 0:
                at[-1] = end - 1
            else:
                at.append(-1)
        else:
            at.append(i)
        last = i
    return at


def _at_positions(
    at: list[int | str] | None, pool: list[str], literal: Callable[[str], str] = str
) -> list[str]:
    """The entities `at` (``_positions``) stands for, from `pool` (or what stands in
    `pool`'s place for each, an entity written out in `at` given as `literal` of it)."""
    if at is None:
        return list(pool)
    if at and at[0] == "-":
        skipped = set(at[1:])
        return [entity for i, entity in enumerate(pool) if i not in skipped]
    out: list[str] = []
    last = 0
    for x in at:
        if type(x) is str:
            out.append(literal(x))
        elif x >= 0:  # type: ignore[operator]
            out.append(pool[x])  # type: ignore[index]
            last = x  # type: ignore[assignment]
        else:
            out += pool[last + 1 : last + 1 - x]  # type: ignore[operator]
            last -= x  # type: ignore[operator]
    return out


def unresolved(stats: Any) -> list[OpEntities]:
    """The operations' entities in unpacked `stats` whose lost ones are still to be
    read (``resolve``)."""
    if type(stats) is not dict or type(ops := stats.get("ops")) is not list:
        return []
    return [
        entities
        for op in ops
        if type(op) is dict
        and type(entities := op.get("entities")) is OpEntities
        and entities.pool is None
    ]


def resolve(
    todo: Iterable[OpEntities],
    pools: Mapping[int, list[str]],
    key_pools: Mapping[int, list[str]] | None = None,
) -> None:
    """Fill in the lost entities of `todo` (``unresolved``), given each blob's
    entities in `pools`; with their keys too (``lost_keys``) given each blob's
    entities' keys in `key_pools`."""
    for entities in todo:
        pool = [entity for pk in entities.of for entity in pools[pk]]
        packed = entities.packed or {}
        lost = _at_positions(packed.get("at"), pool)
        if key_pools is not None:
            keys = [key for pk in entities.of for key in key_pools[pk]]
            entities.lost_keys = _at_positions(packed.get("at"), keys, entity_key)
        total = packed.get("total", len(lost))
        entities["kept"] = packed.get("kept", total - len(lost))
        entities["lost"] = lost
        entities["total"] = total
        entities.pool = pool


def blobs_of(todo: Iterable[OpEntities]) -> set[int]:
    """The blob pks whose entities `resolve` needs for `todo`."""
    return {pk for entities in todo for pk in entities.of}


def unpack_entities(entities: dict[str, Any]) -> dict[str, Any]:
    """An operation's ``entities`` from their packed form; those whose lost ones are
    stored as positions (``of``) are an ``OpEntities`` for ``resolve`` to fill in."""
    needed = entities.get("needed_later", [])
    if "of" in entities:
        # Filled in by ``resolve``, in this order.
        return OpEntities(
            {"kept": 0, "lost": [], "total": 0, "needed_later": needed},
            of=entities["of"],
            pool=None,
            packed=entities,
        )
    lost = entities["lost"]
    total = entities.get("total", len(lost))
    return {
        "kept": entities.get("kept", total - len(lost)),
        "lost": lost,
        "total": total,
        "needed_later": needed,
    }


def _unpack_op(packed: dict[str, Any]) -> dict[str, Any]:
    x = packed["x"]
    tokens_in, tokens_out = (x[0], x[1]) if type(x) is list else (x, x)
    ratio = packed.get("q")
    if ratio is True:
        ratio = tokens_out / tokens_in
    unpacked = unpack_entities(packed["entities"])
    out = {
        "op": packed["op"],
        "ratio": ratio,
        "targets": packed["targets"],
        "entities": unpacked,
    }
    extra = None
    for key, value in packed.items():
        if key not in _OP_KEYS and key not in _OP_SHORT:
            out[key] = value
            extra = extra or key != "inferred"
    out["result_id"] = packed.get("result_id")
    out["tokens_in"] = tokens_in
    out["tokens_out"] = tokens_out
    if extra:
        return dict(sorted(out.items(), key=lambda item: _jsonb_order(item[0])))
    return out


def _unpair(value: Any) -> dict[str, Any]:
    if type(value) is list:
        return {"after": value[1], "before": value[0]}
    return {"after": value, "before": value}


def _unpack(packed: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "tokens": _unpair(packed["t"]),
        "partitions": {name: _unpair(v) for name, v in packed.get("p", {}).items()},
        "occupancy": _unpair(packed["o"]) if "o" in packed else dict(_NULL_PAIR),
        "reported_error": _unpair(packed["e"]) if "e" in packed else dict(_NULL_PAIR),
    }
    reward = out["reward"] = packed.get("r", 0.0)
    out["reward_base"] = packed.get("b", reward)
    encoding = packed["c"]
    out["encoding"] = encoding = ENCODINGS[encoding] if type(encoding) is int else encoding
    for key, short in _EMPTY_LISTS:
        out[key] = packed.get(short, [])
    ops = packed.get("ops", [])
    out["ops"] = [_unpack_op(op) for op in ops] if type(ops) is list else ops
    for key in _NULLS:
        out[key] = packed.get(key)
    if "n" in packed:
        out["encoding_note"] = packed["n"] + _OFFLINE + encoding
    for key, short in _RENAMED.items():
        if short in packed:
            out[key] = packed[short]
    known = True
    for key, value in packed.items():
        if key not in _SHORT and key not in out:
            out[key] = value
            known = known and key in _KNOWN_KEYS
    if known:
        return {key: out[key] for key in _KNOWN if key in out}
    return dict(sorted(out.items(), key=lambda item: _jsonb_order(item[0])))
