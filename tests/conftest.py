"""Shared fixtures. The real local model starts once per test session (one llama.cpp server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from awm.assets import configure_runtime_env

configure_runtime_env()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `pytest -n` (xdist, `--dist loadgroup`; not a dependency, `make test` runs serially): the
    tests of the arena's sites share their servers (a reset in one would pull the state from under
    another), so they run on one worker; the tests of the embedded model share its server (one per
    worker, ~2 GB), so they run on one worker too."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("sites"):
            item.add_marker(pytest.mark.xdist_group("sites"))
        elif item.get_closest_marker("llm"):
            item.add_marker(pytest.mark.xdist_group("llm"))

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
def live_page_url() -> Iterator[str]:
    """The live-run fixture page (a form with password, card and email fields, a Delete button) on 127.0.0.1."""
    from awm.suite.runner import serve_pages

    with serve_pages(FIXTURE_PAGES) as base:
        yield f"{base}/live_account.html"


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

    from awm.webarena import playwright_stack

    playwright_stack.install()
    browser = _get_global_playwright().chromium.launch(chromium_sandbox=False)
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def scripted_runs(tmp_path_factory) -> Path:
    """A folder of runs, as `awm serve --runs` takes: one run (`scripted`) made by the scripted policy in
    real Chromium (login-user and click-test, seed 0), with its screenshots, database and summary."""
    import subprocess
    import sys

    root = tmp_path_factory.mktemp("served") / "runs"
    done = subprocess.run(
        [sys.executable, "-m", "awm.cli", "run", "--tasks", "login-user,click-test", "--seeds", "0",
         "--policy", "scripted", "--out", str(root / "scripted")],
        capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return root
