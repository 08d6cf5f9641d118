"""The Mind2Web ablation's report: its model (`Mind2WebAblationReport`, what results.json holds), the
statistics over tasks, and RESULTS.md, the Rich tables and the plot. Pure over per-task results; the
runs themselves are `awm.pipeline.mind2web_ablation`'s (see its docstring for what is measured and why
these intervals).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field
from rich.table import Table

from awm.files import write_text_atomic
from awm.mind2web.metrics import score_task
from awm.mind2web.schema import TaskRecord
from awm.pipeline.mind2web_memory import InductionNote
from awm.pipeline.report import (
    BOOTSTRAP_RESAMPLES,
    CI_TASK_BOOTSTRAP,
    CI_WILSON,
    RESULTS_JSON,
    RESULTS_MD,
    bootstrap_mean_ci,
    head_lines,
    replay_warnings,
    sign_test_p,
    wilson_interval,
)
from awm.trajectory import Trajectory, utc_now

if TYPE_CHECKING:
    pass

METRICS = ("element_accuracy", "action_f1", "step_success_rate", "task_success_rate")
LABELS = {
    "element_accuracy": "EA",
    "action_f1": "AF1",
    "step_success_rate": "step SR",
    "task_success_rate": "SR",
}
STEP_METRICS = METRICS[:3]  # the ones with a micro (over steps) version
USAGE_JSON = "usage.json"
PLOT_METRICS = "mind2web_metrics.png"
MATCH = "awm"
TIE_TOLERANCE = 1e-9
SUCCESS_RULE = (
    "Mind2Web task success (SR): every annotated step of the task is right (the element is the first "
    "positive candidate, the operation is the gold one and, for TYPE and SELECT, the value is the gold "
    "value exactly); AWM's metrics, `awm.mind2web.metrics`"
)
NO_BUDGET_MATCH = (
    "There is no budget-matched arm. In MiniWoB it is memory off given more steps (max_steps raised) until "
    "it spends the memory arm's tokens. Mind2Web is scored offline with teacher forcing: every task has its "
    "annotated steps and gets exactly one prediction per step, whatever the budget, so there is no step "
    "budget to raise and extra tokens buy no extra attempt. Spending the memory arm's tokens another way "
    "(more exemplars, a larger top_k) is a different intervention: add it as an arm of its own (e.g. "
    "exemplars = 3) and read its tokens per task beside the memory arm's."
)


# --------------------------------------------------------------------------------------------------
# The report model
# --------------------------------------------------------------------------------------------------


class TaskResult(BaseModel):
    """One task of one repeat of one arm: the counts `awm.mind2web.metrics` scored it by, and its cost."""

    arm: str
    repeat: int
    position: int  # in the arm's stream (websites in config order, then the split's order)
    key: str  # the annotation id: the unit of every interval and pair
    website: str = ""
    domain: str = ""
    steps: int  # annotated steps
    elements_correct: int
    action_f1_sum: float
    steps_succeeded: int
    success: bool  # every step succeeded
    unparsed: int = 0  # answers that were no action
    outcomes: dict[str, int] = Field(default_factory=dict)  # step outcome -> count
    recall_hits: int = 0  # steps whose target was among the top-k candidates shown
    recall_steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    memory_version_seen: int | None = None
    memory_version_committed: int | None = None  # online: the version its commit point made
    workflows: int = 0  # workflows its prompts carried
    seconds: float = 0.0

    def value(self, metric: str) -> float:
        """This task's value of `metric` in [0, 1], computed as `metrics._Tally` does (count / steps)."""
        n = self.steps or 1
        return {
            "element_accuracy": self.elements_correct / n,
            "action_f1": self.action_f1_sum / n,
            "step_success_rate": self.steps_succeeded / n,
            "task_success_rate": float(self.success),
        }[metric]

    def numerator(self, metric: str) -> float:
        """What the task adds to the micro average's numerator (its right steps, or its F1 sum)."""
        return {
            "element_accuracy": float(self.elements_correct),
            "action_f1": self.action_f1_sum,
            "step_success_rate": float(self.steps_succeeded),
        }[metric]


