"""Build the configured `LLMClient`: pick the backend, resolve endpoint/key/model, wrap the response cache.

Why one factory: the agent, the judge and the inducer all get their client here, so every check
(unknown backend, missing key, missing model file) fails the same way, before the first call. The
embedded server itself starts on the first call that misses the cache.
"""

from __future__ import annotations

import os

from awm.config import Settings
from awm.errors import ConfigError, LLMError
from awm.llm.base import ChatRequest, ChatResult, LLMClient
from awm.llm.cache import CachedClient, ResponseCache
from awm.llm.openai_backend import OpenAICompatibleClient, is_local_url
from awm.llm.retry import RetryPolicy
from awm.llm.usage import UsageMeter
from awm.tokens import LlamaServerCounter, TokenCounter

BACKENDS = ("local", "openai", "anthropic")
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_ANTHROPIC_MODEL = "claude-haiku-4-5"
# A local CPU model can take minutes on a long cold prompt when the machine is busy; a timeout there
# only throws the work away, so the local backend waits longer unless llm.timeout_s is set explicitly.
LOCAL_DEFAULT_TIMEOUT_S = 600.0


def _model(settings: Settings) -> str | None:
    return settings.llm.model or os.environ.get("AWM_MODEL") or None


class LocalClient:
    """The embedded model: the llama.cpp server starts on the first real call, not at construction.

    Why lazy: a run served entirely from the response cache (a resumed or repeated stage) then never
    loads the 1.5 GB model. The model file is verified up front, so a wrong path still fails early.
    """

    backend = "local"

    def __init__(self, settings: Settings, meter: UsageMeter | None, retry: RetryPolicy | None) -> None:
        from awm.assets import verify_model_file

        verify_model_file(settings.model_file)
        self.model = settings.model_file.stem
        self._settings = settings
        self._meter = meter
        self._retry = retry
        self._inner: OpenAICompatibleClient | None = None
        if "timeout_s" not in settings.llm.model_fields_set:
            self._settings = settings.model_copy(
                update={"llm": settings.llm.model_copy(update={"timeout_s": LOCAL_DEFAULT_TIMEOUT_S})}
            )

    def client(self) -> OpenAICompatibleClient:
        """The OpenAI-compatible client for the running server (starts or restarts it if needed)."""
        from awm.llm.local_server import ensure_local_server

        base_url = ensure_local_server(
            self._settings.model_file,
            n_ctx=self._settings.llm.context_window,
            threads=self._settings.llm.local_threads,
            log_dir=self._settings.home / "logs",
            slots=self._settings.llm.local_slots,
        )
        if self._inner is None or self._inner.endpoint != base_url:
            self._inner = OpenAICompatibleClient(
                model=self.model,
                api_key="not-needed",
                settings=self._settings.llm,
                base_url=base_url,
                backend="local",
                llama_cpp=True,
                meter=self._meter,
                retry=self._retry,
            )
        return self._inner

    def chat(self, request: ChatRequest) -> ChatResult:
        return self.client().chat(request)

    def token_counter(self) -> TokenCounter:
        """The model's own tokenizer, through the server, which starts on the first count (not here)."""
        return LocalServerCounter(self)


class LocalServerCounter:
    """Exact counts from the embedded model's tokenizer (llama.cpp `/tokenize`), found when first needed.

    Why lazy: the local client starts llama.cpp only on its first real call, so a run served from the
    response cache never loads the model just to build a counter. If the server restarts on another
    port, the next count finds the new one.
    """

    exact = True

    def __init__(self, client: LocalClient) -> None:
        self.client = client
        self._counter: LlamaServerCounter | None = None

    def _current(self) -> LlamaServerCounter:
        if self._counter is None:
            self._counter = LlamaServerCounter(self.client.client().endpoint)
        return self._counter

    def count(self, text: str) -> int:
        try:
            return self._current().count(text)
        except LLMError:
            self._counter = None  # the server may have restarted elsewhere: look it up once more
            return self._current().count(text)


def local_server_url(client: LLMClient) -> str | None:
    """The URL of the embedded llama.cpp server behind `client` (started if needed), else None.

    For sharing one server among worker processes; looks through the response cache.
    """
    inner = client.inner if isinstance(client, CachedClient) else client
    if isinstance(inner, LocalClient):
        return inner.client().endpoint
    if isinstance(inner, OpenAICompatibleClient) and inner.backend == "local":
        return inner.endpoint
    return None


def _make_local(settings: Settings, meter: UsageMeter | None, retry: RetryPolicy | None) -> LLMClient:
    return LocalClient(settings, meter, retry)


def _make_openai(settings: Settings, meter: UsageMeter | None, retry: RetryPolicy | None) -> LLMClient:
    base_url = settings.llm.base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = settings.llm.api_key or os.environ.get("OPENAI_API_KEY") or None
    endpoint = base_url or "https://api.openai.com/v1"
    if api_key is None:
        if not is_local_url(base_url):
            raise ConfigError(
                f"no API key for the OpenAI-compatible endpoint {endpoint}; set OPENAI_API_KEY or llm.api_key"
            )
        api_key = "not-needed"
    model = _model(settings)
    if model is None:
        if base_url is not None:
            raise ConfigError(f"no model name for the endpoint {endpoint}; set llm.model or AWM_MODEL")
        model = DEFAULT_OPENAI_MODEL
    return OpenAICompatibleClient(
        model=model,
        api_key=api_key,
        settings=settings.llm,
        base_url=base_url,
        backend="openai",
        llama_cpp=False,
        meter=meter,
        retry=retry,
    )


def _make_anthropic(settings: Settings, meter: UsageMeter | None, retry: RetryPolicy | None) -> LLMClient:
    from awm.llm.anthropic_backend import AnthropicClient

    base_url = settings.llm.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
    api_key = settings.llm.api_key or os.environ.get("ANTHROPIC_API_KEY") or None
    if api_key is None:
        if not is_local_url(base_url):
            raise ConfigError("no API key for the Anthropic backend; set ANTHROPIC_API_KEY or llm.api_key")
        api_key = "not-needed"
    return AnthropicClient(
        model=_model(settings) or DEFAULT_ANTHROPIC_MODEL,
        api_key=api_key,
        settings=settings.llm,
        base_url=base_url,
        meter=meter,
        retry=retry,
    )


def make_client(
    settings: Settings,
    *,
    use_cache: bool | None = None,
    meter: UsageMeter | None = None,
    retry: RetryPolicy | None = None,
) -> LLMClient:
    """The client for `settings.llm.resolved_backend()`, behind the response cache unless disabled.

    `use_cache` overrides `settings.llm.cache`; `meter` accumulates usage per purpose; `retry`
    overrides the policy derived from the settings (attempts, wall time).
    """
    backend = settings.llm.resolved_backend()
    builders = {"local": _make_local, "openai": _make_openai, "anthropic": _make_anthropic}
    if backend not in builders:
        raise ConfigError(f"unknown LLM backend '{backend}'; expected one of: {', '.join(BACKENDS)}")
    client = builders[backend](settings, meter, retry)
    cache_on = settings.llm.cache if use_cache is None else use_cache
    if cache_on:
        return CachedClient(client, ResponseCache(settings.cache_db), meter)
    return client
