from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import tempfile
import time
import traceback
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_connections
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from awm.config import BrowserSettings
from awm.errors import ConfigError
from awm.memory.view import MemoryView
from awm.pipeline.policy import PolicyFactory
from awm.proctree import kill_process_tree
from awm.trajectory import Step, Task, Trajectory, Verdict
from awm.webarena.env import BrowserSession
from awm.webarena.harness import FinalCallback, HarnessConfig, StepCallback, StepCapture, run_episode

ParallelBackend = Literal["local", "ray"]

RAY_INSTALL_HINT = "pip install 'awm[ray]'"
RAY_OBJECT_STORE_BYTES = 200 * 1024 * 1024  # trajectories are small; Ray's default would take GBs
DEFAULT_KILL_GRACE_S = 30.0  # on top of the episode timeout: browser start, the last step's model call
WORKER_START_TIMEOUT_S = 180.0  # a worker that cannot even start its browser is a broken set-up


class EpisodeJob(BaseModel):
    """One episode to run: the task, the memory view chosen for it, and its trajectory id."""

    index: int
    task: Task
    view: MemoryView | None = None
    trajectory_id: str


def new_trajectory_id(task: Task) -> str:
    """Readable and unique: the task key plus a random suffix (files are named after it)."""
    return f"{task.key.removeprefix('browsergym/')}-{uuid.uuid4().hex[:8]}"


def job_for(index: int, task: Task, view: MemoryView | None = None) -> EpisodeJob:
    return EpisodeJob(index=index, task=task, view=view, trajectory_id=new_trajectory_id(task))


class JobSource(Protocol):
    """The driver's scheduler: the jobs that may start now (each job once), called whenever the pool
    has a free worker or an episode has ended."""

    def ready(self) -> list[EpisodeJob]: ...


class AllJobs:
    """Every job ready at once (memory off, fixed or offline: no episode waits for another)."""

    def __init__(self, jobs: list[EpisodeJob]) -> None:
        self._jobs = list(jobs)

    def ready(self) -> list[EpisodeJob]:
        jobs, self._jobs = self._jobs, []
        return jobs


# Called in the driver as each episode ends: the job, the trajectory, one capture (screenshot and page
# HTML) per step (None where nothing was taken, or where the step was already handed over live), and
# after them, when one was taken, the final page's (`StepCapture.final`).
ResultCallback = Callable[[EpisodeJob, Trajectory, list[StepCapture | None]], None]
# In-process runs only: called as each step happens (for live recording).
LiveStepCallback = Callable[[EpisodeJob, Trajectory, Step, StepCapture | None], None]


class PoolConfig(BaseModel):
    """How episodes fan out: worker count, backend, where Ray is, how long past its timeout a worker lives."""

    workers: int = 1
    backend: ParallelBackend = "local"
    ray_address: str | None = None
    kill_grace_s: float = DEFAULT_KILL_GRACE_S


def run_jobs(
    source: JobSource,
    *,
    policy_factory: PolicyFactory,
    env_config: BrowserSettings,
    harness_config: HarnessConfig,
    pool: PoolConfig | None = None,
    on_result: ResultCallback,
    on_step: LiveStepCallback | None = None,
) -> None:
    """Run every job the source hands out, `pool.workers` at a time, until it has no more.

    `policy_factory` must pickle for workers > 1 or Ray (a `PolicyFactory` does; with the local model,
    its server is started here once and the workers share it). A worker's bug (anything but a hung or
    crashed worker) stops the run with the worker's traceback.
    """
    pool = pool or PoolConfig()
    deadline = float(harness_config.episode_timeout_s) + pool.kill_grace_s
    if pool.workers < 1:
        raise ConfigError(f"workers must be at least 1 (got {pool.workers})")
    if pool.backend not in ("local", "ray"):
        raise ConfigError(f"parallel backend must be 'local' or 'ray' (got '{pool.backend}')")
    if harness_config.episode_timeout_s <= 0:
        raise ConfigError(f"episode_timeout_s must be positive (got {harness_config.episode_timeout_s})")
    if pool.backend == "ray":
        ray = import_ray()  # before any browser or model starts: a missing extra fails fast
        _run_ray(
            ray, source, policy_factory.for_workers(), env_config, harness_config, pool, deadline, on_result
        )
    elif pool.workers == 1:
        _run_in_process(source, policy_factory, env_config, harness_config, on_result, on_step)
    else:
        _run_local_pool(
            source,
            policy_factory.for_workers(),
            env_config,
            harness_config,
            pool.workers,
            deadline,
            on_result,
        )


