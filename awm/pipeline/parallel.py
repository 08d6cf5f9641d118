"""Solve many episodes at once: local worker processes or Ray tasks, each with its own browser.

Why this module: the pipeline driver alone writes memory and the run database, so workers get a
task and give back a finished trajectory (as JSON, plus its screenshots), nothing else. Both
backends enforce a hard per-episode deadline on top of the harness's own checks (which run between
steps only): a worker still busy `episode_timeout_s + kill_grace_s` after it got its task is killed
with its browser, and its episode is recorded as `env_error`, so one hung page or model call can
never hang a run.

- `local`: spawned processes, each keeping one Chromium for its life; a killed worker is replaced.
  With one worker the episodes run in this process (no spawn cost, no hard kill: the harness's
  timeout between steps and the browser watchdog still apply).
- `ray`: Ray tasks on a local Ray (started here, small object store, no dashboard) or an existing
  cluster (`ray_address`). A task's process keeps its browser for the next task it runs; an overdue
  task is cancelled with `ray.cancel(force=True)`, which kills its process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_connections
from pathlib import Path
from typing import Any, Literal

from awm.errors import ConfigError
from awm.trajectory import Step, Task, Trajectory, Verdict
from awm.webarena.env import BrowserEnvConfig, BrowserSession
from awm.webarena.harness import HarnessConfig
from awm.webarena.runner import PolicyFactory, _share_local_server, solve

ParallelBackend = Literal["local", "ray"]
# Called in the driver as each episode ends (in completion order): index in `tasks`, trajectory,
# one screenshot per step (None where none was taken).
ResultCallback = Callable[[int, Trajectory, list[bytes | None]], None]

RAY_INSTALL_HINT = "pip install 'awm[ray]'"
RAY_OBJECT_STORE_BYTES = 200 * 1024 * 1024  # trajectories are small; Ray's default would take GBs
DEFAULT_KILL_GRACE_S = 30.0  # on top of the episode timeout: browser start, the last step's model call
WORKER_START_TIMEOUT_S = 180.0  # a worker that cannot even start its browser is a broken set-up


def run_episodes_parallel(
    tasks: list[Task],
    *,
    policy_factory: PolicyFactory,
    env_config: BrowserEnvConfig | None = None,
    harness_config: HarnessConfig | None = None,
    workers: int = 1,
    backend: ParallelBackend = "local",
    ray_address: str | None = None,
    episode_timeout_s: float | None = None,
    kill_grace_s: float = DEFAULT_KILL_GRACE_S,
    on_result: ResultCallback | None = None,
) -> list[Trajectory]:
    """Solve every task, `workers` at a time; returns the trajectories in task order.

    `policy_factory` must pickle for workers > 1 or Ray (an `AgentFactory` does; with the local
    model, its server is started here once and the workers share it). `episode_timeout_s` defaults
    to the harness's. A worker's bug (anything but a hung or crashed worker) stops the run with the
    worker's traceback.
    """
    env_config = env_config or BrowserEnvConfig()
    harness_config = harness_config or HarnessConfig()
    timeout = float(episode_timeout_s if episode_timeout_s is not None else harness_config.episode_timeout_s)
    if workers < 1:
        raise ConfigError(f"workers must be at least 1 (got {workers})")
    if backend not in ("local", "ray"):
        raise ConfigError(f"parallel backend must be 'local' or 'ray' (got '{backend}')")
    if timeout <= 0:
        raise ConfigError(f"episode_timeout_s must be positive (got {timeout})")
    results: list[Trajectory | None] = [None] * len(tasks)

    def keep(index: int, trajectory: Trajectory, shots: list[bytes | None]) -> None:
        results[index] = trajectory
        if on_result is not None:
            on_result(index, trajectory, shots)

    if not tasks:
        return []
    if backend == "ray":
        ray = import_ray()  # before any browser or model starts: a missing extra fails fast
        _run_ray(
            ray,
            tasks,
            policy_factory,
            env_config,
            harness_config,
            workers,
            ray_address,
            timeout + kill_grace_s,
            keep,
        )
    elif workers == 1 or len(tasks) == 1:
        _run_in_process(tasks, policy_factory, env_config, harness_config, keep)
    else:
        _run_local_pool(
            tasks, policy_factory, env_config, harness_config, workers, timeout + kill_grace_s, keep
        )
    missing = [tasks[i].key for i, t in enumerate(results) if t is None]
    if missing:  # every path above fills each slot or raises; this guards the invariant
        raise RuntimeError(f"no trajectory came back for {', '.join(missing)}")
    return [t for t in results if t is not None]


def killed_trajectory(task: Task, *, seconds: float, reason: str, backend: str) -> Trajectory:
    """The record of an episode whose worker was killed or died: `env_error`, reward 0, the reason."""
    from awm.webarena.runner import new_trajectory_id

    return Trajectory(
        trajectory_id=new_trajectory_id(task),
        task=task,
        steps=[Step(index=0, outcome="env_error", error=reason)],
        end="env_error",
        verdict=Verdict(reward=0.0),
        seconds=round(seconds, 3),
        meta={"worker_killed": reason, "parallel_backend": backend},
    )


def _screenshot_collector() -> tuple[list[bytes | None], Callable[[Trajectory, Step, bytes | None], None]]:
    """A list and the step callback that fills it with each step's screenshot."""
    shots: list[bytes | None] = []

    def on_step(_trajectory: Trajectory, _step: Step, png: bytes | None) -> None:
        shots.append(png)

    return shots, on_step


