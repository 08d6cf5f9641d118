"""The online loop's pure parts and its commit point: the task stream, where commits happen, and one commit.

Online, per scope, in a fixed order (MiniWoB: each task's seeds in turn; WebArena: one site's tasks in
id order): solve a task, evaluate it, and after every `induce_every` tasks of the scope (and after its
last) admit the new trajectories, induce, and commit a new memory version; the scope's next task sees
it. The driver (`awm.pipeline.driver`) runs the stream; this module says what the stream is and what a
commit point does.
"""

from __future__ import annotations

from awm.errors import ConfigError
from awm.pipeline.config import PipelineConfig
from awm.pipeline.stages import PipelineContext, admit_stage, commit_stage, induce_stage
from awm.trajectory import Task, Trajectory


def resolve_stream(config: PipelineConfig) -> list[Task]:
    """The ordered stream: grouped by scope (first appearance), each scope's tasks in config order
    (task then seed; WebArena task ids sorted within a site)."""
    from awm.webarena.tasks import resolve_tasks

    if config.benchmark == "mind2web":
        raise ConfigError(
            "benchmark 'mind2web' is solved offline: run it with `awm ablate CONFIG` (arms, report) or "
            "`awm mind2web run`; `awm run` and `awm pipeline` drive the browser benchmarks"
        )
    tasks = resolve_tasks(
        config.benchmark, config.tasks, config.seeds, goal=config.goal, task_files=[str(f) for f in config.task_files]
    )
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


def note_workflow_calls(ctx: PipelineContext, task: Task, trajectory: Trajectory) -> str:
    """Keep the episode's `run_workflow` calls in the memory (its scope's record of which workflows
    hold) and retire the ones that keep breaking (`awm.memory.health`); what was retired, in words,
    or "". Safe to repeat on a resumed run: a call is kept once, a retired workflow is gone from the head.

    Online arms only: an offline or fixed memory is frozen for the whole run."""
    from awm.memory.health import retire_broken, uses_of

    uses = uses_of(trajectory)
    if not uses:
        return ""
    ctx.store.record_uses(task.scope, uses)
    if not ctx.config.retire_window:
        return ""
    version, retired = retire_broken(
        ctx.store, task.scope, window=ctx.config.retire_window,
        provenance={"run_dir": str(ctx.run_dir), "task_key": task.key, "trajectory_id": trajectory.trajectory_id},
    )  # fmt: skip
    return f"retired {', '.join(retired)} in version {version.version}" if version is not None else ""


def commit_point(ctx: PipelineContext, task: Task, batch: list[Trajectory], message: str) -> str:
    """Admit, induce and commit from a batch of the scope's trajectories (once, even if resumed).

    Returns what happened, in words, for the run's state and report. An induction that yields no
    usable workflow is a result: nothing is committed, and the stream goes on.
    """
    from awm.induction.commit import find_commit

    store = ctx.store
    found = find_commit(store, task.scope, message)
    if found is not None:
        return f"committed version {found.version}"
    config = ctx.config
    admitted = admit_stage(batch, rule=config.admission)
    if not admitted.admitted:
        return f"nothing admitted under '{config.admission}'"
    outcome = induce_stage(admitted.admitted, mode=config.induction, ctx=ctx)
    if not outcome.candidates:
        return f"no workflow: {outcome.reason}"
    from awm.pipeline.replay import verify_for_arm

    head = store.head(task.scope)
    known = head.workflows if head is not None else []
    candidates, refused = verify_for_arm(ctx, outcome.candidates, admitted.admitted, known)
    if not candidates:
        return "replay refused every candidate: " + "; ".join(refused)
    version = commit_stage(
        store,
        task.scope,
        candidates,
        author=f"online-{config.induction}",
        message=message,
        provenance={
            "run_dir": str(ctx.run_dir),
            "task_key": task.key,
            "trajectory_ids": admitted.admitted_ids,
            "admission": config.admission,
            "verify": config.verify,
            "replay_refused": refused,
        },
    )
    refusals = f"; replay refused {'; '.join(refused)}" if refused else ""
    if version is None:
        return f"nothing new from {len(candidates)} candidate(s){refusals}"
    return f"committed version {version.version} ({len(version.workflows)} workflows){refusals}"
