"""The Mind2Web step prompt: instructions, workflow memory, exemplars, previous steps, page and task.

Why one builder: every part of the request is measured together by `awm.tokens.fit_prompt`, after the
memory is added (AWM fitted the prompt before appending its workflows). What may shrink, in order:
previous steps (oldest first), the page (re-pruned to fewer candidates, then cut), exemplars and
workflows (least relevant last). The instructions and the task never shrink; when even they and the
smallest page do not fit, `PromptTooLargeError` is raised and the step is recorded as ``context_overflow``.

Exemplars are sampled from train records with a recorded seed (AWM's sampling was unseeded).

The page is shown in one of three formats (`PageFormat`), pruned the published way (`awm.mind2web.dom_tree`):
``awm`` writes the tree with HTML brackets, as AWM prompted (its `get_target_obs` calls MindAct's
`get_tree_repr` with ``keep_html_brackets=True``), ``mindact`` in MindAct's own parenthesised form; or
``compact``, our one line per candidate (`awm.mind2web.prune`).
Either way an element's id is its dataset ``backend_node_id`` and the answer is ``CLICK [id]``, so
scoring and the answer grammar do not depend on the format; exemplars are shown in the same format.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel

from awm.actions import describe_actions
from awm.memory.text_format import render_workflow
from awm.memory.workflow import Workflow
from awm.mind2web.dom_tree import MindActPage
from awm.mind2web.prune import CompactPage, Dom, parse_dom
from awm.mind2web.schema import ActionRecord, Candidate, TaskRecord
from awm.tokens import FittedPrompt, PromptParts, TokenCounter, fit_prompt

CHARS_PER_TOKEN_GUESS = 3.0  # to turn a token target into a character budget for re-pruning
EXEMPLAR_NEGATIVES = 4  # candidates shown next to the gold one in an exemplar
EXEMPLAR_MAX_CHARS = 1200

PageFormat = Literal["awm", "mindact", "compact"]
PAGE_FORMATS: tuple[PageFormat, ...] = ("awm", "mindact", "compact")

# Ids in the text are placeholders ("ID"), never numbers a page could have: small models copy example ids.
SYSTEM_PROMPT = """You are a web agent. You see a task, the actions done so far, and {page}. \
Choose the next action on one of these elements.

Actions:
{actions}

Reply with exactly one action on one line, with {answer_id} in place of ID. \
Write nothing else."""
# How each format shows the page, and which id the answer takes (the bare id: "[id=ID]" would not score).
PAGE_WORDS: dict[PageFormat, tuple[str, str]] = {
    "compact": (
        "candidate elements of the current page, each with its id in brackets like [ID]",
        "an id shown on the page",
    ),
    "awm": (
        "the current page as a pruned HTML tree, each element written <tag attributes text children>, in "
        "which the candidate elements carry their id as id=ID",
        "the id of one candidate (what follows id=)",
    ),
    "mindact": (
        "the current page as a pruned HTML tree, each element written (tag attributes text children), in "
        "which the candidate elements carry their id as id=ID",
        "the id of one candidate (what follows id=)",
    ),
}


def system_prompt(page_format: PageFormat = "compact") -> str:
    """The fixed instructions: the action set as `awm.actions` describes it (one source of truth)."""
    page, answer_id = PAGE_WORDS[page_format]
    return SYSTEM_PROMPT.format(page=page, actions=describe_actions("mind2web"), answer_id=answer_id)


def answer_text(op: str, node_id: str, value: str = "") -> str:
    """A gold action in the answer format: ``CLICK [id]`` or ``TYPE [id] [value]``."""
    return f"{op} [{node_id}]" if op == "CLICK" else f"{op} [{node_id}] [{value}]"


def fallback_elements(candidates: Sequence[Candidate]) -> dict[str, tuple[str, dict[str, str]]]:
    """Tag and attributes of every candidate, shown when a candidate is missing from the page html."""
    return {c.backend_node_id: (c.tag, c.attributes) for c in candidates}


class Page(Protocol):
    """One step's page in one format: text for the best-ranked candidates within a character budget."""

    renders: int  # tree walks that wrote text, over all fits so far

    def fit(self, ranked_ids: list[str], max_chars: int) -> str: ...


def open_page(action: ActionRecord, page_format: PageFormat, dom: Dom | None = None) -> Page:
    """Parse the step's page once for its format (`dom`: the compact parse, when the caller has it)."""
    fallback = fallback_elements([*action.pos_candidates, *action.neg_candidates])
    if page_format in ("awm", "mindact"):
        return MindActPage(action.cleaned_html, fallback, keep_html_brackets=page_format == "awm")
    return CompactPage(dom if dom is not None else parse_dom(action.cleaned_html), fallback)


