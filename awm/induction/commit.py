"""The one way memory is written: merge candidate workflows into a scope's head and commit them, once.

Why one function: memory used to be written from three places (the pipeline's commit stage, `awm
induce`, Mind2Web's online loop), each with its own merge, its own way to abort an update and its own
idea of "nothing changed"; one of them committed identical versions. Every writer now goes through
`commit_candidates`, which keeps four promises:

* idempotent by message: a version of the scope committed with exactly this message is the commit
  already done (a crash after the commit, before the caller recorded it), so it is returned and
  nothing is committed twice. Give each commit point its own message (``online after <task key>``);
* merged, not overwritten: candidates are folded into the head with `merge_workflows`, so a duplicate
  strengthens the workflow it duplicates instead of being copied;
* no version when nothing changed: the log shows only commits that changed memory;
* nothing lost to a race: the merge runs inside `WorkflowStore.update` on the head it is about to
  replace, so a writer whose head moved re-merges on the new head (compare-and-swap) and keeps both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from awm.errors import AwmError
from awm.induction.merge import MergeReport, merge_workflows
from awm.memory.store import MemoryVersion, WorkflowDiff, WorkflowStore, diff_workflows
from awm.memory.workflow import Workflow

if TYPE_CHECKING:
    from awm.memory.embeddings import Embedder


@dataclass
class CommitResult:
    """What one commit point did to its scope.

    `version` is the version this commit point made (or made before: `already_committed`), None when
    nothing changed or on a dry run. `changed` says whether the merge changes the head (on a dry run:
    would change). `diff` is the new version against its parent (on a dry run, the preview; for an
    earlier commit, that commit's own diff). `merged` is the scope's workflows after the commit point.
    """

    version: MemoryVersion | None
    already_committed: bool
    changed: bool
    merge: MergeReport = field(default_factory=MergeReport)
    diff: WorkflowDiff | None = None
    merged: list[Workflow] = field(default_factory=list)


def find_commit(store: WorkflowStore, scope: str, message: str) -> MemoryVersion | None:
    """The latest version of `scope` committed with exactly `message`, if any (the idempotency key)."""
    for info in reversed(store.log(scope)):
        if info.message == message:
            return store.get(scope, info.version)
    return None


def version_diff(store: WorkflowStore, version: MemoryVersion) -> WorkflowDiff:
    """A version against its parent (a scope's first version against nothing)."""
    if version.parent is None:
        return diff_workflows(version.scope, 0, version.version, [], version.workflows)
    return store.diff(version.scope, version.parent, version.version)


def committed_before(store: WorkflowStore, scope: str, message: str) -> CommitResult | None:
    """The result of a commit point that was committed before (found by its message), else None.

    Drivers ask this before inducing, so a resumed commit point spends no model call.
    """
    version = find_commit(store, scope, message)
    return None if version is None else _earlier(store, version)


def _earlier(store: WorkflowStore, version: MemoryVersion) -> CommitResult:
    return CommitResult(
        version=version,
        already_committed=True,
        changed=False,
        diff=version_diff(store, version),
        merged=list(version.workflows),
    )


class _Stop(Exception):
    """Aborts a store update from inside its change function: nothing to commit, or already committed."""

    def __init__(self, result: CommitResult) -> None:
        super().__init__("commit aborted")
        self.result = result


def commit_candidates(
    store: WorkflowStore,
    scope: str,
    candidates: Sequence[Workflow],
    *,
    author: str,
    message: str,
    provenance: dict[str, Any] | None = None,
    embedder: Embedder | None = None,
    threshold: float = 0.9,
    dry_run: bool = False,
) -> CommitResult:
    """Merge `candidates` into the scope's head and commit a version, unless it is done or changes nothing.

    `author` names the writer (``rule``, ``neural``, ``online-rule``...), `message` the commit point
    (the idempotency key; it must not be empty). `embedder` and `threshold` make descriptions closer
    than the cosine threshold duplicates too (see `merge_workflows`). ``dry_run`` merges with the
    head and returns the diff it would commit, committing nothing.
    """
    if not message.strip():
        raise AwmError(
            "a memory commit needs a message that names its commit point (it makes commits idempotent)"
        )
    done = committed_before(store, scope, message)
    if done is not None:
        return done

    if dry_run:
        head = store.head(scope)
        base = [] if head is None else head.workflows
        merged, report = merge_workflows(base, candidates, embedder=embedder, threshold=threshold)
        if not report.changed:
            return CommitResult(None, already_committed=False, changed=False, merge=report, merged=list(base))
        log = store.log(scope)
        a = 0 if head is None else head.version
        b = 1 if not log else log[-1].version + 1
        diff = diff_workflows(scope, a, b, base, merged)
        return CommitResult(
            None, already_committed=False, changed=True, merge=report, diff=diff, merged=merged
        )

    seen: dict[str, Any] = {"calls": 0}

    def change(current: list[Workflow]) -> list[Workflow]:
        seen["calls"] += 1
        if seen["calls"] > 1:  # the head moved under us: maybe to this very commit point, by another writer
            again = committed_before(store, scope, message)
            if again is not None:
                raise _Stop(again)
        merged, report = merge_workflows(current, candidates, embedder=embedder, threshold=threshold)
        if not report.changed:
            raise _Stop(
                CommitResult(None, already_committed=False, changed=False, merge=report, merged=list(current))
            )
        seen["base"], seen["report"] = current, report
        return merged

    try:
        version = store.update(scope, change, author=author, message=message, provenance=provenance)
    except _Stop as stop:
        return stop.result
    parent = 0 if version.parent is None else version.parent
    diff = diff_workflows(scope, parent, version.version, seen["base"], version.workflows)
    return CommitResult(
        version=version,
        already_committed=False,
        changed=True,
        merge=seen["report"],
        diff=diff,
        merged=list(version.workflows),
    )
