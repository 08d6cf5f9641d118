"""`awm traces`: look at a run folder from the terminal (list runs, show episodes and steps).

`awm traces export` is mounted on this app by `awm.cli` from `awm.app.export_cli`: its `--html` renders the
web application's episode template, and nothing below the application imports it (DESIGN.md section 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .db import open_run
from .viewer import episode_json, episode_view, episodes_table, find_runs, runs_table

app = typer.Typer(
    help="Inspect run folders: episodes, steps, verdicts, timings.\n\nExample: awm traces show runs/miniwob-1",
    no_args_is_help=True,
    add_completion=False,
)

RunDir = Annotated[Path, typer.Argument(help="A run folder (holds run.sqlite).", file_okay=False)]


@app.command("list")
def list_runs(
    folder: Annotated[Path, typer.Argument(help="Folder to search for run folders.", file_okay=False)] = Path(
        "runs"
    ),
) -> None:
    """List the run folders under FOLDER with their status and counts.

    Example: awm traces list runs
    """
    Console().print(runs_table(find_runs(folder)))


@app.command("show")
def show(
    run_dir: RunDir,
    episode: Annotated[str | None, typer.Argument(help="Episode id, unique id prefix, or task key.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
    observation: Annotated[
        bool,
        typer.Option("--observation", "-o", help="Also print each step's observation and raw model output."),
    ] = False,
) -> None:
    """Without EPISODE, a table of the run's episodes; with it, that episode step by step.

    Example: awm traces show runs/miniwob-1 click-button#0
    """
    with open_run(run_dir) as db:
        if episode is None:
            run, episodes = db.run(), db.episodes()
            if as_json:
                payload = {
                    "run": run.model_dump(mode="json"),
                    "episodes": [e.model_dump(mode="json") for e in episodes],
                }
                typer.echo(json.dumps(payload, indent=2))
            else:
                Console().print(episodes_table(run, episodes))
            return
        row = db.find_episode(episode)
        steps = db.steps(row.id)
    if as_json:
        typer.echo(json.dumps(episode_json(row, steps), indent=2))
    else:
        Console().print(episode_view(row, steps, show_observation=observation))
