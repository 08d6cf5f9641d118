"""Run many episodes: one browser per worker, every step recorded, resumable, summarised at the end.

Why this shape: only the driver writes the run folder (the database, events, trajectories), so
parallel workers cannot corrupt it; workers return finished trajectories and their screenshots. A
re-run into the same folder skips the task keys that already ended, so an interrupted run costs
only the episode that was in flight. Failures of one episode (the model unreachable, the browser
crashed) end that episode with a failure class and the run goes on; anything else is a bug and
stops the run with its traceback (the run is marked `failed`).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from awm.config import Settings, config_hash
from awm.errors import ConfigError, LLMError
from awm.llm.base import LLMClient
from awm.memory.retrieval import RetrievedMemory
from awm.trajectory import Step, Task, Trajectory, load_trajectories
from awm.webarena.env import BrowserEnvConfig, BrowserSession
from awm.webarena.harness import HarnessConfig, Policy, run_episode
from awm.webarena.report import RunSummary, summarize, write_summary

PolicyFactory = Callable[[Task], Policy]
PolicyKind = Literal["llm", "scripted"]
RetrievalMode = Literal["all", "topk"]


# --------------------------------------------------------------------------------------------------
# Policies for a run (picklable, so a worker process can build its own)
# --------------------------------------------------------------------------------------------------


class AgentFactory:
    """Builds the policy for each task: the LLM agent with its memory, or a scripted policy.

    Picklable (the client is dropped when pickled and rebuilt in the worker). `memory` is ``off``,
    ``auto`` (each task's own scope) or a scope name. `shared_base_url` points worker processes at
    the driver's local llama.cpp server instead of starting one server per worker.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        policy: PolicyKind = "llm",
        memory: str = "off",
        memory_mode: RetrievalMode = "all",
        k: int = 3,
        use_grammar: bool | None = None,
        prompt_order: str = "prefix",
        shared_base_url: str | None = None,
    ) -> None:
        self.settings = settings
        self.policy = policy
        self.memory = memory
        self.memory_mode = memory_mode
        self.k = k
        self.use_grammar = use_grammar
        self.prompt_order = prompt_order
        self.shared_base_url = shared_base_url
        self._client: LLMClient | None = None
        self._counter: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"], state["_counter"] = None, None
        return state

    def describe(self) -> dict[str, Any]:
        """What goes into the run's config (and its hash)."""
        return {
            "policy": self.policy,
            "memory": self.memory,
            "memory_mode": self.memory_mode,
            "k": self.k if self.memory_mode == "topk" else None,
            "use_grammar": self.use_grammar,
            "prompt_order": self.prompt_order,
        }

    @property
    def client(self) -> LLMClient:
        """The LLM client, built once per process."""
        if self._client is None:
            if self.shared_base_url:
                self._client = _client_for_url(self.settings, self.shared_base_url)
            else:
                from awm.llm.factory import make_client

                self._client = make_client(self.settings)
        return self._client

    def scope_for(self, task: Task) -> str | None:
        if self.memory == "off":
            return None
        return task.scope if self.memory == "auto" else self.memory

    def memory_source(self, task: Task) -> Callable[[str], RetrievedMemory | None] | None:
        """Retrieval deferred to the first step, when the page has shown the goal."""
        scope = self.scope_for(task)
        if scope is None or not Path(self.settings.memory_db).is_file():
            return None
        db, mode, k = Path(self.settings.memory_db), self.memory_mode, self.k

        def lookup(goal: str) -> RetrievedMemory | None:
            from awm.memory.retrieval import retrieve
            from awm.memory.store import WorkflowStore

            with WorkflowStore(db) as store:
                found = retrieve(store, scope, goal, mode=mode, k=k)
            return found if found.version is not None else None

        return lookup

    def __call__(self, task: Task) -> Policy:
        if self.policy == "scripted":
            from awm.webarena.policies import MiniWobScriptedPolicy

            name = task.task_id.rsplit(".", 1)[-1]
            if task.benchmark != "miniwob" or name not in MiniWobScriptedPolicy.TASKS:
                raise ConfigError(
                    f"--policy scripted knows only MiniWoB {', '.join(MiniWobScriptedPolicy.TASKS)} (got {task.task_id})"
                )
            return MiniWobScriptedPolicy()
        from awm.webarena.agent import LLMAgent

        client = self.client
        if self._counter is None:
            self._counter = client.token_counter()
        return LLMAgent(
            client,
            self._counter,
            settings=self.settings,
            memory=self.memory_source(task),
            use_grammar=self.use_grammar,
            prompt_order=self.prompt_order,  # type: ignore[arg-type]
        )


