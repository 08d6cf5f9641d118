"""The one driver: runs an arm's task stream into a run folder, with memory, judging, workers and resume.

`awm run` (memory off or a fixed scope), `awm pipeline ...` and every arm of `awm ablate` come here.
Per arm: resolve the stream (`online.resolve_stream`), build offline memory first if the arm says so
(`offline.induce_from_sources`), then hand the worker pool (`parallel.run_jobs`) the jobs that are ready.
Memory-off, fixed and offline arms fan out fully; an online arm runs its scopes in parallel and each
scope's stream in order: a scope's next task becomes ready only after the commit point of the task
before it, so it sees the version committed after the previous one, whatever the worker count.

Only this process writes the run database and memory: a job carries the memory view resolved here,
before the episode, and comes back as a trajectory. Every stage's result is in the run database before
the next stage starts, and each is safe to repeat, so a run survives a kill -9: a task's state goes
``solving -> solved -> evaluated -> done``; on resume a ``done`` task is skipped, an episode that ended
is adopted (not re-run), an episode cut short is deleted and re-run from its start, and a commit is
found by its message instead of being made twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from rich.console import Console

from awm.config import Settings
from awm.evaluation.success import is_success
from awm.llm.usage import PurposeUsage
from awm.pipeline.config import PipelineConfig
from awm.pipeline.online import (
    commit_point,
    commit_points,
    note_workflow_calls,
    online_message,
    resolve_stream,
)
from awm.pipeline.parallel import EpisodeJob, PoolConfig, job_for, run_jobs
from awm.pipeline.progress import ArmBar, progress_board
from awm.pipeline.stages import Clients, PipelineContext, PipelineStageError, evaluate_stage
from awm.pipeline.state import PipelineState, TaskState
from awm.trajectory import Step, Task, Trajectory, load_trajectory
from awm.webarena.harness import StepCapture


class VersionRecord(BaseModel):
    """Which memory version a task's episode was shown, the scope's head after its commit point, and
    what that commit point's induction did."""

    task_key: str
    scope: str
    memory_version_seen: int | None = None
    memory_version_after: int | None = None
    induction: str = ""


class PipelineResult(BaseModel):
    """What an arm produced: its trajectories in stream order, the memory versions, the spend per
    component (actor, judge, induction; summed over the sessions of a resumed run).

    `failed_stage` and `error` are set when a stage stopped the arm (the error names the task)."""

    run_dir: Path
    name: str = ""
    memory: str = ""
    trajectories: list[Trajectory] = Field(default_factory=list)
    versions: list[VersionRecord] = Field(default_factory=list)
    usage: dict[str, PurposeUsage] = Field(default_factory=dict)
    failed_stage: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.failed_stage is None

    def success_rate(self) -> float | None:
        if not self.trajectories:
            return None
        return sum(is_success(t) for t in self.trajectories) / len(self.trajectories)


