"""Memory ablations: the same tasks and seeds under several arms, each in its own run folder and store.

An ablation config is a pipeline config (`[pipeline]`, `[llm]`) plus `[[arm]]` entries, each a name
and the `[pipeline]` fields it changes (memory off / online / offline, rule vs neural induction, gt
vs judge admission...), and a few top-level keys:

    repeats = 1                 # runs of each arm (each in its own folder, its own memory store)
    budget_matched = false      # add the standard `budget-matched` arm (below)
    budget_max_scale = 3.0      # cap on how far it may raise max_steps
    budget_memory_arm = "..."   # default: the first arm with memory on
    budget_off_arm = "..."      # default: the first arm with memory off

Arms run one after another into `OUT/arms/<arm>/rep<N>/` (a pipeline run folder each), so
re-running with the same `--out` resumes: the pipeline skips every finished episode and commit.

The `budget-matched` arm answers "is memory better than just spending the same tokens?": after the
memory arm, T = its mean tokens per task (actor + judge + induction); memory off with max_steps
scaled by T / (the off arm's mean tokens per task), rounded up, never below the base and at most
`budget_max_scale` times it. Its achieved tokens per task are reported next to T; they fall short
when episodes end before the step limit (more steps buy tokens only to agents that use them).

With `benchmark = "mind2web"` in `[pipeline]` the arms are Mind2Web runs instead (memory off / offline
/ online, `awm.pipeline.mind2web_ablation`): the same `[[arm]]` entries, repeats and folders
(`OUT/arms/<arm>/rep<N>/`, each an `awm mind2web run` folder), and a report of AWM's metrics. Its
arms may not change the tasks (`data`, `split`, `websites`, `limit`), and it has no budget-matched
arm (Mind2Web has no step budget to raise: one prediction per annotated step).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from rich.console import Console

from awm.config import Settings
from awm.errors import ConfigError, StageError
from awm.pipeline.ablation_plan import AblationConfig, AblationPlan, PlannedArm, arm_dir
from awm.pipeline.config import PipelineConfig, load_pipeline_config
from awm.pipeline.progress import ProgressBoard, progress_board
from awm.pipeline.report import BUDGET_ARM, AblationReport, ArmRun, BudgetMatch, build_report
from awm.pipeline.report_render import rich_tables, write_report

if TYPE_CHECKING:
    from awm.pipeline.mind2web_report import Mind2WebAblationReport

ARM_FIXED_FIELDS = ("name", "benchmark", "tasks", "seeds")  # every arm runs the same stream
MIND2WEB_ARM_FIXED_FIELDS = ("data", "split", "websites", "limit")  # ... the same Mind2Web tasks
_ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# --------------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------------


def load_ablation(
    path: Path,
    *,
    repeats: int | None = None,
    workers: int | None = None,
    backend: str | None = None,
) -> AblationPlan:
    """Read and check an ablation config; CLI flags override `repeats` and every arm's workers/backend.

    Errors name the file, the arm and the field.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"ablation config {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"ablation config {path} is not valid TOML: {exc}") from None
    if "arm" not in data:
        raise ConfigError(f"{path}: no [[arm]] entries; an ablation needs at least one arm (name = ...)")
    try:
        ablation = AblationConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{path}: '{where}': {first['msg']}") from None
    if repeats is not None:
        if repeats < 1:
            raise ConfigError(f"--repeats must be at least 1 (got {repeats})")
        ablation.repeats = repeats
    common: dict[str, Any] = {}
    if workers is not None:
        common["workers"] = workers
    if backend is not None:
        common["parallel_backend"] = backend
    base, settings = load_pipeline_config(path, overrides=dict(common))
    names = [a.name for a in ablation.arm]
    for name in names:
        if not _ARM_NAME.match(name):
            raise ConfigError(
                f"{path}: arm name '{name}' must be letters, digits, '.', '_' or '-' (it names a folder)"
            )
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"{path}: arm name(s) {', '.join(duplicates)} appear more than once")
    if ablation.budget_matched and BUDGET_ARM in names:
        raise ConfigError(f"{path}: the arm name '{BUDGET_ARM}' is reserved for budget_matched = true")
    mind2web = base.benchmark == "mind2web"
    if mind2web:
        from awm.pipeline.mind2web_ablation import check_mind2web_ablation

        check_mind2web_ablation(ablation, path)
    arms = []
    for spec in ablation.arm:
        overrides = spec.overrides()
        fixed = sorted(set(overrides) & {*ARM_FIXED_FIELDS, *(MIND2WEB_ARM_FIXED_FIELDS if mind2web else ())})
        if fixed:
            what = "Mind2Web tasks (data, split, websites, limit)" if mind2web else "tasks and seeds"
            raise ConfigError(
                f"{path}: arm '{spec.name}' sets {', '.join(fixed)}; every arm runs the [pipeline] {what} "
                "(set them there)"
            )
        try:
            config, _ = load_pipeline_config(
                path, overrides={**overrides, **common, "name": f"{base.name}-{spec.name}"}
            )
        except ConfigError as exc:
            raise ConfigError(f"arm '{spec.name}': {exc}") from None
        reads = config.memory in ("offline", "online")
        missing = [str(p) for p in config.offline_from if not p.exists()] if reads else []
        if missing:  # said now, not after the arms before it have run
            raise ConfigError(
                f"{path}: arm '{spec.name}': offline_from {', '.join(missing)} does not exist (a run folder or "
                "trajectory file; relative paths are read from the working directory)"
            )
        arms.append(PlannedArm(name=spec.name, config=config, overrides=overrides))
    if ablation.budget_matched:
        _budget_arms(ablation, arms, path)
    text = path.read_text()
    digest = hashlib.sha256(
        json.dumps({"file": text, "repeats": ablation.repeats, **common}, sort_keys=True).encode()
    ).hexdigest()[:12]
    return AblationPlan(
        config_path=path,
        config_hash=digest,
        ablation=ablation,
        base=base,
        settings=settings,
        arms=arms,
    )


