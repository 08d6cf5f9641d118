"""`awm pipeline`: run an arm (online, offline, or as its config says), resume it, or run one stage.

A thin shell: flags -> `PipelineConfig` + `Settings` -> the one driver (`awm.pipeline.driver`) or a
single stage (`awm.pipeline.stages`).
A failed stage prints "stage '<name>' failed: <cause>" and exits 2, like every user error.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from awm.errors import DataError, StageError
from awm.files import write_text_atomic

app = typer.Typer(
    help="Stage drivers: induce while solving (online), induce then solve (offline), resume, single stages.\n\n"
    "Example: awm pipeline online --config configs/pipeline-online.toml",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ConfigOpt = Annotated[
    Path,
    typer.Option(
        "--config", "-c", help="TOML settings file (configs/*.toml) with a [pipeline] table.", dir_okay=False
    ),
]
SettingsOpt = Annotated[
    Path | None, typer.Option("--config", "-c", help="TOML settings file (configs/*.toml).", dir_okay=False)
]
OutOpt = Annotated[
    Path | None,
    typer.Option("--out", help="Run folder (default: runs/<time>-<name>); an existing one is resumed."),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
VerifyOpt = Annotated[
    str | None,
    typer.Option(
        "--verify",
        help="replay: commit a new workflow only after it re-ran on its source task and succeeded (default) | off.",
    ),
]
WorkflowsOpt = Annotated[
    str | None,
    typer.Option("--workflows", help="text (shown in the prompt) | executable (also a run_workflow action)."),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(min=1, help="Episodes at once, one browser each (overrides the config's workers)."),
]
ParallelOpt = Annotated[
    str | None,
    typer.Option("--parallel", help="Where parallel episodes run: local | ray (overrides parallel_backend)."),
]
RunDirArg = Annotated[
    Path, typer.Argument(help="A run folder written by awm pipeline (or awm run).", file_okay=False)
]


# --------------------------------------------------------------------------------------------------
# Whole arms
# --------------------------------------------------------------------------------------------------


def _print_result(result: Any, console: Console) -> None:
    from awm.pipeline.driver import PipelineResult

    assert isinstance(result, PipelineResult)
    table = Table(title=f"{result.name} ({result.memory})")
    for column in ("task", "reward", "judge", "memory seen", "memory after", "induction"):
        table.add_column(column)
    by_key = {v.task_key: v for v in result.versions}
    for t in result.trajectories:
        v = by_key.get(t.task.key)
        table.add_row(
            t.task.key.removeprefix("browsergym/"),
            "-" if t.verdict.reward is None else f"{t.verdict.reward:g}",
            t.verdict.judge or "-",
            "-" if v is None or v.memory_version_seen is None else str(v.memory_version_seen),
            "-" if v is None or v.memory_version_after is None else str(v.memory_version_after),
            (v.induction if v is not None else "") or "-",
        )
    console.print(table)
    for purpose, usage in sorted(result.usage.items()):
        console.print(
            f"{purpose}: {usage.calls} call(s) (+{usage.cached_calls} cached), "
            f"{usage.prompt_tokens} prompt / {usage.completion_tokens} completion tokens, ${usage.cost_usd:.4f}"
        )
    console.print(f"run folder: {result.run_dir}")
    if result.failed_stage is not None:
        raise StageError(result.error or f"stage '{result.failed_stage}' failed")


def _run_arm(
    config_path: Path | None,
    memory: str | None,
    out: Path | None,
    quiet: bool,
    extra: dict[str, Any],
    workers: int | None = None,
    parallel: str | None = None,
    verify: str | None = None,
    workflows: str | None = None,
) -> None:
    from awm.files import default_run_dir
    from awm.pipeline.config import load_pipeline_config
    from awm.pipeline.driver import run_arm

    overrides = dict(extra)
    if memory is not None:
        overrides["memory"] = memory
    if workers is not None:
        overrides["workers"] = workers
    if parallel is not None:
        overrides["parallel_backend"] = parallel
    if verify is not None:
        overrides["verify"] = verify
    if workflows is not None:
        overrides["workflows"] = workflows
    config, settings = load_pipeline_config(config_path, overrides)
    run_dir = out or default_run_dir(config.name, settings.runs_dir)
    console = Console()
    console.print(
        f"{config.name}: memory {config.memory}, {len(config.tasks)} task(s) x "
        f"{len(config.seeds) if config.seeds else 1} seed(s), {config.workers} worker(s) -> {run_dir}"
    )
    _print_result(run_arm(config, settings, run_dir, console=console, show_progress=not quiet), console)


@app.command("online")
def online_command(
    config: ConfigOpt,
    out: OutOpt = None,
    quiet: QuietOpt = False,
    workers: WorkersOpt = None,
    parallel: ParallelOpt = None,
    verify: VerifyOpt = None,
    workflows: WorkflowsOpt = None,
) -> None:
    """Induce while solving: after each task (or every induce_every tasks) of a scope, evaluate, admit,
    induce and commit a new memory version; the scope's next task sees it.

    The pipeline table's memory is taken as "online".

    Example: awm pipeline online --config configs/pipeline-online.toml --workflows executable --out runs/online-1
    """
    _run_arm(config, "online", out, quiet, {}, workers, parallel, verify, workflows)


@app.command("offline")
def offline_command(
    config: ConfigOpt,
    out: OutOpt = None,
    from_: Annotated[
        list[Path] | None,
        typer.Option("--from", help="Run folder or trajectory file to induce from (repeatable)."),
    ] = None,
    quiet: QuietOpt = False,
    workers: WorkersOpt = None,
    parallel: ParallelOpt = None,
    verify: VerifyOpt = None,
    workflows: WorkflowsOpt = None,
) -> None:
    """Induce once from earlier runs or datasets (offline_from or --from), freeze, then solve with it.

    Example: awm pipeline offline --config configs/pipeline-online.toml --from runs/train-1 --out runs/offline-1
    """
    extra: dict[str, Any] = {"offline_from": [str(p.resolve()) for p in from_]} if from_ else {}
    _run_arm(config, "offline", out, quiet, extra, workers, parallel, verify, workflows)


@app.command("run")
def run_arm_command(
    config: ConfigOpt,
    out: OutOpt = None,
    quiet: QuietOpt = False,
    workers: WorkersOpt = None,
    parallel: ParallelOpt = None,
    verify: VerifyOpt = None,
    workflows: WorkflowsOpt = None,
) -> None:
    """Run one arm as its pipeline table says (memory off, online, offline or fixed).

    Example: awm pipeline run --config configs/pipeline-online.toml
    """
    _run_arm(config, None, out, quiet, {}, workers, parallel, verify, workflows)


@app.command("resume")
def resume_command(run_dir: RunDirArg, quiet: QuietOpt = False) -> None:
    """Continue a pipeline run after a crash or kill: finished episodes are kept, an episode cut short
    is re-run from its start, and no memory version is committed twice. The config comes from the run.

    Example: awm pipeline resume runs/20260101-120000-online
    """
    from awm.pipeline.driver import resume

    console = Console()
    _print_result(resume(run_dir, console=console, show_progress=not quiet), console)


# --------------------------------------------------------------------------------------------------
# Single stages on a run folder
# --------------------------------------------------------------------------------------------------


@app.command("solve")
def solve_command(
    config: ConfigOpt,
    out: OutOpt = None,
    quiet: QuietOpt = False,
    workers: WorkersOpt = None,
    parallel: ParallelOpt = None,
) -> None:
    """Solve and record the config's task stream without inducing: memory off, or read-only with
    memory = "fixed" (the configured memory_db). Evaluate, induce and commit are separate commands.

    Example: awm pipeline solve --config configs/pipeline-online.toml --out runs/solve-1
    """
    from awm.pipeline.config import load_pipeline_config

    fixed, _ = load_pipeline_config(config)
    _run_arm(
        config,
        "fixed" if fixed.memory == "fixed" else "off",
        out,
        quiet,
        {"judge": False, "admission": "gt"},
        workers,
        parallel,
    )


@dataclass
class _StageTools:
    """The lighter context the single-stage commands give `evaluate_stage` and `induce_stage`."""

    config: Any
    clients: Any
    recorder: Any


def _settings(config_path: Path | None) -> Any:
    from awm.config import load_settings

    return load_settings(config_path)


def _run_trajectories(run_dir: Path, scope: str | None = None) -> list[Any]:
    from awm.induction.offline import in_scope
    from awm.trajectory import load_trajectories

    folder = Path(run_dir) / "trajectories"
    if not folder.is_dir():
        raise DataError(
            f"{run_dir}: no trajectories/ folder; expected a run folder written by awm pipeline or awm run"
        )
    found = load_trajectories(folder)
    if scope is not None:
        found = [t for t in found if in_scope(t, scope)]
        if not found:
            raise DataError(f"{run_dir}: no trajectory in scope '{scope}'")
    return found


@app.command("evaluate")
def evaluate_command(
    run_dir: RunDirArg,
    judge: Annotated[bool, typer.Option("--judge", help="Ask the LLM judge about each episode.")] = False,
    config: SettingsOpt = None,
) -> None:
    """Check every episode's ground-truth reward and, with --judge, record the judge's verdict.

    Example: awm pipeline evaluate runs/online-1 --judge
    """
    from awm.evaluation.success import is_success
    from awm.llm.usage import UsageMeter
    from awm.pipeline.config import PipelineConfig
    from awm.pipeline.progress import progress_board
    from awm.pipeline.stages import Clients, evaluate_stage
    from awm.traces import RunRecorder, open_run

    settings = _settings(config)
    trajectories = _run_trajectories(run_dir)
    with open_run(run_dir) as db:
        row = db.run()
    recorder = RunRecorder(run_dir, config=row.config, config_hash=row.config_hash, name=row.name)
    tools = _StageTools(
        config=PipelineConfig(tasks=["-"], judge=judge),
        clients=Clients(settings, UsageMeter()),
        recorder=recorder,
    )
    status = "failed"
    try:
        with progress_board(Console(), enabled=judge) as board:
            bar = board.bar("evaluate")
            bar.start(total=len(trajectories))
            evaluated = evaluate_stage(
                trajectories, ctx=tools, on_each=lambda t: bar.advance(is_success(t))
            )
        status = "done"
    finally:
        recorder.close(status=status)
    solved = sum(1 for t in evaluated if t.verdict.reward is not None and is_success(t))
    judged = sum(1 for t in evaluated if t.verdict.judge == "success")
    Console().print(
        f"{len(evaluated)} episode(s): {solved} solved by ground truth"
        + (f", {judged} by the judge" if judge else "")
    )
    if judge:  # where ground truth exists, how far the judge agrees with it: the judge audit
        from awm.evaluation.audit import audit

        checked = audit(evaluated)
        if checked.compared:
            Console().print(checked.to_markdown(), markup=False)


@app.command("admit")
def admit_command(
    run_dir: RunDirArg,
    rule: Annotated[str, typer.Option("--rule", help="gt | judge | both | any.")] = "gt",
    scope: Annotated[
        str | None, typer.Option(help="Only this memory scope (e.g. miniwob/login-user).")
    ] = None,
) -> None:
    """List which episodes of a run pass an admission rule, and why the others do not.

    Example: awm pipeline admit runs/online-1 --rule both --scope miniwob/login-user
    """
    from awm.pipeline.stages import admit_stage

    result = admit_stage(_run_trajectories(run_dir, scope), rule=rule)
    table = Table(title=f"admission '{rule}'")
    table.add_column("trajectory")
    table.add_column("admitted")
    table.add_column("why not")
    for t in result.admitted:
        table.add_row(t.trajectory_id, "yes", "")
    for tid, why in result.rejected.items():
        table.add_row(tid, "no", why)
    Console().print(table)


def candidates_path(run_dir: Path, scope: str) -> Path:
    """Where `awm pipeline induce` leaves a scope's candidate workflows for `awm pipeline commit`."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", scope).strip("._") or "scope"
    return Path(run_dir) / "pipeline" / f"candidates-{slug}.json"


