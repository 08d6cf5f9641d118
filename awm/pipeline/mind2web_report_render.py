"""The Mind2Web ablation report as people read it: RESULTS.md (one function per section), the Rich tables
`awm ablate` prints, the metrics plot, and the writer that puts them beside results.json.

The numbers are `awm.pipeline.mind2web_report`'s (pure: task results in, a `Mind2WebAblationReport`
out); what both ablation reports show alike (identity, number formats, tables, memory heads, Agg plots,
the atomic writer) is `awm.pipeline.results`. This module holds only the Mind2Web sections and plot.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from awm.pipeline.mind2web_report import (
    LABELS,
    METRICS,
    STEP_METRICS,
    Mind2WebAblationReport,
    TaskResult,
)
from awm.pipeline.results import (
    bootstrap_phrase,
    by_interval_method,
    fmt_ci,
    fmt_counts,
    fmt_num,
    fmt_overrides,
    fmt_p,
    fmt_pts,
    fmt_version,
    head_lines,
    md_table,
    memory_lines,
    plot_grouped_bars,
    plot_lines,
    rich_caption,
    rich_table,
    section,
    write_results,
)
from awm.pipeline.stats import Interval, per_task_mean, rows_by_task

PLOT_METRICS = "mind2web_metrics.png"


# --------------------------------------------------------------------------------------------------
# RESULTS.md, one function per section, the Rich tables and the plot
# --------------------------------------------------------------------------------------------------


def _cell(value: float | None, ci: Interval | None) -> str:
    return f"{fmt_num(value)} {fmt_ci(ci)}" if value is not None else "n/a"


def _macro(rows: Sequence[TaskResult], metric: str) -> float | None:
    """The macro figure alone (x100), as `metric_stats` computes it, without the interval."""
    means = per_task_mean(rows_by_task(rows), lambda r: r.value(metric))
    return 100 * sum(means.values()) / len(means) if means else None


def interval_note(report: Mind2WebAblationReport) -> str:
    """Which interval each figure carries, and why, for RESULTS.md."""
    sr_note = by_interval_method(
        (a.metrics["task_success_rate"].ci_method for a in report.arms if "task_success_rate" in a.metrics),
        wilson="SR's is Wilson's score interval over tasks (one repeat: each task is one success or failure)",
        bootstrap="SR's is the same bootstrap of the mean per-task success rate (repeats of a task are not independent)",
        mixed="SR's is Wilson's over tasks where each task ran once, else the same bootstrap",
    )
    return (
        f"95% intervals are over tasks, never over steps (a task's steps share its page and its gold "
        f"history, so they are not independent draws): macro EA, AF1 and step SR carry "
        f"{bootstrap_phrase('annotation ids')} of the mean per-task value; {sr_note}; micro figures carry "
        "the same bootstrap over tasks of the ratio right steps / steps, each resampled task bringing all "
        "its steps."
    )


def _arms_section(report: Mind2WebAblationReport) -> list[str]:
    header = ("arm", "overrides", "average", "tasks", "steps", *(f"{LABELS[m]} [95% CI]" for m in METRICS))
    rows: list[tuple[object, ...]] = []
    for a in report.arms:
        m = a.metrics
        if not m:
            continue
        rows.append(
            (
                a.name,
                fmt_overrides(a.overrides),
                "macro",
                a.tasks,
                a.steps,
                *(_cell(m[k].macro, m[k].ci95) for k in METRICS),
            )
        )
        rows.append(
            (
                a.name,
                "",
                "micro",
                a.tasks,
                a.steps,
                *(_cell(m[k].micro, m[k].micro_ci95) for k in STEP_METRICS),
                "= macro",
            )
        )
    return [
        "## Arms",
        "",
        f"Success rule: {report.success_rule}.",
        "",
        "AWM's Mind2Web metrics, x100, scored offline with teacher forcing (one prediction per annotated "
        f"step, the gold previous actions shown), element matching `{report.match}` (the first positive "
        "candidate): element accuracy (EA), action F1 (AF1), step success rate (step SR), task success "
        "rate (SR). Macro is the mean over tasks of each task's mean over its steps (AWM's headline "
        "figure; with repeats, each task's mean over its repeats first); micro is over all steps (SR has "
        f"no step-level version: micro SR is macro SR). {interval_note(report)}",
        "",
        *md_table(header, "lllrrllll", rows),
    ]


def _tokens_section(report: Mind2WebAblationReport) -> list[str]:
    header = (
        "arm",
        "task runs",
        "model calls/task",
        "tokens/task (actor / induction = total)",
        "cost/task",
        "recall@k",
        "unparsed",
        "SR (tasks)",
        "s/task",
    )
    rows = []
    for a in report.arms:
        t = a.tokens_per_task
        tokens = (
            f"{fmt_num(t.get('actor'), 0)} / {fmt_num(t.get('induction'), 0)} = {fmt_num(t.get('total'), 0)}"
        )
        recall = "n/a" if a.recall_at_k is None else f"{100 * a.recall_at_k:.1f}%"
        rows.append(
            (
                a.name,
                a.episodes,
                fmt_num(a.llm_calls_per_task, 2),
                tokens,
                f"${a.cost_per_task_usd:.4f}",
                recall,
                a.unparsed,
                f"{a.successes}/{a.episodes}",
                fmt_num(a.seconds_per_task),
            )
        )
    return section(
        "Tokens and model calls",
        "Per task run: actor tokens are the prompts and answers of the trajectories (whether or not the "
        "response cache answered), induction tokens the workflow inducer's real model calls (offline: "
        "once per website from train; online: after each task; rule induction makes none; cache hits are "
        "free). Recall@k is how often the target element was among the candidates shown: the ceiling on "
        "EA. Unparsed: answers that were no action (scored wrong).",
        "",
        *md_table(header, "lrrlrrrrr", rows),
    )


def _paired_section(report: Mind2WebAblationReport) -> list[str]:
    if not report.comparisons:
        return []
    header = (
        "A",
        "B",
        "tasks",
        "unpaired",
        "metric",
        "B better",
        "A better",
        "ties",
        "mean diff",
        "95% CI",
        "sign test p",
    )
    rows = [
        (
            c.arm_a,
            c.arm_b,
            c.pairs,
            c.unpaired,
            LABELS[m],
            d.b_wins,
            d.a_wins,
            d.ties,
            fmt_pts(d.mean_diff),
            fmt_ci(d.ci95, signed=True),
            fmt_p(d.sign_test_p),
        )
        for c in report.comparisons
        for m, d in ((m, c.metrics[m]) for m in METRICS)
    ]
    costs = [
        (c.arm_a, c.arm_b, fmt_num(c.mean_tokens_diff, 0), fmt_num(c.mean_llm_calls_diff, 2))
        for c in report.comparisons
    ]
    return section(
        "Paired differences (per task: same annotation id)",
        "B minus A in points (x100), one pair per task: the difference of the two arms' per-task values "
        "(each the task's mean over its steps, then over its repeats). The interval is a seeded "
        "percentile bootstrap over tasks of the mean difference; p is the exact two-sided sign test "
        "over tasks that differ (ties dropped). Tasks only one arm finished are left out (unpaired).",
        "",
        *md_table(header, "llrrlrrrrlr", rows),
        "",
        *md_table(("A", "B", "actor tokens diff/task", "model calls diff/task"), "llrr", costs),
    )


def _per_website_section(report: Mind2WebAblationReport) -> list[str]:
    arms = [a.name for a in report.arms]
    by_site: dict[str, dict[str, list[TaskResult]]] = {}
    for r in report.task_results:
        by_site.setdefault(r.website, {}).setdefault(r.arm, []).append(r)

    def cell(mine: Sequence[TaskResult]) -> str:
        if not mine:
            return "-"
        step, task = (_macro(mine, m) for m in ("step_success_rate", "task_success_rate"))
        return f"{fmt_num(step)} / {fmt_num(task)}"

    rows = [
        (
            site,
            len({r.key for per_arm in by_site[site].values() for r in per_arm}),
            *(cell(by_site[site].get(arm, [])) for arm in arms),
        )
        for site in sorted(by_site)
    ]
    return section(
        "Per website (macro: step SR / SR)",
        *md_table(("website", "tasks", *arms), "lr" + "l" * len(arms), rows),
    )


def _per_task_section(report: Mind2WebAblationReport) -> list[str]:
    arms = [a.name for a in report.arms]

    def cell(own: Sequence[TaskResult]) -> str:
        if not own:
            return "-"
        step = 100 * sum(r.value("step_success_rate") for r in own) / len(own)
        return f"{step:.1f} ({sum(r.success for r in own)}/{len(own)})"

    rows = [
        (key, mine[0].website, mine[0].steps, *(cell([r for r in mine if r.arm == arm]) for arm in arms))
        for key, mine in rows_by_task(report.task_results).items()
    ]
    return section(
        "Per task",
        "Each arm's step SR on the task (mean over repeats) and its task successes over runs.",
        "",
        *md_table(("task", "website", "steps", *arms), "llr" + "l" * len(arms), rows),
    )


def _memory_section(report: Mind2WebAblationReport) -> list[str]:
    lines = section("Memory versions")
    for a in report.arms:
        lines += memory_lines(a)
        for note in a.memory_notes if a.memory != "off" else []:
            state = note.error or ("changed" if note.changed else "unchanged")
            lines.append(
                f"  - offline {note.scope}: from {note.source}, {note.trajectories} train task(s), "
                f"version {note.version} ({state})"
            )
    with_memory = {a.name for a in report.arms if a.memory != "off"}
    rows = [
        (
            r.arm,
            r.repeat,
            r.position,
            r.key,
            r.website,
            fmt_version(r.memory_version_seen),
            fmt_version(r.memory_version_committed),
            r.workflows,
        )
        for r in report.task_results
        if r.arm in with_memory
    ]
    if rows:
        header = ("arm", "repeat", "#", "task", "website", "memory seen", "committed", "workflows shown")
        lines += ["", *md_table(header, "lrrllrrr", rows)]
    return lines


def _runs_section(report: Mind2WebAblationReport) -> list[str]:
    lines = section("Runs and failures")
    for a in report.arms:
        folders = ", ".join(f"`{d}`" for d in a.run_dirs) or "-"
        lines.append(f"- **{a.name}**: step outcomes {fmt_counts(a.outcomes)}; run folders {folders}")
        lines.extend(f"  - stopped: {s}" for s in a.failed_stages)
    return lines


def render_markdown(report: Mind2WebAblationReport) -> str:
    """RESULTS.md: identity, the arms' metrics, tokens, pairs, per website, per task, memory."""
    websites = ", ".join(report.websites) if report.websites else "all"
    lines = [
        *head_lines(
            report,
            f"Ablation {report.name} (Mind2Web {report.split})",
            data=f"`{report.data}`, split {report.split}, websites: {websites}",
            base_label="Base pipeline config (Mind2Web fields)",
        ),
        *_arms_section(report),
        *_tokens_section(report),
        *_paired_section(report),
        *section("Budget-matched arm", report.budget_note),
        *_per_website_section(report),
        *_per_task_section(report),
        *_memory_section(report),
        *_runs_section(report),
        *plot_lines(report.plots),
    ]
    return "\n".join(lines) + "\n"


