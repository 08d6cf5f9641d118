"""Merging: duplicates update provenance instead of adding copies."""

from __future__ import annotations

import numpy as np

from awm.induction.merge import merge_workflows
from awm.memory.workflow import Provenance, Workflow, WorkflowStep
from awm.trajectory import TargetDesc


def _flow(name: str, labels: list[str], ids: list[str], description: str = "") -> Workflow:
    return Workflow(
        name=name,
        description=description,
        steps=[
            WorkflowStep(action="click", target=TargetDesc(role="button", label=label)) for label in labels
        ],
        provenance=Provenance(trajectory_ids=ids, mode="rule"),
    )


def test_same_steps_update_provenance_instead_of_duplicating():
    existing = [_flow("login", ["Login"], ["t1"])]
    candidate = _flow("log in again", ["login"], ["t1", "t2"])
    merged, report = merge_workflows(existing, [candidate])
    assert len(merged) == 1
    assert merged[0].name == "login"
    assert merged[0].provenance.trajectory_ids == ["t1", "t2"]
    assert report.updated == ["login"] and report.added == []
    assert report.duplicates[0].reason == "same steps" and report.duplicates[0].new_trajectory_ids == ["t2"]
    assert existing[0].provenance.trajectory_ids == ["t1"]  # inputs untouched


def test_nothing_new_means_no_change():
    existing = [_flow("login", ["Login"], ["t1"])]
    merged, report = merge_workflows(existing, [_flow("x", ["Login"], ["t1"])])
    assert not report.changed and merged == existing


def test_new_steps_are_added_and_candidates_deduplicate_among_themselves():
    merged, report = merge_workflows(
        [_flow("a", ["A"], ["t1"])],
        [_flow("b", ["B"], ["t2"]), _flow("b", ["B"], ["t3"]), _flow("a", ["C"], ["t4"])],
    )
    assert [w.name for w in merged] == ["a", "b", "a (2)"]
    assert merged[1].provenance.trajectory_ids == ["t2", "t3"]
    assert report.added == ["b", "a (2)"] and report.updated == []


class _BagOfWordsEmbedder:
    """A deterministic, real (if crude) embedder: normalised bag-of-words vectors."""

    def embed(self, texts: list[str]) -> np.ndarray:
        vocab = sorted({w for t in texts for w in t.lower().split()})
        out = np.zeros((len(texts), len(vocab)), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, vocab.index(word)] += 1
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def test_description_similarity_merges_when_an_embedder_is_given():
    existing = [_flow("login", ["Login"], ["t1"], "log in with username and password")]
    candidate = _flow("sign in", ["Sign in"], ["t2"], "log in with the username and password")
    unrelated = _flow("search", ["Go"], ["t3"], "search the catalogue for a product")
    merged, report = merge_workflows(
        existing, [candidate, unrelated], embedder=_BagOfWordsEmbedder(), threshold=0.8
    )
    assert [w.name for w in merged] == ["login", "search"]
    assert merged[0].provenance.trajectory_ids == ["t1", "t2"]
    assert report.duplicates[0].reason.startswith("description cosine")
    merged_plain, _ = merge_workflows(existing, [candidate])
    assert len(merged_plain) == 2
