"""The live-page benchmark's ten sites (tests/fixtures/live) are fair tests: well-formed, inside the rails,
and solvable. No model: each page's intended solution is done with Playwright in real Chromium, and the
server's log must show the page's `/__done__` request with the manifest's query, and no request may leave
the page's origin. The server and the scoring are scripts/bench_live.py's own, so what passes here is
what the benchmark scores.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import lxml.html
import pytest

from tests.scripts import load_script

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[1]
LIVE = ROOT / "tests" / "fixtures" / "live"

# What the safety gate refuses without a person (awm.config's sensitive clicks and fields, awm.rails'
# payment terms): a page that needs one of these would measure the gate, not the agent.
CLICK_WORDS = re.compile(
    r"\b(buy|pay|order|delete|remove|send|post|publish|transfer|confirm|deactivate|purchase|checkout)\b", re.I
)
FIELD_TERMS = (
    "card cvv cvc expiry expiration billing payment credit debit iban "
    "email e-mail phone mobile address birth ssn passport"
).split()
CLICKABLE = (
    "//button | //a[@href] | //input[@type='button' or @type='checkbox' or @type='radio' or @type='reset'] "
    "| //*[@role='button' or @role='switch' or @role='checkbox' or @role='tab' or @role='link' "
    "or @role='menuitem' or @role='option']"
)
INTERACTIVE = "//a[@href] | //button | //input | //select | //textarea | //*[@role]"
MAX_INTERACTIVE = 40

Step = Callable[[Any], None]
# The intended solution of each request page, as a person would do it.
SOLUTIONS: dict[str, list[Step]] = {
    "settings": [
        lambda p: p.get_by_role("switch", name="Dark mode").check(),
        lambda p: p.get_by_role("button", name="Save settings").click(),
    ],
    "shop": [lambda p: p.get_by_role("button", name="Add Blue Ceramic Mug to cart").click()],
    "todo": [
        lambda p: p.get_by_label("New task").fill("Call the plumber"),
        lambda p: p.get_by_role("button", name="Add task").click(),
    ],
    "blog": [
        lambda p: p.get_by_role("link", name="Page 2").click(),
        lambda p: p.get_by_role("link", name="Growing tomatoes on a balcony").click(),
    ],
    "search": [
        lambda p: p.get_by_role("searchbox", name="Search products").fill("hiking boots"),
        lambda p: p.get_by_role("searchbox", name="Search products").press("Enter"),
    ],
    "tabs": [lambda p: p.get_by_role("tab", name="Reviews").click()],
    "plans": [lambda p: p.get_by_role("button", name="Choose Basic").click()],
}
# What a person sees once the goal's action happened (the page reacts as a real site would).
VISIBLE_AFTER = {
    "settings": "Settings saved",
    "shop": "Cart (1)",
    "todo": "Task added: Call the plumber",
    "blog": "Pick a cherry variety",
    "search": '2 results for "hiking boots"',
    "tabs": "Average rating",
    "plans": "You are now on the Basic plan",
}


def _load_bench() -> ModuleType:
    return load_script("bench_live")


bench = _load_bench()
PAGES = bench.load_manifest()
BY_NAME = {p.name: p for p in PAGES}
HTML_FILES = sorted(LIVE.glob("*.html"))
# The fresh pages no rule was written from (`--manifest tests/fixtures/live-fresh/pages.json`) keep the
# same rules: tests/test_live_fresh_pages.py checks their manifest.
FRESH_HTML_FILES = sorted((ROOT / "tests" / "fixtures" / "live-fresh").glob("*.html"))


def _doc(path: Path) -> Any:
    return lxml.html.fromstring(path.read_text())


def _label_of(doc: Any, element: Any) -> str:
    element_id = element.get("id")
    labels = doc.xpath("//label[@for=$id]", id=element_id) if element_id else []
    return " ".join(label.text_content() for label in labels)


# --------------------------------------------------------------------------------------------------
# The manifest and the pages' HTML
# --------------------------------------------------------------------------------------------------


def test_the_manifest_names_ten_pages_that_exist_with_one_of_each_success_kind() -> None:
    assert len(PAGES) == 10
    kinds = {p.success.kind for p in PAGES}
    assert kinds == {"request", "answer", "infeasible"}
    for page in PAGES:
        assert (LIVE / page.page).is_file(), page.page
        assert page.goal.strip() and page.name.isidentifier()
        if page.success.kind == "request":
            assert page.success.path == f"/__done__/{page.name}" and page.success.query
    assert set(SOLUTIONS) == {p.name for p in PAGES if p.success.kind == "request"}


def test_a_malformed_manifest_and_an_unknown_page_are_errors_that_say_so(tmp_path: Path) -> None:
    bad = tmp_path / "pages.json"
    bad.write_text('[{"name": "x", "page": "x.html", "goal": "g", "success": {"kind": "guess"}}]')
    with pytest.raises(bench.ManifestError, match="entry 0.success"):
        bench.load_manifest(bad)
    with pytest.raises(bench.ManifestError, match="unknown page.*nope.*known: faq"):
        bench.select_pages(PAGES, "faq,nope")
    assert [p.name for p in bench.select_pages(PAGES, "hours, faq")] == ["hours", "faq"]


@pytest.mark.parametrize("path", HTML_FILES + FRESH_HTML_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_page_stays_inside_the_rails_and_its_own_origin(path: Path) -> None:
    text = path.read_text()
    doc = _doc(path)
    assert not doc.xpath("//form"), "no <form>: Enter or a submit would navigate"
    assert not doc.xpath("//*[@type='submit' or @type='password']")
    assert not re.search(r"https?:|(href|src)=[\"']//|url\(\s*['\"]?//", text, re.I), "an absolute URL"
    for link in doc.xpath("//a/@href"):
        target = link.split("?")[0].split("#")[0]
        assert not target or (path.parent / target).is_file(), f"a link to a missing page: {link}"
    for control in doc.xpath(CLICKABLE):
        words = " ".join(
            [
                control.text_content(),
                control.get("aria-label", ""),
                control.get("value", ""),
                _label_of(doc, control),
            ]
        )
        assert not CLICK_WORDS.search(words), f"a control the gate would stop: {words.strip()!r}"
    for field in doc.xpath("//input | //select | //textarea"):
        attributes = [
            _label_of(doc, field),
            *(field.get(a, "") for a in ("name", "placeholder", "id", "aria-label")),
        ]
        hits = [t for t in FIELD_TERMS for a in attributes if t in a.lower()]
        assert not hits, f"a field the gate would refuse ({hits}): {attributes}"
    assert len(doc.xpath(INTERACTIVE)) < MAX_INTERACTIVE


def test_the_scoring_reads_query_values_answers_and_the_infeasible_end() -> None:
    log = bench.RequestLog()
    log.add("/__done__/settings?dark_mode=on&compact_layout=off")
    log.add("/__done__/todo?item=call+the++Plumber&count=4")
    requests = log.entries()
    reached = bench.goal_reached
    assert reached(BY_NAME["settings"], end="max_steps", final_answer="", requests=requests)
    assert reached(BY_NAME["todo"], end="stuck", final_answer="", requests=requests)  # case and spaces aside
    assert not reached(BY_NAME["plans"], end="answered", final_answer="Done", requests=requests)
    assert reached(BY_NAME["hours"], end="answered", final_answer="It opens at 11 AM.", requests=[])
    assert not reached(BY_NAME["hours"], end="answered", final_answer="It opens at 10:00.", requests=[])
    assert reached(BY_NAME["account"], end="infeasible", final_answer="", requests=[])
    assert not reached(BY_NAME["account"], end="answered", final_answer="Done", requests=[])


# --------------------------------------------------------------------------------------------------
# In Chromium: each page is solvable, and only its own origin is ever asked for anything
# --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Any]]:
    with bench.serve_logged(LIVE) as (base, log):
        yield base, log


@pytest.fixture
def page_and_urls(chromium: Any) -> Iterator[tuple[Any, list[str]]]:
    context = chromium.new_context(viewport={"width": 1280, "height": 720})
    urls: list[str] = []
    context.on("request", lambda request: urls.append(request.url))
    yield context.new_page(), urls
    context.close()


def _wait_until(check: Callable[[], bool], timeout_s: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


@pytest.mark.parametrize("name", sorted(SOLUTIONS))
def test_the_intended_solution_makes_the_done_request_and_the_page_shows_it(
    name: str, served: tuple[str, Any], page_and_urls: tuple[Any, list[str]]
) -> None:
    base, log = served
    page, urls = page_and_urls
    rule = BY_NAME[name].success
    log.clear()
    page.goto(f"{base}/{BY_NAME[name].page}")
    page.wait_for_load_state("networkidle")
    assert not bench.request_seen(rule, log.entries()), "reached before anything was done"
    for step in SOLUTIONS[name]:
        step(page)
    assert _wait_until(lambda: bench.request_seen(rule, log.entries())), log.entries()
    assert VISIBLE_AFTER[name] in page.locator("body").inner_text()
    foreign = [u for u in urls if not u.startswith(f"{base}/")]
    assert not foreign, f"requests outside the page's origin: {foreign}"


def test_the_questions_answers_are_on_their_pages_and_the_faq_answer_only_once_opened(
    served: tuple[str, Any], page_and_urls: tuple[Any, list[str]]
) -> None:
    base, log = served
    page, urls = page_and_urls
    page.goto(f"{base}/faq.html")
    assert "30 days" not in page.locator("body").inner_text()
    page.get_by_role("button", name="What is your returns policy?").click()
    assert "30 days" in page.locator("body").inner_text()
    assert _wait_until(lambda: any(r.query == {"opened": "returns"} for r in log.entries()))
    page.goto(f"{base}/hours.html")
    sunday = page.get_by_role("row", name=re.compile("Sunday")).inner_text()
    assert all(s in sunday for s in BY_NAME["hours"].success.contains)
    page.goto(f"{base}/account.html")
    assert "two-factor" not in page.locator("body").inner_text().lower()
    assert not [u for u in urls if not u.startswith(f"{base}/")]