# --------------------------------------------------------------------------------------------------
# In this process (one worker)
# --------------------------------------------------------------------------------------------------


def _run_in_process(
    tasks: list[Task],
    policy_factory: PolicyFactory,
    env_config: BrowserEnvConfig,
    harness_config: HarnessConfig,
    keep: ResultCallback,
) -> None:
    with BrowserSession(env_config) as session:
        for index, task in enumerate(tasks):
            shots, on_step = _screenshot_collector()
            trajectory = solve(session, task, policy_factory, harness_config, on_step)
            keep(index, trajectory, shots)


# --------------------------------------------------------------------------------------------------
# Local worker processes
# --------------------------------------------------------------------------------------------------


def _local_worker_main(
    conn: Connection, env_config: BrowserEnvConfig, factory: PolicyFactory, harness_config: HarnessConfig
) -> None:
    """A worker: one browser for its life; answers each (index, task JSON) with the trajectory JSON."""
    from awm.assets import configure_runtime_env

    with contextlib.suppress(OSError):
        os.setsid()  # its own process group, so the driver can kill it with everything it started
    configure_runtime_env()
    session = BrowserSession(env_config)
    conn.send(("ready", -1, None, None))
    try:
        while True:
            message = conn.recv()
            if message is None:
                return
            index, task_json = message
            try:
                shots, on_step = _screenshot_collector()
                task = Task.model_validate_json(task_json)
                trajectory = solve(session, task, factory, harness_config, on_step)
                conn.send(("done", index, trajectory.to_json(), shots))
            except Exception:  # a bug: the driver stops the run and shows this traceback
                conn.send(("bug", index, traceback.format_exc(), None))
                return
    except (EOFError, KeyboardInterrupt):
        return
    finally:
        with contextlib.suppress(Exception):
            session.close()


def _descendants(root: int) -> set[int]:
    """Every process below `root` (Linux /proc; empty elsewhere). Chromium starts in its own process
    group (Playwright detaches it), so killing the worker's group alone would leave it running."""
    proc = Path("/proc")
    if not proc.is_dir():
        return set()
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, []))
    return found


def kill_process_tree(pid: int) -> None:
    """SIGKILL a worker, its process group and every descendant (browser included)."""
    tree = _descendants(pid)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for target in (pid, *tree):
        with contextlib.suppress(OSError):
            os.kill(target, signal.SIGKILL)


class _LocalWorker:
    """The driver's handle on one worker process: its pipe, and the task it is on since when."""

    def __init__(
        self, context: Any, env_config: BrowserEnvConfig, factory: PolicyFactory, harness: HarnessConfig
    ) -> None:
        self.conn, child = context.Pipe(duplex=True)
        self.process = context.Process(
            target=_local_worker_main, args=(child, env_config, factory, harness), daemon=True
        )
        self.process.start()
        child.close()
        self.ready = False
        self.started_at = time.monotonic()
        self.index: int | None = None
        self.busy_since = 0.0

    def give(self, index: int, task: Task) -> None:
        self.conn.send((index, task.model_dump_json()))
        self.index, self.busy_since = index, time.monotonic()

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
    tasks: list[Task],
    policy_factory: PolicyFactory,
    env_config: BrowserEnvConfig,
    harness_config: HarnessConfig,
    workers: int,
    deadline_s: float,
    keep: ResultCallback,
) -> None:
    """Hand tasks one at a time to free workers; kill and replace a worker past its deadline."""
    factory = _share_local_server(policy_factory)
    context = multiprocessing.get_context("spawn")

    def spawn() -> _LocalWorker:
        return _LocalWorker(context, env_config, factory, harness_config)

    queue = list(range(len(tasks)))
    pool = [spawn() for _ in range(min(workers, len(tasks)))]
    pending = len(tasks)
    try:
        while pending:
            for worker in pool:
                if worker.ready and worker.index is None and queue:
                    index = queue.pop(0)
                    worker.give(index, tasks[index])
            now = time.monotonic()
            waits = [
                (w.busy_since + deadline_s) - now
                if w.index is not None
                else (w.started_at + WORKER_START_TIMEOUT_S) - now
                for w in pool
                if w.index is not None or not w.ready
            ]
            ready = wait_connections([w.conn for w in pool], timeout=max(0.05, min(waits, default=1.0)))
            for worker in list(pool):
                if worker.conn in ready:
                    try:
                        kind, index, payload, shots = worker.conn.recv()
                    except (EOFError, OSError):
                        pending -= _replace(pool, worker, spawn, tasks, keep, "the worker process died")
                        continue
                    if kind == "ready":
                        worker.ready = True
                    elif kind == "bug":
                        raise RuntimeError(f"worker failed on {tasks[index].key}:\n{payload}")
                    else:
                        worker.index = None
                        keep(index, Trajectory.model_validate_json(payload), list(shots))
                        pending -= 1
                elif worker.index is not None and time.monotonic() - worker.busy_since > deadline_s:
                    reason = f"episode exceeded the timeout ({deadline_s:.0f} s with grace); worker killed"
                    pending -= _replace(pool, worker, spawn, tasks, keep, reason)
                elif not worker.ready and time.monotonic() - worker.started_at > WORKER_START_TIMEOUT_S:
                    raise RuntimeError(
                        f"a worker did not start its browser within {WORKER_START_TIMEOUT_S:.0f} s"
                    )
    finally:
        for worker in pool:
            worker.stop()


