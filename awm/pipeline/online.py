"""The online loop (induce while solving), the dispatcher over memory kinds, and resume.

Online, per scope, in a fixed order (MiniWoB: each task's seeds in turn; WebArena: one site's tasks in
id order): solve a task, evaluate it, and after every `induce_every` tasks of the scope (and after its
last) admit the new trajectories, induce, and commit a new memory version; the scope's next task sees
it. Each episode records the version it was shown.

Why it survives a kill -9: every stage's result is in the run database before the next stage starts,
and each stage is safe to repeat. A task's state goes ``solving -> solved -> evaluated -> done``; on
resume a ``done`` task is skipped, an episode that ended is adopted (not re-run), an episode cut short
is deleted and re-run from its start, and a commit is found by its message (``online after <task
key>``) instead of being made twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from awm.config import Settings
from awm.errors import ConfigError
from awm.pipeline.config import PipelineConfig
from awm.pipeline.stages import (
    Clients,
    PipelineContext,
    PipelineStageError,
    admit_stage,
    commit_stage,
    evaluate_stage,
    find_commit,
    induce_stage,
    solve_stage,
)
from awm.pipeline.state import PipelineState, TaskState
from awm.trajectory import Task, Trajectory, load_trajectory


class VersionRecord(BaseModel):
    """Which memory version a task's episode was shown, and the scope's head after its commit point."""

    task_key: str
    scope: str
    memory_version_seen: int | None = None
    memory_version_after: int | None = None


class ComponentUsage(BaseModel):
    """What one component (actor, judge, induction) spent; cache hits are free and counted apart."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    cached_calls: int = 0


class PipelineResult(BaseModel):
    """What an arm produced: its trajectories in stream order, the memory versions, the spend.

    `failed_stage` and `error` are set when a stage stopped the pipeline (nothing after it ran).
    """

    run_dir: Path
    name: str = ""
    memory: str = ""
    trajectories: list[Trajectory] = Field(default_factory=list)
    versions: list[VersionRecord] = Field(default_factory=list)
    usage: dict[str, ComponentUsage] = Field(default_factory=dict)
    failed_stage: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed_stage is None

    def success_rate(self) -> float | None:
        from awm.webarena.report import is_success

        if not self.trajectories:
            return None
        return sum(is_success(t) for t in self.trajectories) / len(self.trajectories)


# --------------------------------------------------------------------------------------------------
# The task stream
# --------------------------------------------------------------------------------------------------


def resolve_stream(config: PipelineConfig) -> list[Task]:
    """The ordered stream: grouped by scope (first appearance), each scope's tasks in config order
    (task then seed; WebArena task ids sorted within a site)."""
    from awm.webarena.tasks import resolve_tasks

    tasks = resolve_tasks(config.benchmark, config.tasks, config.seeds)
    by_scope: dict[str, list[Task]] = {}
    for task in tasks:
        by_scope.setdefault(task.scope, []).append(task)
    ordered: list[Task] = []
    for scope_tasks in by_scope.values():
        if config.benchmark == "webarena":
            scope_tasks = sorted(scope_tasks, key=lambda t: (int(t.task_id.rsplit(".", 1)[-1]), t.seed or 0))
        ordered.extend(scope_tasks)
    return ordered


def commit_points(tasks: list[Task], every: int) -> dict[str, list[Task]]:
    """Task key -> the tasks whose trajectories its commit point induces from (pure).

    A scope's tasks are cut into consecutive batches of `every`; the last task of each batch (and of
    the scope) is the point, and it induces from its batch only (merging keeps what came before).
    """
    by_scope: dict[str, list[Task]] = {}
    for task in tasks:
        by_scope.setdefault(task.scope, []).append(task)
    points: dict[str, list[Task]] = {}
    for scope_tasks in by_scope.values():
        for start in range(0, len(scope_tasks), every):
            batch = scope_tasks[start : start + every]
            points[batch[-1].key] = batch
    return points


def online_message(task_key: str) -> str:
    return f"online after {task_key}"


