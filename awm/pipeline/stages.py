"""The pipeline's stages as functions with typed inputs and outputs: solve, evaluate, admit, induce, commit.

Why functions and not one driver: each stage can be run alone on a run folder (`awm pipeline
evaluate RUN_DIR`...), tested alone, and a failing one stops the pipeline with its name. Every user-
fixable failure inside a stage surfaces as `PipelineStageError` ("stage 'induce' failed: <cause>"),
so nothing downstream runs on missing or partial input. Bugs keep their traceback.

`PipelineContext` holds what the stages share: settings, the arm's config, the run folder, the arm's
own memory store (``run_dir/memory.sqlite``, so arms never share memory, unless ``memory = "fixed"``),
the run recorder, LLM clients metered per purpose, the retriever and one browser session.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from awm.config import Settings
from awm.config import config_hash as settings_hash
from awm.errors import AwmError, ConfigError, StageError
from awm.induction.admission import AdmissionResult, admit, check_rule
from awm.induction.merge import merge_workflows
from awm.llm.usage import UsageMeter
from awm.memory.store import MemoryVersion, WorkflowStore
from awm.memory.workflow import Workflow
from awm.pipeline.config import PipelineConfig
from awm.trajectory import Step, Task, Trajectory

if TYPE_CHECKING:
    from awm.llm.base import LLMClient
    from awm.memory.retrieval import RetrievedMemory, Retriever
    from awm.traces import RunRecorder
    from awm.webarena.env import BrowserEnvConfig, BrowserSession
    from awm.webarena.harness import Decision, DecisionContext, HarnessConfig, Policy

STAGES: tuple[str, ...] = ("solve", "evaluate", "admit", "induce", "commit")
MEMORY_DB_NAME = "memory.sqlite"


class PipelineStageError(StageError):
    """A stage failed; `stage` names it, `cause` says why (the message holds both)."""

    def __init__(self, stage: str, cause: str) -> None:
        super().__init__(f"stage '{stage}' failed: {cause}")
        self.stage = stage
        self.cause = cause


@contextmanager
def stage_guard(stage: str) -> Iterator[None]:
    """Turn a user-fixable failure inside a stage into `PipelineStageError` naming the stage."""
    try:
        yield
    except PipelineStageError:
        raise
    except (AwmError, OSError) as exc:
        raise PipelineStageError(stage, str(exc) or type(exc).__name__) from exc


# --------------------------------------------------------------------------------------------------
# Shared context
# --------------------------------------------------------------------------------------------------


class Clients:
    """The actor, judge and induction clients. By default one client (built on first use) serves all
    three: usage is metered per request purpose, so the meter still tells them apart. Any of them may
    be given explicitly (another model for the judge, a stub in tests)."""

    def __init__(
        self,
        settings: Settings,
        meter: UsageMeter,
        *,
        actor: LLMClient | None = None,
        judge: LLMClient | None = None,
        induction: LLMClient | None = None,
    ) -> None:
        self.settings = settings
        self.meter = meter
        self._given = {"actor": actor, "judge": judge, "induction": induction}
        self._shared: LLMClient | None = None

    def _get(self, purpose: str) -> LLMClient:
        given = self._given[purpose]
        if given is not None:
            return given
        if self._shared is None:
            from awm.llm.factory import make_client

            self._shared = make_client(self.settings, meter=self.meter)
        return self._shared

    @property
    def actor(self) -> LLMClient:
        return self._get("actor")

    @property
    def judge(self) -> LLMClient:
        return self._get("judge")

    @property
    def induction(self) -> LLMClient:
        return self._get("induction")

    def model_name(self) -> str:
        """The actor's model name without building a client that was never used."""
        client = self._given["actor"] or self._shared
        return str(client.model) if client is not None else ""


def memory_db_path(config: PipelineConfig, settings: Settings, run_dir: Path) -> Path:
    """The arm's own store in its run folder, or the configured one for ``memory = "fixed"``."""
    return Path(settings.memory_db) if config.memory == "fixed" else Path(run_dir) / MEMORY_DB_NAME


