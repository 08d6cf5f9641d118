"""`awm doctor`: what is ready, what is missing, and the one command that fixes each missing part."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from awm.assets import run_checks
from awm.config import load_settings


def doctor_command(
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")] = False,
) -> None:
    """Check Chromium, the Playwright bridge, MiniWoB pages, the model file, tiktoken, embeddings and Ray.

    Exits 0 only when every required part is ready.

    Example: awm doctor --json
    """
    settings = load_settings()
    checks = run_checks(settings.home, settings.model_file)
    if json_output:
        import json

        typer.echo(json.dumps([c.__dict__ for c in checks], indent=2))
    else:
        table = Table(title="awm doctor")
        for column in ("part", "status", "detail", "fix"):
            table.add_column(column, overflow="fold")
        for check in checks:
            status = (
                "[green]ready[/]"
                if check.ok
                else ("[red]missing[/]" if check.required else "[yellow]absent[/]")
            )
            table.add_row(check.name, status, check.detail, "" if check.ok else check.fix)
        Console().print(table)
    if not all(c.ok for c in checks if c.required):
        raise typer.Exit(1)
