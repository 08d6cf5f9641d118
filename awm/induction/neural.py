"""Neural induction: an LLM reads admitted trajectories of one scope and writes reusable workflows.

Why this shape: the prompt is short fixed instructions, one worked example rendered by the same
code that renders the real inputs (so the example can never drift from the format the parser
reads), then the trajectories as goal + per step (thought, action on "[role] label"; element ids
never appear). Inputs larger than the token budget are split into batches whose results are merged
and deduplicated; nothing is silently cut. Answers are parsed with `parse_workflows`; an answer with
no usable workflow raises `InductionError` with the reasons, so the caller commits nothing.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from awm.errors import AwmError, WorkflowParseError
from awm.induction.abstraction import AbstractStep, AbstractTrajectory, abstract_trajectory
from awm.induction.merge import merge_workflows
from awm.llm.base import ChatRequest, LLMClient
from awm.memory.text_format import (
    ELEMENT_ACTIONS,
    ImportReport,
    import_workflows,
    render_workflow,
    render_workflows,
)
from awm.memory.workflow import Provenance, Workflow, WorkflowStep
from awm.tokens import count_messages
from awm.trajectory import TargetDesc, Trajectory

if TYPE_CHECKING:
    from awm.memory.embeddings import Embedder
    from awm.tokens import TokenCounter

Style = Literal["mind2web", "webarena"]

DEFAULT_BUDGET_TOKENS = 3000
DEFAULT_MAX_TOKENS = 600
MIN_STEPS = 2
THOUGHT_CHARS_SHORT = 120
MAX_TRAILING_LINES = 4  # chatter lines after a workflow's last action that parsing may drop  # the first shrink level cuts each step's thought to this many characters

INSTRUCTION = """You turn solved web tasks into reusable workflows.
Read the tasks below and find sub-routines (sequences of steps) that several tasks share.
Write each one as a workflow:
- a header line "## short_name", then one line saying when to use it;
- then its steps: one reasoning line, then one action line, exactly as in the example;
- at least two steps per workflow; no two workflows that do nearly the same thing;
- replace task-specific values (names, passwords, search terms, dates) with named placeholders
  such as {username} or {search_term}; keep values that are the same in every task;
- describe each element by its role and label, like '[button] Submit'; never by a number or id.
Answer with the workflows only."""


class InductionError(AwmError):
    """Induction produced nothing usable (invalid or empty model output, or an input too large)."""


@dataclass
class Batch:
    """One model call's worth of trajectories and the prompt sent for them."""

    trajectory_ids: list[str]
    messages: list[dict[str, str]]
    prompt_tokens: int
    detail: int  # 0 = full thoughts; 1 = shortened thoughts; 2 = no thoughts (for the largest inputs)

    @property
    def prompt_text(self) -> str:
        return "\n\n".join(m["content"] for m in self.messages)

    @property
    def prompt_hash(self) -> str:
        return hashlib.sha256(self.prompt_text.encode()).hexdigest()


@dataclass
class NeuralReport:
    """What the neural inducer did: calls made, batches, and every rejected piece with its reason."""

    calls: int = 0
    batches: list[list[str]] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    rejected: list[str] = field(default_factory=list)
    shrunk: dict[str, int] = field(default_factory=dict)  # trajectory id -> detail level used


# --- rendering --------------------------------------------------------------------------------------


def style_for(trajectories: Sequence[Trajectory]) -> Style:
    """Mind2Web trajectories use AWM's Mind2Web text style; everything in a browser uses WebArena's."""
    return (
        "mind2web"
        if trajectories and all(t.task.benchmark == "mind2web" for t in trajectories)
        else "webarena"
    )


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def _step_lines(steps: Sequence[AbstractStep], style: Style, detail: int) -> str:
    """The steps in the workflow text format itself (rendered by `render_workflow`), values literal."""
    workflow_steps = []
    for step in steps:
        thought = (
            ""
            if detail >= 2
            else step.thought
            if detail == 0
            else _shorten(step.thought, THOUGHT_CHARS_SHORT)
        )
        workflow_steps.append(
            WorkflowStep(
                reasoning=" ".join(thought.split()), action=step.action, target=step.target, value=step.value
            )
        )
    rendered = render_workflow(Workflow(name="steps", steps=workflow_steps), style)
    # Drop the header line and the (empty) description line: what remains is the step lines.
    return "\n".join(rendered.split("\n")[2:]).strip("\n")


def render_trajectory(trajectory: AbstractTrajectory, style: Style, detail: int = 0) -> str:
    """A compact view of one trajectory: ``Task: goal`` then its steps; targets as "[role] label"."""
    return f"Task: {' '.join(trajectory.goal.split()) or '(no goal recorded)'}\n{_step_lines(trajectory.steps, style, detail)}"


