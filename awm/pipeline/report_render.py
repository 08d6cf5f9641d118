"""The MiniWoB++/WebArena ablation report as people read it: RESULTS.md (one function per section), the
Rich tables `awm ablate` prints, three PNG plots, and the writer that puts them beside results.json.

The numbers are `awm.pipeline.report`'s (pure: episodes in, an `AblationReport` out); what both ablation
reports show alike (identity, number formats, tables, memory heads, Agg plots, the atomic writer) is
`awm.pipeline.results`. This module holds only the MiniWoB++/WebArena sections and plots.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from awm.pipeline.report import BUDGET_ARM, AblationReport, ArmEpisode, PairedComparison
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
    pyplot,
    rich_caption,
    rich_table,
    save_figure,
    section,
    write_results,
)
from awm.pipeline.stats import Interval, x100

PLOT_SUCCESS_PER_TASK = "success_per_task.png"
PLOT_STREAM = "success_over_stream.png"
PLOT_TOKENS = "tokens_per_step.png"


# --------------------------------------------------------------------------------------------------
# RESULTS.md, one function per section, and the Rich tables
# --------------------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _rate_ci(ci: Interval | None) -> str:
    """A success rate's interval (fractions) as percentages."""
    return fmt_ci(x100(ci), unit="%")


def _diff_ci(ci: Interval | None) -> str:
    """A success difference's interval (fractions) in signed points."""
    return fmt_ci(x100(ci), signed=True, suffix=" pts")


def _success_diff(c: PairedComparison) -> str:
    return fmt_pts(None if c.mean_success_diff is None else 100 * c.mean_success_diff)


def _interval_note(report: AblationReport) -> str:
    """Which interval each arm carries, and why, in one sentence for RESULTS.md."""
    wilson = "Wilson score intervals over episodes (one repeat: every episode is a different task)"
    bootstrap = (
        f"{bootstrap_phrase('task id + seed')} of the mean per-task success rate, because repeats of one "
        "task are not independent draws"
    )
    mixed = ", ".join(f"{a.name}: {a.ci_method}" for a in report.arms)
    return by_interval_method(
        (a.ci_method for a in report.arms),
        wilson=f"95% intervals are {wilson}.",
        bootstrap=f"95% intervals are {bootstrap}.",
        mixed=f"95% intervals are {wilson} where a task ran once, else {bootstrap} ({mixed}).",
    )


def _arms_section(report: AblationReport) -> list[str]:
    header = (
        "arm",
        "overrides",
        "tasks",
        "success",
        "95% CI",
        "mean steps (all)",
        "tokens/task (actor / judge / induction = total)",
        "cost/task",
        "s/task",
        "errors",
    )
    rows = []
    for a in report.arms:
        t = a.tokens_per_task
        tokens = (
            f"{fmt_num(t.get('actor'), 0)} / {fmt_num(t.get('judge'), 0)} / "
            f"{fmt_num(t.get('induction'), 0)} = {fmt_num(t.get('total'), 0)}"
        )
        rows.append(
            (
                a.name,
                fmt_overrides(a.overrides),
                a.tasks,
                f"{a.successes}/{a.episodes} ({_pct(a.success_rate)})",
                _rate_ci(a.ci95),
                fmt_num(a.mean_steps, 2),
                tokens,
                f"${a.cost_per_task_usd:.4f}",
                fmt_num(a.seconds_per_task),
                len(a.errors),
            )
        )
    return [
        "## Arms",
        "",
        f"Success rule: {report.success_rule}",
        "",
        "Success is the mean over tasks of each task's success rate over its repeats (successes/episodes "
        "when every task ran every repeat). Tokens per task: actor (from the trajectories) + judge + "
        "induction (real model calls). Mean steps count every step, sub-steps of `run_workflow` calls "
        f"included (the model's own steps: next table). {_interval_note(report)}",
        "",
        *md_table(header, "llrrlrlrrr", rows),
    ]


def _calls_section(report: AblationReport) -> list[str]:
    header = (
        "arm",
        "model steps/task",
        "model calls/task",
        "model calls/solved task",
        "run_workflow calls",
        "completed",
    )
    rows = [
        (
            a.name,
            fmt_num(a.model_steps_per_task, 2),
            fmt_num(a.llm_calls_per_task, 2),
            fmt_num(a.llm_calls_per_solved_task, 2),
            a.workflow_calls,
            a.workflow_calls_completed,
        )
        for a in report.arms
    ]
    return section(
        "Model calls and workflow calls",
        "Per task (episode): model steps are the steps the model decided (a `run_workflow` call is one; "
        "its sub-steps are not), model calls are the actor's (re-prompts included). Calls per solved task "
        "are all the arm's calls over its solved episodes (n/a: none solved). `run_workflow` calls: all "
        "of the arm's, and how many ran every sub-step.",
        "",
        *md_table(header, "lrrrrr", rows),
    )


