"""The one results renderer: what both ablation reports' RESULTS.md, Rich tables, plots and files share.

Both ablation reports open RESULTS.md with the same identity (config, data, model and sampling, time,
provenance, warnings, base config), format numbers and intervals the same way, draw their tables the same
way (`md_table`), list memory heads the same way, set matplotlib up the same way and write their folder
the same way: plots first, then `results.json` and `RESULTS.md`, each atomically, so a plot that fails
leaves the last report whole. The layout, per benchmark:

- numbers (pure, what results.json holds): `awm.pipeline.report` (MiniWoB++/WebArena episodes) and
  `awm.pipeline.mind2web_report` (Mind2Web tasks), both counting with `awm.pipeline.stats`;
- how people read them (their own RESULTS.md sections, Rich tables, plots): `awm.pipeline.report_render`
  and `awm.pipeline.mind2web_report_render`, both built from the pieces here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from rich.table import Table

from awm.files import write_text_atomic
from awm.pipeline.stats import BOOTSTRAP_RESAMPLES, CI_TASK_BOOTSTRAP, CI_WILSON, Interval
from awm.provenance import PROVENANCE_JSON

RESULTS_JSON = "results.json"
RESULTS_MD = "RESULTS.md"
PLOT_DPI = 110
REPLAY_WARNING = (
    "repeats > 1 at temperature 0 with the response cache on: every repeat after the first replays the "
    "cached answers to the same prompts, so the repeats measure nothing new (at most environment noise): "
    "read the result as one run. For repeats that count, sample "
    "(llm.temperature > 0: such requests are never cached); turning only the cache off measures no more "
    "than the server's own nondeterminism."
)
# Shown in RESULTS.md beside the commit; the full list is in the provenance.
KEY_PACKAGES = (
    "awm",
    "browsergym-core",
    "browsergym-miniwob",
    "playwright",
    "openai",
    "anthropic",
    "torch",
    "sentence-transformers",
    "faiss-cpu",
    "xllamacpp",
    "llama-cpp-python",
    "ray",
    "pydantic",
    "numpy",
    "matplotlib",
)


class ReportIdentity(Protocol):
    """What both RESULTS.md renderers open with (and the Rich tables' caption reads)."""

    config_path: str
    config_hash: str
    repeats: int
    model: str
    backend: str
    temperature: float | None
    cache: bool | None
    created_at: str
    seconds: float
    provenance: dict[str, Any] | None
    warnings: list[str]
    base: dict[str, Any]


class ArmMemory(Protocol):
    """What the memory-versions lines read of an arm."""

    name: str
    memory: str
    final_versions: dict[str, int | None]


# --------------------------------------------------------------------------------------------------
# Numbers and intervals as text
# --------------------------------------------------------------------------------------------------


def fmt_num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def fmt_p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def fmt_pts(value: float | None) -> str:
    """A difference in points (already x100), always signed."""
    return "n/a" if value is None else f"{value:+.1f} pts"


def fmt_ci(ci: Interval | None, *, signed: bool = False, unit: str = "", suffix: str = "") -> str:
    """`[low, high]` to one decimal (`signed`: each with its sign), `unit` after each bound and
    `suffix` after the pair; the values as given (x100 them first where they are fractions)."""
    if ci is None:
        return "n/a"
    spec = "+.1f" if signed else ".1f"
    return f"[{ci[0]:{spec}}{unit}, {ci[1]:{spec}}{unit}]{suffix}"


def fmt_counts(counts: Mapping[str, int], empty: str = "-") -> str:
    """`name xN, ...` (episode ends, failure classes, step outcomes), `empty` when there are none."""
    return ", ".join(f"{k} x{v}" for k, v in counts.items()) or empty


def fmt_overrides(overrides: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in overrides.items()) or "-"


def fmt_version(version: int | None) -> str:
    return "-" if version is None else f"v{version}"


# --------------------------------------------------------------------------------------------------
# RESULTS.md pieces
# --------------------------------------------------------------------------------------------------


def md_table(header: Sequence[str], align: str, rows: Iterable[Sequence[object]]) -> list[str]:
    """A Markdown table: `align` has one letter per column, `l` (left) or `r` (right); an empty cell
    is one blank (`| |`)."""
    if len(align) != len(header):
        raise ValueError(f"align {align!r} names {len(align)} columns, the header {len(header)}")

    def line(cells: Sequence[object]) -> str:
        return "|" + "|".join(f" {c} " if str(c) else " " for c in cells) + "|"

    return [
        line(header),
        "|" + "".join("---:|" if a == "r" else "---|" for a in align),
        *(line(cells) for cells in rows),
    ]


def section(title: str, *body: str) -> list[str]:
    """`## title`, a blank line, then `body`, with a blank line before the title."""
    return ["", f"## {title}", "", *body]


def provenance_lines(provenance: dict[str, Any] | None) -> list[str]:
    """RESULTS.md's identity lines: the commit (and whether the tree was edited), the command, the
    packages (a few by name, the count of all), pointing to `provenance.json` for the rest."""
    if provenance is None:
        return ["- provenance: not recorded (no commit, command or package list for this report)"]
    commit = provenance.get("commit")
    if commit is None:
        code = "not a git checkout (no commit recorded)"
    else:
        dirty = provenance.get("dirty")
        state = {True: ", dirty: uncommitted changes", False: ", clean"}.get(dirty, ", state unknown")
        code = f"commit `{commit}`{state}"
    packages: dict[str, str] = provenance.get("packages") or {}
    lower = {name.lower(): version for name, version in packages.items()}
    key = ", ".join(f"{name} {lower[name]}" for name in KEY_PACKAGES if name in lower)
    return [
        f"- code: {code} (full record: [{PROVENANCE_JSON}]({PROVENANCE_JSON}))",
        f"- command: `{provenance.get('command_line', '-')}`",
        f"- python {provenance.get('python', '-')} on {provenance.get('platform', '-')}",
        f"- packages: {len(packages)} installed; {key or '-'}",
    ]


def replay_warnings(repeats: int, *, temperature: float | None, cache: bool | None) -> list[str]:
    """Why these repeats may be copies of one run: greedy decoding served from the response cache."""
    if repeats > 1 and temperature == 0 and cache is True:
        return [REPLAY_WARNING]
    return []


def head_lines(
    report: ReportIdentity, title: str, *, data: str = "", base_label: str = "Base pipeline config"
) -> list[str]:
    """RESULTS.md's opening: title, config, (data,) model and sampling, time, provenance, warnings and
    the base config as JSON, up to the arms table."""
    sampling = (
        ""
        if report.temperature is None
        else f", temperature {report.temperature:g}, response cache {'on' if report.cache else 'off'}"
    )
    lines = [
        f"# {title}",
        "",
        f"- config: `{report.config_path}` (hash `{report.config_hash}`), {report.repeats} repeat(s) per arm",
        *([f"- data: {data}"] if data else []),
        f"- model: `{report.model}` (backend {report.backend}{sampling})",
        f"- written: {report.created_at}, {report.seconds:.0f} s of wall time in total",
        *provenance_lines(report.provenance),
        "",
    ]
    if report.warnings:
        lines += ["## Warnings", "", *(f"- **Warning:** {w}" for w in report.warnings), ""]
    return [
        *lines,
        f"{base_label}:",
        "",
        "```json",
        json.dumps(report.base, indent=2, sort_keys=True, default=str),
        "```",
        "",
    ]


def bootstrap_phrase(unit: str) -> str:
    """How every bootstrap interval is made, for the interval notes."""
    return f"a seeded percentile bootstrap ({BOOTSTRAP_RESAMPLES} resamples) over tasks ({unit})"


def by_interval_method(methods: Iterable[str], *, wilson: str, bootstrap: str, mixed: str) -> str:
    """The note that fits the interval methods in use: all Wilson, all bootstrap, else `mixed`."""
    used = set(methods)
    if used == {CI_WILSON}:
        return wilson
    if used == {CI_TASK_BOOTSTRAP}:
        return bootstrap
    return mixed


def memory_lines(arm: ArmMemory) -> list[str]:
    """An arm's memory: off, or its heads (scope and version) after the task stream."""
    if arm.memory == "off":
        return [f"- **{arm.name}**: memory off"]
    heads = ", ".join(f"{s} v{v}" for s, v in arm.final_versions.items() if v is not None) or "no version"
    return [f"- **{arm.name}** ({arm.memory}): heads after the stream: {heads}"]


def plot_lines(plots: Sequence[str]) -> list[str]:
    return section("Plots", *(f"![{p}]({p})" for p in plots)) if plots else []


# --------------------------------------------------------------------------------------------------
# Rich tables (the end of `awm ablate`)
# --------------------------------------------------------------------------------------------------


def rich_table(
    title: str, columns: Sequence[str], *, left: Sequence[str], caption: str | None = None
) -> Table:
    """A Rich table whose `left` columns are left-justified and the rest (numbers) right-justified."""
    table = Table(title=title, caption=caption)
    for column in columns:
        table.add_column(column, justify="left" if column in left else "right")
    return table


def rich_caption(report: ReportIdentity) -> str:
    return "\n".join([f"config {report.config_hash}", *(f"warning: {w}" for w in report.warnings)])


# --------------------------------------------------------------------------------------------------
# Plots (matplotlib, Agg) and writing
# --------------------------------------------------------------------------------------------------


def pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only, no display), imported when a plot is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(plt: Any, fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)


