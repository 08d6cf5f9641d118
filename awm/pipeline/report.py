"""The MiniWoB++/WebArena ablation's report: per-arm numbers with confidence intervals, paired comparisons.

Pure functions from the arms' episodes to an `AblationReport` (what results.json holds). How people read
it (RESULTS.md, the Rich tables, the plots, the writer) is `awm.pipeline.report_render`; the statistics
are `awm.pipeline.stats`, shared with the Mind2Web report (`awm.pipeline.mind2web_report`).

Counting rules, stated once: success is `awm.evaluation.success.is_success` (its `SUCCESS_RULE` is
printed in RESULTS.md); every episode counts, so an `env_error`, `llm_error` or timeout is a failure
and is listed by name. Actor tokens come from the trajectories (what the prompts held, whether or not
the response cache answered), judge and induction tokens from the pipeline's usage meter (real model
calls only; cache hits are free and counted apart). Model calls are the actor's, summed over the
steps (`Step.llm_calls`: re-prompts included, sub-steps of a `run_workflow` call make none); model steps
are the steps the model decided (`Step.called_by` is None), so an executable workflow's sub-steps do not
count as steps of the agent's own.

The statistical unit is the task (task id + seed, `ArmEpisode.key`), not the episode: repeats of one
task share its page, its difficulty and often its cached answers, so pooling them as independent draws
narrows every interval (by up to the square root of the number of repeats, when repeats agree) without
any new evidence. With one repeat each
episode is its own task and an arm's interval is Wilson's over episodes; with repeats it is a seeded
bootstrap over tasks of the mean per-task success rate, and paired tests compare per-task means.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from awm.evaluation.audit import JudgeAudit, audit
from awm.evaluation.success import SUCCESS_RULE, is_success
from awm.pipeline.episode_tables import repetitions, step_costs
from awm.pipeline.results import replay_warnings
from awm.pipeline.stats import (
    CI_WILSON,
    mean,
    merge_usage,
    paired_diffs,
    paired_test,
    per_task_mean,
    rows_by_task,
    succeeded,
    success_counts,
    success_interval,
    usage_tokens,
)
from awm.pipeline.summary import INFRA_ENDS, summarize_episode
from awm.trajectory import Trajectory, utc_now

BUDGET_ARM = "budget-matched"  # the arm `awm ablate` adds with budget_matched = true


# --------------------------------------------------------------------------------------------------
# The report model
# --------------------------------------------------------------------------------------------------


class ArmRun(BaseModel):
    """One repeat of one arm as the ablation driver ran it (input to `build_report`)."""

    arm: str
    repeat: int
    run_dir: str
    config_hash: str = ""
    overrides: dict[str, Any] = Field(default_factory=dict)
    memory: str = "off"
    max_steps: int = 0
    trajectories: list[Trajectory] = Field(default_factory=list)  # stream order
    versions: dict[str, tuple[int | None, int | None]] = Field(default_factory=dict)  # key -> (seen, after)
    usage: dict[str, dict[str, float]] = Field(default_factory=dict)  # component -> usage fields
    failed_stage: str | None = None
    error: str | None = None
    wall_seconds: float = 0.0


class ArmEpisode(BaseModel):
    """One episode, flat: a row of the per-task table, a point of the stream plot."""

    arm: str
    repeat: int
    position: int
    key: str
    task_id: str
    scope: str = ""
    seed: int | None
    trajectory_id: str
    success: bool
    reward: float | None
    judge: str | None
    end: str
    steps: int  # every step, sub-steps of `run_workflow` calls included
    model_steps: int = 0  # the steps the model decided (`Step.called_by` is None)
    llm_calls: int = 0  # the actor's model calls, summed over the steps
    workflow_calls: int = 0  # `run_workflow` calls
    workflow_calls_completed: int = 0  # of which every sub-step ran
    prompt_tokens: int
    completion_tokens: int
    step_tokens: list[int] = Field(default_factory=list)
    seconds: float
    failure_classes: dict[str, int] = Field(default_factory=dict)
    memory_version_seen: int | None = None
    memory_version_after: int | None = None
    error: str = ""


class ArmStats(BaseModel):
    """An arm over all its repeats."""

    name: str
    overrides: dict[str, Any] = Field(default_factory=dict)
    memory: str = "off"
    max_steps: int = 0
    config_hashes: list[str] = Field(default_factory=list)
    repeats: int = 0
    tasks: int = 0  # distinct task keys (task id + seed): the statistical unit
    episodes: int = 0
    successes: int = 0
    success_rate: float | None = None  # mean over tasks of per-task rates (= successes/episodes if balanced)
    ci95: tuple[float, float] | None = None
    ci_method: str = CI_WILSON  # CI_WILSON or CI_TASK_BOOTSTRAP
    mean_steps: float | None = None  # every step, sub-steps of `run_workflow` calls included
    model_steps_per_task: float | None = None  # steps the model decided
    llm_calls_per_task: float | None = None  # the actor's model calls
    llm_calls_per_solved_task: float | None = None  # all the arm's calls / its successes (None: none)
    workflow_calls: int = 0  # `run_workflow` calls over all episodes
    workflow_calls_completed: int = 0  # of which every sub-step ran
    tokens_per_task: dict[str, float] = Field(default_factory=dict)  # actor, judge, induction, total
    step_costs: dict[str, float] = Field(default_factory=dict)  # the model's steps: `episode_tables.step_costs`
    repetitions: dict[str, int] = Field(default_factory=dict)  # episodes that repeated an act: `episode_tables`
    cost_per_task_usd: float = 0.0
    seconds_per_task: float | None = None
    wall_seconds: float = 0.0
    ends: dict[str, int] = Field(default_factory=dict)
    failure_classes: dict[str, int] = Field(default_factory=dict)
    errors: list[dict[str, Any]] = Field(default_factory=list)  # infra failures, by name, never dropped
    usage: dict[str, dict[str, float]] = Field(default_factory=dict)  # summed over repeats
    judge_audit: JudgeAudit | None = None
    final_versions: dict[str, int | None] = Field(default_factory=dict)  # scope -> head after the stream
    failed_stages: list[str] = Field(default_factory=list)


class PairedComparison(BaseModel):
    """Arm B against arm A, task by task (task id + seed), each arm averaged over its repeats."""

    arm_a: str
    arm_b: str
    pairs: int  # tasks both arms ran
    b_wins: int  # tasks where B's mean success over repeats is higher
    a_wins: int
    ties: int
    unpaired: int = 0  # tasks only one of the arms ran (left out)
    mean_success_diff: float | None = None  # B - A, in [-1, 1], mean over tasks
    ci95: tuple[float, float] | None = None  # bootstrap over tasks of the mean difference
    sign_test_p: float | None = None  # over tasks, ties dropped
    mean_tokens_diff: float | None = None
    mean_steps_diff: float | None = None
    mean_llm_calls_diff: float | None = None
    solved_only_by_b: list[str] = Field(default_factory=list)  # task ids (templates) B solved, A never did
    solved_only_by_a: list[str] = Field(default_factory=list)  # ... and the other way round


class BudgetMatch(BaseModel):
    """How the budget-matched arm was sized, and what it reached."""

    memory_arm: str
    off_arm: str
    target_tokens_per_task: float  # the memory arm's actor + judge + induction, per task
    off_tokens_per_task: float
    scale: float
    cap: float
    base_max_steps: int
    max_steps: int
    achieved_tokens_per_task: float | None = None


class AblationReport(BaseModel):
    """Everything `results.json` holds; `RESULTS.md` and the plots are drawn from it."""

    name: str
    config_path: str
    config_hash: str
    created_at: str = Field(default_factory=utc_now)
    provenance: dict[str, Any] | None = None  # `awm.provenance.collect_provenance`: commit, packages, command
    model: str = "-"
    backend: str = "-"
    base: dict[str, Any] = Field(default_factory=dict)
    repeats: int = 1
    temperature: float | None = None
    cache: bool | None = None
    success_rule: str = SUCCESS_RULE
    warnings: list[str] = Field(default_factory=list)  # what makes these numbers weaker than they look
    arms: list[ArmStats] = Field(default_factory=list)
    comparisons: list[PairedComparison] = Field(default_factory=list)  # each arm against the first
    budget_comparisons: list[PairedComparison] = Field(default_factory=list)  # ... against budget-matched
    per_task: dict[str, dict[str, list[int]]] = Field(default_factory=dict)  # task -> arm -> [succ, n]
    episodes: list[ArmEpisode] = Field(default_factory=list)
    budget_match: BudgetMatch | None = None
    plots: list[str] = Field(default_factory=list)
    seconds: float = 0.0


# --------------------------------------------------------------------------------------------------
# Building it (pure)
# --------------------------------------------------------------------------------------------------


# Per-episode figures computed once, by the run summary (`awm.pipeline.summary.summarize_episode`).
_SHARED_WITH_SUMMARY = {
    "key", "scope", "seed", "trajectory_id", "reward", "judge", "end", "steps",
    "prompt_tokens", "completion_tokens", "llm_calls", "seconds", "failure_classes",
}  # fmt: skip


def episode_rows(run: ArmRun) -> list[ArmEpisode]:
    rows = []
    for position, t in enumerate(run.trajectories):
        seen, after = run.versions.get(t.task.key, (t.memory_version, None))
        errors = [s.error for s in t.steps if s.error and s.outcome in ("env_error", "llm_error")]
        shared = summarize_episode(t).model_dump(include=_SHARED_WITH_SUMMARY)
        rows.append(
            ArmEpisode(
                **shared,
                success=is_success(t),
                arm=run.arm,
                repeat=run.repeat,
                position=position,
                task_id=t.task.task_id.removeprefix("browsergym/"),
                model_steps=sum(1 for s in t.steps if s.called_by is None),
                workflow_calls=len(t.workflow_calls),
                workflow_calls_completed=sum(1 for c in t.workflow_calls if c.completed),
                step_tokens=[s.prompt_tokens + s.completion_tokens for s in t.steps],
                memory_version_seen=seen,
                memory_version_after=after,
                error=(errors[-1] if errors else "")[:300],
            )
        )
    return rows


def arm_stats(name: str, runs: Sequence[ArmRun], *, actor_cost_usd: float = 0.0) -> ArmStats:
    """One arm's numbers over its repeats. `actor_cost_usd` is the actor's cost of the trajectories'
    tokens (priced by the caller, which knows the model); judge and induction costs come from usage."""
    rows = [r for run in runs for r in episode_rows(run)]
    trajectories = [t for run in runs for t in run.trajectories]
    n = len(rows)
    successes = sum(r.success for r in rows)
    calls = sum(r.llm_calls for r in rows)
    task_rates = per_task_mean(rows_by_task(rows), succeeded)
    ci95, ci_method = success_interval(rows)
    usage = merge_usage(*(run.usage for run in runs))
    actor_tokens = sum(r.prompt_tokens + r.completion_tokens for r in rows)
    per = (lambda x: x / n) if n else (lambda x: 0.0)
    tokens = {
        "actor": per(actor_tokens),
        "judge": per(usage_tokens(usage.get("judge"))),
        "induction": per(usage_tokens(usage.get("induction"))),
    }
    tokens["total"] = sum(tokens.values())
    other_cost = sum(float(usage.get(c, {}).get("cost_usd", 0.0)) for c in ("judge", "induction"))
    classes: Counter[str] = Counter()
    for r in rows:
        classes.update(r.failure_classes)
    errors = [
        {"key": r.key, "repeat": r.repeat, "end": r.end, "trajectory_id": r.trajectory_id, "error": r.error}
        for r in rows
        if r.end in INFRA_ENDS
    ]
    judged = [t for t in trajectories if t.verdict.judge is not None and t.verdict.reward is not None]
    first = runs[0] if runs else None
    return ArmStats(
        name=name,
        overrides=first.overrides if first else {},
        memory=first.memory if first else "off",
        max_steps=first.max_steps if first else 0,
        config_hashes=sorted({run.config_hash for run in runs if run.config_hash}),
        repeats=len(runs),
        tasks=len(task_rates),
        episodes=n,
        successes=successes,
        success_rate=mean(list(task_rates.values())),
        ci95=ci95,
        ci_method=ci_method,
        mean_steps=sum(r.steps for r in rows) / n if n else None,
        model_steps_per_task=sum(r.model_steps for r in rows) / n if n else None,
        llm_calls_per_task=calls / n if n else None,
        llm_calls_per_solved_task=calls / successes if successes else None,
        workflow_calls=sum(r.workflow_calls for r in rows),
        workflow_calls_completed=sum(r.workflow_calls_completed for r in rows),
        tokens_per_task={k: round(v, 1) for k, v in tokens.items()},
        step_costs=step_costs(trajectories),
        repetitions=repetitions(trajectories),
        cost_per_task_usd=per(actor_cost_usd + other_cost),
        seconds_per_task=sum(r.seconds for r in rows) / n if n else None,
        wall_seconds=round(sum(run.wall_seconds for run in runs), 1),
        ends=dict(Counter(r.end for r in rows).most_common()),
        failure_classes=dict(classes.most_common()),
        errors=errors,
        usage=usage,
        judge_audit=audit(judged) if judged else None,
        final_versions=_final_versions(runs[-1]) if runs else {},
        failed_stages=[f"repeat {run.repeat}: {run.failed_stage}" for run in runs if run.failed_stage],
    )


def _final_versions(run: ArmRun) -> dict[str, int]:
    """Each scope's head after the stream of `run`: its last commit, else the version its tasks saw."""
    final: dict[str, int | None] = {}
    for t in run.trajectories:
        seen, after = run.versions.get(t.task.key, (None, None))
        final[t.task.scope] = after if after is not None else final.get(t.task.scope, seen)
    return {scope: v for scope, v in final.items() if v is not None}