@contextmanager
def _progress(
    total: int, done: int, console: Console | None, enabled: bool
) -> Iterator[tuple[Progress, Any]]:
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[solved]} solved"),
        TextColumn("{task.fields[stage]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=not enabled, transient=False) as progress:
        bar = progress.add_task("pipeline", total=total, completed=done, solved=0, stage="")
        yield progress, bar


class _Stream:
    """Runs the task stream of one arm against its state (one object per session)."""

    def __init__(self, ctx: PipelineContext, state: PipelineState, *, induce: bool) -> None:
        self.ctx = ctx
        self.state = state
        self.induce = induce
        self.trajectories: dict[str, Trajectory] = {}

    def _load(self, episode_id: str) -> Trajectory:
        from awm.traces.db import trajectory_path

        path = trajectory_path(self.ctx.run_dir, episode_id)
        if path.is_file():
            return load_trajectory(path)
        from awm.traces import open_run

        with open_run(self.ctx.run_dir) as db:
            return db.trajectory(episode_id)

    def trajectory(self, row: TaskState) -> Trajectory:
        if row.task_key not in self.trajectories:
            if row.episode_id is None:
                raise PipelineStageError("solve", f"task {row.task_key} has no recorded episode")
            self.trajectories[row.task_key] = self._load(row.episode_id)
        return self.trajectories[row.task_key]

    def run_task(self, task: Task, position: int, points: dict[str, list[Task]], note: Any) -> TaskState:
        """Bring one task to ``done``, from whatever state the last session left it in."""
        row = self.state.get(task.key) or TaskState(
            task_key=task.key, position=position, scope=task.scope, status="solving"
        )
        if row.status == "done":
            return row
        if row.status == "solving" or row.episode_id is None:
            adopted = self.state.ended_episode(task.key)
            if adopted is not None:
                row.episode_id = adopted
            else:
                note("solve")
                self.state.drop_partial_episodes(task.key)
                row.memory_version_seen = self.ctx.head_version(task.scope)
                row.status = "solving"
                self.state.put(row)
                [trajectory] = solve_stage([task], ctx=self.ctx)
                self.trajectories[task.key] = trajectory
                row.episode_id = trajectory.trajectory_id
            trajectory = self.trajectory(row)
            if trajectory.memory_version is not None:
                row.memory_version_seen = trajectory.memory_version
            row.status = "solved"
            row = self.state.put(row)
        if row.status == "solved":
            note("evaluate")
            [evaluated] = evaluate_stage([self.trajectory(row)], ctx=self.ctx)
            self.trajectories[task.key] = evaluated
            row.status = "evaluated"
            row = self.state.put(row)
        after = self.ctx.head_version(task.scope)
        if self.induce and task.key in points:
            note("induce")
            message = online_message(task.key)
            row.commit_message = message
            self.commit_point(task, points[task.key], message)
            after = self.ctx.head_version(task.scope)
        row.memory_version_after = after
        row.status = "done"
        return self.state.put(row)

    def commit_point(self, task: Task, batch: list[Task], message: str) -> None:
        """Admit, induce and commit from a batch of the scope's trajectories (once, even if resumed)."""
        store = self.ctx.store
        if find_commit(store, task.scope, message) is not None:
            return
        trajectories = []
        for member in batch:
            member_row = self.state.get(member.key)
            if member_row is None or member_row.status not in ("evaluated", "done"):
                raise PipelineStageError("admit", f"task {member.key} has no evaluated episode to admit")
            trajectories.append(self.trajectory(member_row))
        admitted = admit_stage(trajectories, rule=self.ctx.config.admission)
        candidates = induce_stage(admitted.admitted, mode=self.ctx.config.induction, ctx=self.ctx)
        commit_stage(
            store,
            task.scope,
            candidates,
            author=f"online-{self.ctx.config.induction}",
            message=message,
            provenance={
                "run_dir": str(self.ctx.run_dir),
                "task_key": task.key,
                "trajectory_ids": admitted.admitted_ids,
                "admission": self.ctx.config.admission,
            },
        )


def run_stream(
    ctx: PipelineContext,
    state: PipelineState,
    tasks: list[Task],
    *,
    induce: bool,
    console: Console | None = None,
    show_progress: bool = True,
) -> tuple[list[Trajectory], list[VersionRecord]]:
    """Bring every task of the stream to ``done`` in order; online commit points when `induce`."""
    from awm.webarena.report import is_success

    points = commit_points(tasks, ctx.config.induce_every) if induce else {}
    stream = _Stream(ctx, state, induce=induce)
    done = sum(1 for t in tasks if (row := state.get(t.key)) is not None and row.status == "done")
    if console is not None and done:
        console.print(f"resuming {ctx.run_dir}: {done} task(s) done, {len(tasks) - done} to go")
    rows: list[TaskState] = []
    with _progress(len(tasks), done, console, show_progress and done < len(tasks)) as (progress, bar):
        solved = 0
        for position, task in enumerate(tasks):
            was_done = (existing := state.get(task.key)) is not None and existing.status == "done"

            def note(stage: str, key: str = task.key) -> None:
                progress.update(bar, description=key.removeprefix("browsergym/"), stage=stage)

            row = stream.run_task(task, position, points, note)
            rows.append(row)
            solved += int(is_success(stream.trajectory(row)))
            progress.update(bar, advance=0 if was_done else 1, solved=solved, stage="")
    trajectories = [stream.trajectory(row) for row in rows]
    versions = [
        VersionRecord(
            task_key=row.task_key,
            scope=row.scope,
            memory_version_seen=row.memory_version_seen,
            memory_version_after=row.memory_version_after,
        )
        for row in rows
    ]
    return trajectories, versions


# --------------------------------------------------------------------------------------------------
# Driving an arm
# --------------------------------------------------------------------------------------------------


def _usage(
    state: PipelineState, ctx: PipelineContext, base: dict[str, dict[str, Any]]
) -> dict[str, ComponentUsage]:
    """This session's spend added to what earlier sessions of the run spent; saved in the run db."""
    totals = {k: dict(v) for k, v in base.items()}
    for purpose, entry in ctx.meter.by_purpose().items():
        into = totals.setdefault(purpose, {})
        for field in ComponentUsage.model_fields:
            into[field] = into.get(field, 0) + getattr(entry, field)
    state.save_usage(totals)
    return {k: ComponentUsage.model_validate(v) for k, v in totals.items()}


def execute(
    config: PipelineConfig,
    settings: Settings,
    run_dir: Path,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    clients: Clients | None = None,
) -> PipelineResult:
    """Run one arm in `run_dir` (or continue it): the shared shell of online, offline, off and fixed."""
    from awm.assets import configure_runtime_env

    run_dir = Path(run_dir)
    tasks = resolve_stream(config)  # a typo in a task name fails before anything is written
    if config.benchmark == "webarena":
        from awm.webarena.tasks import prepare_webarena_env

        prepare_webarena_env(None)
    configure_runtime_env()
    ctx = PipelineContext.open(config, settings, run_dir, clients=clients)
    state = PipelineState(run_dir)
    state.save_config(config, settings)
    state.set_run("running")
    base_usage = state.load_usage()
    result = PipelineResult(run_dir=run_dir, name=config.name, memory=config.memory)
    status = "failed"
    try:
        if config.memory == "offline":
            from awm.pipeline.offline import induce_offline

            induce_offline(ctx, tasks, console=console)
        trajectories, versions = run_stream(
            ctx,
            state,
            tasks,
            induce=config.memory == "online",
            console=console,
            show_progress=show_progress,
        )
        result.trajectories, result.versions = trajectories, versions
        _write_summary(ctx, trajectories)
        status = "done"
        state.set_run("done")
    except PipelineStageError as exc:
        result.failed_stage, result.error = exc.stage, str(exc)
        state.set_run("failed", failed_stage=exc.stage, error=str(exc))
    finally:
        result.usage = _usage(state, ctx, base_usage)
        state.close()
        ctx.close(status)
    return result


def _write_summary(ctx: PipelineContext, trajectories: list[Trajectory]) -> None:
    from awm.webarena.report import summarize, write_summary

    config = ctx.config
    memory = config.memory if config.memory == "off" else f"{config.memory} ({config.memory_mode})"
    summary = summarize(
        trajectories,
        name=config.name,
        run_dir=ctx.run_dir,
        config_hash=ctx.config_hash,
        model=ctx.clients.model_name()
        or ", ".join(sorted({t.model for t in trajectories if t.model}))
        or "-",
        backend=ctx.settings.llm.resolved_backend() if config.policy == "llm" else "-",
        policy=config.policy,
        memory=memory,
    )
    write_summary(summary, ctx.run_dir)


def run_online(
    config: PipelineConfig,
    settings: Settings,
    run_dir: Path,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    clients: Clients | None = None,
) -> PipelineResult:
    """Induce while solving (see the module docstring); `config.memory` must be ``online``."""
    if config.memory != "online":
        raise ConfigError(f"run_online needs memory = 'online' (the config says '{config.memory}')")
    return execute(config, settings, run_dir, console=console, show_progress=show_progress, clients=clients)


def run_pipeline(
    config: PipelineConfig,
    settings: Settings,
    run_dir: Path,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    clients: Clients | None = None,
) -> PipelineResult:
    """Run an arm by its `memory` kind: off (solve + evaluate), online, offline, fixed (read-only)."""
    return execute(config, settings, run_dir, console=console, show_progress=show_progress, clients=clients)


def resume(
    run_dir: Path,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    clients: Clients | None = None,
) -> PipelineResult:
    """Continue a pipeline run from its database: its stored config, nothing finished done twice."""
    with PipelineState(run_dir, create=False) as state:
        config, settings = state.load_config()
    return execute(config, settings, run_dir, console=console, show_progress=show_progress, clients=clients)
