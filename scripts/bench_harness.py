"""Benchmark the web harness: our own per-step overhead, and what the prompt order saves on the local model.

Part 1 (scripted policy, no model): the time each step spends in OUR code, outside the model and outside
the page's own waits: observation processing + fingerprint + screenshot encoding (`observe`), building
the LLM prompt the agent would send (fit to the window, grammar from the page's ids), parsing the
answer, and writing the trace (database row, event, screenshot file). Target: p50 < 50 ms.

Part 2 (embedded local model): seconds per step with the prefix-friendly prompt order (instructions and
memory first, page last) against a page-first order with the same content, side by side. Skip it with
--no-llm.

Run: python scripts/bench_harness.py            (a few minutes on 2 cores)
     python scripts/bench_harness.py --no-llm   (part 1 only, about a minute)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from awm.actions import parse_action
from awm.assets import configure_runtime_env
from awm.config import BrowserSettings, load_settings
from awm.evaluation.success import is_success
from awm.llm.base import ChatRequest
from awm.tokens import CharEstimateCounter, TiktokenCounter, TokenCounter
from awm.traces import RunRecorder
from awm.trajectory import Step, Trajectory
from awm.webarena.agent import LLMAgent
from awm.webarena.env import BrowserSession
from awm.webarena.harness import Decision, DecisionContext, HarnessConfig, StepCapture, run_episode
from awm.webarena.policies import MiniWobScriptedPolicy
from awm.webarena.tasks import parse_seeds, resolve_tasks


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class _PromptClient:
    """Stands in for a model client in part 1: the agent only needs its backend and model name to
    build a prompt; part 1 never sends it anywhere."""

    backend = "local"  # so the grammar is built too, as for the embedded model
    model = "bench"


class TimedScriptedPolicy:
    """The scripted MiniWoB policy, plus the work the LLM agent does around the model each step:
    build (and fit) the prompt and grammar before, parse the answer after. Both are timed."""

    name = "scripted+prompt"

    def __init__(self, counter: TokenCounter) -> None:
        settings = load_settings(overrides={"llm": {"backend": "local", "cache": False}})
        self.inner = MiniWobScriptedPolicy()
        self.agent = LLMAgent(_PromptClient(), counter, settings=settings, memory=None)  # type: ignore[arg-type]
        self.prompt_ms: list[float] = []
        self.parse_ms: list[float] = []

    def decide(self, ctx: DecisionContext) -> Decision:
        t0 = time.perf_counter()
        self.agent.build_request(ctx)
        t1 = time.perf_counter()
        decision = self.inner.decide(ctx)
        t2 = time.perf_counter()
        try:
            parse_action(decision.text, page_ids=ctx.page.ids)
        except Exception:  # noqa: BLE001 - a timing probe; the harness reports parse errors itself
            pass
        t3 = time.perf_counter()
        self.prompt_ms.append((t1 - t0) * 1000)
        self.parse_ms.append((t3 - t2) * 1000)
        return decision


def measure_overhead(
    tasks_arg: str, seeds_arg: str, screenshots: bool
) -> tuple[dict[str, list[float]], int, int, str]:
    """Per-step timings (ms) of each part, for one screenshot setting."""
    try:
        counter: TokenCounter = TiktokenCounter("gpt-4o")
        counter_name = "tiktoken o200k"
    except Exception:  # noqa: BLE001 - offline cache missing: the estimate still measures our code
        counter, counter_name = CharEstimateCounter(), "char estimate"
    policy = TimedScriptedPolicy(counter)
    tasks = resolve_tasks("miniwob", tasks_arg, parse_seeds(seeds_arg))
    parts: dict[str, list[float]] = {"observe": [], "execute": [], "trace": []}
    solved = 0
    with (
        tempfile.TemporaryDirectory() as tmp,
        BrowserSession(BrowserSettings(screenshots=screenshots)) as session,
    ):
        recorder = RunRecorder(Path(tmp) / "run", config={"bench": True}, config_hash="bench")

        def on_step(trajectory: Trajectory, step: Step, capture: StepCapture | None) -> None:
            if step.index == 0:
                recorder.start_episode(trajectory)
            t0 = time.perf_counter()
            recorder.record_step(trajectory, step, capture)
            parts["trace"].append((time.perf_counter() - t0) * 1000)
            parts["observe"].append(step.timings_ms.get("observe", 0.0))
            parts["execute"].append(step.timings_ms.get("execute", 0.0))

        # One warm-up episode so first-use costs (imports, browser start) are not counted.
        run_episode(session, policy, tasks[0].model_copy(deep=True), HarnessConfig(max_steps=5))
        policy.prompt_ms.clear()
        policy.parse_ms.clear()
        for task in tasks:
            trajectory = run_episode(
                session, policy, task.model_copy(deep=True), HarnessConfig(max_steps=5), on_step=on_step
            )
            recorder.end_episode(trajectory)
            solved += int(is_success(trajectory))
        recorder.close()
    parts["prompt"], parts["parse"] = list(policy.prompt_ms), list(policy.parse_ms)
    parts["total"] = [
        o + p + q + t
        for o, p, q, t in zip(parts["observe"], parts["prompt"], parts["parse"], parts["trace"], strict=True)
    ]
    return parts, len(tasks), solved, counter_name


def bench_overhead(tasks_arg: str, seeds_arg: str, console: Console) -> None:
    with_png, n_tasks, solved_png, counter_name = measure_overhead(tasks_arg, seeds_arg, screenshots=True)
    no_png, _, solved_plain, _ = measure_overhead(tasks_arg, seeds_arg, screenshots=False)
    table = Table(
        title=f"Harness overhead per step, ms ({len(with_png['total'])} steps, {n_tasks} episodes per setting, "
        f"solved {solved_png} and {solved_plain}; counter: {counter_name})"
    )
    table.add_column("part")
    for column in ("p50 screenshots", "p95 screenshots", "p50 none", "p95 none"):
        table.add_column(column, justify="right")
    rows = [
        ("observe (obs processing, fingerprint, png)", "observe"),
        ("prompt build + fit + grammar", "prompt"),
        ("parse", "parse"),
        ("trace write (db, event, screenshot file)", "trace"),
        ("TOTAL overhead (target p50 < 50)", "total"),
        ("for scale: execute (BrowserGym step, page waits)", "execute"),
    ]
    for label, key in rows:
        a, b = with_png[key], no_png[key]
        table.add_row(
            label, f"{pct(a, 0.5):.1f}", f"{pct(a, 0.95):.1f}", f"{pct(b, 0.5):.1f}", f"{pct(b, 0.95):.1f}"
        )
    console.print(table)


def bench_prompt_order(tasks_arg: str, seeds_arg: str, max_steps: int, console: Console) -> None:
    from awm.llm.factory import make_client

    settings = load_settings(overrides={"llm": {"backend": "local", "cache": False, "max_tokens": 96}})
    client = make_client(settings, use_cache=False)
    counter = client.token_counter()
    tasks = resolve_tasks("miniwob", tasks_arg, parse_seeds(seeds_arg))
    results: dict[str, dict[str, float]] = {}
    with BrowserSession(BrowserSettings(screenshots=False)) as session:
        # Warm the server once so model loading is not billed to the first variant.
        client.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}], max_tokens=1))
        for order in ("prefix", "page_first"):
            llm_s: list[float] = []
            tokens: list[int] = []
            solved = 0
            for task in tasks:
                agent = LLMAgent(client, counter, settings=settings, memory=None, prompt_order=order)  # type: ignore[arg-type]
                trajectory = run_episode(
                    session, agent, task.model_copy(deep=True), HarnessConfig(max_steps=max_steps)
                )
                solved += int(is_success(trajectory))
                for step in trajectory.steps:
                    if step.llm_calls:
                        llm_s.append(step.timings_ms.get("llm", 0.0) / 1000 / step.llm_calls)
                        tokens.append(step.prompt_tokens // step.llm_calls)
            results[order] = {
                "calls": len(llm_s),
                "p50": pct(llm_s, 0.5),
                "mean": statistics.fmean(llm_s) if llm_s else float("nan"),
                "tokens": statistics.fmean(tokens) if tokens else float("nan"),
                "solved": solved,
            }
    table = Table(
        title=f"Local model seconds per model call ({len(tasks)} episodes per order, max {max_steps} steps)"
    )
    table.add_column("prompt order")
    for column in ("model calls", "p50 s", "mean s", "prompt tokens", "solved"):
        table.add_column(column, justify="right")
    for order, r in results.items():
        table.add_row(
            order,
            f"{r['calls']:.0f}",
            f"{r['p50']:.2f}",
            f"{r['mean']:.2f}",
            f"{r['tokens']:.0f}",
            f"{r['solved']:.0f}/{len(tasks)}",
        )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tasks", default="click-test,click-button,enter-text,login-user", help="part 1 tasks (scripted)"
    )
    parser.add_argument("--seeds", default="0-1", help="part 1 seeds")
    parser.add_argument("--llm-tasks", default="click-test,enter-text,login-user", help="part 2 tasks")
    parser.add_argument("--llm-seeds", default="0", help="part 2 seeds")
    parser.add_argument("--llm-max-steps", type=int, default=3)
    parser.add_argument("--no-llm", action="store_true", help="skip part 2 (the local model)")
    parser.add_argument("--no-overhead", action="store_true", help="skip part 1 (the scripted overhead)")
    args = parser.parse_args()
    configure_runtime_env()
    console = Console()
    if not args.no_overhead:
        bench_overhead(args.tasks, args.seeds, console)
    if not args.no_llm:
        bench_prompt_order(args.llm_tasks, args.llm_seeds, args.llm_max_steps, console)


if __name__ == "__main__":
    main()
