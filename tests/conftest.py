"""Shared fixtures. The real local model starts once per test session (one llama.cpp server)."""

from __future__ import annotations

import pytest

from awm.assets import configure_runtime_env

configure_runtime_env()


@pytest.fixture(scope="session")
def local_llm():
    """A client for the embedded local model (Qwen2.5-Coder-1.5B via llama.cpp), started once."""
    from awm.config import load_settings
    from awm.llm.factory import make_client

    settings = load_settings(overrides={"llm": {"backend": "local", "cache": False}})
    return make_client(settings)
