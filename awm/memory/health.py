"""Memory that notices it broke: each workflow's calls, completions and breaks, and retirement of the
ones that keep breaking.

Why: a workflow is admitted because its replay succeeded once, on the page it came from. Later pages
differ (another item list, a renamed button), and a workflow that no longer fits costs the episode that
calls it a step and the model's trust. The model goes on from the page when a call breaks (the
harness does that); the memory records the break here, per workflow, so a researcher sees which
workflows hold, and a workflow whose breaks outnumber its completions over its last calls leaves the
head in a new version (author ``retire``; the version before it still holds it: nothing is deleted).

A break is a call that stopped before its last step (`WorkflowCall.completed` false); a call that ran
to the end counts as a completion even when the episode failed later (the workflow did what it says).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from awm.memory.store import MemoryVersion, WorkflowStore, WorkflowUse
from awm.trajectory import Trajectory

RETIRE_WINDOW = 4  # the calls a workflow is judged on: its last few, so an old success does not shield it
RETIRE_MIN_CALLS = 2  # one break alone is not a pattern (a slow page, a one-off dialog)


class WorkflowHealth(BaseModel):
    """One workflow's record over every call kept for its scope."""

    name: str
    calls: int = 0
    completions: int = 0
    breaks: int = 0
    last_break: str = ""  # the broken step and why, from the most recent break
    recent: list[bool] = []  # completed? for each of its last calls (the window `health` was given), oldest first

    @property
    def recent_breaks(self) -> int:
        return sum(not done for done in self.recent)

    def keeps_breaking(self) -> bool:
        """Breaks outnumber completions over its recent calls (at least `RETIRE_MIN_CALLS` of them)."""
        return len(self.recent) >= RETIRE_MIN_CALLS and self.recent_breaks > len(self.recent) - self.recent_breaks


def uses_of(trajectory: Trajectory) -> list[WorkflowUse]:
    """The episode's `run_workflow` calls as the memory keeps them."""
    return [
        WorkflowUse(
            trajectory_id=trajectory.trajectory_id, call=i, name=c.name, completed=c.completed,
            steps_run=c.steps_run, steps_total=c.steps_total, error=c.error,
        )  # fmt: skip
        for i, c in enumerate(trajectory.workflow_calls)
    ]


def health(uses: Sequence[WorkflowUse], window: int = RETIRE_WINDOW) -> dict[str, WorkflowHealth]:
    """Each called workflow's record, by name, from a scope's kept calls (in the order they were kept)."""
    out: dict[str, WorkflowHealth] = {}
    for use in uses:
        entry = out.setdefault(use.name, WorkflowHealth(name=use.name))
        entry.calls += 1
        if use.completed:
            entry.completions += 1
        else:
            entry.breaks += 1
            entry.last_break = use.error or f"stopped after {use.steps_run} of {use.steps_total} steps"
        entry.recent = [*entry.recent, use.completed][-window:]
    return out


def retire_broken(
    store: WorkflowStore, scope: str, *, window: int = RETIRE_WINDOW, provenance: dict | None = None
) -> tuple[MemoryVersion | None, list[str]]:
    """Commit a version of `scope` without the workflows that keep breaking (see `keeps_breaking`);
    (None, []) when none of the head's workflows does. Safe to repeat: a retired workflow is no longer
    in the head, so a resumed run commits nothing twice."""
    head = store.head_info(scope)  # names only: no workflow body is parsed unless one is retired
    if head is None:
        return None, []
    records = health(store.uses(scope), window)
    broken = [name for name in head.names if name in records and records[name].keeps_breaking()]
    if not broken:
        return None, []
    reasons = "; ".join(
        f"{name}: {records[name].recent_breaks} of its last {len(records[name].recent)} calls broke"
        f" (last: {records[name].last_break[:160]})"
        for name in broken
    )
    version = store.update(
        scope,
        lambda workflows: [w for w in workflows if w.name not in broken],
        author="retire",
        message=f"retired {reasons}",
        provenance={"retired": broken, "window": window, **(provenance or {})},
        trust_unchanged=True,
    )
    return version, broken
