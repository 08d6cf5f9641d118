"""The ablation pages: `/ablations/{key}` shows one `awm ablate` folder (its arms with links to their run
folders, its plots, the per-task table, the paired comparisons, the judge audit and RESULTS.md in full);
`/api/ablations/{key}` is its results.json and `/api/ablations/{key}/files/{name}` one of its files.

Why it is built this way: RESULTS.md and results.json are data that a run wrote, and they may hold
anything (a task name with markup in it, a hand-edited file). So the Markdown is rendered with raw HTML
off: it is escaped and never runs. Its relative image and link targets are rewritten on markdown-it's
token stream, not with regexes over HTML, so they point at the files API. That API reads only through
`file_in` and serves only the report's kinds of file. The tables come from results.json checked
against `AblationReport`, the model `awm ablate` wrote it with, so the page shows the report's own
numbers and does not work them out again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Annotated, Any
from urllib.parse import quote, unquote, urlsplit

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from markdown_it import MarkdownIt
from markdown_it.token import Token
from pydantic import ValidationError

from awm.errors import AwmError, DataError
from awm.evaluation.audit import JudgeAudit
from awm.pipeline.report import AblationReport, ArmStats, PairedComparison
from awm.pipeline.results import RESULTS_JSON, RESULTS_MD
from awm.traces.db import RunDatabase

from .catalog import Folder, NotServed, arm_place, file_in
from .runs import episode_status
from .web import AppContext, FormatQuery, context, list_response, page

router = APIRouter()
Ctx = Annotated[AppContext, Depends(context)]

# What the files API serves: the report's own kinds of file, each with its media type.
FILE_TYPES = {
    ".png": "image/png",
    ".md": "text/markdown; charset=utf-8",
    ".json": "application/json",
    ".csv": "text/csv; charset=utf-8",
}


# --------------------------------------------------------------------------------------------------
# Shaping (pure)
# --------------------------------------------------------------------------------------------------


def files_url(key: str, name: str) -> str:
    """The files API's URL for `name` (a path relative to the ablation folder)."""
    return f"/api/ablations/{quote(key, safe='')}/files/{quote(name, safe='/')}"


def relative_file(target: str) -> str | None:
    """The file name a Markdown target names when it is relative (`plot.png`, `arms/x/summary.md`),
    else None: a URL with a scheme or host, an absolute path and a bare `#fragment` are left alone."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path or parts.path.startswith("/"):
        return None
    return unquote(parts.path)


def _rewrite(tokens: list[Token], key: str) -> None:
    """Point relative image and link targets at the files API, in place. Done on the tokens, after
    markdown-it dropped unsafe schemes (`javascript:`...), so no HTML is ever parsed here."""
    for token in tokens:
        attr = {"image": "src", "link_open": "href"}.get(token.type)
        target = token.attrGet(attr) if attr else None
        name = relative_file(str(target)) if target is not None else None
        if attr and name is not None:
            token.attrSet(attr, files_url(key, name))
        if token.children:
            _rewrite(token.children, key)


def render_markdown(text: str, key: str) -> str:
    """RESULTS.md as HTML: raw HTML is escaped (the file is data), tables are on, and relative image and
    link targets point at the ablation's files API."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    env: dict[str, Any] = {}
    tokens = md.parse(text, env)
    _rewrite(tokens, key)
    return md.renderer.render(tokens, md.options, env)


# RESULTS.md's sections the page shows itself (as its own tables, plots and links), by the start of
# their `##` title: rendered once, not again inside RESULTS.md.
SHOWN_SECTIONS = ("Per task", "Paired differences", "Judge audit", "Plots")


def without_sections(text: str, titles: tuple[str, ...]) -> str:
    """The Markdown without its `##` sections whose title starts with one of `titles` (each up to the
    next `##` heading). Found on markdown-it's tokens, so a `##` line inside a code block is no heading."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(text, {})
    lines = text.splitlines(keepends=True)
    starts = [
        (tok.map[0], tokens[i + 1].content)
        for i, tok in enumerate(tokens)
        if tok.type == "heading_open" and tok.tag == "h2" and tok.map is not None
    ]
    drop: set[int] = set()
    for n, (start, title) in enumerate(starts):
        if title.startswith(titles):
            end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
            drop.update(range(start, end))
    return "".join(line for i, line in enumerate(lines) if i not in drop)


@dataclass
class EpisodeLink:
    """One episode behind a per-task cell: its page, and what it was, for the link's title."""

    url: str
    success: bool
    title: str


