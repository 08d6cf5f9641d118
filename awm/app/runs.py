"""What the runs and episode pages show, read from a run database (read-only) into plain rows.

Pure functions over `EpisodeRow`/`StepRow` (`episode_status`, `run_listing`, `step_tree`, `screenshot_url`)
and one reader (`read_run`). The same rows are the JSON API's answers, so a test or a script sees exactly
what a person sees. Recoveries are counted by the run database (`RunDatabase.recoveries`, one SQL
aggregate), so listing runs never reads a step into Python.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import quote

from pydantic import BaseModel, Field

from awm.evaluation.success import ground_truth_success
from awm.pipeline.summary import INFRA_ENDS
from awm.traces.db import EpisodeRow, RunDatabase, RunRow, StepRow
from awm.trajectory import WorkflowCall

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


def _num(value: float) -> str:
    return f"{value:g}"


def decided_by(episode: EpisodeRow) -> str:
    """In words, which rule decided the episode's status: shown right next to every verdict (the episode
    page's badge, the run's table, the JSON), so "reward 1" beside a failed badge is never left to guess.
    The rule itself is `awm.evaluation.success`: a full reward, read from the raw reward where the
    benchmark reports one; without a reward, the judge."""
    if episode.status != "ended":
        return "still running: no verdict yet"
    if episode.end in INFRA_ENDS:
        return f"error: the episode ended with {episode.end} (the machinery failed), which counts as a failure"
    truth = ground_truth_success(episode.verdict)
    if truth is not None:
        raw = episode.raw_reward
        value = f"raw reward {_num(raw)}" if raw is not None else f"reward {_num(episode.reward or 0.0)}"
        text = f"ground truth: {'success' if truth else 'failed'}, {value} is {'the' if truth else 'below the'} full reward 1"
        if raw is not None and episode.reward is not None and episode.reward != raw:
            text += f" (the benchmark's reward {_num(episode.reward)} counts partial credit; success does not)"
        return text + ("; the agent gave up (stuck)" if episode.end == "stuck" and not truth else "")
    if episode.judge in (None, "unknown"):
        said = "could not tell (unknown)" if episode.judge == "unknown" else "was not asked"
        return f"no reward from the benchmark and the judge {said}: not decided"
    return f"judge: {episode.judge} (the benchmark gave no reward, so the LLM judge decides)"


def verdict_short(episode: EpisodeRow) -> str:
    """The value that decided, for a table cell ("raw reward 0.2 < 1", "judge: success"); the cell's
    title holds `decided_by`'s sentence."""
    if episode.status != "ended":
        return "-"
    if episode.end in INFRA_ENDS:
        return episode.end
    truth = ground_truth_success(episode.verdict)
    if truth is not None:
        name, value = ("raw reward", episode.raw_reward) if episode.raw_reward is not None else ("reward", episode.reward)
        return f"{name} {_num(value or 0.0)} {'=' if truth else '<'} 1"
    return f"judge: {episode.judge}" if episode.judge else "not judged"


def step_counts(model_steps: int, sub_steps: int) -> str:
    """"1 model step, 3 workflow sub-steps": the one way every page counts an episode's steps (a
    `run_workflow` call is one model step; the steps it ran are sub-steps, with no model call each)."""
    text = f"{model_steps} model step{'' if model_steps == 1 else 's'}"
    if sub_steps:
        text += f", {sub_steps} workflow sub-step{'' if sub_steps == 1 else 's'}"
    return text


class BoundValue(BaseModel):
    """One value a `run_workflow` call ran with, and where it came from."""

    name: str
    value: str
    source: Literal["goal", "model", "typed"]  # typed: an old record, the value a sub-step typed


def call_values(call: WorkflowCall, children: list[StepRow]) -> list[BoundValue]:
    """The values a `run_workflow` call ran with: read off the goal or given by the model, as recorded;
    a record from before the goal's values were kept (`bound` empty) adds the values its sub-steps typed,
    named by the field they went into."""
    out = [BoundValue(name=k, value=v, source="goal") for k, v in sorted(call.bound.items())]
    out += [BoundValue(name=k, value=v, source="model") for k, v in sorted(call.params.items())]
    if call.bound:
        return out
    given = {v.value for v in out}
    for sub in children:
        args = (sub.action or {}).get("args") or {}
        for key in ("value", "options", "text"):
            value = args.get(key)
            if isinstance(value, str) and value and value not in given:
                field = sub.target.label if sub.target is not None else ""
                out.append(BoundValue(name=field or f"step {sub.idx}", value=value, source="typed"))
                given.add(value)
    return out


