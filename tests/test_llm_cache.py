"""The on-disk response cache: deterministic requests are served from disk with zero model calls."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from awm.config import Settings, load_settings
from awm.llm.base import ChatRequest, ChatResult, Usage
from awm.llm.cache import ResponseCache, response_key
from awm.llm.factory import make_client
from awm.llm.usage import UsageMeter
from tests.stub_llm_server import Reply, StubLLMServer

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def _no_env_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "AWM_MODEL", "AWM_BACKEND"):
        monkeypatch.delenv(name, raising=False)


def cached_settings(tmp_path: Path, base_url: str, model: str = "gpt-4o") -> Settings:
    llm = {"backend": "openai", "base_url": base_url, "model": model, "cache": True, "max_retry_seconds": 2.0}
    return load_settings(overrides={"home": str(tmp_path), "llm": llm})


def test_cache_hit_makes_zero_model_calls(tmp_path: Path) -> None:
    meter = UsageMeter()
    with StubLLMServer(default=Reply(text="first", prompt_tokens=100, completion_tokens=5)) as stub:
        settings = cached_settings(tmp_path, stub.base_url)
        first = make_client(settings, meter=meter).chat(ChatRequest(messages=HI))
        stub.default = Reply(text="second")
        again = make_client(settings, meter=meter).chat(ChatRequest(messages=HI))  # a new client, same file
        assert len(stub.requests) == 1
    assert settings.cache_db.is_file()
    assert (first.cached, first.text) == (False, "first")
    assert (again.cached, again.text, again.attempts) == (True, "first", 0)
    assert again.usage.prompt_tokens == 100 and again.usage.cost_usd == 0.0
    actor = meter.by_purpose()["actor"]
    assert (actor.calls, actor.cached_calls) == (1, 1)


def test_non_deterministic_requests_are_not_cached(tmp_path: Path) -> None:
    with StubLLMServer() as stub:
        client = make_client(cached_settings(tmp_path, stub.base_url))
        hot = ChatRequest(messages=HI, temperature=0.7)
        results = [client.chat(hot), client.chat(hot)]
        assert len(stub.requests) == 2 and not any(r.cached for r in results)
        seeded = ChatRequest(messages=HI, temperature=0.7, seed=3)  # a fixed seed makes it deterministic
        assert [client.chat(seeded).cached, client.chat(seeded).cached] == [False, True]
        assert len(stub.requests) == 3


def test_cache_key_separates_models_and_requests_and_can_be_disabled(tmp_path: Path) -> None:
    with StubLLMServer() as stub:
        make_client(cached_settings(tmp_path, stub.base_url, "model-a")).chat(ChatRequest(messages=HI))
        make_client(cached_settings(tmp_path, stub.base_url, "model-b")).chat(ChatRequest(messages=HI))
        client_a = make_client(cached_settings(tmp_path, stub.base_url, "model-a"))
        client_a.chat(ChatRequest(messages=HI, max_tokens=9))
        assert len(stub.requests) == 3
        client_a.chat(ChatRequest(messages=HI, purpose="judge"))  # purpose is not part of the key
        assert len(stub.requests) == 3
        make_client(cached_settings(tmp_path, stub.base_url, "model-a"), use_cache=False).chat(
            ChatRequest(messages=HI)
        )
        assert len(stub.requests) == 4


def test_same_model_name_on_two_servers_never_shares_an_answer(tmp_path: Path) -> None:
    with StubLLMServer(default=Reply(text="from a")) as a, StubLLMServer(default=Reply(text="from b")) as b:
        assert a.base_url != b.base_url
        first = make_client(cached_settings(tmp_path, a.base_url, "same-name")).chat(ChatRequest(messages=HI))
        other = make_client(cached_settings(tmp_path, b.base_url, "same-name")).chat(ChatRequest(messages=HI))
        assert (first.text, other.text, other.cached) == ("from a", "from b", False)
        again = make_client(cached_settings(tmp_path, b.base_url, "same-name")).chat(ChatRequest(messages=HI))
        assert (again.text, again.cached) == ("from b", True)  # same backend, URL, model and request
        assert (len(a.requests), len(b.requests)) == (1, 1)


def test_response_key_ignores_a_trailing_slash_and_tells_servers_and_backends_apart() -> None:
    request = ChatRequest(messages=HI)
    key = response_key(request, backend="openai", base_url="http://h:1/v1", model="m")
    assert key == response_key(request, backend="openai", base_url="http://h:1/v1/", model="m")
    assert key != response_key(request, backend="openai", base_url="http://h:2/v1", model="m")
    assert key != response_key(request, backend="vllm", base_url="http://h:1/v1", model="m")
    assert response_key(request, backend="local", base_url="", model="m") != key


def test_failed_calls_are_not_cached(tmp_path: Path) -> None:
    with StubLLMServer([Reply(status=400), Reply(text="later")]) as stub:
        client = make_client(cached_settings(tmp_path, stub.base_url))
        with pytest.raises(Exception, match="HTTP 400"):
            client.chat(ChatRequest(messages=HI))
        assert client.chat(ChatRequest(messages=HI)).text == "later"


def test_store_is_json_in_wal_mode_and_a_corrupt_row_is_a_miss(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", ChatResult(text="hello", usage=Usage(prompt_tokens=1), backend="openai", model="m"))
    conn = sqlite3.connect(tmp_path / "c.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    stored = conn.execute("SELECT result FROM responses WHERE key='k'").fetchone()[0]
    assert '"text":"hello"' in stored.replace(" ", "")
    with conn:
        conn.execute("UPDATE responses SET result='{not json' WHERE key='k'")
    conn.close()
    assert cache.get("k") is None
    assert cache.get("absent") is None


def test_concurrent_writers_do_not_lose_entries(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    errors: list[BaseException] = []

    def writer(worker: int) -> None:
        try:
            cache = ResponseCache(path)
            for i in range(20):
                cache.put(f"{worker}-{i}", ChatResult(text=f"{worker}-{i}"))
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    cache = ResponseCache(path)
    assert len(cache) == 80
    assert cache.get("3-19").text == "3-19"
