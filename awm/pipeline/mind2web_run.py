"""`awm mind2web run`: rank, prune, prompt and solve a Mind2Web split, with or without workflow memory.

Why in the pipeline: this is driver work (a run folder, resume, recording, the memory loop and its
commits); `awm.mind2web` only solves one task (`solve_task`) and reads the memory it is given.

The run folder holds ``run.json`` (the options), ``memory.sqlite`` (the run's own memory unless
``--db``), ``tasks/<annotation_id>.json`` (one trajectory per finished task, written atomically),
``offline_memory.json`` (what offline induction did), and at the end ``summary.md`` + ``summary.json``.
Running again with the same ``--out`` resumes: finished tasks are skipped (no model call), never
duplicated; a task that finished but whose online induction did not is induced before going on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import BaseModel

from awm.errors import ConfigError, DataError
from awm.files import write_text_atomic
from awm.llm.base import LLMClient
from awm.memory.store import WorkflowStore
from awm.mind2web.data import SPLITS, iter_records
from awm.mind2web.memory import memory_for
from awm.mind2web.metrics import score
from awm.mind2web.prompt import PAGE_FORMATS, PageFormat, pick_exemplar_steps, render_exemplar
from awm.mind2web.ranking import EmbeddingRanker, MindActRanker, Ranker
from awm.mind2web.schema import TaskRecord
from awm.mind2web.solve import predictions_for, scope_of, solve_task
from awm.pipeline.mind2web_memory import InductionNote, induce_from_train, induce_online
from awm.tokens import TokenCounter
from awm.trajectory import Trajectory, load_trajectory, save_trajectory

MemoryMode = Literal["off", "offline", "online"]
# Options that change results: a resumed run must not mix answers made under different ones.
RESULT_FIELDS = (
    "split",
    "website",
    "memory",
    "induction",
    "top_k",
    "ranker",
    "page_format",
    "exemplars",
    "seed",
    "max_tokens",
    "model",
)


class RunOptions(BaseModel):
    """Everything a Mind2Web run depends on (saved as run.json)."""

    data: str
    split: str = "test_task"
    website: str | None = None
    memory: MemoryMode = "off"
    induction: Literal["neural", "rule"] = "neural"
    top_k: int = 10
    ranker: Literal["minilm", "mindact"] = "minilm"
    page_format: PageFormat = "awm"  # the published pruned tree as AWM showed it; "mindact", "compact"
    scores: str | None = None
    exemplars: int = 0
    seed: int = 0
    limit: int | None = None
    max_tokens: int = 64
    context_window: int = 8192
    model: str = ""
    memory_db: str | None = None


class Mind2WebRunSummary(BaseModel):
    """The scores of one Mind2Web run and what stood behind them."""

    options: RunOptions
    tasks: int
    steps: int
    macro: dict[str, Any]
    micro: dict[str, Any]
    per_website: dict[str, Any]
    recall_at_k: float
    recall_steps: int
    outcomes: dict[str, int]
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    # annotation_id -> {scope, seen, committed (the version its online commit point made, else None)}
    memory_versions: dict[str, dict[str, Any]]
    offline_memory: list[InductionNote] = []
    unparsed: list[str] = []
    seconds: float = 0.0


def _task_path(out: Path, annotation_id: str) -> Path:
    return out / "tasks" / f"{annotation_id}.json"


def _check_options(out: Path, options: RunOptions) -> None:
    """Save run.json, or check that a resumed run uses the same result-changing options.

    A run.json without ``page_format`` was written before the option existed, when every page was compact.
    """
    path = out / "run.json"
    if path.exists():
        try:
            before = RunOptions.model_validate({"page_format": "compact", **json.loads(path.read_text())})
        except (ValueError, TypeError) as exc:  # not JSON, not an object, or not run options
            raise DataError(f"{path}: not a run options file ({exc})") from None
        changed = [f for f in RESULT_FIELDS if getattr(before, f) != getattr(options, f)]
        if changed:
            shown = ", ".join(f"{f}: {getattr(before, f)!r} -> {getattr(options, f)!r}" for f in changed)
            raise ConfigError(
                f"{out} holds a run with other options ({shown}); use another --out or the same options"
            )
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, options.model_dump_json(indent=2))


def make_ranker(options: RunOptions) -> Ranker:
    if options.ranker == "minilm":
        return EmbeddingRanker()
    scores = Path(options.scores) if options.scores else Path(options.data) / "scores_all_data.pkl"
    return MindActRanker.from_file(scores) if scores.exists() or options.scores else MindActRanker()


def _offline(
    out: Path,
    store: WorkflowStore,
    options: RunOptions,
    records: Sequence[TaskRecord],
    client: LLMClient | None,
    counter: TokenCounter | None,
) -> list[InductionNote]:
    """Induce each test website's memory from train once; the notes file marks it done."""
    marker = out / "offline_memory.json"
    if marker.exists():
        return [InductionNote.model_validate(n) for n in json.loads(marker.read_text())]
    websites = sorted({r.website for r in records})
    train = list(iter_records(options.data, "train", with_html=False))  # induction reads action_reprs only
    notes = induce_from_train(
        store,
        websites,
        records,
        train,
        mode=options.induction,
        client=client,
        counter=counter,
        budget_tokens=min(3000, options.context_window // 2),
    )
    write_text_atomic(marker, json.dumps([n.model_dump() for n in notes], indent=2))
    return notes


def load_exemplars(options: RunOptions) -> list[str]:
    """The seeded exemplars: picked on train records without html, then only those tasks loaded whole."""
    picks = pick_exemplar_steps(
        list(iter_records(options.data, "train", with_html=False)), options.exemplars, options.seed
    )
    wanted = {aid for aid, _ in picks}
    whole = {r.annotation_id: r for r in iter_records(options.data, "train") if r.annotation_id in wanted}
    rendered = (render_exemplar(whole[aid], i, options.seed, options.page_format) for aid, i in picks)
    return [text for text in rendered if text is not None]


def run_mind2web(
    options: RunOptions,
    out: Path,
    *,
    client: LLMClient,
    counter: TokenCounter,
    ranker: Ranker | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> Mind2WebRunSummary:
    """Solve every selected task not yet finished in `out`, maintain memory, then score everything."""
    started = time.monotonic()
    if options.split not in SPLITS or options.split == "train":
        raise ConfigError(
            f"--split must be one of test_task, test_website, test_domain (got {options.split!r})"
        )
    if options.top_k < 1:
        raise ConfigError(f"--top-k must be at least 1 (got {options.top_k})")
    out = Path(out)
    _check_options(out, options)
    records = list(iter_records(options.data, options.split, website=options.website))
    if options.limit is not None:
        records = records[: options.limit]
    if not records:
        where = f" for website {options.website!r}" if options.website else ""
        raise DataError(f"{options.data}: split {options.split} has no task{where}")
    ids = [r.annotation_id for r in records]
    if len(set(ids)) != len(ids):
        raise DataError(
            f"{options.data}: split {options.split} repeats an annotation_id; results are keyed by it"
        )
    ranker = ranker or make_ranker(options)
    from awm.provenance import write_provenance

    out.mkdir(parents=True, exist_ok=True)
    write_provenance(out)  # commit, packages, the command: with every results folder
    exemplars: list[str] = []
    if options.exemplars > 0:
        exemplars = load_exemplars(options)
    store = WorkflowStore(Path(options.memory_db) if options.memory_db else out / "memory.sqlite")
    notes: list[InductionNote] = []
    try:
        if options.memory == "offline":
            notes = _offline(
                out, store, options, records, client if options.induction == "neural" else None, counter
            )
        finished: dict[str, Trajectory] = {}
        for record in records:  # earlier runs' results, joined by annotation id
            path = _task_path(out, record.annotation_id)
            if path.exists():
                finished[record.annotation_id] = load_trajectory(path)
        for n, record in enumerate(records):
            if progress:
                progress(n, len(records), record.annotation_id)
            done = finished.get(record.annotation_id)
            if done is None:
                memory = memory_for(store, record) if options.memory != "off" else None
                done = solve_task(
                    record,
                    client=client,
                    ranker=ranker,
                    counter=counter,
                    context_window=options.context_window,
                    max_tokens=options.max_tokens,
                    top_k=options.top_k,
                    memory=memory,
                    exemplars=exemplars,
                    page_format=options.page_format,
                )
                save_trajectory(done, _task_path(out, record.annotation_id))
                finished[record.annotation_id] = done
            if options.memory == "online" and "induction" not in done.meta:
                own = [finished[r.annotation_id] for r in records[: n + 1] if r.website == record.website]
                note = induce_online(
                    store,
                    scope_of(record),
                    own,
                    after_task=record.annotation_id,
                    run=str(out.resolve()),
                    mode=options.induction,
                    client=client if options.induction == "neural" else None,
                    counter=counter,
                    budget_tokens=min(3000, options.context_window // 2),
                )
                done.meta["memory_committed"] = note.version if note.changed else None
                done.meta["induction"] = note.model_dump()
                save_trajectory(done, _task_path(out, record.annotation_id))
        if progress:
            progress(len(records), len(records), "")
    finally:
        store.close()
    return _summarise(
        options, records, [finished[r.annotation_id] for r in records], notes, time.monotonic() - started
    )


def _summarise(
    options: RunOptions,
    records: list[TaskRecord],
    results: list[Trajectory],
    notes: list[InductionNote],
    seconds: float,
) -> Mind2WebRunSummary:
    predictions: dict[str, str] = {}
    for trajectory in results:
        predictions.update(predictions_for(trajectory))
    report = score(records, predictions)
    hits = [bool(h) for t in results for h in t.meta.get("target_in_top_k", [])]
    outcomes: dict[str, int] = {}
    for step in (s for t in results for s in t.steps):
        outcomes[step.outcome] = outcomes.get(step.outcome, 0) + 1
    versions = {
        t.task.task_id: {
            "scope": t.memory_scope or f"mind2web/{t.task.meta.get('website', '')}",
            "seen": t.memory_version,
            "committed": t.meta.get("memory_committed"),
            "workflows": len(t.workflows_used),
        }
        for t in results
    }
    return Mind2WebRunSummary(
        options=options,
        tasks=len(records),
        steps=sum(len(r.actions) for r in records),
        macro=report.macro.model_dump(),
        micro=report.micro.model_dump(),
        per_website={k: v.model_dump() for k, v in report.per_website.items()},
        recall_at_k=sum(hits) / len(hits) if hits else 0.0,
        recall_steps=len(hits),
        outcomes=outcomes,
        llm_calls=sum(s.llm_calls for t in results for s in t.steps),
        prompt_tokens=sum(t.prompt_tokens for t in results),
        completion_tokens=sum(t.completion_tokens for t in results),
        memory_versions=versions,
        offline_memory=notes,
        unparsed=report.unparsed,
        seconds=seconds,
    )


def render_summary(summary: Mind2WebRunSummary) -> str:
    """summary.md: the headline table (AWM's four metrics, x100), recall@k, per website, memory."""
    o = summary.options
    lines = [
        f"# Mind2Web {o.split}: memory {o.memory}" + (f" ({o.induction})" if o.memory != "off" else ""),
        "",
        f"{summary.tasks} tasks, {summary.steps} steps; ranker {o.ranker}, top-{o.top_k}, "
        f"{o.page_format} page; "
        f"recall@{o.top_k} of the target {100 * summary.recall_at_k:.1f}% over {summary.recall_steps} steps "
        "(the ceiling on element accuracy); model "
        f"{o.model or '?'}; {summary.llm_calls} model calls, {summary.prompt_tokens:,} prompt tokens.",
        "",
        "| average | element acc | action F1 | step SR | task SR |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, agg in (("macro", summary.macro), ("micro", summary.micro)):
        lines.append(
            f"| {name} | {agg['element_accuracy']:.1f} | {agg['action_f1']:.1f} | "
            f"{agg['step_success_rate']:.1f} | {agg['task_success_rate']:.1f} |"
        )
    lines += ["", "Step outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(summary.outcomes.items())), ""]
    lines += [
        "## Per website (macro)",
        "",
        "| website | tasks | element acc | step SR | task SR |",
        "|---|---:|---:|---:|---:|",
    ]
    for website, agg in summary.per_website.items():
        lines.append(
            f"| {website} | {agg['n_tasks']} | {agg['element_accuracy']:.1f} | "
            f"{agg['step_success_rate']:.1f} | {agg['task_success_rate']:.1f} |"
        )
    if o.memory != "off":
        lines += ["", "## Memory", ""]
        for note in summary.offline_memory:
            state = note.error or ("changed" if note.changed else "unchanged")
            lines.append(
                f"- offline {note.scope}: from {note.source}, {note.trajectories} trajectories, "
                f"version {note.version} ({state})"
            )
        for task_id, v in summary.memory_versions.items():
            committed = "" if v["committed"] is None else f", committed v{v['committed']}"
            lines.append(
                f"- task {task_id}: saw {v['scope']} v{v['seen']} ({v['workflows']} workflows){committed}"
            )
    return "\n".join(lines) + "\n"


def write_summary(out: Path, summary: Mind2WebRunSummary) -> None:
    for name, text in (
        ("summary.json", summary.model_dump_json(indent=2)),
        ("summary.md", render_summary(summary)),
    ):
        write_text_atomic(out / name, text)


def run_command(
    data: Annotated[
        Path, typer.Option("--data", help="Mind2Web folder (train/, test_task/, ...), or osunlp/Mind2Web.")
    ],
    split: Annotated[str, typer.Option(help="test_task | test_website | test_domain.")] = "test_task",
    website: Annotated[str | None, typer.Option(help="Only this website's tasks.")] = None,
    memory: Annotated[
        str, typer.Option(help="off | offline (induced from train) | online (from own answers).")
    ] = "off",
    induction: Annotated[str, typer.Option(help="neural (LLM) | rule (no LLM).")] = "neural",
    ranker: Annotated[str, typer.Option(help="minilm (offline) | mindact (scores_all_data.pkl).")] = "minilm",
    scores: Annotated[
        Path | None, typer.Option(help="MindAct score pickle (default DATA/scores_all_data.pkl).")
    ] = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, help="Candidates shown per step.")] = 10,
    page_format: Annotated[
        str,
        typer.Option(
            "--page-format",
            help="awm (the published pruned tree with HTML brackets, as AWM prompted) | mindact (the same tree "
            "in MindAct's parenthesised form) | compact (one line per candidate).",
        ),
    ] = "awm",
    exemplars: Annotated[int, typer.Option(min=0, help="Solved train steps shown as examples.")] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the exemplar sample.")] = 0,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N tasks.")] = None,
    backend: Annotated[
        str | None, typer.Option(help="local | openai | anthropic (default: settings).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model name (default: settings or AWM_MODEL).")] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="Answer tokens per step.")] = 64,
    context_window: Annotated[int | None, typer.Option(min=256, help="Default: llm.context_window.")] = None,
    memory_db: Annotated[
        Path | None,
        typer.Option(
            "--db", help="Memory database (default: OUT/memory.sqlite, the run's own).", dir_okay=False
        ),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not use the LLM response cache.")] = False,
    out: Annotated[
        Path | None,
        typer.Option(help="Run folder (default runs/mind2web-<split>-<memory>); resumed if it exists."),
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option("--config", "-c", help="TOML settings file (configs/*.toml).", dir_okay=False),
    ] = None,
) -> None:
    """Solve a Mind2Web split offline (teacher forcing), score it, and write summary.md/summary.json.

    Example: awm mind2web run --data data/mind2web --website exploretock --memory offline --top-k 10
    """
    from rich.console import Console

    from awm.assets import configure_runtime_env
    from awm.config import load_settings
    from awm.llm.factory import make_client
    from awm.pipeline.progress import progress_board

    if memory not in ("off", "offline", "online"):
        raise ConfigError(f"--memory must be off, offline or online (got {memory!r})")
    if induction not in ("neural", "rule"):
        raise ConfigError(f"--induction must be neural or rule (got {induction!r})")
    if ranker not in ("minilm", "mindact"):
        raise ConfigError(f"--ranker must be minilm or mindact (got {ranker!r})")
    if page_format not in PAGE_FORMATS:
        raise ConfigError(f"--page-format must be awm, mindact or compact (got {page_format!r})")
    configure_runtime_env()
    settings = load_settings(config, overrides={"llm": {"backend": backend, "model": model}})
    client = make_client(settings, use_cache=False if no_cache else None)
    options = RunOptions(
        data=str(data),
        split=split,
        website=website,
        memory=memory,  # type: ignore[arg-type]
        induction=induction,  # type: ignore[arg-type]
        top_k=top_k,
        ranker=ranker,  # type: ignore[arg-type]
        page_format=page_format,  # type: ignore[arg-type]
        scores=str(scores) if scores else None,
        exemplars=exemplars,
        seed=seed,
        limit=limit,
        max_tokens=max_tokens,
        context_window=context_window or settings.llm.context_window,
        model=f"{client.backend}/{client.model}",
        memory_db=str(memory_db) if memory_db else None,
    )
    run_dir = out or settings.runs_dir / f"mind2web-{split}-{memory}"
    console = Console()
    with progress_board(console) as board:
        bar = board.bar("mind2web")

        def show(done: int, total: int, current: str) -> None:
            bar.update(done, total, current)

        summary = run_mind2web(options, run_dir, client=client, counter=client.token_counter(), progress=show)
    write_summary(run_dir, summary)
    console.print(render_summary(summary))
    console.print(f"results in {run_dir}")


def register_run(app: typer.Typer) -> None:
    """Add the `run` command to the `awm mind2web` Typer app."""
    app.command("run")(run_command)
