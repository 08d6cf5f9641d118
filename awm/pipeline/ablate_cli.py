"""`awm ablate`: run a memory ablation from a TOML config and write its report.

A thin shell: flags -> `load_ablation` -> `run_ablation` -> tables printed, RESULTS.md named.
Mount it with `register(app)` from `awm.cli`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer


def ablate_command(
    config: Annotated[
        Path,
        typer.Argument(help="Ablation config (TOML): a pipeline table, an llm table, arm entries, repeats.", dir_okay=False),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            help="Ablation folder (default: runs/<time>-ablate-<name>); an existing one is resumed."
        ),
    ] = None,
    repeats: Annotated[
        int | None, typer.Option(min=1, help="Runs of each arm (overrides the config).")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(min=1, help="Episodes at once per arm, one browser each (overrides the config's workers)."),
    ] = None,
    parallel: Annotated[
        str | None,
        typer.Option("--parallel", help="Where parallel episodes run: local | ray (overrides parallel_backend)."),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Run each arm of an ablation on the same tasks and seeds, then compare them.

    Writes OUT/RESULTS.md, OUT/results.json and plots (success per task, success over the task
    stream with memory versions, tokens per step); each arm's runs are in OUT/arms/<arm>/rep<N>.
    Running again with the same --out resumes: finished episodes and arms are skipped.

    Arms with memory off, fixed or offline run their episodes in parallel with --workers N; online
    arms run their scopes in parallel and each scope's tasks in order.

    With benchmark = "mind2web" in the pipeline table, each arm (memory off, offline: induced from
    the train split, online) is an `awm mind2web run` on the data folder's split, and the report gives
    element accuracy, action F1, step SR and task SR per arm (macro and micro, intervals over tasks)
    with paired per-task differences and tokens per component (plot: mind2web_metrics.png).

    Example: awm ablate configs/miniwob-demo.toml --workers 2 --out runs/demo-ablation

    Example: awm ablate configs/mind2web-ablation.toml --out runs/mind2web-ablation
    """
    from rich.console import Console

    from awm.errors import ConfigError
    from awm.pipeline.ablation import load_ablation, run_ablation

    if parallel is not None and parallel not in ("local", "ray"):
        raise ConfigError(f"--parallel must be local or ray (got '{parallel}')")
    plan = load_ablation(config, repeats=repeats, workers=workers, backend=parallel)
    folder = out or Path(plan.settings.runs_dir) / f"{datetime.now():%Y%m%d-%H%M%S}-ablate-{plan.base.name}"
    console = Console()
    arms = ", ".join(a.name for a in plan.arms) + (", budget-matched" if plan.ablation.budget_matched else "")
    console.print(f"ablation {plan.base.name}: arms {arms}; {plan.ablation.repeats} repeat(s) -> {folder}")
    run_ablation(plan, folder, console=console, show_progress=not quiet)


def register(app: typer.Typer) -> None:
    """Mount `awm ablate` on the top-level app."""
    app.command("ablate")(ablate_command)
