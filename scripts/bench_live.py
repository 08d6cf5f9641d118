"""Benchmark the LLM web agent on ten small local sites: does it reach the goal, and does it end the episode itself?

What it measures: each page of `tests/fixtures/live/pages.json` (a settings page, a cart, a to-do list, a
blog with two pages, a search box, a tab widget, a plan picker, two read-only questions and one impossible
goal) runs as BrowserGym's open-ended task (`browsergym/openended`: a start URL and a goal in words), one
episode per page, with the project's own policy factory, driver and harness on the embedded local model.
Each page scores two things apart:

- reached: the goal's state was achieved. The pages call `fetch('/__done__/<name>?key=value')` when their
  action happens, and the server here logs every request, so success is read off the server's log (the
  query values the manifest names, compared case-insensitively), never off what the agent says; a question
  is scored from the agent's final message (case-insensitive substrings), the impossible goal by the
  episode ending with `report_infeasible`.
- self-ended: the agent ended the episode itself (`send_msg_to_user` -> "answered", `report_infeasible` ->
  "infeasible", or the task said done) instead of running until the loop detector ("stuck") or the step
  budget ("max_steps") stopped it.

Why: on live pages nothing tells the agent it is finished; an agent that reaches the goal and then keeps
clicking wastes the step budget and risks undoing its work. The pair of figures shows both halves.

`--manifest PATH` runs another set of pages in the same format (e.g. `tests/fixtures/live-fresh/pages.json`,
eight pages the agent's rules were not written from); the pages are served from the manifest's own folder.

Writes OUT/summary.md (table, totals, command line, git commit, manifest), OUT/results.json and
OUT/trajectories/<page>.json. The model is the embedded Qwen2.5-Coder-1.5B (llama.cpp); about a minute
per page on 2 cores.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import shlex
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qs, urlencode, urlsplit

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
PAGES_DIR = ROOT / "tests" / "fixtures" / "live"
MANIFEST = PAGES_DIR / "pages.json"
DONE_PREFIX = "/__done__/"
SELF_ENDS = ("answered", "infeasible", "done")


# --------------------------------------------------------------------------------------------------
# The manifest
# --------------------------------------------------------------------------------------------------


class RequestSuccess(BaseModel):
    """Reached when the page requested `path` with (at least) these query values."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["request"]
    path: str
    query: dict[str, str] = Field(default_factory=dict)


class AnswerSuccess(BaseModel):
    """Reached when the agent's final message contains every one of these substrings (any case)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["answer"]
    contains: list[str] = Field(min_length=1)


class InfeasibleSuccess(BaseModel):
    """Reached when the episode ended with `report_infeasible`: the goal cannot be done on the page."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["infeasible"]


Success = Annotated[RequestSuccess | AnswerSuccess | InfeasibleSuccess, Field(discriminator="kind")]


class LivePage(BaseModel):
    """One manifest entry: a page of the folder, the goal a person would type, and what success is."""

    model_config = ConfigDict(extra="forbid")
    name: str
    page: str
    goal: str
    success: Success


class ManifestError(Exception):
    """The manifest is missing or malformed, or names a page it does not have; the message says which."""


def load_manifest(path: Path = MANIFEST) -> list[LivePage]:
    try:
        pages = TypeAdapter(list[LivePage]).validate_json(Path(path).read_text())
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such manifest") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ManifestError(f"{path}: entry {where}: {first['msg']}") from None
    names = [p.name for p in pages]
    if len(set(names)) != len(names):
        raise ManifestError(f"{path}: page names repeat ({', '.join(names)})")
    return pages


def select_pages(pages: list[LivePage], names: str | None) -> list[LivePage]:
    """All pages, or those named in a comma list (an unknown name is an error listing the known ones)."""
    if not names:
        return pages
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    known = {p.name: p for p in pages}
    missing = [n for n in wanted if n not in known]
    if missing:
        raise ManifestError(f"unknown page(s) {', '.join(missing)}; known: {', '.join(known)}")
    return [known[n] for n in wanted]


# --------------------------------------------------------------------------------------------------
# The logging server
# --------------------------------------------------------------------------------------------------


class LoggedRequest(BaseModel):
    path: str
    query: dict[str, str]  # the first value of each key


