"""Mind2Web memory ablations: `awm ablate` with `benchmark = "mind2web"`: its config checks and its arms
(the report they make is `awm.pipeline.mind2web_report`).

What runs: every `[[arm]]` (memory off / offline / online, or any other Mind2Web field such as
`top_k`, `exemplars`, `induction`) and repeat is one `awm mind2web run` (`run_mind2web`) into
`OUT/arms/<arm>/rep<N>/` (`awm.pipeline.ablation_plan.arm_dir`), or, when `[pipeline] websites` names
websites, one run per website into `OUT/arms/<arm>/rep<N>/<website>/`. Each run folder is a complete
Mind2Web run (run.json, tasks/, summary.md, memory.sqlite) plus `usage.json` (what the model was asked
for, per component, summed over every invocation), so re-running the same command with the same
`--out` resumes: finished tasks make no model call.

What is reported (`OUT/RESULTS.md`, `OUT/results.json`, a bar plot): per arm AWM's four metrics,
element accuracy (EA), action F1 (AF1), step success rate (step SR) and task success rate (SR), each
scored by `awm.mind2web.metrics.score_task` on the arm's predictions (match ``awm``: the first positive
candidate), macro (mean over tasks) and micro (over steps; SR has no step-level version), x100, each
with a 95% interval over tasks; paired per-task differences of every arm against the first; tokens per
task by component (actor, induction); memory versions. The statistics are `awm.pipeline.stats`'s:

* the task (annotation id) is the unit. Steps of one task share its page and its gold history, so they
  are not independent draws, and the repeats of one task are not either;
* macro: each task's value is its mean over its steps (then over its repeats); the interval is the
  seeded percentile bootstrap over tasks of their mean (`bootstrap_mean_ci`). SR with one repeat is a
  success count over tasks, so its interval is Wilson's (`wilson_interval`), as for MiniWoB episodes;
* micro: the ratio (right steps / steps) with the interval of the same bootstrap over tasks, each
  resampled task bringing all its steps (`bootstrap_ratio_ci`);
* paired: per task, B's value minus A's (each averaged over its repeats); the mean difference with a
  bootstrap interval over tasks, and the exact sign test over tasks that differ (`sign_test_p`).

No budget-matched arm (`NO_BUDGET_MATCH` says why). results.json is a `Mind2WebAblationReport`; the
fields it shares with `awm.pipeline.report.AblationReport` (arms' name, overrides, memory, successes,
episodes, success_rate, ci95, tokens_per_task; per_task; comparisons' task-success fields) have the
same meaning and type, with task success as the success, so `awm serve` shows the folder as an ablation.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from awm.config import Settings
from awm.errors import AwmError, ConfigError, DataError, SetupError, StageError
from awm.files import write_text_atomic
from awm.mind2web.schema import TaskRecord
from awm.pipeline.config import NOT_MIND2WEB_FIELDS, PipelineConfig
from awm.pipeline.mind2web_report import (
    USAGE_JSON,
    Mind2WebAblationReport,
    Mind2WebArmRun,
    TaskResult,
    build_mind2web_report,
    task_result,
)
from awm.pipeline.mind2web_report_render import rich_tables, write_mind2web_report
from awm.pipeline.stats import merge_usage

if TYPE_CHECKING:
    from awm.llm.base import LLMClient
    from awm.llm.usage import UsageMeter
    from awm.mind2web.ranking import Ranker
    from awm.pipeline.ablation_plan import AblationConfig, AblationPlan, PlannedArm
    from awm.pipeline.mind2web_run import RunOptions
    from awm.pipeline.progress import ProgressBoard


# --------------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------------


def check_mind2web_ablation(ablation: AblationConfig, path: Path) -> None:
    """The ablation keys that do not carry over to Mind2Web are errors naming the key."""
    for key in ("budget_matched", "budget_memory_arm", "budget_off_arm"):
        if getattr(ablation, key) not in (None, False):
            raise ConfigError(
                f"{path}: '{key}' does not apply to benchmark 'mind2web': one prediction per annotated "
                "step leaves no step budget to match (add an arm with more exemplars or a larger top_k "
                "to spend more tokens instead)"
            )


def run_options(config: PipelineConfig, settings: Settings, *, model: str, website: str | None) -> RunOptions:
    """The `awm mind2web run` options of one arm (and one website, when the config names websites)."""
    from awm.pipeline.mind2web_run import RunOptions

    assert config.data is not None  # checked when the config was read
    passed: dict[str, Any] = {}
    if config.page_format is not None:  # else RunOptions' own default
        passed["page_format"] = config.page_format
    return RunOptions(
        data=str(config.data),
        split=config.split,
        website=website,
        memory=config.memory,  # type: ignore[arg-type]  # off | offline | online (fixed is refused)
        induction=config.induction,
        top_k=config.top_k,
        ranker=config.ranker,
        scores=str(config.scores) if config.scores else None,
        exemplars=config.exemplars,
        seed=config.exemplar_seed,
        limit=config.limit,
        max_tokens=config.max_tokens or settings.llm.max_tokens,
        context_window=settings.llm.context_window,
        model=model,
        **passed,
    )


def base_fields(config: PipelineConfig) -> dict[str, Any]:
    """The base config as RESULTS.md shows it: the fields that mean something to Mind2Web."""
    return config.model_dump(mode="json", exclude=set(NOT_MIND2WEB_FIELDS))


# --------------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------------


def _load_usage(path: Path) -> dict[str, dict[str, float]]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc})") from None
    return data if isinstance(data, dict) else {}


def _add_usage(
    base: dict[str, dict[str, float]], before: dict[str, Any], after: dict[str, Any]
) -> dict[str, dict[str, float]]:
    """`base` plus what the meter gained between two `by_purpose()` snapshots."""
    total = {k: dict(v) for k, v in base.items()}
    for purpose, entry in after.items():
        was = before.get(purpose)
        for field, value in entry.model_dump().items():
            gained = value - (getattr(was, field) if was is not None else 0)
            if gained:
                into = total.setdefault(purpose, {})
                into[field] = into.get(field, 0) + gained
    return total


class _Runner:
    """What every arm run of one ablation shares: the client and its meter, rankers, gold records."""

    def __init__(self, plan: AblationPlan, client: LLMClient, meter: UsageMeter) -> None:
        self.plan = plan
        self.client = client
        self.meter = meter
        self.model = f"{client.backend}/{client.model}"
        self._rankers: dict[tuple[str, str | None, str], Ranker] = {}
        self._records: dict[str | None, list[TaskRecord]] = {}

    def ranker(self, options: RunOptions) -> Ranker:
        from awm.pipeline.mind2web_run import make_ranker

        key = (options.ranker, options.scores, options.data)
        if key not in self._rankers:
            self._rankers[key] = make_ranker(options)
        return self._rankers[key]

    def records(self, config: PipelineConfig, website: str | None) -> list[TaskRecord]:
        """The gold records a run selects, as `run_mind2web` selects them (html dropped: never scored)."""
        from awm.mind2web.data import iter_records

        if website not in self._records:
            assert config.data is not None
            found = list(iter_records(config.data, config.split, website=website, with_html=False))
            self._records[website] = found[: config.limit] if config.limit is not None else found
        return self._records[website]

    def run(self, planned: PlannedArm, repeat: int, folder: Path, board: ProgressBoard) -> Mind2WebArmRun:
        """One repeat of one arm: a `run_mind2web` per website (or one for the split), then scored."""
        from awm.pipeline.mind2web_run import run_mind2web, write_summary
        from awm.trajectory import load_trajectory

        config = planned.config
        started = time.monotonic()
        websites: list[str | None] = list(config.websites) if config.websites else [None]
        repeats = self.plan.ablation.repeats
        result = Mind2WebArmRun(
            arm=planned.name,
            repeat=repeat,
            overrides=planned.overrides,
            memory=config.memory,
            config=base_fields(config),
        )
        for website in websites:
            run_dir = folder if website is None else folder / website
            result.run_dirs.append(str(run_dir))
            label = " ".join(
                part for part in (planned.name, f"rep{repeat}" if repeats > 1 else "", website or "") if part
            )
            bar = board.bar(label)
            options = run_options(config, self.plan.settings, model=self.model, website=website)
            usage_path = run_dir / USAGE_JSON
            base_usage = _load_usage(usage_path)
            before = self.meter.by_purpose()
            try:
                summary = run_mind2web(
                    options,
                    run_dir,
                    client=self.client,
                    counter=self.client.token_counter(),
                    ranker=self.ranker(options),
                    progress=lambda done, total, current, bar=bar: bar.update(done, total, current),
                )
            except (ConfigError, DataError, SetupError):
                raise  # the same for every arm: nothing to resume until it is fixed
            except AwmError as exc:
                result.failed_stage = "solve" if website is None else f"solve {website}"
                result.error = str(exc)[:500]
            else:
                write_summary(run_dir, summary)
                result.notes.extend(summary.offline_memory)
            finally:
                if run_dir.is_dir():
                    usage = _add_usage(base_usage, before, self.meter.by_purpose())
                    write_text_atomic(usage_path, json.dumps(usage, indent=2, sort_keys=True) + "\n")
            result.usage = merge_usage(result.usage, _load_usage(usage_path))
            records = self.records(config, website)
            result.selected += len(records)
            for record in records:
                path = run_dir / "tasks" / f"{record.annotation_id}.json"
                if path.is_file():
                    row = task_result(planned.name, repeat, len(result.rows), record, load_trajectory(path))
                    result.rows.append(row)
            if result.failed_stage:
                break  # the other websites would fail the same way (the model is the same)
        result.actor_cost_usd = self._actor_cost(result.rows)
        result.wall_seconds = round(time.monotonic() - started, 1)
        return result

    def _actor_cost(self, rows: Sequence[TaskResult]) -> float:
        from awm.llm.usage import cost_usd

        prices = self.plan.settings.llm.prices
        return sum(cost_usd(self.model, r.prompt_tokens, r.completion_tokens, prices) for r in rows)


def run_mind2web_ablation(
    plan: AblationPlan,
    out: Path,
    *,
    console: Console | None = None,
    show_progress: bool = True,
) -> tuple[Mind2WebAblationReport, Path]:
    """Run (or resume) every arm and repeat on Mind2Web, then write the report; returns it and
    RESULTS.md's path. A model failure in one arm is recorded and the other arms still run; the report
    is written, then a `StageError` names the failed arms (the same command resumes them)."""
    from awm.assets import configure_runtime_env
    from awm.llm.factory import make_client
    from awm.llm.usage import UsageMeter
    from awm.pipeline.ablation_plan import arm_dir
    from awm.pipeline.progress import progress_board
    from awm.provenance import collect_provenance, write_provenance

    started = time.monotonic()
    configure_runtime_env()
    meter = UsageMeter()
    client = make_client(plan.settings, meter=meter)  # before any folder: a missing key fails here
    runner = _Runner(plan, client, meter)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    provenance = collect_provenance()
    write_provenance(out)
    repeats = plan.ablation.repeats
    write_text_atomic(
        out / "ablation.json",
        json.dumps(
            {
                "benchmark": "mind2web",
                "config_path": str(plan.config_path),
                "config_hash": plan.config_hash,
                "repeats": repeats,
                "arms": [{"name": a.name, "overrides": a.overrides} for a in plan.arms],
                "budget_matched": False,
            },
            indent=2,
            default=str,
        )
        + "\n",
    )
    runs: list[Mind2WebArmRun] = []
    with progress_board(console, show_progress) as board:
        for planned in plan.arms:
            for repeat in range(1, repeats + 1):
                runs.append(runner.run(planned, repeat, arm_dir(out, planned.name, repeat), board))
    llm = plan.settings.llm
    report = build_mind2web_report(
        runs,
        name=plan.base.name,
        config_path=str(plan.config_path),
        config_hash=plan.config_hash,
        base=base_fields(plan.base),
        data=str(plan.base.data),
        split=plan.base.split,
        websites=plan.base.websites,
        repeats=repeats,
        model=runner.model,
        backend=llm.resolved_backend(),
        seconds=time.monotonic() - started,
        temperature=llm.temperature,
        cache=llm.cache,
        provenance=provenance,
    )
    path = write_mind2web_report(report, out)
    if console is not None:
        for table in rich_tables(report):
            console.print(table)
        console.print(f"results: {path}")
    failed = [f"{r.arm} (repeat {r.repeat}) at {r.failed_stage}: {r.error}" for r in runs if r.failed_stage]
    if failed:
        raise StageError(
            f"{len(failed)} arm run(s) stopped: {'; '.join(failed)}. The report in {path} shows what finished; "
            f"run the same command with --out {out} to resume them"
        )
    return report, path
