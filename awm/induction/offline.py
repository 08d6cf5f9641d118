"""Induction from stored trajectories (`awm induce`, Mind2Web's runs): load, admit, induce, commit.

Why a shell separate from the inducers: the inducers are pure (trajectories in, workflows out); this
shell owns the I/O: reading run folders, JSONL datasets and legacy AWM text logs (parsed with the safe
action parser, never eval), and the one write, through `awm.induction.commit.commit_candidates` (the
one commit path: idempotent by message, merged with the head, no version when nothing changed). An
empty or rejected induction commits nothing: AWM once overwrote memory with zero workflows because
its inducer read the wrong file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field, ValidationError

from awm.errors import AwmError, DataError
from awm.evaluation.admission import (
    AdmissionRule,
    ReviewPrompt,
    admit,
    check_rule,
    join_verdicts,
    review_workflows,
)
from awm.induction.abstraction import parse_action_text
from awm.induction.commit import CommitResult, commit_candidates, committed_before
from awm.induction.merge import MergeReport
from awm.induction.neural import DEFAULT_BUDGET_TOKENS, DEFAULT_MAX_TOKENS, InductionError, induce_neural
from awm.induction.rule import induce_rule
from awm.memory.store import WorkflowStore
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
# What induction reads of a trajectory (not its timestamps or meta): the fields `inputs_digest` hashes.
_TAUGHT_FIELDS = {"trajectory_id", "task", "steps", "end", "final_answer", "verdict"}


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
    """What the commit point did (`commit`: version, diff, merged workflows), what was induced, and why."""

    commit: CommitResult
    candidates: list[Workflow]
    admitted_ids: list[str]
    report: InductionReport


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


# --- the driver -------------------------------------------------------------------------------------


def inputs_digest(trajectories: Sequence[Trajectory], *, mode: str, admission: str, model: str = "") -> str:
    """A short hash of what an induction learns from: the admitted trajectories (what induction reads of
    them, not their timestamps), the mode, the admission rule and the model. It goes into the default
    commit message, which is the idempotency key of `commit_candidates`: re-running the same induction
    returns the version it made instead of committing again, and other inputs never look "done"."""
    digest = hashlib.blake2b(digest_size=6)
    digest.update(json.dumps([mode, admission, model]).encode())
    for trajectory in sorted(trajectories, key=lambda t: t.trajectory_id):
        digest.update(trajectory.model_dump_json(include=_TAUGHT_FIELDS).encode())
    return digest.hexdigest()


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
    author: str | None = None,
    message: str | None = None,
) -> InductionResult:
    """Admit, induce, and commit through `commit_candidates` (merged with the head; no version if unchanged).

    `author` defaults to the mode; `message` (the commit point, the idempotency key) to one naming the
    inputs (`inputs_digest`). When a version with that message exists, it is returned (as already
    committed) before any model call. Raises `InductionError` (nothing committed) when no trajectory is
    admitted or the model's answer yields no usable workflow. ``dry_run`` computes everything,
    including the diff, and commits nothing.
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
    if mode == "neural" and client is None:
        raise AwmError("neural induction needs an LLM client (configure a backend, see `awm llm --help`)")
    if message is None:
        model = client.model if mode == "neural" and client is not None else ""
        digest = inputs_digest(admitted.admitted, mode=mode, admission=rule, model=model)
        message = (
            f"{mode} induction from {len(admitted.admitted)} trajectories (admission {rule}; inputs {digest})"
        )
    done = committed_before(store, scope, message)
    if done is not None:  # this very induction was committed before: no model call, no second version
        return InductionResult(done, [], admitted.admitted_ids, report)

    candidates = _induce(
        admitted.admitted, mode, rule, report, client, counter, budget_tokens, max_tokens, embedder, threshold
    )
    if rule == "manual":
        candidates, report.declined = review_workflows(candidates, review, auto=auto)
        if not candidates:
            report.notes.append("the reviewer declined every candidate workflow")

    commit = commit_candidates(
        store,
        scope,
        candidates,
        author=author or mode,
        message=message,
        embedder=embedder,
        threshold=threshold,
        dry_run=dry_run,
    )
    report.merge = commit.merge
    return InductionResult(commit, candidates, admitted.admitted_ids, report)


def _induce(
    admitted: list[Trajectory],
    mode: str,
    rule: str,
    report: InductionReport,
    client: LLMClient | None,
    counter: TokenCounter | None,
    budget_tokens: int,
    max_tokens: int,
    embedder: Embedder | None,
    threshold: float,
) -> list[Workflow]:
    """The pure step, trajectories in and candidate workflows out; the inducer's figures go to `report`."""
    if mode == "rule":
        candidates, rule_report = induce_rule(admitted, admission=rule)
        report.skipped_empty = rule_report.skipped_empty
        if not candidates:
            raise InductionError(
                f"no admitted trajectory in scope '{report.scope}' has an executed step; memory is unchanged"
            )
        return candidates
    assert client is not None  # checked by the caller
    candidates, neural = induce_neural(
        admitted,
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
        f"trajectory {tid} shown with shortened thoughts (level {lvl})" for tid, lvl in neural.shrunk.items()
    ]
    return candidates


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
