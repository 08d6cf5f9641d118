"""Benchmark the agent on the MiniWoB++ development split: success per task and overall, and where it fails.

What it runs: the arm of `configs/miniwob-dev-split.toml` (62 tasks x 3 seeds, memory off, at most 10
steps, the embedded model, response cache off) through the one driver (`run_arm`), into a run folder
that resumes. What it prints, side by side in one table: per task the episodes solved, mean steps, model
calls per step, prompt tokens per step and seconds per episode; then the overall figures and the
failure anatomy: how episodes ended, the failure classes of steps, the actions most repeated within one
episode (the loops), and the parse refusals (what the model wrote that the parser refused).

Why the split: the other MiniWoB++ tasks are held out; develop and measure on these only.

Why fresh seeds: every rule of the agent was written from episodes of seeds 0-2, so a figure on those
seeds flatters it. A MiniWoB++ seed draws another instance of the same task (other names, values,
layouts); the same split on seeds never used while tuning (10-12) shows how much of the tuning-seed
figure is over-fitting. `--side-by-side` prints such runs as columns of one table.

Run: .venv/bin/python scripts/bench_miniwob.py [--tasks a,b] [--seeds 0-2] [--guidance off] [--out DIR]
     .venv/bin/python scripts/bench_miniwob.py --report DIR      (the tables of a finished run, no model)
     .venv/bin/python scripts/bench_miniwob.py --compare BEFORE AFTER   (two runs paired by task and seed)
     .venv/bin/python scripts/bench_miniwob.py --side-by-side DIR DIR ...  (runs on other seeds or settings
                                                                            as columns, no model)
Writes DIR/bench_miniwob.md and DIR/bench_miniwob.json beside the run's own summary. About 35 minutes for
the whole split on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from awm.evaluation.success import is_success
from awm.files import write_text_atomic
from awm.pipeline.episode_tables import (
    anatomy,
    anatomy_lines,
    group_rows,
    latest_trajectories,
    overall,
    step_cost_line,
)
from awm.trajectory import Trajectory

ROOT = Path(__file__).resolve().parents[1]
SPLIT_CONFIG = ROOT / "configs" / "miniwob-dev-split.toml"


def _task_name(trajectory: Trajectory) -> str:
    return trajectory.task.task_id.removeprefix("browsergym/").removeprefix("miniwob.")


def task_rows(trajectories: list[Trajectory]) -> list[dict]:
    """Per task: episodes, solved, mean steps, model calls per step, prompt tokens per step, s/episode."""
    return group_rows(trajectories, _task_name, "task")


def render_markdown(run_dir: Path, rows: list[dict], total: dict, causes: dict, command: str) -> str:
    rate = "n/a" if total["success_rate"] is None else f"{100 * total['success_rate']:.1f}%"
    lines = [
        "# MiniWoB++ development split",
        "",
        f"- run folder: `{run_dir}`",
        f"- command: `{command}`",
        f"- written: {datetime.now().isoformat(timespec='seconds')}",
        "",
        f"**Solved {total['solved']}/{total['episodes']} ({rate})**; {total['calls_per_step']:.2f} model calls and "
        f"{total['prompt_tokens_per_step']:.0f} prompt tokens per step, {total['seconds_per_episode']:.1f} s per episode. "
        f"{step_cost_line(total)}",
        "",
        "| task | solved | mean steps | calls/step | prompt tok/step | s/episode | ends |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        ends = ", ".join(f"{k} x{v}" for k, v in r["ends"].items())
        lines.append(
            f"| {r['task']} | {r['solved']}/{r['episodes']} | {r['mean_steps']:.1f} | {r['calls_per_step']:.2f} | "
            f"{r['prompt_tokens_per_step']:.0f} | {r['seconds_per_episode']:.1f} | {ends} |"
        )
    lines += ["", *anatomy_lines(causes)]
    return "\n".join(lines)


def print_tables(console: Console, rows: list[dict], total: dict, causes: dict) -> None:
    table = Table(title="MiniWoB++ development split, per task")
    for column in ("task", "solved", "steps", "calls/step", "tok/step", "s/ep", "ends"):
        table.add_column(column, justify="left" if column in ("task", "ends") else "right")
    for r in rows:
        table.add_row(
            r["task"], f"{r['solved']}/{r['episodes']}", f"{r['mean_steps']:.1f}", f"{r['calls_per_step']:.2f}",
            f"{r['prompt_tokens_per_step']:.0f}", f"{r['seconds_per_episode']:.1f}",
            ", ".join(f"{k} x{v}" for k, v in r["ends"].items()),
        )  # fmt: skip
    rate = "n/a" if total["success_rate"] is None else f"{100 * total['success_rate']:.1f}%"
    table.caption = (
        f"solved {total['solved']}/{total['episodes']} ({rate}); {total['calls_per_step']:.2f} calls and "
        f"{total['prompt_tokens_per_step']:.0f} prompt tokens per step; {total['seconds_per_episode']:.1f} s per episode"
    )
    console.print(table)
    for key, values in causes.items():
        if isinstance(values, dict):
            console.print(f"[bold]{key}[/bold]: " + ("; ".join(f"{k} x{v}" for k, v in values.items()) or "none"), markup=True)


def report(run_dir: Path, console: Console, command: str) -> None:
    trajectories = latest_trajectories(run_dir)
    if not trajectories:
        console.print(f"{run_dir}: no finished episodes (trajectories/*.json)")
        raise SystemExit(2)
    rows, total, causes = task_rows(trajectories), overall(trajectories), anatomy(trajectories, _task_name)
    print_tables(console, rows, total, causes)
    data = {"run_dir": str(run_dir), "command": command, "overall": total, "tasks": rows, "anatomy": causes}
    write_text_atomic(run_dir / "bench_miniwob.json", json.dumps(data, indent=2) + "\n")
    write_text_atomic(run_dir / "bench_miniwob.md", render_markdown(run_dir, rows, total, causes, command) + "\n")
    console.print(f"wrote {run_dir / 'bench_miniwob.md'}")


def paired(before: list[Trajectory], after: list[Trajectory]) -> dict:
    """Episode by episode (same task, same seed) in two runs: per task the solved counts side by side,
    and overall the episodes both runs solved, only the first, only the second, neither."""
    first = {t.task.key: t for t in before}
    second = {t.task.key: t for t in after}
    keys = sorted(first.keys() & second.keys())
    counts: Counter[str] = Counter()
    per_task: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # solved before, after, episodes
    for key in keys:
        a, b = is_success(first[key]), is_success(second[key])
        counts["both" if a and b else "only before" if a else "only after" if b else "neither"] += 1
        row = per_task[_task_name(first[key])]
        row[0], row[1], row[2] = row[0] + a, row[1] + b, row[2] + 1
    tasks = [{"task": name, "before": r[0], "after": r[1], "episodes": r[2]} for name, r in sorted(per_task.items())]
    return {
        "episodes": len(keys),
        "before": overall([first[k] for k in keys]),
        "after": overall([second[k] for k in keys]),
        "pairs": {k: counts[k] for k in ("both", "only before", "only after", "neither")},
        "tasks": tasks,
    }


def compare(before_dir: Path, after_dir: Path, console: Console) -> dict:
    """Print and return `paired` for two finished runs (no model)."""
    result = paired(latest_trajectories(before_dir), latest_trajectories(after_dir))
    table = Table(title=f"paired: {before_dir.name} -> {after_dir.name}")
    for column in ("task", "before", "after", "change"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for r in result["tasks"]:
        change = r["after"] - r["before"]
        table.add_row(r["task"], f"{r['before']}/{r['episodes']}", f"{r['after']}/{r['episodes']}", f"{change:+d}" if change else "")
    b, a = result["before"], result["after"]
    table.caption = (
        f"{result['episodes']} paired episodes: solved {b['solved']} -> {a['solved']}; "
        + ", ".join(f"{k} {v}" for k, v in result["pairs"].items())
        + f"; s/episode {b['seconds_per_episode']:.1f} -> {a['seconds_per_episode']:.1f}; prompt tok/step "
        f"{b['prompt_tokens_per_step']:.0f} -> {a['prompt_tokens_per_step']:.0f}; calls/step "
        f"{b['calls_per_step']:.2f} -> {a['calls_per_step']:.2f}"
    )
    console.print(table)
    return result


def _run_label(run_dir: Path, trajectories: list[Trajectory]) -> str:
    """A run's column heading: its folder, seeds and guidance (from its own config record)."""
    seeds = sorted({t.task.seed for t in trajectories if t.task.seed is not None})
    span = f"{seeds[0]}-{seeds[-1]}" if seeds and seeds == list(range(seeds[0], seeds[-1] + 1)) else ",".join(map(str, seeds))
    from awm.pipeline.state import PipelineState

    with PipelineState(run_dir, create=False) as state:
        guidance = state.load_config()[1].agent.guidance
    return f"{run_dir.name} (seeds {span}, guidance {guidance})"