class RequestLog:
    """Every request the server answered, in order; safe to append from the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[LoggedRequest] = []

    def add(self, raw_path: str) -> None:
        parts = urlsplit(raw_path)
        query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        with self._lock:
            self._entries.append(LoggedRequest(path=parts.path, query=query))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def entries(self) -> list[LoggedRequest]:
        with self._lock:
            return list(self._entries)


class _LoggingHandler(SimpleHTTPRequestHandler):
    """Serves the folder's files, logs each request's path and query, answers `/__done__/...` with 204."""

    def __init__(self, *args: Any, log: RequestLog, **kwargs: Any) -> None:
        self._log = log
        super().__init__(*args, **kwargs)

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        self._log.add(self.path)
        if urlsplit(self.path).path.startswith(DONE_PREFIX):
            self.send_response(204)
            self.end_headers()
            return
        super().do_GET()

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-store")  # a reloaded page runs its script again
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        return


@contextlib.contextmanager
def serve_logged(folder: Path = PAGES_DIR) -> Iterator[tuple[str, RequestLog]]:
    """Serve `folder` on 127.0.0.1 at a free port for the block; yields the base URL and the request log."""
    log = RequestLog()
    handler = functools.partial(_LoggingHandler, directory=str(folder), log=log)
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", log
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------------------------------
# Scoring (pure)
# --------------------------------------------------------------------------------------------------


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def request_seen(rule: RequestSuccess, requests: Sequence[LoggedRequest]) -> bool:
    """A request to the rule's path carried every query value the rule names (case and spacing aside)."""
    return any(
        r.path == rule.path and all(k in r.query and _same(r.query[k], v) for k, v in rule.query.items())
        for r in requests
    )


def goal_reached(page: LivePage, *, end: str, final_answer: str, requests: Sequence[LoggedRequest]) -> bool:
    rule = page.success
    if isinstance(rule, RequestSuccess):
        return request_seen(rule, requests)
    if isinstance(rule, AnswerSuccess):
        answer = final_answer.casefold()
        return bool(final_answer) and all(s.casefold() in answer for s in rule.contains)
    return end == "infeasible"


class PageResult(BaseModel):
    name: str
    goal: str
    reached: bool
    self_ended: bool
    ended_right: bool  # reached, and ended the right way: the answer/finish message, or infeasible where it is
    end: str
    steps: int  # model steps (a workflow's sub-steps are not counted)
    seconds: float
    prompt_tokens: int
    final_answer: str = ""
    last_actions: list[str] = Field(default_factory=list)  # only when reached but not self-ended
    done_requests: list[str] = Field(default_factory=list)  # the /__done__ requests the page made
    trajectory_file: str = ""


def score_page(page: LivePage, trajectory: Any, requests: Sequence[LoggedRequest]) -> PageResult:
    """The result of one page from its trajectory and the requests logged during its episode."""
    model_steps = [s for s in trajectory.steps if s.called_by is None]
    reached = goal_reached(page, end=trajectory.end, final_answer=trajectory.final_answer, requests=requests)
    self_ended = trajectory.end in SELF_ENDS
    right_end = ("infeasible",) if page.success.kind == "infeasible" else ("answered", "done")
    done = [r for r in requests if r.path.startswith(DONE_PREFIX)]
    ran_on = reached and not self_ended
    return PageResult(
        name=page.name,
        goal=page.goal,
        reached=reached,
        self_ended=self_ended,
        ended_right=reached and trajectory.end in right_end,
        end=trajectory.end,
        steps=len(model_steps),
        seconds=round(trajectory.seconds, 1),
        prompt_tokens=trajectory.prompt_tokens,
        final_answer=trajectory.final_answer,
        last_actions=[s.action_str for s in trajectory.steps if s.action_str][-3:] if ran_on else [],
        done_requests=[f"{r.path}?{urlencode(r.query)}" for r in done],
    )


class Totals(BaseModel):
    pages: int
    reached: int
    self_ended: int
    reached_and_self_ended: int
    ended_right: int
    stuck: int
    max_steps: int
    median_steps: float
    seconds: float


