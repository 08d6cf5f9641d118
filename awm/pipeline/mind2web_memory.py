"""Mind2Web's memory loop, the driver's side: induce each website's scope and commit through the one path.

Why in the pipeline and not in `awm.mind2web`: only the driver writes memory; the consumer reads the
head a task sees (`awm.mind2web.memory.memory_for`). Scopes are ``mind2web/<website>``. Two modes, as
in AWM:

* offline: before testing, each test website's scope is induced from TRAIN tasks as gold trajectories
  (`train_trajectory`, reward 1 since they are annotated), admitted under rule ``gt``; a website with no
  train task takes those of its subdomain, else its domain (`train_source`), and the note says which.
* online: there is no ground truth at test time, so, as AWM does, every trajectory the agent produced is
  admitted (rule ``all``: no verdict is invented). After each test task, the website's finished
  trajectories (joined by annotation id, in run order) are induced and committed as one new version
  (message ``online after task <annotation_id> (run <run folder>)``) when they change memory; when
  they change nothing, no version is made. Either way the version a task saw is the scope's head
  when it started, recorded in its trajectory (``memory_version``).

Both go through `induce_into_store` and so through `commit_candidates`: a commit point found by its
message (a run resumed after a crash between commit and record) is returned, not induced again.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from awm.induction.neural import InductionError
from awm.induction.offline import induce_into_store
from awm.llm.base import LLMClient
from awm.memory.store import WorkflowStore
from awm.mind2web.memory import train_source, train_trajectory
from awm.mind2web.schema import TaskRecord
from awm.tokens import TokenCounter
from awm.trajectory import Trajectory


class InductionNote(BaseModel):
    """What one induction did to one scope."""

    scope: str
    source: str = ""
    trajectories: int = 0
    version: int | None = None  # the head after it
    changed: bool = False  # this commit point made a version (now, or before a resume)
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
    message: str | None = None,
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
            message=message,
        )
    except InductionError as exc:
        note.error = str(exc)
    else:
        note.changed = result.commit.version is not None
        note.llm_calls = result.report.llm_calls
    note.version = store.head_version(scope)
    return note


def induce_from_train(
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
        source, records = train_source(website, test_records, train_records)
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


def online_message(annotation_id: str, run: str) -> str:
    """The commit point after one test task of one run: its message makes the commit happen at most once.

    The run is named because runs may share a memory database (``--db``): another run's commit
    after the same task is not this one's.
    """
    return f"online after task {annotation_id} (run {run})"


def induce_online(
    store: WorkflowStore,
    scope: str,
    trajectories: Sequence[Trajectory],
    *,
    after_task: str,
    run: str,
    mode: str,
    client: LLMClient | None,
    counter: TokenCounter | None = None,
    budget_tokens: int = 3000,
) -> InductionNote:
    """Induce from the agent's own trajectories of one website; at most one new version, none if unchanged."""
    return _induce(
        store,
        scope,
        trajectories,
        mode=mode,
        admission="all",
        client=client,
        counter=counter,
        budget_tokens=budget_tokens,
        message=online_message(after_task, run),
    )
