"""Replay: run recorded steps or a workflow again on a fresh page of the same task, without the model.

Two uses of one primitive. Admission by replay (ASI's verification): a newly induced workflow becomes
memory only after it re-ran on the task that taught it (same task and seed, a fresh page, no model call)
and the task succeeded by ground truth; the verdict and the replay's trajectory id go into the
workflow's provenance. And `awm replay RUN EPISODE`, which re-executes a recorded episode's actions by
grounding their targets (role + label) on a fresh page: a debugging tool, and the same check.

Both run a real episode through the one harness (`run_episode`) with `ReplayPolicy`, so a replay is
traced like any episode: each grounded step is a sub-step with its grounding rule and outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel

from awm.config import BrowserSettings
from awm.errors import DataError
from awm.evaluation.success import is_success
from awm.files import write_text_atomic
from awm.induction.abstraction import AbstractStep, abstract_trajectory
from awm.memory.composition import CompositionError, callees, expand
from awm.memory.workflow import PLACEHOLDER, Workflow, WorkflowStep, bind_parameters, open_parameters
from awm.trajectory import Trajectory
from awm.webarena.env import BrowserSession
from awm.webarena.harness import HarnessConfig, StepCallback, run_episode
from awm.webarena.policies import ReplayPolicy
from awm.webarena.workflow_run import EXECUTABLE_ACTIONS, not_executable

if TYPE_CHECKING:
    from awm.pipeline.config import PipelineConfig

REPLAYS_DIR = "replays"


class ReplayResult(BaseModel):
    """One replay: did the task succeed, the replay episode, and what went wrong if it did not."""

    ok: bool
    trajectory: Trajectory
    reason: str = ""  # "success", or why not (the sub-step that broke, or the page's verdict)


def replay_values(workflow: Workflow, source: Trajectory) -> dict[str, str]:
    """The values a replay of `workflow` on its source task gives for the parameters the goal does not
    state: read off the source's own steps (the step whose value, label or row is exactly that
    placeholder, matched in order by action and role; a row's value is the source row's whole text, which
    holds the part the placeholder stood for). Parameters it cannot find stay out (the replay then fails with
    'missing parameter', which is the truth: the workflow cannot be run on its own source)."""
    bound = bind_parameters(workflow, source.task.goal)
    wanted = open_parameters(workflow, bound)
    if not wanted:
        return {}
    steps = list(abstract_trajectory(source).steps)
    values: dict[str, str] = {}
    cursor = 0
    for wstep in workflow.steps:
        match = _next_match(steps, cursor, wstep)
        if match is None:
            continue
        cursor = match + 1
        recorded = steps[match]
        for template, actual in ((wstep.value, recorded.value), (wstep.target.label, recorded.label), (wstep.target.row, recorded.row)):
            whole = PLACEHOLDER.fullmatch(template.strip())
            if whole and whole.group(1) in wanted:
                values.setdefault(whole.group(1), actual)
    return {name: values[name] for name in wanted if name in values}


def _next_match(steps: Sequence[AbstractStep], start: int, wstep: WorkflowStep) -> int | None:
    for i in range(start, len(steps)):
        if steps[i].action == wstep.action and steps[i].role == wstep.target.role:
            return i
    return None


def recording_workflow(trajectory: Trajectory) -> tuple[Workflow, list[str]]:
    """The episode's executed actions as a workflow of literal steps (no parameters), and the steps that
    a replay cannot run (actions on no element, e.g. a message to the user), named for the printout."""
    steps: list[WorkflowStep] = []
    skipped: list[str] = []
    for step in abstract_trajectory(trajectory).steps:
        if step.action not in EXECUTABLE_ACTIONS or not step.role:
            skipped.append(f"{step.action} {step.value}".strip())
            continue
        for name in PLACEHOLDER.findall(step.value):  # a literal "{x}" typed on the page would read as one
            raise DataError(
                f"trajectory {trajectory.trajectory_id}: step value {step.value!r} holds {{{name}}}, "
                "which a workflow reads as a placeholder; this episode cannot be replayed as a workflow"
            )
        steps.append(WorkflowStep(action=step.action, target=step.target, value=step.value))
    workflow = Workflow(name=f"replay of {trajectory.trajectory_id}", description=trajectory.task.goal, steps=steps)
    return workflow, skipped


def replay_workflow(
    session: BrowserSession,
    workflow: Workflow,
    params: dict[str, str],
    source: Trajectory,
    *,
    on_step: StepCallback | None = None,
) -> ReplayResult:
    """Run `workflow` once on a fresh page of the source's task and seed; success by ground truth."""
    task = source.task.model_copy(update={"meta": {**source.task.meta, "max_steps": 1}})
    policy = ReplayPolicy(workflow, params, scope=source.task.scope)
    trajectory = run_episode(session, policy, task, HarnessConfig(max_steps=1), on_step=on_step)
    trajectory.meta["replay_of"] = source.trajectory_id
    detail = check_detail(trajectory)
    if is_success(trajectory):
        return ReplayResult(ok=True, trajectory=trajectory, reason=f"success ({detail})" if detail else "success")
    call = trajectory.workflow_calls[0] if trajectory.workflow_calls else None
    if call is not None and not call.completed:
        reason = f"replay stopped at {call.error}"
    elif call is None:
        first = next((s for s in trajectory.steps if s.error), None)
        reason = f"replay did not run: {first.error if first else trajectory.end}"
    else:
        raw = trajectory.verdict.raw_reward if trajectory.verdict.raw_reward is not None else trajectory.verdict.reward
        reason = f"every step ran, but the task did not succeed (reward {raw})"
        reason += f": {detail}" if detail else ""
    return ReplayResult(ok=False, trajectory=trajectory, reason=reason)


