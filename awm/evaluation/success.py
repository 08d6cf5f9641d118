"""What counts as success, stated once: the ground-truth rule, the judge fallback, the admission rules.

Why here and nowhere else: a report, a progress bar, an admission decision and a summary must agree on
what "solved" means. The rule is a FULL reward: BrowserGym's MiniWoB++ reward is `RAW_REWARD_GLOBAL > 0`,
which counts partial credit (a wrong card in find-greatest) as solved (BrowserGym issue 392), so the
raw reward is recorded beside it (`Verdict.raw_reward`) and success needs raw reward 1.0 where the
benchmark reports one, else reward 1.0. Without any reward (an open-ended page), the judge decides;
``unknown`` is never success.
"""

from __future__ import annotations

from typing import Literal

from awm.trajectory import Trajectory, Verdict

SuccessRule = Literal["gt", "judge", "both", "any"]
FULL_REWARD = 1.0
_EPSILON = 1e-9

SUCCESS_RULE = (
    "An episode is a success by ground truth when its full reward is reached: raw reward 1.0 where the "
    "benchmark reports one (MiniWoB++: RAW_REWARD_GLOBAL; partial credit is a failure), else reward 1.0. "
    "Episodes without a reward are judged by the LLM judge ('unknown' is never success). Every episode "
    "counts: an env_error, llm_error or timeout is a failure."
)


def ground_truth_success(verdict: Verdict) -> bool | None:
    """True/False by the full-reward rule; None when the benchmark gave no reward at all."""
    value = verdict.raw_reward if verdict.raw_reward is not None else verdict.reward
    if value is None:
        return None
    return value >= FULL_REWARD - _EPSILON


def verdict_passes(verdict: Verdict, rule: SuccessRule) -> bool:
    """Whether a verdict passes `rule`: gt (full reward), judge, both, any."""
    gt = ground_truth_success(verdict) is True
    judged = verdict.judge == "success"
    if rule == "gt":
        return gt
    if rule == "judge":
        return judged
    if rule == "both":
        return gt and judged
    if rule == "any":
        return gt or judged
    raise ValueError(f"unknown success rule '{rule}'; expected gt, judge, both or any")


def is_success(trajectory: Trajectory) -> bool:
    """Ground truth when the benchmark gave a reward, else the judge."""
    gt = ground_truth_success(trajectory.verdict)
    if gt is not None:
        return gt
    return trajectory.verdict.judge == "success"