def _step_cost_section(report: AblationReport) -> list[str]:
    header = (
        "arm", "model steps", "model s/step (median / p95)", "prompt tokens/step (median / p95)", "reused",
        "repeated (solved)", "steps after a repeat",
    )  # fmt: skip
    rows = []
    for a in report.arms:
        c = a.step_costs
        if not c:  # a report written before step costs were kept
            continue
        rows.append((
            a.name,
            int(c["model_steps"]),
            f"{c['model_s_per_step_median']:.1f} / {c['model_s_per_step_p95']:.1f}",
            f"{c['prompt_tokens_per_step_median']:,.0f} / {c['prompt_tokens_per_step_p95']:,.0f}",
            f"{100 * c['reused_fraction']:.0f}%",
            f"{a.repetitions.get('episodes', 0)} ({a.repetitions.get('solved', 0)})",
            a.repetitions.get("model_steps_after", 0),
        ))  # fmt: skip
    if not rows:
        return []
    return section(
        "What a model step cost",
        "Over the steps with a model call (a workflow's sub-steps have none): the model's seconds and the "
        "prompt's tokens per step, and the share of prompt tokens the model server reused from its prefix "
        "cache (what it did not process again; 0% where a server does not say); the episodes that repeated "
        "an act that had worked (the same value into the same field, the same click on the same page), how "
        "many of them were solved all the same, and the model steps spent from the first repeat on.",
        "",
        *md_table(header, "lrrrrrr", rows),
    )


def _paired_table(comparisons: Sequence[PairedComparison]) -> list[str]:
    header = (
        "A",
        "B",
        "tasks",
        "B better",
        "A better",
        "ties",
        "unpaired",
        "success diff",
        "95% CI",
        "sign test p",
        "tokens diff/task",
        "steps diff/task",
        "calls diff/task",
    )
    rows = [
        (
            c.arm_a,
            c.arm_b,
            c.pairs,
            c.b_wins,
            c.a_wins,
            c.ties,
            c.unpaired,
            _success_diff(c),
            _diff_ci(c.ci95),
            fmt_p(c.sign_test_p),
            fmt_num(c.mean_tokens_diff, 0),
            fmt_num(c.mean_steps_diff, 2),
            fmt_num(c.mean_llm_calls_diff, 2),
        )
        for c in comparisons
    ]
    return md_table(header, "llrrrrrrlrrrr", rows)


def _paired_sections(report: AblationReport) -> list[str]:
    lines = []
    if report.comparisons:
        lines += section(
            "Paired differences (per task: same task id and seed)",
            "B minus A, one pair per task: the difference of the two arms' mean success over their repeats. "
            "The interval is a seeded percentile bootstrap over tasks of the mean difference; p is the exact "
            "two-sided sign test over tasks that differ (ties dropped). Tasks only one arm ran are left out "
            "(unpaired).",
            "",
            *_paired_table(report.comparisons),
        )
    if report.budget_comparisons:
        lines += section(
            f"Paired differences against `{BUDGET_ARM}`",
            f"The same test with A = `{BUDGET_ARM}` (memory off, given as many tokens as the memory arm it "
            "was sized from): B better means the arm beats spending the same budget on more steps.",
            "",
            *_paired_table(report.budget_comparisons),
        )
    lines += _solved_only_section(report)
    return lines


def _solved_only_section(report: AblationReport) -> list[str]:
    """Which task ids (arena templates) an arm solved that the baseline (and budget-matched) never did:
    the tasks memory made possible, not only a rate."""
    rows = [
        (c.arm_b, c.arm_a, ", ".join(c.solved_only_by_b) or "-", ", ".join(c.solved_only_by_a) or "-")
        for c in (*report.comparisons, *report.budget_comparisons)
    ]
    if not any(r[2] != "-" or r[3] != "-" for r in rows):
        return []
    return section(
        "Tasks one arm solved and the other never did",
        "Task ids (an arena template, a MiniWoB++ task) solved in at least one episode of B and in none of "
        "A's, over the paired tasks, and the other way round.",
        "",
        *md_table(("B", "A", "solved by B only", "solved by A only"), "llll", rows),
    )


def _budget_match_section(report: AblationReport) -> list[str]:
    b = report.budget_match
    if b is None:
        return []
    return section(
        "Budget-matched arm",
        f"Memory off with the step budget raised towards the tokens of `{b.memory_arm}`: target "
        f"{b.target_tokens_per_task:,.0f} tokens/task (actor + judge + induction), `{b.off_arm}` spent "
        f"{b.off_tokens_per_task:,.0f}; scale {b.scale:.2f} (capped at {b.cap:g}x) took max_steps from "
        f"{b.base_max_steps} to {b.max_steps}. Achieved: "
        f"{fmt_num(b.achieved_tokens_per_task, 0)} tokens/task. (More steps buy tokens only when episodes "
        "run to the limit; one that ends early spends no more.)",
    )


