"""An ablation's report: per-arm numbers with confidence intervals, paired comparisons, plots, RESULTS.md.

Pure functions from the arms' episodes to an `AblationReport` (the statistics are here, where the
tests are dense), then thin writers: `results.json`, `RESULTS.md`, three PNG plots, a Rich table.

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

import json
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field
from rich.table import Table

from awm.evaluation.audit import JudgeAudit, audit
from awm.evaluation.success import SUCCESS_RULE, is_success
from awm.files import write_text_atomic
from awm.pipeline.summary import INFRA_ENDS, summarize_episode
from awm.provenance import PROVENANCE_JSON
from awm.trajectory import Trajectory, utc_now

RESULTS_JSON = "results.json"
RESULTS_MD = "RESULTS.md"
PLOT_SUCCESS_PER_TASK = "success_per_task.png"
PLOT_STREAM = "success_over_stream.png"
PLOT_TOKENS = "tokens_per_step.png"
Z95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 2000
COMPONENTS = ("actor", "judge", "induction")
BUDGET_ARM = "budget-matched"  # the arm `awm ablate` adds with budget_matched = true
CI_WILSON = "wilson"  # one episode per task: Wilson score interval over episodes
CI_TASK_BOOTSTRAP = "task-bootstrap"  # repeats: percentile bootstrap over tasks of per-task means
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


# --------------------------------------------------------------------------------------------------
# Statistics (pure)
# --------------------------------------------------------------------------------------------------


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for a success rate (sane at 0/n and n/n, unlike the normal one)."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


def sign_test_p(wins: int, losses: int) -> float | None:
    """Two-sided exact sign test on paired outcomes (ties dropped); None when every pair tied."""
    n = wins + losses
    if n == 0:
        return None
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def bootstrap_mean_ci(
    values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile bootstrap 95% interval of the mean (seeded, so a report is reproducible)."""
    if not values:
        return None
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choice(values) for _ in range(n)) / n for _ in range(resamples))
    return means[int(0.025 * (resamples - 1))], means[int(0.975 * (resamples - 1))]


def success_interval(rows: Sequence[ArmEpisode]) -> tuple[tuple[float, float] | None, str]:
    """95% interval of one arm's success rate, and its method (`CI_WILSON` or `CI_TASK_BOOTSTRAP`).

    With one episode per task, episodes are independent draws and Wilson's interval over them is
    right. When a task ran more than once, its repeats are not independent (same page, same difficulty,
    often the same cached answers), so the task is the unit: a seeded bootstrap over tasks of the mean
    per-task success rate.
    """
    by_task = rows_by_task(rows)
    if all(len(mine) == 1 for mine in by_task.values()):
        return wilson_interval(sum(r.success for r in rows), len(rows)), CI_WILSON
    return bootstrap_mean_ci(list(per_task_mean(by_task, _succeeded).values())), CI_TASK_BOOTSTRAP


def rows_by_task(rows: Sequence[ArmEpisode]) -> dict[str, list[ArmEpisode]]:
    """Episodes grouped by task key (task id + seed), the unit of every interval and paired test."""
    grouped: dict[str, list[ArmEpisode]] = {}
    for row in rows:
        grouped.setdefault(row.key, []).append(row)
    return grouped


def per_task_mean(
    by_task: dict[str, list[ArmEpisode]], value: Callable[[ArmEpisode], float]
) -> dict[str, float]:
    """Each task's mean of `value` over its repeats (every task then weighs the same)."""
    return {key: sum(value(r) for r in mine) / len(mine) for key, mine in by_task.items() if mine}


def _succeeded(row: ArmEpisode) -> float:
    return float(row.success)


def _row_tokens(row: ArmEpisode) -> float:
    return float(row.prompt_tokens + row.completion_tokens)


def _row_steps(row: ArmEpisode) -> float:
    return float(row.steps)


def _row_calls(row: ArmEpisode) -> float:
    return float(row.llm_calls)


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