class TemplateGroup(BaseModel):
    """An arena run's episodes of one site and template (the run page's "by site and template" table)."""

    site: str
    template: str
    episodes: int
    succeeded: int


_ARENA_TASK = re.compile(r"(?:^|/)sites\.([\w-]+)\.([\w-]+)(?:#|$)")


def arena_groups(episodes: Sequence[EpisodeRow]) -> list[TemplateGroup]:
    """Episodes of arena tasks (`sites.<site>.<template>`) counted per site and template, sorted; [] for
    a run without any (what a site's templates did is the unit a researcher compares there)."""
    counts: dict[tuple[str, str], list[int]] = {}
    for episode in episodes:
        match = _ARENA_TASK.search(episode.task_key)
        if match is None:
            continue
        tally = counts.setdefault((match.group(1), match.group(2)), [0, 0])
        tally[0] += 1
        tally[1] += episode_status(episode) == "success"
    return [TemplateGroup(site=s, template=t, episodes=n, succeeded=k) for (s, t), (n, k) in sorted(counts.items())]


StepImage = Literal["screenshot.png", "picture.png"]


def screenshot_url(
    run_key: str, episode_id: str, index: int | Literal["final"], image: StepImage = "screenshot.png"
) -> str:
    """The API address of one step's screenshot (the full frame), or with `image="picture.png"` of its
    picture (cropped to the page, the target marked: `awm.app.pictures`); `index="final"`: the page
    after the episode's last action. The only place that spells them (the episode page, its JSON and
    the live stream's step events all link through here)."""
    return _step_file_url(run_key, episode_id, index, image)


def page_url(run_key: str, episode_id: str, index: int | Literal["final"]) -> str:
    """The API address of a step's recorded page HTML (served as text), or the final page's."""
    return _step_file_url(run_key, episode_id, index, "page.html")


def _step_file_url(run_key: str, episode_id: str, index: int | Literal["final"], name: str) -> str:
    episode = f"/api/runs/{quote(run_key, safe='')}/episodes/{quote(episode_id, safe='')}"
    return f"{episode}/final/{name}" if index == "final" else f"{episode}/steps/{index}/{name}"


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
    ablation: str = ""  # an arm's run: the ablation's key (its runs-page row is nested under it)
    arm: str = ""  # and which arm ("off") and repeat ("rep1") it is
    repeat: str = ""
    arms: list[RunListing] = Field(default_factory=list)  # an ablation: its arms' runs

    @property
    def search_text(self) -> str:
        return " ".join((self.key, self.name, self.benchmark, self.model, self.memory, self.status)).lower()


def ablation_listing(key: str, name: str, created_at: str, arms: list[RunListing]) -> RunListing:
    """The runs-page row of an ablation folder: its arms' runs nested, their episodes added up (pure)."""
    counts: Counter[str] = Counter()
    for arm in arms:
        counts.update(arm.counts)
    decided = sum(counts[s] for s in ("success", "failed", "stuck", "error"))
    running = any(a.status == "running" for a in arms)
    return RunListing(
        key=key, kind="ablation", name=name, created_at=created_at, status="running" if running else "done",
        benchmark=", ".join(dict.fromkeys(a.benchmark for a in arms if a.benchmark)),
        model=", ".join(dict.fromkeys(a.model for a in arms if a.model)),
        memory=f"{len({a.arm for a in arms})} arms" if arms else "",
        episodes=sum(a.episodes for a in arms), ended=sum(a.ended for a in arms),
        success_rate=counts["success"] / decided if decided else None,
        counts={s: counts[s] for s in STATUSES if counts[s]},
        recoveries=sum(a.recoveries for a in arms),
        prompt_tokens=sum(a.prompt_tokens for a in arms), completion_tokens=sum(a.completion_tokens for a in arms),
        seconds=round(sum(a.seconds for a in arms), 1),
        arms=sorted(arms, key=lambda a: (a.arm, a.repeat)),
    )  # fmt: skip


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
