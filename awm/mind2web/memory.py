"""Mind2Web's side of workflow memory: read the head a task sees, and turn train tasks into trajectories.

Scopes are ``mind2web/<website>``. Why only the read side here: a consumer solves tasks; the driver
(`awm.pipeline.mind2web_memory`) induces and commits. What both need and is pure lives here:

* `train_trajectory`: a TRAIN task as a trajectory of gold actions (targets from Mind2Web's own
  ``action_reprs``, i.e. the positive candidate as the annotators' tool described it) with reward 1,
  since it is annotated;
* `train_source`: which train tasks teach a test website: its own, else (test_website, test_domain)
  those of its subdomain, else its domain;
* `memory_for`: the workflows a task sees, the scope's head when it starts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from awm.memory.store import WorkflowStore
from awm.memory.view import MemoryView, view_at_head
from awm.mind2web.schema import TaskRecord
from awm.mind2web.solve import role_of, scope_of, target_of
from awm.trajectory import Step, TargetDesc, Task, Trajectory, Verdict

_REPR = re.compile(
    r"^\s*\[(?P<role>[^\]]*)\]\s*(?P<label>.*?)\s*->\s*(?P<op>[A-Za-z]+)(?::\s*(?P<value>.*))?$"
)


def target_from_repr(action_repr: str) -> TargetDesc | None:
    """``[button]  Search -> CLICK`` -> role ``button``, label ``Search`` (None if it does not match)."""
    m = _REPR.match(action_repr)
    if m is None:
        return None
    return TargetDesc(role=m["role"].strip(), label=" ".join(m["label"].split()))


def train_trajectory(record: TaskRecord) -> Trajectory:
    """A train task as a successful trajectory of gold actions (for offline induction)."""
    steps = []
    for i, (action, shown) in enumerate(zip(record.actions, record.action_reprs, strict=True)):
        op, value = action.operation.op, action.operation.value
        target = target_from_repr(shown)
        if target is None and action.pos_candidates:
            target = target_of(action.pos_candidates[0])
        if target is not None and not target.role and action.pos_candidates:
            target = TargetDesc(role=role_of(action.pos_candidates[0]), label=target.label)
        args: dict[str, str] = {"id": action.target_id or ""}
        if op != "CLICK":
            args["value"] = value
        steps.append(
            Step(index=i, action={"name": op, "args": args}, action_str=shown, target=target, outcome="ok")
        )
    return Trajectory(
        trajectory_id=f"mind2web-train-{record.annotation_id}",
        task=Task(
            task_id=record.annotation_id,
            goal=record.confirmed_task,
            scope=scope_of(record),
            benchmark="mind2web",
        ),
        steps=steps,
        end="done",
        verdict=Verdict(reward=1.0, judge_reason="annotated train task (gold actions)"),
        model="gold",
    )


def train_source(
    website: str, test_records: Sequence[TaskRecord], train: Sequence[TaskRecord]
) -> tuple[str, list[TaskRecord]]:
    """Which train tasks teach a website's scope, and a label saying which: its own (``website:<w>``),
    else its subdomain's, else its domain's (``none`` and no task when there is nothing to learn from)."""
    own = [r for r in train if r.website == website]
    if own:
        return f"website:{website}", own
    sample = next((r for r in test_records if r.website == website), None)
    if sample is not None:
        if sample.subdomain:
            same = [r for r in train if r.subdomain == sample.subdomain]
            if same:
                return f"subdomain:{sample.subdomain}", same
        same = [r for r in train if r.domain == sample.domain]
        if same:
            return f"domain:{sample.domain}", same
    return "none", []


def memory_for(store: WorkflowStore, record: TaskRecord) -> MemoryView:
    """Every workflow of the task's website scope at its head (AWM shows a website's whole memory)."""
    return view_at_head(store, scope_of(record))
