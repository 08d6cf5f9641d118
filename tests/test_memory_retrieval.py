"""Retrieval: all vs top-k with the real MiniLM embedder; most similar first; persisted faiss index."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from awm.memory.embeddings import MiniLMEmbedder
from awm.memory.retrieval import default_index_dir, retrieve, workflow_text
from awm.memory.store import WorkflowStore
from awm.memory.workflow import Workflow

WORKFLOWS = [
    Workflow(name="book_flight", description="Search for a one-way flight between two cities and book it"),
    Workflow(name="log_in", description="Sign in to the website with a user name and a password"),
    Workflow(name="sort_products", description="Sort the product search results by lowest price"),
    Workflow(name="send_email", description="Write an email message and send it to a contact"),
    Workflow(name="reply_forum", description="Post a reply comment under a forum thread"),
]


class CountingEmbedder:
    """The real MiniLM embedder, counting how many texts it was asked to embed."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture
def store(tmp_path: Path):
    with WorkflowStore(tmp_path / "memory.sqlite") as s:
        s.commit("site", WORKFLOWS, parent=None, author="manual")
        yield s


@pytest.mark.parametrize(
    ("goal", "best"),
    [
        ("Fly from Boston to Denver next Monday", "book_flight"),
        ("Log into my account as alice with password hunter2", "log_in"),
        ("Show me the cheapest running shoes first", "sort_products"),
        ("Mail the report to Bob", "send_email"),
    ],
)
def test_topk_returns_the_most_similar_first(store, minilm, goal, best):
    found = retrieve(store, "site", goal, mode="topk", k=3, embedder=minilm)
    assert found.version == 1 and len(found.workflows) == 3
    assert found.workflows[0].name == best
    assert found.scores == sorted(found.scores, reverse=True)
    # The scores are the cosine similarities, and the order is theirs, best first.
    vectors = minilm.embed([workflow_text(w.name, w.description) for w in WORKFLOWS])
    cosine = vectors @ minilm.embed([goal])[0]
    expected = [WORKFLOWS[i].name for i in np.argsort(-cosine)[:3]]
    assert [w.name for w in found.workflows] == expected
    assert found.scores == pytest.approx(sorted(cosine, reverse=True)[:3], abs=1e-4)
    assert all(isinstance(w, Workflow) for w in found.workflows)  # workflows, not index metadata


def test_all_mode_returns_every_workflow_in_order(store):
    found = retrieve(store, "site", "anything", mode="all")
    assert [w.name for w in found.workflows] == [w.name for w in WORKFLOWS] and found.scores == []
    assert retrieve(store, "nowhere", "x").version is None


def test_index_is_persisted_and_rebuilt_when_the_head_moves(store, minilm):
    counting = CountingEmbedder(minilm)
    retrieve(store, "site", "fly somewhere", mode="topk", embedder=counting)
    assert len(counting.texts) == len(WORKFLOWS) + 1  # every workflow, then the goal
    index_dir = default_index_dir(store.path)
    sidecars = list(index_dir.glob("*.json"))
    assert len(sidecars) == 1 and len(list(index_dir.glob("*.faiss"))) == 1
    meta = json.loads(sidecars[0].read_text())
    assert meta["scope"] == "site" and meta["version"] == 1 and meta["embedder"] == "all-MiniLM-L6-v2"
    assert meta["names"] == [w.name for w in WORKFLOWS]

    counting.texts.clear()
    retrieve(store, "site", "fly somewhere", mode="topk", embedder=counting)
    assert len(counting.texts) == 1  # fresh index: only the goal is embedded

    new = Workflow(name="track_order", description="Check the delivery status of an order")
    store.update("site", lambda ws: [*ws[1:], new], author="neural")
    counting.texts.clear()
    found = retrieve(
        store, "site", "Where is my package? check delivery status", mode="topk", k=1, embedder=counting
    )
    assert found.version == 2 and found.workflows[0].name == "track_order"
    assert counting.texts[:-1] == [workflow_text(new.name, new.description)]  # unchanged vectors are reused
    assert json.loads(sidecars[0].read_text())["version"] == 2
    assert all(
        w.name != "book_flight"
        for w in retrieve(store, "site", "fly", mode="topk", k=5, embedder=minilm).workflows
    )


def test_corrupt_index_files_are_rebuilt(store, minilm, tmp_path):
    index_dir = tmp_path / "idx"
    retrieve(store, "site", "x", mode="topk", embedder=minilm, index_dir=index_dir)
    for path in index_dir.iterdir():
        path.write_bytes(b"garbage")
    found = retrieve(
        store, "site", "Sign in with my password", mode="topk", k=1, embedder=minilm, index_dir=index_dir
    )
    assert found.workflows[0].name == "log_in"


def test_k_larger_than_scope_and_empty_scope(store, minilm):
    found = retrieve(store, "site", "x", mode="topk", k=50, embedder=minilm)
    assert len(found.workflows) == len(WORKFLOWS)
    store.commit("empty", [], parent=None, author="manual")
    empty = retrieve(store, "empty", "x", mode="topk", embedder=minilm)
    assert empty.version == 1 and empty.workflows == []


def test_importing_memory_does_not_import_torch():
    code = (
        "import sys, awm.memory.retrieval, awm.memory.commands, awm.memory.store, awm.memory.embeddings;"
        "assert 'torch' not in sys.modules and 'faiss' not in sys.modules, 'heavy import'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
