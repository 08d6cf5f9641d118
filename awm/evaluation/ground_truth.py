"""Ground truth: the benchmark's own reward turned into a `Verdict`, in one place.

BrowserGym reports a float reward per episode (MiniWoB++: 1.0 solved, 0.0 not; some tasks give
partial credit). What counts as success is `awm.evaluation.success` (a full reward).
"""

from __future__ import annotations

import math

from awm.errors import DataError
from awm.trajectory import Verdict


def verdict_from_reward(reward: float | None) -> Verdict:
    """A verdict holding the reward (None when the benchmark gave none: then only a judge can tell).

    A NaN or infinite reward is a broken environment, not a result, so it raises `DataError`.
    """
    if reward is None:
        return Verdict()
    value = float(reward)
    if not math.isfinite(value):
        raise DataError(f"ground-truth reward {reward!r} is not a finite number")
    return Verdict(reward=value)