def _budget_arms(
    ablation: AblationConfig, arms: list[PlannedArm], path: Path
) -> tuple[PlannedArm, PlannedArm]:
    """The (memory arm, off arm) the budget-matched arm is sized from; a clear error if either is missing."""
    memory = next(
        (
            a
            for a in arms
            if (
                a.name == ablation.budget_memory_arm
                if ablation.budget_memory_arm
                else a.config.memory != "off"
            )
        ),
        None,
    )
    off = next(
        (
            a
            for a in arms
            if (a.name == ablation.budget_off_arm if ablation.budget_off_arm else a.config.memory == "off")
        ),
        None,
    )
    if memory is None or off is None:
        raise ConfigError(
            f'{path}: budget_matched = true needs an arm with memory on and one with memory = "off" '
            "(or name them with budget_memory_arm / budget_off_arm)"
        )
    return memory, off


def budget_match(
    *,
    memory_arm: str,
    off_arm: str,
    memory_tokens_per_task: float,
    off_tokens_per_task: float,
    base_max_steps: int,
    cap: float,
) -> BudgetMatch:
    """Size the budget-matched arm (pure): max_steps scaled by T / off, rounded up, in [base, base x cap]."""
    scale = memory_tokens_per_task / off_tokens_per_task if off_tokens_per_task > 0 else 1.0
    scale = min(max(scale, 1.0), cap)
    return BudgetMatch(
        memory_arm=memory_arm,
        off_arm=off_arm,
        target_tokens_per_task=round(memory_tokens_per_task, 1),
        off_tokens_per_task=round(off_tokens_per_task, 1),
        scale=round(scale, 3),
        cap=cap,
        base_max_steps=base_max_steps,
        max_steps=max(base_max_steps, math.ceil(base_max_steps * scale - 1e-9)),
    )


# --------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------


def _stream_length(config: PipelineConfig) -> int:
    from awm.pipeline.online import resolve_stream

    return len(resolve_stream(config))


def _arm_run(planned: PlannedArm, settings: Settings, repeat: int, result: Any, wall: float) -> ArmRun:
    from awm.pipeline.stages import run_config

    _, digest = run_config(planned.config, settings)
    return ArmRun(
        arm=planned.name,
        repeat=repeat,
        run_dir=str(result.run_dir),
        config_hash=digest,
        overrides=planned.overrides,
        memory=planned.config.memory,
        max_steps=planned.config.max_steps,
        trajectories=list(result.trajectories),
        versions={v.task_key: (v.memory_version_seen, v.memory_version_after) for v in result.versions},
        usage={k: v.model_dump() for k, v in result.usage.items()},
        failed_stage=result.failed_stage,
        error=result.error,
        wall_seconds=round(wall, 1),
    )


def _tokens_per_task(runs: list[ArmRun], *, with_memory_work: bool) -> float:
    """Mean tokens per task: the actor's from the trajectories, plus judge and induction if asked."""
    episodes = sum(len(r.trajectories) for r in runs)
    if not episodes:
        return 0.0
    total = sum(t.prompt_tokens + t.completion_tokens for r in runs for t in r.trajectories)
    for r in runs:
        for component in ("judge", "induction") if with_memory_work else ("judge",):
            fields = r.usage.get(component, {})
            total += int(fields.get("prompt_tokens", 0)) + int(fields.get("completion_tokens", 0))
    return total / episodes


def _actor_cost(runs: list[ArmRun], settings: Settings) -> float:
    from awm.llm.usage import cost_usd

    model = settings.llm.model or ""
    return sum(
        cost_usd(t.model or model, t.prompt_tokens, t.completion_tokens, settings.llm.prices)
        for r in runs
        for t in r.trajectories
    )


