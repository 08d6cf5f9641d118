"""`awm suite`: run the adversarial suite with the grounded executor, recovery on or off."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="The adversarial suite: deterministic product-like pages, grounded steps, recovery on/off.\n\n"
    "Example: awm suite run --recovery off --out runs/suite",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command("run")
def run_command(
    recovery: Annotated[
        str, typer.Option(help="on | off: structural fallback, overlay dismissal, re-grounding.")
    ] = "on",
    tasks: Annotated[str | None, typer.Option(help="Comma list of task ids (default: every task).")] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Results folder (default: runs/<time>-suite); run_on/run_off.json, logs/, RESULTS.md."
        ),
    ] = None,
    headed: Annotated[bool, typer.Option("--headed", help="Show the browser window.")] = False,
    agent: Annotated[
        str,
        typer.Option(
            help="grounded (the step executor) | llm (the web agent, given each task's goal in words)."
        ),
    ] = "grounded",
    max_steps: Annotated[int, typer.Option(min=1, help="Steps per episode for --agent llm.")] = 10,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML settings file (configs/*.toml).", dir_okay=False),
    ] = None,
) -> None:
    """Run every suite task (or the named ones) with the grounded step executor and write the results.

    Running once with --recovery on and once with --recovery off into the same --out gives the ablation
    table and the failure taxonomy of the run without recovery in OUT/RESULTS.md. With --agent llm the
    LLM web agent gets each task's goal in words instead (same pages, same postconditions): solved,
    clean ends, stuck ends and wrong actions are reported apart.

    Example: awm suite run --recovery on --out runs/suite && awm suite run --recovery off --out runs/suite
    """
    from rich.console import Console

    from awm.errors import ConfigError
    from awm.pipeline.progress import progress_board
    from awm.suite.runner import run_suite, select_tasks

    if recovery not in ("on", "off"):
        raise ConfigError(f"--recovery must be on or off (got '{recovery}')")
    if agent not in ("grounded", "llm"):
        raise ConfigError(f"--agent must be grounded or llm (got '{agent}')")
    chosen = select_tasks([t.strip() for t in tasks.split(",") if t.strip()] if tasks else None)
    folder = out or Path("runs") / f"{datetime.now():%Y%m%d-%H%M%S}-suite"
    console = Console()
    if agent == "llm":
        _run_agent(chosen, folder, config, max_steps, headed, console)
        return
    with progress_board(console) as board:
        bar = board.bar(f"suite (recovery {recovery})")
        bar.start(total=len(chosen))
        run = run_suite(
            chosen,
            recovery=recovery == "on",
            out=folder,
            headless=not headed,
            on_task=lambda report: bar.advance(report.success),
        )
    console.print(f"recovery {recovery}: {run.solved}/{len(run.tasks)} solved in {run.seconds:.0f} s")
    for report in run.tasks:
        if not report.success:
            console.print(f"  {report.task_id}: {report.error}")
    console.print(f"results: {folder / 'RESULTS.md'}")


def _run_agent(
    chosen: list, folder: Path, config: Path | None, max_steps: int, headed: bool, console: object
) -> None:
    from awm.config import load_settings
    from awm.pipeline.progress import progress_board
    from awm.suite.agent_run import run_suite_agent

    settings = load_settings(config, overrides={"browser": {"headless": not headed}})
    with progress_board(console) as board:  # type: ignore[arg-type]
        bar = board.bar("suite (web agent)")
        bar.start(total=len(chosen))
        run = run_suite_agent(
            chosen,
            out=folder,
            settings=settings,
            max_steps=max_steps,
            on_task=lambda r: bar.advance(r.success),
        )
    solved = [t for t in run.tasks if t.success]
    console.print(  # type: ignore[attr-defined]
        f"web agent: {len(solved)}/{len(run.tasks)} solved, {sum(t.clean_end for t in solved)} of them ended "
        f"cleanly, {sum(t.stuck for t in run.tasks)} stuck, {sum(bool(t.wrong_actions) for t in run.tasks)} with a "
        f"wrong action; results: {folder / 'RESULTS.md'}"
    )