def check_detail(trajectory: Trajectory) -> str:
    """What the task's own success check said, in words, where the benchmark gives one (an arena site's
    check: "ticket #7: priority is 'high'"); empty elsewhere. Kept in the workflow's provenance so a
    reader sees what the replay proved, not only that it passed."""
    info = trajectory.meta.get("env_info")
    detail = info.get("check") if isinstance(info, dict) else None
    return " ".join(str(detail).split()) if detail else ""


def with_source_answer(workflow: Workflow, source: Trajectory) -> Workflow:
    """The workflow as its replay runs it: when the source ended by answering and the workflow does not
    (rule induction leaves an answer read off the page to the agent, `awm.induction.rule`), the source's
    own answer, as it was given, follows the workflow's last step. The replay then proves what the
    workflow is for: it leads to the page the source's answer was read from."""
    from awm.induction.abstraction import abstract_trajectory
    from awm.induction.rule import ANSWER_ACTIONS

    steps = abstract_trajectory(source).steps
    if not steps or steps[-1].action not in ANSWER_ACTIONS:
        return workflow
    if workflow.steps and workflow.steps[-1].action in ANSWER_ACTIONS:
        return workflow
    if PLACEHOLDER.search(steps[-1].value):  # it would read as a parameter: left out, the replay tells
        return workflow
    answer = WorkflowStep(action=steps[-1].action, value=steps[-1].value)
    return workflow.model_copy(update={"steps": [*workflow.steps, answer]})


class ReplayGate:
    """Admission by replay for one run: a browser of its own (opened on first use), each replay's
    trajectory saved under ``<run>/replays/``. Only the driver uses it, at commit points."""

    def __init__(self, run_dir: Path, browser: BrowserSettings) -> None:
        self.run_dir = Path(run_dir)
        self.browser = browser
        self._session: BrowserSession | None = None

    def check(self, workflow: Workflow, source: Trajectory) -> tuple[bool, str, str]:
        """(passed, reason, replay trajectory id) for one candidate on its source trajectory."""
        why = not_executable(workflow)
        if why is not None:
            return False, f"not executable: {why}", ""
        if self._session is None:
            self._session = BrowserSession(self.browser)
        replayed = with_source_answer(workflow, source)
        result = replay_workflow(self._session, replayed, replay_values(workflow, source), source)
        path = self.run_dir / REPLAYS_DIR / f"{result.trajectory.trajectory_id}.json"
        write_text_atomic(path, result.trajectory.to_json())
        return result.ok, result.reason, result.trajectory.trajectory_id

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