def _usage_sum(runs: Sequence[ArmRun]) -> dict[str, dict[str, float]]:
    total: dict[str, dict[str, float]] = {}
    for run in runs:
        for component, fields in run.usage.items():
            into = total.setdefault(component, {})
            for key, value in fields.items():
                if isinstance(value, int | float):
                    into[key] = into.get(key, 0) + value
    return total


def _tokens(fields: dict[str, float] | None) -> float:
    return float((fields or {}).get("prompt_tokens", 0) + (fields or {}).get("completion_tokens", 0))


def arm_stats(name: str, runs: Sequence[ArmRun], *, actor_cost_usd: float = 0.0) -> ArmStats:
    """One arm's numbers over its repeats. `actor_cost_usd` is the actor's cost of the trajectories'
    tokens (priced by the caller, which knows the model); judge and induction costs come from usage."""
    rows = [r for run in runs for r in episode_rows(run)]
    trajectories = [t for run in runs for t in run.trajectories]
    n = len(rows)
    successes = sum(r.success for r in rows)
    calls = sum(r.llm_calls for r in rows)
    task_rates = per_task_mean(rows_by_task(rows), _succeeded)
    ci95, ci_method = success_interval(rows)
    usage = _usage_sum(runs)
    actor_tokens = sum(r.prompt_tokens + r.completion_tokens for r in rows)
    per = (lambda x: x / n) if n else (lambda x: 0.0)
    tokens = {
        "actor": per(actor_tokens),
        "judge": per(_tokens(usage.get("judge"))),
        "induction": per(_tokens(usage.get("induction"))),
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
    last = runs[-1] if runs else None
    final: dict[str, int | None] = {}
    if last is not None:
        for t in last.trajectories:
            seen, after = last.versions.get(t.task.key, (None, None))
            final[t.task.scope] = after if after is not None else final.get(t.task.scope, seen)
    final = {scope: v for scope, v in final.items() if v is not None}
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
        success_rate=sum(task_rates.values()) / len(task_rates) if task_rates else None,
        ci95=ci95,
        ci_method=ci_method,
        mean_steps=sum(r.steps for r in rows) / n if n else None,
        model_steps_per_task=sum(r.model_steps for r in rows) / n if n else None,
        llm_calls_per_task=calls / n if n else None,
        llm_calls_per_solved_task=calls / successes if successes else None,
        workflow_calls=sum(r.workflow_calls for r in rows),
        workflow_calls_completed=sum(r.workflow_calls_completed for r in rows),
        tokens_per_task={k: round(v, 1) for k, v in tokens.items()},
        cost_per_task_usd=per(actor_cost_usd + other_cost),
        seconds_per_task=sum(r.seconds for r in rows) / n if n else None,
        wall_seconds=round(sum(run.wall_seconds for run in runs), 1),
        ends=dict(Counter(r.end for r in rows).most_common()),
        failure_classes=dict(classes.most_common()),
        errors=errors,
        usage=usage,
        judge_audit=audit(judged) if judged else None,
        final_versions=final,
        failed_stages=[f"repeat {run.repeat}: {run.failed_stage}" for run in runs if run.failed_stage],
    )


def compare(a: str, b: str, rows: Sequence[ArmEpisode]) -> PairedComparison:
    """B minus A, paired by task (task id + seed): per task, the difference of the two arms' mean
    success over their repeats; the sign test counts tasks and the bootstrap resamples tasks.

    Why not pair by repeat: repeat 2 of A has no more in common with repeat 2 of B than with repeat 1,
    and pairing (task, repeat) would count one task's repeats as independent evidence.
    """
    tasks_a = rows_by_task([r for r in rows if r.arm == a])
    tasks_b = rows_by_task([r for r in rows if r.arm == b])
    keys = sorted(set(tasks_a) & set(tasks_b))

    def diffs(value: Callable[[ArmEpisode], float]) -> list[float]:
        mean_a = per_task_mean({k: tasks_a[k] for k in keys}, value)
        mean_b = per_task_mean({k: tasks_b[k] for k in keys}, value)
        return [mean_b[k] - mean_a[k] for k in keys]

    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    success = diffs(_succeeded)
    b_wins, a_wins = sum(d > 0 for d in success), sum(d < 0 for d in success)
    return PairedComparison(
        arm_a=a,
        arm_b=b,
        pairs=len(keys),
        b_wins=b_wins,
        a_wins=a_wins,
        ties=len(keys) - b_wins - a_wins,
        unpaired=len(set(tasks_a) ^ set(tasks_b)),
        mean_success_diff=mean(success),
        ci95=bootstrap_mean_ci(success),
        sign_test_p=sign_test_p(b_wins, a_wins),
        mean_tokens_diff=mean(diffs(_row_tokens)),
        mean_steps_diff=mean(diffs(_row_steps)),
        mean_llm_calls_diff=mean(diffs(_row_calls)),
    )


