"""`awm demo`: the main job, exactly what `make demo` runs (`awm ablate configs/miniwob-demo.toml`).

A real Chromium, real MiniWoB++ pages and the real local model; the arms (memory off against online
memory), tasks and seeds are the config's `[pipeline]` and `[[arm]]` tables, so the demo is reproducible
and sized for a small machine.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from awm.config import PROJECT_ROOT

DEFAULT_CONFIG = PROJECT_ROOT / "configs" / "miniwob-demo.toml"


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
    """Run the main job: memory off against online workflow memory on a small MiniWoB++ set with the
    local model, then print the comparison and where RESULTS.md is.

    What runs is the config's [pipeline] and [[arm]] tables; its [llm] table sets the model.

    Example: awm demo --workers 2
    """
    from rich.console import Console

    from awm.pipeline.ablation import load_ablation, run_ablation

    plan = load_ablation(config, workers=workers)
    folder = out or Path(plan.settings.runs_dir) / f"{datetime.now():%Y%m%d-%H%M%S}-demo"
    console = Console()
    console.print(f"main job: {config} -> {folder}")
    run_ablation(plan, folder, console=console)
