"""Occupancy from the provider's count, against a known or given context window."""

from __future__ import annotations

import pytest

from contextview.core.model import Message
from contextview.core.stats import StepInput, session_aggregates, step_stats
from contextview.core.windows import known_window
from tests.core.factories import msg


def words(m: Message) -> int:
    return len(m.text.split())


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("claude-sonnet-4-5-20250929", 200_000),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", 200_000),
        ("gpt-4o-mini-2024-07-18", 128_000),
        ("openai/gpt-4.1", 1_047_576),
        ("gpt-4-0613", 8_192),
        ("gpt-5-mini", 400_000),
        ("o3-mini", 200_000),
        ("o1-mini", 128_000),
        ("models/gemini-1.5-pro-002", 2_097_152),
        ("gemini-2.5-flash", 1_048_576),
        ("meta-llama/Llama-3.1-70B-Instruct", 131_072),
        ("Qwen/Qwen2.5-72B-Instruct", 32_768),
        ("deepseek-reasoner", 128_000),
    ],
)
def test_it_knows_the_window_of_common_models(model: str, window: int) -> None:
    assert known_window(model) == window


@pytest.mark.parametrize(
    "model", [None, "", "my-own-model", "photo1", "deepseek-r1-distill-qwen-7b"]
)
def test_it_guesses_no_window_for_a_model_it_does_not_know(model: str | None) -> None:
    assert known_window(model) is None


CONTEXT = [msg("u", "one two three four five six seven eight nine ten", "user")]
# 10 tokens in the log, 150,000 read by the model: its system prompt and tools.
USAGE = {"input_tokens": 20_000, "cache_read_tokens": 130_000}


def test_it_measures_occupancy_with_the_providers_count_against_the_models_window() -> None:
    out = step_stats(
        StepInput(before=CONTEXT, after=CONTEXT, usage=USAGE, model="claude-opus-4-1"),
        tokens_of=words,
    )
    assert out["occupancy"] == {"before": 0.75, "after": 0.75}
    assert out["window"] == 200_000
    assert "over_70" in out["flags"] and "over_90" not in out["flags"]
    assert session_aggregates([out])["peak_occupancy"] == 0.75
    assert session_aggregates([out])["window"] == 200_000


def test_it_prefers_a_given_window_and_a_budget_to_the_table() -> None:
    given = step_stats(
        StepInput(
            before=CONTEXT, after=CONTEXT, usage=USAGE, model="claude-opus-4-1",
            context_window=1_000_000,
        ),
        tokens_of=words,
    )  # fmt: skip
    assert given["occupancy"]["after"] == 0.15
    budget = step_stats(
        StepInput(
            before=CONTEXT, after=CONTEXT, usage=USAGE, model="claude-opus-4-1",
            budget={"max_tokens": 160_000},
        ),
        tokens_of=words,
    )  # fmt: skip
    assert budget["occupancy"]["after"] == 150_000 / 160_000
    assert "over_90" in budget["flags"]


def test_it_carries_the_hidden_part_to_the_after_context() -> None:
    after = [*CONTEXT, msg("a", "eleven twelve", "assistant")]
    out = step_stats(
        StepInput(before=CONTEXT, after=after, usage=USAGE, model="gpt-4o"), tokens_of=words
    )
    assert out["unseen_tokens"] == 150_000 - 10
    assert out["occupancy"]["after"] == (150_000 + 2) / 128_000
    assert "over_90" in out["flags"]


def test_it_leaves_occupancy_alone_without_provider_usage() -> None:
    # The agent's own estimate is no provider count; a model name alone gives no window.
    out = step_stats(
        StepInput(before=CONTEXT, after=CONTEXT, reported_before=12, model="gpt-4o"),
        tokens_of=words,
    )
    assert out["occupancy"] == {"before": None, "after": None}
    assert "window" not in out and "unseen_tokens" not in out
    assert "token_estimate_off" in out["flags"]