def run_tasks_parallel(
    tasks: list[Task],
    *,
    policy_factory: PolicyFactory,
    env_config: BrowserSettings | None = None,
    harness_config: HarnessConfig | None = None,
    pool: PoolConfig | None = None,
) -> list[Trajectory]:
    """Solve `tasks` (memory off) and return their trajectories in task order (benchmarks, tests)."""
    results: dict[int, Trajectory] = {}
    run_jobs(
        AllJobs([job_for(i, t) for i, t in enumerate(tasks)]),
        policy_factory=policy_factory,
        env_config=env_config or BrowserSettings(),
        harness_config=harness_config or HarnessConfig(),
        pool=pool,
        on_result=lambda job, trajectory, _captures: results.__setitem__(job.index, trajectory),
    )
    missing = [tasks[i].key for i in range(len(tasks)) if i not in results]
    if missing:  # every backend fills each slot or raises; this guards the invariant
        raise RuntimeError(f"no trajectory came back for {', '.join(missing)}")
    return [results[i] for i in range(len(tasks))]


def solve_job(
    session: BrowserSession,
    job: EpisodeJob,
    factory: PolicyFactory,
    harness_config: HarnessConfig,
    on_step: StepCallback | None = None,
    on_final: FinalCallback | None = None,
) -> Trajectory:
    """One episode of a job, in whichever process holds the browser."""
    policy = factory(job.task, job.view)
    trajectory = run_episode(
        session, policy, job.task, harness_config, on_step=on_step, on_final=on_final,
        trajectory_id=job.trajectory_id,
    )  # fmt: skip
    trajectory.meta["worker_pid"] = os.getpid()  # which process solved it (the driver's, or a worker's)
    return trajectory


def killed_trajectory(job: EpisodeJob, *, seconds: float, reason: str, backend: str) -> Trajectory:
    """The record of an episode whose worker was killed or died: `env_error`, reward 0, the reason."""
    view = job.view
    return Trajectory(
        trajectory_id=job.trajectory_id,
        task=job.task,
        steps=[Step(index=0, outcome="env_error", error=reason)],
        end="env_error",
        verdict=Verdict(reward=0.0),
        seconds=round(seconds, 3),
        memory_scope=view.scope if view is not None else None,
        memory_version=view.version if view is not None else None,
        meta={"worker_killed": reason, "parallel_backend": backend},
    )


class _Captures:
    """The step callback that keeps each step's capture (screenshot, page HTML) by step index, and the
    list of them in the trajectory's step order, the final page's last (`ResultCallback`). By index, not
    by call order: a `run_workflow` step is recorded after the sub-steps it called, which come after it
    in the trajectory."""

    def __init__(self) -> None:
        self.by_index: dict[int, StepCapture | None] = {}
        self.final: StepCapture | None = None

    def __call__(self, _trajectory: Trajectory, step: Step, capture: StepCapture | None) -> None:
        self.by_index[step.index] = capture

    def keep_final(self, _trajectory: Trajectory, capture: StepCapture) -> None:
        self.final = capture

    def aligned(self, trajectory: Trajectory) -> list[StepCapture | None]:
        steps = [self.by_index.get(step.index) for step in trajectory.steps]
        return steps if self.final is None else [*steps, self.final]


# --------------------------------------------------------------------------------------------------
# In this process (one worker)
# --------------------------------------------------------------------------------------------------


def _run_in_process(
    source: JobSource,
    factory: PolicyFactory,
    env_config: BrowserSettings,
    harness_config: HarnessConfig,
    on_result: ResultCallback,
    on_step: LiveStepCallback | None,
) -> None:
    queue: deque[EpisodeJob] = deque(source.ready())
    if not queue:
        return
    with BrowserSession(env_config) as session:
        while queue:
            job = queue.popleft()
            collect = _Captures()
            step_callback: StepCallback = collect
            if on_step is not None:  # each step (and its capture) goes to the driver as it happens

                def live(
                    trajectory: Trajectory, step: Step, capture: StepCapture | None, job: EpisodeJob = job
                ) -> None:
                    on_step(job, trajectory, step, capture)

                step_callback = live  # `collect` keeps only the final page: the steps went over live
            trajectory = solve_job(session, job, factory, harness_config, step_callback, collect.keep_final)
            on_result(job, trajectory, collect.aligned(trajectory))
            queue.extend(source.ready())


