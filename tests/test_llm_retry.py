"""The retry policy on its own: bounded by attempts and by wall time, final errors are typed."""

from __future__ import annotations

import random

import pytest

from awm.config import LLMSettings
from awm.errors import LLMError
from awm.llm.retry import RetryPolicy, TransientError, call_with_retry, is_retryable_status


class FakeTime:
    """A clock that only moves when the code under test sleeps (or an attempt takes time)."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_succeeds_after_transient_failures_and_counts_attempts() -> None:
    fake = FakeTime()
    calls: list[float | None] = []

    def attempt(remaining: float | None) -> str:
        calls.append(remaining)
        if len(calls) < 3:
            raise TransientError("HTTP 429: slow down")
        return "ok"

    outcome = call_with_retry(
        attempt, RetryPolicy(max_attempts=5), "http://x/v1", sleep=fake.sleep, clock=fake.clock
    )
    assert (outcome.value, outcome.attempts) == ("ok", 3)
    assert calls[0] is None and calls[1] is not None  # later attempts learn the remaining budget
    assert len(fake.sleeps) == 2


def test_bounded_by_attempts() -> None:
    fake = FakeTime()
    count = 0

    def attempt(_: float | None) -> str:
        nonlocal count
        count += 1
        raise TransientError(f"HTTP 503: busy #{count}")

    with pytest.raises(LLMError) as info:
        call_with_retry(
            attempt,
            RetryPolicy(max_attempts=4, max_seconds=1e9),
            "http://x/v1",
            sleep=fake.sleep,
            clock=fake.clock,
        )
    assert count == 4
    message = str(info.value)
    assert "http://x/v1" in message and "4 attempts" in message and "HTTP 503: busy #4" in message


def test_bounded_by_wall_time() -> None:
    fake = FakeTime()
    count = 0

    def attempt(_: float | None) -> str:
        nonlocal count
        count += 1
        fake.now += 10.0  # each attempt times out after 10 s
        raise TransientError("no answer within 10.0 s")

    policy = RetryPolicy(max_attempts=100, max_seconds=35.0, base_delay=1.0, max_delay=2.0)
    with pytest.raises(LLMError, match="retry time limit 35 s"):
        call_with_retry(attempt, policy, "http://x/v1", sleep=fake.sleep, clock=fake.clock)
    assert 3 <= count <= 4
    assert fake.now <= 35.0 + 10.0  # never starts an attempt after the budget is spent


def test_non_transient_errors_are_not_retried() -> None:
    count = 0

    def attempt(_: float | None) -> str:
        nonlocal count
        count += 1
        raise LLMError("HTTP 400: bad request")

    with pytest.raises(LLMError, match="HTTP 400"):
        call_with_retry(attempt, RetryPolicy(), "http://x/v1", sleep=lambda s: None)
    assert count == 1


def test_backoff_grows_with_jitter_and_respects_the_cap_and_retry_after() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0)
    rng = random.Random(0)
    for attempt, cap in ((1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)):
        wait = policy.delay(attempt, rng)
        assert cap / 2 <= wait <= cap
    assert policy.delay(1, rng, retry_after=5.0) == 5.0
    assert policy.delay(1, rng, retry_after=500.0) == 8.0  # a server's hint never exceeds our cap


def test_policy_from_settings_scales_backoff_to_a_small_budget() -> None:
    policy = RetryPolicy.from_settings(LLMSettings(max_attempts=3, max_retry_seconds=2.0))
    assert policy.max_attempts == 3 and policy.max_seconds == 2.0
    assert policy.base_delay < 0.1 and policy.max_delay <= 0.5
    default = RetryPolicy.from_settings(LLMSettings())
    assert (default.max_attempts, default.max_seconds, default.base_delay) == (6, 240.0, 1.0)


@pytest.mark.parametrize(
    ("status", "retry"),
    [
        (429, True),
        (403, True),
        (500, True),
        (503, True),
        (400, False),
        (401, False),
        (404, False),
        (422, False),
    ],
)
def test_retryable_status(status: int, retry: bool) -> None:
    assert is_retryable_status(status) is retry