def side_by_side(run_dirs: list[Path], console: Console) -> dict:
    """Per task the episodes solved in each run, one column per run (not paired: the runs may draw
    other seeds), and each run's overall figures; printed as one table and returned."""
    runs = []
    for run_dir in run_dirs:
        trajectories = latest_trajectories(run_dir)
        if not trajectories:
            raise SystemExit(f"{run_dir}: no finished episodes (trajectories/*.json)")
        rows = {r["task"]: r for r in task_rows(trajectories)}
        runs.append({"run_dir": str(run_dir), "label": _run_label(run_dir, trajectories), "overall": overall(trajectories), "tasks": rows})
    tasks = sorted({name for run in runs for name in run["tasks"]})
    table = Table(title="MiniWoB++ development split, side by side")
    table.add_column("task")
    for run in runs:
        table.add_column(run["label"], justify="right")
    for name in tasks:
        cells = [f"{r['solved']}/{r['episodes']}" if (r := run["tasks"].get(name)) else "-" for run in runs]
        table.add_row(name, *cells)
    table.add_row("all", *[f"{run['overall']['solved']}/{run['overall']['episodes']}" for run in runs], style="bold")
    console.print(table)
    return {"runs": [{k: v for k, v in run.items() if k != "tasks"} for run in runs],
            "tasks": {name: [run["tasks"].get(name, {}).get("solved") for run in runs] for name in tasks}}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--config", type=Path, default=SPLIT_CONFIG, help="the split's config (default: the dev split)")
    parser.add_argument("--tasks", help="comma list: only these tasks of the split")
    parser.add_argument("--seeds", help="seeds, e.g. 0-2 (default: the config's)")
    parser.add_argument("--guidance", choices=("on", "off"), help="the agent's guidance filters (default: the config's)")
    parser.add_argument("--side-by-side", type=Path, nargs="+", metavar="DIR", help="finished runs as columns of one table")
    parser.add_argument("--out", type=Path, help="run folder (default: runs/<time>-bench-miniwob); resumed if it exists")
    parser.add_argument("--report", type=Path, metavar="DIR", help="only print the tables of a finished run")
    parser.add_argument(
        "--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"),
        help="pair two finished runs episode by episode (same task and seed); writes AFTER/bench_paired.json",
    )  # fmt: skip
    args = parser.parse_args(argv)
    console = Console()
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    if args.compare is not None:
        before_dir, after_dir = args.compare
        result = compare(before_dir, after_dir, console) | {"before_dir": str(before_dir), "command": command}
        write_text_atomic(after_dir / "bench_paired.json", json.dumps(result, indent=2) + "\n")
        return 0
    if args.side_by_side is not None:
        result = side_by_side(args.side_by_side, console) | {"command": command}
        write_text_atomic(args.side_by_side[-1] / "bench_side_by_side.json", json.dumps(result, indent=2) + "\n")
        return 0
    if args.report is not None:
        report(args.report, console, command)
        return 0
    from awm.assets import configure_runtime_env
    from awm.pipeline.config import load_pipeline_config
    from awm.pipeline.driver import run_arm
    from awm.webarena.tasks import parse_seeds, split_names

    configure_runtime_env()
    overrides = {"settings": {"agent": {"guidance": args.guidance}}} if args.guidance else None
    config, settings = load_pipeline_config(args.config, overrides)
    split = list(config.tasks)
    update: dict = {}
    if args.tasks:
        chosen = split_names(args.tasks)
        outside = [t for t in chosen if t not in split]
        if outside:
            console.print(f"not in the development split: {', '.join(outside)} (the other tasks are held out)")
            return 2
        update["tasks"] = chosen
    if args.seeds:
        update["seeds"] = parse_seeds(args.seeds)
    config = config.model_copy(update=update)
    out = args.out or ROOT / "runs" / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-bench-miniwob"
    result = run_arm(config, settings, out, console=console)
    if result.failed_stage is not None:
        console.print(f"stage {result.failed_stage} failed: {result.error}")
        return 1
    report(Path(out), console, command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