def _client_for_url(settings: Settings, base_url: str) -> LLMClient:
    """A client for a llama.cpp server another process already started (for worker processes)."""
    from awm.llm.cache import CachedClient, ResponseCache
    from awm.llm.openai_backend import OpenAICompatibleClient

    client: LLMClient = OpenAICompatibleClient(
        model=settings.model_file.stem,
        api_key="not-needed",
        settings=settings.llm,
        base_url=base_url,
        backend="local",
        llama_cpp=True,
    )
    return CachedClient(client, ResponseCache(settings.cache_db)) if settings.llm.cache else client


def validate_memory(memory: str, settings: Settings) -> None:
    """An explicit memory scope must exist before the run starts (auto may start empty)."""
    if memory in ("off", "auto"):
        return
    db = Path(settings.memory_db)
    if not db.is_file():
        raise ConfigError(
            f"--memory {memory}: the memory database {db} does not exist; use --memory off or auto"
        )
    from awm.memory.store import WorkflowStore

    with WorkflowStore(db) as store:
        scopes = store.scopes()
    if memory not in scopes:
        known = ", ".join(scopes[:10]) or "none"
        raise ConfigError(f"--memory {memory}: no such scope in {db} (known scopes: {known})")


# --------------------------------------------------------------------------------------------------
# One episode (shared by the driver and the workers)
# --------------------------------------------------------------------------------------------------


def new_trajectory_id(task: Task) -> str:
    """Readable and unique: the task key plus a random suffix (files are named after it)."""
    return f"{task.key.removeprefix('browsergym/')}-{uuid.uuid4().hex[:8]}"


def annotate(trajectory: Trajectory, policy: Policy) -> Trajectory:
    """Record on the trajectory which memory the agent's prompts carried."""
    use = getattr(policy, "memory_use", None)
    if use is not None and use.scope is not None:
        trajectory.memory_scope = use.scope
        trajectory.memory_version = use.version
        trajectory.workflows_used = list(use.workflows)
    return trajectory


def solve(
    session: BrowserSession,
    task: Task,
    policy_factory: PolicyFactory,
    harness_config: HarnessConfig,
    on_step: Callable[[Trajectory, Step, bytes | None], None] | None = None,
) -> Trajectory:
    task = task.model_copy(deep=True)  # reset() writes the goal into the task
    policy = policy_factory(task)
    trajectory = run_episode(
        session, policy, task, harness_config, on_step=on_step, trajectory_id=new_trajectory_id(task)
    )
    return annotate(trajectory, policy)


# --------------------------------------------------------------------------------------------------
# The driver
# --------------------------------------------------------------------------------------------------


def run_config(
    settings: Settings,
    harness_config: HarnessConfig,
    env_config: BrowserEnvConfig,
    policy: dict[str, Any],
) -> tuple[dict[str, Any], str]:
    """The run's config and its hash: everything that changes results (not the task list, not
    the worker count, not headed/headless), so a resumed run may add tasks or workers."""
    config = {
        "settings_hash": config_hash(settings),
        "llm": settings.llm.model_dump(mode="json", exclude={"api_key", "prices"}),
        "policy": policy,
        "harness": harness_config.model_dump(mode="json"),
        "env": env_config.model_dump(mode="json", exclude={"headless", "slow_mo_ms", "screenshots"}),
    }
    digest = hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()[:12]
    return config, digest


