"""Benchmark one sync Playwright call with Playwright's own stack capture and with ours
(`awm.webarena.playwright_stack`), at a shallow stack and at a deep one (a test runner's depth).

Why: every sync Playwright call captured its caller's stack with `inspect.stack()`, whose cost grows with
stack depth and with the number of imported modules; inside a long pytest process the arena's replays
ran ~3x slower than alone. Target: the cheap capture at least 1.5x faster per call at the deep stack.

Run: .venv/bin/python scripts/bench_playwright.py [--calls 300]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

TARGET_SPEEDUP = 1.5
DEEP = 120  # frames under the call: pytest + the harness + BrowserGym reach about this


def _at_depth(depth: int, fn: Callable[[], float]) -> float:
    return _at_depth(depth - 1, fn) if depth else fn()


def _per_call_ms(page: object, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        page.evaluate("() => 1")  # type: ignore[attr-defined]
    return (time.perf_counter() - started) * 1000 / calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="calls per measurement (default 300)")
    args = parser.parse_args()

    import awm.cli  # noqa: F401  (the modules a real run has loaded: getmodule scans them all)
    from awm.assets import configure_runtime_env
    from awm.webarena import playwright_stack

    configure_runtime_env()
    from playwright.sync_api import sync_playwright

    rows: dict[tuple[str, int], float] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(chromium_sandbox=False)
        page = browser.new_page()
        page.set_content("<p>bench</p>")
        for label, install in (("playwright's", False), ("awm's", True)):
            if install:
                playwright_stack.install()
            for depth in (0, DEEP):
                rows[(label, depth)] = statistics.median(
                    _at_depth(depth, lambda: _per_call_ms(page, args.calls)) for _ in range(3)
                )
        browser.close()

    table = Table(title=f"one sync page.evaluate, ms per call (median of 3 x {args.calls})")
    table.add_column("stack depth")
    table.add_column("playwright's capture", justify="right")
    table.add_column("awm's capture", justify="right")
    table.add_column("speed-up", justify="right")
    table.add_column(f"target >= {TARGET_SPEEDUP}x at depth {DEEP}")
    for depth in (0, DEEP):
        before, after = rows[("playwright's", depth)], rows[("awm's", depth)]
        speedup = before / after
        verdict = ("met" if speedup >= TARGET_SPEEDUP else "NOT met") if depth == DEEP else ""
        table.add_row(str(depth), f"{before:.2f}", f"{after:.2f}", f"{speedup:.2f}x", verdict)
    Console().print(table)
    return 0 if rows[("playwright's", DEEP)] / rows[("awm's", DEEP)] >= TARGET_SPEEDUP else 1


if __name__ == "__main__":
    raise SystemExit(main())
