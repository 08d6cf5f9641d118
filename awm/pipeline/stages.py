"""The pipeline's stages as functions with typed inputs and outputs: solve, evaluate, admit, induce, commit.

Why functions and not one driver: each stage can be run alone on a run folder (`awm pipeline
evaluate RUN_DIR`...), tested alone, and a failing one stops the pipeline with its name. Every user-
fixable failure inside a stage surfaces as `PipelineStageError` ("stage 'induce' failed: <cause>"),
so nothing downstream runs on missing or partial input. Bugs keep their traceback.

`PipelineContext` holds what the stages share: settings, the arm's config, the run folder, the arm's
own memory store (``run_dir/memory.sqlite``, so arms never share memory, unless ``memory = "fixed"``),
the run recorder, LLM clients metered per purpose, and the one policy factory. The browsers belong to
the worker pool (`awm.pipeline.parallel`), not to the context.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field

from awm.config import Settings
from awm.config import config_hash as settings_hash
from awm.errors import AwmError, ConfigError, StageError
from awm.evaluation.admission import AdmissionResult, admit, check_rule
from awm.llm.usage import UsageMeter
from awm.memory.store import MemoryVersion, WorkflowStore
from awm.memory.workflow import Workflow
from awm.pipeline.config import PipelineConfig
from awm.trajectory import Task, Trajectory

if TYPE_CHECKING:
    from awm.config import BrowserSettings
    from awm.llm.base import LLMClient
    from awm.memory.view import MemoryView
    from awm.pipeline.policy import PolicyFactory
    from awm.pipeline.replay import ReplayGate
    from awm.traces import RunRecorder
    from awm.webarena.harness import HarnessConfig

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


def read_scope(config: PipelineConfig, task: Task) -> str:
    """The scope a task's episode reads: the arm's fixed `memory_scope`; else, with ``scope =
    "benchmark"``, the task's benchmark as a prefix (``miniwob``); with ``scope = "site"``, the task's
    site (``sites/trac`` for ``sites/trac/ticket-priority``); else the task's own scope.
    Commits always go to the task's own scope."""
    if config.memory_scope:
        return config.memory_scope
    if config.scope == "benchmark":
        return task.benchmark
    if config.scope == "site":
        return site_scope(task.scope)
    return task.scope


def site_scope(scope: str) -> str:
    """The site a template's scope sits under: ``sites/trac/ticket-priority`` -> ``sites/trac`` (pure);
    a clear error for a scope with no site level (only the arena's scopes have one)."""
    parts = scope.split("/")
    if len(parts) < 3:
        raise ConfigError(
            f"scope = 'site' reads the other templates of a task's site, but the task's scope {scope!r} has "
            "no site level (the arena's scopes look like sites/<site>/<template>)"
        )
    return "/".join(parts[:-1])


def is_prefix_scope(store: WorkflowStore, scope: str) -> bool:
    """A name with no head of its own but scopes below it (``miniwob`` over ``miniwob/login-user``): a
    fixed `memory_scope` (`awm run --memory miniwob`) then reads them all, as a benchmark-wide arm does."""
    from awm.memory.view import scopes_under

    return store.head_version(scope) is None and bool(scopes_under(store.scopes(), scope))


def memory_view(store: WorkflowStore, config: PipelineConfig, task: Task) -> MemoryView:
    """The view one episode of `task` reads under `config`, at the store's heads now.

    A fixed `memory_scope` or ``scope = "task"``: one scope's head, shown as `memory_mode` says (a fixed
    scope that is a prefix of others reads them all, top-k, see `is_prefix_scope`).
    ``scope = "benchmark"``: every scope under the task's benchmark (`view_over_prefix`), always
    top-k by the goal (a benchmark's workflows together would crowd the prompt). ``scope = "site"``:
    every *other* template of the task's site, top-k by the goal: what a site teaches a template it has
    not taught yet (its own workflows are left out, so the arm measures transfer between templates), and
    of those only the parts where a workflow split into parts (`without_split_wholes`).
    `use` is the arm's `workflows` setting either way.
    """
    from awm.memory.view import view_at_head, view_over_prefix

    scope = read_scope(config, task)
    if not config.memory_scope and config.scope == "site":
        return view_over_prefix(
            store, scope, mode="topk", k=config.k, use=config.workflows, exclude=task.scope, parts_only=True
        )
    if (not config.memory_scope and config.scope == "benchmark") or is_prefix_scope(store, scope):
        return view_over_prefix(store, scope, mode="topk", k=config.k, use=config.workflows)
    return view_at_head(store, scope, mode=config.memory_mode, k=config.k, use=config.workflows)


class StageContext(Protocol):
    """What `evaluate_stage` and `induce_stage` read: the arm's config, its clients and its recorder.
    `PipelineContext` is one; the per-stage CLI commands build a lighter one on an existing run folder."""

    config: PipelineConfig
    clients: Clients
    recorder: RunRecorder