def plot_grouped_bars(
    path: Path,
    groups: Sequence[str],
    series: Sequence[tuple[str, Sequence[float], Sequence[Sequence[float]] | None]],
    *,
    size: tuple[float, float],
    ylim: tuple[float, float],
    ylabel: str,
    title: str,
    slanted: bool = False,
) -> None:
    """Grouped bars: one group per x label, one bar per series (label, values, optional [low, high]
    error bars) in each group; `slanted` tilts long x labels."""
    plt = pyplot()
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=size)
    for i, (label, values, errors) in enumerate(series):
        xs = [x + i * width - 0.4 + width / 2 for x in range(len(groups))]
        if errors is None:
            ax.bar(xs, values, width, label=label)
        else:
            ax.bar(xs, values, width, yerr=errors, capsize=3, label=label)
    ax.set_xticks(range(len(groups)), groups, **({"rotation": 30, "ha": "right"} if slanted else {}))
    ax.set_ylim(*ylim)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    save_figure(plt, fig, path)


Report = TypeVar("Report", bound=BaseModel)


def write_results(
    report: Report,
    out: Path,
    *,
    plots: Sequence[tuple[str, Callable[[Report, Path], None]]],
    render: Callable[[Report], str],
) -> Path:
    """Draw the plots into `out`, then write `results.json` (the report, naming its plots) and
    `RESULTS.md` (`render`), each atomically; returns the RESULTS.md path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, draw in plots:
        draw(report, out / name)
    report = report.model_copy(update={"plots": [name for name, _ in plots]})
    write_text_atomic(out / RESULTS_JSON, report.model_dump_json(indent=2) + "\n")
    write_text_atomic(out / RESULTS_MD, render(report))
    return out / RESULTS_MD
