"""`awm mind2web score|validate`: score a predictions file with AWM's metrics; check a split's records.

Why a command: scoring must be reproducible from files alone (gold split + predictions JSONL), with no model
or browser, so a published run can be re-scored and compared under both element-matching rules.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from awm.errors import ConfigError
from awm.mind2web.data import BadRecord, iter_records
from awm.mind2web.metrics import Aggregate, MatchMode, ScoreReport, score
from awm.mind2web.predictions import load_predictions

app = typer.Typer(
    help="Mind2Web (offline, cached pages): score predictions with AWM's metrics, validate data.\n\n"
    "Example: awm mind2web score --data data/mind2web --predictions preds.jsonl --split test_task",
    no_args_is_help=True,
    add_completion=False,
)

_METRICS = ("element_accuracy", "action_f1", "step_success_rate", "task_success_rate")


def _match_mode(value: str) -> MatchMode:
    if value not in ("awm", "any"):
        raise ConfigError(f"--match must be 'awm' or 'any'; got {value!r}")
    return "awm" if value == "awm" else "any"


def report_json(report: ScoreReport) -> dict[str, object]:
    """The `--json` payload: macro and micro first (the headline numbers), then the breakdowns."""
    return {
        "macro": report.macro.model_dump(),
        "micro": report.micro.model_dump(),
        "match": report.match,
        "per_website": {k: v.model_dump() for k, v in report.per_website.items()},
        "per_domain": {k: v.model_dump() for k, v in report.per_domain.items()},
        "per_split": {k: v.model_dump() for k, v in report.per_split.items()},
        "unparsed": report.unparsed,
    }


def _add_row(table: Table, name: str, agg: Aggregate, style: str | None = None) -> None:
    table.add_row(
        name, *(f"{getattr(agg, m):.1f}" for m in _METRICS), str(agg.n_tasks), str(agg.n_steps), style=style
    )


def render_report(report: ScoreReport) -> Table:
    """A Rich table: macro and micro overall, then macro per split, domain and website."""
    table = Table(title=f"Mind2Web scores (x100; element match: {report.match})")
    table.add_column("scope")
    for header in ("element acc", "action F1", "step SR", "task SR", "tasks", "steps"):
        table.add_column(header, justify="right")
    _add_row(table, "all (macro)", report.macro, style="bold")
    _add_row(table, "all (micro)", report.micro)
    for label, groups in (
        ("split", report.per_split),
        ("domain", report.per_domain),
        ("website", report.per_website),
    ):
        for name, agg in groups.items():
            _add_row(table, f"{label}: {name}", agg)
    return table


@app.command("score")
def score_command(
    data: Annotated[
        Path, typer.Option("--data", help="Mind2Web root: DATA/<split>/*.json (or osunlp/Mind2Web).")
    ],
    predictions: Annotated[
        Path, typer.Option("--predictions", help="JSONL: annotation_id, action_uid, prediction.")
    ],
    split: Annotated[
        str, typer.Option("--split", help="train, test_task, test_website or test_domain.")
    ] = "test_task",
    match: Annotated[
        str, typer.Option("--match", help="awm: first positive candidate only (AWM); any: any.")
    ] = "awm",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of a table.")
    ] = False,
) -> None:
    """Score a predictions file against a split with AWM's metrics (macro and micro, x100).

    Example: awm mind2web score --data data/mind2web --predictions run/preds.jsonl --split test_task --json
    """
    mode = _match_mode(match)
    preds = load_predictions(predictions)
    report = score(iter_records(data, split, with_html=False), preds, match=mode)
    if as_json:
        typer.echo(json.dumps(report_json(report), ensure_ascii=False))
        return
    console = Console()
    console.print(render_report(report))
    if report.unparsed:
        console.print(f"{len(report.unparsed)} answer(s) could not be parsed (scored wrong); first:")
        for line in report.unparsed[:5]:
            console.print(f"  {line[:160]}", markup=False)


@app.command("validate")
def validate_command(
    data: Annotated[Path, typer.Option("--data", help="Mind2Web root: DATA/<split>/*.json.")],
    split: Annotated[
        str, typer.Option("--split", help="train, test_task, test_website or test_domain.")
    ] = "train",
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="List bad records and go on instead of stopping.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of text.")] = False,
) -> None:
    """Stream a split, validate every record, and print counts (tasks, steps, websites, domains, bad).

    Exits 2 at the first bad record, naming file, record and field; with --skip-bad lists them all and
    exits 1 if any was found.

    Example: awm mind2web validate --data data/mind2web --split train --skip-bad
    """
    bad: list[BadRecord] = []
    tasks = steps = no_positive = 0
    websites: Counter[str] = Counter()
    domains: Counter[str] = Counter()
    ops: Counter[str] = Counter()
    for record in iter_records(data, split, skip_bad=skip_bad, bad=bad, with_html=False):
        tasks += 1
        steps += len(record.actions)
        websites[record.website] += 1
        domains[record.domain] += 1
        for action in record.actions:
            ops[action.operation.original_op or action.operation.op] += 1
            no_positive += not action.pos_candidates
    summary = {
        "split": split,
        "tasks": tasks,
        "steps": steps,
        "websites": len(websites),
        "domains": dict(sorted(domains.items())),
        "ops": dict(sorted(ops.items())),
        "steps_without_positive": no_positive,
        "bad": [b.model_dump() for b in bad],
    }
    if as_json:
        typer.echo(json.dumps(summary, ensure_ascii=False))
    else:
        typer.echo(
            f"{split}: {tasks} tasks, {steps} steps, {len(websites)} websites, {len(domains)} domains; "
            f"{no_positive} steps without a positive candidate; ops {dict(sorted(ops.items()))}"
        )
        for item in bad:
            typer.echo(f"bad: {item}")
        if bad:
            typer.echo(f"{len(bad)} bad record(s) skipped")
    if bad:
        raise typer.Exit(1)