def run_ablation(
    plan: AblationPlan,
    out: Path,
    *,
    console: Console | None = None,
    show_progress: bool = True,
) -> tuple[AblationReport | Mind2WebAblationReport, Path]:
    """Run (or resume) every arm and repeat, then write the report; returns it and RESULTS.md's path
    (a Mind2Web ablation's report is a `Mind2WebAblationReport`).

    A stage failure in one arm is recorded and the other arms still run; the report is written, then
    a `StageError` names the failed arms (re-run the same command to resume them).
    """
    if plan.base.benchmark == "mind2web":
        from awm.pipeline.mind2web_ablation import run_mind2web_ablation

        return run_mind2web_ablation(plan, out, console=console, show_progress=show_progress)
    from awm.pipeline.driver import run_arm
    from awm.provenance import collect_provenance, write_provenance

    started = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if any(a.config.parallel_backend == "ray" for a in plan.arms):
        from awm.pipeline.parallel import import_ray

        import_ray()  # a missing extra fails before any browser or model starts
    provenance = collect_provenance()
    write_provenance(out)
    repeats = plan.ablation.repeats
    n = _stream_length(plan.base)
    totals = {a.name: n * repeats for a in plan.arms}
    if plan.ablation.budget_matched:
        totals[BUDGET_ARM] = n * repeats
    (out / "ablation.json").write_text(
        json.dumps(
            {
                "config_path": str(plan.config_path),
                "config_hash": plan.config_hash,
                "repeats": repeats,
                "arms": [{"name": a.name, "overrides": a.overrides} for a in plan.arms],
                "budget_matched": plan.ablation.budget_matched,
            },
            indent=2,
            default=str,
        )
        + "\n"
    )
    runs: list[ArmRun] = []
    match: BudgetMatch | None = None

    def run_repeats(planned: PlannedArm, board: ProgressBoard) -> list[ArmRun]:
        done = []
        for repeat in range(1, repeats + 1):
            t0 = time.monotonic()
            label = planned.name if repeats == 1 else f"{planned.name} rep{repeat}"
            result = run_arm(
                planned.config,
                plan.settings,
                arm_dir(out, planned.name, repeat),
                console=console,
                bar=board.bar(label, total=n),
            )
            done.append(_arm_run(planned, plan.settings, repeat, result, time.monotonic() - t0))
        return done

    with progress_board(console, show_progress) as board:
        for planned in plan.arms:
            runs.extend(run_repeats(planned, board))
        if plan.ablation.budget_matched:
            memory, off = _budget_arms(plan.ablation, plan.arms, plan.config_path)
            match = budget_match(
                memory_arm=memory.name,
                off_arm=off.name,
                memory_tokens_per_task=_tokens_per_task(
                    [r for r in runs if r.arm == memory.name], with_memory_work=True
                ),
                off_tokens_per_task=_tokens_per_task(
                    [r for r in runs if r.arm == off.name], with_memory_work=False
                ),
                base_max_steps=off.config.max_steps,
                cap=plan.ablation.budget_max_scale,
            )
            matched = PlannedArm(
                name=BUDGET_ARM,
                config=off.config.model_copy(
                    update={"max_steps": match.max_steps, "name": f"{plan.base.name}-{BUDGET_ARM}"}
                ),
                overrides={**off.overrides, "max_steps": match.max_steps},
            )
            runs.extend(run_repeats(matched, board))

    llm_runs = any(a.config.policy == "llm" for a in plan.arms)
    models = sorted({t.model for r in runs for t in r.trajectories if t.model})
    report = build_report(
        runs,
        name=plan.base.name,
        config_path=str(plan.config_path),
        config_hash=plan.config_hash,
        base=plan.base.model_dump(mode="json"),
        repeats=repeats,
        model=", ".join(models) or "-",
        backend=plan.settings.llm.resolved_backend() if llm_runs else "-",
        actor_costs={arm: _actor_cost([r for r in runs if r.arm == arm], plan.settings) for arm in totals},
        budget_match=match,
        seconds=time.monotonic() - started,
        temperature=plan.settings.llm.temperature if llm_runs else None,
        cache=plan.settings.llm.cache if llm_runs else None,
        provenance=provenance,
    )
    path = write_report(report, out)
    if console is not None:
        for table in rich_tables(report):
            console.print(table)
        console.print(f"results: {path}")
    failed = [f"{r.arm} (repeat {r.repeat}) at stage {r.failed_stage}: {r.error}" for r in runs if r.failed_stage]
    if failed:
        raise StageError(
            f"{len(failed)} arm run(s) stopped: {'; '.join(failed)}. The report in {path} shows what finished; "
            f"run the same command with --out {out} to resume them"
        )
    return report, path
