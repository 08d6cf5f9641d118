"""Turn one backend's raw completion into a `ChatResult`: the same cleanup, pricing and metering for all.

Why one place: every backend must strip leaked chat-template tokens, price the call and record it per
component the same way, or usage and cost stop being comparable across backends.
"""

from __future__ import annotations

import time

from awm.config import Price
from awm.llm.base import ChatRequest, ChatResult
from awm.llm.cleanup import strip_template_tokens
from awm.llm.usage import UsageMeter, make_usage


def finish_call(
    request: ChatRequest,
    raw: str,
    prompt_tokens: int,
    completion_tokens: int,
    *,
    started: float,
    attempts: int,
    backend: str,
    model: str,
    prices: dict[str, Price],
    meter: UsageMeter | None,
) -> ChatResult:
    """The result of a finished call (`started` is a `time.perf_counter()` reading)."""
    text, stripped = strip_template_tokens(raw)
    result = ChatResult(
        text=text,
        usage=make_usage(model, prompt_tokens, completion_tokens, prices),
        seconds=time.perf_counter() - started,
        backend=backend,
        model=model,
        attempts=attempts,
        stripped_tokens=stripped,
    )
    if meter is not None:
        meter.record(request.purpose, result.usage, seconds=result.seconds, attempts=result.attempts)
    return result
