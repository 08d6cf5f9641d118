"""Turn one backend's raw completion into a `ChatResult`: the same cleanup, pricing and metering for all.

Why one place: every backend must strip leaked chat-template tokens, price the call and record it per
component the same way, or usage and cost stop being comparable across backends.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from awm.config import Price
from awm.llm.base import ChatRequest, ChatResult
from awm.llm.cleanup import strip_template_tokens
from awm.llm.usage import UsageMeter, make_usage


class Reply(NamedTuple):
    """What one backend call answered: the raw text and the tokens the server counted. `cached_prompt_tokens`
    are those of `prompt_tokens` the server reused from its prefix cache instead of processing them again
    (OpenAI's and llama.cpp's `usage.prompt_tokens_details.cached_tokens`, Anthropic's cache reads; 0 where
    a server does not say)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int = 0


def finish_call(
    request: ChatRequest,
    reply: Reply,
    *,
    started: float,
    attempts: int,
    backend: str,
    model: str,
    prices: dict[str, Price],
    meter: UsageMeter | None,
) -> ChatResult:
    """The result of a finished call (`started` is a `time.perf_counter()` reading)."""
    text, stripped = strip_template_tokens(reply.text)
    result = ChatResult(
        text=text,
        usage=make_usage(
            model, reply.prompt_tokens, reply.completion_tokens, prices, cached_prompt_tokens=reply.cached_prompt_tokens
        ),
        seconds=time.perf_counter() - started,
        backend=backend,
        model=model,
        attempts=attempts,
        stripped_tokens=stripped,
    )
    if meter is not None:
        meter.record(request.purpose, result.usage, seconds=result.seconds, attempts=result.attempts)
    return result
