"""`awm traces export`: an episode as trajectory JSON, a run or an episode as one HTML page, a run as
Mind2Web records.

Why the command lives with the application and not in `awm.traces.commands`: its `--html` renders the
application's episode template (`export.export_html`), and nothing below the application may import it
(DESIGN.md section 2). `awm.cli`, above everything, mounts it on the `awm traces` app, so the command
line is `awm traces export` as before. The JSON and Mind2Web exports are the trace layer's own functions
(`RunDatabase.trajectory`, `traces.mind2web_export.export_run`); this is only their shell.

Every destination is checked for writing before any work starts (`require_writable_folder`), so one that
cannot be written is one line and exit 2 and nothing is left half-written; each file is then written
atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from awm.traces.commands import RunDir


def export_command(
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
    from awm.files import require_writable_folder, write_text_atomic

    if mind2web is not None:
        from awm.traces.mind2web_export import export_run

        if episode is not None or out is not None or html is not None:
            raise typer.BadParameter("--mind2web exports the whole run: give no EPISODE, OUT or --html with it")
        require_writable_folder(mind2web, f"--mind2web {mind2web}")
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
        from .export import export_html

        if out is not None:
            raise typer.BadParameter("give OUT or --html, not both")
        require_writable_folder(html.parent, f"--html {html}")
        page = export_html(run_dir, episode)
        write_text_atomic(html, page)
        typer.echo(f"wrote {html} ({len(page) // 1024} KiB)", err=True)
        return
    if episode is None:
        raise typer.BadParameter("EPISODE is needed for a JSON export (or use --html for the whole run)")
    from awm.traces.db import open_run
    from awm.trajectory import save_trajectory

    if out is not None:
        require_writable_folder(out.parent, f"OUT {out}")
    with open_run(run_dir) as db:
        trajectory = db.trajectory(episode)
    if out is None:
        typer.echo(trajectory.to_json())
    else:
        save_trajectory(trajectory, out)
        typer.echo(f"wrote {out} ({len(trajectory.steps)} steps)", err=True)


def register(traces_app: typer.Typer) -> None:
    """Mount `export` on the `awm traces` app (called by `awm.cli`)."""
    traces_app.command("export")(export_command)