def default_run_dir(name: str, runs_dir: Path) -> Path:
    from datetime import datetime

    return Path(runs_dir) / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{name}"


@contextmanager
def _progress(total: int, console: Console | None, enabled: bool) -> Iterator[tuple[Progress, Any]]:
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[solved]} solved"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=not enabled, transient=False) as progress:
        bar = progress.add_task("episodes", total=total, solved=0)
        yield progress, bar


def run_tasks(
    tasks: list[Task],
    *,
    policy_factory: PolicyFactory,
    settings: Settings,
    run_dir: Path,
    env_config: BrowserEnvConfig | None = None,
    harness_config: HarnessConfig | None = None,
    workers: int = 1,
    judge: bool = False,
    judge_client: LLMClient | None = None,
    memory: str = "off",
    name: str = "",
    console: Console | None = None,
    show_progress: bool = True,
) -> RunSummary:
    """Solve each task not already finished in `run_dir`, record everything, write the summary.

    `policy_factory(task)` builds the policy for one episode (for `workers > 1` it must pickle:
    an `AgentFactory` does). `judge=True` asks an LLM judge about every new episode (with
    `judge_client`, default: the configured model) on top of the ground-truth reward.
    """
    from awm.traces import RunRecorder

    env_config = env_config or BrowserEnvConfig()
    harness_config = harness_config or HarnessConfig()
    if workers < 1:
        raise ConfigError(f"--workers must be at least 1 (got {workers})")
    run_dir = Path(run_dir)
    name = name or run_dir.name
    describe = getattr(policy_factory, "describe", None)
    policy_info = (
        describe() if callable(describe) else {"policy": getattr(policy_factory, "__name__", "custom")}
    )
    policy_info = {**policy_info, "judge": judge}
    config, digest = run_config(settings, harness_config, env_config, policy_info)
    keys = [t.key for t in tasks]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ConfigError(
            f"the task list repeats {', '.join(duplicates)}; each task key may appear once per run"
        )

    if any(t.benchmark == "webarena" for t in tasks):
        from awm.webarena.tasks import webarena_urls

        # Fail before any browser starts, naming every missing WA_* variable.
        webarena_urls({}, os.environ, source="the [webarena] section of a --config file")

    if judge and judge_client is None:
        from awm.llm.factory import make_client

        judge_client = make_client(settings)

    recorder = RunRecorder(run_dir, config=config, config_hash=digest, name=name)
    status = "failed"
    try:
        finished = recorder.finished_episodes()
        todo = [t for t in tasks if t.key not in finished]
        skipped = [t.key for t in tasks if t.key in finished]
        if console is not None and skipped:
            console.print(
                f"resuming {run_dir}: {len(skipped)} episode(s) already finished, {len(todo)} to go"
            )

        def finish(trajectory: Trajectory) -> None:
            if judge and judge_client is not None:
                _judge(judge_client, trajectory)
            recorder.end_episode(trajectory)

        with _progress(len(todo), console, show_progress and bool(todo)) as (progress, bar):
            solved = 0

            def advance(trajectory: Trajectory) -> None:
                nonlocal solved
                solved += int((trajectory.verdict.reward or 0) > 0)
                progress.update(
                    bar, advance=1, solved=solved, description=trajectory.task.key.removeprefix("browsergym/")
                )

            if workers == 1 or len(todo) <= 1:
                _run_serial(todo, policy_factory, env_config, harness_config, recorder, finish, advance)
            else:
                _run_parallel(
                    todo, policy_factory, env_config, harness_config, workers, recorder, finish, advance
                )

        trajectories = (
            load_trajectories(run_dir / "trajectories") if (run_dir / "trajectories").is_dir() else []
        )
        client = getattr(policy_factory, "_client", None)
        summary = summarize(
            trajectories,
            name=name,
            run_dir=run_dir,
            config_hash=digest,
            model=_model_name(trajectories, client),
            backend=getattr(client, "backend", "")
            or (settings.llm.resolved_backend() if policy_info.get("policy") == "llm" else "-"),
            policy=str(policy_info.get("policy", "")),
            memory=memory,
            skipped=skipped,
        )
        write_summary(summary, run_dir)
        status = "done"
        return summary
    finally:
        recorder.close(status=status)


