"""The ablation reports' statistics, pure: intervals, paired tests, per-task grouping, usage sums.

Both ablation reports (`awm.pipeline.report` for MiniWoB++/WebArena episodes, `awm.pipeline.mind2web_report`
for Mind2Web tasks) count the same way, so the counting lives here once, with no I/O and no rendering
(that is `awm.pipeline.results`); this is where the tests are dense.

The statistical unit is the task (`TaskRow.key`), never the episode or the step: repeats of one task
share its page, its difficulty and often its cached answers, and the steps of one task share its page
and its history, so pooling them as independent draws would narrow every interval without any new
evidence. With one run per task an arm's success interval is Wilson's over those runs; with repeats it
is a seeded bootstrap over tasks of the mean per-task rate, and paired tests compare per-task means.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

from pydantic import BaseModel

Z95 = 1.959963984540054
BOOTSTRAP_RESAMPLES = 2000
CI_WILSON = "wilson"  # one run per task: Wilson score interval over the runs
CI_TASK_BOOTSTRAP = "task-bootstrap"  # repeats: percentile bootstrap over tasks of per-task means
# Per-task means are ratios of small counts: two that differ are never closer than this, two that are
# equal may differ by float rounding (a metric's mean over steps, then over repeats).
TIE_TOLERANCE = 1e-9

Interval = tuple[float, float]
Usage = dict[str, dict[str, float]]  # component (actor, judge, induction) -> numeric usage fields


class TaskRow(Protocol):
    """One run of one task by one arm: what grouping, intervals and pairing read."""

    @property
    def arm(self) -> str: ...

    @property
    def key(self) -> str: ...

    @property
    def success(self) -> bool: ...


R = TypeVar("R", bound=TaskRow)


class PairedTest(BaseModel):
    """B minus A over paired tasks: the mean difference, its interval, and the sign test."""

    mean_diff: float | None = None
    ci95: Interval | None = None  # bootstrap over tasks of the mean difference
    b_wins: int = 0  # tasks where B's value is higher
    a_wins: int = 0
    ties: int = 0
    sign_test_p: float | None = None  # over tasks that differ


# --------------------------------------------------------------------------------------------------
# Intervals and tests
# --------------------------------------------------------------------------------------------------


def wilson_interval(successes: int, n: int, z: float = Z95) -> Interval | None:
    """Wilson score interval for a success rate (sane at 0/n and n/n, unlike the normal one)."""
    if n <= 0:
        return None
    p = successes / n
    denom = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


def sign_test_p(wins: int, losses: int) -> float | None:
    """Two-sided exact sign test on paired outcomes (ties dropped); None when every pair tied."""
    n = wins + losses
    if n == 0:
        return None
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1)) / 2**n
    return min(1.0, 2 * tail)


def _percentile_95(draws: list[float]) -> Interval:
    """The 2.5% and 97.5% points of bootstrap draws, read off the same way for every bootstrap."""
    draws.sort()
    return draws[int(0.025 * (len(draws) - 1))], draws[int(0.975 * (len(draws) - 1))]


def bootstrap_mean_ci(
    values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
) -> Interval | None:
    """Percentile bootstrap 95% interval of the mean (seeded, so a report is reproducible)."""
    if not values:
        return None
    rng = random.Random(seed)
    n = len(values)
    return _percentile_95([sum(rng.choice(values) for _ in range(n)) / n for _ in range(resamples)])


def bootstrap_ratio_ci(
    numerators: Sequence[float],
    denominators: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
) -> Interval | None:
    """Percentile bootstrap 95% interval of sum(numerators) / sum(denominators), resampling the pairs
    (tasks: each brings all its steps). Seeded and read off as `bootstrap_mean_ci` is."""
    pairs = [(float(a), float(b)) for a, b in zip(numerators, denominators, strict=True)]
    if not pairs or sum(b for _, b in pairs) <= 0:
        return None
    rng = random.Random(seed)
    ratios = []
    for _ in range(resamples):
        draw = [rng.choice(pairs) for _ in pairs]
        total = sum(b for _, b in draw)
        ratios.append(sum(a for a, _ in draw) / total if total else 0.0)
    return _percentile_95(ratios)


def x100(ci: Interval | None) -> Interval | None:
    """An interval of fractions as points (x100)."""
    return None if ci is None else (100 * ci[0], 100 * ci[1])


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


# --------------------------------------------------------------------------------------------------
# The task as the unit
# --------------------------------------------------------------------------------------------------


def rows_by_task(rows: Iterable[R]) -> dict[str, list[R]]:
    """Runs grouped by task key (first-seen order), the unit of every interval and paired test."""
    grouped: dict[str, list[R]] = {}
    for row in rows:
        grouped.setdefault(row.key, []).append(row)
    return grouped


def per_task_mean(by_task: Mapping[str, Sequence[R]], value: Callable[[R], float]) -> dict[str, float]:
    """Each task's mean of `value` over its repeats (every task then weighs the same)."""
    return {key: sum(value(r) for r in mine) / len(mine) for key, mine in by_task.items() if mine}


