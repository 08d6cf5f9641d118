"""An ablation's plan: the `[[arm]]` entries, the ablation's own keys, the arms ready to run, and where
each arm's run folder goes. Its own module so both ablation drivers (the browser one in
`awm.pipeline.ablation`, the Mind2Web one in `awm.pipeline.mind2web_ablation`) read one plan without
importing each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from awm.config import Settings
from awm.pipeline.config import PipelineConfig


class ArmSpec(BaseModel):
    """One `[[arm]]` entry: a name and the `[pipeline]` fields it overrides."""

    model_config = ConfigDict(extra="allow")

    # The arm's name: its folders are OUT/arms/<name>/rep<N>/ and the report's rows carry it. Letters,
    # digits, `.`, `_` and `-`, unique; `budget-matched` is reserved for the arm budget_matched adds.
    name: str

    def overrides(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class AblationConfig(BaseModel):
    """The ablation's own keys (top level of the TOML file) and its arms."""

    model_config = ConfigDict(extra="ignore")  # [pipeline], [llm]... belong to others

    # Runs of each arm, each in its own folder and memory store (OUT/arms/<arm>/rep<N>/).
    repeats: int = Field(default=1, ge=1)
    # Add the `budget-matched` arm: memory off, with max_steps raised so that it may spend the memory
    # arm's tokens per task (`awm.pipeline.ablation`). Not for Mind2Web.
    budget_matched: bool = False
    # The most the budget-matched arm may multiply the base max_steps by.
    budget_max_scale: float = Field(default=3.0, ge=1.0)
    # The arm whose mean tokens per task the budget-matched arm aims at; unset: the first arm with memory on.
    budget_memory_arm: str | None = None
    # The memory-off arm whose mean tokens per task set the scale; unset: the first arm with memory = "off".
    budget_off_arm: str | None = None
    arm: list[ArmSpec] = Field(min_length=1)


class PlannedArm(BaseModel):
    """An arm ready to run: its validated pipeline config and what it changed."""

    name: str
    config: PipelineConfig
    overrides: dict[str, Any]


class AblationPlan(BaseModel):
    """Everything `run_ablation` needs, checked before anything runs."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    config_path: Path
    config_hash: str
    ablation: AblationConfig
    base: PipelineConfig
    settings: Settings
    arms: list[PlannedArm]


def arm_dir(out: Path, arm: str, repeat: int) -> Path:
    """`OUT/arms/<arm>/rep<N>/`: one run folder (and memory store) per arm and repeat."""
    return Path(out) / "arms" / arm / f"rep{repeat}"
