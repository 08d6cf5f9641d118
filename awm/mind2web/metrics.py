"""AWM's Mind2Web metrics: element accuracy, action F1, step success rate, task success rate.

Why a faithful copy: the published figures (DESIGN.md §5) were computed by AWM's ``eval_sample``; our
numbers are only comparable if a step is judged the same way. Per step:

- element correct: the predicted id equals the FIRST positive candidate's id (``match="awm"``, AWM and
  MindAct), or any positive candidate's id (``match="any"``, the lenient reading);
- action F1: F1 of the token sets of ``"OP value"`` (``"CLICK"`` alone for clicks; the gold op is
  ``operation.op``, where HOVER and ENTER are already CLICK). Tokens are split on whitespace, case kept,
  and a token is dropped when it is a substring of `string.punctuation` (AWM's ``x not in
  string.punctuation`` test, which also drops runs such as ``()``); both sides empty gives 1;
- step success: element correct, same op, and for TYPE/SELECT the exact same value (AWM compared the whole
  answer string ``OP [id] [value]`` to the gold one);
- a step with NO positive candidate is wrong on all three (AWM scores such a step 0 without asking the
  model: the target is not in the cleaned html, so no id could be right);
- a step without a prediction is wrong on all three; an unparseable answer likewise, and is listed;
- task success: every step of the task succeeded.

Macro = mean over tasks of the per-task means (AWM's ``calc_score.py``); micro = mean over all steps
(task success has no step-level version, so micro task success equals macro). Both are x100.
"""

from __future__ import annotations

import string
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Literal

from pydantic import BaseModel

from awm.errors import ActionParseError, ConfigError, DataError
from awm.mind2web.data import step_key
from awm.mind2web.predictions import Prediction, parse_prediction
from awm.mind2web.schema import ActionRecord, TaskRecord

MatchMode = Literal["awm", "any"]


class StepScore(BaseModel):
    """How one step was judged."""

    element_correct: bool
    action_f1: float
    step_success: bool
    parsed: bool


class Aggregate(BaseModel):
    """Averages x100 over a set of tasks (macro) or their steps (micro)."""

    element_accuracy: float
    action_f1: float
    step_success_rate: float
    task_success_rate: float
    n_tasks: int
    n_steps: int


class ScoreReport(BaseModel):
    """The scores of a set of predictions, overall and per website, domain and split."""

    match: str
    macro: Aggregate
    micro: Aggregate
    per_website: dict[str, Aggregate]
    per_domain: dict[str, Aggregate]
    per_split: dict[str, Aggregate]
    unparsed: list[str]


def _tokens(text: str) -> set[str]:
    return {t for t in text.split() if t not in string.punctuation}


def token_f1(pred: str, gold: str) -> float:
    """F1 of the two token sets, as AWM's ``calculate_f1``."""
    p, g = _tokens(pred), _tokens(gold)
    if not p and not g:
        return 1.0
    tp = len(p & g)
    if tp == 0:
        return 0.0
    precision, recall = tp / len(p), tp / len(g)
    return 2 * precision * recall / (precision + recall)


def _act_text(op: str, value: str) -> str:
    return op if op == "CLICK" else f"{op} {value}"


def _check_match(match: str) -> None:
    if match not in ("awm", "any"):
        raise ConfigError(f"match must be 'awm' or 'any'; got {match!r}")


def judge_step(action: ActionRecord, prediction: Prediction | None, *, match: MatchMode = "awm") -> StepScore:
    """Score an already parsed prediction (None: no usable answer) against the gold step."""
    _check_match(match)
    if prediction is None or not action.pos_candidates:
        return StepScore(
            element_correct=False, action_f1=0.0, step_success=False, parsed=prediction is not None
        )
    if match == "awm":
        element_correct = prediction.element_id == action.pos_candidates[0].backend_node_id
    else:
        element_correct = any(prediction.element_id == c.backend_node_id for c in action.pos_candidates)
    gold = action.operation
    f1 = token_f1(_act_text(prediction.op, prediction.value), _act_text(gold.op, gold.value))
    op_right = prediction.op == gold.op and (gold.op == "CLICK" or prediction.value == gold.value)
    return StepScore(
        element_correct=element_correct, action_f1=f1, step_success=element_correct and op_right, parsed=True
    )