def _model_name(trajectories: list[Trajectory], client: Any) -> str:
    if client is not None:
        return str(client.model)
    models = sorted({t.model for t in trajectories if t.model})
    return ", ".join(models) or "-"


def _judge(client: LLMClient, trajectory: Trajectory) -> None:
    """Add the judge's label; a judge that cannot be reached leaves the label empty, never success."""
    from awm.evaluation.judge import judge_trajectory

    try:
        trajectory.verdict = judge_trajectory(client, trajectory)
    except LLMError as exc:
        trajectory.meta["judge_error"] = str(exc)


def _run_serial(
    todo: list[Task],
    policy_factory: PolicyFactory,
    env_config: BrowserEnvConfig,
    harness_config: HarnessConfig,
    recorder: Any,
    finish: Callable[[Trajectory], None],
    advance: Callable[[Trajectory], None],
) -> None:
    """One browser, reused across episodes; each step is written as it happens."""
    started: set[str] = set()

    def on_step(trajectory: Trajectory, step: Step, png: bytes | None) -> None:
        if trajectory.trajectory_id not in started:
            started.add(trajectory.trajectory_id)
            recorder.start_episode(trajectory)
        prompt_hash = trajectory.meta.get("prompt_hashes", {}).get(str(step.index), "")
        recorder.record_step(trajectory, step, png, prompt_hash=prompt_hash)

    with BrowserSession(env_config) as session:
        for task in todo:
            trajectory = solve(session, task, policy_factory, harness_config, on_step)
            finish(trajectory)
            advance(trajectory)


def _run_parallel(
    todo: list[Task],
    policy_factory: PolicyFactory,
    env_config: BrowserEnvConfig,
    harness_config: HarnessConfig,
    workers: int,
    recorder: Any,
    finish: Callable[[Trajectory], None],
    advance: Callable[[Trajectory], None],
) -> None:
    """N worker processes, one browser each; the driver alone writes the run folder.

    The pool is `awm.pipeline.parallel`'s (one implementation for `awm run` and the pipeline): a hung
    worker is killed after the episode timeout and its episode recorded as `env_error`. A worker's
    steps are written when its episode returns (not live).
    """
    from awm.pipeline.parallel import run_episodes_parallel

    def record(_index: int, trajectory: Trajectory, shots: list[bytes | None]) -> None:
        recorder.start_episode(trajectory)
        for step, png in zip(trajectory.steps, shots, strict=False):
            prompt_hash = trajectory.meta.get("prompt_hashes", {}).get(str(step.index), "")
            recorder.record_step(trajectory, step, png, prompt_hash=prompt_hash)
        finish(trajectory)
        advance(trajectory)

    run_episodes_parallel(
        todo,
        policy_factory=policy_factory,
        env_config=env_config,
        harness_config=harness_config,
        workers=workers,
        on_result=record,
    )


def _share_local_server(policy_factory: PolicyFactory) -> PolicyFactory:
    """Start the local model once in the driver and point the workers at it (one server, not N)."""
    if not isinstance(policy_factory, AgentFactory) or policy_factory.policy != "llm":
        return policy_factory
    if policy_factory.settings.llm.resolved_backend() != "local" or policy_factory.shared_base_url:
        return policy_factory
    from awm.llm.factory import local_server_url

    url = local_server_url(policy_factory.client)
    if url:
        policy_factory.shared_base_url = url
    return policy_factory
