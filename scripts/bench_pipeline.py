"""Pipeline throughput: episodes per minute with 1 and 2 local workers (and Ray), side by side.

The scripted MiniWoB policy decides instantly, so what is measured is the browser and the harness
(reset, execute, observe), plus each backend's start-up. With `--main-job`, also the wall time of
the main job (`awm ablate configs/miniwob-demo.toml`, the local model, response cache off so it is
an upper bound) in a temporary folder.

    python scripts/bench_pipeline.py                 # 1 vs 2 local workers (+ ray if installed)
    python scripts/bench_pipeline.py --episodes 12 --no-ray
    python scripts/bench_pipeline.py --main-job      # adds the main job (up to ~20 minutes)
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

from awm.assets import configure_runtime_env
from awm.config import PROJECT_ROOT, load_settings
from awm.pipeline.parallel import run_episodes_parallel
from awm.webarena.env import BrowserEnvConfig
from awm.webarena.harness import HarnessConfig
from awm.webarena.runner import AgentFactory
from awm.webarena.tasks import resolve_tasks


def bench_episodes(episodes: int, workers: int, backend: str) -> tuple[float, int, float]:
    """(wall seconds, successes, episodes per minute) for `episodes` scripted episodes."""
    seeds = list(range(max(1, episodes // 2)))
    tasks = resolve_tasks("miniwob", "click-test,enter-text", seeds)[:episodes]
    started = time.monotonic()
    out = run_episodes_parallel(
        tasks,
        policy_factory=AgentFactory(load_settings(), policy="scripted"),
        env_config=BrowserEnvConfig(screenshots=False),
        harness_config=HarnessConfig(max_steps=4),
        workers=workers,
        backend=backend,  # type: ignore[arg-type]
    )
    wall = time.monotonic() - started
    return wall, sum(1 for t in out if (t.verdict.reward or 0) > 0), 60 * len(out) / wall


def bench_main_job(config: Path) -> float:
    from rich.console import Console

    from awm.pipeline.ablation import load_ablation, run_ablation

    plan = load_ablation(config)
    plan.settings.llm.cache = False  # a fresh machine's first run, not a replay
    with tempfile.TemporaryDirectory(prefix="awm-bench-") as folder:
        started = time.monotonic()
        report, _ = run_ablation(plan, Path(folder), console=Console(), show_progress=False)
        wall = time.monotonic() - started
    for arm in report.arms:
        print(
            f"  {arm.name:<10} {arm.successes}/{arm.episodes} solved, {arm.seconds_per_task or 0:.1f} s/task"
        )
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--no-ray", action="store_true", help="Skip the Ray row.")
    parser.add_argument("--main-job", action="store_true", help="Also time the main job (local model).")
    parser.add_argument("--config", type=Path, default=PROJECT_ROOT / "configs" / "miniwob-demo.toml")
    args = parser.parse_args()
    configure_runtime_env()
    rows = [("local", 1), ("local", 2)]
    if not args.no_ray and importlib.util.find_spec("ray") is not None:
        rows.append(("ray", 2))
    print(f"{args.episodes} scripted MiniWoB episodes (click-test, enter-text), start-up included")
    print(f"{'backend':<8} {'workers':>7} {'wall s':>8} {'solved':>7} {'episodes/min':>13} {'speed-up':>9}")
    base = None
    for backend, workers in rows:
        wall, solved, rate = bench_episodes(args.episodes, workers, backend)
        base = base or rate
        print(f"{backend:<8} {workers:>7} {wall:>8.1f} {solved:>7} {rate:>13.1f} {rate / base:>8.2f}x")
    if args.main_job:
        print(f"main job: awm ablate {args.config} (response cache off)")
        wall = bench_main_job(args.config)
        print(f"main job wall time: {wall:.0f} s ({wall / 60:.1f} min; target at most 20 min)")


if __name__ == "__main__":
    main()
