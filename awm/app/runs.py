"""What the runs and episode pages show, read from a run database (read-only) into plain rows.

Pure functions over `EpisodeRow`/`StepRow` (`episode_status`, `run_listing`, `step_tree`, `screenshot_url`)
and one reader (`read_run`). The same rows are the JSON API's answers, so a test or a script sees exactly
what a person sees. Recoveries are counted by the run database (`RunDatabase.recoveries`, one SQL
aggregate), so listing runs never reads a step into Python.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, Field

from awm.evaluation.success import ground_truth_success
from awm.pipeline.summary import INFRA_ENDS
from awm.traces.db import EpisodeRow, RunDatabase, RunRow, StepRow

from .catalog import Folder

EpisodeStatus = Literal["success", "failed", "stuck", "error", "unjudged", "running"]
STATUSES: tuple[EpisodeStatus, ...] = ("success", "failed", "stuck", "error", "unjudged", "running")


def episode_success(episode: EpisodeRow) -> bool | None:
    """Ground truth when the benchmark gave a reward, else the judge; None when nobody decided."""
    truth = ground_truth_success(episode.verdict)
    if truth is not None:
        return truth
    return None if episode.judge in (None, "unknown") else episode.judge == "success"


def episode_status(episode: EpisodeRow) -> EpisodeStatus:
    """One word for a table: success, failed, stuck (gave up looping), error (the machinery failed:
    model, browser or timeout), unjudged (a live page nobody judged), or running."""
    if episode.status != "ended":
        return "running"
    if episode.end in INFRA_ENDS:
        return "error"
    success = episode_success(episode)
    if success:
        return "success"
    if episode.end == "stuck":
        return "stuck"
    return "unjudged" if success is None else "failed"


def screenshot_url(run_key: str, episode_id: str, index: int) -> str:
    """The API address of one step's screenshot: the only place that spells it (the episode page, its
    JSON and the live stream's step events all link through here)."""
    return f"/api/runs/{quote(run_key, safe='')}/episodes/{quote(episode_id, safe='')}/steps/{index}/screenshot.png"


class RunListing(BaseModel):
    """One line of the runs page (and of `GET /api/runs`)."""

    key: str
    kind: Literal["run", "ablation"] = "run"
    name: str
    created_at: str
    status: str  # running | done | failed
    benchmark: str = ""
    model: str = ""
    memory: str = ""  # the arm: off, online, fixed..., with the workflows mode when not text
    episodes: int = 0
    ended: int = 0
    success_rate: float | None = None
    counts: dict[str, int] = Field(default_factory=dict)  # by EpisodeStatus
    recoveries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    error: str = ""  # a folder that could not be read says why, instead of vanishing from the list

    @property
    def search_text(self) -> str:
        return " ".join((self.key, self.name, self.benchmark, self.model, self.memory, self.status)).lower()


def arm_label(config: dict[str, Any]) -> str:
    pipeline = config.get("pipeline") or {}
    memory = str(pipeline.get("memory") or "")
    extras = [str(pipeline[k]) for k in ("workflows", "scope") if pipeline.get(k) not in (None, "", "text", "task")]
    return " ".join([memory, *extras]).strip()


def run_listing(folder: Folder, run: RunRow, episodes: list[EpisodeRow], recovered: int) -> RunListing:
    """The runs-page row of one run folder (pure)."""
    counts = Counter(episode_status(e) for e in episodes)
    decided = [e for e in episodes if episode_status(e) in ("success", "failed", "stuck", "error")]
    pipeline = run.config.get("pipeline") or {}
    llm = run.config.get("llm") or {}
    return RunListing(
        key=folder.key,
        name=run.name,
        created_at=run.created_at,
        status=run.status,
        benchmark=str(pipeline.get("benchmark") or ""),
        model=str(llm.get("model") or next((e.model for e in episodes if e.model), "")),
        memory=arm_label(run.config),
        episodes=len(episodes),
        ended=sum(e.status == "ended" for e in episodes),
        success_rate=(counts["success"] / len(decided)) if decided else None,
        counts={s: counts[s] for s in STATUSES if counts[s]},
        recoveries=recovered,
        prompt_tokens=sum(e.prompt_tokens for e in episodes),
        completion_tokens=sum(e.completion_tokens for e in episodes),
        seconds=round(sum(e.seconds for e in episodes), 1),
    )


def read_run(folder: Folder) -> tuple[RunRow, list[EpisodeRow], dict[str, int]]:
    """The run, its episodes and each episode's recoveries (one read-only connection, three queries)."""
    with RunDatabase(folder.path) as db:
        return db.run(), db.episodes(), db.recoveries()


class StepNode(BaseModel):
    """A step and, for a `run_workflow` call, the sub-steps it ran (nested under it on the page)."""

    step: StepRow
    children: list[StepRow] = Field(default_factory=list)


def step_tree(steps: list[StepRow]) -> list[StepNode]:
    """Top-level steps in order, each with its workflow sub-steps (pure). A sub-step whose caller is
    missing (a crash between the two writes) is shown at the top level rather than dropped."""
    nodes = {s.idx: StepNode(step=s) for s in steps if s.called_by is None}
    orphans: list[StepNode] = []
    for s in steps:
        if s.called_by is not None:
            parent = nodes.get(s.called_by)
            if parent is None:
                orphans.append(StepNode(step=s))
            else:
                parent.children.append(s)
    return sorted([*nodes.values(), *orphans], key=lambda n: n.step.idx)
