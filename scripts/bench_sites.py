"""Benchmark the arena: its sites (start, reset, memory, set-up), the size of what the agent sees on them,
and the agent itself (memory off, the embedded model) on every test instance.

Parts, each printed side by side with its target (this 2-core machine):
- `--sites`: per site, a second set-up (target: seconds), a cold start (target < 5 s), five resets
  (target < 2 s), the server's memory after the resets (target < 300 MB).
- `--observe`: per template, the observation tokens of its start page (target < 1,500 per step), with
  the observation's pruning on and off.
- `--agent`: memory off with the embedded model on the test instances of one site at a time, into a run
  folder that resumes; per template: solved, mean steps, model calls and prompt tokens per step, s per
  episode, and the failure anatomy (ends, failure classes, repeated actions, parse refusals).

Run: .venv/bin/python scripts/bench_sites.py --sites --observe
     .venv/bin/python scripts/bench_sites.py --agent --site trac [--templates a,b] [--per-template N | --instances 3]
         [--guidance on|off] [--out DIR]
     .venv/bin/python scripts/bench_sites.py --report DIR      (the agent tables of a finished run)
Writes DIR/bench_sites.md and DIR/bench_sites.json (default DIR: runs/<time>-bench-sites).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

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
TARGETS = {"start_s": 5.0, "reset_s": 2.0, "memory_mb": 300.0, "tokens": 1500}


def _template(trajectory: Trajectory) -> str:
    return trajectory.task.task_id.removeprefix("browsergym/sites.")


# --------------------------------------------------------------------------------------------------
# Sites
# --------------------------------------------------------------------------------------------------


def bench_sites(names: list[str], console: Console) -> list[dict]:
    from awm.sites import lifecycle
    from awm.sites.registry import get_site

    rows = []
    for name in names:
        site = get_site(name)
        t0 = time.monotonic()
        lifecycle.setup(site)
        setup_s = time.monotonic() - t0
        lifecycle.down(site)
        t0 = time.monotonic()
        lifecycle.up(site)
        start_s = time.monotonic() - t0
        resets = []
        for _ in range(5):
            t0 = time.monotonic()
            lifecycle.reset(site)
            resets.append(time.monotonic() - t0)
        memory = lifecycle.status(site).memory_mb
        rows.append({
            "site": name, "second_setup_s": round(setup_s, 2), "start_s": round(start_s, 2),
            "reset_median_s": round(statistics.median(resets), 2), "reset_max_s": round(max(resets), 2),
            "memory_mb": memory, "restart_on_reset": site.restart_on_reset,
        })  # fmt: skip
    table = Table(title="arena sites (targets: start < 5 s, reset < 2 s, memory < 300 MB, second set-up: seconds)")
    for column in ("site", "second set-up s", "start s", "reset s (median / max of 5)", "memory MB", "restarts"):
        table.add_column(column, justify="left" if column == "site" else "right")
    for r in rows:
        table.add_row(
            r["site"], f"{r['second_setup_s']:.1f}", f"{r['start_s']:.2f}",
            f"{r['reset_median_s']:.2f} / {r['reset_max_s']:.2f}", f"{r['memory_mb'] or 0:.0f}",
            "yes" if r["restart_on_reset"] else "no",
        )  # fmt: skip
    console.print(table)
    return rows


# --------------------------------------------------------------------------------------------------
# Observation size
# --------------------------------------------------------------------------------------------------


def bench_observe(names: list[str], console: Console) -> list[dict]:
    """The observation tokens of each template's start page (instance 0) with pruning on and off."""
    from awm.config import BrowserSettings
    from awm.sites.templates import load_templates
    from awm.trajectory import Task
    from awm.webarena.env import BrowserSession
    from awm.webarena.observation import estimate_tokens

    rows = []
    templates = [t for t in load_templates().values() if t.site in names]
    with BrowserSession(BrowserSettings(pre_observation_delay=0.3, slow_mo_ms=0)) as session:
        for template in templates:
            task = Task(task_id=f"browsergym/sites.{template.key}", scope=template.scope, benchmark="sites", seed=0)
            page = session.reset(task)
            pruned = estimate_tokens(page.text)
            session.config = session.config.model_copy(update={"obs_prune": False})
            whole = estimate_tokens(session.observe().text)
            session.config = session.config.model_copy(update={"obs_prune": True})
            rows.append({"template": template.key, "start": template.start, "tokens": pruned, "unpruned_tokens": whole})
    table = Table(title=f"observation tokens of each template's start page (target < {TARGETS['tokens']})")
    for column in ("template", "start", "tokens", "without pruning"):
        table.add_column(column, justify="left" if column in ("template", "start") else "right")
    for r in rows:
        table.add_row(r["template"], r["start"], str(r["tokens"]), str(r["unpruned_tokens"]))
    if rows:
        table.caption = (
            f"median {statistics.median(r['tokens'] for r in rows):.0f}, max {max(r['tokens'] for r in rows)}; "
            f"without pruning median {statistics.median(r['unpruned_tokens'] for r in rows):.0f}, "
            f"max {max(r['unpruned_tokens'] for r in rows)}"
        )
    console.print(table)
    return rows