# --------------------------------------------------------------------------------------------------
# Local worker processes
# --------------------------------------------------------------------------------------------------


def worker_site_instance(index: int) -> str:
    """The arena sites' copy worker `index` uses (`awm.sites.site.Site.instance`): its own database and
    port, so one worker's reset never wipes another's episode. A replacement worker takes the same index
    and so the same copy (a reset restores it)."""
    return f"worker{index}"


def _local_worker_main(
    conn: Connection, env_config: BrowserSettings, factory: PolicyFactory, harness_config: HarnessConfig, index: int
) -> None:
    """A worker: one browser for its life; answers each job (as JSON) with the trajectory JSON."""
    from awm.assets import configure_runtime_env
    from awm.sites.site import INSTANCE_ENV

    with contextlib.suppress(OSError):
        os.setsid()  # its own process group, so the driver can kill it with everything it started
    os.environ[INSTANCE_ENV] = worker_site_instance(index)  # read by each arena task this process resets
    configure_runtime_env()
    session = BrowserSession(env_config)
    conn.send(("ready", None, None))
    try:
        while True:
            message = conn.recv()
            if message is None:
                return
            try:
                collect = _Captures()
                job = EpisodeJob.model_validate_json(message)
                trajectory = solve_job(session, job, factory, harness_config, collect, collect.keep_final)
                conn.send(("done", trajectory.to_json(), collect.aligned(trajectory)))
            except Exception:  # a bug: the driver stops the run and shows this traceback
                conn.send(("bug", traceback.format_exc(), None))
                return
    except (EOFError, KeyboardInterrupt):
        return
    finally:
        with contextlib.suppress(Exception):
            session.close()


