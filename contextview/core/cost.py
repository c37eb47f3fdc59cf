"""What a model call cost, from its provider's usage and a price table.

Prices are US dollars per million tokens: uncached input, cached input (cache
reads) and output; cache writes are charged at the input price unless a model
gives its own ``cache_write``. The table below is the default (list prices as
published by the providers when it was written; check them before relying on
a figure); the ``MODEL_PRICES`` setting overrides or adds models.

A call's model is found by its exact name, else without a provider prefix
(``openai/gpt-4o``), else by the longest table name it starts with followed by a
dash (``gpt-4o-2024-08-06`` is ``gpt-4o``, ``gpt-4o-mini-...`` is ``gpt-4o-mini``).
A model not found has no cost: a guess would read as a figure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contextview.core.usage import UsageCounts, usage_counts

PER = 1_000_000


@dataclass(frozen=True)
class Price:
    input: float
    cached_input: float
    output: float
    cache_write: float | None = None  # None: the input price

    def of(self, counts: UsageCounts) -> float:
        write = self.input if self.cache_write is None else self.cache_write
        return (
            counts.input * self.input
            + counts.cache_read * self.cached_input
            + counts.cache_write * write
            + counts.output * self.output
        ) / PER


PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 1.25, 10.00),
    "gpt-4o-mini": Price(0.15, 0.075, 0.60),
    "gpt-4.1": Price(2.00, 0.50, 8.00),
    "gpt-4.1-mini": Price(0.40, 0.10, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.025, 0.40),
    "o3": Price(2.00, 0.50, 8.00),
    "o4-mini": Price(1.10, 0.275, 4.40),
    "gpt-5": Price(1.25, 0.125, 10.00),
    "gpt-5-mini": Price(0.25, 0.025, 2.00),
    "claude-opus-4": Price(15.00, 1.50, 75.00, cache_write=18.75),
    # Opus 4.5 and later came at a third of the earlier Opus price.
    "claude-opus-4-5": Price(5.00, 0.50, 25.00, cache_write=6.25),
    "claude-opus-4-6": Price(5.00, 0.50, 25.00, cache_write=6.25),
    "claude-haiku-4-5": Price(1.00, 0.10, 5.00, cache_write=1.25),
    "claude-sonnet-4": Price(3.00, 0.30, 15.00, cache_write=3.75),
    "claude-3-7-sonnet": Price(3.00, 0.30, 15.00, cache_write=3.75),
    "claude-3-5-sonnet": Price(3.00, 0.30, 15.00, cache_write=3.75),
    "claude-3-5-haiku": Price(0.80, 0.08, 4.00, cache_write=1.00),
}


def price_for(model: str, prices: Mapping[str, Price]) -> tuple[str, Price] | None:
    """The table's name and price for `model`, or None."""
    for name in (model, model.rsplit("/", 1)[-1]):
        if name in prices:
            return name, prices[name]
    bare = model.rsplit("/", 1)[-1]
    for name in sorted(prices, key=len, reverse=True):
        if bare.startswith(name + "-"):
            return name, prices[name]
    return None


@dataclass(frozen=True)
class Cost:
    usd: float | None  # None: the model has no price
    model: str  # the call's model as sent
    priced_as: str = ""  # the table's name it was priced as


def call_cost(
    *, usage: Mapping[str, Any] | None, model: str, prices: Mapping[str, Price]
) -> Cost | None:
    """What one call cost; None without usage."""
    counts = usage_counts(usage)
    if counts is None:
        return None
    found = price_for(model, prices) if model else None
    if found is None:
        return Cost(None, model)
    name, price = found
    return Cost(price.of(counts), model, name)


@dataclass(frozen=True)
class Total:
    usd: float
    priced: int  # calls with a price
    unpriced: int  # calls with usage but no price
    unknown_models: tuple[str, ...]


# What `summed_cost` reads of each model's sums (a session's ``usage_by_model``).
_SUMMED = ("calls", "input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens")


def total_cost(
    calls: list[tuple[str, Mapping[str, Any] | None]], prices: Mapping[str, Price]
) -> Total | None:
    """The summed cost of (model, usage) calls; None when none reported usage: their
    usage summed by model and priced once (`summed_cost`), a price being linear."""
    by_model: dict[str, dict[str, int]] = {}
    for model, usage in calls:
        counts = usage_counts(usage)
        if counts is None:
            continue
        sums = by_model.setdefault(model, dict.fromkeys(_SUMMED, 0))
        sums["calls"] += 1
        sums["input_tokens"] += counts.input
        sums["cache_read_tokens"] += counts.cache_read
        sums["cache_write_tokens"] += counts.cache_write
        sums["output_tokens"] += counts.output
    return summed_cost(by_model, prices)


def summed_cost(
    by_model: Mapping[str, Mapping[str, int]], prices: Mapping[str, Price]
) -> Total | None:
    """`total_cost` from the calls' usage summed by model (a session's
    ``usage_by_model``: calls and counts per model): the same figure, since a price is
    linear in the counts, without reading every call."""
    usd, priced, unpriced, unknown = 0.0, 0, 0, []
    for model, sums in by_model.items():
        calls = sums.get("calls", 0)
        found = price_for(model, prices) if model else None
        if found is None:
            unpriced += calls
            unknown.append(model or "(none)")
            continue
        counts = UsageCounts(
            input=sums.get("input_tokens", 0),
            cache_read=sums.get("cache_read_tokens", 0),
            cache_write=sums.get("cache_write_tokens", 0),
            output=sums.get("output_tokens", 0),
        )
        usd += found[1].of(counts)
        priced += calls
    if not priced and not unpriced:
        return None
    return Total(usd, priced, unpriced, tuple(unknown))


def prices_from_json(text: str) -> dict[str, Price]:
    """Prices from a JSON object ``{model: {"input", "cached_input", "output"[, "cache_write"]}}``.

    Raises ValueError naming the model and field that is wrong.
    """
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ValueError("must be a JSON object of models")
    prices = {}
    for model, entry in raw.items():
        if not isinstance(entry, dict):
            raise ValueError(f"{model}: must be an object with input, cached_input, output")
        values: dict[str, float | None] = {}
        for field in ("input", "cached_input", "output", "cache_write"):
            value = entry.get(field)
            if value is None and field == "cache_write":
                values[field] = None
                continue
            if value is None:
                raise ValueError(f"{model}.{field}: a price per million tokens is required")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(
                    f"{model}.{field}: must be a price per million tokens (a number), not {value!r}"
                )
            if value < 0 or not math.isfinite(value):
                raise ValueError(f"{model}.{field}: must be a finite price of 0 or more")
            values[field] = float(value)
        unknown = set(entry) - {"input", "cached_input", "output", "cache_write"}
        if unknown:
            raise ValueError(f"{model}: unknown field {sorted(unknown)[0]}")
        prices[model] = Price(
            input=values["input"] or 0.0,
            cached_input=values["cached_input"] or 0.0,
            output=values["output"] or 0.0,
            cache_write=values["cache_write"],
        )
    return prices


def usd_text(value: float) -> str:
    """Dollars as the pages and reports write them: cents for a dollar or more, four
    decimals below (a call costs little)."""
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"
