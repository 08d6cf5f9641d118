"""The fresh live pages (tests/fixtures/live-fresh): eight sites the agent's rules were never written from,
run with `scripts/bench_live.py --manifest tests/fixtures/live-fresh/pages.json`. No model, no browser:
the manifest loads with bench_live's own loader, names pages that exist, and the pages keep the same
rules as the ten tuned ones (tests/test_live_pages.py): no form, no absolute URL, no control or field the
confirmation gate would stop. That each page is solvable by hand was checked in Chromium when it was written.
"""

from __future__ import annotations

from tests.test_live_pages import (
    ROOT,
    bench,
)

FRESH = ROOT / "tests" / "fixtures" / "live-fresh"
MANIFEST = FRESH / "pages.json"
PAGES = bench.load_manifest(MANIFEST)
HTML_FILES = sorted(FRESH.glob("*.html"))


def test_the_fresh_manifest_loads_and_names_pages_that_exist() -> None:
    assert len(PAGES) == 8
    kinds = [p.success.kind for p in PAGES]
    assert kinds.count("request") == 4 and kinds.count("answer") == 3 and kinds.count("infeasible") == 1
    tuned = {p.name for p in bench.load_manifest()}
    for page in PAGES:
        assert (FRESH / page.page).is_file(), page.page
        assert page.goal.strip() and page.name.isidentifier()
        assert page.name not in tuned, f"{page.name} repeats a tuned page's name"
        if page.success.kind == "request":
            assert page.success.path == f"/__done__/{page.name}" and page.success.query
            fetched = f"fetch('{page.success.path}?"
            assert any(fetched in f.read_text() for f in HTML_FILES), f"no page fetches {page.success.path}"


def test_the_manifest_option_defaults_to_the_tuned_pages_and_the_results_name_the_one_used() -> None:
    assert bench.parse_args([]).manifest == bench.MANIFEST
    args = bench.parse_args(["--manifest", str(MANIFEST)])
    label = bench.manifest_label(args.manifest)
    assert label == "tests/fixtures/live-fresh/pages.json"
    totals = bench.totals_of([], 0.0)
    summary = bench.summary_markdown([], totals, command="bench_live.py", commit="abc", manifest=label)
    assert f"Manifest: `{label}`" in summary
