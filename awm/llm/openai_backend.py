"""OpenAI-compatible chat backend (OpenAI, vLLM, OpenRouter, DeepSeek, llama.cpp's server, our embedded one).

One code path for hosted and local endpoints: only the request extras differ (`grammar`, `json_schema`,
`cache_prompt` for llama.cpp). Retries are ours (see `retry.py`); the SDK client never retries.
"""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import urlparse

import openai

from awm.config import LLMSettings
from awm.errors import LLMError, PromptTooLargeError
from awm.llm.base import ChatRequest, ChatResult
from awm.llm.results import Reply, finish_call
from awm.llm.retry import RetryPolicy, TransientError, call_with_retry, is_retryable_status
from awm.llm.usage import UsageMeter
from awm.tokens import TokenCounter, counter_for

OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
# How llama.cpp, vLLM and OpenAI word "prompt longer than the context window" in a 400 answer.
CONTEXT_OVERFLOW = re.compile(
    r"exceed\w* (the )?(available )?context|maximum context length|context.{0,20}too (long|large)", re.I
)
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})


def is_local_url(url: str | None) -> bool:
    """Endpoints on this machine need no API key."""
    return bool(url) and (urlparse(url).hostname or "") in LOCAL_HOSTS


def build_chat_kwargs(
    request: ChatRequest, model: str, *, llama_cpp: bool, token_field: str = "max_tokens"
) -> dict[str, Any]:
    """The `chat.completions.create` arguments for one request (pure, so the wire format is testable).

    llama.cpp takes a GBNF `grammar` and a `json_schema` in the body, and `cache_prompt` keeps the
    shared prefix of consecutive prompts in its KV cache; OpenAI-style servers take `response_format`.
    OpenAI itself wants `max_completion_tokens` (its reasoning models reject `max_tokens`).
    """
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": request.messages,
        "temperature": request.temperature,
        token_field: request.max_tokens,
    }
    if request.stop:
        kwargs["stop"] = request.stop
    if request.seed is not None:
        kwargs["seed"] = request.seed
    extra: dict[str, Any] = {}
    if llama_cpp:
        extra["cache_prompt"] = True
    if request.grammar:
        extra["grammar"] = request.grammar
    if request.json_schema is not None:
        if llama_cpp:
            extra["json_schema"] = request.json_schema
        else:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": request.json_schema},
            }
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


def _retry_after(exc: openai.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return float(value) if value else None
    except ValueError:
        return None


def _short(text: object, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def status_error(exc: openai.APIStatusError, endpoint: str, model: str) -> Exception:
    """Map an HTTP error to a retryable `TransientError` or a final `LLMError` with the fix."""
    code = exc.status_code
    detail = _short(exc.message)
    if is_retryable_status(code):
        return TransientError(f"HTTP {code}: {detail}", _retry_after(exc))
    if code == 401:
        return LLMError(
            f"LLM endpoint {endpoint} rejected the API key (HTTP 401); check OPENAI_API_KEY or llm.api_key"
        )
    if code == 404:
        return LLMError(f"LLM endpoint {endpoint} answered HTTP 404 for model '{model}': {detail}")
    if code in (400, 413) and CONTEXT_OVERFLOW.search(detail):
        return PromptTooLargeError(
            f"the request does not fit the context window of '{model}' at {endpoint}: {detail}"
        )
    return LLMError(f"LLM endpoint {endpoint} rejected the request (HTTP {code}): {detail}")


class OpenAICompatibleClient:
    """`LLMClient` for any server speaking the OpenAI chat-completions protocol."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        settings: LLMSettings,
        base_url: str | None = None,
        backend: str = "openai",
        llama_cpp: bool = False,
        meter: UsageMeter | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.backend = backend
        self.model = model
        self.endpoint = base_url or OPENAI_DEFAULT_URL
        self._settings = settings
        self._llama_cpp = llama_cpp
        official = (urlparse(self.endpoint).hostname or "").endswith("api.openai.com")
        self._token_field = "max_completion_tokens" if official else "max_tokens"
        self._meter = meter
        self._retry = retry or RetryPolicy.from_settings(settings)
        self._client = openai.OpenAI(
            base_url=self.endpoint, api_key=api_key, max_retries=0, timeout=settings.timeout_s
        )

    def token_counter(self) -> TokenCounter:
        """tiktoken for `openai`; the server's own tokenizer (`/tokenize`) for backend `local`."""
        return counter_for(self.backend, self.model, self.endpoint)

    def _attempt(self, kwargs: dict[str, Any], remaining: float | None) -> Reply:
        timeout = self._settings.timeout_s if remaining is None else min(self._settings.timeout_s, remaining)
        try:
            response = self._client.chat.completions.create(**kwargs, timeout=timeout)
        except openai.APIStatusError as exc:
            raise status_error(exc, self.endpoint, self.model) from None
        except openai.APITimeoutError:
            raise TransientError(f"no answer within {timeout:.1f} s") from None
        except openai.APIConnectionError as exc:
            raise TransientError(f"connection failed ({_short(exc.__cause__ or exc)})") from None
        except (openai.APIResponseValidationError, ValueError) as exc:
            raise TransientError(f"malformed reply ({_short(exc)})") from None
        try:
            text = response.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError):
            raise TransientError(f"malformed reply without choices: {_short(response)}") from None
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        # OpenAI and llama.cpp's server both say how many prompt tokens came from the prefix cache here.
        cached = int(getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", 0) or 0)
        return Reply(text, prompt, completion, min(cached, prompt))

    def chat(self, request: ChatRequest) -> ChatResult:
        """One chat call with retries; raises `LLMError` when it fails for good."""
        kwargs = build_chat_kwargs(
            request, self.model, llama_cpp=self._llama_cpp, token_field=self._token_field
        )
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
