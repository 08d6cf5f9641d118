"""`awm sites check`: validate the arena's templates by replaying their demonstrations, no model.

It lives here, above the browser consumer it drives (`awm.webarena`'s harness and replay policy), and
`awm.cli` mounts it under `awm sites`: the sites package sits below the consumer in the import graph and
never imports it (`tests/test_architecture.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from awm.sites.commands import SiteOption, TaskFileOption

CHECK_HELP = """Validate templates by demonstration: reset the site, check that the success check FAILS on the
pristine state, replay the train instance's demonstration with the scripted replay (no model), check
that it PASSES after. A template whose check cannot tell the two apart is a defect. Writes CHECK.md
and check.json; exits 1 when any template fails.

Example: awm sites check --site trac --all"""


def register(sites_app: typer.Typer) -> None:
    sites_app.command("check", help=CHECK_HELP)(check_command)


def check_command(
    site: SiteOption = None,
    task_file: TaskFileOption = None,
    templates: Annotated[
        str | None, typer.Option("--templates", help="Comma list of template ids (default: every one).")
    ] = None,
    all_instances: Annotated[
        bool, typer.Option("--all", help="Every train instance of each template (default: the first).")
    ] = False,
    out: Annotated[Path | None, typer.Option(help="Results folder (default: runs/<time>-sites-check).")] = None,
) -> None:
    from awm.assets import configure_runtime_env
    from awm.config import load_settings
    from awm.files import default_run_dir
    from awm.pipeline.sites_check import check_templates, render_check
    from awm.sites.registry import site_names

    configure_runtime_env()
    names = set(site_names(site))
    wanted = {t.strip() for t in (templates or "").split(",") if t.strip()}
    folder = out or default_run_dir("sites-check", load_settings().runs_dir)
    console = Console()
    results = check_templates(
        names, wanted, list(task_file or []), all_instances=all_instances, out=folder, console=console
    )
    console.print(render_check(results), markup=False, highlight=False)
    console.print(f"results: {folder / 'CHECK.md'}")
    if not all(r.ok for r in results):
        raise typer.Exit(1)