def totals_of(results: Sequence[PageResult], seconds: float) -> Totals:
    return Totals(
        pages=len(results),
        reached=sum(r.reached for r in results),
        self_ended=sum(r.self_ended for r in results),
        reached_and_self_ended=sum(r.reached and r.self_ended for r in results),
        ended_right=sum(r.ended_right for r in results),
        stuck=sum(r.end == "stuck" for r in results),
        max_steps=sum(r.end == "max_steps" for r in results),
        median_steps=statistics.median([r.steps for r in results]) if results else 0.0,
        seconds=round(seconds, 1),
    )


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------


def _clip(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _note(r: PageResult) -> str:
    if r.last_actions:
        return "last: " + " ; ".join(r.last_actions)
    return _clip(r.final_answer) if r.final_answer else ""


def results_table(results: Sequence[PageResult]) -> Table:
    table = Table(title="Live pages: reached the goal / ended the episode itself")
    for column, justify in (
        ("page", "left"), ("reached", "center"), ("self-ended", "center"), ("end", "left"), ("steps", "right"),
        ("s", "right"), ("prompt tok", "right"), ("answer, or last actions when it ran on", "left"),
    ):  # fmt: skip
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for r in results:
        table.add_row(
            r.name, "yes" if r.reached else "no", "yes" if r.self_ended else "no", r.end, str(r.steps),
            f"{r.seconds:.0f}", str(r.prompt_tokens), _note(r),
        )  # fmt: skip
    return table


TOTAL_COLUMNS = (
    "reached",
    "self-ended",
    "reached and self-ended",
    "reached and ended right",
    "stuck",
    "max_steps",
    "median steps",
    "time",
)


def total_cells(t: Totals) -> list[str]:
    return [
        f"{t.reached}/{t.pages}", f"{t.self_ended}/{t.pages}", f"{t.reached_and_self_ended}/{t.pages}",
        f"{t.ended_right}/{t.pages}", str(t.stuck), str(t.max_steps), f"{t.median_steps:g}", f"{t.seconds / 60:.1f} min",
    ]  # fmt: skip


def totals_table(t: Totals) -> Table:
    table = Table(title="Totals")
    for column in TOTAL_COLUMNS:
        table.add_column(column, justify="right")
    table.add_row(*total_cells(t))
    return table


def summary_markdown(
    results: Sequence[PageResult], totals: Totals, *, command: str, commit: str, manifest: str = ""
) -> str:
    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    lines = [
        "# Live pages: reached the goal, and ended the episode itself",
        "",
        f"Command: `{command}`  ",
        f"Commit: `{commit}`" + ("  " if manifest else ""),
        *([f"Manifest: `{manifest}`"] if manifest else []),
        "",
        row(TOTAL_COLUMNS),
        row(["---"] * len(TOTAL_COLUMNS)),
        row(total_cells(totals)),
        "",
        row(
            [
                "page",
                "goal",
                "reached",
                "self-ended",
                "end",
                "steps",
                "s",
                "prompt tok",
                "answer / last actions",
            ]
        ),
        row(["---"] * 9),
    ]
    for r in results:
        lines.append(
            row([r.name, r.goal, "yes" if r.reached else "no", "yes" if r.self_ended else "no", r.end,
                 str(r.steps), f"{r.seconds:.0f}", str(r.prompt_tokens), _note(r)])
        )  # fmt: skip
    return "\n".join(lines) + "\n"


def manifest_label(path: Path) -> str:
    """The manifest as results record it: relative to the repository when inside it, else absolute."""
    resolved = Path(path).resolve()
    try:
        return str(resolved.relative_to(ROOT))
    except ValueError:
        return str(resolved)


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


# --------------------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  python scripts/bench_live.py --benchmark browsergym --out /tmp/bench-live-before\n"
            "  python scripts/bench_live.py --pages settings,hours --max-steps 6\n"
            "  python scripts/bench_live.py --guidance off --out runs/live-guidance-off\n"
            "  python scripts/bench_live.py --manifest tests/fixtures/live-fresh/pages.json --out runs/live-fresh"
        ),
    )
    parser.add_argument("--max-steps", type=int, default=10, help="step budget of each episode (default 10)")
    parser.add_argument(
        "--benchmark", default="live", help="the tasks' benchmark, which picks the action set (default live)"
    )
    parser.add_argument(
        "--manifest",
        type=Path,
        default=MANIFEST,
        help="the pages' manifest; its pages are served from its own folder "
        "(default tests/fixtures/live/pages.json)",
    )
    parser.add_argument(
        "--pages", default=None, help="a comma list of page names (default: all of the manifest)"
    )
    parser.add_argument(
        "--guidance", choices=("on", "off"), default="on", help="the agent's guidance filters (default on)"
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="results folder (default runs/bench-live-DATE)"
    )
    return parser.parse_args(argv)


