"""The bounds the ingest schemas put on values, as the README states them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from contextview.ingest.schemas import Budget, StepBody, Usage

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def readme_bound(subject: str) -> int:
    """The largest token count the README gives for `subject`, as a number."""
    text = " ".join(README.split())
    found = re.search(rf"{re.escape(subject)}[^:;]*? up to 2\^\d+(?: - 1)? \(([\d,]+)\)", text)
    assert found is not None, f"the README gives no bound for {subject}"
    return int(found.group(1).replace(",", ""))


def test_it_takes_usage_counts_and_budgets_up_to_the_bound_the_readme_gives() -> None:
    bound = readme_bound("usage counts and budgets")
    Usage(input_tokens=bound, cache_read_tokens=bound)
    Budget(max_tokens=bound, reserved_tokens=0, partitions={"tool": bound})
    with pytest.raises(ValidationError):
        Usage(output_tokens=bound + 1)
    with pytest.raises(ValidationError):
        Budget(max_tokens=bound + 1)


def test_it_takes_reported_context_sizes_up_to_the_bound_the_readme_gives() -> None:
    bound = readme_bound("`before_tokens` and `after_tokens`")
    body = {"session_id": "s", "index": 0, "obs": {"messages": []}}
    StepBody(**body, before_tokens=bound, after_tokens=bound)
    with pytest.raises(ValidationError):
        StepBody(**body, before_tokens=bound + 1)