class _LocalWorker:
    """The driver's handle on one worker process: its pipe, and the job it is on since when."""

    def __init__(
        self, context: Any, env_config: BrowserSettings, factory: PolicyFactory, harness: HarnessConfig, index: int
    ) -> None:
        self.index = index
        self.conn, child = context.Pipe(duplex=True)
        self.process = context.Process(
            target=_local_worker_main, args=(child, env_config, factory, harness, index), daemon=True
        )
        self.process.start()
        child.close()
        self.ready = False
        self.started_at = time.monotonic()
        self.job: EpisodeJob | None = None
        self.busy_since = 0.0

    def give(self, job: EpisodeJob) -> None:
        self.conn.send(job.model_dump_json())
        self.job, self.busy_since = job, time.monotonic()

    def stop(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(None)
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.kill()

    def kill(self) -> None:
        if self.process.pid is not None:
            kill_process_tree(self.process.pid)
        self.process.join(timeout=5)
        self.conn.close()


def _run_local_pool(
    source: JobSource,
    factory: PolicyFactory,
    env_config: BrowserSettings,
    harness_config: HarnessConfig,
    workers: int,
    deadline_s: float,
    on_result: ResultCallback,
) -> None:
    """Hand ready jobs one at a time to free workers; kill and replace a worker past its deadline."""
    context = multiprocessing.get_context("spawn")

    def spawn(index: int) -> _LocalWorker:
        return _LocalWorker(context, env_config, factory, harness_config, index)

    queue: deque[EpisodeJob] = deque(source.ready())
    if not queue:
        return
    pool = [spawn(i) for i in range(1, min(workers, len(queue)) + 1)]  # never more than can run at once
    try:
        while True:
            for worker in pool:
                if worker.ready and worker.job is None and queue:
                    worker.give(queue.popleft())
            if not queue and all(w.job is None for w in pool):
                queue.extend(source.ready())
                if not queue:
                    return
                continue
            now = time.monotonic()
            waits = [
                (w.busy_since + deadline_s) - now
                if w.job is not None
                else (w.started_at + WORKER_START_TIMEOUT_S) - now
                for w in pool
                if w.job is not None or not w.ready
            ]
            ready = wait_connections([w.conn for w in pool], timeout=max(0.05, min(waits, default=1.0)))
            for worker in list(pool):
                if worker.conn in ready:
                    try:
                        kind, payload, captures = worker.conn.recv()
                    except (EOFError, OSError):
                        _replace(pool, worker, spawn, on_result, "the worker process died")
                        queue.extend(source.ready())
                        continue
                    if kind == "ready":
                        worker.ready = True
                    elif kind == "bug":
                        key = worker.job.task.key if worker.job is not None else "?"
                        raise RuntimeError(f"worker failed on {key}:\n{payload}")
                    else:
                        job, worker.job = worker.job, None
                        assert job is not None
                        on_result(job, Trajectory.model_validate_json(payload), list(captures))
                        queue.extend(source.ready())
                elif worker.job is not None and time.monotonic() - worker.busy_since > deadline_s:
                    reason = f"episode exceeded the timeout ({deadline_s:.0f} s with grace); worker killed"
                    _replace(pool, worker, spawn, on_result, reason)
                    queue.extend(source.ready())
                elif not worker.ready and time.monotonic() - worker.started_at > WORKER_START_TIMEOUT_S:
                    raise RuntimeError(
                        f"a worker did not start its browser within {WORKER_START_TIMEOUT_S:.0f} s"
                    )
    finally:
        for worker in pool:
            worker.stop()
        stop_worker_sites([worker_site_instance(w.index) for w in pool])


def stop_worker_sites(instances: list[str]) -> None:
    """Stop the arena servers the workers' own copies run (a worker leaves them up between episodes)."""
    from awm.sites import lifecycle
    from awm.sites.registry import get_site, site_names

    for instance in instances:
        for name in site_names(None):
            lifecycle.down(get_site(name, instance=instance))


def _replace(
    pool: list[_LocalWorker],
    worker: _LocalWorker,
    spawn: Callable[[int], _LocalWorker],
    on_result: ResultCallback,
    reason: str,
) -> None:
    """Kill `worker`, record its episode (if any) as env_error, start a fresh one."""
    job, since = worker.job, worker.busy_since
    worker.kill()
    pool[pool.index(worker)] = spawn(worker.index)
    if job is None:
        if not worker.ready:
            raise RuntimeError("a worker process died while starting its browser")
        return
    on_result(
        job, killed_trajectory(job, seconds=time.monotonic() - since, reason=reason, backend="local"), [None]
    )


# --------------------------------------------------------------------------------------------------
# Ray
# --------------------------------------------------------------------------------------------------


def import_ray() -> Any:
    """Ray, or a `ConfigError` saying how to install the optional extra (the CLI exits 2)."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            f"the ray backend needs Ray, an optional extra: {RAY_INSTALL_HINT} "
            '(or use the local backend: parallel_backend = "local" / --backend local)'
        ) from None
    return ray


def ray_runtime_env() -> dict[str, Any]:
    """Make the driver's own import paths (the working copy, a test folder) visible to Ray workers,
    as a spawned local worker sees them; the interpreter's standard and site paths are left out."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    paths = [
        str(Path(p or os.getcwd()).resolve())
        for p in sys.path
        if "site-packages" not in p and not any(p.startswith(x) for x in prefixes if x)
    ]
    paths = [p for p in dict.fromkeys(paths) if Path(p).is_dir()]
    return {"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}} if paths else {}


@contextlib.contextmanager
def ray_session(workers: int, address: str | None = None) -> Iterator[Any]:
    """Ray for one run: an existing cluster at `address`, a Ray already initialised here, or a small
    local one (num_cpus = workers, object store capped, no dashboard, own temp dir), shut down after."""
    ray = import_ray()
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if ray.is_initialized():
        yield ray
        return
    if address:
        ray.init(address=address, runtime_env=ray_runtime_env(), log_to_driver=False)
    else:
        temp_dir = Path(tempfile.gettempdir()) / f"awm-ray-{os.getuid() if hasattr(os, 'getuid') else 0}"
        temp_dir.mkdir(parents=True, exist_ok=True)
        ray.init(
            num_cpus=workers,
            object_store_memory=RAY_OBJECT_STORE_BYTES,
            include_dashboard=False,
            _temp_dir=str(temp_dir),  # short: Ray's socket paths must fit in 107 bytes
            runtime_env=ray_runtime_env(),
            log_to_driver=False,
        )
    try:
        yield ray
    finally:
        ray.shutdown()


# A Ray worker process keeps its browser between the tasks it runs (a fresh Chromium costs seconds).
# Module state on purpose, and only ever set inside Ray worker processes.
_RAY_WORKER: dict[str, Any] = {}


def _ray_solve(
    env_json: str, harness_json: str, factory: PolicyFactory, job_json: str, slot: int
) -> tuple[str, list[StepCapture | None]]:
    """The Ray task: solve one job in this worker's browser; trajectory JSON and step captures. `slot` is
    the arena sites' copy it uses (`worker_site_instance`): the driver never runs two tasks of one slot at
    once, whichever Ray process they land in."""
    from awm.assets import configure_runtime_env
    from awm.sites.site import INSTANCE_ENV

    os.environ[INSTANCE_ENV] = worker_site_instance(slot)
    configure_runtime_env()
    if _RAY_WORKER.get("env_json") != env_json:
        if "session" in _RAY_WORKER:
            _RAY_WORKER.pop("session").close()
        _RAY_WORKER.update(
            env_json=env_json, session=BrowserSession(BrowserSettings.model_validate_json(env_json))
        )
    collect = _Captures()
    job = EpisodeJob.model_validate_json(job_json)
    trajectory = solve_job(
        _RAY_WORKER["session"], job, factory, HarnessConfig.model_validate_json(harness_json), collect,
        collect.keep_final,
    )  # fmt: skip
    return trajectory.to_json(), collect.aligned(trajectory)


def _run_ray(
    ray: Any,
    source: JobSource,
    factory: PolicyFactory,
    env_config: BrowserSettings,
    harness_config: HarnessConfig,
    pool: PoolConfig,
    deadline_s: float,
    on_result: ResultCallback,
) -> None:
    """At most `workers` Ray tasks in flight; `ray.wait` with a timeout, `ray.cancel(force=True)` past it."""
    queue: deque[EpisodeJob] = deque(source.ready())
    if not queue:
        return
    with ray_session(pool.workers, pool.ray_address) as ray:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_solve)
        env_json, harness_json = env_config.model_dump_json(), harness_config.model_dump_json()
        factory_ref = ray.put(factory)
        running: dict[Any, tuple[EpisodeJob, float, int]] = {}
        try:
            _ray_loop(ray, remote, source, queue, running, env_json, harness_json, factory_ref, pool, deadline_s, on_result)
        finally:
            stop_worker_sites([worker_site_instance(slot) for slot in range(1, pool.workers + 1)])