class _Stream:
    """One arm's stream against its state: which jobs are ready, and what happens when one ends."""

    def __init__(
        self, ctx: PipelineContext, state: PipelineState, tasks: list[Task], *, induce: bool, bar: ArmBar
    ) -> None:
        self.ctx = ctx
        self.state = state
        self.tasks = tasks
        self.induce = induce
        self.bar = bar
        self.points = commit_points(tasks, ctx.config.induce_every) if induce else {}
        self.position = {t.key: i for i, t in enumerate(tasks)}
        self.by_scope: dict[str, list[Task]] = {}
        for task in tasks:
            self.by_scope.setdefault(task.scope, []).append(task)
        self.in_flight: set[str] = set()
        self.trajectories: dict[str, Trajectory] = {}
        self.live: set[str] = set()  # episodes whose steps were recorded as they happened

    # -- state ----------------------------------------------------------------------------------

    def _row(self, task: Task) -> TaskState:
        return self.state.get(task.key) or TaskState(
            task_key=task.key, position=self.position[task.key], scope=task.scope, status="solving"
        )

    def done(self, task: Task) -> bool:
        row = self.state.get(task.key)
        return row is not None and row.status == "done"

    def trajectory(self, row: TaskState) -> Trajectory:
        if row.task_key not in self.trajectories:
            if row.episode_id is None:
                raise PipelineStageError("solve", f"task {row.task_key} has no recorded episode")
            self.trajectories[row.task_key] = self._load(row.episode_id)
        return self.trajectories[row.task_key]

    def _load(self, episode_id: str) -> Trajectory:
        from awm.traces.db import trajectory_path

        path = trajectory_path(self.ctx.run_dir, episode_id)
        if path.is_file():
            return load_trajectory(path)
        from awm.traces import open_run

        with open_run(self.ctx.run_dir) as db:
            return db.trajectory(episode_id)

    # -- scheduling -----------------------------------------------------------------------------

    def _candidates(self) -> list[Task]:
        """Tasks that may start now: every pending one (no induction), or the first pending task of
        each scope whose previous task is done (online)."""
        out = []
        for scope_tasks in self.by_scope.values():
            for task in scope_tasks:
                if self.done(task):
                    continue
                if task.key not in self.in_flight:
                    out.append(task)
                if self.induce:
                    break
        return out

    def ready(self) -> list[EpisodeJob]:
        """The jobs to start now; tasks whose episode already ended (a resumed run) finish here."""
        jobs: list[EpisodeJob] = []
        progressed = True
        while progressed:
            progressed = False
            for task in self._candidates():
                row = self._row(task)
                if row.status in ("solved", "evaluated") and row.episode_id is not None:
                    self.finish(task, row)
                    progressed = True
                    continue
                adopted = self.state.ended_episode(task.key)
                if adopted is not None:
                    row.episode_id, row.status = adopted, "solved"
                    self.finish(task, self.state.put(row))
                    progressed = True
                    continue
                self.state.drop_partial_episodes(task.key)
                view = self.ctx.view_for(task)
                row.memory_version_seen = view.version if view is not None else None
                row.status, row.episode_id = "solving", None
                self.state.put(row)
                self.in_flight.add(task.key)
                jobs.append(job_for(self.position[task.key], task, view))
        return jobs

    # -- results --------------------------------------------------------------------------------

    def on_step(
        self, job: EpisodeJob, trajectory: Trajectory, step: Step, capture: StepCapture | None
    ) -> None:
        """In-process runs: each step is written as it happens."""
        if trajectory.trajectory_id not in self.live:
            self.live.add(trajectory.trajectory_id)
            self.ctx.recorder.start_episode(trajectory)
            self.bar.note("solve", job.task.key)
        self.ctx.recorder.record_step(trajectory, step, capture)

    def on_result(self, job: EpisodeJob, trajectory: Trajectory, captures: list[StepCapture | None]) -> None:
        """An episode ended (any worker): record it, then evaluate and commit as the arm says."""
        recorder = self.ctx.recorder
        if trajectory.trajectory_id not in self.live:
            recorder.start_episode(trajectory)
            for step, capture in zip(trajectory.steps, captures, strict=False):
                recorder.record_step(trajectory, step, capture)
        for final in captures[len(trajectory.steps) :]:  # the page after the last action, when taken
            if final is not None:
                recorder.record_final(trajectory, final)
        recorder.end_episode(trajectory)
        self.in_flight.discard(job.task.key)
        self.trajectories[job.task.key] = trajectory
        row = self._row(job.task)
        row.episode_id, row.status = trajectory.trajectory_id, "solved"
        self.finish(job.task, self.state.put(row))

    def finish(self, task: Task, row: TaskState) -> None:
        """Bring a solved task to ``done``: evaluate, then its commit point (online)."""
        try:
            self._finish(task, row)
        except PipelineStageError as exc:
            raise PipelineStageError(exc.stage, f"task {task.key}: {exc.cause}") from exc

    def _finish(self, task: Task, row: TaskState) -> None:
        trajectory = self.trajectory(row)
        if trajectory.memory_version is not None or row.memory_version_seen is None:
            row.memory_version_seen = trajectory.memory_version
        if row.status == "solved":
            self.bar.note("evaluate", task.key)
            [evaluated] = evaluate_stage([trajectory], ctx=self.ctx)
            self.trajectories[task.key] = evaluated
            row.status = "evaluated"
            row = self.state.put(row)
        retired = note_workflow_calls(self.ctx, task, self.trajectories[task.key]) if self.induce else ""
        if self.induce and task.key in self.points:
            self.bar.note("induce", task.key)
            message = online_message(task.key)
            row.commit_message = message
            batch = [self.trajectory(self._evaluated_row(member)) for member in self.points[task.key]]
            row.induction = commit_point(self.ctx, task, batch, message)
        if retired:
            row.induction = "; ".join(part for part in (retired, row.induction) if part)
        row.memory_version_after = self.ctx.head_version(task.scope) if self.ctx.has_memory else None
        row.status = "done"
        self.state.put(row)
        self.bar.advance(is_success(self.trajectories[task.key]))

    def _evaluated_row(self, task: Task) -> TaskState:
        row = self.state.get(task.key)
        if row is None or row.status not in ("evaluated", "done"):
            raise PipelineStageError("admit", f"task {task.key} has no evaluated episode to admit")
        return row

    def results(self) -> tuple[list[Trajectory], list[VersionRecord]]:
        rows = [self.state.get(t.key) for t in self.tasks]
        done = [r for r in rows if r is not None and r.status == "done"]
        trajectories = [self.trajectory(r) for r in done]
        versions = [
            VersionRecord(
                task_key=r.task_key,
                scope=r.scope,
                memory_version_seen=r.memory_version_seen,
                memory_version_after=r.memory_version_after,
                induction=r.induction,
            )
            for r in done
        ]
        return trajectories, versions