def score_step(action: ActionRecord, prediction_text: str | None, *, match: MatchMode = "awm") -> StepScore:
    """Score one raw answer text (None: no prediction) against the gold step; never raises on bad text."""
    if prediction_text is None:
        return judge_step(action, None, match=match)
    try:
        prediction = parse_prediction(prediction_text)
    except ActionParseError:
        return StepScore(element_correct=False, action_f1=0.0, step_success=False, parsed=False)
    return judge_step(action, prediction, match=match)


class _Tally:
    """Running sums for one group of tasks."""

    def __init__(self) -> None:
        self.tasks: list[tuple[float, float, float, bool]] = []  # per-task means + task success
        self.steps = [0.0, 0.0, 0.0]
        self.n_steps = 0

    def add(self, steps: list[StepScore]) -> None:
        n = len(steps)
        ea = sum(s.element_correct for s in steps)
        f1 = sum(s.action_f1 for s in steps)
        ss = sum(s.step_success for s in steps)
        self.tasks.append((ea / n, f1 / n, ss / n, ss == n))
        self.steps[0] += ea
        self.steps[1] += f1
        self.steps[2] += ss
        self.n_steps += n

    def aggregates(self) -> tuple[Aggregate, Aggregate]:
        n_tasks = len(self.tasks)
        if n_tasks == 0:
            empty = Aggregate(
                element_accuracy=0.0,
                action_f1=0.0,
                step_success_rate=0.0,
                task_success_rate=0.0,
                n_tasks=0,
                n_steps=0,
            )
            return empty, empty
        sr = 100 * sum(t[3] for t in self.tasks) / n_tasks
        macro = Aggregate(
            element_accuracy=100 * sum(t[0] for t in self.tasks) / n_tasks,
            action_f1=100 * sum(t[1] for t in self.tasks) / n_tasks,
            step_success_rate=100 * sum(t[2] for t in self.tasks) / n_tasks,
            task_success_rate=sr,
            n_tasks=n_tasks,
            n_steps=self.n_steps,
        )
        micro = Aggregate(
            element_accuracy=100 * self.steps[0] / self.n_steps,
            action_f1=100 * self.steps[1] / self.n_steps,
            step_success_rate=100 * self.steps[2] / self.n_steps,
            task_success_rate=sr,
            n_tasks=n_tasks,
            n_steps=self.n_steps,
        )
        return macro, micro


def score_task(
    record: TaskRecord, predictions: Mapping[str, str], *, match: MatchMode = "awm"
) -> tuple[list[StepScore], list[str]]:
    """Per-step scores of one task, and the ``"key: raw text"`` of its unparseable answers."""
    steps: list[StepScore] = []
    unparsed: list[str] = []
    for action in record.actions:
        key = step_key(record.annotation_id, action.action_uid)
        text = predictions.get(key)
        result = score_step(action, text, match=match)
        if text is not None and not result.parsed:
            unparsed.append(f"{key}: {text}")
        steps.append(result)
    return steps, unparsed


def score(
    records: Iterable[TaskRecord], predictions: Mapping[str, str], *, match: MatchMode = "awm"
) -> ScoreReport:
    """Score predictions (raw answer text keyed by `step_key`) against a stream of gold task records.

    Every step of every record is scored (a missing prediction counts as wrong); a prediction whose key is
    no step of the records raises `DataError` naming it, since it means the wrong split or a mangled key.
    """
    _check_match(match)
    overall = _Tally()
    groups: dict[str, dict[str, _Tally]] = {
        "website": defaultdict(_Tally),
        "domain": defaultdict(_Tally),
        "split": defaultdict(_Tally),
    }
    unparsed: list[str] = []
    seen: set[str] = set()
    for record in records:
        steps, bad = score_task(record, predictions, match=match)
        unparsed.extend(bad)
        seen.update(step_key(record.annotation_id, a.action_uid) for a in record.actions)
        overall.add(steps)
        groups["website"][record.website].add(steps)
        groups["domain"][record.domain].add(steps)
        groups["split"][record.split].add(steps)
    unknown = [k for k in predictions if k not in seen]
    if unknown:
        shown = ", ".join(repr(k) for k in unknown[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise DataError(
            f"{len(unknown)} prediction(s) name no step of the scored records: {shown}{more}; "
            "expected keys '<annotation_id>_<action_uid>' of the chosen split"
        )
    macro, micro = overall.aggregates()

    def per(name: str) -> dict[str, Aggregate]:
        return {k: v.aggregates()[0] for k, v in sorted(groups[name].items())}

    return ScoreReport(
        match=match,
        macro=macro,
        micro=micro,
        per_website=per("website"),
        per_domain=per("domain"),
        per_split=per("split"),
        unparsed=unparsed,
    )
