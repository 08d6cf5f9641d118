"""Workflow memory for Mind2Web: offline induction from annotated train tasks, online from the agent's own.

Scopes are ``mind2web/<website>``. Two modes, as in AWM:

* offline: before testing, the TRAIN split's tasks become trajectories with the gold actions (targets
  from Mind2Web's own ``action_reprs``, i.e. the positive candidate as the annotators' tool described it)
  and reward 1, since they are annotated; they are admitted under rule ``gt`` and induced per website.
  A test website with no train task (test_website, test_domain) takes the train tasks of its subdomain,
  else its domain, and the summary says which source each scope used.
* online: there is no ground truth at test time, so, as AWM does, every trajectory the agent produced is
  admitted (rule ``all``: no verdict is invented). After each test task, the website's
  finished trajectories (joined by annotation id, in run order) are induced and ONE new version is committed
  -- an identical one when the induction changed nothing -- so the version a task saw is always the version
  committed after the task before it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import BaseModel

from awm.induction.neural import InductionError
from awm.induction.offline import induce_into_store
from awm.llm.base import LLMClient
from awm.memory.store import WorkflowStore
from awm.mind2web.schema import TaskRecord
from awm.mind2web.solve import MemoryContext, role_of, scope_of, target_of
from awm.tokens import TokenCounter
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


def memory_source(
    website: str, test_records: Sequence[TaskRecord], train: Sequence[TaskRecord]
) -> tuple[str, list[TaskRecord]]:
    """Which train tasks teach a website's scope: its own, else its subdomain's, else its domain's."""
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


class InductionNote(BaseModel):
    """What one induction did to one scope."""

    scope: str
    source: str = ""
    trajectories: int = 0
    version: int | None = None  # the head after it
    changed: bool = False
    error: str = ""
    llm_calls: int = 0


def _induce(
    store: WorkflowStore,
    scope: str,
    trajectories: Sequence[Trajectory],
    *,
    mode: str,
    admission: str,
    client: LLMClient | None,
    counter: TokenCounter | None,
    budget_tokens: int,
) -> InductionNote:
    note = InductionNote(scope=scope, trajectories=len(trajectories))
    try:
        result = induce_into_store(
            store,
            scope,
            [t.model_copy(update={"task": t.task.model_copy(update={"scope": scope})}) for t in trajectories],
            mode=mode,
            admission=admission,
            client=client,
            counter=counter,
            budget_tokens=budget_tokens,
            auto=admission == "manual",
        )
    except InductionError as exc:
        note.error = str(exc)
    else:
        note.changed = result.new_version is not None
        note.llm_calls = result.report.llm_calls
    note.version = store.head_version(scope)
    return note


def induce_offline(
    store: WorkflowStore,
    websites: Sequence[str],
    test_records: Sequence[TaskRecord],
    train_records: Sequence[TaskRecord],
    *,
    mode: str,
    client: LLMClient | None,
    counter: TokenCounter | None = None,
    budget_tokens: int = 3000,
) -> list[InductionNote]:
    """Induce each website's scope from train tasks (admission ``gt``); one note per website."""
    notes = []
    for website in websites:
        source, records = memory_source(website, test_records, train_records)
        scope = f"mind2web/{website}"
        if not records:
            notes.append(InductionNote(scope=scope, source=source, error="no train task to induce from"))
            continue
        note = _induce(
            store,
            scope,
            [train_trajectory(r) for r in records],
            mode=mode,
            admission="gt",
            client=client,
            counter=counter,
            budget_tokens=budget_tokens,
        )
        note.source = source
        notes.append(note)
    return notes


def induce_online(
    store: WorkflowStore,
    scope: str,
    trajectories: Sequence[Trajectory],
    *,
    after_task: str,
    mode: str,
    client: LLMClient | None,
    counter: TokenCounter | None = None,
    budget_tokens: int = 3000,
) -> InductionNote:
    """Induce from the agent's own trajectories of one website and commit exactly one new version."""
    note = _induce(
        store,
        scope,
        trajectories,
        mode=mode,
        admission="all",
        client=client,
        counter=counter,
        budget_tokens=budget_tokens,
    )
    if not note.changed:
        head = store.head(scope)
        reason = note.error or "induction changed nothing"
        version = store.commit(
            scope,
            [] if head is None else head.workflows,
            parent=None if head is None else head.version,
            author="online",
            message=f"online after task {after_task}: unchanged ({reason[:200]})",
            trust_unchanged=True,
        )
        note.version = version.version
    return note


def memory_for(store: WorkflowStore, record: TaskRecord) -> MemoryContext:
    """Every workflow of the task's website scope at its head (AWM shows a website's whole memory)."""
    scope = scope_of(record)
    head = store.head(scope)
    if head is None:
        return MemoryContext(scope=scope)
    return MemoryContext(scope=scope, version=head.version, workflows=list(head.workflows))