def browser_settings() -> Any:
    from awm.config import BrowserSettings

    kwargs: dict[str, Any] = {"pre_observation_delay": 0.3}
    fields = BrowserSettings.model_fields
    if "allow_hosts" in fields:  # newer code: live runs need loopback named explicitly
        kwargs["allow_hosts"] = ["127.0.0.1"]
    elif "rails" in fields and "allow_hosts" in getattr(fields["rails"].annotation, "model_fields", {}):
        kwargs["rails"] = {"allow_hosts": ["127.0.0.1"]}
    return BrowserSettings(**kwargs)


def run(args: argparse.Namespace, console: Console) -> tuple[list[PageResult], Totals, Path]:
    from awm.assets import configure_runtime_env

    configure_runtime_env()
    from awm.config import load_settings
    from awm.pipeline.parallel import run_tasks_parallel
    from awm.pipeline.policy import PolicyFactory
    from awm.pipeline.progress import progress_board
    from awm.trajectory import Task
    from awm.webarena.harness import HarnessConfig

    manifest = Path(args.manifest).resolve()
    pages = select_pages(load_manifest(manifest), args.pages)
    out: Path = args.out or ROOT / "runs" / f"bench-live-{datetime.now():%Y%m%d-%H%M%S}"
    (out / "trajectories").mkdir(parents=True, exist_ok=True)
    settings = load_settings(
        overrides={"llm": {"backend": "local", "cache": False}, "agent": {"guidance": args.guidance}}
    )
    factory = PolicyFactory(settings, "llm")  # one factory: the model loads once for every page
    env_config = browser_settings()
    harness = HarnessConfig(max_steps=args.max_steps)
    results: list[PageResult] = []
    started = time.monotonic()
    with serve_logged(manifest.parent) as (base, log), progress_board(console) as board:
        bar = board.bar("live", total=len(pages))
        bar.start(total=len(pages))
        for page in pages:
            bar.note("solve", page.name)
            url = f"{base}/{page.page}"
            task = Task(
                task_id="browsergym/openended",
                goal=page.goal,
                scope=f"live/{page.name}",
                benchmark=args.benchmark,
                meta={"task_kwargs": {"start_url": url, "goal": page.goal}},
            )
            log.clear()  # one task per call, so each page's requests are its own
            [trajectory] = run_tasks_parallel(
                [task], policy_factory=factory, env_config=env_config, harness_config=harness
            )
            time.sleep(0.2)  # a fire-and-forget fetch of the last step may still be on its way
            result = score_page(page, trajectory, log.entries())
            path = out / "trajectories" / f"{page.name}.json"
            path.write_text(trajectory.model_dump_json(indent=2))
            result.trajectory_file = str(path.relative_to(out))
            results.append(result)
            bar.advance(result.reached)
    return results, totals_of(results, time.monotonic() - started), out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=180)  # a log file keeps whole rows
    from awm.errors import AwmError

    try:
        results, totals, out = run(args, console)
    except (ManifestError, AwmError) as exc:
        console.print(f"[red]error:[/red] {exc}")
        return 2
    command = shlex.join([Path(sys.executable).name, *sys.argv]) if argv is None else shlex.join(argv)
    commit = git_commit()
    console.print(results_table(results))
    console.print(totals_table(totals))
    manifest = manifest_label(args.manifest)
    summary = summary_markdown(results, totals, command=command, commit=commit, manifest=manifest)
    (out / "summary.md").write_text(summary)
    report = {
        "command": command,
        "commit": commit,
        "manifest": manifest,
        "max_steps": args.max_steps,
        "benchmark": args.benchmark,
        "guidance": args.guidance,
        "totals": totals.model_dump(),
        "pages": [r.model_dump() for r in results],
    }
    (out / "results.json").write_text(json.dumps(report, indent=2) + "\n")
    console.print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
