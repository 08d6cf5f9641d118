"""Token and cost accounting: price lookup by model name, and a meter that sums usage per purpose.

Why per purpose: the actor, the judge and the inducer have very different budgets, and a run report
should say which of them spent the tokens.
"""

from __future__ import annotations

import threading

from pydantic import BaseModel

from awm.config import Price
from awm.llm.base import Usage


def find_price(model: str, prices: dict[str, Price]) -> Price | None:
    """Exact name first, then without a provider prefix (``openai/gpt-4o``), then the longest known
    name the model starts with (dated snapshots such as ``gpt-4o-2024-08-06``). None when unknown."""
    candidates = [model, model.rsplit("/", 1)[-1]]
    for name in candidates:
        if name in prices:
            return prices[name]
    base = candidates[-1]
    matches = [known for known in prices if base.startswith(known + "-") or base.startswith(known + "@")]
    return prices[max(matches, key=len)] if matches else None


def cost_usd(model: str, prompt_tokens: int, completion_tokens: int, prices: dict[str, Price]) -> float:
    """Dollars for one call; 0 for unknown or local models (prices are per million tokens)."""
    price = find_price(model, prices)
    if price is None:
        return 0.0
    return (prompt_tokens * price.prompt + completion_tokens * price.completion) / 1_000_000


def make_usage(
    model: str, prompt_tokens: int, completion_tokens: int, prices: dict[str, Price], *, cached_prompt_tokens: int = 0
) -> Usage:
    """A call's usage, priced at the full prompt price (a cache discount, where a provider gives one, is not
    counted: the figure is an upper bound)."""
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cached_prompt_tokens=cached_prompt_tokens,
        cost_usd=cost_usd(model, prompt_tokens, completion_tokens, prices),
    )


class PurposeUsage(BaseModel):
    """What one component spent: real model calls and cache hits are counted apart."""

    calls: int = 0
    cached_calls: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the server reused from its prefix cache
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0


class UsageMeter:
    """Accumulates usage per purpose (actor / judge / induction / other); safe to share across threads.

    Cache hits add to `cached_calls` only: they cost nothing and made no model call.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_purpose: dict[str, PurposeUsage] = {}

    def record(
        self, purpose: str, usage: Usage, *, seconds: float = 0.0, cached: bool = False, attempts: int = 1
    ) -> None:
        with self._lock:
            entry = self._by_purpose.setdefault(purpose, PurposeUsage())
            if cached:
                entry.cached_calls += 1
                return
            entry.calls += 1
            entry.attempts += attempts
            entry.prompt_tokens += usage.prompt_tokens
            entry.cached_prompt_tokens += usage.cached_prompt_tokens
            entry.completion_tokens += usage.completion_tokens
            entry.cost_usd += usage.cost_usd
            entry.seconds += seconds

    def by_purpose(self) -> dict[str, PurposeUsage]:
        """A copy of the per-purpose totals."""
        with self._lock:
            return {name: entry.model_copy() for name, entry in self._by_purpose.items()}

    def total(self) -> PurposeUsage:
        """All purposes summed."""
        out = PurposeUsage()
        for entry in self.by_purpose().values():
            for field in PurposeUsage.model_fields:
                setattr(out, field, getattr(out, field) + getattr(entry, field))
        return out