def run_config(config: PipelineConfig, settings: Settings) -> tuple[dict[str, Any], str]:
    """The run's config (stored in the run row) and its hash: what changes results."""
    payload = {
        "pipeline": config.result_fields(),
        "settings_hash": settings_hash(settings),
        "llm": settings.llm.model_dump(mode="json", exclude={"api_key", "prices"}),
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:12]
    return payload, digest


class StageContext(Protocol):
    """What `evaluate_stage` and `induce_stage` read: the arm's config, its clients and its recorder.
    `PipelineContext` is one; the per-stage CLI commands build a lighter one on an existing run folder."""

    config: PipelineConfig
    clients: Clients
    recorder: RunRecorder


class PipelineContext:
    """What the stages share for one arm in one run folder. Open with `PipelineContext.open`,
    close with `close(status)` (closes the browser, the store and the recorder)."""

    def __init__(
        self,
        *,
        config: PipelineConfig,
        settings: Settings,
        run_dir: Path,
        store: WorkflowStore | None,
        recorder: RunRecorder,
        clients: Clients,
        meter: UsageMeter,
        env_config: BrowserEnvConfig,
        harness_config: HarnessConfig,
        session_factory: Callable[[], BrowserSession],
        retriever: Retriever | None = None,
        config_hash: str = "",
    ) -> None:
        self.config = config
        self.settings = settings
        self.run_dir = Path(run_dir)
        self._store = store
        self.recorder = recorder
        self.clients = clients
        self.meter = meter
        self.env_config = env_config
        self.harness_config = harness_config
        self.session_factory = session_factory
        self._retriever = retriever
        self._session: BrowserSession | None = None
        self.config_hash = config_hash

    @classmethod
    def open(
        cls,
        config: PipelineConfig,
        settings: Settings,
        run_dir: Path,
        *,
        clients: Clients | None = None,
        env_config: BrowserEnvConfig | None = None,
        session_factory: Callable[[], BrowserSession] | None = None,
    ) -> PipelineContext:
        """Open (or resume) the run folder: recorder (refuses another config's folder), the arm's store."""
        from awm.traces import RunRecorder
        from awm.webarena.env import BrowserEnvConfig, BrowserSession
        from awm.webarena.harness import HarnessConfig

        run_dir = Path(run_dir)
        db = memory_db_path(config, settings, run_dir)
        if config.memory == "fixed" and not db.is_file():
            raise ConfigError(
                f"memory = 'fixed' reads an existing memory database, but {db} does not exist "
                "(set memory_db in the config, or use memory = 'online')"
            )
        arm_settings = settings.model_copy(update={"memory_db": db})
        meter = clients.meter if clients is not None else UsageMeter()
        clients = clients or Clients(arm_settings, meter)
        env_config = env_config or BrowserEnvConfig(episode_timeout_s=config.episode_timeout_s)
        harness = HarnessConfig(max_steps=config.max_steps, episode_timeout_s=config.episode_timeout_s)
        payload, digest = run_config(config, settings)
        recorder = RunRecorder(run_dir, config=payload, config_hash=digest, name=config.name)
        store = WorkflowStore(db) if config.memory != "off" else None
        return cls(
            config=config,
            settings=arm_settings,
            run_dir=run_dir,
            store=store,
            recorder=recorder,
            clients=clients,
            meter=meter,
            env_config=env_config,
            harness_config=harness,
            session_factory=session_factory or (lambda: BrowserSession(env_config)),
            config_hash=digest,
        )

    @property
    def store(self) -> WorkflowStore:
        if self._store is None:
            raise ConfigError("this arm has memory = 'off': there is no memory store to read or write")
        return self._store

    @property
    def has_memory(self) -> bool:
        return self._store is not None

    @property
    def retriever(self) -> Retriever:
        if self._retriever is None:
            from awm.memory.retrieval import Retriever

            self._retriever = Retriever()
        return self._retriever

    def session(self) -> BrowserSession:
        """The run's browser, started on first use (a resumed run with nothing left starts none)."""
        if self._session is None:
            self._session = self.session_factory()
        return self._session

    def head_version(self, scope: str) -> int | None:
        return self._store.head_version(scope) if self._store is not None else None

    def memory_lookup(self, task: Task) -> Callable[[str], RetrievedMemory | None] | None:
        """The memory view for one episode: the task's scope at its head when the goal is known."""
        if self._store is None:
            return None
        store, scope, mode, k = self._store, task.scope, self.config.memory_mode, self.config.k

        def lookup(goal: str) -> RetrievedMemory | None:
            found = self.retriever.retrieve(store, scope, goal, mode=mode, k=k)
            return found if found.version is not None else None

        return lookup

    def policy(self, task: Task) -> Policy:
        """The policy of one episode, reading this arm's memory."""
        lookup = self.memory_lookup(task)
        if self.config.policy == "scripted":
            from awm.webarena.policies import MiniWobScriptedPolicy

            name = task.task_id.rsplit(".", 1)[-1]
            if task.benchmark != "miniwob" or name not in MiniWobScriptedPolicy.TASKS:
                raise ConfigError(
                    f"policy 'scripted' knows only MiniWoB {', '.join(MiniWobScriptedPolicy.TASKS)} (got {task.task_id})"
                )
            return MemoryViewPolicy(MiniWobScriptedPolicy(), lookup)
        from awm.webarena.agent import LLMAgent

        client = self.clients.actor
        return LLMAgent(client, client.token_counter(), settings=self.settings, memory=lookup)

    def close(self, status: str = "done") -> None:
        if self._session is not None:
            self._session.close()
            self._session = None
        if self._store is not None:
            self._store.close()
            self._store = None
        self.recorder.close(status=status)


