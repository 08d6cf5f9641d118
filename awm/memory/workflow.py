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