class PipelineContext:
    """What the stages share for one arm in one run folder. Open with `PipelineContext.open`,
    close with `close(status)` (closes the store and the recorder)."""

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
        env_config: BrowserSettings,
        harness_config: HarnessConfig,
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
        self.config_hash = config_hash
        self._gate: ReplayGate | None = None

    @classmethod
    def open(
        cls,
        config: PipelineConfig,
        settings: Settings,
        run_dir: Path,
        *,
        clients: Clients | None = None,
        env_config: BrowserSettings | None = None,
    ) -> PipelineContext:
        """Open (or resume) the run folder: recorder (refuses another config's folder), the arm's store.

        The embedded model's server is given one slot per worker, so parallel workers share it."""
        from awm.traces import RunRecorder
        from awm.webarena.harness import HarnessConfig

        run_dir = Path(run_dir)
        db = memory_db_path(config, settings, run_dir)
        if config.memory == "fixed" and not db.is_file():
            raise ConfigError(
                f"memory = 'fixed' reads an existing memory database, but {db} does not exist "
                "(set memory_db in the config, or use memory = 'online')"
            )
        llm = settings.llm.model_copy(update={"local_slots": max(settings.llm.local_slots, config.workers)})
        arm_settings = settings.model_copy(update={"memory_db": db, "llm": llm})
        meter = clients.meter if clients is not None else UsageMeter()
        clients = clients or Clients(arm_settings, meter)
        env_config = env_config or arm_settings.browser
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

    def head_version(self, scope: str) -> int | None:
        return self._store.head_version(scope) if self._store is not None else None

    def memory_scope(self, task: Task) -> str:
        """The scope a task's episode reads (`read_scope`)."""
        return read_scope(self.config, task)

    def view_for(self, task: Task) -> MemoryView | None:
        """The immutable memory view of one episode, resolved now (before the episode starts);
        None for a memory-off arm (`memory_view`)."""
        if self._store is None:
            return None
        return memory_view(self._store, self.config, task)

    def policy_factory(self) -> PolicyFactory:
        """The one policy factory, with this arm's actor client (metered) for in-process episodes."""
        from awm.pipeline.policy import PolicyFactory

        client = self.clients.actor if self.config.policy == "llm" else None
        return PolicyFactory(self.settings, self.config.policy, client=client)

    def replay_gate(self) -> ReplayGate:
        """Admission by replay's browser for this arm (opened on first use, closed with the context)."""
        if self._gate is None:
            from awm.pipeline.replay import ReplayGate

            self._gate = ReplayGate(self.run_dir, self.env_config)
        return self._gate

    def close(self, status: str = "done") -> None:
        if self._gate is not None:
            self._gate.close()
            self._gate = None
        if self._store is not None:
            self._store.close()
            self._store = None
        self.recorder.close(status=status)


# --------------------------------------------------------------------------------------------------
# The stages
# --------------------------------------------------------------------------------------------------


def evaluate_stage(
    trajectories: list[Trajectory],
    *,
    ctx: StageContext,
    record: bool = True,
    on_each: Callable[[Trajectory], None] | None = None,
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
            if on_each is not None:
                on_each(out[-1])
    return out


def admit_stage(trajectories: Sequence[Trajectory], *, rule: str) -> AdmissionResult:
    """Which trajectories may teach memory under `rule` (``gt``, ``judge``, ``both``, ``any``)."""
    with stage_guard("admit"):
        return admit(trajectories, check_rule(rule))


def _has_executed_step(trajectory: Trajectory) -> bool:
    return any(s.action is not None and s.outcome == "ok" for s in trajectory.steps)


class InductionOutcome(BaseModel):
    """What an induction produced: candidate workflows, or none and why (a result, not a failure),
    and what the inducer spent."""

    candidates: list[Workflow] = Field(default_factory=list)
    reason: str = ""  # why there is no candidate (empty when there are candidates)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def induce_stage(
    admitted: Sequence[Trajectory], *, mode: str, ctx: StageContext, admission: str | None = None
) -> InductionOutcome:
    """Candidate workflows from admitted trajectories (rule-based or by the induction LLM): pure apart
    from the model call, nothing is written.

    No usable workflow (nothing admitted acted, a workflow too short, the model's answer unparsable or
    empty) is a result with its reason, and the caller commits nothing. Only a broken stage fails it:
    the model unreachable after retries, an unknown mode.
    """
    from awm.induction.neural import InductionError

    usable = [t for t in admitted if _has_executed_step(t)]
    if not usable:
        return InductionOutcome(reason="no admitted trajectory with an executed step")
    rule = admission or ctx.config.admission
    with stage_guard("induce"):
        if mode == "rule":
            from awm.induction.rule import induce_rule

            candidates, _ = induce_rule(usable, admission=rule, parts=ctx.config.parts)
            outcome = InductionOutcome(candidates=candidates)
        elif mode == "neural":
            from awm.induction.neural import induce_neural

            try:
                candidates, report = induce_neural(usable, client=ctx.clients.induction, admission=rule)
            except InductionError as exc:
                return InductionOutcome(reason=f"neural induction produced no usable workflow: {exc}")
            outcome = InductionOutcome(
                candidates=candidates,
                llm_calls=report.calls,
                prompt_tokens=report.prompt_tokens,
                completion_tokens=report.completion_tokens,
            )
        else:
            raise ConfigError(f"induction mode '{mode}' is unknown; expected rule or neural")
    if not outcome.candidates:
        outcome.reason = f"{mode} induction returned no workflow from {len(usable)} trajectories"
    return outcome


def commit_stage(
    store: WorkflowStore,
    scope: str,
    candidates: list[Workflow],
    *,
    author: str,
    message: str,
    provenance: dict[str, Any] | None = None,
) -> MemoryVersion | None:
    """Merge candidates into the scope's head and commit a new version through the one commit path
    (`awm.induction.commit.commit_candidates`): idempotent by `message` (a version with this message is
    returned, nothing is committed twice), None when nothing changed. Give each commit point its own
    message (e.g. ``online after <task key>``)."""
    from awm.induction.commit import commit_candidates

    with stage_guard("commit"):
        if not message.strip():
            raise ConfigError("a pipeline commit needs a message that names its commit point")
        result = commit_candidates(
            store, scope, candidates, author=author, message=message, provenance=provenance
        )
        return result.version