def _replace(
    pool: list[_LocalWorker],
    worker: _LocalWorker,
    spawn: Callable[[], _LocalWorker],
    tasks: list[Task],
    keep: ResultCallback,
    reason: str,
) -> int:
    """Kill `worker`, record its episode (if any) as env_error, start a fresh one; returns episodes ended."""
    index, since = worker.index, worker.busy_since
    worker.kill()
    pool[pool.index(worker)] = spawn()
    if index is None:
        if not worker.ready:
            raise RuntimeError("a worker process died while starting its browser")
        return 0
    keep(
        index,
        killed_trajectory(tasks[index], seconds=time.monotonic() - since, reason=reason, backend="local"),
        [None],
    )
    return 1


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
    env_json: str, harness_json: str, factory: PolicyFactory, task_json: str
) -> tuple[str, list[bytes | None]]:
    """The Ray task: solve one episode in this worker's browser; trajectory JSON and screenshots."""
    from awm.assets import configure_runtime_env

    configure_runtime_env()
    if _RAY_WORKER.get("env_json") != env_json:
        if "session" in _RAY_WORKER:
            _RAY_WORKER.pop("session").close()
        _RAY_WORKER.update(
            env_json=env_json, session=BrowserSession(BrowserEnvConfig.model_validate_json(env_json))
        )
    shots, on_step = _screenshot_collector()
    task = Task.model_validate_json(task_json)
    trajectory = solve(
        _RAY_WORKER["session"], task, factory, HarnessConfig.model_validate_json(harness_json), on_step
    )
    return trajectory.to_json(), shots


def _run_ray(
    ray: Any,
    tasks: list[Task],
    policy_factory: PolicyFactory,
    env_config: BrowserEnvConfig,
    harness_config: HarnessConfig,
    workers: int,
    address: str | None,
    deadline_s: float,
    keep: ResultCallback,
) -> None:
    """At most `workers` Ray tasks in flight; `ray.wait` with a timeout, `ray.cancel(force=True)` past it."""
    factory = _share_local_server(policy_factory)
    with ray_session(workers, address) as ray:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_solve)
        env_json, harness_json = env_config.model_dump_json(), harness_config.model_dump_json()
        factory_ref = ray.put(factory)
        queue = list(range(len(tasks)))
        running: dict[Any, tuple[int, float]] = {}
        while queue or running:
            while queue and len(running) < workers:
                index = queue.pop(0)
                ref = remote.remote(env_json, harness_json, factory_ref, tasks[index].model_dump_json())
                running[ref] = (index, time.monotonic())
            now = time.monotonic()
            first_deadline = min(since + deadline_s for _, since in running.values()) - now
            done, _ = ray.wait(list(running), num_returns=1, timeout=max(0.05, first_deadline))
            for ref in done:
                index, since = running.pop(ref)
                try:
                    text, shots = ray.get(ref)  # a worker's bug stops the run, with its traceback
                except ray.exceptions.WorkerCrashedError as exc:  # the process died, not a bug of ours
                    reason = f"the Ray worker process died: {str(exc).splitlines()[0]}"
                    seconds = time.monotonic() - since
                    keep(
                        index,
                        killed_trajectory(tasks[index], seconds=seconds, reason=reason, backend="ray"),
                        [None],
                    )
                    continue
                keep(index, Trajectory.model_validate_json(text), list(shots))
            now = time.monotonic()
            for ref, (index, since) in list(running.items()):
                if now - since > deadline_s:
                    ray.cancel(ref, force=True)
                    running.pop(ref)
                    reason = (
                        f"episode exceeded the timeout ({deadline_s:.0f} s with grace); Ray task cancelled"
                    )
                    keep(
                        index,
                        killed_trajectory(tasks[index], seconds=now - since, reason=reason, backend="ray"),
                        [None],
                    )
