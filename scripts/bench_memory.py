"""Benchmark the workflow store and retrieval at 100, 1,000 and 10,000 workflows in one scope.

Prints one table: commit (safe default and ``trust_unchanged``), head read (cold: a new store
instance parses every workflow; warm: the same instance), index build / rebuild / load times and top-k
retrieval latency through a `Retriever`, p50 and p95 side by side with the targets (issue 4: top-k p95
and commit p95 under 20 ms at 10,000 workflows). Everything is real: SQLite on disk, MiniLM on the CPU,
faiss. The machine's load average is printed with the figures, since other processes skew them.

Run: python scripts/bench_memory.py [--sizes 100 1000 10000] [--queries 30]   (about 2-3 minutes)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from awm.memory.embeddings import MiniLMEmbedder
from awm.memory.retrieval import Retriever, build_index, default_index_dir, retrieve
from awm.memory.store import WorkflowStore
from awm.memory.workflow import Workflow, WorkflowStep
from awm.trajectory import TargetDesc

TARGETS = {"commit p95": 20.0, "commit trusted p95": 20.0, "top-k p95": 20.0}  # ms, at 10,000 workflows

SITES = ["flight", "hotel", "forum", "shop", "mail", "calendar", "map", "repo", "bank", "news"]
VERBS = ["search for", "book", "sort", "filter", "reply to", "open", "edit", "delete", "share", "compare"]
THINGS = ["a product", "a post", "an issue", "a message", "an event", "a route", "a room", "a ticket"]
SCOPE = "bench"


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


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def spread(name: str, values: list[float]) -> dict[str, float]:
    return {f"{name} p50": statistics.median(values), f"{name} p95": pct(values, 0.95)}


def goals(n: int, salt: str) -> list[str]:
    return [f"{VERBS[i % 10]} {THINGS[i % 8]} on the {SITES[(i * 3) % 10]} site {salt}{i}" for i in range(n)]


def bench(size: int, queries: int, embedder: MiniLMEmbedder, folder: Path) -> dict[str, float]:
    db = folder / f"bench-{size}.sqlite"
    out: dict[str, float] = {}
    store = WorkflowStore(db)
    workflows = [make_workflow(i) for i in range(size)]
    out["first commit"] = timed(lambda: store.commit(SCOPE, workflows, parent=None, author="manual"))
    commits: dict[bool, list[float]] = {False: [], True: []}
    for n in range(40):  # one workflow changes per commit, as online induction does
        trust = n % 2 == 1
        head = store.head_version(SCOPE)
        workflows = [*workflows[:-1], make_workflow(size + n)]
        commits[trust].append(
            timed(
                lambda ws=workflows, h=head, t=trust: store.commit(
                    SCOPE, ws, parent=h, author="neural", trust_unchanged=t
                )
            )
        )
    out |= spread("commit", commits[False]) | spread("commit trusted", commits[True])

    cold = []
    for _ in range(3 if size >= 10000 else 10):
        with WorkflowStore(db) as fresh:
            cold.append(timed(lambda s=fresh: s.head(SCOPE)))
    out |= spread("head read cold", cold)
    out |= spread("head read warm", [timed(lambda: store.head(SCOPE)) for _ in range(20)])
    out["head meta p50"] = statistics.median([timed(lambda: store.head_info(SCOPE)) for _ in range(10)])

    index_dir = default_index_dir(db)
    out["index build (all)"] = timed(lambda: build_index(store, SCOPE, embedder, index_dir))
    retriever = Retriever(embedder)
    out["index load (disk)"] = timed(lambda: retriever.index(store, SCOPE))
    store.commit(
        SCOPE, [*workflows[:-1], make_workflow(size + 99)], parent=store.head_version(SCOPE), author="rule"
    )
    out["index rebuild (1 new)"] = timed(lambda: retriever.index(store, SCOPE))
    assert (retriever.stats.index_loads, retriever.stats.index_builds) == (1, 1), retriever.stats

    fresh_goals = goals(queries, "a")
    out |= spread(
        "top-k", [timed(lambda g=g: retriever.retrieve(store, SCOPE, g, mode="topk")) for g in fresh_goals]
    )
    out |= spread(
        "top-k repeat goal",
        [timed(lambda g=g: retriever.retrieve(store, SCOPE, g, mode="topk")) for g in fresh_goals],
    )

    def per_lookup_store(goal: str) -> None:  # what the runner does today: a store opened per lookup
        with WorkflowStore(db) as s:
            retriever.retrieve(s, SCOPE, goal, mode="topk")

    out |= spread("top-k new store", [timed(lambda g=g: per_lookup_store(g)) for g in goals(queries, "b")])
    assert retriever.stats.index_builds == 1 and retriever.stats.index_loads == 1, retriever.stats
    out["top-k one-off p50"] = statistics.median(
        [timed(lambda g=g: retrieve(store, SCOPE, g, mode="topk", embedder=embedder)) for g in goals(3, "c")]
    )
    out |= spread("goal embed", [timed(lambda g=g: embedder.embed([g])) for g in goals(queries, "d")])
    store.close()
    shutil.rmtree(index_dir, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()
    started = time.perf_counter()
    load_before = os.getloadavg()
    embedder = MiniLMEmbedder()
    embedder.embed(["warm up"])
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            results[size] = bench(size, args.queries, embedder, Path(tmp))
            print(f"done {size} ({time.perf_counter() - started:.0f} s)", flush=True)
    rows = list(next(iter(results.values())))
    print(f"\n{'ms':<24}" + "".join(f"{size:>11,}" for size in args.sizes) + f"{'target':>10}")
    for row in rows:
        target = TARGETS.get(row)
        cells = "".join(f"{results[size][row]:>11.1f}" for size in args.sizes)
        print(f"{row:<24}{cells}{(f'< {target:.0f}' if target else ''):>10}")
    load_after = os.getloadavg()
    print(
        f"\n{os.cpu_count()} CPUs; load average (1/5/15 min) {' '.join(f'{x:.2f}' for x in load_before)} before,"
        f" {' '.join(f'{x:.2f}' for x in load_after)} after; total {time.perf_counter() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
