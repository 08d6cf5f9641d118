"""Workflows built on workflows: a step that calls another workflow by name, expanded before it runs.

Why: a site's procedures nest. On the arena's Trac, "as erin, change the priority of ticket X" is *log
in*, *open the ticket*, *change it*; stored as calls to the log-in and open-the-ticket parts
(`awm.induction.parts`), the whole says what it is made of, the memory page shows which workflows a
part serves, and a part fixed in a later version serves every workflow of that version that calls it
(ASI and SkillWeaver build skills on skills the same way).

A call is data, never code: a step with action ``run_workflow``, `value` the callee's name and `params`
the callee's parameters as text that may hold the caller's placeholders (``{"username": "{username}"}``).
Calls resolve within one memory version (the workflows committed together): a version is the unit the
driver hands an episode, and a name in another scope may mean another routine. The call graph is
checked where workflows are committed (a cycle is refused with its path) and expanded where they run
(`expand`, at most `MAX_CALL_DEPTH` calls deep): the executor, the grammar and replay see plain steps.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from awm.errors import AwmError
from awm.memory.workflow import CALL_ACTION, PLACEHOLDER_PARTS, TRANSFORMS, Workflow, WorkflowStep

MAX_CALL_DEPTH = 4  # log in < open the item < change it < a task built on that: deeper is a loop in disguise
_WHOLE_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")


class CompositionError(AwmError):
    """A workflow's calls cannot be resolved: a cycle, a callee the version does not hold, or too deep."""


def callees(workflow: Workflow) -> list[str]:
    """The names the workflow calls, in step order, each once."""
    return list(dict.fromkeys(step.value for step in workflow.steps if step.is_call))


def call_graph(workflows: Iterable[Workflow]) -> dict[str, list[str]]:
    """Caller -> callees, for the workflows that call any (what the memory page and `memory show` list)."""
    return {w.name: names for w in workflows if (names := callees(w))}


def find_cycle(graph: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A call path that comes back to where it started (``['a', 'b', 'a']``), or None (pure)."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for callee in graph.get(name, ()):
            found = visit(callee, [*path, name])
            if found is not None:
                return found
        done.add(name)
        return None

    for start in graph:
        found = visit(start, [])
        if found is not None:
            return found
    return None


def check_calls(workflows: Sequence[Workflow]) -> None:
    """Refuse a set of workflows (one version) whose calls form a cycle, naming the path.

    A call to a name the set does not hold is allowed here (a retired part leaves its callers in the
    version; they then report it as not executable), a cycle never: it can never run to an end.
    """
    cycle = find_cycle(call_graph(workflows))
    if cycle is not None:
        raise CompositionError(
            f"workflow {cycle[0]!r} calls itself through {' -> '.join(repr(n) for n in cycle)}; "
            "a workflow may call others, never back into its own call path"
        )


def bind_call(step: WorkflowStep, params: Mapping[str, str]) -> WorkflowStep:
    """One of the callee's steps with the call's arguments put in for the callee's placeholders.

    An argument that is one of the caller's placeholders renames the callee's, keeping its transform
    (``{text|upper}`` called with ``{"text": "{name}"}`` becomes ``{name|upper}``); literal text is put
    in with the transform applied. A placeholder the call gives nothing for stays as it is.
    """

    def one(match: re.Match[str]) -> str:
        name, transform = match.group(1), match.group(2)
        if name not in params:
            return match.group(0)
        argument = params[name]
        renamed = _WHOLE_PLACEHOLDER.fullmatch(argument)
        if renamed is not None:
            return "{" + renamed.group(1) + (f"|{transform}" if transform else "") + "}"
        return TRANSFORMS[transform](argument) if transform in TRANSFORMS else argument

    def fill(text: str) -> str:
        return PLACEHOLDER_PARTS.sub(one, text)

    return step.model_copy(
        update={
            "value": step.value if step.is_call else fill(step.value),
            "reasoning": fill(step.reasoning),
            "target": step.target.model_copy(update={"label": fill(step.target.label), "row": fill(step.target.row)}),
            "post": step.post.model_copy(update={"value": fill(step.post.value)}) if step.post else None,
            "params": {name: fill(text) for name, text in step.params.items()},
        }
    )


def expand(workflow: Workflow, library: Mapping[str, Workflow], *, max_depth: int = MAX_CALL_DEPTH) -> Workflow:
    """The workflow with every call replaced by the callee's steps (recursively), its own name,
    description and parameters kept; a workflow without calls is returned as it is.

    Raises `CompositionError` naming the call path for a cycle, a callee `library` does not hold, or a
    path deeper than `max_depth` calls.
    """
    if not any(step.is_call for step in workflow.steps):
        return workflow
    steps = _expanded(workflow.steps, library, [workflow.name], max_depth)
    return workflow.model_copy(update={"steps": steps})


def _expanded(
    steps: Sequence[WorkflowStep], library: Mapping[str, Workflow], path: list[str], max_depth: int
) -> list[WorkflowStep]:
    out: list[WorkflowStep] = []
    for step in steps:
        if not step.is_call:
            out.append(step)
            continue
        name = step.value
        shown = " -> ".join(repr(n) for n in [*path, name])
        if name in path:
            raise CompositionError(f"workflow {path[0]!r} calls itself: {shown}")
        if len(path) > max_depth:
            raise CompositionError(f"workflow {path[0]!r} calls more than {max_depth} deep: {shown}")
        callee = library.get(name)
        if callee is None:
            raise CompositionError(f"workflow {path[-1]!r} calls {name!r}, which this memory version does not hold")
        body = [bind_call(s, step.params) for s in callee.steps]
        out.extend(_expanded(body, library, [*path, name], max_depth))
    return out


def expand_all(workflows: Sequence[Workflow]) -> list[Workflow]:
    """Each workflow of one version with its calls expanded against the others; one whose calls cannot
    be resolved is kept as it is (the executor then reports it as not executable, with the reason)."""
    library = {w.name: w for w in workflows}
    out = []
    for workflow in workflows:
        try:
            out.append(expand(workflow, library))
        except CompositionError:
            out.append(workflow)
    return out


def call_step(callee: Workflow, params: Mapping[str, str] | None = None) -> WorkflowStep:
    """A step calling `callee`, each of its parameters passed on under its own name by default."""
    arguments = dict(params) if params is not None else {p: "{" + p + "}" for p in callee.parameters}
    return WorkflowStep(reasoning=f"Run '{callee.name}'.", action=CALL_ACTION, value=callee.name, params=arguments)


def compose_from_parts(whole: Workflow, parts: Sequence[Workflow]) -> Workflow:
    """The whole with each run of its steps that equals one of `parts` (in order, not overlapping)
    replaced by a call to that part; the whole as it is when no part matches. Expanding the result
    against the parts gives the whole's steps back (`expand`), so executing it is unchanged."""
    steps: list[WorkflowStep] = []
    i = 0
    while i < len(whole.steps):
        part = next(
            (p for p in parts if p.steps and whole.steps[i : i + len(p.steps)] == p.steps and p.name != whole.name),
            None,
        )
        if part is None:
            steps.append(whole.steps[i])
            i += 1
            continue
        used = [*part.parameters, *(name for s in part.steps for name in s.placeholders())]
        steps.append(call_step(part, {p: "{" + p + "}" for p in dict.fromkeys(used)}))
        i += len(part.steps)
    if steps == whole.steps:
        return whole
    return whole.model_copy(update={"steps": steps})
