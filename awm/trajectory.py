"""Task, Step, Verdict and Trajectory: the one record every consumer writes and every inducer reads.

Stored as JSON (never Python repr), validated on load, so a log file is data, never code.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, ValidationError, model_serializer

from awm.errors import DataError
from awm.files import write_text_atomic

# The outcome classes of one step. `ok` means the action was parsed and executed.
StepOutcome = Literal[
    "ok",
    "parse_error",
    "target_not_found",
    "not_interactable",
    "action_error",
    "no_progress",
    "budget_exhausted",
    "llm_error",
    "env_error",
    "context_overflow",
    "refused",  # the rails refused the action (a field they never fill, leaving the site): fed back once, then the run ends
    "denied",  # the confirmation gate denied a sensitive action: fed back to the model, the run goes on
]

# How an episode ended.
EpisodeEnd = Literal["done", "answered", "infeasible", "max_steps", "stuck", "budget_exhausted", "llm_error", "env_error", "timeout", "refused", "running"]

JudgeLabel = Literal["success", "failure", "unknown"]


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Task(BaseModel):
    """What to solve. `scope` selects memory (e.g. ``miniwob/login-user`` or ``mind2web/exploretock``)."""

    task_id: str
    goal: str = ""
    scope: str
    benchmark: str
    seed: int | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def key(self) -> str:
        """Unique key for joining results to tasks: id plus seed, never file order."""
        return self.task_id if self.seed is None else f"{self.task_id}#{self.seed}"


class TargetDesc(BaseModel):
    """What an action acted on, described so it holds on another page: role plus label or text."""

    role: str = ""
    label: str = ""
    # The text of the row, list item or card the element sits in ("" outside one): what tells apart the
    # Edit links of a ticket list or the star icons of an inbox, whose own role and label are the same.
    row: str = ""

    @model_serializer(mode="wrap")
    def _without_empty_row(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """No ``row`` key where there is no row: trajectories and workflow bodies (content addresses in
        the memory store) written before rows were recorded stay byte for byte what they were."""
        data = handler(self)
        if not self.row:
            data.pop("row", None)
        return data

    def render(self) -> str:
        return f"[{self.role}] {self.label}".strip() if self.role else self.label


class Box(BaseModel):
    """An element's box on the step's screenshot, in its pixels (BrowserGym's `bbox`, scaled as the
    screenshot is): what the episode page marks as the element acted on."""

    x: float
    y: float
    width: float
    height: float

    @classmethod
    def of(cls, bbox: object) -> Box | None:
        """A box from BrowserGym's `bbox` ([x, y, width, height]); None when there is none or it is empty."""
        if not isinstance(bbox, list | tuple) or len(bbox) < 4:
            return None
        try:
            x, y, width, height = (float(v) for v in bbox[:4])
        except (TypeError, ValueError):
            return None
        return cls(x=x, y=y, width=width, height=height) if width > 0 and height > 0 else None


class Step(BaseModel):
    """One parse -> execute -> feedback -> observe cycle."""

    index: int
    url: str = ""
    observation: str = ""  # the (pruned) observation text the model saw
    fingerprint: str = ""
    model_output: str = ""
    thought: str = ""
    action: dict[str, Any] | None = None  # awm.actions.Action as JSON: {"name": ..., "args": {...}}
    action_str: str = ""  # the exact string that was executed (rendered by awm.actions)
    target: TargetDesc | None = None
    box: Box | None = None  # the target's box on the screenshot (None: no target, or an old record)
    outcome: StepOutcome = "ok"
    error: str = ""
    feedback: str = ""
    timings_ms: dict[str, float] = Field(default_factory=dict)
    prompt_tokens: int = 0
    # Of prompt_tokens, those the model server reused from its prefix cache (0: none, or not reported):
    # the rest it had to process, which is most of what a step costs in model time on a CPU.
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    prompt_hash: str = ""  # sha256 of the exact messages sent for this step (empty: no model call)
    prompt: list[dict[str, str]] = Field(default_factory=list)  # those messages (role, content), to show
    # The agent's guidance filters that changed what this step's model call was offered (held an answer
    # back or added a note), in the order they acted: `awm.webarena.guidance_filters`.
    guidance: list[str] = Field(default_factory=list)
    screenshot: str | None = None
    # A sub-step of a `run_workflow` call: the index of the model step that called it, the workflow's
    # name, and how its target was grounded on this page (rule, score, candidates). None: a model step.
    called_by: int | None = None
    workflow: str = ""
    grounding: str = ""
    approval: Approval | None = None  # the confirmation gate's answer, when the action needed one
    reaction: str = ""  # live runs: what the page showed in answer to the action (new state, new text)


# Arguments that address an element or the mouse, not a value the action entered.
_ID_ARGS = frozenset(
    {"bid", "id", "from_bid", "to_bid", "button", "wait_ms", "element", "x", "y", "dx", "dy"}
)


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