# --------------------------------------------------------------------------------------------------
# The agent
# --------------------------------------------------------------------------------------------------


def agent_task_names(
    site: str, templates: list[str], per_template: int | None, instances: list[int] | None = None
) -> list[str]:
    """The tasks of an agent run: every test instance of the site's (chosen) templates, or the first
    `per_template` test instances of each (a subset for a machine without hours to spare; the first ones,
    never chosen by outcome), or the test instances numbered `instances` (one not seen while tuning)."""
    if per_template is None and instances is None:
        return [f"{site}.{t}" for t in templates] or [site]
    from awm.sites.templates import load_templates

    chosen = [t for t in load_templates().values() if t.site == site and (not templates or t.id in templates)]
    if instances is not None:
        return [f"{t.key}#{n}" for t in chosen for n in t.numbers("test") if n in instances]
    return [f"{t.key}#{n}" for t in chosen for n in t.numbers("test")[:per_template]]


def run_agent(site: str, names: list[str], out: Path, console: Console, guidance: str = "on") -> bool:
    """Memory off, the embedded model (response cache off), the named test instances, the agent's
    guidance filters on or off."""
    from awm.config import load_settings
    from awm.pipeline.config import parse_pipeline_table
    from awm.pipeline.driver import run_arm

    arm = parse_pipeline_table(
        {"name": f"bench-sites-{site}", "benchmark": "sites", "tasks": names, "policy": "llm", "memory": "off",
         "max_steps": 10, "admission": "gt", "workers": 1},
        source="bench_sites",
    )  # fmt: skip
    settings = load_settings(overrides={"llm": {"backend": "local", "cache": False}, "agent": {"guidance": guidance}})
    result = run_arm(arm, settings, out, console=console)
    if result.failed_stage is not None:
        console.print(f"stage {result.failed_stage} failed: {result.error}")
        return False
    return True


def observation_tokens(trajectories: list[Trajectory]) -> dict:
    """The observation the model saw at each of its steps (not a workflow's sub-steps): median and max
    tokens, and how many steps were over the 1,500-token target."""
    from awm.webarena.observation import estimate_tokens

    sizes = [estimate_tokens(s.observation) for t in trajectories for s in t.steps if s.called_by is None and s.observation]
    return {
        "steps": len(sizes),
        "median": statistics.median(sizes) if sizes else 0,
        "max": max(sizes, default=0),
        "over_target": sum(size > TARGETS["tokens"] for size in sizes),
    }


def agent_tables(run_dir: Path, console: Console) -> dict:
    trajectories = latest_trajectories(run_dir)
    rows = group_rows(trajectories, _template, "template")
    total, causes = overall(trajectories), anatomy(trajectories, _template)
    total["observation_tokens"] = observation_tokens(trajectories)
    table = Table(title="the agent on the arena's test instances (memory off, embedded model)")
    for column in ("template", "solved", "steps", "calls/step", "tok/step", "s/ep", "ends"):
        table.add_column(column, justify="left" if column in ("template", "ends") else "right")
    for r in rows:
        table.add_row(
            r["template"], f"{r['solved']}/{r['episodes']}", f"{r['mean_steps']:.1f}", f"{r['calls_per_step']:.2f}",
            f"{r['prompt_tokens_per_step']:.0f}", f"{r['seconds_per_episode']:.1f}",
            ", ".join(f"{k} x{v}" for k, v in r["ends"].items()),
        )  # fmt: skip
    rate = "n/a" if total["success_rate"] is None else f"{100 * total['success_rate']:.1f}%"
    table.caption = (
        f"solved {total['solved']}/{total['episodes']} ({rate}); {total['calls_per_step']:.2f} calls and "
        f"{total['prompt_tokens_per_step']:.0f} prompt tokens per step; {total['seconds_per_episode']:.1f} s per episode; "
        f"observation tokens per step median {total['observation_tokens']['median']:.0f}, "
        f"max {total['observation_tokens']['max']} (target < {TARGETS['tokens']})"
    )
    console.print(table)
    return {"overall": total, "templates": rows, "anatomy": causes}


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------


