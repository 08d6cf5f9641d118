"""Offline induction driver: load trajectories, admit, induce, merge with memory's head, commit.

Why a driver separate from the inducers: the inducers are pure (trajectories in, workflows out);
this shell owns the I/O: reading run folders, JSONL datasets and legacy AWM text logs (parsed with
the safe action parser, never eval), and the one write, a compare-and-swap commit through
`WorkflowStore.update`. An empty or rejected induction commits nothing: AWM once overwrote memory
with zero workflows because its inducer read the wrong file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, ValidationError

from awm.errors import AwmError, DataError
from awm.induction.abstraction import parse_action_text
from awm.induction.admission import (
    AdmissionRule,
    ReviewPrompt,
    admit,
    check_rule,
    join_verdicts,
    review_workflows,
)
from awm.induction.merge import MergeReport, merge_workflows
from awm.induction.neural import DEFAULT_BUDGET_TOKENS, DEFAULT_MAX_TOKENS, InductionError, induce_neural
from awm.induction.rule import induce_rule
from awm.memory.store import MemoryVersion, WorkflowDiff, WorkflowStore, diff_workflows
from awm.memory.workflow import Workflow
from awm.trajectory import Step, Task, Trajectory, Verdict, load_trajectories

if TYPE_CHECKING:
    from awm.llm.base import LLMClient
    from awm.memory.embeddings import Embedder
    from awm.tokens import TokenCounter

Mode = Literal["neural", "rule"]
MODES: tuple[str, ...] = ("neural", "rule")

LEGACY_SUFFIXES = (".log", ".txt")
_LOGGER_MARKER = re.compile(r"^.*?\s-\s(?:INFO|DEBUG|WARNING)\s-\s")
_CALL_LIKE = re.compile(r"^(?:[a-z_][a-z0-9_]*\s*\(|(?:CLICK|TYPE|SELECT)\s*\[)")
_LABEL_ONLY = re.compile(r"^(?:actions?|thoughts?|think)\s*:?\s*$", re.IGNORECASE)
_GOAL_LINE = re.compile(r"^(?:goal|query|intent|task)\s*:\s*(?P<goal>.+)$", re.IGNORECASE)
MAX_LEGACY_THOUGHT_CHARS = 1000


class InductionReport(BaseModel):
    """Everything a reader needs to trust (or doubt) one induction run."""

    scope: str
    mode: str
    admission: str
    loaded: int = 0
    out_of_scope: list[str] = Field(default_factory=list)
    admitted_ids: list[str] = Field(default_factory=list)
    rejected: dict[str, str] = Field(default_factory=dict)  # trajectory id -> why not admitted
    skipped_empty: list[str] = Field(default_factory=list)  # admitted but with no executed step
    declined: list[str] = Field(default_factory=list)  # workflow names a reviewer declined (manual)
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    batches: list[list[str]] = Field(default_factory=list)
    answer_rejections: list[str] = Field(default_factory=list)  # neural: blocks/workflows not used, why
    merge: MergeReport = Field(default_factory=MergeReport)
    notes: list[str] = Field(default_factory=list)


@dataclass
class InductionResult:
    """The new head (None when nothing changed or on a dry run), its diff, and what was induced."""

    new_version: MemoryVersion | None
    diff: WorkflowDiff | None
    candidates: list[Workflow]
    admitted_ids: list[str]
    report: InductionReport
    merged: list[Workflow] = field(default_factory=list)  # the scope's workflows after merging


# --- loading ----------------------------------------------------------------------------------------


def _sorted(trajectories: list[Trajectory]) -> list[Trajectory]:
    return sorted(trajectories, key=lambda t: (t.task.key, t.trajectory_id))


def _validate(data: object, where: str) -> Trajectory:
    try:
        return Trajectory.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise DataError(f"{where}: field '{loc}': {first['msg']}") from None


def load_jsonl(path: Path) -> list[Trajectory]:
    """A dataset file: one trajectory JSON object per line (blank lines allowed)."""
    out = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise DataError(f"{path}: line {number}: not valid JSON ({exc})") from None
        out.append(_validate(data, f"{path}: line {number}"))
    return out


def parse_legacy_log(text: str, *, task_id: str, scope: str, source: str = "<log>") -> Trajectory:
    """An AWM/BrowserGym text log -> a trajectory; action lines are parsed safely, never evaluated.

    Lines that parse as one whitelisted action (``click('12')``, ``CLICK [12]``) become steps; the
    text logged just before an action is its thought; a ``Goal:``/``Query:``/``Intent:`` line is the
    goal. Lines that look like calls but are not whitelisted actions (``__import__(...)``) are kept
    out and counted in ``meta.skipped_lines``. Targets are unknown (logs hold only element ids).
    """
    steps: list[Step] = []
    thought: list[str] = []
    goal = ""
    skipped = 0
    for raw in text.splitlines():
        line = _LOGGER_MARKER.sub("", raw.strip(), count=1).strip()
        if not line or _LABEL_ONLY.match(line):
            continue
        match = _GOAL_LINE.match(line)
        if match and not goal:
            goal = match["goal"].strip()
            continue
        if _CALL_LIKE.match(line):
            try:
                action = parse_action_text(line, where=f"{source}")
            except DataError:
                skipped += 1
                continue
            steps.append(
                Step(
                    index=len(steps),
                    thought=" ".join(thought)[-MAX_LEGACY_THOUGHT_CHARS:],
                    action=action,
                    action_str=line,
                )
            )
            thought = []
        else:
            thought.append(line)
    return Trajectory(
        trajectory_id=f"legacy:{task_id}",
        task=Task(task_id=task_id, goal=goal, scope=scope, benchmark="legacy"),
        steps=steps,
        end="done",
        meta={"source": source, "skipped_lines": skipped},
    )


def _legacy_trajectory(path: Path, scope: str) -> Trajectory:
    """One legacy log file; `summary_info.json` beside it (AWM's layout) gives the reward."""
    task_id = path.parent.name if path.name == "experiment.log" else path.stem
    trajectory = parse_legacy_log(
        path.read_text(errors="replace"), task_id=task_id, scope=scope, source=str(path)
    )
    summary = path.parent / "summary_info.json"
    if summary.is_file():
        try:
            reward = json.loads(summary.read_text()).get("cum_reward")
        except (ValueError, AttributeError):
            raise DataError(f"{summary}: expected a JSON object with 'cum_reward'") from None
        if reward is not None:
            trajectory = trajectory.model_copy(update={"verdict": Verdict(reward=float(reward))})
    return trajectory


def load_inputs(path: Path, *, scope: str) -> list[Trajectory]:
    """Trajectories from a run folder, a JSONL/JSON dataset or legacy text logs, sorted by task key.

    A folder is read as JSON trajectories (`load_trajectories`); if it holds none, its ``*.log`` and
    ``*.txt`` files are read as legacy logs (their scope is `scope`). Never by directory order.
    """
    path = Path(path)
    if path.is_dir():
        found = load_trajectories(path)
        if not found:
            logs = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in LEGACY_SUFFIXES)
            found = [_legacy_trajectory(p, scope) for p in logs]
        if not found:
            raise DataError(f"{path}: no trajectory JSON files and no legacy .log/.txt logs found")
        return _sorted(found)
    if not path.is_file():
        raise DataError(f"{path}: no such run folder or dataset file")
    if path.suffix == ".jsonl":
        return _sorted(load_jsonl(path))
    if path.suffix == ".json":
        try:
            data = json.loads(path.read_text())
        except ValueError as exc:
            raise DataError(f"{path}: not valid JSON ({exc})") from None
        items = data if isinstance(data, list) else [data]
        return _sorted([_validate(item, f"{path}: item {i}") for i, item in enumerate(items)])
    if path.suffix in LEGACY_SUFFIXES:
        return [_legacy_trajectory(path, scope)]
    raise DataError(f"{path}: expected a run folder, a .jsonl/.json dataset or a .log/.txt legacy log")