def succeeded(row: TaskRow) -> float:
    return float(row.success)


def success_interval(rows: Sequence[TaskRow]) -> tuple[Interval | None, str]:
    """95% interval of one arm's success rate, and its method (`CI_WILSON` or `CI_TASK_BOOTSTRAP`).

    With one run per task, runs are independent draws and Wilson's interval over them is right. When
    a task ran more than once, its repeats are not independent (same page, same difficulty, often the
    same cached answers), so the task is the unit: a seeded bootstrap over tasks of the mean per-task
    success rate.
    """
    by_task = rows_by_task(rows)
    if all(len(mine) == 1 for mine in by_task.values()):
        return wilson_interval(sum(r.success for r in rows), len(rows)), CI_WILSON
    return bootstrap_mean_ci(list(per_task_mean(by_task, succeeded).values())), CI_TASK_BOOTSTRAP


def success_counts(rows: Iterable[R], label: Callable[[R], str]) -> dict[str, dict[str, list[int]]]:
    """`label(row)` -> arm -> [successes, runs]: the per-task table and plot of both reports."""
    counts: dict[str, dict[str, list[int]]] = {}
    for row in rows:
        cell = counts.setdefault(label(row), {}).setdefault(row.arm, [0, 0])
        cell[0] += int(row.success)
        cell[1] += 1
    return counts


def paired_diffs(
    tasks_a: Mapping[str, Sequence[R]],
    tasks_b: Mapping[str, Sequence[R]],
    keys: Sequence[str],
    value: Callable[[R], float],
) -> list[float]:
    """Per paired task (`keys`, in order): B's mean of `value` over its repeats minus A's.

    Why not pair by repeat: repeat 2 of A has no more in common with repeat 2 of B than with repeat 1,
    and pairing (task, repeat) would count one task's repeats as independent evidence.
    """
    mean_a = per_task_mean({k: tasks_a[k] for k in keys}, value)
    mean_b = per_task_mean({k: tasks_b[k] for k in keys}, value)
    return [mean_b[k] - mean_a[k] for k in keys]


def paired_test(diffs: Sequence[float]) -> PairedTest:
    """The mean of per-task differences with its bootstrap interval over tasks, and the exact sign test
    over the tasks that differ (within `TIE_TOLERANCE` a difference is a tie)."""
    b_wins = sum(d > TIE_TOLERANCE for d in diffs)
    a_wins = sum(d < -TIE_TOLERANCE for d in diffs)
    return PairedTest(
        mean_diff=mean(diffs),
        ci95=bootstrap_mean_ci(diffs),
        b_wins=b_wins,
        a_wins=a_wins,
        ties=len(diffs) - b_wins - a_wins,
        sign_test_p=sign_test_p(b_wins, a_wins),
    )


# --------------------------------------------------------------------------------------------------
# Usage (what the model was asked for, per component)
# --------------------------------------------------------------------------------------------------


def merge_usage(*tables: Mapping[str, Mapping[str, float]]) -> Usage:
    """Usage tables (component -> fields) summed field by field; fields that are not numbers are dropped."""
    total: Usage = {}
    for table in tables:
        for component, fields in table.items():
            into = total.setdefault(component, {})
            for key, value in fields.items():
                if isinstance(value, int | float):
                    into[key] = into.get(key, 0) + value
    return total


def usage_tokens(fields: Mapping[str, float] | None) -> float:
    """Prompt plus completion tokens of one component's usage (0 when it made no call)."""
    return float((fields or {}).get("prompt_tokens", 0) + (fields or {}).get("completion_tokens", 0))
