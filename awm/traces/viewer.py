"""Terminal views of a run: the episode table, one episode step by step, and a table of runs.

Functions here build Rich renderables (or plain JSON-ready data) from database rows and print
nothing themselves, so the CLI stays a thin shell and the views are testable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from awm.evaluation.success import ground_truth_success

from .db import DB_NAME, EpisodeRow, RunDatabase, RunRow, StepRow

OUTCOME_STYLE = {"ok": "green"}


def verdict_text(episode: EpisodeRow) -> str:
    """`reward/judge` in a few characters: `1.0/success`, `0.0/-`, `-/unknown`."""
    reward = "-" if episode.reward is None else f"{episode.reward:g}"
    return f"{reward}/{episode.judge or '-'}"


def episodes_table(run: RunRow, episodes: list[EpisodeRow]) -> Table:
    """One line per episode: task, status, verdict, steps, tokens, seconds."""
    table = Table(
        title=f"run {run.name} ({run.id}, config {run.config_hash}, {run.status})", title_justify="left"
    )
    for column, justify in (
        ("episode", "left"),
        ("task", "left"),
        ("status", "left"),
        ("end", "left"),
        ("reward/judge", "left"),
        ("steps", "right"),
        ("tokens in/out", "right"),
        ("seconds", "right"),
    ):
        table.add_column(column, justify=justify, overflow="fold")  # type: ignore[arg-type]
    for e in episodes:
        table.add_row(
            e.id[:12],
            e.task_key,
            e.status,
            e.end,
            verdict_text(e),
            str(e.steps),
            f"{e.prompt_tokens}/{e.completion_tokens}",
            f"{e.seconds:.1f}",
        )
    solved = sum(1 for e in episodes if ground_truth_success(e.verdict))
    judged = sum(1 for e in episodes if e.judge == "success")
    table.caption = f"{len(episodes)} episodes, {solved} solved (full reward), {judged} judged success"
    return table


def _timings(step: StepRow) -> str:
    parts = [f"{k} {v:.0f} ms" for k, v in sorted(step.timings_ms.items())]
    return ", ".join(parts) or "-"


def step_panel(step: StepRow, *, show_observation: bool = False) -> Panel:
    """One step: thought, action, outcome (with error), feedback, url, timings and tokens."""
    body = Text()

    def line(label: str, value: str, style: str = "") -> None:
        if value:
            body.append(f"{label}: ", style="bold")
            body.append(value + "\n", style=style)

    line("url", step.url, "dim")
    if step.called_by is not None:
        line("workflow", f"{step.workflow} (called by step {step.called_by})", "magenta")
    line("thought", step.thought)
    line("action", step.action_str or "(none)", "cyan")
    line("grounding", step.grounding, "dim")
    outcome = step.outcome + (f" - {step.error}" if step.error else "")
    line("outcome", outcome, OUTCOME_STYLE.get(step.outcome, "red"))
    line("feedback", step.feedback, "yellow")
    line("page showed", step.reaction, "green")
    if step.approval is not None:
        answer = "approved" if step.approval.approved else "denied"
        line("gate", f"{answer} by {step.approval.approver} ({step.approval.reason})", "magenta")
    line("timings", _timings(step), "dim")
    line("tokens", f"{step.prompt_tokens} in / {step.completion_tokens} out, {step.llm_calls} call(s)", "dim")
    line("screenshot", step.screenshot or "", "dim")
    if show_observation:
        line("observation", "\n" + step.observation)
        line("model output", "\n" + step.model_output)
    body.rstrip()
    title = f"step {step.idx}" if step.called_by is None else f"step {step.idx} (sub-step of {step.called_by})"
    return Panel(body, title=title, title_align="left")


def episode_view(
    episode: EpisodeRow, steps: list[StepRow], *, show_observation: bool = False
) -> RenderableType:
    """The whole episode: a header (goal, model, memory, verdict) then each step."""
    head = Text()
    head.append(f"{episode.task_key}", style="bold")
    head.append(f"  episode {episode.id}\n", style="dim")
    head.append(f"goal: {episode.task.goal}\n")
    head.append(
        f"model: {episode.model or '-'}   scope: {episode.scope}   memory version: {'-' if episode.memory_version is None else episode.memory_version}\n"
    )
    head.append(f"status: {episode.status}   end: {episode.end}   reward/judge: {verdict_text(episode)}\n")
    if episode.judge_reason:
        head.append(f"judge reason: {episode.judge_reason}\n")
    if episode.final_answer:
        head.append(f"final answer: {episode.final_answer}\n")
    head.append(
        f"{len(steps)} steps, {episode.prompt_tokens}/{episode.completion_tokens} tokens, {episode.seconds:.1f} s",
        style="dim",
    )
    return Group(head, *(step_panel(s, show_observation=show_observation) for s in steps))


def episode_json(episode: EpisodeRow, steps: list[StepRow]) -> dict[str, Any]:
    return {"episode": episode.model_dump(mode="json"), "steps": [s.model_dump(mode="json") for s in steps]}


def find_runs(folder: Path) -> list[Path]:
    """Run folders under `folder` (itself included), sorted by path, never directory order."""
    folder = Path(folder)
    return sorted(p.parent for p in folder.rglob(DB_NAME))


def runs_table(run_dirs: list[Path]) -> Table:
    """One line per run folder: name, created, status, config hash, episodes, solved."""
    table = Table(title="runs", title_justify="left")
    for column in ("folder", "name", "created", "status", "config", "episodes", "ended", "solved"):
        table.add_column(column, overflow="fold")
    for run_dir in run_dirs:
        with RunDatabase(run_dir) as db:
            run, episodes = db.run(), db.episodes()
        table.add_row(
            str(run_dir),
            run.name,
            run.created_at,
            run.status,
            run.config_hash,
            str(len(episodes)),
            str(sum(1 for e in episodes if e.status == "ended")),
            str(sum(1 for e in episodes if ground_truth_success(e.verdict))),
        )
    return table