def verify_candidates(
    gate: ReplayGate,
    candidates: Sequence[Workflow],
    batch: Sequence[Trajectory],
    known: Sequence[Workflow] = (),
) -> tuple[list[Workflow], list[str]]:
    """The candidates whose replay on their source trajectory succeeded (with the replay in their
    provenance), and one line per refused candidate saying which sub-step broke or why. A part
    (`Provenance.part_of`) is a slice of its whole's run: admitted when its whole is, or when another
    admitted whole calls it (one part taught by two templates), with that replay.

    A candidate with the same steps as a workflow of `known` (the scope's head) that a replay already
    admitted is not replayed again: the merge keeps that workflow and only adds the candidate's
    trajectory to its provenance (`merge_workflows`, "same steps"), so a second replay could change
    nothing but the run's time. Online memory re-learns the workflow it just ran after every solved
    episode; on the arena each such replay costs ~12 s of a 2-core machine."""
    by_id = {t.trajectory_id: t for t in batch}
    library = {w.name: w for w in candidates}
    verified = {
        w.abstract_signature(): w for w in known if w.steps and w.provenance.replay_trajectory_id
    }
    passed: list[Workflow] = []
    refused: list[str] = []
    for workflow in candidates:
        if workflow.provenance.part_of:
            continue  # admitted with its whole, below
        same = verified.get(workflow.abstract_signature()) if workflow.steps else None
        if same is not None:
            provenance = workflow.provenance.model_copy(
                update={
                    "replay_trajectory_id": same.provenance.replay_trajectory_id,
                    "replay_verdict": f"same steps as '{same.name}', admitted by its replay",
                }
            )
            passed.append(workflow.model_copy(update={"provenance": provenance}))
            continue
        source = next((by_id[i] for i in workflow.provenance.trajectory_ids if i in by_id), None)
        if source is None:
            refused.append(f"{workflow.name}: its source trajectory is not in this batch")
            continue
        try:
            runnable = expand(workflow, library)  # a whole that calls its parts replays their steps
        except CompositionError as exc:
            refused.append(f"{workflow.name}: {exc}")
            continue
        ok, reason, replay_id = gate.check(runnable, source)
        provenance = workflow.provenance.model_copy(update={"replay_trajectory_id": replay_id, "replay_verdict": reason})
        if ok:
            passed.append(workflow.model_copy(update={"provenance": provenance}))
        else:
            refused.append(f"{workflow.name}: {reason}")
    wholes = {w.name: w.provenance for w in passed}
    calling = {callee: w.provenance for w in passed for callee in callees(w)}  # a part kept once, called by several
    for part in (w for w in candidates if w.provenance.part_of):
        whole = wholes.get(part.provenance.part_of) or calling.get(part.name)
        if whole is None:
            refused.append(f"{part.name}: a part of '{part.provenance.part_of}', which was not admitted")
            continue
        provenance = part.provenance.model_copy(
            update={"replay_trajectory_id": whole.replay_trajectory_id, "replay_verdict": f"with its whole: {whole.replay_verdict}"}
        )
        passed.append(part.model_copy(update={"provenance": provenance}))
    return passed, refused


class ArmWithGate(Protocol):
    """What `verify_for_arm` needs of an arm's context (`PipelineContext` is one)."""

    config: PipelineConfig

    def replay_gate(self) -> ReplayGate: ...


def verify_for_arm(
    ctx: ArmWithGate,
    candidates: Sequence[Workflow],
    admitted: Sequence[Trajectory],
    known: Sequence[Workflow] = (),
) -> tuple[list[Workflow], list[str]]:
    """`verify_candidates` when the arm asks for it (``verify = "replay"``), else every candidate as is.
    The one entry point of the online and offline commit paths; `known` is the scope's head."""
    if ctx.config.verify != "replay":
        return list(candidates), []
    return verify_candidates(ctx.replay_gate(), candidates, admitted, known)
