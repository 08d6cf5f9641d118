"""The memory an episode may read: one scope at one version, chosen by the driver before the episode.

Why a value and not a lookup: the driver (which alone writes memory) resolves the scope and version
once, before the episode starts, and hands the policy this immutable view; the trajectory records the
same object's scope and version. Nothing a worker does can read a newer version half-way through an
episode, and a worker process needs no store at all. The goal of a MiniWoB++ task is known only after
the page loads, so ``topk`` picks the k workflows most similar to the goal from the view, at the first
step, by cosine over the same ``name + description`` text the retrieval index embeds.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from awm.memory.embeddings import Embedder, normalise
from awm.memory.retrieval import workflow_text
from awm.memory.store import WorkflowStore
from awm.memory.workflow import Workflow

ViewMode = Literal["all", "topk"]
WorkflowUse = Literal["text", "executable"]


class MemoryView(BaseModel):
    """A scope's workflows at one version, and how many of them an episode is shown."""

    model_config = ConfigDict(frozen=True)

    scope: str
    version: int | None = None
    workflows: tuple[Workflow, ...] = ()
    mode: ViewMode = "all"
    k: int = Field(default=3, ge=1)
    # ``text``: workflows are shown in the prompt to imitate; ``executable``: each one that the grounded
    # executor can run is also offered as a `run_workflow` action.
    use: WorkflowUse = "text"
    # A prefix scope (``miniwob``) reads every scope below it: each one's version at view time.
    versions: dict[str, int] = Field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.workflows

    def select(self, goal: str, embedder: Embedder | None = None) -> list[Workflow]:
        """The workflows to show for `goal`, most relevant first (``all``: the version's own order)."""
        workflows = list(self.workflows)
        if self.mode == "all" or len(workflows) <= self.k:
            return workflows
        if embedder is None:
            from awm.memory.embeddings import default_embedder

            embedder = default_embedder()
        vectors = normalise(embedder.embed([workflow_text(w.name, w.description) for w in workflows]))
        query = normalise(embedder.embed([goal]))
        scores = (vectors @ query.T).ravel()
        order = sorted(range(len(workflows)), key=lambda i: (-float(scores[i]), i))
        return [workflows[i] for i in order[: self.k]]


def view_at_head(store: WorkflowStore, scope: str, *, mode: ViewMode = "all", k: int = 3) -> MemoryView:
    """The scope's head as a view (an empty view when the scope has no version yet)."""
    head = store.head(scope)
    if head is None:
        return MemoryView(scope=scope, mode=mode, k=k)
    return MemoryView(scope=scope, version=head.version, workflows=tuple(head.workflows), mode=mode, k=k)
