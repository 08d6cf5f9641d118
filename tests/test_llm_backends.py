"""The OpenAI-compatible and Anthropic backends against a scripted stub server on 127.0.0.1."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from awm.config import Settings, load_settings
from awm.errors import ConfigError, LLMError, PromptTooLargeError, SetupError
from awm.llm.base import ChatRequest
from awm.llm.factory import make_client
from awm.llm.local_server import free_port
from awm.llm.openai_backend import build_chat_kwargs
from awm.llm.usage import UsageMeter
from tests.stub_llm_server import Reply, StubLLMServer

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def _no_env_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "AWM_MODEL",
        "AWM_BACKEND",
    ):
        monkeypatch.delenv(name, raising=False)


def settings_for(tmp_path: Path, base_url: str, backend: str = "openai", **llm: Any) -> Settings:
    fast = {"timeout_s": 2.0, "max_attempts": 6, "max_retry_seconds": 5.0, "cache": False, "model": "gpt-4o"}
    return load_settings(
        overrides={"home": str(tmp_path), "llm": {"backend": backend, "base_url": base_url, **fast, **llm}}
    )


def test_retries_429_500_403_then_succeeds(tmp_path: Path) -> None:
    with StubLLMServer([Reply(status=429), Reply(status=500), Reply(status=403), Reply(text="fine")]) as stub:
        result = make_client(settings_for(tmp_path, stub.base_url)).chat(ChatRequest(messages=HI))
        assert (result.text, result.attempts, len(stub.requests)) == ("fine", 4, 4)


def test_exhausted_attempts_raise_llm_error_naming_endpoint_and_last_error(tmp_path: Path) -> None:
    with StubLLMServer(default=Reply(status=500)) as stub:
        client = make_client(settings_for(tmp_path, stub.base_url, max_attempts=3))
        with pytest.raises(LLMError) as info:
            client.chat(ChatRequest(messages=HI))
        assert len(stub.requests) == 3
        assert stub.base_url in str(info.value) and "HTTP 500" in str(info.value)


def test_slow_server_is_bounded_by_wall_time(tmp_path: Path) -> None:
    with StubLLMServer(default=Reply(delay=1.5)) as stub:
        client = make_client(
            settings_for(tmp_path, stub.base_url, timeout_s=0.3, max_attempts=50, max_retry_seconds=1.5)
        )
        started = time.monotonic()
        with pytest.raises(LLMError, match="no answer within"):
            client.chat(ChatRequest(messages=HI))
        assert time.monotonic() - started < 4.0
        assert 2 <= len(stub.requests) < 50


def test_bad_request_is_not_retried(tmp_path: Path) -> None:
    with StubLLMServer([Reply(status=400), Reply(text="never")]) as stub:
        with pytest.raises(LLMError, match="HTTP 400"):
            make_client(settings_for(tmp_path, stub.base_url)).chat(ChatRequest(messages=HI))
        assert len(stub.requests) == 1


def test_context_overflow_is_a_prompt_too_large_error(tmp_path: Path) -> None:
    llama = b'{"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error"}}'
    with StubLLMServer([Reply(status=400, body=llama)]) as stub:
        with pytest.raises(PromptTooLargeError, match="context window of 'gpt-4o'"):
            make_client(settings_for(tmp_path, stub.base_url)).chat(ChatRequest(messages=HI))
        assert len(stub.requests) == 1


def test_garbage_bodies_are_retried(tmp_path: Path) -> None:
    replies = [
        Reply(body=b"{not json"),
        Reply(body=b"<html>oops</html>", headers={"Content-Type": "text/html"}),
        Reply(text="ok"),
    ]
    with StubLLMServer(replies) as stub:
        result = make_client(settings_for(tmp_path, stub.base_url)).chat(ChatRequest(messages=HI))
        assert (result.text, result.attempts) == ("ok", 3)


def test_unreachable_endpoint_gives_one_clear_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    client = make_client(settings_for(tmp_path, url, max_attempts=2, max_retry_seconds=2.0))
    with pytest.raises(LLMError) as info:
        client.chat(ChatRequest(messages=HI))
    message = str(info.value)
    assert url in message and "connection failed" in message and "\n" not in message


def test_template_tokens_are_stripped_and_recorded(tmp_path: Path) -> None:
    with StubLLMServer([Reply(text="<|im_start|>assistant\nclick('5')<|im_end|>\n<|im_start|>user")]) as stub:
        result = make_client(settings_for(tmp_path, stub.base_url)).chat(ChatRequest(messages=HI))
    assert result.text == "click('5')"
    assert result.stripped_tokens == ["<|im_start|>", "<|im_end|>", "<|im_start|>"]


def test_grammar_and_json_schema_reach_the_server(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    with StubLLMServer() as stub:
        client = make_client(settings_for(tmp_path, stub.base_url))
        client.chat(ChatRequest(messages=HI, grammar='root ::= "a"', stop=["\n"], seed=7))
        client.chat(ChatRequest(messages=HI, json_schema=schema))
        first, second = (r.body or {} for r in stub.requests)
    assert first["grammar"] == 'root ::= "a"' and first["stop"] == ["\n"] and first["seed"] == 7
    assert first["model"] == "gpt-4o" and first["messages"] == HI
    assert second["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": schema},
    }


def test_llama_cpp_requests_ask_for_prompt_caching_and_take_the_schema_in_the_body() -> None:
    schema = {"type": "string"}
    kwargs = build_chat_kwargs(ChatRequest(messages=HI, json_schema=schema, grammar="g"), "m", llama_cpp=True)
    assert kwargs["extra_body"] == {"cache_prompt": True, "grammar": "g", "json_schema": schema}
    assert "response_format" not in kwargs
    plain = build_chat_kwargs(ChatRequest(messages=HI, max_tokens=5), "m", llama_cpp=False)
    assert "extra_body" not in plain and plain["max_tokens"] == 5
    official = build_chat_kwargs(
        ChatRequest(messages=HI, max_tokens=5), "m", llama_cpp=False, token_field="max_completion_tokens"
    )
    assert official["max_completion_tokens"] == 5 and "max_tokens" not in official


def test_cost_comes_from_the_price_table(tmp_path: Path) -> None:
    with StubLLMServer(default=Reply(prompt_tokens=1000, completion_tokens=500)) as stub:
        priced = make_client(settings_for(tmp_path, stub.base_url, model="gpt-4o-2024-08-06")).chat(
            ChatRequest(messages=HI)
        )
        unknown = make_client(settings_for(tmp_path, stub.base_url, model="my-local-model")).chat(
            ChatRequest(messages=HI)
        )
        custom = make_client(
            settings_for(
                tmp_path, stub.base_url, model="mine", prices={"mine": {"prompt": 1.0, "completion": 2.0}}
            )
        ).chat(ChatRequest(messages=HI))
    assert (priced.usage.prompt_tokens, priced.usage.completion_tokens) == (1000, 500)
    assert priced.usage.cost_usd == pytest.approx((1000 * 2.5 + 500 * 10.0) / 1e6)
    assert unknown.usage.cost_usd == 0.0
    assert custom.usage.cost_usd == pytest.approx((1000 * 1.0 + 500 * 2.0) / 1e6)


def test_meter_accumulates_per_purpose(tmp_path: Path) -> None:
    meter = UsageMeter()
    with StubLLMServer([Reply(status=429)], default=Reply(prompt_tokens=10, completion_tokens=2)) as stub:
        client = make_client(settings_for(tmp_path, stub.base_url), meter=meter)
        client.chat(ChatRequest(messages=HI, purpose="actor"))
        client.chat(ChatRequest(messages=HI, purpose="actor"))
        client.chat(ChatRequest(messages=HI, purpose="judge"))
    totals = meter.by_purpose()
    assert (totals["actor"].calls, totals["actor"].attempts, totals["actor"].prompt_tokens) == (2, 3, 20)
    assert (totals["judge"].calls, totals["judge"].completion_tokens) == (1, 2)
    assert meter.total().calls == 3


def test_prompt_tokens_reused_from_the_servers_prefix_cache_are_recorded(tmp_path: Path) -> None:
    """The share of a prompt the server did not process again, as an OpenAI-compatible server (llama.cpp's
    among them) and Anthropic report it, per call and summed per purpose; a server that says nothing: 0."""
    meter = UsageMeter()
    replies = [Reply(prompt_tokens=1200, cached_tokens=1100), Reply(prompt_tokens=1300, cached_tokens=0), Reply()]
    with StubLLMServer(replies) as stub:
        client = make_client(settings_for(tmp_path, stub.base_url), meter=meter)
        first, second, silent = (client.chat(ChatRequest(messages=HI, purpose="actor")) for _ in range(3))
    assert (first.usage.prompt_tokens, first.usage.cached_prompt_tokens) == (1200, 1100)
    assert (second.usage.cached_prompt_tokens, silent.usage.cached_prompt_tokens) == (0, 0)
    assert (meter.by_purpose()["actor"].prompt_tokens, meter.by_purpose()["actor"].cached_prompt_tokens) == (2511, 1100)
    with StubLLMServer(default=Reply(prompt_tokens=900, cached_tokens=800)) as stub:
        settings = settings_for(tmp_path, stub.root_url, backend="anthropic", model="claude-haiku-4-5", api_key="k")
        claude = make_client(settings).chat(ChatRequest(messages=HI))
    assert (claude.usage.prompt_tokens, claude.usage.cached_prompt_tokens) == (900, 800)


def test_anthropic_backend_splits_system_and_retries(tmp_path: Path) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
    ]
    with StubLLMServer(
        [Reply(status=529), Reply(text="yes</s>", prompt_tokens=1000, completion_tokens=100)]
    ) as stub:
        settings = settings_for(
            tmp_path, stub.root_url, backend="anthropic", model="claude-haiku-4-5", api_key="k-test"
        )
        result = make_client(settings).chat(ChatRequest(messages=messages, max_tokens=20))
        body = stub.requests[-1].body or {}
        headers = stub.requests[-1].headers
        assert stub.requests[-1].path == "/v1/messages"
        assert "k-test" in headers.get("x-api-key", "") + headers.get("authorization", "")  # SDKs differ
    assert (result.text, result.stripped_tokens, result.attempts, result.backend) == (
        "yes",
        ["</s>"],
        2,
        "anthropic",
    )
    assert body["system"] == "be brief"
    assert body["messages"] == [{"role": "user", "content": "a\n\nb"}]
    assert body["max_tokens"] == 20
    assert result.usage.cost_usd == pytest.approx((1000 * 1.0 + 100 * 5.0) / 1e6)


def test_anthropic_bad_request_is_final(tmp_path: Path) -> None:
    with StubLLMServer([Reply(status=400)]) as stub:
        settings = settings_for(tmp_path, stub.root_url, backend="anthropic", model="claude-haiku-4-5")
        with pytest.raises(LLMError, match="HTTP 400"):
            make_client(settings).chat(ChatRequest(messages=HI))
        assert len(stub.requests) == 1


def test_unknown_backend_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="llm.backend"):
        load_settings(overrides={"home": str(tmp_path), "llm": {"backend": "gemini"}})


def test_missing_keys_for_hosted_endpoints_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY or llm.api_key"):
        make_client(load_settings(overrides={"home": str(tmp_path), "llm": {"backend": "openai"}}))
    with pytest.raises(ConfigError, match="set OPENAI_API_KEY or llm.api_key"):
        make_client(
            load_settings(overrides={"llm": {"backend": "openai", "base_url": "https://example.org/v1"}})
        )
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        make_client(load_settings(overrides={"llm": {"backend": "anthropic"}}))


def test_keys_and_endpoint_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with StubLLMServer() as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
        monkeypatch.setenv("AWM_MODEL", "env-model")
        settings = load_settings(overrides={"home": str(tmp_path), "llm": {"cache": False}})
        client = make_client(settings)
        assert client.backend == "openai" and client.model == "env-model"
        client.chat(ChatRequest(messages=HI))
        assert stub.requests[0].headers["authorization"] == "Bearer sk-env"


def test_missing_model_file_is_a_setup_error(tmp_path: Path) -> None:
    settings = load_settings(
        overrides={
            "home": str(tmp_path),
            "llm": {"backend": "local", "local_model_path": str(tmp_path / "none.gguf")},
        }
    )
    with pytest.raises(SetupError, match="none.gguf does not exist"):
        make_client(settings)