@dataclass
class TaskCell:
    arm: str
    successes: int
    episodes: int
    links: list[EpisodeLink] = field(default_factory=list)  # its episodes, where a served run holds them

    @property
    def rate(self) -> float | None:
        return self.successes / self.episodes if self.episodes else None


@dataclass
class TaskRow:
    """One row of the per-task table: each arm's successes over its episodes of the task (seeds and
    repeats together, as the report counts them), and each other arm's rate minus the first arm's."""

    task: str
    cells: list[TaskCell]
    diffs: list[float | None]  # one per arm after the first (the baseline)


def per_task_rows(report: AblationReport, links: dict[tuple[str, str], list[EpisodeLink]] | None = None) -> list[TaskRow]:
    """The per-task table; `links` (by task and arm: `task_episodes`) puts each cell's episodes in it."""
    arms = [a.name for a in report.arms]
    rows = []
    for task in sorted(report.per_task):
        counts = report.per_task[task]
        cells = []
        for arm in arms:
            successes, episodes = [*(counts.get(arm) or []), 0, 0][:2]
            cells.append(TaskCell(arm, successes, episodes, (links or {}).get((task, arm), [])))
        base = cells[0].rate if cells else None
        diffs = [None if base is None or c.rate is None else c.rate - base for c in cells[1:]]
        rows.append(TaskRow(task=task, cells=cells, diffs=diffs))
    return rows


@dataclass
class RunLink:
    label: str  # rep1, rep2...
    key: str  # the run's key: its page is /runs/<key>


@dataclass
class ArmView:
    """An arm as the page shows it: the report's numbers (None for a folder the report does not name)
    and the run folders of its repeats that the catalog serves."""

    name: str
    stats: ArmStats | None
    runs: list[RunLink] = field(default_factory=list)


def _repeat_order(label: str) -> tuple[int, str]:
    digits = label.removeprefix("rep")
    return (int(digits) if digits.isdigit() else 1 << 30, label)


def arm_views(report: AblationReport, ablation: Folder, served: dict[str, Folder]) -> list[ArmView]:
    """The report's arms in its order, each with its served run folders (`arms/<arm>/<rep>`).

    The links come from the catalog's own folders found under `arms/`, never from a path built out of
    results.json's arm names, so a link always names a run the server actually serves."""
    runs: dict[str, list[RunLink]] = {}
    for folder in served.values():
        place = arm_place(folder, {ablation.key: ablation})
        if place is not None:
            runs.setdefault(place.arm, []).append(RunLink(label=place.repeat, key=folder.key))
    views = [ArmView(name=a.name, stats=a, runs=runs.pop(a.name, [])) for a in report.arms]
    views += [ArmView(name=name, stats=None, runs=links) for name, links in sorted(runs.items())]
    for view in views:
        view.runs.sort(key=lambda r: _repeat_order(r.label))
    return views


def task_episodes(arms: list[ArmView], served: dict[str, Folder]) -> dict[tuple[str, str], list[EpisodeLink]]:
    """Each (task, arm)'s episodes in the arm's served runs, as the per-task table counts them: the task
    is the episode's task id without `browsergym/` (the report's key); a run that cannot be read is
    left out (the runs page names its error)."""
    out: dict[tuple[str, str], list[EpisodeLink]] = {}
    for arm in arms:
        for run in arm.runs:
            try:
                with RunDatabase(served[run.key].path) as db:
                    episodes = db.episodes()
            except (AwmError, KeyError):
                continue
            for e in episodes:
                task = e.task.task_id.removeprefix("browsergym/")
                status = episode_status(e)
                seed = "" if e.task.seed is None else f" seed {e.task.seed}"
                out.setdefault((task, arm.name), []).append(
                    EpisodeLink(
                        url=f"/runs/{quote(run.key, safe='')}/episodes/{quote(e.id, safe='')}",
                        success=status == "success",
                        title=f"{arm.name} {run.label}{seed}: {status}",
                    )
                )
    return out


def judge_audits(report: AblationReport) -> list[tuple[str, JudgeAudit]]:
    """The arms that carry a judge audit (an arm whose episodes had both a judge label and a reward)."""
    return [(a.name, a.judge_audit) for a in report.arms if a.judge_audit is not None]