def rich_tables(report: Mind2WebAblationReport) -> list[Table]:
    """The comparison printed at the end of `awm ablate`."""
    arms = rich_table(
        f"Mind2Web ablation {report.name}: {report.model} (macro, x100)",
        ("arm", "tasks", *(LABELS[m] for m in METRICS), "tokens/task"),
        left=("arm",),
        caption=rich_caption(report),
    )
    for a in report.arms:
        m = a.metrics
        arms.add_row(
            a.name,
            str(a.tasks),
            *(_cell(m[k].macro, m[k].ci95) if m else "n/a" for k in METRICS),
            fmt_num(a.tokens_per_task.get("total"), 0),
        )
    tables = [arms]
    if report.comparisons:
        pairs = rich_table(
            "Paired differences per task (B - A, points)",
            ("A", "B", "tasks", *(LABELS[m] for m in METRICS), "SR sign p"),
            left=("A", "B"),
        )
        for c in report.comparisons:
            pairs.add_row(
                c.arm_a,
                c.arm_b,
                str(c.pairs),
                *(fmt_num(c.metrics[m].mean_diff) for m in METRICS),
                fmt_p(c.metrics["task_success_rate"].sign_test_p),
            )
        tables.append(pairs)
    return tables


def plot_metrics(report: Mind2WebAblationReport, path: Path) -> None:
    """Grouped bars: each metric's macro per arm, with its 95% interval as an error bar."""
    series = []
    for arm in (a for a in report.arms if a.metrics):
        values = [arm.metrics[m].macro or 0.0 for m in METRICS]
        bounds = [arm.metrics[m].ci95 or (v, v) for v, m in zip(values, METRICS, strict=True)]
        errors = [
            [max(0.0, v - low) for v, (low, _) in zip(values, bounds, strict=True)],
            [max(0.0, high - v) for v, (_, high) in zip(values, bounds, strict=True)],
        ]
        series.append((arm.name, values, errors))
    plot_grouped_bars(
        path,
        [LABELS[m] for m in METRICS],
        series,
        size=(7.5, 4),
        ylim=(0, 105),
        ylabel="macro, x100 (95% CI over tasks)",
        title=f"Mind2Web {report.split}: per arm",
    )


def write_mind2web_report(report: Mind2WebAblationReport, out: Path) -> Path:
    """Write the plot, results.json and RESULTS.md into `out`; returns the RESULTS.md path."""
    return write_results(report, out, plots=((PLOT_METRICS, plot_metrics),), render=render_markdown)
