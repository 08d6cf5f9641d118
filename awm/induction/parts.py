"""A workflow's reusable parts: where the pages say one procedure ended and the next began.

Why parts: a site's tasks share procedures, not whole routines. On the arena's Trac, every "As erin,
change the priority of ticket X" and "As dave, close ticket Y" starts by logging in, then opens the
ticket the goal names, then acts on it; a template the agent never solved can be served by the log-in
and open-the-ticket parts other templates taught (site scope), where their whole workflows would do
the wrong thing at the end.

Where a part ends, read off the pages (never off a benchmark's wording): after a step that left its
page having either
- submitted a form: a click or key press after a fill, selection or check on that page since the part
  began (log in; file the ticket), or
- opened what the goal names: a click on a target whose label is a parameter of the goal (the ticket,
  the wiki page, the product the task is about).
A page is the URL's path (a fragment or a query is the same page in another state). Parts of one
step are not kept (the agent takes one step as cheaply as a call), nor is a split into one part (the
whole workflow already is it). A part keeps the whole's description (the goal template its parameters
are bound from), names the whole it came from (`Provenance.part_of`) and the part before it
(`Provenance.follows`: the agent's guidance keeps a whole's parts in their order,
`guidance_filters.parts_in_order`); replay admission admits it with its whole
(`awm.pipeline.replay.verify_candidates`), since it is a slice of a verified run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from awm.induction.abstraction import AbstractStep
from awm.memory.workflow import CASE_PARAMETER, PLACEHOLDER, Workflow

# The inducer's naming of steps by the workflow's own labels (`rule.workflow_name`).
NameOf = Callable[[Sequence[AbstractStep], Sequence[str]], str]

STATE_ACTIONS = frozenset({"fill", "select_option", "check", "uncheck"})
SUBMIT_ACTIONS = frozenset({"click", "press"})
MIN_PART_STEPS = 2


def part_ends(workflow: Workflow, pages: Sequence[str]) -> list[int]:
    """The indices of the steps after which a part ends (never the last step), given the page each
    step acted on (pure); none when a page is not known."""
    steps = workflow.steps
    if len(pages) != len(steps) or not all(pages):
        return []
    ends: list[int] = []
    start = 0
    for i, step in enumerate(steps[:-1]):
        if pages[i + 1] == pages[i]:
            continue
        set_state = any(
            s.action in STATE_ACTIONS and pages[j] == pages[i] for j, s in enumerate(steps[start:i], start)
        )
        submitted = step.action in SUBMIT_ACTIONS and set_state
        opened_named = step.action == "click" and bool(PLACEHOLDER.search(step.target.label))
        if submitted or opened_named:
            ends.append(i)
            start = i + 1
    return ends


def split_parts(workflow: Workflow, teaching: Sequence[AbstractStep], name_of: NameOf) -> list[Workflow]:
    """The workflow's parts (`part_ends` on the teaching member's pages), each a workflow of its own
    with the parameters its steps use; [] when it does not split into two or more parts of two steps."""
    ends = part_ends(workflow, [s.page for s in teaching])
    bounds = list(zip([0, *(e + 1 for e in ends)], [*(e + 1 for e in ends), len(workflow.steps)], strict=True))
    if len(bounds) < 2:
        return []
    parts: list[Workflow] = []
    for start, stop in bounds:
        if stop - start < MIN_PART_STEPS:
            continue
        steps = workflow.steps[start:stop]
        used = {name for step in steps for name in step.placeholders()}
        if any(f"|{CASE_PARAMETER}}}" in step.value for step in steps):
            used.add(CASE_PARAMETER)
        parts.append(
            workflow.model_copy(
                update={
                    "name": name_of(teaching[start:stop], [step.target.label for step in steps]),
                    "steps": list(steps),
                    "parameters": [p for p in workflow.parameters if p in used],
                    "provenance": workflow.provenance.model_copy(
                        update={"part_of": workflow.name, "follows": parts[-1].name if parts else ""}
                    ),
                },
                deep=True,
            )
        )
    return parts