class Mind2WebArmRun(BaseModel):
    """One repeat of one arm as the ablation ran it (input to `build_mind2web_report`)."""

    arm: str
    repeat: int
    run_dirs: list[str] = Field(default_factory=list)  # one per website when websites are named
    overrides: dict[str, Any] = Field(default_factory=dict)
    memory: str = "off"
    config: dict[str, Any] = Field(default_factory=dict)  # the arm's Mind2Web fields
    selected: int = 0  # tasks the config selects
    rows: list[TaskResult] = Field(default_factory=list)  # the finished ones, in stream order
    usage: dict[str, dict[str, float]] = Field(default_factory=dict)  # component -> usage fields
    actor_cost_usd: float = 0.0
    notes: list[InductionNote] = Field(default_factory=list)  # offline induction, per website scope
    failed_stage: str | None = None
    error: str | None = None
    wall_seconds: float = 0.0


class MetricStat(BaseModel):
    """One metric of one arm, x100."""

    macro: float | None = None  # mean over tasks of each task's value (its mean over repeats)
    ci95: tuple[float, float] | None = None  # of the macro, over tasks
    ci_method: str = CI_TASK_BOOTSTRAP  # CI_WILSON (SR, one repeat) or CI_TASK_BOOTSTRAP
    micro: float | None = None  # over all steps of all repeats; None for SR (no step-level version)
    micro_ci95: tuple[float, float] | None = None  # bootstrap over tasks of the ratio


class Mind2WebArmStats(BaseModel):
    """An arm over its repeats. `successes`, `episodes`, `success_rate` and `ci95` are task success as
    fractions (AblationReport's `ArmStats` shape, which `awm serve` reads); `metrics` holds all four, x100."""

    name: str
    overrides: dict[str, Any] = Field(default_factory=dict)
    memory: str = "off"
    config: dict[str, Any] = Field(default_factory=dict)
    repeats: int = 0
    tasks: int = 0  # distinct annotation ids that finished: the statistical unit
    selected: int = 0  # tasks the config selects (per repeat)
    episodes: int = 0  # task runs (tasks x repeats that finished)
    steps: int = 0  # annotated steps scored, over every repeat
    successes: int = 0  # task runs with every step right
    success_rate: float | None = None  # mean over tasks of per-task success (fraction)
    ci95: tuple[float, float] | None = None  # of success_rate (fraction)
    ci_method: str = CI_WILSON
    metrics: dict[str, MetricStat] = Field(default_factory=dict)
    recall_at_k: float | None = None  # target among the candidates shown, over steps (caps EA)
    unparsed: int = 0
    outcomes: dict[str, int] = Field(default_factory=dict)
    llm_calls_per_task: float | None = None
    tokens_per_task: dict[str, float] = Field(default_factory=dict)  # actor, induction, total
    tokens: dict[str, int] = Field(default_factory=dict)  # the same, summed over every task run
    cost_per_task_usd: float = 0.0
    seconds_per_task: float | None = None
    wall_seconds: float = 0.0
    usage: dict[str, dict[str, float]] = Field(default_factory=dict)  # summed over repeats
    final_versions: dict[str, int | None] = Field(default_factory=dict)  # scope -> head after the stream
    memory_notes: list[InductionNote] = Field(default_factory=list)  # offline induction, last repeat
    run_dirs: list[str] = Field(default_factory=list)
    failed_stages: list[str] = Field(default_factory=list)


class MetricDiff(BaseModel):
    """B minus A for one metric, per task, x100."""

    mean_diff: float | None = None
    ci95: tuple[float, float] | None = None  # bootstrap over tasks of the mean difference
    b_wins: int = 0  # tasks where B's value is higher
    a_wins: int = 0
    ties: int = 0
    sign_test_p: float | None = None  # over tasks that differ


class Mind2WebComparison(BaseModel):
    """Arm B against arm A, task by task (annotation id). The top-level win/diff fields are task success
    as fractions (AblationReport's `PairedComparison` shape); `metrics` has every metric, x100."""

    arm_a: str
    arm_b: str
    pairs: int  # tasks both arms finished
    unpaired: int = 0  # tasks only one of them finished (left out)
    b_wins: int = 0
    a_wins: int = 0
    ties: int = 0
    mean_success_diff: float | None = None
    ci95: tuple[float, float] | None = None
    sign_test_p: float | None = None
    metrics: dict[str, MetricDiff] = Field(default_factory=dict)
    mean_tokens_diff: float | None = None  # actor tokens per task
    mean_llm_calls_diff: float | None = None


