"""`awm run`: solve BrowserGym tasks (MiniWoB++, WebArena, any task id) and write a run folder.

A thin shell over the one driver: flags -> a one-arm `PipelineConfig` (memory off, or a fixed scope
read without writing) + `Settings` -> `awm.pipeline.driver.run_arm` -> a printed table. Every check a
user can fail (task names, seeds, WebArena sites, memory scope, backends) runs before the first
browser starts.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated, Any

import typer

from awm.config import Settings
from awm.errors import ConfigError

WorkersOpt = Annotated[
    int, typer.Option(min=1, help="Episodes at once, one browser each (local processes or Ray).")
]
ParallelOpt = Annotated[
    str, typer.Option("--parallel", help="Where parallel episodes run: local (processes) | ray.")
]


def run_command(
    tasks: Annotated[
        str | None,
        typer.Option("--tasks", "-t", help="Comma list: MiniWoB names, WebArena numbers, or BrowserGym ids."),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(help="A live page to work on (instead of --tasks), inside the rails; needs --goal."),
    ] = None,
    goal: Annotated[str | None, typer.Option(help="With --url: what the agent should do on the page.")] = None,
    confirm: Annotated[
        bool,
        typer.Option(
            "--confirm",
            help="With --url: ask on the terminal (y/n, default no) before a sensitive action "
            "(submitting a form; buy, pay, delete, send...; a sensitive field). Without it they are denied.",
        ),
    ] = False,
    confirm_with: Annotated[
        str,
        typer.Option(
            "--confirm-with",
            help="With --confirm: who answers: terminal (y/n here) | app (files in RUN/confirm, answered on "
            "awm serve's live page, which starts runs this way).",
        ),
    ] = "terminal",
    secret: Annotated[
        list[str] | None,
        typer.Option(
            "--secret",
            metavar="NAME=ENV_VAR",
            help="With --url: a secret the agent may type into a password field, e.g. password=SHOP_PASSWORD "
            "(the value is read from that environment variable; the model writes {password}; no record holds "
            "the value); repeat for more.",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            metavar="HOST",
            help="With --url: a host let through the address rules (a local fixture: 127.0.0.1); repeat for more.",
        ),
    ] = None,
    benchmark: Annotated[
        str | None,
        typer.Option(help="miniwob | sites (the arena: SITE.TEMPLATE#N) | webarena | browsergym (full task ids). Default: miniwob."),
    ] = None,
    task_file: Annotated[
        list[Path] | None,
        typer.Option("--task-file", help="With --benchmark sites: a task file of your own (TOML); repeat for more.", dir_okay=False),
    ] = None,
    seeds: Annotated[
        str | None, typer.Option(help="Seeds, e.g. 0-4 or 0,3 (default: 0 for MiniWoB, none for WebArena).")
    ] = None,
    memory: Annotated[
        str,
        typer.Option(help="off | auto (each task's own scope) | a scope such as miniwob/login-user, or a prefix such as miniwob (every scope below it, top-k)."),
    ] = "off",
    memory_mode: Annotated[
        str, typer.Option(help="all (every workflow of the scope) | topk (most similar).")
    ] = "all",
    workflows: Annotated[
        str,
        typer.Option(help="text (shown in the prompt) | executable (each runnable one is also a run_workflow action)."),
    ] = "text",
    top_k: Annotated[
        int, typer.Option("--k", min=1, help="Workflows to retrieve with --memory-mode topk.")
    ] = 3,
    policy: Annotated[
        str,
        typer.Option(help="llm | scripted (MiniWoB click-test, click-button, enter-text, login-user; an arena task's demonstration)."),
    ] = "llm",
    backend: Annotated[
        str | None, typer.Option(help="LLM backend: local | openai | anthropic (default: from settings).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model name (default: from settings or AWM_MODEL).")
    ] = None,
    max_steps: Annotated[
        int | None,
        typer.Option(min=1, help="Steps per episode (default 10; with --url the live budget, which it may only lower)."),
    ] = None,
    workers: WorkersOpt = 1,
    parallel: ParallelOpt = "local",
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

    With --url and --goal the agent works on that page inside the rails: the URL is checked before a
    browser starts (http/https; no local names or private, loopback, link-local or reserved addresses,
    unless --allow-host names them), every request is checked again, leaving the site is a hard stop,
    password and payment fields are never filled, downloads are off, and the step and time budgets are
    capped by [browser.rails]. The agent ends the run itself (an answer, or report_infeasible); --judge
    adds a verdict, otherwise the summary reports the agent's own end as self-reported.

    The run folder holds run.sqlite, events.jsonl, screenshots/, pages/ (each step's page as HTML), trajectories/, summary.md, summary.json
    and provenance.json (git commit, packages, the command). Running again with the same --out skips
    the episodes that already finished.

    Example: awm run --benchmark miniwob --tasks click-test,login-user --seeds 0-4 --workers 2

    Example: awm run --benchmark sites --tasks trac.ticket-priority#2,shop   (the arena; `awm sites tasks`)

    Example: awm run --url https://example.com/ --goal "Find the contact email and tell me" --confirm
    """
    from rich.console import Console

    from awm.config import load_settings
    from awm.pipeline.config import PipelineConfig, parse_pipeline_table
    from awm.pipeline.driver import run_arm
    from awm.pipeline.summary import live_lines, load_summary, rich_table
    from awm.webarena.tasks import (
        needs_webarena,
        parse_seeds,
        prepare_webarena_env,
        resolve_tasks,
        split_names,
    )

    live = url is not None
    if live == (tasks is not None):
        raise ConfigError("give either --tasks (benchmark tasks) or --url with --goal (a live page)")
    if not live:
        for flag, value in (
            ("--goal", goal), ("--confirm", confirm or None), ("--allow-host", allow_host), ("--secret", secret)
        ):
            if value:
                raise ConfigError(f"{flag} goes with --url (a live page)")
    elif benchmark is not None:
        raise ConfigError("--url runs a live page; leave out --benchmark")
    benchmark = "live" if live else (benchmark or "miniwob")
    if confirm_with not in ("terminal", "app"):
        raise ConfigError(f"--confirm-with must be terminal or app (got '{confirm_with}')")
    if confirm_with != "terminal" and not confirm:
        raise ConfigError("--confirm-with goes with --confirm")
    if memory_mode not in ("all", "topk"):
        raise ConfigError(f"--memory-mode must be all or topk (got '{memory_mode}')")
    if workflows not in ("text", "executable"):
        raise ConfigError(f"--workflows must be text or executable (got '{workflows}')")
    if policy == "scripted" and memory != "off":
        raise ConfigError("--memory needs --policy llm (a scripted policy reads no memory)")
    if parallel not in ("local", "ray"):
        raise ConfigError(f"--parallel must be local or ray (got '{parallel}')")
    overrides: dict[str, Any] = {
        "llm": {"backend": backend, "model": model},
        "browser": {"headless": not headed},
    }
    if no_grammar:
        overrides["agent"] = {"use_grammar": False}
    settings = load_settings(config, overrides=overrides)
    seed_list = parse_seeds(seeds) if seeds is not None else None
    run_name = name or ("live" if live else f"{benchmark}-{policy}")
    from awm.files import default_run_dir

    run_dir = out or default_run_dir(run_name, settings.runs_dir)
    if live:
        assert url is not None
        settings, max_steps = live_settings(
            settings, url, allow_hosts=allow_host or [], confirm=confirm_with if confirm else None,
            max_steps=max_steps, run_dir=run_dir,
            policy=policy, workers=workers, secrets=secret or [],
        )  # fmt: skip
        task_names = [url]
    else:
        assert tasks is not None
        task_names = split_names(tasks)
    files = [str(f) for f in task_file or []]
    task_list = resolve_tasks(benchmark, task_names, seed_list, goal=goal or "", task_files=files)
    if needs_webarena(task_list):
        prepare_webarena_env(config)
        if importlib.util.find_spec("browsergym.webarena") is None:
            raise ConfigError(
                "WebArena tasks need the browsergym-webarena package: pip install browsergym-webarena "
                "(then: python -c \"import nltk; nltk.download('punkt')\")"
            )
    validate_memory(memory, settings)
    arm: PipelineConfig = parse_pipeline_table(
        {
            "name": run_name,
            "benchmark": benchmark,
            "tasks": task_names,
            "task_files": files,
            "goal": goal or "",
            "seeds": seed_list,
            "max_steps": max_steps or 10,
            "policy": policy,
            "memory": "off" if memory == "off" else "fixed",
            "memory_scope": None if memory in ("off", "auto") else memory,
            "memory_mode": memory_mode,
            "workflows": workflows,
            "k": top_k,
            "judge": judge,
            "admission": "gt",
            "workers": workers,
            "parallel_backend": parallel,
        },
        source="awm run",
    )
    console = Console()
    console.print(f"{len(task_list)} episode(s) -> {run_dir}")
    result = run_arm(arm, settings, run_dir, console=console)
    if result.failed_stage is not None:
        from awm.errors import StageError

        raise StageError(result.error or f"stage '{result.failed_stage}' failed")
    summary = load_summary(run_dir)
    console.print(rich_table(summary))
    for line in live_lines(summary):
        console.print(line, markup=False, highlight=False)
    console.print(f"summary: {Path(run_dir) / 'summary.md'}")


