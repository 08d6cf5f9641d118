"""Evaluation: ground-truth rewards, the LLM judge (text or vision), and the judge's audit against ground truth."""

from __future__ import annotations

from .audit import JudgeAudit, audit
from .ground_truth import verdict_from_reward
from .judge import judge_trajectory, parse_judge_answer

__all__ = [
    "JudgeAudit",
    "audit",
    "judge_trajectory",
    "parse_judge_answer",
    "verdict_from_reward",
]