class Mind2WebAblationReport(BaseModel):
    """Everything results.json holds; RESULTS.md and the plot are drawn from it."""

    benchmark: Literal["mind2web"] = "mind2web"
    name: str
    config_path: str
    config_hash: str
    created_at: str = Field(default_factory=utc_now)
    provenance: dict[str, Any] | None = None
    model: str = "-"
    backend: str = "-"
    base: dict[str, Any] = Field(default_factory=dict)
    data: str = ""
    split: str = ""
    websites: list[str] | None = None
    match: str = MATCH
    repeats: int = 1
    temperature: float | None = None
    cache: bool | None = None
    success_rule: str = SUCCESS_RULE
    warnings: list[str] = Field(default_factory=list)
    budget_note: str = NO_BUDGET_MATCH
    arms: list[Mind2WebArmStats] = Field(default_factory=list)
    comparisons: list[Mind2WebComparison] = Field(default_factory=list)  # each arm against the first
    per_task: dict[str, dict[str, list[int]]] = Field(default_factory=dict)  # task -> arm -> [succ, n]
    task_results: list[TaskResult] = Field(default_factory=list)
    plots: list[str] = Field(default_factory=list)
    seconds: float = 0.0


# --------------------------------------------------------------------------------------------------
# Statistics and building (pure)
# --------------------------------------------------------------------------------------------------


