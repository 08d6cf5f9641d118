"""Benchmark the main job (`make demo`): where its minutes go, and what one model step costs.

What it measures, stage by stage, with the same code `awm demo` runs (`awm.demo`, the one driver):
- set-up: `scripts/setup.sh` (idempotent: seconds when everything is installed; the full install, the
  figure `make demo` pays in a fresh clone, when nothing is);
- demonstrations: the scripted replay (no model) of the config's train instances into the folder its
  memory arm induces from;
- each arm (the response cache off: every model call is made): wall seconds, episodes per minute, success, and over the steps with a model call the model's
  seconds per step and the prompt's tokens per step (median, p95), and the share of prompt tokens the
  model server reused from its prefix cache (llama.cpp reports it; the rest it had to process).

Printed side by side with the targets of issue 55 (this 2-core machine): the job, set-up included, in
10 minutes; a model step's median under 6 s; a step's p95 prompt under 1,200 tokens.

Run: .venv/bin/python scripts/bench_demo.py [--config configs/sites-demo.toml] [--out DIR]
It works in DIR (default runs/<time>-bench-demo): the demonstrations are replayed afresh into
DIR/runs/... (the config's `offline_from` is read from the working directory), the arms run into DIR/demo.
Writes DIR/bench_demo.md and DIR/bench_demo.json. A second run with the same --out resumes (and then
times only what was left).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

from rich.console import Console

from awm.files import write_text_atomic
from awm.pipeline.episode_tables import latest_trajectories, step_costs
from awm.trajectory import Trajectory

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {"total_s": 600.0, "model_s_per_step_median": 6.0, "prompt_tokens_per_step_p95": 1200.0}


def timed_setup() -> float:
    """Seconds of `scripts/setup.sh` (its output goes to this process's stderr, as `make demo` shows it)."""
    started = time.monotonic()
    subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], check=True, cwd=ROOT, stdout=sys.stderr)
    return time.monotonic() - started


def arm_figures(name: str, trajectories: list[Trajectory], wall_seconds: float) -> dict:
    """One arm's row: episodes, solved, wall seconds, episodes per minute and its step costs."""
    solved = sum((t.verdict.reward or 0.0) >= 1.0 for t in trajectories)
    return {
        "arm": name,
        "episodes": len(trajectories),
        "solved": solved,
        "wall_s": round(wall_seconds, 1),
        "episodes_per_min": round(60 * len(trajectories) / wall_seconds, 2) if wall_seconds else 0.0,
        **step_costs(trajectories),
    }


def render(data: dict) -> str:
    total = data["total_s"]
    lines = [
        "# The main job, timed",
        "",
        f"Command: `{data['command']}`  ",
        f"Commit: `{data['commit']}`; written {data['written']}",
        "",
        "| stage | seconds |",
        "|---|---:|",
        f"| set-up (`scripts/setup.sh`) | {data['setup_s']:.1f} |",
        f"| demonstrations (scripted replay, no model) | {data['demonstrations_s']:.1f} |",
        *[f"| arm `{a['arm']}` | {a['wall_s']:.1f} |" for a in data["arms"]],
        f"| **all** (target {TARGETS['total_s']:.0f}) | **{total:.1f}** ({'met' if total <= TARGETS['total_s'] else 'NOT met'}) |",
        "",
        "| arm | solved | episodes/min | model s/step median (target 6) | p95 | prompt tok/step median | p95 (target 1,200) | reused from cache |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]  # fmt: skip
    for a in data["arms"]:
        lines.append(
            f"| {a['arm']} | {a['solved']}/{a['episodes']} | {a['episodes_per_min']:.2f} | "
            f"{a['model_s_per_step_median']:.1f} | {a['model_s_per_step_p95']:.1f} | "
            f"{a['prompt_tokens_per_step_median']:,.0f} | {a['prompt_tokens_per_step_p95']:,.0f} | "
            f"{100 * a['reused_fraction']:.0f}% |"
        )
    return "\n".join(lines) + "\n"


def git_commit() -> str:
    found = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return found.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  .venv/bin/python scripts/bench_demo.py --out runs/bench-demo",
    )
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "sites-demo.toml", help="the demo's config")
    parser.add_argument("--out", type=Path, help="folder (default: runs/<time>-bench-demo); resumed if it exists")
    args = parser.parse_args(argv)
    console = Console(stderr=True)
    config = args.config.resolve()
    out = (args.out or ROOT / "runs" / f"{datetime.now():%Y%m%d-%H%M%S}-bench-demo").resolve()
    out.mkdir(parents=True, exist_ok=True)
    command = shlex.join([Path(sys.executable).name, *sys.argv])

    setup_s = timed_setup()
    from awm.assets import configure_runtime_env
    from awm.config import load_settings
    from awm.demo import replay_demonstrations
    from awm.pipeline.ablation import load_ablation, run_ablation

    configure_runtime_env()
    os.chdir(out)  # the config's offline_from folder is read from the working directory: replayed afresh here
    started = time.monotonic()
    replay_demonstrations(config, load_settings(config), console)
    demonstrations_s = time.monotonic() - started
    plan = load_ablation(config)
    # Every model call made, none served from the response cache: a second run of the bench would
    # otherwise replay the first one's answers in no time.
    uncached = plan.settings.model_copy(update={"llm": plan.settings.llm.model_copy(update={"cache": False})})
    report, _ = run_ablation(plan.model_copy(update={"settings": uncached}), out / "demo", console=console)
    arms = []
    for arm in report.arms:  # type: ignore[union-attr]
        folder = out / "demo" / "arms" / arm.name / "rep1"
        arms.append(arm_figures(arm.name, latest_trajectories(folder), arm.wall_seconds))
    data = {
        "command": command,
        "commit": git_commit(),
        "written": datetime.now().isoformat(timespec="seconds"),
        "setup_s": round(setup_s, 1),
        "demonstrations_s": round(demonstrations_s, 1),
        "arms": arms,
        "total_s": round(setup_s + demonstrations_s + sum(a["wall_s"] for a in arms), 1),
        "targets": TARGETS,
    }
    write_text_atomic(out / "bench_demo.json", json.dumps(data, indent=2) + "\n")
    write_text_atomic(out / "bench_demo.md", render(data))
    print(render(data))
    print(f"wrote {out / 'bench_demo.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
