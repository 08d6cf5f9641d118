"""`awm sites`: set up, start, reset, stop and list the arena's real web applications and their tasks.

`awm sites check`, which replays each template's demonstration in the browser consumer, is mounted here by
`awm.cli` from `awm.pipeline.sites_check_cli`: this package sits below the consumer and never imports it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from awm.sites.site import Site

app = typer.Typer(
    help="The arena: real web applications on 127.0.0.1 (setup, up, reset, down, status, tasks, check).\n\n"
    "Example: awm sites setup && awm sites up --site trac && awm sites tasks",
    no_args_is_help=True,
    add_completion=False,
)

SiteOption = Annotated[
    str | None, typer.Option("--site", help="One site or a comma list (default: every site): trac, shop, forum.")
]
TaskFileOption = Annotated[
    list[Path] | None,
    typer.Option("--task-file", help="A task file of your own (TOML), besides awm's; repeat for more.", dir_okay=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def _sites(selected: str | None) -> list[Site]:
    from awm.sites.registry import get_site, site_names

    return [get_site(name) for name in site_names(selected)]


@app.command("setup")
def setup_cmd(site: SiteOption = None) -> None:
    """Install each site in its own virtualenv and build its seeded, pristine state (idempotent: a
    second run checks the stamps and takes a second). Sites are set up side by side: most of the time
    is package downloads and the applications' own migrations, which overlap well.

    Example: awm sites setup --site trac
    """
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from awm.sites import lifecycle

    console = Console()
    started = time.monotonic()
    sites = _sites(site)

    def one(s: Site) -> tuple[Site, list[str], float]:
        t0 = time.monotonic()
        return s, lifecycle.setup(s), time.monotonic() - t0

    with ThreadPoolExecutor(max_workers=len(sites) or 1) as pool:
        for future in as_completed([pool.submit(one, s) for s in sites]):
            s, done, seconds = future.result()
            what = ", ".join(done) if done else "already set up"
            console.print(f"{s.name} ({s.package}): {what} ({seconds:.1f} s)")
    console.print(f"sites ready in {time.monotonic() - started:.1f} s")


@app.command("up")
def up_cmd(site: SiteOption = None) -> None:
    """Start each site on a free port of 127.0.0.1 (a fresh copy of its pristine state); a running one
    is left as it is. The servers keep running after this command: `awm sites down` stops them.

    Example: awm sites up --site trac
    """
    from awm.sites import lifecycle

    console = Console()
    for s in _sites(site):
        started = time.monotonic()
        state = lifecycle.up(s)
        console.print(f"{s.name}: {state.url}  (pid {state.pid}, {time.monotonic() - started:.1f} s)")


@app.command("reset")
def reset_cmd(site: SiteOption = None) -> None:
    """Put each site back in its pristine state (what every episode starts from).

    Example: awm sites reset --site shop
    """
    from awm.sites import lifecycle

    console = Console()
    for s in _sites(site):
        started = time.monotonic()
        state = lifecycle.reset(s)
        console.print(f"{s.name}: reset in {time.monotonic() - started:.2f} s, {state.url}")


@app.command("down")
def down_cmd(site: SiteOption = None) -> None:
    """Stop each site's server and every process it started, and those of the workers' own copies (with
    AWM_SITE_INSTANCE set: that copy alone).

    Example: awm sites down
    """
    from awm.sites import lifecycle
    from awm.sites.registry import get_site

    console = Console()
    for s in _sites(site):
        named = f" ({s.instance})" if s.instance else ""
        console.print(f"{s.name}{named}: {'stopped' if lifecycle.down(s) else 'was not running'}")
        for instance in [] if s.instance else lifecycle.instances(s):
            if lifecycle.down(get_site(s.name, instance=instance)):
                console.print(f"{s.name} ({instance}): stopped")


@app.command("status")
def status_cmd(site: SiteOption = None, as_json: JsonOption = False) -> None:
    """Whether each site is installed, seeded and running, where, and how much memory it uses.

    Example: awm sites status --json
    """
    from dataclasses import asdict

    from awm.sites import lifecycle

    rows = [lifecycle.status(s) for s in _sites(site)]
    if as_json:
        typer.echo(json.dumps([asdict(r) for r in rows], indent=2))
        return
    table = Table(title="arena sites")
    for column in ("site", "installed", "seeded", "running", "url", "memory"):
        table.add_column(column)
    for r in rows:
        memory = f"{r.memory_mb:.0f} MB" if r.memory_mb is not None else "-"
        table.add_row(r.name, _yes(r.installed), _yes(r.seeded), _yes(r.running), r.url or "-", memory)
    Console().print(table)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


@app.command("tasks")
def tasks_cmd(site: SiteOption = None, task_file: TaskFileOption = None, as_json: JsonOption = False) -> None:
    """Every task template: site, id, kind, instances, which are train (with a demonstration) and which
    test. Run one with `awm run --benchmark sites --tasks SITE.TEMPLATE#N`.

    Example: awm sites tasks --site trac --json
    """
    from awm.sites.registry import site_names
    from awm.sites.templates import load_templates

    names = set(site_names(site))
    templates = [t for t in load_templates(list(task_file or [])).values() if t.site in names]
    rows = [
        {
            "site": t.site, "id": t.id, "key": t.key, "kind": t.kind, "instances": len(t.instance),
            "train": t.numbers("train"), "test": t.numbers("test"), "login": t.login, "goal": t.goal,
            "source": t.source,
        }
        for t in templates
    ]  # fmt: skip
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"{len(rows)} task templates, {sum(r['instances'] for r in rows)} tasks")
    for column, width in (("site", 5), ("template", 22), ("kind", 11), ("instances", 9), ("train", 5), ("test", 9)):
        table.add_column(column, no_wrap=True, min_width=width)
    table.add_column("goal", no_wrap=True, overflow="ellipsis", max_width=60)
    for r in rows:
        table.add_row(
            r["site"], r["id"], r["kind"], str(r["instances"]), _numbers(r["train"]), _numbers(r["test"]),
            r["goal"],
        )  # fmt: skip
    Console().print(table)


def _numbers(numbers: list[int]) -> str:
    return ",".join(str(n) for n in numbers) or "-"
