"""A run's summary: per-episode rows and totals, as `summary.json`, `summary.md` and a Rich table.

Pure functions from trajectories to a `RunSummary`, then thin writers. Why from trajectories and not
from the runner's memory: a resumed run summarises every episode in the folder, including those a
previous invocation finished.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field
from rich.table import Table

from awm.evaluation.success import ground_truth_success, is_success
from awm.files import write_text_atomic
from awm.trajectory import Trajectory, utc_now

SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"

# Ends that are not failures of the agent's reasoning but of the machinery around it.
INFRA_ENDS = frozenset({"llm_error", "env_error", "timeout"})


class EpisodeSummary(BaseModel):
    """One episode, flat: what a table row or a plot needs."""

    key: str
    task_id: str
    seed: int | None
    scope: str
    trajectory_id: str
    success: bool
    reward: float | None
    judge: str | None
    end: str
    steps: int
    prompt_tokens: int
    completion_tokens: int
    llm_calls: int
    seconds: float
    llm_seconds: float
    failure_classes: dict[str, int] = Field(default_factory=dict)  # step outcomes other than ok
    cached_prompt_tokens: int = 0  # of prompt_tokens, reused from the model server's prefix cache
    memory_version: int | None = None
    workflows_used: list[str] = Field(default_factory=list)
    # What decided `success`: ``ground truth`` (a reward), ``judge``, or ``self-reported`` (a live page
    # without a judge: no verdict, only how the agent itself ended it, shown as such and never a success).
    verdict_source: str = "ground truth"
    goal: str = ""
    final_answer: str = ""
    start_url: str = ""  # a live run's page, its rails' record: blocked hosts, the gate's answers
    blocked_hosts: list[str] = Field(default_factory=list)
    approvals: list[str] = Field(default_factory=list)  # "approved by terminal: click('12') (it submits a form)"
    rails_stop: str = ""

    @property
    def shown_success(self) -> str:
        """`yes`/`no`, or the agent's own end where nobody judged (`self: answered`)."""
        if self.verdict_source == "self-reported":
            return f"self: {self.end}"
        return "yes" if self.success else "no"


def reused_share(cached: float, prompt: float) -> str:
    """What share of the prompt tokens the server reused from its prefix cache, as a percentage."""
    return f"{100 * cached / prompt:.0f}%" if prompt else "n/a"


class RunSummary(BaseModel):
    """The whole run: identity, totals and the episodes (sorted by task key)."""

    name: str
    run_dir: str
    config_hash: str
    model: str
    backend: str
    policy: str
    memory: str
    created_at: str = Field(default_factory=utc_now)
    episodes: list[EpisodeSummary] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)  # task keys finished by an earlier invocation

    @property
    def n(self) -> int:
        return len(self.episodes)

    @property
    def successes(self) -> int:
        return sum(e.success for e in self.episodes)

    @property
    def success_rate(self) -> float | None:
        return self.successes / self.n if self.n else None

    def totals(self) -> dict[str, float]:
        eps = self.episodes
        steps = sum(e.steps for e in eps)
        return {
            "episodes": len(eps),
            "successes": self.successes,
            "steps": steps,
            "prompt_tokens": sum(e.prompt_tokens for e in eps),
            "cached_prompt_tokens": sum(e.cached_prompt_tokens for e in eps),
            "completion_tokens": sum(e.completion_tokens for e in eps),
            "llm_calls": sum(e.llm_calls for e in eps),
            "seconds": round(sum(e.seconds for e in eps), 2),
            "llm_seconds": round(sum(e.llm_seconds for e in eps), 2),
            "prompt_tokens_per_step": round(sum(e.prompt_tokens for e in eps) / steps, 1) if steps else 0.0,
            "llm_calls_per_step": round(sum(e.llm_calls for e in eps) / steps, 2) if steps else 0.0,
        }

    def failure_classes(self) -> dict[str, int]:
        """Step outcomes other than ok, summed over episodes, most frequent first."""
        total: Counter[str] = Counter()
        for e in self.episodes:
            total.update(e.failure_classes)
        return dict(total.most_common())

    def ends(self) -> dict[str, int]:
        return dict(Counter(e.end for e in self.episodes).most_common())

    @property
    def self_reported(self) -> int:
        """Episodes nobody gave a verdict on (a live page without --judge): never counted as solved."""
        return sum(e.verdict_source == "self-reported" for e in self.episodes)

    def headline(self, word: str = "") -> str:
        """`2/4 (50.0%)` (`word` after the count: `2/4 solved (50.0%)`), and how many had no verdict."""
        text = f"{self.successes}/{self.n}{' ' + word if word else ''} ({_pct(self.success_rate)})"
        if self.self_reported:
            text += f"; {self.self_reported} without a verdict (self-reported end, no judge)"
        return text


