"""The workflow model: a reusable, parameterised routine induced from good trajectories."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from awm.trajectory import TargetDesc, utc_now

InductionMode = Literal["neural", "rule", "import", "manual"]

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_-]*)\}")


class WorkflowStep(BaseModel):
    """One step: why, what action, on which kind of element, with which (templated) value.

    `action` is an action name from the closed action set (``click``, ``fill``, ``select_option``,
    ``press``, ``send_msg_to_user``... or Mind2Web's ``CLICK``/``TYPE``/``SELECT``). `value` may hold
    ``{placeholders}``. The target is a role plus label, never a raw element id.
    """

    reasoning: str = ""
    action: str
    target: TargetDesc = Field(default_factory=TargetDesc)
    value: str = ""

    def placeholders(self) -> list[str]:
        return PLACEHOLDER.findall(self.value) + PLACEHOLDER.findall(self.target.label)


class Provenance(BaseModel):
    """Where a workflow came from."""

    trajectory_ids: list[str] = Field(default_factory=list)
    model: str = ""
    prompt_hash: str = ""
    mode: InductionMode = "manual"
    admission: str = ""
    created_at: str = Field(default_factory=utc_now)


class Workflow(BaseModel):
    """A named routine with a description of when it applies."""

    name: str
    description: str = ""
    parameters: list[str] = Field(default_factory=list)
    steps: list[WorkflowStep] = Field(default_factory=list)
    provenance: Provenance = Field(default_factory=Provenance)

    def abstract_signature(self) -> tuple[tuple[str, str, str], ...]:
        """The steps without values or ids: used to detect duplicates."""
        return tuple((s.action.lower(), s.target.role.lower(), s.target.label.lower()) for s in self.steps)


def bind_parameters(workflow: Workflow, goal: str) -> dict[str, str]:
    """Values for the workflow's placeholders read off a goal that matches its description template.

    A rule-induced description is the teaching task's goal with its values replaced by placeholders
    (``Enter the username "{username}" ...``); matching it against a new goal recovers this task's
    values. Returns {} when the template has no placeholder or does not match (then the prompt keeps
    the placeholders and the model must fill them in).
    """
    names = PLACEHOLDER.findall(workflow.description)
    if not names:
        return {}
    parts = PLACEHOLDER.split(workflow.description)  # literal, name, literal, name, ..., literal
    pattern = ""
    for i, part in enumerate(parts):
        if i % 2:
            pattern += "(.+?)"
        else:
            pattern += (
                r"\s+".join(re.escape(word) for word in part.split(" ")) if part.strip() else re.escape(part)
            )
    match = re.fullmatch(pattern, " ".join(goal.split()), flags=re.DOTALL)
    if match is None:
        return {}
    values: dict[str, str] = {}
    for name, value in zip(names, match.groups(), strict=True):
        if values.setdefault(name, value) != value:
            return {}  # one placeholder, two different values: not this template
    return values


def instantiate(workflow: Workflow, values: dict[str, str]) -> Workflow:
    """The workflow with known placeholder values filled in (unknown placeholders stay as they are)."""
    if not values:
        return workflow

    def fill(text: str) -> str:
        return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)

    steps = [
        step.model_copy(
            update={
                "value": fill(step.value),
                "reasoning": fill(step.reasoning),
                "target": step.target.model_copy(update={"label": fill(step.target.label)}),
            }
        )
        for step in workflow.steps
    ]
    remaining = [p for p in workflow.parameters if p not in values]
    return workflow.model_copy(
        update={"description": fill(workflow.description), "steps": steps, "parameters": remaining}
    )