def compare(a: str, b: str, rows: Sequence[ArmEpisode]) -> PairedComparison:
    """B minus A, paired by task (task id + seed): per task, the difference of the two arms' mean
    success over their repeats; the sign test counts tasks and the bootstrap resamples tasks
    (`awm.pipeline.stats.paired_diffs` says why not by repeat)."""
    tasks_a = rows_by_task([r for r in rows if r.arm == a])
    tasks_b = rows_by_task([r for r in rows if r.arm == b])
    keys = sorted(set(tasks_a) & set(tasks_b))

    def mean_diff(value: Callable[[ArmEpisode], float]) -> float | None:
        return mean(paired_diffs(tasks_a, tasks_b, keys, value))

    success = paired_test(paired_diffs(tasks_a, tasks_b, keys, succeeded))
    solved_a = solved_task_ids([r for r in rows if r.arm == a and r.key in keys])
    solved_b = solved_task_ids([r for r in rows if r.arm == b and r.key in keys])
    return PairedComparison(
        arm_a=a,
        arm_b=b,
        pairs=len(keys),
        b_wins=success.b_wins,
        a_wins=success.a_wins,
        ties=success.ties,
        unpaired=len(set(tasks_a) ^ set(tasks_b)),
        mean_success_diff=success.mean_diff,
        ci95=success.ci95,
        sign_test_p=success.sign_test_p,
        mean_tokens_diff=mean_diff(lambda r: float(r.prompt_tokens + r.completion_tokens)),
        mean_steps_diff=mean_diff(lambda r: float(r.steps)),
        mean_llm_calls_diff=mean_diff(lambda r: float(r.llm_calls)),
        solved_only_by_b=sorted(solved_b - solved_a),
        solved_only_by_a=sorted(solved_a - solved_b),
    )


