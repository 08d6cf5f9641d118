"""Judge audit: how far the LLM judge agrees with ground truth, where both exist.

Why it matters: when memory admits trajectories by the judge's word, the judge's false positives
become wrong workflows. The audit counts them (and names them) before anyone trusts the judge.

Positive means success: ground truth is success by the full-reward rule (`awm.evaluation.success`);
the judge's label is success, failure, or unknown. Unknown answers are counted apart and left out of
precision and accuracy (recall counts an unknown true success as not recognised); `coverage` says
what share of compared trajectories got a decided label.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, Field, computed_field

from awm.evaluation.success import ground_truth_success
from awm.trajectory import Trajectory


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


class JudgeAudit(BaseModel):
    """Confusion matrix of judge against ground truth, with the ids behind the errors."""

    total: int = 0  # trajectories given
    missing: int = 0  # without a ground-truth reward or without a judge label: not compared
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0
    unknown: int = 0
    unknown_gt_success: int = 0  # unknown answers where ground truth was success
    false_positive_ids: list[str] = Field(default_factory=list)
    false_negative_ids: list[str] = Field(default_factory=list)
    unknown_ids: list[str] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def compared(self) -> int:
        """Trajectories with both a reward and a judge label (unknown included)."""
        return self.tp + self.fp + self.fn + self.tn + self.unknown

    @computed_field  # type: ignore[prop-decorator]
    @property
    def precision(self) -> float | None:
        """Of the judge's successes, the share that truly succeeded (None when it called none)."""
        return _ratio(self.tp, self.tp + self.fp)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def recall(self) -> float | None:
        """Of the true successes, the share the judge called success: an unknown answer on a true success
        did not recognise it (the judge leaves the episodes its evidence does not settle unknown, so
        leaving those out would flatter it)."""
        return _ratio(self.tp, self.tp + self.fn + self.unknown_gt_success)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def accuracy(self) -> float | None:
        """Share of decided labels that match ground truth."""
        return _ratio(self.tp + self.tn, self.tp + self.fp + self.fn + self.tn)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def coverage(self) -> float | None:
        """Share of compared trajectories where the judge gave a parseable answer."""
        return _ratio(self.compared - self.unknown, self.compared)

    def to_markdown(self) -> str:
        """A small report: the matrix, the rates, and the ids of false positives and negatives."""

        def pct(value: float | None) -> str:
            return "n/a" if value is None else f"{100 * value:.1f}%"

        lines = [
            "## Judge audit against ground truth",
            "",
            f"{self.compared} of {self.total} trajectories compared ({self.missing} lack a reward or a judge label).",
            "",
            "| | ground truth success | ground truth failure |",
            "|---|---:|---:|",
            f"| judge success | {self.tp} (TP) | {self.fp} (FP) |",
            f"| judge failure | {self.fn} (FN) | {self.tn} (TN) |",
            f"| judge unknown | {self.unknown_gt_success} | {self.unknown - self.unknown_gt_success} |",
            "",
            "| precision | recall | accuracy | coverage |",
            "|---:|---:|---:|---:|",
            f"| {pct(self.precision)} | {pct(self.recall)} | {pct(self.accuracy)} | {pct(self.coverage)} |",
            "",
            "Precision and accuracy leave unknown answers out; recall counts an unknown true success as missed; "
            "unknown never counts as success.",
        ]
        for title, ids in (
            ("False positives", self.false_positive_ids),
            ("False negatives", self.false_negative_ids),
        ):
            if ids:
                lines += ["", f"{title} ({len(ids)}): " + ", ".join(f"`{i}`" for i in ids)]
        return "\n".join(lines) + "\n"


def audit(trajectories: Iterable[Trajectory]) -> JudgeAudit:
    """Count judge labels against ground truth over the trajectories that carry both."""
    result = JudgeAudit()
    for t in sorted(trajectories, key=lambda t: (t.task.key, t.trajectory_id)):
        result.total += 1
        truth_or_none, label = ground_truth_success(t.verdict), t.verdict.judge
        if truth_or_none is None or label is None:
            result.missing += 1
            continue
        truth = truth_or_none
        if label == "unknown":
            result.unknown += 1
            result.unknown_gt_success += int(truth)
            result.unknown_ids.append(t.trajectory_id)
        elif label == "success" and truth:
            result.tp += 1
        elif label == "success":
            result.fp += 1
            result.false_positive_ids.append(t.trajectory_id)
        elif truth:
            result.fn += 1
            result.false_negative_ids.append(t.trajectory_id)
        else:
            result.tn += 1
    return result