def bootstrap_ratio_ci(
    numerators: Sequence[float],
    denominators: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap 95% interval of sum(numerators) / sum(denominators), resampling the pairs
    (tasks: each brings all its steps). Seeded and read off as `report.bootstrap_mean_ci` is."""
    pairs = [(float(a), float(b)) for a, b in zip(numerators, denominators, strict=True)]
    if not pairs or sum(b for _, b in pairs) <= 0:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        draw = [rng.choice(pairs) for _ in pairs]
        total = sum(b for _, b in draw)
        ratios.append(sum(a for a, _ in draw) / total if total else 0.0)
    ratios.sort()
    return ratios[int(0.025 * (resamples - 1))], ratios[int(0.975 * (resamples - 1))]


def task_result(
    arm: str, repeat: int, position: int, record: TaskRecord, trajectory: Trajectory
) -> TaskResult:
    """Score one finished task against its gold record (`score_task`, AWM's matching)."""
    from awm.mind2web.solve import predictions_for

    steps, unparsed = score_task(record, predictions_for(trajectory), match=MATCH)
    hits = [bool(h) for h in trajectory.meta.get("target_in_top_k", [])]
    committed = trajectory.meta.get("memory_committed")
    return TaskResult(
        arm=arm,
        repeat=repeat,
        position=position,
        key=record.annotation_id,
        website=record.website,
        domain=record.domain,
        steps=len(steps),
        elements_correct=sum(s.element_correct for s in steps),
        action_f1_sum=sum(s.action_f1 for s in steps),
        steps_succeeded=sum(s.step_success for s in steps),
        success=bool(steps) and all(s.step_success for s in steps),
        unparsed=len(unparsed),
        outcomes=dict(Counter(s.outcome for s in trajectory.steps)),
        recall_hits=sum(hits),
        recall_steps=len(hits),
        prompt_tokens=trajectory.prompt_tokens,
        completion_tokens=trajectory.completion_tokens,
        llm_calls=sum(s.llm_calls for s in trajectory.steps),
        memory_version_seen=trajectory.memory_version,
        memory_version_committed=committed if isinstance(committed, int) else None,
        workflows=len(trajectory.workflows_used),
        seconds=trajectory.seconds,
    )


def _by_task(rows: Sequence[TaskResult]) -> dict[str, list[TaskResult]]:
    grouped: dict[str, list[TaskResult]] = {}
    for row in rows:
        grouped.setdefault(row.key, []).append(row)
    return grouped


def _per_task_mean(
    by_task: dict[str, list[TaskResult]], value: Callable[[TaskResult], float]
) -> dict[str, float]:
    return {key: sum(value(r) for r in mine) / len(mine) for key, mine in by_task.items() if mine}


def _x100(ci: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if ci is None else (100 * ci[0], 100 * ci[1])


def metric_stats(rows: Sequence[TaskResult], metric: str) -> MetricStat:
    """One metric over an arm's task runs (see the module docstring for the intervals)."""
    by_task = _by_task(rows)
    if not by_task:
        return MetricStat()
    means = _per_task_mean(by_task, lambda r: r.value(metric))
    macro = 100 * sum(means.values()) / len(means)
    once = all(len(mine) == 1 for mine in by_task.values())
    if metric == "task_success_rate" and once:
        ci, method = wilson_interval(sum(r.success for r in rows), len(rows)), CI_WILSON
    else:
        ci, method = bootstrap_mean_ci(list(means.values())), CI_TASK_BOOTSTRAP
    stat = MetricStat(macro=macro, ci95=_x100(ci), ci_method=method)
    if metric in STEP_METRICS:
        steps = sum(r.steps for r in rows)
        keys = list(by_task)
        stat.micro = 100 * sum(r.numerator(metric) for r in rows) / steps if steps else None
        stat.micro_ci95 = _x100(
            bootstrap_ratio_ci(
                [sum(r.numerator(metric) for r in by_task[k]) for k in keys],
                [sum(r.steps for r in by_task[k]) for k in keys],
            )
        )
    return stat


def merge_usage(
    a: dict[str, dict[str, float]], b: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """Two usage tables (component -> numeric fields) summed field by field."""
    total = {k: dict(v) for k, v in a.items()}
    for component, fields in b.items():
        into = total.setdefault(component, {})
        for key, value in fields.items():
            if isinstance(value, int | float):
                into[key] = into.get(key, 0) + value
    return total


def _usage_sum(runs: Sequence[Mind2WebArmRun]) -> dict[str, dict[str, float]]:
    total: dict[str, dict[str, float]] = {}
    for run in runs:
        total = merge_usage(total, run.usage)
    return total


def _final_versions(rows: Sequence[TaskResult]) -> dict[str, int | None]:
    """Each website scope's head after the stream: the last commit, else the version tasks saw."""
    final: dict[str, int | None] = {}
    for row in sorted(rows, key=lambda r: r.position):
        scope = f"mind2web/{row.website}"
        version = row.memory_version_committed
        if version is None:
            version = row.memory_version_seen
        if version is not None:
            final[scope] = max(version, final.get(scope) or 0)
    return final


def arm_stats(name: str, runs: Sequence[Mind2WebArmRun]) -> Mind2WebArmStats:
    """One arm's numbers over its repeats."""
    rows = [r for run in runs for r in run.rows]
    n = len(rows)
    usage = _usage_sum(runs)
    metrics = {m: metric_stats(rows, m) for m in METRICS}
    sr = metrics["task_success_rate"]
    actor = sum(r.prompt_tokens + r.completion_tokens for r in rows)
    induction = (usage.get("induction") or {}).get("prompt_tokens", 0) + (usage.get("induction") or {}).get(
        "completion_tokens", 0
    )
    tokens = {"actor": int(actor), "induction": int(induction)}
    tokens["total"] = sum(tokens.values())
    hits, recall_steps = sum(r.recall_hits for r in rows), sum(r.recall_steps for r in rows)
    outcomes: Counter[str] = Counter()
    for r in rows:
        outcomes.update(r.outcomes)
    cost = sum(run.actor_cost_usd for run in runs) + float(
        (usage.get("induction") or {}).get("cost_usd", 0.0)
    )
    first = runs[0] if runs else None
    last = runs[-1] if runs else None
    failed = [f"repeat {run.repeat}: {run.failed_stage}: {run.error}" for run in runs if run.failed_stage]
    unfinished = [
        f"repeat {run.repeat}: {run.selected - len(run.rows)} of {run.selected} tasks not finished"
        for run in runs
        if run.selected > len(run.rows) and not run.failed_stage
    ]
    return Mind2WebArmStats(
        name=name,
        overrides=first.overrides if first else {},
        memory=first.memory if first else "off",
        config=first.config if first else {},
        repeats=len(runs),
        tasks=len(_by_task(rows)),
        selected=first.selected if first else 0,
        episodes=n,
        steps=sum(r.steps for r in rows),
        successes=sum(r.success for r in rows),
        success_rate=None if sr.macro is None else sr.macro / 100,
        ci95=None if sr.ci95 is None else (sr.ci95[0] / 100, sr.ci95[1] / 100),
        ci_method=sr.ci_method,
        metrics=metrics,
        recall_at_k=hits / recall_steps if recall_steps else None,
        unparsed=sum(r.unparsed for r in rows),
        outcomes=dict(outcomes.most_common()),
        llm_calls_per_task=sum(r.llm_calls for r in rows) / n if n else None,
        tokens_per_task={k: round(v / n, 1) if n else 0.0 for k, v in tokens.items()},
        tokens=tokens,
        cost_per_task_usd=cost / n if n else 0.0,
        seconds_per_task=sum(r.seconds for r in rows) / n if n else None,
        wall_seconds=round(sum(run.wall_seconds for run in runs), 1),
        usage=usage,
        final_versions=_final_versions(last.rows) if last and last.memory != "off" else {},
        memory_notes=list(last.notes) if last else [],
        run_dirs=[d for run in runs for d in run.run_dirs],
        failed_stages=failed + unfinished,
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _diff(a: dict[str, float], b: dict[str, float], keys: list[str]) -> MetricDiff:
    diffs = [b[k] - a[k] for k in keys]
    b_wins = sum(d > TIE_TOLERANCE for d in diffs)
    a_wins = sum(d < -TIE_TOLERANCE for d in diffs)
    return MetricDiff(
        mean_diff=_mean(diffs),
        ci95=bootstrap_mean_ci(diffs),
        b_wins=b_wins,
        a_wins=a_wins,
        ties=len(diffs) - b_wins - a_wins,
        sign_test_p=sign_test_p(b_wins, a_wins),
    )


def compare(a: str, b: str, rows: Sequence[TaskResult]) -> Mind2WebComparison:
    """B minus A, paired by task: per task, the difference of the two arms' means over their repeats."""
    tasks_a = _by_task([r for r in rows if r.arm == a])
    tasks_b = _by_task([r for r in rows if r.arm == b])
    keys = [k for k in tasks_a if k in tasks_b]  # stream order

    def means(by_task: dict[str, list[TaskResult]], value: Callable[[TaskResult], float]) -> dict[str, float]:
        return _per_task_mean({k: by_task[k] for k in keys}, value)

    metrics = {}
    for metric in METRICS:

        def value(r: TaskResult, metric: str = metric) -> float:
            return r.value(metric)

        metrics[metric] = _diff(means(tasks_a, value), means(tasks_b, value), keys)
    fractions = metrics["task_success_rate"]

    def tokens(r: TaskResult) -> float:
        return float(r.prompt_tokens + r.completion_tokens)

    def calls(r: TaskResult) -> float:
        return float(r.llm_calls)

    def mean_diff(value: Callable[[TaskResult], float]) -> float | None:
        mean_a, mean_b = means(tasks_a, value), means(tasks_b, value)
        return _mean([mean_b[k] - mean_a[k] for k in keys])

    shown = {
        m: d.model_copy(
            update={
                "mean_diff": None if d.mean_diff is None else 100 * d.mean_diff,
                "ci95": _x100(d.ci95),
            }
        )
        for m, d in metrics.items()
    }
    return Mind2WebComparison(
        arm_a=a,
        arm_b=b,
        pairs=len(keys),
        unpaired=len(set(tasks_a) ^ set(tasks_b)),
        b_wins=fractions.b_wins,
        a_wins=fractions.a_wins,
        ties=fractions.ties,
        mean_success_diff=fractions.mean_diff,
        ci95=fractions.ci95,
        sign_test_p=fractions.sign_test_p,
        metrics=shown,
        mean_tokens_diff=mean_diff(tokens),
        mean_llm_calls_diff=mean_diff(calls),
    )


def build_mind2web_report(
    runs: Sequence[Mind2WebArmRun],
    *,
    name: str,
    config_path: str,
    config_hash: str,
    base: dict[str, Any],
    data: str = "",
    split: str = "",
    websites: list[str] | None = None,
    repeats: int = 1,
    model: str = "-",
    backend: str = "-",
    seconds: float = 0.0,
    temperature: float | None = None,
    cache: bool | None = None,
    provenance: dict[str, Any] | None = None,
) -> Mind2WebAblationReport:
    """The whole report: arms in first-run order, each compared with the first arm (the baseline)."""
    order = list(dict.fromkeys(run.arm for run in runs))
    arms = [arm_stats(arm, [r for r in runs if r.arm == arm]) for arm in order]
    rows = [row for run in runs for row in run.rows]
    per_task: dict[str, dict[str, list[int]]] = {}
    for row in rows:
        cell = per_task.setdefault(row.key, {}).setdefault(row.arm, [0, 0])
        cell[0] += int(row.success)
        cell[1] += 1
    warnings = replay_warnings(repeats, temperature=temperature, cache=cache)
    warnings += [
        f"arm {a.name}: {stage}; its numbers cover the tasks that finished"
        for a in arms
        for stage in a.failed_stages
    ]
    return Mind2WebAblationReport(
        name=name,
        config_path=config_path,
        config_hash=config_hash,
        provenance=provenance,
        model=model,
        backend=backend,
        base=base,
        data=data,
        split=split,
        websites=websites,
        repeats=repeats,
        temperature=temperature,
        cache=cache,
        warnings=warnings,
        arms=arms,
        comparisons=[compare(order[0], other, rows) for other in order[1:]],
        per_task=per_task,
        task_results=rows,
        seconds=round(seconds, 1),
    )


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------


def _num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _ci(ci: tuple[float, float] | None, *, signed: bool = False) -> str:
    if ci is None:
        return "n/a"
    return f"[{ci[0]:+.1f}, {ci[1]:+.1f}]" if signed else f"[{ci[0]:.1f}, {ci[1]:.1f}]"


def _cell(value: float | None, ci: tuple[float, float] | None) -> str:
    return f"{_num(value)} {_ci(ci)}" if value is not None else "n/a"


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def interval_note(report: Mind2WebAblationReport) -> str:
    """Which interval each figure carries, and why, for RESULTS.md."""
    bootstrap = f"a seeded percentile bootstrap ({BOOTSTRAP_RESAMPLES} resamples) over tasks (annotation ids)"
    sr = {a.metrics["task_success_rate"].ci_method for a in report.arms if "task_success_rate" in a.metrics}
    if sr == {CI_WILSON}:
        sr_note = (
            "SR's is Wilson's score interval over tasks (one repeat: each task is one success or failure)"
        )
    elif sr == {CI_TASK_BOOTSTRAP}:
        sr_note = "SR's is the same bootstrap of the mean per-task success rate (repeats of a task are not independent)"
    else:
        sr_note = "SR's is Wilson's over tasks where each task ran once, else the same bootstrap"
    return (
        f"95% intervals are over tasks, never over steps (a task's steps share its page and its gold "
        f"history, so they are not independent draws): macro EA, AF1 and step SR carry {bootstrap} of the "
        f"mean per-task value; {sr_note}; micro figures carry the same bootstrap over tasks of the ratio "
        "right steps / steps, each resampled task bringing all its steps."
    )


def _macro(rows: Sequence[TaskResult], metric: str) -> float | None:
    """The macro figure alone (x100), as `metric_stats` computes it, without the interval."""
    means = _per_task_mean(_by_task(rows), lambda r: r.value(metric))
    return 100 * sum(means.values()) / len(means) if means else None


def _overrides(arm: Mind2WebArmStats) -> str:
    return ", ".join(f"{k}={v}" for k, v in arm.overrides.items()) or "-"


def render_markdown(report: Mind2WebAblationReport) -> str:
    """RESULTS.md: identity, the arms' metrics, tokens, pairs, per website, per task, memory."""
    websites = ", ".join(report.websites) if report.websites else "all"
    lines = head_lines(
        report,
        f"Ablation {report.name} (Mind2Web {report.split})",
        data=f"`{report.data}`, split {report.split}, websites: {websites}",
        base_label="Base pipeline config (Mind2Web fields)",
    )
    lines += [
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
        "| arm | overrides | average | tasks | steps | EA [95% CI] | AF1 [95% CI] | step SR [95% CI] | SR [95% CI] |",
        "|---|---|---|---:|---:|---|---|---|---|",
    ]
    for a in report.arms:
        m = a.metrics
        if not m:
            continue
        lines.append(
            f"| {a.name} | {_overrides(a)} | macro | {a.tasks} | {a.steps} | "
            + " | ".join(_cell(m[k].macro, m[k].ci95) for k in METRICS)
            + " |"
        )
        lines.append(
            f"| {a.name} | | micro | {a.tasks} | {a.steps} | "
            + " | ".join(_cell(m[k].micro, m[k].micro_ci95) for k in STEP_METRICS)
            + " | = macro |"
        )
    lines += [
        "",
        "## Tokens and model calls",
        "",
        "Per task run: actor tokens are the prompts and answers of the trajectories (whether or not the "
        "response cache answered), induction tokens the workflow inducer's real model calls (offline: "
        "once per website from train; online: after each task; rule induction makes none; cache hits are "
        "free). Recall@k is how often the target element was among the candidates shown: the ceiling on "
        "EA. Unparsed: answers that were no action (scored wrong).",
        "",
        "| arm | task runs | model calls/task | tokens/task (actor / induction = total) | cost/task | recall@k | unparsed | SR (tasks) | s/task |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    for a in report.arms:
        t = a.tokens_per_task
        recall = "n/a" if a.recall_at_k is None else f"{100 * a.recall_at_k:.1f}%"
        lines.append(
            f"| {a.name} | {a.episodes} | {_num(a.llm_calls_per_task, 2)} | {_num(t.get('actor'), 0)} / "
            f"{_num(t.get('induction'), 0)} = {_num(t.get('total'), 0)} | ${a.cost_per_task_usd:.4f} | "
            f"{recall} | {a.unparsed} | {a.successes}/{a.episodes} | {_num(a.seconds_per_task)} |"
        )
    if report.comparisons:
        lines += [
            "",
            "## Paired differences (per task: same annotation id)",
            "",
            "B minus A in points (x100), one pair per task: the difference of the two arms' per-task values "
            "(each the task's mean over its steps, then over its repeats). The interval is a seeded "
            "percentile bootstrap over tasks of the mean difference; p is the exact two-sided sign test "
            "over tasks that differ (ties dropped). Tasks only one arm finished are left out (unpaired).",
            "",
            "| A | B | tasks | unpaired | metric | B better | A better | ties | mean diff | 95% CI | sign test p |",
            "|---|---|---:|---:|---|---:|---:|---:|---:|---|---:|",
        ]
        for c in report.comparisons:
            for metric in METRICS:
                d = c.metrics[metric]
                diff = "n/a" if d.mean_diff is None else f"{d.mean_diff:+.1f} pts"
                lines.append(
                    f"| {c.arm_a} | {c.arm_b} | {c.pairs} | {c.unpaired} | {LABELS[metric]} | {d.b_wins} | "
                    f"{d.a_wins} | {d.ties} | {diff} | {_ci(d.ci95, signed=True)} | {_p(d.sign_test_p)} |"
                )
        lines += ["", "| A | B | actor tokens diff/task | model calls diff/task |", "|---|---|---:|---:|"]
        lines.extend(
            f"| {c.arm_a} | {c.arm_b} | {_num(c.mean_tokens_diff, 0)} | {_num(c.mean_llm_calls_diff, 2)} |"
            for c in report.comparisons
        )
    lines += ["", "## Budget-matched arm", "", report.budget_note]
    arms = [a.name for a in report.arms]
    rows = report.task_results
    by_site: dict[str, dict[str, list[TaskResult]]] = {}
    for r in rows:
        by_site.setdefault(r.website, {}).setdefault(r.arm, []).append(r)
    lines += [
        "",
        "## Per website (macro: step SR / SR)",
        "",
        "| website | tasks | " + " | ".join(arms) + " |",
        "|---|---:|" + "---|" * len(arms),
    ]
    for site in sorted(by_site):
        cells = []
        for arm in arms:
            mine = by_site[site].get(arm, [])
            if not mine:
                cells.append("-")
                continue
            step, task = (_macro(mine, m) for m in ("step_success_rate", "task_success_rate"))
            cells.append(f"{_num(step)} / {_num(task)}")
        count = len({r.key for per_arm in by_site[site].values() for r in per_arm})
        lines.append(f"| {site} | {count} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Per task",
        "",
        "Each arm's step SR on the task (mean over repeats) and its task successes over runs.",
        "",
        "| task | website | steps | " + " | ".join(arms) + " |",
        "|---|---|---:|" + "---|" * len(arms),
    ]
    by_task = _by_task(rows)
    for key, mine in by_task.items():
        cells = []
        for arm in arms:
            own = [r for r in mine if r.arm == arm]
            if not own:
                cells.append("-")
                continue
            step = 100 * sum(r.value("step_success_rate") for r in own) / len(own)
            cells.append(f"{step:.1f} ({sum(r.success for r in own)}/{len(own)})")
        lines.append(f"| {key} | {mine[0].website} | {mine[0].steps} | " + " | ".join(cells) + " |")
    lines += ["", "## Memory versions", ""]
    for a in report.arms:
        if a.memory == "off":
            lines.append(f"- **{a.name}**: memory off")
            continue
        heads = ", ".join(f"{s} v{v}" for s, v in a.final_versions.items() if v is not None) or "no version"
        lines.append(f"- **{a.name}** ({a.memory}): heads after the stream: {heads}")
        for note in a.memory_notes:
            state = note.error or ("changed" if note.changed else "unchanged")
            lines.append(
                f"  - offline {note.scope}: from {note.source}, {note.trajectories} train task(s), "
                f"version {note.version} ({state})"
            )
    memory_rows = [
        r for r in rows if next((a.memory for a in report.arms if a.name == r.arm), "off") != "off"
    ]
    if memory_rows:
        lines += [
            "",
            "| arm | repeat | # | task | website | memory seen | committed | workflows shown |",
            "|---|---:|---:|---|---|---:|---:|---:|",
        ]
        for r in memory_rows:
            seen = "-" if r.memory_version_seen is None else f"v{r.memory_version_seen}"
            made = "-" if r.memory_version_committed is None else f"v{r.memory_version_committed}"
            lines.append(
                f"| {r.arm} | {r.repeat} | {r.position} | {r.key} | {r.website} | {seen} | {made} | {r.workflows} |"
            )
    lines += ["", "## Runs and failures", ""]
    for a in report.arms:
        outcomes = ", ".join(f"{k} x{v}" for k, v in a.outcomes.items()) or "-"
        folders = ", ".join(f"`{d}`" for d in a.run_dirs) or "-"
        lines.append(f"- **{a.name}**: step outcomes {outcomes}; run folders {folders}")
        lines.extend(f"  - stopped: {s}" for s in a.failed_stages)
    if report.plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in report.plots]
    return "\n".join(lines) + "\n"


def rich_tables(report: Mind2WebAblationReport) -> list[Table]:
    """The comparison printed at the end of `awm ablate`."""
    caption = "\n".join([f"config {report.config_hash}", *(f"warning: {w}" for w in report.warnings)])
    arms = Table(title=f"Mind2Web ablation {report.name}: {report.model} (macro, x100)", caption=caption)
    for column in ("arm", "tasks", *(LABELS[m] for m in METRICS), "tokens/task"):
        arms.add_column(column, justify="left" if column == "arm" else "right")
    for a in report.arms:
        m = a.metrics
        arms.add_row(
            a.name,
            str(a.tasks),
            *(_cell(m[k].macro, m[k].ci95) if m else "n/a" for k in METRICS),
            _num(a.tokens_per_task.get("total"), 0),
        )
    tables = [arms]
    if report.comparisons:
        pairs = Table(title="Paired differences per task (B - A, points)")
        for column in ("A", "B", "tasks", *(LABELS[m] for m in METRICS), "SR sign p"):
            pairs.add_column(column, justify="left" if column in ("A", "B") else "right")
        for c in report.comparisons:
            pairs.add_row(
                c.arm_a,
                c.arm_b,
                str(c.pairs),
                *(_num(c.metrics[m].mean_diff) for m in METRICS),
                _p(c.metrics["task_success_rate"].sign_test_p),
            )
        tables.append(pairs)
    return tables


def plot_metrics(report: Mind2WebAblationReport, path: Path) -> None:
    """Grouped bars: each metric's macro per arm, with its 95% interval as an error bar."""
    from awm.pipeline.report import _pyplot  # one Agg setup for every report plot

    plt = _pyplot()
    arms = [a for a in report.arms if a.metrics]
    width = 0.8 / max(1, len(arms))
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for i, arm in enumerate(arms):
        values = [arm.metrics[m].macro or 0.0 for m in METRICS]
        errors = [
            [max(0.0, v - (arm.metrics[m].ci95 or (v, v))[0]) for v, m in zip(values, METRICS, strict=True)],
            [max(0.0, (arm.metrics[m].ci95 or (v, v))[1] - v) for v, m in zip(values, METRICS, strict=True)],
        ]
        xs = [x + i * width - 0.4 + width / 2 for x in range(len(METRICS))]
        ax.bar(xs, values, width, yerr=errors, capsize=3, label=arm.name)
    ax.set_xticks(range(len(METRICS)), [LABELS[m] for m in METRICS])
    ax.set_ylim(0, 105)
    ax.set_ylabel("macro, x100 (95% CI over tasks)")
    ax.set_title(f"Mind2Web {report.split}: per arm")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_mind2web_report(report: Mind2WebAblationReport, out: Path) -> Path:
    """Write the plot, results.json and RESULTS.md into `out`; returns the RESULTS.md path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plot_metrics(report, out / PLOT_METRICS)
    report = report.model_copy(update={"plots": [PLOT_METRICS]})
    write_text_atomic(out / RESULTS_JSON, report.model_dump_json(indent=2) + "\n")
    write_text_atomic(out / RESULTS_MD, render_markdown(report))
    return out / RESULTS_MD
