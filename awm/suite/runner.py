"""Run the adversarial suite with the grounded executor, recovery on or off, into a results folder.

The fixture pages are served by a local HTTP server on 127.0.0.1 (a free port, started and stopped
here); each task gets a fresh browser context (no state leaks between tasks) in one headless Chromium.
Writes `OUT/run_on.json` or `OUT/run_off.json` (one `TaskReport` per task), `OUT/logs/<task>-<on|off>.jsonl`
(observe, step_ok, failure, recovery, task_success events), and regenerates `OUT/RESULTS.md` from the
run files that exist.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Iterator, Sequence
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from awm.errors import ConfigError
from awm.files import write_text_atomic
from awm.grounding.executor import ExecutorConfig, JsonlLog, run_task
from awm.grounding.model import SuiteTask
from awm.suite.results import SuiteRun, run_file


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return


@contextlib.contextmanager
def serve_pages(folder: Path) -> Iterator[str]:
    """Serve `folder` on 127.0.0.1 at a free port for the block; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def select_tasks(names: Sequence[str] | None) -> list[SuiteTask]:
    """The suite's tasks, or the named ones (an unknown name is an error that lists the known ones)."""
    from awm.suite import tasks_by_id

    known = tasks_by_id()
    if not names:
        return list(known.values())
    missing = [n for n in names if n not in known]
    if missing:
        raise ConfigError(f"unknown suite task(s) {', '.join(missing)}; known: {', '.join(known)}")
    return [known[n] for n in names]


def run_suite(
    tasks: Sequence[SuiteTask],
    *,
    recovery: bool,
    out: Path,
    config: ExecutorConfig | None = None,
    headless: bool = True,
    on_task: Any = None,
) -> SuiteRun:
    """Run each task once with the grounded executor; write the run file and RESULTS.md."""
    from playwright.sync_api import sync_playwright

    from awm.assets import configure_runtime_env
    from awm.suite import PAGES_DIR
    from awm.suite.report import write_results
    from awm.webarena import playwright_stack

    configure_runtime_env()
    playwright_stack.install()
    config = (config or ExecutorConfig()).model_copy(update={"recovery": recovery})
    out = Path(out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    run = SuiteRun(recovery=recovery)
    suffix = "on" if recovery else "off"
    with serve_pages(PAGES_DIR) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(headless=headless)
        try:
            for task in tasks:
                context = browser.new_context(accept_downloads=False, viewport={"width": 1280, "height": 720})
                page = context.new_page()
                log = JsonlLog(out / "logs" / f"{task.id}-{suffix}.jsonl")
                try:
                    report = run_task(page, task, f"{base}/{task.page}", config, log)
                finally:
                    log.close()
                    context.close()
                run.tasks.append(report)
                if on_task is not None:
                    on_task(report)
        finally:
            browser.close()
    run.seconds = round(time.monotonic() - started, 2)
    write_text_atomic(run_file(out, recovery), run.model_dump_json(indent=2))
    write_results(out)
    return run