def _usage(
    state: PipelineState, ctx: PipelineContext, base: dict[str, dict[str, Any]]
) -> dict[str, PurposeUsage]:
    """This session's spend added to what earlier sessions of the run spent; saved in the run db."""
    totals = {k: dict(v) for k, v in base.items()}
    for purpose, entry in ctx.meter.by_purpose().items():
        into = totals.setdefault(purpose, {})
        for field in PurposeUsage.model_fields:
            into[field] = into.get(field, 0) + getattr(entry, field)
    state.save_usage(totals)
    return {k: PurposeUsage.model_validate(v) for k, v in totals.items()}


def run_arm(
    config: PipelineConfig,
    settings: Settings,
    run_dir: Path,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    clients: Clients | None = None,
    bar: ArmBar | None = None,
) -> PipelineResult:
    """Run one arm in `run_dir` (or continue it): memory off, online, offline or fixed."""
    if bar is None:
        with progress_board(console, show_progress) as board:
            return run_arm(config, settings, run_dir, console=console, clients=clients, bar=board.bar(config.name))
    from awm.assets import configure_runtime_env
    from awm.pipeline.policy import check_policy_tasks
    from awm.provenance import write_provenance

    run_dir = Path(run_dir)
    tasks = resolve_stream(config)  # a typo in a task name fails before anything is written
    check_policy_tasks(config.policy, tasks)
    if config.benchmark == "webarena":
        from awm.webarena.tasks import prepare_webarena_env

        prepare_webarena_env(None)
    if config.parallel_backend == "ray":
        from awm.pipeline.parallel import import_ray

        import_ray()  # a missing extra fails before any browser or model starts
    configure_runtime_env()
    ctx = PipelineContext.open(config, settings, run_dir, clients=clients)
    state = PipelineState(run_dir)
    state.save_config(config, settings)
    state.set_run("running")
    write_provenance(run_dir)
    base_usage = state.load_usage()
    result = PipelineResult(run_dir=run_dir, name=config.name, memory=config.memory)
    stream = _Stream(ctx, state, tasks, induce=config.memory == "online", bar=bar)
    done = sum(stream.done(t) for t in tasks)
    if console is not None and done:
        console.print(f"resuming {run_dir}: {done} task(s) done, {len(tasks) - done} to go")
    status = "failed"
    try:
        if config.memory in ("offline", "online") and config.offline_from:  # offline then online too
            from awm.pipeline.offline import induce_from_sources

            induce_from_sources(ctx, tasks, console=console)
        solved = sum(
            is_success(stream.trajectory(row))
            for t in tasks
            if (row := state.get(t.key)) is not None and row.status == "done"
        )
        bar.start(total=len(tasks), done=done, solved=solved)
        run_jobs(
            stream,
            policy_factory=ctx.policy_factory(),
            env_config=ctx.env_config,
            harness_config=ctx.harness_config,
            pool=PoolConfig(
                workers=config.workers, backend=config.parallel_backend, ray_address=config.ray_address
            ),
            on_result=stream.on_result,
            on_step=stream.on_step,
        )
        result.trajectories, result.versions = stream.results()
        _write_summary(ctx, result.trajectories)
        status = "done"
        state.set_run("done")
    except PipelineStageError as exc:
        result.failed_stage, result.error = exc.stage, str(exc)
        result.trajectories, result.versions = stream.results()
        state.set_run("failed", failed_stage=exc.stage, error=str(exc))
    finally:
        result.usage = _usage(state, ctx, base_usage)
        state.close()
        ctx.close(status)
    return result


def _write_summary(ctx: PipelineContext, trajectories: list[Trajectory]) -> None:
    from awm.pipeline.summary import summarize, write_summary

    config = ctx.config
    if config.memory == "off":
        memory = "off"
    elif config.memory_scope:
        memory = f"{config.memory_scope} ({config.memory_mode})"
    else:
        memory = f"{config.memory} ({config.memory_mode})"
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


def resume(
    run_dir: Path,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    clients: Clients | None = None,
) -> PipelineResult:
    """Continue a run from its database: its stored config, nothing finished done twice."""
    with PipelineState(run_dir, create=False) as state:
        config, settings = state.load_config()
    return run_arm(config, settings, run_dir, console=console, show_progress=show_progress, clients=clients)
