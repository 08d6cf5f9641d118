"""Guidance on against guidance off, from finished runs: success paired by task, and which filters acted.

Each pair is two run folders of the same tasks, one with the agent's guidance filters on and one with
them off (`bench_sites.py --agent --guidance on|off`, `bench_live.py --guidance on|off`,
`bench_miniwob.py --guidance on|off`); their `trajectories/*.json` are read (the last attempt of each
task). Per pair: solved on and off, the tasks solved by one side only, and, from the on run's steps
(`Step.guidance`), each filter's steps, episodes, and how many of those episodes were solved, and how
many of them the off run lost (the episodes where the filter can have made the difference).

Run: .venv/bin/python scripts/guidance_report.py --pair forum runs/g-forum-on runs/g-forum-off \
         --pair live runs/g-live-on runs/g-live-off [--out docs-table.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from awm.evaluation.success import is_success
from awm.pipeline.episode_tables import filter_episodes, latest_trajectories
from awm.trajectory import Trajectory, load_trajectory


def episodes_of(run_dir: Path) -> dict[str, tuple[Trajectory, bool]]:
    """Task key -> (its last episode, solved). A `bench_live.py` folder is scored by its results.json
    (`reached`, read off the pages' server log: live pages have no reward); any other by the trajectory."""
    results = run_dir / "results.json"
    if results.is_file() and "pages" in (data := json.loads(results.read_text())):
        return {
            page["name"]: (load_trajectory(run_dir / page["trajectory_file"]), bool(page["reached"]))
            for page in data["pages"]
        }
    return {t.task.key: (t, is_success(t)) for t in latest_trajectories(run_dir)}


def compare(on_run: dict[str, tuple[Trajectory, bool]], off_run: dict[str, tuple[Trajectory, bool]]) -> dict:
    """Success on and off over the tasks both runs have, which side alone solved what, and per filter
    what it did in the on run."""
    keys = sorted(set(on_run) & set(off_run))
    on_by = {k: on_run[k][0] for k in keys}
    solved_on, solved_off = {k for k in keys if on_run[k][1]}, {k for k in keys if off_run[k][1]}
    won = [k for k in keys if k in solved_on and k not in solved_off]
    lost = [k for k in keys if k in solved_off and k not in solved_on]
    filters = {
        name: {
            "steps": n,
            "episodes": len(acted_in),
            "solved": len(acted_in & solved_on),
            "solved_only_with_guidance": len(acted_in & set(won)),
        }
        for name, (n, acted_in) in filter_episodes(on_by).items()
    }
    return {
        "tasks": len(keys),
        "solved_on": len(solved_on),
        "solved_off": len(solved_off),
        "only_on": won,
        "only_off": lost,
        "filters": filters,
    }


def render(pairs: dict[str, dict]) -> str:
    lines = [
        "| benchmark | tasks | guidance on | guidance off | difference | solved only on | solved only off |",
        "|---|---:|---:|---:|---:|---|---|",
    ]
    for name, c in pairs.items():
        diff = 100 * (c["solved_on"] - c["solved_off"]) / c["tasks"] if c["tasks"] else 0.0
        lines.append(
            f"| {name} | {c['tasks']} | {c['solved_on']} | {c['solved_off']} | {diff:+.1f} pts | "
            f"{', '.join(c['only_on']) or '-'} | {', '.join(c['only_off']) or '-'} |"
        )
    names = sorted({f for c in pairs.values() for f in c["filters"]})
    lines += [
        "",
        "Per filter, in the guidance-on run: steps it acted on / episodes / of those solved / of those "
        "solved only with guidance on (- : it never acted there).",
        "",
        "| filter | " + " | ".join(pairs) + " |",
        "|---|" + "---|" * len(pairs),
    ]
    for f in names:
        cells = []
        for c in pairs.values():
            got = c["filters"].get(f)
            cells.append(
                "-" if got is None
                else f"{got['steps']} / {got['episodes']} / {got['solved']} / {got['solved_only_with_guidance']}"
            )  # fmt: skip
        lines.append(f"| `{f}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--pair", nargs=3, action="append", metavar=("NAME", "ON_DIR", "OFF_DIR"), required=True,
        help="a benchmark's name and its guidance-on and guidance-off run folders",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, help="also write the table (markdown) and a .json beside it")
    args = parser.parse_args(argv)
    pairs = {}
    for name, on_dir, off_dir in args.pair:
        on, off = episodes_of(Path(on_dir)), episodes_of(Path(off_dir))
        if not on or not off:
            parser.error(f"{name}: no trajectories in {on_dir if not on else off_dir}/trajectories")
        pairs[name] = compare(on, off)
    text = render(pairs)
    print(text)
    if args.out:
        args.out.write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(pairs, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
