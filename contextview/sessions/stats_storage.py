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

SQL reads some keys inside the stored value (the chart, the flagged steps' index,
what the worker resumes from), so these keep their names and form: ``flags``
and ``ops`` (absent when empty), ``new_tool`` and ``new_call`` (absent when
null), and ``needs``, ``refetches``, ``closed``, ``waste``, ``folded_calls``
like any key not named above. A dict that is not a step's statistics (a failed
step's ``{"error": ...}``) is stored as it is, wrapped as ``{"~": dict}`` when
it has a ``t`` or ``~`` of its own.
"""

from __future__ import annotations

from typing import Any

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
_SHORT = frozenset("tpoerbcnwumg~")
_RENAMED = {"window": "w", "unseen_tokens": "u"}
_EMPTY_LISTS = (
    ("missing_pinned", "m"),
    ("regretted_reloads", "g"),
    ("ops", "ops"),
    ("flags", "flags"),
)
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


def pack(stats: dict[str, Any]) -> dict[str, Any]:
    """The form of `stats` that ``cv_step_stats.stats`` stores."""
    packed = _pack(stats)
    if packed is not None:
        return packed
    return {"~": stats} if "t" in stats or "~" in stats else stats


def unpack(stored: Any) -> Any:
    """The statistics that `stored` (``pack``'s output, as read back) stands for."""
    if type(stored) is not dict:
        return stored
    if "t" in stored:
        return _unpack(stored)
    if "~" in stored:
        return stored["~"]
    return stored


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
