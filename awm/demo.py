"""`awm demo`: the main job of `make demo`, a real end-to-end run on the embedded defaults.

A real Chromium, real MiniWoB++ pages and the real local model; what it runs is listed in
`configs/miniwob-demo.toml` so the demo is reproducible and sized for a small machine.
"""

from __future__ import annotations

import tomllib
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from awm.config import PROJECT_ROOT
from awm.errors import ConfigError

DEFAULT_CONFIG = PROJECT_ROOT / "configs" / "miniwob-demo.toml"


def demo_command(
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            "-c",
            help="TOML settings file (configs/*.toml).",
            dir_okay=False,
        ),
    ] = DEFAULT_CONFIG,
    out: Annotated[
        Path | None, typer.Option(help="Run folder (default: runs/<time>-demo); an existing one is resumed.")
    ] = None,
) -> None:
    """Run the main job: the local model on a small MiniWoB++ set, then print the table and where results are.

    What runs (tasks, seeds, steps) is the config's [demo] section; its [llm] table sets the model.

    Example: awm demo
    """
    from awm.pipeline.run_cli import run_command

    try:
        section = tomllib.loads(Path(config).read_text()).get("demo")
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read demo config {config}: {exc}") from None
    if not isinstance(section, dict) or not section.get("tasks"):
        raise ConfigError(f"{config} needs a [demo] section with a non-empty 'tasks' list")
    seeds = ",".join(str(s) for s in section.get("seeds", [0]))
    run_dir = out or Path("runs") / f"{datetime.now():%Y%m%d-%H%M%S}-demo"
    run_command(
        tasks=",".join(section["tasks"]),
        benchmark=section.get("benchmark", "miniwob"),
        seeds=seeds,
        max_steps=int(section.get("max_steps", 6)),
        out=run_dir,
        name="demo",
        config=Path(config),
        memory="off",
        memory_mode="all",
        top_k=3,
        policy="llm",
        backend=None,
        model=None,
        workers=1,
        headed=False,
        judge=False,
        no_grammar=False,
    )
