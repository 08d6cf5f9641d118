"""Anthropic messages backend: system messages split out, same retry, cleanup and accounting as the rest.

Anthropic has no GBNF grammar; a request's `grammar` is ignored here (the action parser still
validates the reply), and a `json_schema` is stated in the system prompt. Recent SDKs (2.x) no longer
accept `temperature` (sampling is the model's own); it is sent only where the installed SDK takes it.
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from typing import Any

import anthropic

from awm.config import LLMSettings
from awm.errors import LLMError
from awm.llm.base import ChatRequest, ChatResult
from awm.llm.results import Reply, finish_call
from awm.llm.retry import RetryPolicy, TransientError, call_with_retry, is_retryable_status
from awm.llm.usage import UsageMeter
from awm.tokens import TokenCounter, counter_for

ANTHROPIC_DEFAULT_URL = "https://api.anthropic.com"


@functools.cache
def sdk_takes_temperature() -> bool:
    """Whether the installed `anthropic` SDK's `messages.create` still has a `temperature` parameter."""
    from anthropic.resources.messages import Messages

    return "temperature" in inspect.signature(Messages.create).parameters


def build_message_kwargs(
    request: ChatRequest, model: str, *, with_temperature: bool = True
) -> dict[str, Any]:
    """`messages.create` arguments: system text joined and moved out; consecutive same-role turns merged
    (the API requires alternating user/assistant turns)."""
    system_parts = [m["content"] for m in request.messages if m.get("role") == "system"]
    if request.json_schema is not None:
        system_parts.append(
            "Reply with only a JSON value matching this JSON schema:\n" + json.dumps(request.json_schema)
        )
    turns: list[dict[str, str]] = []
    for message in request.messages:
        role = message.get("role")
        if role == "system":
            continue
        role = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": turns[-1]["content"] + "\n\n" + message["content"]}
        else:
            turns.append({"role": role, "content": message["content"]})
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": turns,
        "max_tokens": request.max_tokens,
    }
    if with_temperature:
        kwargs["temperature"] = request.temperature
    if system_parts:
        kwargs["system"] = "\n\n".join(system_parts)
    if request.stop:
        kwargs["stop_sequences"] = request.stop
    return kwargs


def _short(text: object, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


class AnthropicClient:
    """`LLMClient` for Anthropic's messages API (or a compatible gateway at `base_url`)."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        settings: LLMSettings,
        base_url: str | None = None,
        meter: UsageMeter | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.backend = "anthropic"
        self.model = model
        self.endpoint = base_url or ANTHROPIC_DEFAULT_URL
        self._settings = settings
        self._meter = meter
        self._retry = retry or RetryPolicy.from_settings(settings)
        self._client = anthropic.Anthropic(
            api_key=api_key, base_url=self.endpoint, max_retries=0, timeout=settings.timeout_s
        )

    def token_counter(self) -> TokenCounter:
        """An estimate (characters / 3.2): Anthropic's tokenizer is not public."""
        return counter_for("anthropic", self.model)

    def _attempt(self, kwargs: dict[str, Any], remaining: float | None) -> Reply:
        timeout = self._settings.timeout_s if remaining is None else min(self._settings.timeout_s, remaining)
        try:
            response = self._client.messages.create(**kwargs, timeout=timeout)
        except anthropic.APIStatusError as exc:
            code = exc.status_code
            if is_retryable_status(code):
                header = exc.response.headers.get("retry-after") if exc.response is not None else None
                retry_after = float(header) if header and header.replace(".", "", 1).isdigit() else None
                raise TransientError(f"HTTP {code}: {_short(exc.message)}", retry_after) from None
            if code == 401:
                raise LLMError(
                    f"LLM endpoint {self.endpoint} rejected the API key (HTTP 401); check ANTHROPIC_API_KEY or llm.api_key"
                ) from None
            raise LLMError(
                f"LLM endpoint {self.endpoint} rejected the request (HTTP {code}): {_short(exc.message)}"
            ) from None
        except anthropic.APITimeoutError:
            raise TransientError(f"no answer within {timeout:.1f} s") from None
        except anthropic.APIConnectionError as exc:
            raise TransientError(f"connection failed ({_short(exc.__cause__ or exc)})") from None
        except (anthropic.APIResponseValidationError, ValueError) as exc:
            raise TransientError(f"malformed reply ({_short(exc)})") from None
        try:
            text = "".join(block.text for block in response.content if getattr(block, "type", "") == "text")
            # Anthropic counts cache reads and writes apart from `input_tokens`: all three are the prompt.
            cached = int(getattr(response.usage, "cache_read_input_tokens", 0) or 0)
            written = int(getattr(response.usage, "cache_creation_input_tokens", 0) or 0)
            prompt = int(response.usage.input_tokens or 0) + cached + written
            completion = int(response.usage.output_tokens or 0)
        except (AttributeError, TypeError):
            raise TransientError(f"malformed reply: {_short(response)}") from None
        return Reply(text, prompt, completion, cached)

    def chat(self, request: ChatRequest) -> ChatResult:
        """One chat call with retries; raises `LLMError` when it fails for good."""
        kwargs = build_message_kwargs(request, self.model, with_temperature=sdk_takes_temperature())
        started = time.perf_counter()
        outcome = call_with_retry(
            lambda remaining: self._attempt(kwargs, remaining), self._retry, self.endpoint
        )
        return finish_call(
            request,
            outcome.value,
            started=started,
            attempts=outcome.attempts,
            backend=self.backend,
            model=self.model,
            prices=self._settings.prices,
            meter=self._meter,
        )