def _per_task_section(report: AblationReport) -> list[str]:
    arms = [a.name for a in report.arms]

    def cell(task: str, arm: str) -> str:
        s, n = report.per_task[task].get(arm, [0, 0])
        return f"{s}/{n}" if n else "-"

    rows = [(task, *(cell(task, arm) for arm in arms)) for task in sorted(report.per_task)]
    return section("Per task", *md_table(("task", *arms), "l" + "r" * len(arms), rows))


def _failures_section(report: AblationReport) -> list[str]:
    lines = section("Failure classes")
    for a in report.arms:
        lines.append(
            f"- **{a.name}**: episodes ended {fmt_counts(a.ends)}; step failures: "
            f"{fmt_counts(a.failure_classes, 'none')}"
        )
        lines.extend(
            f"  - error: `{e['key']}` (repeat {e['repeat']}) ended {e['end']}: {e['error'] or '-'}"
            for e in a.errors
        )
        lines.extend(f"  - stage failed: {s}" for s in a.failed_stages)
    return lines


def _judge_audit_section(report: AblationReport) -> list[str]:
    lines = section("Judge audit")
    audited = [(a.name, a.judge_audit) for a in report.arms if a.judge_audit is not None]
    if not audited:
        lines.append("No arm has both a judge label and a ground-truth reward: nothing to audit.")
    for name, judge_audit in audited:
        lines += [f"### {name}", "", judge_audit.to_markdown().replace("## Judge audit", "Judge audit")]
    return lines


def _memory_section(report: AblationReport) -> list[str]:
    header = (
        "arm",
        "repeat",
        "#",
        "task",
        "seed",
        "success",
        "end",
        "steps",
        "tokens",
        "s",
        "memory seen",
        "after",
    )
    rows = [
        (
            r.arm,
            r.repeat,
            r.position,
            r.task_id,
            "-" if r.seed is None else r.seed,
            "yes" if r.success else "no",
            r.end,
            r.steps,
            f"{r.prompt_tokens + r.completion_tokens:,}",
            f"{r.seconds:.1f}",
            fmt_version(r.memory_version_seen),
            fmt_version(r.memory_version_after),
        )
        for r in report.episodes
    ]
    heads = [line for a in report.arms for line in memory_lines(a)]
    return [*section("Memory versions", *heads), "", *md_table(header, "lrrlrllrrrrr", rows)]


def render_markdown(report: AblationReport) -> str:
    """`RESULTS.md`: identity, the arms, the pairs, each task, failures, judge audit, memory versions."""
    lines = [
        *head_lines(report, f"Ablation {report.name}"),
        *_arms_section(report),
        *_calls_section(report),
        *_step_cost_section(report),
        *_paired_sections(report),
        *_budget_match_section(report),
        *_per_task_section(report),
        *_failures_section(report),
        *_judge_audit_section(report),
        *_memory_section(report),
        *plot_lines(report.plots),
    ]
    return "\n".join(lines) + "\n"


def rich_tables(report: AblationReport) -> list[Table]:
    """The comparison printed at the end of `awm ablate`."""
    columns = (
        "arm",
        "success",
        "95% CI",
        "steps",
        "calls/task",
        "calls/solved",
        "workflows run",
        "tokens/task",
        "cost/task",
        "s/task",
        "errors",
    )
    arms = rich_table(
        f"Ablation {report.name}: {report.model}",
        columns,
        left=("arm", "95% CI"),
        caption=rich_caption(report),
    )
    for a in report.arms:
        arms.add_row(
            a.name,
            f"{a.successes}/{a.episodes} ({_pct(a.success_rate)})",
            _rate_ci(a.ci95),
            fmt_num(a.mean_steps, 2),
            fmt_num(a.llm_calls_per_task, 2),
            fmt_num(a.llm_calls_per_solved_task, 2),
            f"{a.workflow_calls_completed}/{a.workflow_calls}",
            fmt_num(a.tokens_per_task.get("total"), 0),
            f"${a.cost_per_task_usd:.4f}",
            fmt_num(a.seconds_per_task),
            str(len(a.errors)),
        )
    tables = [arms]
    for title, comparisons in (
        ("Paired differences per task (B - A)", report.comparisons),
        (f"Paired differences against {BUDGET_ARM} (B - A)", report.budget_comparisons),
    ):
        if not comparisons:
            continue
        columns = ("A", "B", "tasks", "B better", "A better", "diff", "95% CI", "sign p")
        pairs = rich_table(title, columns, left=("A", "B", "95% CI"))
        for c in comparisons:
            pairs.add_row(
                c.arm_a,
                c.arm_b,
                str(c.pairs),
                str(c.b_wins),
                str(c.a_wins),
                _success_diff(c),
                _diff_ci(c.ci95),
                fmt_p(c.sign_test_p),
            )
        tables.append(pairs)
    return tables


