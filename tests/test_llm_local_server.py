"""The embedded-server manager without the real model: lazy start, cache-only runs, clear start failures."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from awm.config import load_settings
from awm.errors import LLMError
from awm.llm import local_server
from awm.llm.base import ChatRequest, ChatResult
from awm.llm.cache import ResponseCache, response_key
from awm.llm.factory import make_client

HI = [{"role": "user", "content": "hi"}]


def fake_model_settings(tmp_path: Path):
    fake = tmp_path / "fake-model.gguf"
    fake.write_bytes(b"not a gguf file")
    return load_settings(
        overrides={"home": str(tmp_path), "llm": {"backend": "local", "local_model_path": str(fake)}}
    )


def test_cache_hits_never_start_the_server(tmp_path: Path) -> None:
    settings = fake_model_settings(tmp_path)
    client = make_client(settings)
    assert (client.backend, client.model) == ("local", "fake-model")
    key = response_key(ChatRequest(messages=HI), backend="local", base_url="", model="fake-model")
    ResponseCache(settings.cache_db).put(
        key, ChatResult(text="from disk", backend="local", model="fake-model")
    )
    before = dict(local_server._SERVERS)
    result = client.chat(ChatRequest(messages=HI))
    assert (result.text, result.cached) == ("from disk", True)
    assert local_server._SERVERS == before  # no llama.cpp process was started


def test_a_broken_model_file_gives_a_clear_start_error(tmp_path: Path) -> None:
    settings = fake_model_settings(tmp_path)
    client = make_client(settings, use_cache=False)
    with pytest.raises(LLMError, match="llama.cpp server exited with code") as info:
        client.chat(ChatRequest(messages=HI))
    assert "fake-model.gguf" in str(info.value)
    assert list((tmp_path / "logs").glob("llama-server-*.log"))


def test_a_port_in_use_is_named_in_the_error(tmp_path: Path) -> None:
    settings = fake_model_settings(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LLMError, match=f"could not bind 127.0.0.1:{port} \\(port in use\\)"):
            local_server.ensure_local_server(
                settings.model_file, n_ctx=512, threads=1, log_dir=tmp_path, port=port
            )