def _example(style: Style) -> tuple[str, str]:
    """The one worked example: two short shop tasks and the workflow they share."""
    box, go = TargetDesc(role="searchbox", label="Search products"), TargetDesc(role="button", label="Search")
    tasks = [
        AbstractTrajectory(
            "ex1",
            "example",
            "Find the price of a red umbrella.",
            (
                AbstractStep(
                    "fill", box.role, box.label, "red umbrella", "I type the product name in the search box."
                ),
                AbstractStep("click", go.role, go.label, "", "I start the search."),
                AbstractStep("send_msg_to_user", "", "", "It costs $12", "The first result costs $12."),
            ),
        ),
        AbstractTrajectory(
            "ex2",
            "example",
            "How many desk lamps are in stock?",
            (
                AbstractStep("fill", box.role, box.label, "desk lamp", "I search for desk lamps."),
                AbstractStep("click", go.role, go.label, "", "I run the search."),
                AbstractStep("send_msg_to_user", "", "", "There are 7 in stock", "The page lists 7 lamps."),
            ),
        ),
    ]
    if style == "mind2web":
        tasks = [_as_mind2web(t) for t in tasks]
    workflow = Workflow(
        name="search_product",
        description="Search the shop for a product by its name.",
        steps=[
            WorkflowStep(
                reasoning="I type the product name in the search box.",
                action="fill",
                target=box,
                value="{product_name}",
            ),
            WorkflowStep(reasoning="I start the search.", action="click", target=go),
        ],
    )
    if style == "mind2web":
        workflow = Workflow(
            name=workflow.name,
            description=workflow.description,
            steps=[
                s.model_copy(update={"action": {"fill": "TYPE", "click": "CLICK"}[s.action]})
                for s in workflow.steps
            ],
        )
    shown = "\n\n".join(render_trajectory(t, style) for t in tasks)
    return shown, render_workflows([workflow], style).strip()


def _as_mind2web(trajectory: AbstractTrajectory) -> AbstractTrajectory:
    ops = {"fill": "TYPE", "click": "CLICK"}
    steps = tuple(
        AbstractStep(ops[s.action], s.role, s.label, s.value, s.thought)
        for s in trajectory.steps
        if s.action in ops
    )
    return AbstractTrajectory(trajectory.trajectory_id, trajectory.scope, trajectory.goal, steps)


def system_prompt(style: Style) -> str:
    """Instructions plus the worked example: the stable prefix of every induction call."""
    tasks, workflows = _example(style)
    return f"{INSTRUCTION}\n\nEXAMPLE TASKS:\n\n{tasks}\n\nEXAMPLE WORKFLOWS:\n\n{workflows}"


def user_prompt(rendered: Sequence[str]) -> str:
    return "TASKS:\n\n" + "\n\n".join(rendered) + "\n\nWORKFLOWS:"


# --- batching ---------------------------------------------------------------------------------------


def plan_batches(
    trajectories: Sequence[AbstractTrajectory],
    *,
    style: Style,
    counter: TokenCounter,
    budget_tokens: int,
) -> list[Batch]:
    """Split trajectories into prompts of at most `budget_tokens` tokens each (whole request counted).

    A trajectory too large for an empty batch is shown with shortened thoughts, then without
    thoughts; if it still does not fit, `InductionError` names it and the sizes.
    """
    system = system_prompt(style)

    def build(rendered: list[str]) -> tuple[list[dict[str, str]], int]:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user_prompt(rendered)}]
        return messages, count_messages(messages, counter)

    _, fixed = build([])
    if fixed >= budget_tokens:
        raise InductionError(
            f"the induction budget of {budget_tokens} tokens does not even hold the instructions and example "
            f"({fixed} tokens); raise the budget"
        )
    batches: list[Batch] = []
    current_ids: list[str] = []
    current_texts: list[str] = []
    current_detail = 0

    def flush() -> None:
        nonlocal current_ids, current_texts, current_detail
        if current_ids:
            messages, tokens = build(current_texts)
            batches.append(Batch(list(current_ids), messages, tokens, current_detail))
        current_ids, current_texts, current_detail = [], [], 0

    for trajectory in trajectories:
        text = render_trajectory(trajectory, style, 0)
        if build([*current_texts, text])[1] <= budget_tokens:
            current_ids.append(trajectory.trajectory_id)
            current_texts.append(text)
            continue
        flush()
        for detail in (0, 1, 2):
            text = render_trajectory(trajectory, style, detail)
            size = build([text])[1]
            if size <= budget_tokens:
                current_ids, current_texts, current_detail = [trajectory.trajectory_id], [text], detail
                break
        else:
            raise InductionError(
                f"trajectory {trajectory.trajectory_id} needs {size} prompt tokens even without thoughts "
                f"({size - fixed} for its {len(trajectory.steps)} steps), over the induction budget of "
                f"{budget_tokens}; raise the budget or induce it with --mode rule"
            )
    flush()
    return batches


# --- parsing the answer -----------------------------------------------------------------------------

_HEADER_LINE = re.compile(r"^\s*(?:##\s+\S|workflow(?:\s+\d+)?\s*:)", re.IGNORECASE)


def _blocks(text: str) -> list[str]:
    """The answer cut at workflow headers; text before the first header (chatter) is dropped."""
    blocks: list[list[str]] = []
    for line in text.replace("\r\n", "\n").split("\n"):
        if _HEADER_LINE.match(line):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
    return ["\n".join(b).strip() for b in blocks]


