"""Merging candidates into memory: a duplicate strengthens the existing workflow instead of copying it.

Why: memory that grows by one near-copy per episode crowds the prompt and the retriever with the
same routine. A candidate duplicates an existing workflow when its abstract steps are equal
(`Workflow.abstract_signature`, no values, no ids) or, with an embedder, when its description is
closer than a cosine threshold; then the existing workflow's provenance gains the candidate's
trajectory ids and nothing else changes. A candidate that calls another candidate
(`awm.memory.composition`) then calls it by the name it has in the result. Pure: the inputs are not
modified.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, Field

from awm.memory.workflow import Workflow

if TYPE_CHECKING:
    from awm.memory.embeddings import Embedder


class Duplicate(BaseModel):
    """One candidate folded into an existing workflow."""

    candidate: str
    existing: str
    reason: str  # "same steps" or "description cosine 0.93"
    new_trajectory_ids: list[str] = Field(default_factory=list)


class MergeReport(BaseModel):
    """What a merge did: names added, names whose provenance grew, and each duplicate found."""

    added: list[str] = Field(default_factory=list)
    updated: list[str] = Field(default_factory=list)
    duplicates: list[Duplicate] = Field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated)


def _description_text(workflow: Workflow) -> str:
    return workflow.description.strip() or workflow.name


def _unique_name(name: str, taken: set[str]) -> str:
    """Names stay unique within a scope: a clash gets " (2)", " (3)"..."""
    if name not in taken:
        return name
    n = 2
    while f"{name} ({n})" in taken:
        n += 1
    return f"{name} ({n})"


def merge_workflows(
    existing: Sequence[Workflow],
    candidates: Sequence[Workflow],
    *,
    embedder: Embedder | None = None,
    threshold: float = 0.9,
) -> tuple[list[Workflow], MergeReport]:
    """Fold candidates into `existing` (in order); candidates are also deduplicated among themselves.

    Returns the new list (existing workflows first, in their order, then the added ones) and a report.
    """
    merged = [w.model_copy(deep=True) for w in existing]
    report = MergeReport()
    signatures: dict[tuple, int] = {}
    for i, workflow in enumerate(merged):
        if workflow.steps:
            signatures.setdefault(workflow.abstract_signature(), i)
    names = {w.name for w in merged}
    renamed: dict[str, str] = {}  # candidate name -> the name it has in the result, where they differ
    vectors: np.ndarray | None = None
    candidate_vectors: np.ndarray | None = None
    if embedder is not None and candidates:
        texts = [_description_text(w) for w in merged] + [_description_text(w) for w in candidates]
        all_vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
        vectors, candidate_vectors = all_vectors[: len(merged)], all_vectors[len(merged) :]

    for c, candidate in enumerate(candidates):
        index, reason = None, ""
        signature = candidate.abstract_signature()
        if candidate.steps and signature in signatures:
            index, reason = signatures[signature], "same steps"
        elif candidate_vectors is not None and vectors is not None and len(vectors):
            similarities = vectors @ candidate_vectors[c]
            best = int(np.argmax(similarities))
            if float(similarities[best]) >= threshold:
                index, reason = best, f"description cosine {float(similarities[best]):.2f}"
        if index is not None:
            target = merged[index]
            known = set(target.provenance.trajectory_ids)
            new_ids = [t for t in candidate.provenance.trajectory_ids if t not in known]
            if new_ids:
                provenance = target.provenance.model_copy(
                    update={"trajectory_ids": [*target.provenance.trajectory_ids, *new_ids]}
                )
                merged[index] = target.model_copy(update={"provenance": provenance})
                if target.name not in report.updated and target.name not in report.added:
                    report.updated.append(target.name)
            if target.name != candidate.name:
                renamed[candidate.name] = target.name
            report.duplicates.append(
                Duplicate(
                    candidate=candidate.name, existing=target.name, reason=reason, new_trajectory_ids=new_ids
                )
            )
            continue
        name = _unique_name(candidate.name, names)
        names.add(name)
        added = candidate.model_copy(deep=True, update={"name": name})
        merged.append(added)
        if added.steps:
            signatures.setdefault(signature, len(merged) - 1)
        if vectors is not None and candidate_vectors is not None:
            vectors = (
                np.vstack([vectors, candidate_vectors[c : c + 1]])
                if len(vectors)
                else candidate_vectors[c : c + 1]
            )
        report.added.append(name)
        if name != candidate.name:
            renamed[candidate.name] = name
    return _calls_renamed(merged, renamed, report.added), report


def _calls_renamed(workflows: list[Workflow], renamed: dict[str, str], added: Sequence[str]) -> list[Workflow]:
    """The added workflows' calls (`awm.memory.composition`) pointed at where their callees went: a
    callee folded into an existing workflow is called by that one's name, a renamed one by its new name."""
    if not renamed:
        return workflows
    out = []
    for workflow in workflows:
        if workflow.name in added and any(s.is_call and s.value in renamed for s in workflow.steps):
            steps = [
                s.model_copy(update={"value": renamed[s.value]}) if s.is_call and s.value in renamed else s
                for s in workflow.steps
            ]
            workflow = workflow.model_copy(update={"steps": steps})
        out.append(workflow)
    return out
