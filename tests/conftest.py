"""Shared fixtures. The real local model starts once per test session (one llama.cpp server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from awm.assets import configure_runtime_env

configure_runtime_env()

FIXTURE_PAGES = Path(__file__).parent / "fixtures" / "pages"


@pytest.fixture(scope="session")
def local_llm():
    """A client for the embedded local model (Qwen2.5-Coder-1.5B via llama.cpp), started once."""
    from awm.config import load_settings
    from awm.llm.factory import make_client

    settings = load_settings(overrides={"llm": {"backend": "local", "cache": False}})
    return make_client(settings)


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    """The fixture pages (tests/fixtures/pages) served on 127.0.0.1, with a trailing slash."""
    from awm.suite.runner import serve_pages

    with serve_pages(FIXTURE_PAGES) as base:
        yield f"{base}/"


@pytest.fixture(scope="module")
def session():
    """One real-Chromium BrowserGym session for a test module (0.3 s observation delay)."""
    from awm.config import BrowserSettings
    from awm.webarena.env import BrowserSession

    with BrowserSession(BrowserSettings(pre_observation_delay=0.3, slow_mo_ms=0)) as s:
        yield s


@pytest.fixture(scope="module")
def chromium():
    """A plain Chromium (no BrowserGym env) from the process's one Playwright, BrowserGym's global one:
    a second `sync_playwright()` in the same process fails once BrowserGym has started its own."""
    from browsergym.core import _get_global_playwright

    browser = _get_global_playwright().chromium.launch(chromium_sandbox=False)
    yield browser
    browser.close()
