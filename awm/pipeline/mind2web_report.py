"""The Mind2Web ablation's report: its model (`Mind2WebAblationReport`, what results.json holds) and its
numbers over tasks. Pure over per-task results; the runs themselves are `awm.pipeline.mind2web_ablation`'s
(see its docstring for what is measured and why these intervals), how people read the report
(RESULTS.md, the Rich tables, the plot, the writer) is `awm.pipeline.mind2web_report_render`. The
statistics are `awm.pipeline.stats`, the same as the MiniWoB++/WebArena report's (`awm.pipeline.report`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from awm.mind2web.metrics import score_task
from awm.mind2web.schema import TaskRecord
from awm.pipeline.mind2web_memory import InductionNote
from awm.pipeline.results import replay_warnings
from awm.pipeline.stats import (
    CI_TASK_BOOTSTRAP,
    CI_WILSON,
    PairedTest,
    bootstrap_mean_ci,
    bootstrap_ratio_ci,
    mean,
    merge_usage,
    paired_diffs,
    paired_test,
    per_task_mean,
    rows_by_task,
    success_counts,
    success_interval,
    usage_tokens,
    x100,
)
from awm.trajectory import Trajectory, utc_now

METRICS = ("element_accuracy", "action_f1", "step_success_rate", "task_success_rate")
LABELS = {
    "element_accuracy": "EA",
    "action_f1": "AF1",
    "step_success_rate": "step SR",
    "task_success_rate": "SR",
}
STEP_METRICS = METRICS[:3]  # the ones with a micro (over steps) version
USAGE_JSON = "usage.json"
MATCH = "awm"
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
    metrics: dict[str, PairedTest] = Field(default_factory=dict)
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
# Building it (pure)
# --------------------------------------------------------------------------------------------------


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


def metric_stats(rows: Sequence[TaskResult], metric: str) -> MetricStat:
    """One metric over an arm's task runs (see `awm.pipeline.mind2web_ablation` for the intervals)."""
    by_task = rows_by_task(rows)
    if not by_task:
        return MetricStat()
    means = per_task_mean(by_task, lambda r: r.value(metric))
    macro = 100 * sum(means.values()) / len(means)
    if metric == "task_success_rate":
        ci, method = success_interval(rows)
    else:
        ci, method = bootstrap_mean_ci(list(means.values())), CI_TASK_BOOTSTRAP
    stat = MetricStat(macro=macro, ci95=x100(ci), ci_method=method)
    if metric in STEP_METRICS:
        steps = sum(r.steps for r in rows)
        keys = list(by_task)
        stat.micro = 100 * sum(r.numerator(metric) for r in rows) / steps if steps else None
        stat.micro_ci95 = x100(
            bootstrap_ratio_ci(
                [sum(r.numerator(metric) for r in by_task[k]) for k in keys],
                [sum(r.steps for r in by_task[k]) for k in keys],
            )
        )
    return stat


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
    usage = merge_usage(*(run.usage for run in runs))
    metrics = {m: metric_stats(rows, m) for m in METRICS}
    sr = metrics["task_success_rate"]
    actor = sum(r.prompt_tokens + r.completion_tokens for r in rows)
    tokens = {"actor": int(actor), "induction": int(usage_tokens(usage.get("induction")))}
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
        tasks=len(rows_by_task(rows)),
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


def compare(a: str, b: str, rows: Sequence[TaskResult]) -> Mind2WebComparison:
    """B minus A, paired by task: per task, the difference of the two arms' means over their repeats."""
    tasks_a = rows_by_task([r for r in rows if r.arm == a])
    tasks_b = rows_by_task([r for r in rows if r.arm == b])
    keys = [k for k in tasks_a if k in tasks_b]  # stream order

    def diffs(value: Callable[[TaskResult], float]) -> list[float]:
        return paired_diffs(tasks_a, tasks_b, keys, value)

    metrics = {m: paired_test(diffs(lambda r, m=m: r.value(m))) for m in METRICS}
    fractions = metrics["task_success_rate"]
    shown = {
        m: d.model_copy(
            update={"mean_diff": None if d.mean_diff is None else 100 * d.mean_diff, "ci95": x100(d.ci95)}
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
        mean_tokens_diff=mean(diffs(lambda r: float(r.prompt_tokens + r.completion_tokens))),
        mean_llm_calls_diff=mean(diffs(lambda r: float(r.llm_calls))),
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
        per_task=success_counts(rows, lambda r: r.key),
        task_results=rows,
        seconds=round(seconds, 1),
    )
