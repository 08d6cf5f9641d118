"""Every kind of page `awm serve` has, checked by axe-core (the field's accessibility checker, run in the
page from the `axe-playwright-python` package) in real Chromium: labels, heading order, table headers,
contrast, names of links and buttons. Any violation fails, whatever its impact."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from awm.memory.store import WorkflowStore
from tests.app_server import serve, snap
from tests.test_app_arena_runs import record_arena_run
from tests.test_app_details import record_workflow_run
from tests.test_composition import CLOSE, LOG_IN, OPEN_ITEM

PAGES = [
    "/", "/runs/details", "/runs/details/episodes/new-login%230-a1", "/runs/arena", "/compare",
    "/compare?a=details&b=other", "/compare/steps?a=details&b=other&task=new-login%230", "/memory",
    "/memory/scope/site/close", "/memory/scope/site/close/versions/1", "/live",
]  # fmt: skip


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("a11y")
    runs = root / "runs"
    record_workflow_run(runs / "details")
    record_workflow_run(runs / "other", name="other", raw_reward=1.0, old=False, suffix="9")
    record_arena_run(runs / "arena")
    db = root / "memory.sqlite"
    with WorkflowStore(db) as store:
        store.commit("site/close", [CLOSE, LOG_IN, OPEN_ITEM], parent=None, author="manual", message="built on calls")
    with serve([runs], memory=db) as base:
        yield base


@pytest.mark.browser
@pytest.mark.parametrize("path", PAGES)
def test_the_page_has_no_accessibility_violation(served: str, chromium, path: str, tmp_path: Path) -> None:
    from axe_playwright_python.sync_playwright import Axe

    page = chromium.new_page(viewport={"width": 1200, "height": 900})
    response = page.goto(served + path)
    assert response is not None and response.status == 200
    violations = Axe().run(page).response["violations"]
    page.close()
    found = [f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes'][:3]]}" for v in violations]
    assert found == [], "\n".join(found)


@pytest.mark.browser
@pytest.mark.parametrize("path", PAGES)
def test_the_page_fits_a_narrow_screen(served: str, chromium, path: str) -> None:
    """At 800 px wide (a laptop's half screen, a tablet) nothing makes the page itself scroll sideways: a
    wide table scrolls inside its own box, long ids and code wrap."""
    page = chromium.new_page(viewport={"width": 800, "height": 900})
    page.goto(served + path)
    wide = page.evaluate(
        """() => {
             const clipped = e => { for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
                 if (getComputedStyle(p).overflowX !== 'visible') return true; } return false; };
             return [...document.querySelectorAll('body *')]
               .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !clipped(e))
               .map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : ''))
               .slice(0, 5); }"""
    )
    width = page.evaluate("document.documentElement.scrollWidth")
    snap(page, "narrow-" + (path.strip("/").split("?")[0].replace("/", "-").replace("%", "") or "runs"))
    page.close()
    assert width <= 800 and wide == [], f"{path}: the page is {width} px wide; too wide: {wide}"