def _ray_loop(
    ray: Any,
    remote: Any,
    source: JobSource,
    queue: deque[EpisodeJob],
    running: dict[Any, tuple[EpisodeJob, float, int]],
    env_json: str,
    harness_json: str,
    factory_ref: Any,
    pool: PoolConfig,
    deadline_s: float,
    on_result: ResultCallback,
) -> None:
    """Keep at most `pool.workers` tasks in flight, each on a free slot, until nothing is left."""
    while queue or running:
        while queue and len(running) < pool.workers:
            job = queue.popleft()
            slot = min(set(range(1, pool.workers + 1)) - {s for _, _, s in running.values()})
            ref = remote.remote(env_json, harness_json, factory_ref, job.model_dump_json(), slot)
            running[ref] = (job, time.monotonic(), slot)
        now = time.monotonic()
        first_deadline = min(since + deadline_s for _, since, _ in running.values()) - now
        done, _ = ray.wait(list(running), num_returns=1, timeout=max(0.05, first_deadline))
        for ref in done:
            job, since, _ = running.pop(ref)
            try:
                text, captures = ray.get(ref)  # a worker's bug stops the run, with its traceback
            except ray.exceptions.WorkerCrashedError as exc:  # the process died, not a bug of ours
                reason = f"the Ray worker process died: {str(exc).splitlines()[0]}"
                trajectory = killed_trajectory(
                    job, seconds=time.monotonic() - since, reason=reason, backend="ray"
                )
                on_result(job, trajectory, [None])
            else:
                on_result(job, Trajectory.model_validate_json(text), list(captures))
            queue.extend(source.ready())
        now = time.monotonic()
        for ref, (job, since, _) in list(running.items()):
            if now - since > deadline_s:
                ray.cancel(ref, force=True)
                running.pop(ref)
                reason = (
                    f"episode exceeded the timeout ({deadline_s:.0f} s with grace); Ray task cancelled"
                )
                on_result(
                    job, killed_trajectory(job, seconds=now - since, reason=reason, backend="ray"), [None]
                )
                queue.extend(source.ready())
        if not queue and not running:
            queue.extend(source.ready())