def verdict_source(trajectory: Trajectory) -> str:
    """What decides the episode: a reward (ground truth), the judge, or nobody (self-reported)."""
    if ground_truth_success(trajectory.verdict) is not None:
        return "ground truth"
    return "judge" if trajectory.verdict.judge is not None else "self-reported"


def summarize_episode(trajectory: Trajectory) -> EpisodeSummary:
    outcomes = Counter(s.outcome for s in trajectory.steps if s.outcome != "ok")
    llm_ms = sum(s.timings_ms.get("llm", 0.0) for s in trajectory.steps)
    rails = trajectory.meta.get("rails") or {}
    approvals = [
        f"{'approved' if s.approval.approved else 'denied'} by {s.approval.approver}: {s.approval.action} ({s.approval.reason})"
        for s in trajectory.steps
        if s.approval is not None
    ]
    return EpisodeSummary(
        verdict_source=verdict_source(trajectory),
        goal=trajectory.task.goal,
        final_answer=trajectory.final_answer,
        start_url=str(rails.get("start_url") or ""),
        blocked_hosts=list(rails.get("blocked_hosts") or []),
        approvals=list(dict.fromkeys(approvals)),
        rails_stop=next((s.error for s in trajectory.steps if s.outcome == "refused"), ""),
        key=trajectory.task.key,
        task_id=trajectory.task.task_id,
        seed=trajectory.task.seed,
        scope=trajectory.task.scope,
        trajectory_id=trajectory.trajectory_id,
        success=is_success(trajectory),
        reward=trajectory.verdict.reward,
        judge=trajectory.verdict.judge,
        end=trajectory.end,
        steps=len(trajectory.steps),
        prompt_tokens=trajectory.prompt_tokens,
        cached_prompt_tokens=trajectory.cached_prompt_tokens,
        completion_tokens=trajectory.completion_tokens,
        llm_calls=sum(s.llm_calls for s in trajectory.steps),
        seconds=round(trajectory.seconds, 3),
        llm_seconds=round(llm_ms / 1000.0, 3),
        failure_classes=dict(outcomes),
        memory_version=trajectory.memory_version,
        workflows_used=list(trajectory.workflows_used),
    )


def summarize(
    trajectories: list[Trajectory],
    *,
    name: str,
    run_dir: Path,
    config_hash: str,
    model: str,
    backend: str,
    policy: str,
    memory: str,
    skipped: list[str] | None = None,
) -> RunSummary:
    """The summary of a run's trajectories; the latest attempt of each task key counts."""
    latest: dict[str, Trajectory] = {}
    for t in sorted(trajectories, key=lambda t: t.started_at):
        latest[t.task.key] = t
    episodes = [summarize_episode(latest[k]) for k in sorted(latest)]
    return RunSummary(
        name=name,
        run_dir=str(run_dir),
        config_hash=config_hash,
        model=model,
        backend=backend,
        policy=policy,
        memory=memory,
        episodes=episodes,
        skipped=sorted(skipped or []),
    )


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _classes(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in counts.items()) or "-"