def render_markdown(data: dict) -> str:
    lines = ["# The arena", "", f"- command: `{data['command']}`", f"- written: {data['written']}", ""]
    if data.get("sites"):
        lines += [
            "## Sites (targets: start < 5 s, reset < 2 s, memory < 300 MB)", "",
            "| site | second set-up s | start s | reset s median / max | memory MB | restarts on reset |",
            "|---|---:|---:|---:|---:|---|",
        ]  # fmt: skip
        for r in data["sites"]:
            lines.append(
                f"| {r['site']} | {r['second_setup_s']:.1f} | {r['start_s']:.2f} | {r['reset_median_s']:.2f} / "
                f"{r['reset_max_s']:.2f} | {r['memory_mb'] or 0:.0f} | {'yes' if r['restart_on_reset'] else 'no'} |"
            )
        lines.append("")
    if data.get("observe"):
        lines += [
            "## Observation tokens of each template's start page (target < 1,500)", "",
            "| template | start | tokens | without pruning |", "|---|---|---:|---:|",
        ]  # fmt: skip
        lines += [f"| {r['template']} | `{r['start']}` | {r['tokens']} | {r['unpruned_tokens']} |" for r in data["observe"]]
        lines.append("")
    agent = data.get("agent")
    if agent:
        total = agent["overall"]
        rate = "n/a" if total["success_rate"] is None else f"{100 * total['success_rate']:.1f}%"
        lines += [
            "## The agent (memory off, embedded model, test instances)", "",
            f"**Solved {total['solved']}/{total['episodes']} ({rate})**; {total['calls_per_step']:.2f} model calls and "
            f"{total['prompt_tokens_per_step']:.0f} prompt tokens per step, {total['seconds_per_episode']:.1f} s per episode; "
            f"observation tokens per step: median {total['observation_tokens']['median']:.0f}, max "
            f"{total['observation_tokens']['max']}, {total['observation_tokens']['over_target']} of "
            f"{total['observation_tokens']['steps']} steps over 1,500. {step_cost_line(total)}",
            "",
            "| template | solved | mean steps | calls/step | prompt tok/step | s/episode | ends |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]  # fmt: skip
        for r in agent["templates"]:
            ends = ", ".join(f"{k} x{v}" for k, v in r["ends"].items())
            lines.append(
                f"| {r['template']} | {r['solved']}/{r['episodes']} | {r['mean_steps']:.1f} | {r['calls_per_step']:.2f} | "
                f"{r['prompt_tokens_per_step']:.0f} | {r['seconds_per_episode']:.1f} | {ends} |"
            )
        lines += ["", *anatomy_lines(agent["anatomy"])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sites", action="store_true", help="start, reset, memory and set-up of each site")
    parser.add_argument("--observe", action="store_true", help="observation tokens of each template's start page")
    parser.add_argument("--agent", action="store_true", help="the agent on the test instances (one site: --site)")
    parser.add_argument("--site", help="site(s), comma list (default: every site; --agent takes one)")
    parser.add_argument("--templates", help="comma list of template ids (--agent; default: every one)")
    parser.add_argument(
        "--per-template", type=int, metavar="N", help="--agent: only the first N test instances of each template"
    )
    parser.add_argument(
        "--instances", help="--agent: only these test instances of each template, a comma list (e.g. 3)"
    )
    parser.add_argument(
        "--guidance", choices=("on", "off"), default="on", help="--agent: the agent's guidance filters (default on)"
    )
    parser.add_argument("--out", type=Path, help="folder (default: runs/<time>-bench-sites); an agent run resumes")
    parser.add_argument("--report", type=Path, metavar="DIR", help="only print the agent tables of a finished run")
    args = parser.parse_args(argv)
    console = Console()
    command = shlex.join([Path(sys.executable).name, *sys.argv])
    out = args.report or args.out or ROOT / "runs" / f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-bench-sites"
    previous = out / "bench_sites.json"
    data: dict = json.loads(previous.read_text()) if previous.is_file() else {}
    data.update({"command": command, "written": datetime.now().isoformat(timespec="seconds")})
    if args.report is None:
        from awm.assets import configure_runtime_env
        from awm.sites.registry import site_names

        configure_runtime_env()
        names = site_names(args.site)
        if not (args.sites or args.observe or args.agent):
            parser.error("choose at least one of --sites, --observe, --agent (or --report DIR)")
        if args.sites:
            data["sites"] = bench_sites(names, console)
        if args.observe:
            data["observe"] = bench_observe(names, console)
        if args.agent:
            if len(names) != 1:
                parser.error("--agent runs one site at a time: give --site NAME")
            templates = [t.strip() for t in (args.templates or "").split(",") if t.strip()]
            numbers = [int(n) for n in args.instances.split(",")] if args.instances else None
            tasks = agent_task_names(names[0], templates, args.per_template, numbers)
            if not run_agent(names[0], tasks, out, console, args.guidance):
                return 1
    if (out / "trajectories").is_dir():
        data["agent"] = agent_tables(out, console)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "bench_sites.json", json.dumps(data, indent=2) + "\n")
    write_text_atomic(out / "bench_sites.md", render_markdown(data))
    console.print(f"wrote {out / 'bench_sites.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