@app.command("induce")
def induce_command(
    run_dir: RunDirArg,
    scope: Annotated[str, typer.Option(help="Memory scope to induce for (e.g. miniwob/login-user).")],
    mode: Annotated[str, typer.Option(help="rule | neural.")] = "rule",
    admit_rule: Annotated[
        str, typer.Option("--admit", help="Admission rule: gt | judge | both | any.")
    ] = "gt",
    config: SettingsOpt = None,
) -> None:
    """Admit a run's episodes of one scope and induce candidate workflows; writes
    RUN_DIR/pipeline/candidates-<scope>.json for `awm pipeline commit` (memory is not touched).

    Example: awm pipeline induce runs/online-1 --scope miniwob/login-user --mode rule --admit gt
    """
    from awm.llm.usage import UsageMeter
    from awm.pipeline.config import PipelineConfig
    from awm.pipeline.stages import Clients, PipelineStageError, admit_stage, induce_stage

    settings = _settings(config)
    admitted = admit_stage(_run_trajectories(run_dir, scope), rule=admit_rule)
    tools = _StageTools(
        config=PipelineConfig(tasks=["-"], admission="any"),
        clients=Clients(settings, UsageMeter()),
        recorder=None,
    )
    outcome = induce_stage(admitted.admitted, mode=mode, ctx=tools, admission=admit_rule)
    candidates = outcome.candidates
    if not candidates:
        raise PipelineStageError("induce", f"scope '{scope}': {outcome.reason}")
    path = candidates_path(run_dir, scope)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "scope": scope,
        "mode": mode,
        "admission": admit_rule,
        "workflows": [w.model_dump(mode="json") for w in candidates],
    }
    write_text_atomic(path, json.dumps(payload, indent=2, ensure_ascii=False))
    console = Console()
    for w in candidates:
        console.print(f"+ {w.name}: {w.description}")
    console.print(f"{len(candidates)} candidate(s) -> {path}")