def in_scope(trajectory: Trajectory, scope: str) -> bool:
    """A scope holds its own trajectories and those of its sub-scopes (``miniwob`` holds ``miniwob/x``)."""
    own = trajectory.task.scope
    return own == scope or own.startswith(scope.rstrip("/") + "/")


# --- diff preview -----------------------------------------------------------------------------------


def preview_diff(
    scope: str, a: int, b: int, before: Sequence[Workflow], after: Sequence[Workflow]
) -> WorkflowDiff:
    """The store's diff, computed on lists (for a dry run, or a scope's first version which has no `a`)."""
    return diff_workflows(scope, a, b, before, after)


# --- the driver -------------------------------------------------------------------------------------


class _NoChange(Exception):
    """Raised inside a store update to abort it when merging changes nothing."""


def induce_into_store(
    store: WorkflowStore,
    scope: str,
    trajectories: Sequence[Trajectory],
    *,
    mode: Mode | str,
    admission: AdmissionRule | str,
    client: LLMClient | None = None,
    verdicts: dict[str, Verdict] | None = None,
    embedder: Embedder | None = None,
    threshold: float = 0.9,
    counter: TokenCounter | None = None,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    review: ReviewPrompt | None = None,
    auto: bool = False,
    dry_run: bool = False,
) -> InductionResult:
    """Admit, induce, merge with the scope's head and commit (author = mode) unless nothing changed.

    Raises `InductionError` (nothing committed) when no trajectory is admitted or the model's answer
    yields no usable workflow. ``dry_run`` computes everything, including the diff, and commits nothing.
    """
    if mode not in MODES:
        raise AwmError(f"induction mode '{mode}' is unknown; expected one of {', '.join(MODES)}")
    rule = check_rule(admission)
    report = InductionReport(scope=scope, mode=mode, admission=rule, loaded=len(trajectories))
    selected = [t for t in trajectories if in_scope(t, scope)]
    report.out_of_scope = [t.trajectory_id for t in trajectories if not in_scope(t, scope)]
    if not selected:
        raise InductionError(
            f"none of the {len(trajectories)} trajectories is in scope '{scope}'"
            + (
                f" (their scopes: {', '.join(sorted({t.task.scope for t in trajectories}))})"
                if trajectories
                else ""
            )
        )
    admitted = admit(selected, rule, _verdicts_in_scope(verdicts, trajectories, selected))
    report.admitted_ids = admitted.admitted_ids
    report.rejected = admitted.rejected
    if not admitted.admitted:
        raise InductionError(
            f"no trajectory in scope '{scope}' passes admission rule '{rule}' "
            f"({len(admitted.rejected)} rejected); memory is unchanged"
        )

    if mode == "rule":
        candidates, rule_report = induce_rule(admitted.admitted, admission=rule)
        report.skipped_empty = rule_report.skipped_empty
        if not candidates:
            raise InductionError(
                f"no admitted trajectory in scope '{scope}' has an executed step; memory is unchanged"
            )
    else:
        if client is None:
            raise AwmError("neural induction needs an LLM client (configure a backend, see `awm llm --help`)")
        candidates, neural = induce_neural(
            admitted.admitted,
            client=client,
            admission=rule,
            counter=counter,
            budget_tokens=budget_tokens,
            max_tokens=max_tokens,
            embedder=embedder,
            threshold=threshold,
        )
        report.llm_calls = neural.calls
        report.prompt_tokens = neural.prompt_tokens
        report.completion_tokens = neural.completion_tokens
        report.batches = neural.batches
        report.answer_rejections = neural.rejected
        report.notes += [
            f"trajectory {tid} shown with shortened thoughts (level {lvl})"
            for tid, lvl in neural.shrunk.items()
        ]

    if rule == "manual":
        candidates, report.declined = review_workflows(candidates, review, auto=auto)
        if not candidates:
            report.notes.append("the reviewer declined every candidate workflow")

    head = store.head(scope)
    base = [] if head is None else head.workflows
    base_version = 0 if head is None else head.version
    merged, merge_report = merge_workflows(base, candidates, embedder=embedder, threshold=threshold)
    report.merge = merge_report
    if not merge_report.changed:
        return InductionResult(None, None, candidates, admitted.admitted_ids, report, merged)
    if dry_run:
        diff = preview_diff(scope, base_version, base_version + 1, base, merged)
        return InductionResult(None, diff, candidates, admitted.admitted_ids, report, merged)

    final: dict[str, object] = {}

    def change(current: list[Workflow]) -> list[Workflow]:
        workflows, again = merge_workflows(current, candidates, embedder=embedder, threshold=threshold)
        if not again.changed:
            raise _NoChange
        final["report"] = again
        return workflows

    message = f"{mode} induction from {len(admitted.admitted)} trajectories (admission {rule})"
    try:
        version = store.update(scope, change, author=mode, message=message)
    except _NoChange:
        return InductionResult(None, None, candidates, admitted.admitted_ids, report, base)
    report.merge = final["report"]  # type: ignore[assignment]
    if version.parent is None:
        diff = preview_diff(scope, 0, version.version, [], version.workflows)
    else:
        diff = store.diff(scope, version.parent, version.version)
    return InductionResult(version, diff, candidates, admitted.admitted_ids, report, version.workflows)


def _verdicts_in_scope(
    verdicts: dict[str, Verdict] | None, everything: Sequence[Trajectory], selected: Sequence[Trajectory]
) -> dict[str, Verdict] | None:
    """Verdicts for trajectories of other scopes are dropped (they are known, just not used here);
    a key that matches nothing at all is still an error, raised by `admit` via `join_verdicts`."""
    if not verdicts:
        return verdicts
    joined = join_verdicts(everything, verdicts)
    keep = {t.trajectory_id for t in selected}
    return {tid: v for tid, v in joined.items() if tid in keep}