def solved_task_ids(rows: Sequence[ArmEpisode]) -> set[str]:
    """The task ids (an arena template, a MiniWoB++ task) solved in at least one of `rows`' episodes, over
    every seed and repeat: "which templates did this arm ever solve" (pure)."""
    return {r.task_id for r in rows if r.success}


def build_report(
    runs: Sequence[ArmRun],
    *,
    name: str,
    config_path: str,
    config_hash: str,
    base: dict[str, Any],
    repeats: int,
    model: str,
    backend: str,
    actor_costs: dict[str, float] | None = None,
    budget_match: BudgetMatch | None = None,
    seconds: float = 0.0,
    temperature: float | None = None,
    cache: bool | None = None,
    provenance: dict[str, Any] | None = None,
) -> AblationReport:
    """The whole report; arms in first-run order, each compared with the first arm (the baseline) and,
    when a `budget-matched` arm ran, each arm but the baseline also compared with it (does memory beat
    spending the same tokens on more steps?).

    `temperature` and `cache` are the actor's sampling temperature and whether the response cache was
    on (None: not known, e.g. a scripted policy); with repeats they decide the replay warning.
    `provenance` is `awm.provenance.collect_provenance()` taken when the run started, carried as is.
    """
    order = list(dict.fromkeys(run.arm for run in runs))
    arms = [
        arm_stats(arm, [r for r in runs if r.arm == arm], actor_cost_usd=(actor_costs or {}).get(arm, 0.0))
        for arm in order
    ]
    rows = [row for run in runs for row in episode_rows(run)]
    comparisons = [compare(order[0], other, rows) for other in order[1:]]
    budget_comparisons = (
        [compare(BUDGET_ARM, other, rows) for other in order[1:] if other != BUDGET_ARM]
        if BUDGET_ARM in order[1:]
        else []
    )
    if budget_match is not None:
        matched = next((a for a in arms if a.name == BUDGET_ARM), None)
        if matched is not None:
            budget_match = budget_match.model_copy(
                update={"achieved_tokens_per_task": matched.tokens_per_task.get("total")}
            )
    return AblationReport(
        name=name,
        config_path=config_path,
        config_hash=config_hash,
        provenance=provenance,
        model=model,
        backend=backend,
        base=base,
        repeats=repeats,
        temperature=temperature,
        cache=cache,
        warnings=replay_warnings(repeats, temperature=temperature, cache=cache),
        arms=arms,
        comparisons=comparisons,
        budget_comparisons=budget_comparisons,
        per_task=success_counts(rows, lambda r: r.task_id),
        episodes=rows,
        budget_match=budget_match,
        seconds=round(seconds, 1),
    )