def paired_comparisons(report: AblationReport) -> list[tuple[str, list[PairedComparison]]]:
    """The report's paired tables that are not empty: against the first arm, against budget-matched."""
    tables = [
        ("against the first arm", report.comparisons),
        ("against budget-matched", report.budget_comparisons),
    ]
    return [(title, rows) for title, rows in tables if rows]


# --------------------------------------------------------------------------------------------------
# Reading (through the catalog only)
# --------------------------------------------------------------------------------------------------


def _ablation(ctx: AppContext, key: str) -> Folder:
    return ctx.catalog.folder(key, "ablation")


def read_results(folder: Folder) -> Any:
    """results.json's content, parsed; a file that is not JSON is a DataError naming it (422)."""
    path = file_in(folder, RESULTS_JSON)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from exc


def read_report(folder: Folder) -> AblationReport:
    data = read_results(folder)
    try:
        return AblationReport.model_validate(data)
    except ValidationError as exc:
        raise DataError(f"{folder.path / RESULTS_JSON}: not an ablation report ({exc})") from exc


def read_markdown(folder: Folder) -> str | None:
    """RESULTS.md's text, or None when the folder has none (results.json alone is an ablation)."""
    try:
        path = file_in(folder, RESULTS_MD)
    except NotServed:
        return None
    return path.read_text(encoding="utf-8", errors="replace")


def plot_names(folder: Folder, first: list[str]) -> list[str]:
    """Every PNG directly in the folder that `file_in` accepts (a symlink pointing out is left out),
    the report's own plots (`first`) in its order, then any others by name."""
    names = []
    for path in folder.path.glob("*.png"):
        try:
            file_in(folder, path.name)
        except NotServed:
            continue
        names.append(path.name)
    order = {name: i for i, name in enumerate(first)}
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))


def served_file(folder: Folder, name: str) -> tuple[Path, str]:
    """The file `name` names in the folder and its media type; anything not of `FILE_TYPES`, or not
    inside the folder once symlinks are followed, is not served."""
    media = FILE_TYPES.get(PurePosixPath(name).suffix.lower())
    path = file_in(folder, name)
    if media is None or FILE_TYPES.get(path.suffix.lower()) != media:
        raise NotServed(f"'{name}' is not a report file of {folder.key}")
    return path, media


# --------------------------------------------------------------------------------------------------
# Routes
# --------------------------------------------------------------------------------------------------


@router.get("/api/ablations/{key}")
def api_ablation(key: str, ctx: Ctx) -> JSONResponse:
    return JSONResponse(read_results(_ablation(ctx, key)))


@router.get("/api/ablations/{key}/per-task")
def api_per_task(key: str, ctx: Ctx, fmt: FormatQuery = "json") -> Response:
    """The per-task table as a list (`?format=csv` for a file): each arm's successes and episodes."""
    folder = _ablation(ctx, key)
    rows = [
        {"task": r.task, "arms": {c.arm: {"successes": c.successes, "episodes": c.episodes} for c in r.cells}}
        for r in per_task_rows(read_report(folder))
    ]
    return list_response(rows, fmt, f"{folder.key}-per-task")


@router.get("/api/ablations/{key}/files/{name:path}")
def api_ablation_file(key: str, name: str, ctx: Ctx) -> FileResponse:
    path, media = served_file(_ablation(ctx, key), name)
    return FileResponse(path, media_type=media)


@router.get("/ablations/{key}")
def ablation_page(request: Request, key: str, ctx: Ctx) -> Response:
    folder = _ablation(ctx, key)
    report = read_report(folder)
    markdown = read_markdown(folder)
    served = ctx.catalog.folders()
    arms = arm_views(report, folder, served)
    return page(
        request, "ablation.html", folder=folder, report=report, arms=arms,
        plots=[(name, files_url(folder.key, name)) for name in plot_names(folder, report.plots)],
        tasks=per_task_rows(report, task_episodes(arms, served)), paired=paired_comparisons(report),
        audits=judge_audits(report), shown_sections=SHOWN_SECTIONS,
        results_html=None if markdown is None else render_markdown(without_sections(markdown, SHOWN_SECTIONS), folder.key),
        files={n: files_url(folder.key, n) for n in (RESULTS_MD, RESULTS_JSON)},
    )  # fmt: skip
