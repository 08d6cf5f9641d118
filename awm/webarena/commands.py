"""`awm run`: solve BrowserGym tasks (MiniWoB++, WebArena, any task id) and write a run folder.

A thin shell: flags -> settings, tasks and a policy factory -> `run_tasks` -> a printed table.
Every check a user can fail (task names, seeds, WebArena sites, memory scope, backend) runs before
the first browser starts.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated, Any

import typer

from awm.errors import ConfigError


def run_command(
    tasks: Annotated[
        str,
        typer.Option("--tasks", "-t", help="Comma list: MiniWoB names, WebArena numbers, or BrowserGym ids."),
    ],
    benchmark: Annotated[
        str, typer.Option(help="miniwob | webarena | browsergym (full task ids).")
    ] = "miniwob",
    seeds: Annotated[
        str | None, typer.Option(help="Seeds, e.g. 0-4 or 0,3 (default: 0 for MiniWoB, none for WebArena).")
    ] = None,
    memory: Annotated[
        str,
        typer.Option(help="off | auto (each task's own scope) | a scope name such as miniwob/login-user."),
    ] = "off",
    memory_mode: Annotated[
        str, typer.Option(help="all (every workflow of the scope) | topk (most similar).")
    ] = "all",
    top_k: Annotated[
        int, typer.Option("--k", min=1, help="Workflows to retrieve with --memory-mode topk.")
    ] = 3,
    policy: Annotated[
        str, typer.Option(help="llm | scripted (MiniWoB click-test, click-button, enter-text, login-user).")
    ] = "llm",
    backend: Annotated[
        str | None, typer.Option(help="local | openai | anthropic (default: from settings).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model name (default: from settings or AWM_MODEL).")
    ] = None,
    max_steps: Annotated[int, typer.Option(min=1, help="Steps per episode.")] = 10,
    workers: Annotated[int, typer.Option(min=1, help="Parallel worker processes, one browser each.")] = 1,
    out: Annotated[
        Path | None,
        typer.Option(help="Run folder (default: runs/<time>-<name>); an existing one is resumed."),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Run name (default: <benchmark>-<policy>).")] = None,
    headed: Annotated[bool, typer.Option("--headed", help="Show the browser window.")] = False,
    judge: Annotated[
        bool, typer.Option("--judge", help="Also ask the LLM judge about each episode.")
    ] = False,
    no_grammar: Annotated[
        bool, typer.Option("--no-grammar", help="Local model: decode freely instead of under the page's ids.")
    ] = False,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML settings file (configs/*.toml).", dir_okay=False),
    ] = None,
) -> None:
    """Solve tasks in a live browser, record every step, and summarise the run.

    The run folder holds run.sqlite, events.jsonl, screenshots/, trajectories/, summary.md and summary.json.

    Running again with the same --out skips the episodes that already finished.

    Example: awm run --benchmark miniwob --tasks click-test,login-user --seeds 0-4 --memory auto
    """
    from rich.console import Console

    from awm.assets import configure_runtime_env
    from awm.config import load_settings
    from awm.webarena.env import BrowserEnvConfig
    from awm.webarena.harness import HarnessConfig
    from awm.webarena.report import rich_table
    from awm.webarena.runner import AgentFactory, default_run_dir, run_tasks, validate_memory
    from awm.webarena.tasks import needs_webarena, parse_seeds, prepare_webarena_env, resolve_tasks

    if policy not in ("llm", "scripted"):
        raise ConfigError(f"--policy must be llm or scripted (got '{policy}')")
    if memory_mode not in ("all", "topk"):
        raise ConfigError(f"--memory-mode must be all or topk (got '{memory_mode}')")
    overrides: dict[str, Any] = {"llm": {"backend": backend, "model": model}}
    settings = load_settings(config, overrides=overrides)
    task_list = resolve_tasks(benchmark, tasks, parse_seeds(seeds) if seeds is not None else None)
    if needs_webarena(task_list):
        prepare_webarena_env(config)
        if importlib.util.find_spec("browsergym.webarena") is None:
            raise ConfigError(
                "WebArena tasks need the browsergym-webarena package: pip install browsergym-webarena "
                "(then: python -c \"import nltk; nltk.download('punkt')\")"
            )
    if policy == "scripted" and memory != "off":
        raise ConfigError("--memory needs --policy llm (a scripted policy reads no memory)")
    validate_memory(memory, settings)
    configure_runtime_env()

    run_name = name or f"{benchmark}-{policy}"
    run_dir = out or default_run_dir(run_name, settings.runs_dir)
    factory = AgentFactory(
        settings,
        policy=policy,  # type: ignore[arg-type]
        memory=memory,
        memory_mode=memory_mode,  # type: ignore[arg-type]
        k=top_k,
        use_grammar=False if no_grammar else None,
    )
    console = Console()
    console.print(f"{len(task_list)} episode(s) -> {run_dir}")
    summary = run_tasks(
        task_list,
        policy_factory=factory,
        settings=settings,
        run_dir=run_dir,
        env_config=BrowserEnvConfig(headless=not headed),
        harness_config=HarnessConfig(max_steps=max_steps),
        workers=workers,
        judge=judge,
        memory=memory if memory == "off" else f"{memory} ({memory_mode})",
        name=run_name,
        console=console,
    )
    console.print(rich_table(summary))
    console.print(f"summary: {Path(run_dir) / 'summary.md'}")


def register(app: typer.Typer) -> None:
    """Mount `awm run` on the top-level app."""
    app.command("run")(run_command)