class MemoryViewPolicy:
    """A scripted policy that is shown memory the way the LLM agent is (looked up at the first step,
    recorded in `memory_use`), so scripted pipeline runs exercise the same versioning path. The
    scripted decisions themselves ignore the workflows."""

    def __init__(self, inner: Policy, lookup: Callable[[str], RetrievedMemory | None] | None) -> None:
        from awm.webarena.agent import MemoryUse

        self.inner = inner
        self.name = inner.name
        self._lookup = lookup
        self._looked_up = False
        self.memory_use = MemoryUse()

    def decide(self, ctx: DecisionContext) -> Decision:
        if not self._looked_up and self._lookup is not None:
            self._looked_up = True
            found = self._lookup(ctx.page.goal or ctx.task.goal)
            if found is not None:
                self.memory_use.scope, self.memory_use.version = found.scope, found.version
                self.memory_use.workflows = [w.name for w in found.workflows]
        decision = self.inner.decide(ctx)
        if self.memory_use.version is not None:
            decision = decision.model_copy(update={"memory_version": self.memory_use.version})
        return decision


# --------------------------------------------------------------------------------------------------
# The stages
# --------------------------------------------------------------------------------------------------


def solve_episode(task: Task, ctx: PipelineContext) -> Trajectory:
    """One episode, every step recorded as it happens, ended in the run folder with its GT reward."""
    from awm.webarena.harness import run_episode
    from awm.webarena.runner import annotate, new_trajectory_id

    task = task.model_copy(deep=True)  # reset() writes the goal into the task
    policy = ctx.policy(task)
    started: set[str] = set()

    def on_step(trajectory: Trajectory, step: Step, png: bytes | None) -> None:
        if trajectory.trajectory_id not in started:
            started.add(trajectory.trajectory_id)
            ctx.recorder.start_episode(trajectory)
        prompt_hash = trajectory.meta.get("prompt_hashes", {}).get(str(step.index), "")
        ctx.recorder.record_step(trajectory, step, png, prompt_hash=prompt_hash)

    trajectory = run_episode(
        ctx.session(),
        policy,
        task,
        ctx.harness_config,
        on_step=on_step,
        trajectory_id=new_trajectory_id(task),
    )
    trajectory = annotate(trajectory, policy)
    ctx.recorder.end_episode(trajectory)
    return trajectory


def solve_stage(tasks: list[Task], *, ctx: PipelineContext) -> list[Trajectory]:
    """Solve tasks in order, one browser; an episode's own failures (model down, page crash) end that
    episode with a failure class, a failure to run at all (no Chromium, unknown task) fails the stage."""
    with stage_guard("solve"):
        return [solve_episode(task, ctx) for task in tasks]


