"""`awm induce`: turn admitted trajectories into workflows and commit them to a memory scope.

`register(app)` adds the top-level command to the main app (awm.cli calls it). User errors are
`AwmError`s, which `awm.cli.main` prints as one sentence with exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from awm.config import load_settings
from awm.errors import AwmError, ConfigError
from awm.evaluation.admission import check_rule, load_verdicts
from awm.induction.neural import DEFAULT_BUDGET_TOKENS, DEFAULT_MAX_TOKENS
from awm.induction.offline import MODES, InductionResult, induce_into_store, load_inputs
from awm.memory.commands import DbOption
from awm.memory.workflow import Workflow

BACKEND_CHOICES = ("auto", "local", "openai", "anthropic")


def _review_prompt(console: Console):
    """Rule ``manual``: show each candidate workflow as AWM text and ask y/n."""
    from awm.memory.text_format import render_workflows

    def ask(workflow: Workflow) -> bool:
        console.rule(f"candidate: {workflow.name}")
        console.print(render_workflows([workflow], "webarena"), markup=False, highlight=False)
        return typer.confirm("Keep this workflow?", default=False)

    return ask


def _print_result(console: Console, result: InductionResult, *, dry_run: bool) -> None:
    report = result.report
    table = Table(show_header=False, box=None)
    table.add_row("scope", report.scope)
    table.add_row("mode / admission", f"{report.mode} / {report.admission}")
    table.add_row("trajectories", f"{report.loaded} loaded, {len(report.out_of_scope)} out of scope")
    table.add_row("admitted", f"{len(report.admitted_ids)} ({len(report.rejected)} rejected)")
    if report.llm_calls:
        table.add_row(
            "model calls",
            f"{report.llm_calls} in {len(report.batches)} batch(es), "
            f"{report.prompt_tokens} prompt + {report.completion_tokens} completion tokens",
        )
    table.add_row("candidates", str(len(result.candidates)))
    merge = report.merge
    table.add_row(
        "merge",
        f"{len(merge.added)} added, {len(merge.updated)} with new provenance, "
        f"{len(merge.duplicates)} duplicate(s)",
    )
    console.print(table)
    for reason in report.answer_rejections:
        console.print(f"[yellow]not used:[/yellow] {reason}", highlight=False)
    for note in report.notes:
        console.print(f"note: {note}", highlight=False)
    commit = result.commit
    if commit.already_committed:
        assert commit.version is not None
        console.print(
            f"no change: these inputs were committed before, as {commit.version.scope} version "
            f"{commit.version.version} (see `awm memory log`)"
        )
        return
    if commit.diff is None:
        console.print("no change")
        return
    if dry_run:
        console.print("[bold]dry run[/bold]: nothing committed; the diff would be:")
    else:
        version = commit.version
        assert version is not None
        console.print(
            f"[green]committed[/green] {version.scope} version {version.version} (parent {version.parent})"
        )
    console.print(commit.diff.render().rstrip("\n"), markup=False, highlight=False)
    added = [w for w in commit.merged if w.name in set(commit.diff.added)]
    if added:
        from awm.memory.text_format import render_workflows

        console.print(render_workflows(added, "webarena").rstrip("\n"), markup=False, highlight=False)
    for duplicate in merge.duplicates:
        if duplicate.new_trajectory_ids:
            console.print(
                f"~ {duplicate.existing}: +{len(duplicate.new_trajectory_ids)} trajectory id(s) ({duplicate.reason})",
                markup=False,
                highlight=False,
            )


def induce_command(
    source: Annotated[
        Path,
        typer.Option("--from", help="Run folder of trajectory JSON files, a .jsonl dataset, or legacy logs."),
    ],
    scope: Annotated[str, typer.Option(help="Memory scope to write, e.g. miniwob/login-user.")],
    mode: Annotated[str, typer.Option(help="neural (LLM) or rule (no LLM).")] = "neural",
    admit_rule: Annotated[
        str,
        typer.Option("--admit", help="Which trajectories may teach: gt | judge | both | any | all | manual."),
    ] = "gt",
    auto: Annotated[
        bool, typer.Option("--auto", help="With --admit manual: accept every workflow unasked.")
    ] = False,
    verdicts: Annotated[
        Path | None,
        typer.Option(help="Separate verdicts (JSON object or JSONL), joined by trajectory id/task key."),
    ] = None,
    db: DbOption = None,
    backend: Annotated[
        str | None, typer.Option(help="LLM backend for --mode neural: local | openai | anthropic.")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model name (default: from settings or AWM_MODEL).")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint for --mode neural.")
    ] = None,
    budget: Annotated[
        int, typer.Option(min=256, help="Prompt token budget per model call.")
    ] = DEFAULT_BUDGET_TOKENS,
    max_tokens: Annotated[
        int, typer.Option(min=16, help="Answer length limit per call.")
    ] = DEFAULT_MAX_TOKENS,
    embed: Annotated[
        bool,
        typer.Option(
            "--embed", help="Also merge workflows whose descriptions embed closer than --threshold."
        ),
    ] = False,
    threshold: Annotated[float, typer.Option(min=0.0, max=1.0, help="Cosine threshold for --embed.")] = 0.9,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the diff; commit nothing.")] = False,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="TOML settings file (configs/*.toml).", dir_okay=False)
    ] = None,
) -> None:
    """Induce workflows from admitted trajectories and commit them as a new memory version.

    Prints the new version and its diff, or "no change". Nothing is committed when no trajectory is
    admitted, when the model's answer holds no usable workflow, when merging changes nothing, or when
    the same induction (same admitted trajectories, mode, rule and model) was committed before.

    Example: awm induce --from runs/2026-11-01 --scope miniwob/login-user --mode rule --admit gt
    """
    if mode not in MODES:
        raise AwmError(f"--mode '{mode}' is unknown; expected one of {', '.join(MODES)}")
    check_rule(admit_rule)
    if backend is not None and backend not in BACKEND_CHOICES:
        raise ConfigError(f"unknown LLM backend '{backend}'; expected one of: {', '.join(BACKEND_CHOICES)}")
    llm: dict[str, Any] = {"backend": backend, "model": model, "base_url": base_url}
    settings = load_settings(config, overrides={"llm": llm})
    console = Console()
    trajectories = load_inputs(source, scope=scope)
    joined = load_verdicts(verdicts) if verdicts is not None else None
    client = None
    if mode == "neural":
        from awm.llm.factory import make_client

        client = make_client(settings)
    embedder = None
    if embed:
        from awm.memory.embeddings import default_embedder

        embedder = default_embedder()
    from awm.memory.store import WorkflowStore

    with WorkflowStore(db or settings.memory_db) as store:
        result = induce_into_store(
            store,
            scope,
            trajectories,
            mode=mode,
            admission=admit_rule,
            client=client,
            verdicts=joined,
            embedder=embedder,
            threshold=threshold,
            budget_tokens=budget,
            max_tokens=max_tokens,
            review=_review_prompt(console) if admit_rule == "manual" and not auto else None,
            auto=auto,
            dry_run=dry_run,
        )
    _print_result(console, result, dry_run=dry_run)


def register(app: typer.Typer) -> None:
    """Add `awm induce` to the main app."""
    app.command("induce")(induce_command)