def replay_warnings(repeats: int, *, temperature: float | None, cache: bool | None) -> list[str]:
    """Why these repeats may be copies of one run: greedy decoding served from the response cache."""
    if repeats > 1 and temperature == 0 and cache is True:
        return [REPLAY_WARNING]
    return []


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
    per_task: dict[str, dict[str, list[int]]] = {}
    for row in rows:
        cell = per_task.setdefault(row.task_id, {}).setdefault(row.arm, [0, 0])
        cell[0] += int(row.success)
        cell[1] += 1
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
        per_task=per_task,
        episodes=rows,
        budget_match=budget_match,
        seconds=round(seconds, 1),
    )


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _ci(ci: tuple[float, float] | None, *, signed: bool = False) -> str:
    if ci is None:
        return "n/a"
    if signed:
        return f"[{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}] pts"
    return f"[{100 * ci[0]:.1f}%, {100 * ci[1]:.1f}%]"


def _num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _p(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


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


class ReportIdentity(Protocol):
    """What both RESULTS.md renderers (MiniWoB++/WebArena here, Mind2Web in `mind2web_report`) open with."""

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


def _interval_note(report: AblationReport) -> str:
    """Which interval each arm carries, and why, in one sentence for RESULTS.md."""
    methods = {a.ci_method for a in report.arms}
    wilson = "Wilson score intervals over episodes (one repeat: every episode is a different task)"
    bootstrap = (
        f"a seeded percentile bootstrap ({BOOTSTRAP_RESAMPLES} resamples) over tasks (task id + seed) of "
        "the mean per-task success rate, because repeats of one task are not independent draws"
    )
    if methods == {CI_WILSON}:
        return f"95% intervals are {wilson}."
    if methods == {CI_TASK_BOOTSTRAP}:
        return f"95% intervals are {bootstrap}."
    mixed = ", ".join(f"{a.name}: {a.ci_method}" for a in report.arms)
    return f"95% intervals are {wilson} where a task ran once, else {bootstrap} ({mixed})."


def _paired_table(comparisons: Sequence[PairedComparison]) -> list[str]:
    lines = [
        "| A | B | tasks | B better | A better | ties | unpaired | success diff | 95% CI | sign test p | tokens diff/task | steps diff/task | calls diff/task |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for c in comparisons:
        diff = "n/a" if c.mean_success_diff is None else f"{100 * c.mean_success_diff:+.1f} pts"
        lines.append(
            f"| {c.arm_a} | {c.arm_b} | {c.pairs} | {c.b_wins} | {c.a_wins} | {c.ties} | {c.unpaired} | {diff} | "
            f"{_ci(c.ci95, signed=True)} | {_p(c.sign_test_p)} | {_num(c.mean_tokens_diff, 0)} | "
            f"{_num(c.mean_steps_diff, 2)} | {_num(c.mean_llm_calls_diff, 2)} |"
        )
    return lines


def render_markdown(report: AblationReport) -> str:
    """`RESULTS.md`: identity, the arms, the pairs, each task, failures, judge audit, memory versions."""
    lines = head_lines(report, f"Ablation {report.name}")
    lines += [
        "## Arms",
        "",
        f"Success rule: {report.success_rule}",
        "",
        "Success is the mean over tasks of each task's success rate over its repeats (successes/episodes "
        "when every task ran every repeat). Tokens per task: actor (from the trajectories) + judge + "
        "induction (real model calls). Mean steps count every step, sub-steps of `run_workflow` calls "
        f"included (the model's own steps: next table). {_interval_note(report)}",
        "",
        "| arm | overrides | tasks | success | 95% CI | mean steps (all) | tokens/task (actor / judge / induction = total) | cost/task | s/task | errors |",
        "|---|---|---:|---:|---|---:|---|---:|---:|---:|",
    ]
    for a in report.arms:
        t = a.tokens_per_task
        overrides = ", ".join(f"{k}={v}" for k, v in a.overrides.items()) or "-"
        lines.append(
            f"| {a.name} | {overrides} | {a.tasks} | {a.successes}/{a.episodes} ({_pct(a.success_rate)}) | "
            f"{_ci(a.ci95)} | "
            f"{_num(a.mean_steps, 2)} | {_num(t.get('actor'), 0)} / {_num(t.get('judge'), 0)} / "
            f"{_num(t.get('induction'), 0)} = {_num(t.get('total'), 0)} | ${a.cost_per_task_usd:.4f} | "
            f"{_num(a.seconds_per_task)} | {len(a.errors)} |"
        )
    lines += [
        "",
        "## Model calls and workflow calls",
        "",
        "Per task (episode): model steps are the steps the model decided (a `run_workflow` call is one; "
        "its sub-steps are not), model calls are the actor's (re-prompts included). Calls per solved task "
        "are all the arm's calls over its solved episodes (n/a: none solved). `run_workflow` calls: all "
        "of the arm's, and how many ran every sub-step.",
        "",
        "| arm | model steps/task | model calls/task | model calls/solved task | run_workflow calls | completed |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for a in report.arms:
        lines.append(
            f"| {a.name} | {_num(a.model_steps_per_task, 2)} | {_num(a.llm_calls_per_task, 2)} | "
            f"{_num(a.llm_calls_per_solved_task, 2)} | {a.workflow_calls} | {a.workflow_calls_completed} |"
        )
    if report.comparisons:
        lines += [
            "",
            "## Paired differences (per task: same task id and seed)",
            "",
            "B minus A, one pair per task: the difference of the two arms' mean success over their repeats. "
            "The interval is a seeded percentile bootstrap over tasks of the mean difference; p is the exact "
            "two-sided sign test over tasks that differ (ties dropped). Tasks only one arm ran are left out "
            "(unpaired).",
            "",
            *_paired_table(report.comparisons),
        ]
    if report.budget_comparisons:
        lines += [
            "",
            f"## Paired differences against `{BUDGET_ARM}`",
            "",
            f"The same test with A = `{BUDGET_ARM}` (memory off, given as many tokens as the memory arm it "
            "was sized from): B better means the arm beats spending the same budget on more steps.",
            "",
            *_paired_table(report.budget_comparisons),
        ]
    if report.budget_match is not None:
        b = report.budget_match
        lines += [
            "",
            "## Budget-matched arm",
            "",
            f"Memory off with the step budget raised towards the tokens of `{b.memory_arm}`: target "
            f"{b.target_tokens_per_task:,.0f} tokens/task (actor + judge + induction), `{b.off_arm}` spent "
            f"{b.off_tokens_per_task:,.0f}; scale {b.scale:.2f} (capped at {b.cap:g}x) took max_steps from "
            f"{b.base_max_steps} to {b.max_steps}. Achieved: "
            f"{_num(b.achieved_tokens_per_task, 0)} tokens/task. (More steps buy tokens only when episodes "
            "run to the limit; one that ends early spends no more.)",
        ]
    arms = [a.name for a in report.arms]
    lines += ["", "## Per task", "", "| task | " + " | ".join(arms) + " |", "|---|" + "---:|" * len(arms)]
    for task in sorted(report.per_task):
        cells = []
        for arm in arms:
            s, n = report.per_task[task].get(arm, [0, 0])
            cells.append(f"{s}/{n}" if n else "-")
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    lines += ["", "## Failure classes", ""]
    for a in report.arms:
        ends = ", ".join(f"{k} x{v}" for k, v in a.ends.items()) or "-"
        classes = ", ".join(f"{k} x{v}" for k, v in a.failure_classes.items()) or "none"
        lines.append(f"- **{a.name}**: episodes ended {ends}; step failures: {classes}")
        lines.extend(
            f"  - error: `{e['key']}` (repeat {e['repeat']}) ended {e['end']}: {e['error'] or '-'}"
            for e in a.errors
        )
        lines.extend(f"  - stage failed: {s}" for s in a.failed_stages)
    lines += ["", "## Judge audit", ""]
    audited = [a for a in report.arms if a.judge_audit is not None]
    if not audited:
        lines.append("No arm has both a judge label and a ground-truth reward: nothing to audit.")
    for a in audited:
        assert a.judge_audit is not None
        lines += [f"### {a.name}", "", a.judge_audit.to_markdown().replace("## Judge audit", "Judge audit")]
    lines += ["", "## Memory versions", ""]
    for a in report.arms:
        if a.memory == "off":
            lines.append(f"- **{a.name}**: memory off")
            continue
        heads = (
            ", ".join(f"{scope} v{v}" for scope, v in a.final_versions.items() if v is not None)
            or "no commit"
        )
        lines.append(f"- **{a.name}** ({a.memory}): heads after the stream: {heads}")
    lines += [
        "",
        "| arm | repeat | # | task | seed | success | end | steps | tokens | s | memory seen | after |",
        "|---|---:|---:|---|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in report.episodes:
        seen = "-" if r.memory_version_seen is None else f"v{r.memory_version_seen}"
        after = "-" if r.memory_version_after is None else f"v{r.memory_version_after}"
        lines.append(
            f"| {r.arm} | {r.repeat} | {r.position} | {r.task_id} | {'-' if r.seed is None else r.seed} | "
            f"{'yes' if r.success else 'no'} | {r.end} | {r.steps} | {r.prompt_tokens + r.completion_tokens:,} | "
            f"{r.seconds:.1f} | {seen} | {after} |"
        )
    if report.plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in report.plots]
    return "\n".join(lines) + "\n"


def rich_tables(report: AblationReport) -> list[Table]:
    """The comparison printed at the end of `awm ablate`."""
    caption = "\n".join([f"config {report.config_hash}", *(f"warning: {w}" for w in report.warnings)])
    arms = Table(title=f"Ablation {report.name}: {report.model}", caption=caption)
    columns = ("arm", "success", "95% CI", "steps", "calls/task", "calls/solved", "workflows run")
    for column in (*columns, "tokens/task", "cost/task", "s/task", "errors"):
        arms.add_column(column, justify="left" if column in ("arm", "95% CI") else "right")
    for a in report.arms:
        arms.add_row(
            a.name,
            f"{a.successes}/{a.episodes} ({_pct(a.success_rate)})",
            _ci(a.ci95),
            _num(a.mean_steps, 2),
            _num(a.llm_calls_per_task, 2),
            _num(a.llm_calls_per_solved_task, 2),
            f"{a.workflow_calls_completed}/{a.workflow_calls}",
            _num(a.tokens_per_task.get("total"), 0),
            f"${a.cost_per_task_usd:.4f}",
            _num(a.seconds_per_task),
            str(len(a.errors)),
        )
    tables = [arms]
    for title, comparisons in (
        ("Paired differences per task (B - A)", report.comparisons),
        (f"Paired differences against {BUDGET_ARM} (B - A)", report.budget_comparisons),
    ):
        if not comparisons:
            continue
        pairs = Table(title=title)
        for column in ("A", "B", "tasks", "B better", "A better", "diff", "95% CI", "sign p"):
            pairs.add_column(column, justify="left" if column in ("A", "B", "95% CI") else "right")
        for c in comparisons:
            diff = "n/a" if c.mean_success_diff is None else f"{100 * c.mean_success_diff:+.1f} pts"
            pairs.add_row(
                c.arm_a,
                c.arm_b,
                str(c.pairs),
                str(c.b_wins),
                str(c.a_wins),
                diff,
                _ci(c.ci95, signed=True),
                _p(c.sign_test_p),
            )
        tables.append(pairs)
    return tables


# --------------------------------------------------------------------------------------------------
# Plots (matplotlib, Agg) and writing
# --------------------------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_success_per_task(report: AblationReport, path: Path) -> None:
    """Grouped bars: for each task, each arm's success rate over seeds and repeats."""
    plt = _pyplot()
    tasks = sorted(report.per_task)
    arms = [a.name for a in report.arms]
    width = 0.8 / max(1, len(arms))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(tasks) + 2), 4))
    for i, arm in enumerate(arms):
        rates = []
        for task in tasks:
            s, n = report.per_task[task].get(arm, [0, 0])
            rates.append(s / n if n else 0.0)
        ax.bar([x + i * width - 0.4 + width / 2 for x in range(len(tasks))], rates, width, label=arm)
    ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("success rate")
    ax.set_title("Success per task")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_stream(report: AblationReport, path: Path) -> None:
    """Per arm: cumulative success along the task stream (each repeat a line), each episode a dot
    (filled: solved), and a dashed line where the memory version an episode saw changed."""
    plt = _pyplot()
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
                previous: tuple[str, int | None] | None = None
                for r in mine:
                    if previous is not None and r.scope != previous[0]:
                        ax.axvline(r.position - 0.5, color="black", linewidth=0.6, alpha=0.4)
                    seen = (r.scope, r.memory_version_seen)
                    if r.memory_version_seen is not None and seen != previous:
                        ax.axvline(r.position - 0.5, color="grey", linestyle="--", linewidth=0.8)
                        label = f"{r.scope.rsplit('/', 1)[-1]} v{r.memory_version_seen}"
                        ax.text(r.position - 0.45, 0.55, label, fontsize=7, color="grey", rotation=90)
                    previous = seen
        ax.set_ylim(-0.08, 1.08)
        ax.set_ylabel("cum. success")
        ax.set_title(
            f"{arm}: success over the task stream (solid: next scope; dashed: memory version seen)",
            fontsize=9,
        )
        ax.xaxis.get_major_locator().set_params(integer=True)
    axes[-1, 0].set_xlabel("position in the task stream")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_tokens_per_step(report: AblationReport, path: Path) -> None:
    """Per arm: the distribution of model tokens (prompt + completion) per step."""
    plt = _pyplot()
    arms = [a.name for a in report.arms]
    data = [[t for r in report.episodes if r.arm == arm for t in r.step_tokens] or [0] for arm in arms]
    fig, ax = plt.subplots(figsize=(max(5.0, 1.5 * len(arms) + 2), 4))
    ax.boxplot(data, showmeans=True)
    ax.set_xticks(range(1, len(arms) + 1), arms)
    ax.set_ylabel("tokens per step (prompt + completion)")
    ax.set_title("Actor tokens per step" + ("" if any(any(d) for d in data) else " (no model calls)"))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(report: AblationReport, out: Path) -> Path:
    """Write the plots, `results.json` and `RESULTS.md` into `out`; returns the RESULTS.md path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    plots = []
    for name, draw in (
        (PLOT_SUCCESS_PER_TASK, plot_success_per_task),
        (PLOT_STREAM, plot_stream),
        (PLOT_TOKENS, plot_tokens_per_step),
    ):
        draw(report, out / name)
        plots.append(name)
    report = report.model_copy(update={"plots": plots})
    write_text_atomic(out / RESULTS_JSON, report.model_dump_json(indent=2) + "\n")
    write_text_atomic(out / RESULTS_MD, render_markdown(report))
    return out / RESULTS_MD
