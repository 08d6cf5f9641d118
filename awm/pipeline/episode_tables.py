"""The tables the benchmark scripts print over a run folder's episodes: per group (a task, an arena
template) the episodes solved, mean steps, model calls and prompt tokens per step, seconds per episode
and how episodes ended; overall the same; and the failure anatomy of the failed episodes (how they
ended, the failure classes of steps, the actions repeated within one episode, the parse refusals).

Why here and not in each script: `scripts/bench_miniwob.py` and `scripts/bench_sites.py` read their
runs the same way, and a figure that means one thing in one table must mean it in the other.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path

from awm.evaluation.success import is_success
from awm.trajectory import Trajectory, load_trajectory, repeats_of

TOP = 10
_BID = re.compile(r"'\d+'")


def latest_trajectories(run_dir: Path) -> list[Trajectory]:
    """The last attempt of each task key in a run folder's trajectories/ (what the summary counts)."""
    latest: dict[str, Trajectory] = {}
    for path in sorted((Path(run_dir) / "trajectories").glob("*.json")):
        trajectory = load_trajectory(path)
        kept = latest.get(trajectory.task.key)
        if kept is None or trajectory.started_at >= kept.started_at:
            latest[trajectory.task.key] = trajectory
    return [latest[k] for k in sorted(latest)]