def render_markdown(summary: RunSummary) -> str:
    """Human-readable `summary.md`: identity, headline, per-episode table, failures and costs."""
    t = summary.totals()
    lines = [
        f"# Run {summary.name}",
        "",
        f"- folder: `{summary.run_dir}`",
        f"- config hash: `{summary.config_hash}`",
        f"- model: `{summary.model}` (backend {summary.backend}), policy {summary.policy}, memory {summary.memory}",
        f"- written: {summary.created_at}",
        "",
        f"**Success: {summary.headline()}**",
        "",
        f"Steps {int(t['steps'])}, prompt tokens {int(t['prompt_tokens']):,} ({t['prompt_tokens_per_step']} per step; "
        f"{reused_share(t['cached_prompt_tokens'], t['prompt_tokens'])} reused from the model server's prefix cache), "
        f"completion tokens {int(t['completion_tokens']):,}, model calls per step {t['llm_calls_per_step']}, "
        f"{t['seconds']} s in episodes ({t['llm_seconds']} s in the model).",
        "",
    ]
    if summary.skipped:
        lines += [f"Resumed: {len(summary.skipped)} episode(s) were finished by an earlier invocation.", ""]
    lines += [
        "| task | seed | success | reward | judge | end | steps | prompt tok | seconds | failures | memory |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in summary.episodes:
        memory = "-" if e.memory_version is None else f"v{e.memory_version} ({len(e.workflows_used)} wf)"
        reward = "-" if e.reward is None else f"{e.reward:g}"
        lines.append(
            f"| {e.task_id} | {'-' if e.seed is None else e.seed} | {e.shown_success} | {reward} | "
            f"{e.judge or '-'} | {e.end} | {e.steps} | {e.prompt_tokens:,} | {e.seconds:.1f} | "
            f"{_classes(e.failure_classes)} | {memory} |"
        )
    live = [e for e in summary.episodes if e.start_url or e.verdict_source == "self-reported"]
    if live:
        lines += ["", "## Live pages", ""]
        for e in live:
            lines += [f"### {e.start_url or e.task_id}", "", f"- goal: {e.goal}"]
            lines += [f"- {fact}" for fact in live_facts(e)]
            lines.append("")
    lines += ["", "## Failure classes (step outcomes)", ""]
    classes = summary.failure_classes()
    lines += [f"- {k}: {v}" for k, v in classes.items()] or ["- none"]
    lines += ["", "## How episodes ended", ""]
    lines += [f"- {k}: {v}" for k, v in summary.ends().items()] or ["- no episodes"]
    return "\n".join(lines) + "\n"


def summary_json(summary: RunSummary) -> dict:
    """`summary.json`: the model dump plus the derived totals, so readers need no awm code."""
    data = summary.model_dump(mode="json")
    data.update(
        success_rate=summary.success_rate,
        successes=summary.successes,
        totals=summary.totals(),
        failure_classes=summary.failure_classes(),
        ends=summary.ends(),
    )
    return data


def write_summary(summary: RunSummary, run_dir: Path) -> tuple[Path, Path]:
    """Write `summary.json` and `summary.md` atomically; returns their paths."""
    run_dir = Path(run_dir)
    data = json.dumps(summary_json(summary), indent=2, sort_keys=True) + "\n"
    return (
        write_text_atomic(run_dir / SUMMARY_JSON, data),
        write_text_atomic(run_dir / SUMMARY_MD, render_markdown(summary)),
    )


def load_summary(run_dir: Path) -> RunSummary:
    """The summary a run wrote (`summary.json`), as the model it was written from."""
    return RunSummary.model_validate(json.loads((Path(run_dir) / SUMMARY_JSON).read_text()))


def rich_table(summary: RunSummary) -> Table:
    """The per-episode table printed at the end of `awm run`."""
    table = Table(
        title=f"{summary.name}: {summary.headline('solved')}",
        caption=f"config {summary.config_hash} | model {summary.model} | memory {summary.memory}",
    )
    table.add_column("task", no_wrap=True)
    for column in ("seed", "ok", "end", "steps", "prompt tok", "s"):
        table.add_column(
            column, justify="right" if column in ("seed", "steps", "prompt tok", "s") else "left"
        )
    table.add_column("failures", overflow="fold")
    for e in summary.episodes:
        table.add_row(
            e.task_id.removeprefix("browsergym/"),
            "-" if e.seed is None else str(e.seed),
            "[green]yes[/green]" if e.success else "[red]no[/red]" if e.verdict_source != "self-reported" else e.shown_success,
            e.end,
            str(e.steps),
            f"{e.prompt_tokens:,}",
            f"{e.seconds:.1f}",
            _classes(e.failure_classes),
        )
    return table


def live_facts(e: EpisodeSummary) -> list[str]:
    """What a live episode came to: the verdict or the agent's own end, its message, the rails' stop,
    the blocked hosts, the gate's answers (the summary's Live pages section; `awm run --url` prints it)."""
    if e.verdict_source == "self-reported":
        facts = [f"verdict: none (no judge); the agent ended it itself as '{e.end}' (self-reported)"]
    else:
        facts = [f"verdict ({e.verdict_source}): {'success' if e.success else 'failure'}; end {e.end}"]
    if e.final_answer:
        facts.append(f"the agent says: {e.final_answer}")
    if e.rails_stop:
        facts.append(f"stopped by the rails: {e.rails_stop}")
    if e.blocked_hosts:
        facts.append(f"blocked hosts: {', '.join(e.blocked_hosts)}")
    return facts + [f"gate: {a}" for a in e.approvals]


def live_lines(summary: RunSummary) -> list[str]:
    """What `awm run --url` prints under the table."""
    return [fact for e in summary.episodes if e.start_url for fact in live_facts(e)]
