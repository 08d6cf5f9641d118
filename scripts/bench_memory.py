"""Benchmark the workflow store and retrieval at 100, 1,000 and 10,000 workflows in one scope.

Prints commit, head-read and top-k retrieval latency (p50/p95) and index (re)build times, side by side
with the targets. Run: python scripts/bench_memory.py [--sizes 100 1000 10000] [--queries 30]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from awm.memory.embeddings import MiniLMEmbedder
from awm.memory.retrieval import build_index, default_index_dir, retrieve
from awm.memory.store import WorkflowStore
from awm.memory.workflow import Workflow, WorkflowStep
from awm.trajectory import TargetDesc

TARGETS = {"commit p95": 20.0, "top-k p95": 20.0}  # milliseconds, at 10,000 workflows

SITES = ["flight", "hotel", "forum", "shop", "mail", "calendar", "map", "repo", "bank", "news"]
VERBS = ["search for", "book", "sort", "filter", "reply to", "open", "edit", "delete", "share", "compare"]
THINGS = ["a product", "a post", "an issue", "a message", "an event", "a route", "a room", "a ticket"]


def make_workflow(i: int) -> Workflow:
    site, verb, thing = SITES[i % 10], VERBS[(i // 10) % 10], THINGS[(i // 100) % 8]
    return Workflow(
        name=f"{verb.replace(' ', '_')}_{thing.split()[-1]}_{site}_{i}",
        description=f"Given that you are on the {site} site, {verb} {thing} (variant {i}).",
        parameters=["query"],
        steps=[
            WorkflowStep(
                reasoning=f"Step {j}: I act on the field.",
                action="fill",
                target=TargetDesc(role="textbox", label=f"Field {j}"),
                value="{query}",
            )
            for j in range(4)
        ],
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1000, out


def bench(size: int, queries: int, embedder: MiniLMEmbedder, folder: Path) -> dict[str, float]:
    store = WorkflowStore(folder / f"bench-{size}.sqlite")
    workflows = [make_workflow(i) for i in range(size)]
    first_ms, _ = timed(lambda: store.commit("bench", workflows, parent=None, author="manual"))
    commits = []
    for n in range(20):  # one workflow changes per commit, as online induction does
        head = store.head_version("bench")
        workflows = [*workflows[:-1], make_workflow(size + n)]
        ms, _ = timed(lambda ws=workflows, h=head: store.commit("bench", ws, parent=h, author="neural"))
        commits.append(ms)
    reads = [timed(lambda: store.head("bench"))[0] for _ in range(5 if size >= 10000 else 20)]
    meta = [timed(lambda: store.head_info("bench"))[0] for _ in range(20)]
    index_dir = default_index_dir(store.path)
    full_ms, _ = timed(lambda: build_index(store, "bench", embedder, index_dir))
    store.commit(
        "bench",
        [*workflows[:-1], make_workflow(size + 99)],
        parent=store.head_version("bench"),
        author="rule",
    )
    incr_ms, _ = timed(lambda: retrieve(store, "bench", "warm", mode="topk", embedder=embedder))
    goals = [f"{VERBS[i % 10]} {THINGS[i % 8]} on the {SITES[(i * 3) % 10]} site" for i in range(queries)]
    topk = [
        timed(lambda g=g: retrieve(store, "bench", g, mode="topk", k=3, embedder=embedder))[0] for g in goals
    ]
    embed_only = [timed(lambda g=g: embedder.embed([g]))[0] for g in goals]
    store.close()
    return {
        "first commit": first_ms,
        "commit p50": statistics.median(commits),
        "commit p95": pct(commits, 0.95),
        "head read p50": statistics.median(reads),
        "head read p95": pct(reads, 0.95),
        "head meta p50": statistics.median(meta),
        "index build": full_ms,
        "index update (1 new)": incr_ms,
        "top-k p50": statistics.median(topk),
        "top-k p95": pct(topk, 0.95),
        "goal embed p50": statistics.median(embed_only),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    embedder = MiniLMEmbedder()
    embedder.embed(["warm up"])
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            results[size] = bench(size, args.queries, embedder, Path(tmp))
            print(f"done {size}", flush=True)
    rows = list(next(iter(results.values())))
    print(f"\n{'ms':<22}" + "".join(f"{size:>12,}" for size in args.sizes) + f"{'target':>12}")
    for row in rows:
        target = TARGETS.get(row)
        cells = "".join(f"{results[size][row]:>12.1f}" for size in args.sizes)
        print(f"{row:<22}{cells}{(f'< {target:.0f}' if target else ''):>12}")


if __name__ == "__main__":
    main()
