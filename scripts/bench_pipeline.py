"""Pipeline throughput: 1 vs 2 workers on the same episodes, for the scripted policy and the local model.

The scripted MiniWoB policy decides instantly, so its rows measure the browser and the harness (reset,
execute, observe) plus each backend's start-up. The local-model rows run the same episodes with the
embedded Qwen2.5-Coder-1.5B (llama.cpp, one server with two slots shared by the workers, started and
warmed before timing, response cache off, temperature 0); they also say whether every episode came out
the same with 2 workers as with 1 (actions and reward). Goal on this 2-core machine: at least 1.8x
scripted and 1.4x with the local model.

    python scripts/bench_pipeline.py                   # scripted and local model, 1 vs 2 local workers
    python scripts/bench_pipeline.py --episodes 12 --ray
    python scripts/bench_pipeline.py --no-llm          # scripted rows only
    python scripts/bench_pipeline.py --arena --no-llm  # also the arena: scripted replays, each worker its own copy of a site

`--arena` adds rows of scripted replays of the arena's train demonstrations (real Trac, one Trac update
template per episode): with 2 workers each worker resets and checks its own copy of the site (issue
55's target on this machine: at least 1.6x).
"""

from __future__ import annotations

import argparse
import importlib.util
import time

from awm.assets import configure_runtime_env
from awm.config import BrowserSettings, Settings, load_settings
from awm.evaluation.success import is_success
from awm.pipeline.parallel import PoolConfig, run_tasks_parallel
from awm.pipeline.policy import PolicyFactory
from awm.trajectory import Task, Trajectory
from awm.webarena.harness import HarnessConfig
from awm.webarena.tasks import resolve_tasks

SCRIPTED_TASKS = "click-test,enter-text"
LLM_TASKS = "click-test,click-button,enter-text,login-user"


def _tasks(names: str, episodes: int) -> list[Task]:
    per_seed = len(names.split(","))
    seeds = list(range(max(1, -(-episodes // per_seed))))
    return resolve_tasks("miniwob", names, seeds)[:episodes]


ARENA_TASKS = ["trac.change-priority", "trac.comment-ticket", "trac.reassign-ticket", "trac.close-ticket"]


def _arena_tasks(episodes: int) -> list[Task]:
    from awm.webarena.tasks import site_tasks

    return site_tasks(ARENA_TASKS, None, [], split="train")[:episodes]


def _outcome(t: Trajectory) -> tuple:
    return (t.task.key, t.end, t.verdict.reward, [s.action_str for s in t.steps])


def run_row(
    tasks: list[Task], factory: PolicyFactory, workers: int, backend: str
) -> tuple[float, list[Trajectory]]:
    started = time.monotonic()
    out = run_tasks_parallel(
        tasks,
        policy_factory=factory,
        env_config=BrowserSettings(screenshots=False),
        harness_config=HarnessConfig(max_steps=5),
        pool=PoolConfig(workers=workers, backend=backend),  # type: ignore[arg-type]
    )
    return time.monotonic() - started, out


def print_rows(title: str, tasks: list[Task], rows: list[tuple[str, int, PolicyFactory]]) -> None:
    print(f"\n{title}: {len(tasks)} episodes")
    print(
        f"{'backend':<8} {'workers':>7} {'wall s':>8} {'solved':>7} {'episodes/min':>13} {'speed-up':>9} {'same episodes':>14}"
    )
    base_rate, base_out = None, None
    for backend, workers, factory in rows:
        wall, out = run_row(tasks, factory, workers, backend)
        rate = 60 * len(out) / wall
        base_rate = base_rate or rate
        same = "-" if base_out is None else ("yes" if [_outcome(t) for t in out] == base_out else "NO")
        base_out = base_out or [_outcome(t) for t in out]
        solved = sum(is_success(t) for t in out)
        print(
            f"{backend:<8} {workers:>7} {wall:>8.1f} {solved:>7} {rate:>13.1f} {rate / base_rate:>8.2f}x {same:>14}"
        )


def llm_factory(settings: Settings) -> PolicyFactory:
    """The local model behind one warm two-slot server, shared by every row (start-up not timed)."""
    from awm.llm.base import ChatRequest
    from awm.pipeline.policy import client_for_url

    factory = PolicyFactory(settings, "llm").for_workers()
    if not factory.shared_base_url:
        raise SystemExit("the local-model rows need the embedded backend (llm.backend = local)")
    client_for_url(settings, factory.shared_base_url).chat(
        ChatRequest(messages=[{"role": "user", "content": "Say OK."}], max_tokens=2)
    )
    return factory


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--ray", action="store_true", help="Add a Ray row with 2 workers (scripted).")
    parser.add_argument("--no-llm", action="store_true", help="Skip the local-model rows.")
    parser.add_argument("--arena", action="store_true", help="Add scripted arena replays (Trac), 1 vs 2 workers.")
    args = parser.parse_args()
    configure_runtime_env()
    scripted = PolicyFactory(load_settings(), "scripted")
    rows = [("local", 1, scripted), ("local", 2, scripted)]
    if args.ray and importlib.util.find_spec("ray") is not None:
        rows.append(("ray", 2, scripted))
    print_rows(f"scripted policy ({SCRIPTED_TASKS})", _tasks(SCRIPTED_TASKS, args.episodes), rows)
    if args.arena:
        print_rows(
            f"scripted arena replays ({', '.join(ARENA_TASKS)}; a worker's own copy of Trac each)",
            _arena_tasks(args.episodes),
            [("local", 1, scripted), ("local", 2, scripted)],
        )
    if not args.no_llm:
        settings = load_settings(
            overrides={
                "llm": {
                    "backend": "local",
                    "cache": False,
                    "temperature": 0.0,
                    "max_tokens": 96,
                    "local_slots": 2,
                }
            }
        )
        factory = llm_factory(settings)
        print_rows(
            f"local model ({LLM_TASKS}; one warm 2-slot llama.cpp server, cache off)",
            _tasks(LLM_TASKS, args.episodes),
            [("local", 1, factory), ("local", 2, factory)],
        )


if __name__ == "__main__":
    main()
