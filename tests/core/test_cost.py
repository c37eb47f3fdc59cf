from __future__ import annotations

import pytest

from contextview.core.cost import (
    PRICES,
    Price,
    call_cost,
    price_for,
    prices_from_json,
    summed_cost,
    total_cost,
)
from contextview.core.stats import usage_before

USAGE = {"input_tokens": 1000, "cache_read_tokens": 2000, "output_tokens": 500}


def test_it_prices_input_cached_input_and_output_apart() -> None:
    cost = call_cost(usage=USAGE, model="gpt-4o", prices=PRICES)
    assert cost is not None and cost.usd == pytest.approx(0.01)  # 2.5e-3 + 2.5e-3 + 5e-3
    # Cache writes at the model's own write price, else at the input price.
    writes = {"input_tokens": 0, "cache_write_tokens": 1_000_000}
    assert call_cost(usage=writes, model="claude-sonnet-4", prices=PRICES).usd == 3.75
    assert call_cost(usage=writes, model="gpt-4o", prices=PRICES).usd == 2.50


def test_it_reads_openai_and_anthropic_usage_the_same() -> None:
    openai = {"prompt_tokens": 3000, "completion_tokens": 500,
              "prompt_tokens_details": {"cached_tokens": 2000}}  # fmt: skip
    anthropic = {"input_tokens": 1000, "cache_read_input_tokens": 2000, "output_tokens": 500}
    costs = [call_cost(usage=u, model="gpt-4o", prices=PRICES).usd for u in (openai, anthropic)]
    assert costs == [pytest.approx(0.01)] * 2
    assert usage_before(openai) == usage_before(anthropic) == usage_before(USAGE) == 3000


def test_it_finds_dated_and_prefixed_model_names() -> None:
    assert price_for("gpt-4o-2024-08-06", PRICES)[0] == "gpt-4o"
    assert price_for("gpt-4o-mini-2024-07-18", PRICES)[0] == "gpt-4o-mini"
    assert price_for("openai/gpt-4.1", PRICES)[0] == "gpt-4.1"
    assert price_for("claude-sonnet-4-20250514", PRICES)[0] == "claude-sonnet-4"
    assert price_for("gpt-4oo", PRICES) is None


def test_it_prices_each_claude_generation_as_its_own() -> None:
    assert price_for("claude-opus-4-1-20250805", PRICES)[0] == "claude-opus-4"
    assert price_for("claude-opus-4-6", PRICES)[0] == "claude-opus-4-6"
    assert price_for("claude-opus-4-5-20251101", PRICES)[0] == "claude-opus-4-5"
    assert price_for("claude-haiku-4-5-20251001", PRICES)[0] == "claude-haiku-4-5"
    assert price_for("claude-sonnet-4-5", PRICES)[0] == "claude-sonnet-4"


def test_it_gives_no_cost_for_an_unknown_model_and_none_without_usage() -> None:
    unknown = call_cost(usage=USAGE, model="house-llm-7b", prices=PRICES)
    assert unknown is not None and unknown.usd is None and unknown.model == "house-llm-7b"
    assert call_cost(usage=None, model="gpt-4o", prices=PRICES) is None
    total = total_cost([("gpt-4o", USAGE), ("house-llm-7b", USAGE), ("gpt-4o", None)], PRICES)
    assert total.usd == pytest.approx(0.01) and (total.priced, total.unpriced) == (1, 1)
    assert total.unknown_models == ("house-llm-7b",)
    assert total_cost([("gpt-4o", None)], PRICES) is None


def test_it_reads_a_price_table_and_names_what_is_wrong() -> None:
    table = prices_from_json('{"house-llm": {"input": 1, "cached_input": 0.5, "output": 2}}')
    assert table == {"house-llm": Price(1.0, 0.5, 2.0)}
    for text, error in [
        ("[]", "must be a JSON object"),
        ('{"m": {"input": 1, "output": 2}}',
         "m.cached_input: a price per million tokens is required"),
        ('{"m": {"input": "x", "cached_input": 0, "output": 2}}',
         r"m.input: must be a price per million tokens \(a number\), not 'x'"),
        ('{"m": {"input": -1, "cached_input": 0, "output": 2}}', "m.input: must be a finite"),
        ('{"m": {"input": 1, "cached_input": 0, "output": 2, "outptu": 1}}', "outptu"),
        ("{nope", "not JSON"),
    ]:  # fmt: skip
        with pytest.raises(ValueError, match=error):
            prices_from_json(text)


def test_a_cost_summed_by_model_is_the_cost_of_every_call() -> None:
    from contextview.core.stats import SessionSums, StepInput, step_stats

    calls = [
        ("gpt-4o", USAGE),
        ("gpt-4o-2024-08-06", {"prompt_tokens": 900, "completion_tokens": 12}),
        ("claude-sonnet-4", {"input_tokens": 10, "cache_write_tokens": 4000, "output_tokens": 7}),
        ("house-llm-7b", USAGE),
        ("", USAGE),
        ("gpt-4o", None),
    ]
    sums = SessionSums()
    for n, (model, usage) in enumerate(calls):
        sums.add(n, step_stats(StepInput(before=[], after=[], usage=usage, model=model or None),
                               tokens_of=lambda m: 0))  # fmt: skip
    summed = summed_cost(sums.aggregates()["usage_by_model"], PRICES)
    each = total_cost(calls, PRICES)
    assert summed is not None and each is not None
    assert summed.usd == pytest.approx(each.usd)
    assert (summed.priced, summed.unpriced) == (each.priced, each.unpriced) == (3, 2)
    assert sorted(summed.unknown_models) == sorted(each.unknown_models)
    assert summed_cost({}, PRICES) is None