@app.command("commit")
def commit_command(
    run_dir: RunDirArg,
    scope: Annotated[str, typer.Option(help="Memory scope whose candidates to commit.")],
    memory_db: Annotated[
        Path | None,
        typer.Option(
            "--db", help="Memory database (default: RUN_DIR/memory.sqlite, the run's own).", dir_okay=False
        ),
    ] = None,
) -> None:
    """Merge the candidates of `awm pipeline induce` into a memory scope and commit a new version.
    Committing the same candidates twice is a no-op (the commit is found by its message).

    Example: awm pipeline commit runs/online-1 --scope miniwob/login-user
    """
    from pydantic import ValidationError

    from awm.memory.store import WorkflowStore
    from awm.memory.workflow import Workflow
    from awm.pipeline.stages import MEMORY_DB_NAME, commit_stage

    path = candidates_path(run_dir, scope)
    if not path.is_file():
        raise DataError(f"{path}: no candidates; run `awm pipeline induce {run_dir} --scope {scope}` first")
    text = path.read_text()
    try:
        data = json.loads(text)
        workflows = [Workflow.model_validate(w) for w in data["workflows"]]
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        raise DataError(f"{path}: not a candidates file written by awm pipeline induce ({exc})") from None
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    message = f"pipeline commit of {path.name} ({digest})"
    with WorkflowStore(memory_db or Path(run_dir) / MEMORY_DB_NAME) as store:
        version = commit_stage(
            store, scope, workflows, author=str(data.get("mode", "manual")), message=message
        )
    if version is None:
        Console().print(f"{scope}: nothing new to commit")
    else:
        Console().print(f"{scope}: version {version.version} ({len(version.workflows)} workflows)")


def main() -> None:
    """`python -m awm.pipeline.commands ...`: the same app, for use before `awm pipeline` is mounted."""
    import sys

    from awm.errors import AwmError

    try:
        code = app(standalone_mode=False)
    except AwmError as exc:
        typer.secho(f"error: {exc}", err=True, fg=typer.colors.RED)
        sys.exit(exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
