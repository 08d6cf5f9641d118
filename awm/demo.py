"""`awm demo`: the main job, exactly what `make demo` runs (`configs/sites-demo.toml`).

A real Chromium, a real web application (the arena's Trac) and the real local model; the arms (memory
off against online executable memory started from demonstrations), tasks and seeds are the config's
`[pipeline]` and `[[arm]]` tables, so the demo is reproducible and sized for a small machine. An arena
config whose arms read `offline_from` folders gets them first: each is the scripted replay (no model)
of the train instances' annotated demonstrations of the config's templates, resumed when it exists.
`--config configs/miniwob-demo.toml` runs the MiniWoB++ demo instead (`make demo-miniwob`).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from awm.config import PROJECT_ROOT, Settings
from awm.errors import ConfigError, StageError

DEFAULT_CONFIG = PROJECT_ROOT / "configs" / "sites-demo.toml"


def train_instances(tasks: list[str], task_files: list[str]) -> list[str]:
    """`site.template#n` for every train instance (the ones with a demonstration) of the templates
    that `tasks` names (a template or a whole site), in their order (`site_tasks`, which checks them)."""
    from awm.webarena.tasks import site_tasks

    found = site_tasks(tasks, None, task_files, split="train")
    return list(dict.fromkeys(f"{t.task_id.removeprefix('browsergym/sites.')}#{t.seed}" for t in found))


def demonstration_folders(config: Path) -> tuple[list[str], list[str], list[Path]]:
    """An arena config's (tasks, task files, the arms' `offline_from` folders); nothing for others."""
    try:
        data: dict[str, Any] = tomllib.loads(Path(config).read_text())
    except FileNotFoundError:
        raise ConfigError(f"demo config {config} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"demo config {config} is not valid TOML: {exc}") from None
    pipeline = data.get("pipeline", {})
    if pipeline.get("benchmark") != "sites":
        return [], [], []
    folders = [Path(p) for arm in data.get("arm", []) for p in arm.get("offline_from", [])]
    return list(pipeline.get("tasks", [])), list(pipeline.get("task_files", [])), list(dict.fromkeys(folders))


def replay_demonstrations(config: Path, settings: Settings, console: Console) -> None:
    """Fill each `offline_from` folder of an arena config with the replayed train demonstrations."""
    from awm.pipeline.config import parse_pipeline_table
    from awm.pipeline.driver import run_arm

    tasks, task_files, folders = demonstration_folders(config)
    if not folders:
        return
    names = train_instances(tasks, task_files)
    arm = parse_pipeline_table(
        {
            "name": "demo-demonstrations", "benchmark": "sites", "tasks": names, "task_files": task_files,
            "policy": "scripted", "memory": "off", "admission": "gt", "max_steps": 20,
        },
        source=f"{config} (demonstrations)",
    )  # fmt: skip
    for folder in folders:
        console.print(f"demonstrations: {len(names)} train instance(s) replayed, no model -> {folder}")
        result = run_arm(arm, settings, folder, console=console)
        if result.failed_stage is not None:
            raise StageError(result.error or f"stage '{result.failed_stage}' failed")


def running_sites() -> dict[str, str]:
    """The arena's sites whose server is running now: name -> URL."""
    from awm.sites import lifecycle
    from awm.sites.registry import get_site, site_names

    states = {name: lifecycle.server_state(get_site(name)) for name in site_names(None)}
    return {name: f"http://127.0.0.1:{state.port}/" for name, state in states.items() if state is not None}


def after_the_job(before: dict[str, str], after: dict[str, str]) -> tuple[list[str], list[str]]:
    """(sites to stop: started during the job; lines to print: what was stopped, what is left running).

    Why: the job starts the arena's servers it needs and a person who ran `make demo` should not find
    them still holding memory and ports afterwards without being told; a site that was running before
    the job is someone's own (`awm sites up`), so it is left as it was, and said so."""
    started = sorted(set(after) - set(before))
    kept = sorted(set(after) & set(before))
    lines = [f"stopped {name} (started for this job)" for name in started]
    lines += [
        f"left running: {name} at {after[name]} (it was running before the job; `awm sites down --site {name}` stops it)"
        for name in kept
    ]
    return started, lines


@contextmanager
def stopping_the_sites_it_starts(console: Console) -> Iterator[None]:
    """Stop, when the job ends (or fails), the arena sites it started, and say which sites are left running."""
    from awm.sites import lifecycle
    from awm.sites.registry import get_site

    before = running_sites()
    try:
        yield
    finally:
        to_stop, lines = after_the_job(before, running_sites())
        for name in to_stop:
            lifecycle.down(get_site(name))
        for line in lines:
            console.print(line, markup=False, highlight=False)


def demo_command(
    config: Annotated[
        Path,
        typer.Option("--config", "-c", help="TOML settings file (configs/*.toml).", dir_okay=False),
    ] = DEFAULT_CONFIG,
    out: Annotated[
        Path | None,
        typer.Option(help="Ablation folder (default: runs/<time>-demo); an existing one is resumed."),
    ] = None,
    workers: Annotated[int, typer.Option(min=1, help="Episodes at once, one browser each.")] = 1,
) -> None:
    """Run the main job: memory off against online executable workflow memory on three Trac templates
    of the arena with the local model, then print the comparison and where RESULTS.md is. The arena
    sites it starts are stopped at the end; one that was already running is left running, and said so.

    First, the train instances' demonstrations are replayed (no model) into the folder the memory arm
    induces from; then the config's [pipeline] and [[arm]] tables run; its [llm] table sets the model.

    Example: awm demo --out runs/demo    (or: awm demo --config configs/miniwob-demo.toml)
    """
    from awm.config import load_settings
    from awm.pipeline.ablation import load_ablation, run_ablation

    console = Console()
    with stopping_the_sites_it_starts(console):
        replay_demonstrations(config, load_settings(config), console)
        plan = load_ablation(config, workers=workers)
        folder = out or Path(plan.settings.runs_dir) / f"{datetime.now():%Y%m%d-%H%M%S}-demo"
        console.print(f"main job: {config} -> {folder}")
        run_ablation(plan, folder, console=console)
