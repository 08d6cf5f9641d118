"""Admission: which trajectories may teach memory, and (rule ``manual``) which induced workflows stay.

In `awm.evaluation` beside the success rule it applies (`awm.evaluation.success.verdict_passes`): what
counts as good and what may teach are decided in one place.

Why a separate step: AWM's users saw judges admit failed trajectories into memory, and results
joined to tasks by directory order. Here verdicts are joined by trajectory id or task key (never by
file order), an ``unknown`` judge label is never success, and every rejection carries its reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from pydantic import ValidationError

from awm.errors import DataError
from awm.evaluation.success import verdict_passes
from awm.memory.workflow import Workflow
from awm.trajectory import Trajectory, Verdict

AdmissionRule = Literal["gt", "judge", "both", "any", "all", "manual"]
ADMISSION_RULES: tuple[str, ...] = get_args(AdmissionRule)

# Asked once per candidate workflow under rule ``manual``: True keeps it.
ReviewPrompt = Callable[[Workflow], bool]


@dataclass
class AdmissionResult:
    """The admitted trajectories (with their joined verdicts) and, per rejected id, why."""

    admitted: list[Trajectory] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)

    @property
    def admitted_ids(self) -> list[str]:
        return [t.trajectory_id for t in self.admitted]


def check_rule(rule: str) -> AdmissionRule:
    """Validate an admission rule name given by a user."""
    if rule not in ADMISSION_RULES:
        raise DataError(f"admission rule '{rule}' is unknown; expected one of {', '.join(ADMISSION_RULES)}")
    return rule  # type: ignore[return-value]


def combine_verdicts(base: Verdict, extra: Verdict) -> Verdict:
    """A separate verdict file fills in or overrides what the trajectory recorded, field by field."""
    return Verdict(
        reward=extra.reward if extra.reward is not None else base.reward,
        judge=extra.judge if extra.judge is not None else base.judge,
        judge_reason=extra.judge_reason or base.judge_reason,
    )


def join_verdicts(trajectories: Sequence[Trajectory], verdicts: Mapping[str, Verdict]) -> dict[str, Verdict]:
    """Map each trajectory id to its separate verdict, joining by trajectory id first, then task key.

    A key that names no trajectory, or a task key shared by several trajectories, is an error that
    names the key: silently dropping or guessing is how memory got the wrong lessons before.
    """
    by_id = {t.trajectory_id: t for t in trajectories}
    by_task: dict[str, list[Trajectory]] = {}
    for t in trajectories:
        by_task.setdefault(t.task.key, []).append(t)
    joined: dict[str, Verdict] = {}
    for key, verdict in verdicts.items():
        if key in by_id:
            target = by_id[key]
        elif key in by_task:
            matches = by_task[key]
            if len(matches) > 1:
                ids = ", ".join(t.trajectory_id for t in matches)
                raise DataError(
                    f"verdict key '{key}' is a task key shared by trajectories {ids}; key verdicts by trajectory_id"
                )
            target = matches[0]
        else:
            raise DataError(f"verdict key '{key}' matches no trajectory id or task key among the inputs")
        if target.trajectory_id in joined:
            raise DataError(f"trajectory {target.trajectory_id} has two verdicts (one keyed '{key}')")
        joined[target.trajectory_id] = verdict
    return joined


def admit(
    trajectories: Sequence[Trajectory],
    rule: AdmissionRule | str,
    verdicts: Mapping[str, Verdict] | None = None,
) -> AdmissionResult:
    """Split trajectories into admitted and rejected under a rule; order of the input is kept.

    ``gt``: the full-reward rule of `awm.evaluation.success`; ``judge``: judge label success; ``both``/``any``: and/or of the two;
    ``all``: every trajectory teaches, with no verdict needed (AWM's online Mind2Web setting, where
    nothing is known at test time; its workflows say ``admission="all"`` in their provenance);
    ``manual``: every trajectory passes here and a person reviews the induced workflows instead
    (see `review_workflows`). Admitted trajectories carry the joined verdict.
    """
    rule = check_rule(rule)
    extra = join_verdicts(trajectories, verdicts or {})
    result = AdmissionResult()
    for trajectory in trajectories:
        verdict = trajectory.verdict
        if trajectory.trajectory_id in extra:
            verdict = combine_verdicts(verdict, extra[trajectory.trajectory_id])
            trajectory = trajectory.model_copy(update={"verdict": verdict})
        if rule in ("all", "manual") or verdict_passes(verdict, rule):
            result.admitted.append(trajectory)
        else:
            result.rejected[trajectory.trajectory_id] = _why_rejected(verdict, rule)
    return result


def _why_rejected(verdict: Verdict, rule: str) -> str:
    reward = "no reward" if verdict.reward is None else f"reward {verdict.reward:g}"
    judge = "no judge verdict" if verdict.judge is None else f"judge {verdict.judge}"
    return f"rule '{rule}' not met ({reward}, {judge})"


def review_workflows(
    candidates: Sequence[Workflow], prompt: ReviewPrompt | None, *, auto: bool = False
) -> tuple[list[Workflow], list[str]]:
    """Rule ``manual``: ask about each candidate workflow; returns (kept, names declined).

    With ``auto`` every candidate is kept without asking (for scripts); without a prompt and without
    ``auto`` nothing can be decided, which is an error rather than a silent accept.
    """
    if auto:
        return list(candidates), []
    if prompt is None:
        raise DataError("admission rule 'manual' needs a reviewer: answer the prompts, or pass --auto")
    kept, declined = [], []
    for workflow in candidates:
        if prompt(workflow):
            kept.append(workflow)
        else:
            declined.append(workflow.name)
    return kept, declined


def load_verdicts(path: Path) -> dict[str, Verdict]:
    """Read separate verdicts: a JSON object {key: verdict} or JSONL of {"trajectory_id"|"task_key", ...}.

    Keys are trajectory ids or task keys; `join_verdicts` decides which.
    """
    import json

    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise DataError(f"{path}: no such verdict file") from None
    records: list[tuple[str, dict]] = []
    stripped = text.lstrip()
    if stripped.startswith("{") and path.suffix != ".jsonl":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise DataError(f"{path}: not valid JSON: {exc}") from None
        if not all(isinstance(v, dict) for v in data.values()):
            raise DataError(f"{path}: expected an object mapping keys to verdict objects")
        records = [(str(k), v) for k, v in data.items()]
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise DataError(f"{path}: line {number}: not valid JSON: {exc}") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}: line {number}: expected a JSON object")
            key = row.pop("trajectory_id", None) or row.pop("task_key", None)
            if not key:
                raise DataError(f"{path}: line {number}: field 'trajectory_id' or 'task_key' is required")
            records.append((str(key), row))
    verdicts: dict[str, Verdict] = {}
    for key, row in records:
        row.pop("task_key", None)
        try:
            verdict = Verdict.model_validate(row)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            raise DataError(f"{path}: verdict '{key}': field '{where}': {first['msg']}") from None
        if key in verdicts:
            raise DataError(f"{path}: verdict key '{key}' appears twice")
        verdicts[key] = verdict
    return verdicts