def live_settings(
    settings: Settings,
    url: str,
    *,
    allow_hosts: list[str],
    confirm: str | None,
    max_steps: int | None,
    run_dir: Path,
    policy: str,
    workers: int,
    secrets: list[str] | None = None,
) -> tuple[Settings, int]:
    """The settings of a live run and its step budget; the URL is checked here, before any browser.

    `--max-steps` may lower the live budget (`[browser.rails] max_steps`), never raise it; a refused URL
    is a `RailsError` with the reason, exactly what `awm rails check` says. `confirm` names who answers
    the gate (terminal or app); None keeps `[browser.rails] confirm`. `secrets` are `NAME=ENV_VAR` pairs
    (`--secret`), checked here (the variable must be set) and added to `[browser.rails] secrets`.
    """
    from awm.rails import RailsError, check_url
    from awm.secrets import secrets_from_env

    if policy != "llm":
        raise ConfigError("--url needs --policy llm (the scripted policies know only their MiniWoB tasks)")
    if workers != 1:
        raise ConfigError("--url runs one live page: leave --workers at 1")
    rails = settings.browser.rails
    hosts = list(dict.fromkeys([*rails.allow_hosts, *allow_hosts]))
    verdict = check_url(url, allow_hosts=hosts)
    if not verdict.allowed:
        raise RailsError(f"--url {url}: refused: {verdict.reason}")
    budget = rails.max_steps
    if max_steps is not None and max_steps > budget:
        raise ConfigError(
            f"--max-steps {max_steps} is above the live-run step budget {budget} "
            "([browser.rails] max_steps, itself at most 50): a live run may only lower it"
        )
    named = {pair.partition("=")[0].strip(): pair.partition("=")[2].strip() for pair in secrets or []}
    secrets_from_env(secrets or [])  # a malformed pair or an unset variable stops the run here
    updated = rails.model_copy(
        update={
            "secrets": {**rails.secrets, **named},
            "allow_hosts": hosts,
            "confirm": confirm or rails.confirm,
            "confirm_dir": Path(run_dir) / "confirm",
        }
    )
    browser = settings.browser.model_copy(update={"rails": updated})
    return settings.model_copy(update={"browser": browser}), max_steps or budget


def validate_memory(memory: str, settings: Settings) -> None:
    """An explicit memory scope must exist before the run starts (off and auto may start empty)."""
    if memory == "off":
        return
    db = Path(settings.memory_db)
    if not db.is_file():
        raise ConfigError(f"--memory {memory}: the memory database {db} does not exist; use --memory off")
    if memory == "auto":
        return
    from awm.memory.store import WorkflowStore
    from awm.memory.view import scopes_under

    with WorkflowStore(db) as store:
        scopes = store.scopes()
    if not scopes_under(scopes, memory):  # the scope itself, or a prefix of scopes below it
        known = ", ".join(scopes[:10]) or "none"
        raise ConfigError(
            f"--memory {memory}: no such scope (nor scopes below it) in {db} (known scopes: {known})"
        )


def register(app: typer.Typer) -> None:
    """Mount `awm run` on the top-level app."""
    app.command("run")(run_command)
