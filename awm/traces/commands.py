"""`awm traces`: look at a run folder from the terminal (list runs, show episodes and steps, export)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from awm.trajectory import save_trajectory

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


@app.command("export")
def export(
    run_dir: RunDir,
    episode: Annotated[
        str | None, typer.Argument(help="Episode id, unique id prefix, or task key (with --html: all when omitted).")
    ] = None,
    out: Annotated[
        Path | None, typer.Argument(help="Output file; stdout when omitted.", dir_okay=False)
    ] = None,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", metavar="OUT.html", dir_okay=False,
            help="Write one self-contained HTML page instead (screenshots embedded), of the episode or the whole run.",
        ),
    ] = None,
    mind2web: Annotated[
        Path | None,
        typer.Option(
            "--mind2web", metavar="DIR", file_okay=False,
            help="Write the run's successful episodes as Mind2Web task records, DIR/<split>/<split>_0.json "
            "(what awm mind2web and the Mind2Web loader read), one per episode.",
        ),
    ] = None,
    split: Annotated[
        str, typer.Option("--split", help="With --mind2web: the split folder to write (train, test_task, ...).")
    ] = "train",
    include_failed: Annotated[
        bool, typer.Option("--include-failed", help="With --mind2web: unsuccessful episodes too.")
    ] = False,
    negatives: Annotated[
        int,
        typer.Option("--negatives", help="With --mind2web: other actionable elements kept per step, at most."),
    ] = 50,
) -> None:
    """Write an episode's full trajectory JSON (rebuilt from the database if the episode never ended),
    or, with --html, a page to share a run or an episode without a server, or, with --mind2web, the
    run as Mind2Web data (each step's page, the acted element as the positive candidate, its id the
    BrowserGym bid) for offline induction and scoring.

    Example: awm traces export runs/miniwob-1 click-button#0 click-button.json

    Example: awm traces export runs/miniwob-1 --html miniwob-1.html

    Example: awm traces export runs/miniwob-1 --mind2web data/miniwob-m2w
    """
    if mind2web is not None:
        from .mind2web_export import export_run

        if episode is not None or out is not None or html is not None:
            raise typer.BadParameter("--mind2web exports the whole run: give no EPISODE, OUT or --html with it")
        report = export_run(
            run_dir, mind2web, split=split, include_failed=include_failed, max_negatives=negatives
        )
        typer.echo(
            f"wrote {report.file}: {len(report.records)} record(s), {report.n_steps} step(s)", err=True
        )
        for episode_id, reason in report.skipped.items():
            typer.echo(f"  skipped {episode_id}: {reason}", err=True)
        return
    if html is not None:
        from awm.app.export import export_html
        from awm.files import write_text_atomic

        if out is not None:
            raise typer.BadParameter("give OUT or --html, not both")
        page = export_html(run_dir, episode)
        write_text_atomic(html, page)
        typer.echo(f"wrote {html} ({len(page) // 1024} KiB)", err=True)
        return
    if episode is None:
        raise typer.BadParameter("EPISODE is needed for a JSON export (or use --html for the whole run)")
    with open_run(run_dir) as db:
        trajectory = db.trajectory(episode)
    if out is None:
        typer.echo(trajectory.to_json())
    else:
        save_trajectory(trajectory, out)
        typer.echo(f"wrote {out} ({len(trajectory.steps)} steps)", err=True)