def evaluate_stage(
    trajectories: list[Trajectory], *, ctx: StageContext, record: bool = True
) -> list[Trajectory]:
    """Check each GT reward (set by the harness) and, with ``judge = true``, add the judge's label.

    A judge that cannot be reached fails the stage: admission by judge would otherwise run on
    missing verdicts. Verdicts are recorded in the run folder as they come (`record=False` for
    trajectories that are not episodes of this run, e.g. offline inputs).
    """
    from awm.evaluation.ground_truth import verdict_from_reward

    out: list[Trajectory] = []
    with stage_guard("evaluate"):
        for trajectory in trajectories:
            verdict = trajectory.verdict.model_copy(
                update={"reward": verdict_from_reward(trajectory.verdict.reward).reward}
            )
            if ctx.config.judge:
                from awm.evaluation.judge import judge_trajectory

                verdict = judge_trajectory(ctx.clients.judge, trajectory)
                if record:
                    ctx.recorder.record_verdict(trajectory.trajectory_id, verdict)
            out.append(trajectory.model_copy(update={"verdict": verdict}))
    return out


def admit_stage(trajectories: Sequence[Trajectory], *, rule: str) -> AdmissionResult:
    """Which trajectories may teach memory under `rule` (``gt``, ``judge``, ``both``, ``any``)."""
    with stage_guard("admit"):
        return admit(trajectories, check_rule(rule))


def _has_executed_step(trajectory: Trajectory) -> bool:
    return any(s.action is not None and s.outcome == "ok" for s in trajectory.steps)


def induce_stage(
    admitted: Sequence[Trajectory], *, mode: str, ctx: StageContext, admission: str | None = None
) -> list[Workflow]:
    """Candidate workflows from admitted trajectories (rule-based or by the induction LLM).

    No admitted trajectory with an executed step means nothing to learn: an empty list, not a
    failure. An inducer that is given trajectories and returns nothing usable (garbage from the
    model, the model unreachable) fails the stage.
    """
    usable = [t for t in admitted if _has_executed_step(t)]
    if not usable:
        return []
    rule = admission or ctx.config.admission
    with stage_guard("induce"):
        if mode == "rule":
            from awm.induction.rule import induce_rule

            candidates, _ = induce_rule(usable, admission=rule)
        elif mode == "neural":
            from awm.induction.neural import induce_neural

            candidates, _ = induce_neural(usable, client=ctx.clients.induction, admission=rule)
        else:
            raise ConfigError(f"induction mode '{mode}' is unknown; expected rule or neural")
        if not candidates:
            raise PipelineStageError(
                "induce", f"{mode} induction returned no workflow from {len(usable)} trajectories"
            )
        return candidates


def find_commit(store: WorkflowStore, scope: str, message: str) -> MemoryVersion | None:
    """The version of `scope` committed with exactly `message`, if any (what makes commits idempotent)."""
    for info in reversed(store.log(scope)):
        if info.message == message:
            return store.get(scope, info.version)
    return None


class _NoChange(Exception):
    """Aborts a store update when merging the candidates changes nothing."""


def commit_stage(
    store: WorkflowStore,
    scope: str,
    candidates: list[Workflow],
    *,
    author: str,
    message: str,
    provenance: dict[str, Any] | None = None,
) -> MemoryVersion | None:
    """Merge candidates into the scope's head and commit a new version; None when nothing changed.

    Idempotent by `message`: if a version with this message exists (the commit happened, but the
    process died before the pipeline state said so), that version is returned and nothing is
    committed twice. Give each commit point its own message (e.g. ``online after <task key>``).
    """
    with stage_guard("commit"):
        if not message.strip():
            raise ConfigError("a pipeline commit needs a message that names its commit point")
        existing = find_commit(store, scope, message)
        if existing is not None:
            return existing
        if not candidates:
            return None

        def change(current: list[Workflow]) -> list[Workflow]:
            merged, report = merge_workflows(current, candidates)
            if not report.changed:
                raise _NoChange
            return merged

        try:
            return store.update(scope, change, author=author, message=message, provenance=provenance)
        except _NoChange:
            return None