def render_exemplar(
    record: TaskRecord, index: int, seed: int, page_format: PageFormat = "compact"
) -> str | None:
    """One solved step of a train record as a short example (None if the step has no positive).

    The negatives shown next to the target are drawn with a generator seeded by (seed, task, step). The
    target is fitted first, so a page over budget drops negatives (in shuffled order), never the element
    the answer names; both formats show the kept elements in page order.
    """
    action = record.actions[index]
    target = action.target_id
    if target is None:
        return None
    rng = random.Random(f"{seed}:{record.annotation_id}:{index}")
    negatives = sorted(c.backend_node_id for c in action.neg_candidates)
    shown = [target, *rng.sample(negatives, min(EXEMPLAR_NEGATIVES, len(negatives)))]
    rng.shuffle(shown)
    ranked = [target, *(i for i in shown if i != target)]
    page = open_page(action, page_format).fit(ranked, EXEMPLAR_MAX_CHARS)
    previous = "\n".join(record.action_reprs[:index]) or "None"
    answer = answer_text(action.operation.op, target, action.operation.value)
    return f"Task: {record.confirmed_task}\nPrevious actions:\n{previous}\nPage:\n{page}\nAnswer: {answer}"


def pick_exemplar_steps(records: Sequence[TaskRecord], n: int, seed: int) -> list[tuple[str, int]]:
    """(annotation_id, step index) of `n` train steps, reproducibly: records sorted by id, drawn with `seed`.

    Needs no html, so the picks are made on light records and only the picked tasks are loaded whole.
    """
    if n <= 0:
        return []
    ordered = sorted(records, key=lambda r: r.annotation_id)
    steps = [
        (r.annotation_id, i) for r in ordered for i, a in enumerate(r.actions) if a.target_id is not None
    ]
    return random.Random(seed).sample(steps, min(n, len(steps)))


def sample_exemplars(
    records: Sequence[TaskRecord], n: int, seed: int, page_format: PageFormat = "compact"
) -> list[str]:
    """`n` rendered exemplars from train records (with their html), reproducible from `seed`."""
    by_id = {r.annotation_id: r for r in records}
    picks = pick_exemplar_steps(records, n, seed)
    rendered = (render_exemplar(by_id[aid], i, seed, page_format) for aid, i in picks)
    return [text for text in rendered if text is not None]


class StepPrompt(BaseModel):
    """The fitted request and what it holds."""

    fitted: FittedPrompt
    observation: str  # the page as first pruned (before any fitting)
    workflows_kept: int
    exemplars_kept: int
    page_renders: int  # page renders this step took, fitting included


def memory_header(n_workflows: int, n_exemplars: int) -> str:
    if n_workflows and n_exemplars:
        return "## Workflows (then examples)"
    return "## Examples" if n_exemplars else "## Workflows"


def build_step_prompt(
    task: TaskRecord,
    action: ActionRecord,
    ranked_ids: Sequence[str],
    *,
    counter: TokenCounter,
    context_window: int,
    completion_tokens: int,
    workflows: Sequence[Workflow] = (),
    exemplars: Sequence[str] = (),
    previous_actions: Sequence[str] = (),
    dom: Dom | None = None,
    max_page_chars: int = 6000,
    page_format: PageFormat = "compact",
) -> StepPrompt:
    """Build and fit one step's request; raises `PromptTooLargeError` when the irreducible part overflows.

    `ranked_ids` is the top-k in rank order: a tight budget re-prunes the page to fewer candidates,
    dropping the lowest ranked first. `dom` (the compact parse) is reused by the compact format.
    """
    view = open_page(action, page_format, dom)
    keep = list(ranked_ids)
    page = view.fit(keep, max_page_chars)

    def reprune(_text: str, target_tokens: int) -> str:
        """The page re-pruned to about `target_tokens` (fewer candidates, lowest ranked dropped first)."""
        chars = int(max(target_tokens - 8, 1) * CHARS_PER_TOKEN_GUESS)
        return f"## Page\n{view.fit(keep, chars)}\n\nNext action:"

    memory = [render_workflow(w, "mind2web") for w in workflows] + list(exemplars)
    parts = PromptParts(
        system=system_prompt(page_format),
        memory=memory,
        memory_header=memory_header(len(workflows), len(exemplars)),
        goal=f"Task: {task.confirmed_task}",
        history=list(previous_actions),
        history_header="## Previous actions",
        observation=f"## Page\n{page}\n\nNext action:",
    )
    fitted = fit_prompt(
        parts,
        counter,
        context_window=context_window,
        completion_tokens=completion_tokens,
        prune_observation=reprune,
    )
    kept = fitted.memory_kept
    return StepPrompt(
        fitted=fitted,
        observation=page,
        workflows_kept=min(kept, len(workflows)),
        exemplars_kept=max(0, kept - len(workflows)),
        page_renders=view.renders,
    )