def action_values(step: Step) -> list[str]:
    """The values a step's action carried (typed text, chosen options, keys, answer text, workflow
    parameters), not element ids. A step recorded without a parsed action contributes its action string.

    Read by the judge's evidence (was a goal value used?) and by the web agent's goal guidance (was it
    typed yet?), so it lives with the step it reads.
    """
    if step.action is None:
        return [step.action_str] if step.action_str else []
    args = step.action.get("args") or {}
    if not isinstance(args, dict):
        return list(_strings(args))
    return [s for k, v in args.items() if k not in _ID_ARGS for s in _strings(v)]


class Verdict(BaseModel):
    """Ground truth, an LLM judge's label, or both. What counts as success: `awm.evaluation.success`.

    `reward` is the benchmark's reward as it reported it; `raw_reward` the unshaped one where the
    benchmark has one (MiniWoB++'s RAW_REWARD_GLOBAL: BrowserGym's reward counts partial credit).
    """

    reward: float | None = None
    raw_reward: float | None = None
    judge: JudgeLabel | None = None
    judge_reason: str = ""


class Approval(BaseModel):
    """The confirmation gate's answer on one sensitive action: what was asked, why, and who decided.

    `approver` is who answered: ``terminal`` (a person at the terminal), ``timeout`` (nobody answered in
    time: denied), ``nobody`` (the run had no person to ask: denied), or the live page's user."""

    approved: bool
    approver: str
    reason: str  # why the action needed a person ("the control says 'delete'")
    action: str  # the action as it would have run
    element: str = ""
    value: str = ""
    url: str = ""
    screenshot: str = ""  # the file the person was shown, where one was saved
    at: str = Field(default_factory=lambda: utc_now())


class WorkflowCall(BaseModel):
    """One `run_workflow` call of an episode: which workflow, with which values, how far it ran."""

    step: int  # the index of the model step that called it
    name: str
    params: dict[str, str] = Field(default_factory=dict)  # the values the model gave in its call
    bound: dict[str, str] = Field(default_factory=dict)  # the values read off the goal (old records: none)
    steps_total: int = 0
    steps_run: int = 0  # sub-steps that ran and passed their check
    completed: bool = False  # every sub-step ran
    error: str = ""  # why it stopped ("step 2 of 3 (fill [textbox] Password): target_not_found: ...")


class Trajectory(BaseModel):
    """An episode: the task, its steps, how it ended, and what memory it saw."""

    trajectory_id: str
    task: Task
    steps: list[Step] = Field(default_factory=list)
    end: EpisodeEnd = "running"
    final_answer: str = ""
    verdict: Verdict = Field(default_factory=Verdict)
    model: str = ""
    memory_scope: str | None = None  # the memory view the driver gave the policy: its scope,
    memory_version: int | None = None  # its version (None: the scope had none yet),
    workflows_used: list[str] = Field(default_factory=list)  # and the workflows its prompts carried
    workflow_calls: list[WorkflowCall] = Field(default_factory=list)  # and the ones it ran
    started_at: str = Field(default_factory=utc_now)
    seconds: float = 0.0
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.steps)

    @property
    def cached_prompt_tokens(self) -> int:
        return sum(s.cached_prompt_tokens for s in self.steps)

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for s in self.steps)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2)


def load_trajectory(path: Path) -> Trajectory:
    """Read one trajectory JSON file, with an error that names the file and the field."""
    try:
        return Trajectory.model_validate_json(Path(path).read_text())
    except FileNotFoundError:
        raise DataError(f"{path}: no such trajectory file") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise DataError(f"{path}: field '{where}': {first['msg']}") from None


def save_trajectory(trajectory: Trajectory, path: Path) -> None:
    """Write atomically (temp file, then rename) so a crash never leaves half a file."""
    write_text_atomic(path, trajectory.to_json())


def load_trajectories(folder: Path) -> list[Trajectory]:
    """All `*.json` trajectories under a folder, sorted by task key then id (never directory order)."""
    found = [load_trajectory(p) for p in sorted(Path(folder).rglob("*.json")) if _looks_like_trajectory(p)]
    return sorted(found, key=lambda t: (t.task.key, t.trajectory_id))


def _looks_like_trajectory(path: Path) -> bool:
    try:
        head = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(head, dict) and "trajectory_id" in head and "task" in head


# Actions whose repeat means the same value went into the same field again, wherever the page is.
VALUE_ACTIONS = frozenset({"fill", "select_option"})


def repeat_key(step: Step) -> tuple | None:
    """What makes a model step the same act as an earlier one: the same value into the same field (on
    any page), or the same click or key press on the same control of the same URL. None: a step with no
    element (a scroll, an ending), which the loop detector judges on its own."""
    name = (step.action or {}).get("name", "")
    if step.target is None or not name:
        return None
    where = () if name in VALUE_ACTIONS else (step.url,)
    return (name, step.target.role, step.target.label, tuple(action_values(step)), *where)


def repeats_of(history: Sequence[Step], step: Step) -> int:
    """How many earlier model steps of `history` that worked were the same act as `step` (`repeat_key`)."""
    key = repeat_key(step)
    if key is None:
        return 0
    return sum(1 for s in history if s.called_by is None and s.outcome == "ok" and repeat_key(s) == key)
