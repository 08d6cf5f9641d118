"""What a suite run stores: `SuiteRun` (the grounded executor, recovery on or off, one report per task),
`AgentSuiteRun` (the web agent on the same tasks), and where each lives in the results folder."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from awm.grounding.executor import TaskReport
from awm.trajectory import utc_now


class SuiteRun(BaseModel):
    """One pass over the suite: recovery on or off, and each task's report."""

    recovery: bool
    created_at: str = Field(default_factory=utc_now)
    seconds: float = 0.0
    tasks: list[TaskReport] = Field(default_factory=list)

    @property
    def solved(self) -> int:
        return sum(t.success for t in self.tasks)


def run_file(out: Path, recovery: bool) -> Path:
    return Path(out) / ("run_on.json" if recovery else "run_off.json")


def load_run(path: Path) -> SuiteRun | None:
    if not path.is_file():
        return None
    return SuiteRun.model_validate(json.loads(path.read_text()))


AGENT_RUN_JSON = "run_agent.json"


class AgentTaskReport(BaseModel):
    task_id: str
    variant: str
    success: bool
    end: str
    clean_end: bool  # the agent ended the episode itself
    stuck: bool
    wrong_actions: list[str] = Field(default_factory=list)
    steps: int
    actions: list[str] = Field(default_factory=list)
    seconds: float


class AgentSuiteRun(BaseModel):
    agent: str
    created_at: str = Field(default_factory=utc_now)
    seconds: float = 0.0
    tasks: list[AgentTaskReport] = Field(default_factory=list)


def load_agent_run(path: Path) -> AgentSuiteRun | None:
    if not path.is_file():
        return None
    return AgentSuiteRun.model_validate(json.loads(path.read_text()))
