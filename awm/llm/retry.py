"""Our own retry policy for model calls: jittered exponential backoff, bounded by attempts AND wall time.

Why ours and not the SDKs': every backend then counts attempts the same way (the SDK clients are built
with ``max_retries=0``), the wall-time bound covers a whole call including its sleeps, and the final
error names the endpoint and the last failure in one sentence.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from awm.config import LLMSettings
from awm.errors import LLMError

T = TypeVar("T")

RETRYABLE_STATUS = frozenset({403, 408, 409, 425, 429, 500, 502, 503, 504, 520, 521, 522, 524, 529})


class TransientError(Exception):
    """A failure worth another attempt (rate limit, 5xx, connection error, timeout, garbled reply).

    `retry_after` is the server's hint in seconds (Retry-After header), if it sent one.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def is_retryable_status(status: int) -> bool:
    """403 is retried because several gateways answer rate limits with it; other 4xx are final."""
    return status in RETRYABLE_STATUS or status >= 500


@dataclass(frozen=True)
class RetryPolicy:
    """Limits for one logical call. `base_delay` doubles per attempt up to `max_delay`, with full jitter."""

    max_attempts: int = 6
    max_seconds: float = 240.0
    base_delay: float = 1.0
    max_delay: float = 30.0

    @classmethod
    def from_settings(cls, llm: LLMSettings) -> RetryPolicy:
        """Backoff scales down with a small wall budget, so a test's 2-second budget still gets retries."""
        base = min(1.0, max(0.01, llm.max_retry_seconds / 120.0))
        return cls(
            max_attempts=max(1, llm.max_attempts),
            max_seconds=max(0.0, llm.max_retry_seconds),
            base_delay=base,
            max_delay=max(base, min(30.0, llm.max_retry_seconds / 4)),
        )

    def delay(self, attempt: int, rng: random.Random, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        cap = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        wait = rng.uniform(cap / 2, cap)
        if retry_after is not None and retry_after > 0:
            wait = max(wait, min(retry_after, self.max_delay))
        return wait


@dataclass
class RetryOutcome(Generic[T]):
    value: T
    attempts: int


def call_with_retry(
    attempt_fn: Callable[[float | None], T],
    policy: RetryPolicy,
    endpoint: str,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rng: random.Random | None = None,
) -> RetryOutcome[T]:
    """Call `attempt_fn(remaining_seconds)` until it returns, raises a non-transient error, or limits hit.

    `attempt_fn` receives the wall-time budget left (None on the first attempt, which always gets the
    backend's full per-call timeout) so later attempts can shorten their timeout. It signals a
    retryable failure by raising `TransientError`; anything else propagates unchanged.
    """
    rng = rng or random.Random()
    start = clock()
    attempt = 0
    while True:
        attempt += 1
        remaining = None if attempt == 1 else max(0.5, policy.max_seconds - (clock() - start))
        try:
            return RetryOutcome(attempt_fn(remaining), attempt)
        except TransientError as exc:
            elapsed = clock() - start
            if attempt >= policy.max_attempts:
                raise LLMError(
                    f"LLM endpoint {endpoint} failed after {attempt} attempts in {elapsed:.1f} s; last error: {exc}"
                ) from None
            wait = policy.delay(attempt, rng, exc.retry_after)
            if elapsed + wait >= policy.max_seconds:
                raise LLMError(
                    f"LLM endpoint {endpoint} failed after {attempt} attempts in {elapsed:.1f} s "
                    f"(retry time limit {policy.max_seconds:g} s reached); last error: {exc}"
                ) from None
            sleep(wait)