def p95(values: list[float]) -> float:
    """The 95th percentile (nearest rank), 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def step_costs(trajectories: list[Trajectory]) -> dict:
    """What the model's steps cost (steps with a model call; a workflow's sub-steps have none): model
    seconds and prompt tokens per step, median and p95, and the share of prompt tokens the model server
    reused from its prefix cache (the rest it processed, which is most of a step's time on a CPU)."""
    called = [s for t in trajectories for s in t.steps if s.llm_calls]
    seconds = [s.timings_ms.get("llm", 0.0) / 1000.0 for s in called]
    tokens = [float(s.prompt_tokens) for s in called]
    prompt = sum(tokens)
    return {
        "model_steps": len(called),
        "model_s_per_step_median": statistics.median(seconds) if seconds else 0.0,
        "model_s_per_step_p95": p95(seconds),
        "prompt_tokens_per_step_median": statistics.median(tokens) if tokens else 0.0,
        "prompt_tokens_per_step_p95": p95(tokens),
        "prompt_tokens_reused": sum(s.cached_prompt_tokens for s in called),
        "reused_fraction": sum(s.cached_prompt_tokens for s in called) / prompt if prompt else 0.0,
    }


def step_cost_line(figures: dict) -> str:
    """`step_costs` in one sentence, for a bench's report."""
    return (
        f"Model steps: {figures['model_s_per_step_median']:.1f} s median, {figures['model_s_per_step_p95']:.1f} s p95; "
        f"prompt tokens {figures['prompt_tokens_per_step_median']:,.0f} median, "
        f"{figures['prompt_tokens_per_step_p95']:,.0f} p95; {100 * figures['reused_fraction']:.0f}% of prompt tokens "
        "reused from the model server's prefix cache."
    )


def overall(trajectories: list[Trajectory]) -> dict:
    """Episodes, solved, success rate, steps, model calls and prompt tokens per step, s per episode, and
    what the model's steps cost (`step_costs`)."""
    steps = sum(len(t.steps) for t in trajectories)
    n = len(trajectories)
    solved = sum(is_success(t) for t in trajectories)
    return {
        "episodes": n,
        "solved": solved,
        "success_rate": solved / n if n else None,
        "steps": steps,
        "calls_per_step": sum(s.llm_calls for t in trajectories for s in t.steps) / steps if steps else 0.0,
        "prompt_tokens_per_step": sum(t.prompt_tokens for t in trajectories) / steps if steps else 0.0,
        "seconds_per_episode": sum(t.seconds for t in trajectories) / n if n else 0.0,
        **step_costs(trajectories),
    }


def group_rows(trajectories: list[Trajectory], group: Callable[[Trajectory], str], label: str) -> list[dict]:
    """`overall` per group (keyed `label`), with mean steps and how the group's episodes ended."""
    by_group: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajectories:
        by_group[group(t)].append(t)
    rows = []
    for name in sorted(by_group):
        mine = by_group[name]
        figures = overall(mine)
        rows.append({
            label: name,
            **figures,
            "mean_steps": figures["steps"] / len(mine),
            "ends": dict(Counter(t.end for t in mine)),
        })  # fmt: skip
    return rows


def filter_episodes(episodes: Mapping[str, Trajectory]) -> dict[str, tuple[int, set[str]]]:
    """Per guidance filter that acted in these episodes (key -> episode; `Step.guidance`): the model steps
    it acted on and the keys of the episodes it acted in, most steps first."""
    steps: Counter[str] = Counter()
    acted_in: dict[str, set[str]] = {}
    for key, t in episodes.items():
        for s in t.steps:
            for name in s.guidance:
                steps[name] += 1
                acted_in.setdefault(name, set()).add(key)
    return {name: (n, acted_in[name]) for name, n in steps.most_common()}


def guidance_acted(trajectories: list[Trajectory]) -> dict[str, str]:
    """Per guidance filter that acted in these episodes (`filter_episodes`): on how many of the model's
    steps, in how many episodes, and how many of those episodes were solved. A filter that never acts on
    a benchmark cannot help there; one that acts only in episodes lost anyway has not shown that it does."""
    solved = {t.trajectory_id for t in trajectories if is_success(t)}
    acted = filter_episodes({t.trajectory_id: t for t in trajectories})
    return {
        name: f"{n} steps in {len(keys)} episodes ({len(keys & solved)} solved)" for name, (n, keys) in acted.items()
    }


def first_repetition(trajectory: Trajectory) -> int | None:
    """The index of the episode's first model step that repeats an earlier step that worked
    (`awm.trajectory.repeat_key`), or None."""
    model_steps = [s for s in trajectory.steps if s.called_by is None]
    return next((s.index for n, s in enumerate(model_steps) if repeats_of(model_steps[:n], s)), None)


def repetitions(trajectories: list[Trajectory]) -> dict[str, int]:
    """What the steps after an episode's first repetition bought: how many episodes repeated themselves,
    how many of those were solved anyway, and how many model steps (and their prompt tokens) came at or
    after the first repetition."""
    repeated = [(t, i) for t in trajectories if (i := first_repetition(t)) is not None]
    after = [s for t, i in repeated for s in t.steps if s.called_by is None and s.index >= i]
    return {
        "episodes": len(repeated),
        "solved": sum(is_success(t) for t, _ in repeated),
        "model_steps_after": len(after),
        "prompt_tokens_after": sum(s.prompt_tokens for s in after),
    }


def anatomy(trajectories: list[Trajectory], group: Callable[[Trajectory], str]) -> dict:
    """Where the failed episodes went wrong: ends, step failure classes, repeated actions, parse refusals;
    and which guidance filters acted (all episodes)."""
    failed = [t for t in trajectories if not is_success(t)]
    repeated: Counter[str] = Counter()
    for t in failed:
        actions = Counter(_BID.sub("'ID'", s.action_str) for s in t.steps if s.action_str)
        for action, n in actions.items():
            if n >= 2:
                repeated[f"{group(t)}: {action}"] += n
    refusals = Counter(
        s.error.split(";")[0][:90] for t in trajectories for s in t.steps if s.outcome == "parse_error"
    )
    return {
        "failed_episodes": len(failed),
        "ends_of_failed": dict(Counter(t.end for t in failed).most_common()),
        "failure_classes": dict(Counter(s.outcome for t in trajectories for s in t.steps if s.outcome != "ok").most_common()),
        "repeated_actions": dict(repeated.most_common(TOP)),
        "parse_refusals": dict(refusals.most_common(TOP)),
        "guidance_acted": guidance_acted(trajectories),
        "repetitions": repetitions(trajectories),
    }  # fmt: skip


def anatomy_lines(causes: dict) -> list[str]:
    """The anatomy as markdown sections."""
    lines = [f"## Failure anatomy ({causes['failed_episodes']} failed episodes)", ""]
    if "repetitions" in causes:
        r = causes["repetitions"]
        lines += [
            f"Repeated themselves (an act that had worked, done again): {r['episodes']} episodes, {r['solved']} of "
            f"them solved; {r['model_steps_after']} model steps ({r['prompt_tokens_after']:,} prompt tokens) at or "
            "after the first repetition.",
            "",
        ]
    for title, key in (
        ("How failed episodes ended", "ends_of_failed"),
        ("Step failure classes (all episodes)", "failure_classes"),
        ("Actions repeated within one failed episode (bids as ID)", "repeated_actions"),
        ("Parse refusals", "parse_refusals"),
        ("Guidance filters that acted (all episodes)", "guidance_acted"),
    ):
        lines += [f"### {title}", ""]
        lines += [f"- {k}: {v}" for k, v in causes.get(key, {}).items()] or ["- none"]
        lines.append("")
    return lines