# --------------------------------------------------------------------------------------------------
# Plots and writing
# --------------------------------------------------------------------------------------------------


def plot_success_per_task(report: AblationReport, path: Path) -> None:
    """Grouped bars: for each task, each arm's success rate over seeds and repeats."""
    tasks = sorted(report.per_task)

    def rate(task: str, arm: str) -> float:
        s, n = report.per_task[task].get(arm, [0, 0])
        return s / n if n else 0.0

    plot_grouped_bars(
        path,
        tasks,
        [(a.name, [rate(task, a.name) for task in tasks], None) for a in report.arms],
        size=(max(6.0, 1.2 * len(tasks) + 2), 4),
        ylim=(0, 1.05),
        ylabel="success rate",
        title="Success per task",
        slanted=True,
    )


def plot_stream(report: AblationReport, path: Path) -> None:
    """Per arm: cumulative success along the task stream (each repeat a line), each episode a dot
    (filled: solved), and a dashed line where the memory version an episode saw changed."""
    plt = pyplot()
    arms = [a.name for a in report.arms]
    fig, axes = plt.subplots(len(arms), 1, figsize=(9, 2.4 * len(arms) + 0.6), sharex=True, squeeze=False)
    for ax, arm in zip(axes[:, 0], arms, strict=True):
        rows = [r for r in report.episodes if r.arm == arm]
        for repeat in sorted({r.repeat for r in rows}):
            mine = sorted((r for r in rows if r.repeat == repeat), key=lambda r: r.position)
            xs = [r.position for r in mine]
            solved = 0
            cumulative = []
            for n, r in enumerate(mine, 1):
                solved += int(r.success)
                cumulative.append(solved / n)
            ax.plot(xs, cumulative, label=f"repeat {repeat}")
            ax.scatter(
                xs,
                [1.02 if r.success else -0.02 for r in mine],
                c=["tab:green" if r.success else "tab:red" for r in mine],
                s=14,
            )
            if repeat == min(r.repeat for r in rows):
                _mark_versions(ax, mine)
        ax.set_ylim(-0.08, 1.08)
        ax.set_ylabel("cum. success")
        ax.set_title(
            f"{arm}: success over the task stream (solid: next scope; dashed: memory version seen)",
            fontsize=9,
        )
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[-1, 0].set_xlabel("position in the task stream")
    save_figure(plt, fig, path)


def _mark_versions(ax: Any, stream: Sequence[ArmEpisode]) -> None:
    """On one repeat's stream: a solid line where the scope changes, a dashed labelled one where the
    memory version an episode saw changed."""
    previous: tuple[str, int | None] | None = None
    for r in stream:
        if previous is not None and r.scope != previous[0]:
            ax.axvline(r.position - 0.5, color="black", linewidth=0.6, alpha=0.4)
        seen = (r.scope, r.memory_version_seen)
        if r.memory_version_seen is not None and seen != previous:
            ax.axvline(r.position - 0.5, color="grey", linestyle="--", linewidth=0.8)
            label = f"{r.scope.rsplit('/', 1)[-1]} v{r.memory_version_seen}"
            ax.text(r.position - 0.45, 0.55, label, fontsize=7, color="grey", rotation=90)
        previous = seen


def plot_tokens_per_step(report: AblationReport, path: Path) -> None:
    """Per arm: the distribution of model tokens (prompt + completion) per step."""
    plt = pyplot()
    arms = [a.name for a in report.arms]
    data = [[t for r in report.episodes if r.arm == arm for t in r.step_tokens] or [0] for arm in arms]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.5 * len(arms) + 2), 4))
    ax.boxplot(data, showmeans=True)
    ax.set_xticks(range(1, len(arms) + 1), arms)
    ax.set_ylabel("tokens per step (prompt + completion)")
    ax.set_title("Actor tokens per step" + ("" if any(any(d) for d in data) else " (no model calls)"))
    save_figure(plt, fig, path)


PLOTS = (
    (PLOT_SUCCESS_PER_TASK, plot_success_per_task),
    (PLOT_STREAM, plot_stream),
    (PLOT_TOKENS, plot_tokens_per_step),
)


def write_report(report: AblationReport, out: Path) -> Path:
    """Write the plots, `results.json` and `RESULTS.md` into `out`; returns the RESULTS.md path."""
    return write_results(report, out, plots=PLOTS, render=render_markdown)
