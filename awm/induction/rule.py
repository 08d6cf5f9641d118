"""Rule-based induction (no LLM): one workflow per group of trajectories with the same abstract steps.

Why a rule-based inducer: it is deterministic, free, and a baseline the neural inducer must beat.
A group is the set of admitted trajectories of one scope whose abstract sequences (action type,
target role, target label) are equal. Values that differ across a group's members become
``{placeholders}`` named after the target label, and so do values copied from every member's goal
(a value the task states is a parameter of the task, even when only one trajectory taught it: without
this, a single successful login would teach the next episode its username); other values equal
across all members stay literal. Element ids quoted in the model's thoughts are removed, since they
only held on the page that produced them.
Trajectories with no executed, successful step are skipped, so every workflow has at least one step.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from awm.induction.abstraction import AbstractStep, AbstractTrajectory, abstract_trajectory
from awm.memory.workflow import Provenance, Workflow, WorkflowStep
from awm.trajectory import Trajectory

_SLUG = re.compile(r"[^a-z0-9]+")
MAX_NAME_CHARS = 80


@dataclass
class RuleReport:
    """What rule induction did with its inputs, for the driver's report."""

    skipped_empty: list[str] = field(default_factory=list)  # trajectory ids with no usable step
    groups: dict[str, list[str]] = field(default_factory=dict)  # workflow name -> member trajectory ids


def slugify(text: str, fallback: str = "value") -> str:
    """A placeholder name from a label: ``User name`` -> ``user_name``; a digit start gets a prefix."""
    slug = _SLUG.sub("_", text.lower()).strip("_")[:40].strip("_")
    if not slug:
        return fallback
    return slug if not slug[0].isdigit() else f"v_{slug}"


def _from_goal(value: str, goal: str) -> bool:
    """Whether a step's value is stated in the task's goal (as a whole word or quoted phrase)."""
    return bool(value.strip()) and re.search(r"(?<!\w)" + re.escape(value) + r"(?!\w)", goal) is not None


def _placeholder_names(members: Sequence[AbstractTrajectory]) -> list[str | None]:
    """Per step, the placeholder name if the value differs across members or comes from every
    member's goal, else None (literal).

    Two steps whose values are equal member by member share one placeholder (the same username
    typed twice is one parameter); otherwise a clashing name gets a numeric suffix.
    """
    first = members[0]
    by_vector: dict[tuple[str, ...], str] = {}
    used: set[str] = set()
    names: list[str | None] = []
    for i, step in enumerate(first.steps):
        vector = tuple(m.steps[i].value for m in members)
        stated = all(_from_goal(m.steps[i].value, m.goal) for m in members)
        if len(set(vector)) == 1 and not stated:
            names.append(None)
            continue
        if vector in by_vector:
            names.append(by_vector[vector])
            continue
        base = slugify(step.label or step.role or step.action)
        name, n = base, 2
        while name in used:
            name, n = f"{base}_{n}", n + 1
        used.add(name)
        by_vector[vector] = name
        names.append(name)
    return names


def _substitute(text: str, replacements: Sequence[tuple[str, str]]) -> str:
    """Replace each value (as a whole word) by its ``{placeholder}``, longest first so parts do not clash."""
    for value, name in sorted(replacements, key=lambda r: -len(r[0])):
        if value.strip():
            pattern = re.compile(r"(?<!\w)" + re.escape(value) + r"(?!\w)")
            text = pattern.sub(lambda _m, n=name: "{" + n + "}", text)
    return text


def goal_template(members: Sequence[AbstractTrajectory], names: Sequence[str | None]) -> str:
    """The first member's goal with its own values replaced by the placeholders.

    When the members' goals differ only in those values (the common case for one task family), this
    is their common template, e.g. ``Log in as {username} with password {password}``.
    """
    first = members[0]
    pairs = [(first.steps[i].value, n) for i, n in enumerate(names) if n is not None]
    return _substitute(first.goal, pairs)


_QUOTED_ID = re.compile(r"\[\s*[A-Za-z]?\d+\s*\]|\(\s*['\"]?[A-Za-z]?\d+['\"]?\s*\)")


def scrub_ids(thought: str) -> str:
    """A thought without the element ids it quoted (``fill[19], press[20]`` -> ``fill, press``)."""
    text = _QUOTED_ID.sub("", thought)
    return re.sub(r"\s+([,.;])", r"\1", re.sub(r"\s{2,}", " ", text)).strip(" ,;")


def workflow_name(steps: Sequence[AbstractStep]) -> str:
    """A readable name from the steps, e.g. ``fill Username, fill Password, click Log in``."""
    parts = [f"{s.action} {s.label or s.role}".strip() for s in steps]
    name = ", ".join(parts)
    return name if len(name) <= MAX_NAME_CHARS else name[: MAX_NAME_CHARS - 3].rstrip(", ") + "..."


def workflow_from_group(members: Sequence[AbstractTrajectory], *, admission: str) -> Workflow:
    """One workflow for a group of members with equal signatures (placeholders where values differ)."""
    names = _placeholder_names(members)
    first = members[0]
    steps = []
    for i, step in enumerate(first.steps):
        name = names[i]
        value = step.value if name is None else "{" + name + "}"
        thought = scrub_ids(step.thought)
        reasoning = thought if name is None else _substitute(thought, [(step.value, name)])
        steps.append(WorkflowStep(reasoning=reasoning, action=step.action, target=step.target, value=value))
    parameters = list(dict.fromkeys(n for n in names if n is not None))
    return Workflow(
        name=workflow_name(first.steps),
        description=goal_template(members, names),
        parameters=parameters,
        steps=steps,
        provenance=Provenance(
            trajectory_ids=[m.trajectory_id for m in members], mode="rule", admission=admission, model=""
        ),
    )


def induce_rule(
    trajectories: Sequence[Trajectory], *, admission: str = ""
) -> tuple[list[Workflow], RuleReport]:
    """Group admitted trajectories by (scope, abstract sequence) and emit one workflow per group.

    Groups keep the order in which their first member appears, and members the input order, so the
    result is deterministic for a given input (the loaders sort by task key).
    """
    report = RuleReport()
    groups: dict[tuple[str, tuple], list[AbstractTrajectory]] = {}
    for trajectory in trajectories:
        abstract = abstract_trajectory(trajectory)
        if not abstract.steps:
            report.skipped_empty.append(trajectory.trajectory_id)
            continue
        groups.setdefault((abstract.scope, abstract.signature), []).append(abstract)
    workflows = []
    for members in groups.values():
        workflow = workflow_from_group(members, admission=admission)
        report.groups[workflow.name] = [m.trajectory_id for m in members]
        workflows.append(workflow)
    return workflows, report