def _parse_block(block: str, *, source: str) -> ImportReport:
    """Parse one workflow block; trailing chatter after the last action ("These workflows...") is cut.

    Up to `MAX_TRAILING_LINES` trailing lines are dropped one by one until the block parses; the first
    error is raised if none does, so a truly malformed block is still rejected with its line number.
    """
    lines = block.split("\n")
    try:
        return import_workflows(block, "auto", source=source)
    except WorkflowParseError as exc:
        first_error = exc
    for cut in range(1, min(MAX_TRAILING_LINES, len(lines) - 1) + 1):
        try:
            return import_workflows("\n".join(lines[:-cut]), "auto", source=source)
        except WorkflowParseError:
            continue
    raise first_error


def _step_without_target(workflow: Workflow, report: ImportReport) -> int | None:
    """The first (1-based) step that acts on an element but describes none, or names it by id: a model
    shown role+label targets that answers with an id copied a recorded step (an import keeps a hint)."""
    by_id = [h.step for h in report.hints if h.workflow == workflow.name]
    if by_id:
        return by_id[0]
    for number, step in enumerate(workflow.steps, start=1):
        acts_on_element = step.action in ELEMENT_ACTIONS or step.action.upper() in ("CLICK", "TYPE", "SELECT")
        if acts_on_element and not (step.target.role.strip() or step.target.label.strip()):
            return number
    return None


def parse_answer(text: str, *, source: str, min_steps: int = MIN_STEPS) -> tuple[list[Workflow], list[str]]:
    """Workflows from a model answer, each block parsed on its own so one bad block costs only itself.

    Returns (workflows, reasons for each rejected block or workflow).
    """
    workflows: list[Workflow] = []
    rejected: list[str] = []
    blocks = _blocks(text)
    if not blocks:
        return [], [f"{source}: no workflow header ('## name') in the answer: {_shorten(text, 160)!r}"]
    names: set[str] = set()
    for n, block in enumerate(blocks, start=1):
        try:
            report = _parse_block(block, source=f"{source} block {n}")
        except WorkflowParseError as exc:
            rejected.append(str(exc))
            continue
        for workflow in report.workflows:
            if len(workflow.steps) < min_steps:
                rejected.append(
                    f"{source}: workflow {workflow.name!r} has {len(workflow.steps)} step(s); at least {min_steps} needed"
                )
            elif (where := _step_without_target(workflow, report)) is not None:
                rejected.append(
                    f"{source}: workflow {workflow.name!r} step {where} names its element by id or not at all; "
                    "targets must be '[role] label'"
                )
            elif workflow.name in names:
                rejected.append(f"{source}: workflow name {workflow.name!r} repeated; kept the first")
            else:
                names.add(workflow.name)
                workflows.append(workflow)
    return workflows, rejected


# --- the inducer ------------------------------------------------------------------------------------


def induce_neural(
    trajectories: Sequence[Trajectory],
    *,
    client: LLMClient,
    admission: str = "",
    counter: TokenCounter | None = None,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    min_steps: int = MIN_STEPS,
    embedder: Embedder | None = None,
    threshold: float = 0.9,
    style: Style | None = None,
) -> tuple[list[Workflow], NeuralReport]:
    """Ask the model for workflows, batch by batch; merge and deduplicate the batches' results.

    Raises `InductionError` when no batch yields a usable workflow (every reason is in the message).
    `budget_tokens` bounds each whole prompt; `max_tokens` the answer.
    """
    report = NeuralReport()
    abstracts = [a for a in (abstract_trajectory(t) for t in trajectories) if a.steps]
    if not abstracts:
        raise InductionError("no admitted trajectory has an executed step; nothing to induce from")
    style = style or style_for(trajectories)
    counter = counter or client.token_counter()
    batches = plan_batches(abstracts, style=style, counter=counter, budget_tokens=budget_tokens)
    candidates: list[Workflow] = []
    for number, batch in enumerate(batches, start=1):
        report.batches.append(batch.trajectory_ids)
        for tid in batch.trajectory_ids:
            if batch.detail:
                report.shrunk[tid] = batch.detail
        result = client.chat(
            ChatRequest(messages=batch.messages, max_tokens=max_tokens, temperature=0.0, purpose="induction")
        )
        report.calls += 1
        report.prompt_tokens += result.usage.prompt_tokens
        report.completion_tokens += result.usage.completion_tokens
        parsed, rejected = parse_answer(result.text, source=f"induction answer {number}", min_steps=min_steps)
        report.rejected.extend(rejected)
        provenance = Provenance(
            trajectory_ids=batch.trajectory_ids,
            model=client.model,
            prompt_hash=batch.prompt_hash,
            mode="neural",
            admission=admission,
        )
        candidates.extend(
            w.model_copy(update={"provenance": provenance.model_copy(deep=True)}) for w in parsed
        )
    if not candidates:
        reasons = "; ".join(report.rejected) or "the model returned no workflow"
        raise InductionError(
            f"neural induction produced no usable workflow ({report.calls} call(s)): {reasons}"
        )
    workflows, _ = merge_workflows([], candidates, embedder=embedder, threshold=threshold)
    return workflows, report
