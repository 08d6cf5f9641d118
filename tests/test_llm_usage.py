"""Price lookup and cost: dated snapshots and provider prefixes find their price; unknown models cost 0."""

from __future__ import annotations

import pytest

from awm.config import DEFAULT_PRICES, Price
from awm.llm.usage import cost_usd, find_price


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),  # the longest known name wins
        ("openai/gpt-4.1-mini", "gpt-4.1-mini"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ],
)
def test_price_lookup(model: str, expected: str) -> None:
    assert find_price(model, DEFAULT_PRICES) == DEFAULT_PRICES[expected]


def test_unknown_and_local_models_cost_nothing() -> None:
    assert find_price("qwen2.5-coder-1.5b-instruct-q4_k_m", DEFAULT_PRICES) is None
    assert cost_usd("qwen2.5-coder-1.5b-instruct-q4_k_m", 10_000, 1_000, DEFAULT_PRICES) == 0.0
    assert find_price("gpt-4", DEFAULT_PRICES) is None  # a prefix of a known name is not that name


def test_cost_is_per_million_tokens() -> None:
    prices = {"m": Price(prompt=3.0, completion=15.0)}
    assert cost_usd("m", 2_000_000, 100_000, prices) == pytest.approx(6.0 + 1.5)
