"""Retrieval: all vs top-k with the real MiniLM embedder; most similar first; persisted faiss index;
a Retriever that keeps the index and goal vectors while the head does not move."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from awm.errors import AwmError
from awm.memory.embeddings import MiniLMEmbedder
from awm.memory.retrieval import Retriever, default_index_dir, retrieve, workflow_text
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


# --- the Retriever: one per run, holds indexes and goal vectors between lookups ----------------------


def _mtimes(index_dir: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in index_dir.iterdir()}


def test_retriever_keeps_the_index_until_the_head_moves(tmp_path, minilm):
    db = tmp_path / "memory.sqlite"
    with WorkflowStore(db) as s:
        s.commit("site", WORKFLOWS, parent=None, author="manual")
    counting = CountingEmbedder(minilm)
    retriever = Retriever(counting)
    index_dir = default_index_dir(db)
    with WorkflowStore(db) as s:  # the runner opens a store per lookup: the retriever must not care
        first = retriever.retrieve(s, "site", "Fly from Boston to Denver", mode="topk", k=2)
    assert first.workflows[0].name == "book_flight"
    assert (retriever.stats.index_builds, retriever.stats.index_loads) == (1, 0)
    assert len(counting.texts) == len(WORKFLOWS) + 1
    written = _mtimes(index_dir)

    for goal in ["Mail the report to Bob", "Mail the report to Bob", "Sign in with my password"]:
        with WorkflowStore(db) as s:
            found = retriever.retrieve(s, "site", goal, mode="topk", k=1)
        assert found.version == 1
    assert found.workflows[0].name == "log_in"
    assert (retriever.stats.index_builds, retriever.stats.index_loads) == (1, 0)  # no rebuild, no re-read
    assert counting.texts[len(WORKFLOWS) + 1 :] == ["Mail the report to Bob", "Sign in with my password"]
    assert (retriever.stats.goal_embeds, retriever.stats.goal_cache_hits) == (3, 1)
    assert _mtimes(index_dir) == written

    new = Workflow(name="track_order", description="Check the delivery status of an order")
    with WorkflowStore(db) as s:
        s.update("site", lambda ws: [*ws[1:], new], author="neural")
    for path in index_dir.iterdir():  # the vectors must come from memory, not from these files
        path.unlink()
    counting.texts.clear()
    with WorkflowStore(db) as s:
        moved = retriever.retrieve(s, "site", "Where is my package? check delivery status", mode="topk", k=5)
    assert moved.version == 2 and moved.workflows[0].name == "track_order"
    assert "book_flight" not in [w.name for w in moved.workflows]
    assert counting.texts == [
        workflow_text(new.name, new.description),
        "Where is my package? check delivery status",
    ]
    assert retriever.stats.index_builds == 2
    sidecar = json.loads(next(index_dir.glob("*.json")).read_text())
    assert sidecar["version"] == 2 and sidecar["names"] == [w.name for w in [*WORKFLOWS[1:], new]]


def test_a_new_retriever_reads_the_persisted_index(store, minilm):
    Retriever(minilm).retrieve(store, "site", "x", mode="topk")
    counting = CountingEmbedder(minilm)
    later = Retriever(counting)
    found = later.retrieve(store, "site", "Show me the cheapest shoes first", mode="topk", k=1)
    assert found.workflows[0].name == "sort_products"
    assert (later.stats.index_loads, later.stats.index_builds) == (1, 0)
    assert counting.texts == ["Show me the cheapest shoes first"]


def test_retriever_tells_databases_apart(tmp_path, minilm):
    """Same scope, same version number, other database: never the other one's index."""
    retriever = Retriever(minilm, index_dir=tmp_path / "shared-index")
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with WorkflowStore(a) as s:
        s.commit("site", WORKFLOWS[:2], parent=None, author="manual")
    with WorkflowStore(b) as s:
        s.commit("site", WORKFLOWS[2:], parent=None, author="manual")
    for path, names in ((a, {"book_flight", "log_in"}), (b, {"sort_products", "send_email", "reply_forum"})):
        with WorkflowStore(path) as s:
            found = retriever.retrieve(s, "site", "anything", mode="topk", k=5)
            assert {w.name for w in found.workflows} == names
            assert {w.name for w in retriever.retrieve(s, "site", "", mode="all").workflows} == names
    # A database deleted and created again at the same path is another database, too.
    a.unlink()
    with WorkflowStore(a) as s:
        s.commit("site", WORKFLOWS[4:], parent=None, author="manual")
        found = retriever.retrieve(s, "site", "anything", mode="topk", k=5)
        assert [w.name for w in found.workflows] == ["reply_forum"]
        assert [w.name for w in retriever.retrieve(s, "site", "", mode="all").workflows] == ["reply_forum"]


def test_retriever_all_mode_is_held_per_head(store, minilm):
    retriever = Retriever(minilm)
    first = retriever.retrieve(store, "site", "a", mode="all")
    first.workflows.pop()  # a caller changing its list must not change the next answer
    again = retriever.retrieve(store, "site", "b", mode="all")
    assert [w.name for w in again.workflows] == [w.name for w in WORKFLOWS]
    assert retriever.stats.all_loads == 1
    store.update("site", lambda ws: ws[:2], author="manual")
    assert [w.name for w in retriever.retrieve(store, "site", "c", mode="all").workflows] == [
        "book_flight",
        "log_in",
    ]
    assert retriever.stats.all_loads == 2
    assert retriever.retrieve(store, "nowhere", "x", mode="all").version is None
    assert retriever.retrieve(store, "nowhere", "x", mode="topk").version is None


def test_goal_cache_is_bounded(store, minilm):
    counting = CountingEmbedder(minilm)
    retriever = Retriever(counting, goal_cache_size=2)
    retriever.retrieve(store, "site", "warm", mode="topk")
    counting.texts.clear()
    for goal in ["one", "two", "one", "three", "one", "two"]:
        retriever.embed_goal(goal)
    assert counting.texts == ["one", "two", "three", "two"]  # "two" fell out when "three" came in
    assert np.allclose(retriever.embed_goal("one"), minilm.embed(["one"]), atol=1e-5)


def test_retrieve_with_a_retriever_and_a_different_embedder_is_an_error(store, minilm):
    retriever = Retriever(minilm)
    assert retrieve(store, "site", "Mail it to Bob", mode="topk", k=1, retriever=retriever).workflows
    with pytest.raises(AwmError, match="embedder"):
        retrieve(store, "site", "x", mode="topk", embedder=CountingEmbedder(minilm), retriever=retriever)
    with pytest.raises(AwmError, match="unknown retrieval mode"):
        retriever.retrieve(store, "site", "x", mode="best")  # type: ignore[arg-type]
    with pytest.raises(AwmError, match="at least 1"):
        retriever.retrieve(store, "site", "x", mode="topk", k=0)


def test_the_sidecar_names_its_own_index_file(store, minilm, tmp_path):
    index_dir = tmp_path / "idx"
    retriever = Retriever(minilm, index_dir=index_dir)
    retriever.retrieve(store, "site", "x", mode="topk")
    new = Workflow(name="track_order", description="Check the delivery status of an order")
    store.update("site", lambda ws: [*ws[1:], new], author="neural")
    retriever.retrieve(store, "site", "x", mode="topk")
    sidecar_path = next(index_dir.glob("*.json"))
    sidecar = json.loads(sidecar_path.read_text())
    files = [p.name for p in index_dir.glob("*.faiss")]
    assert files == [sidecar["index_file"]] and "-v2-" in files[0]  # the version 1 file is gone
    # A sidecar that points anywhere else is not followed: the index is rebuilt instead.
    shutil.copy(index_dir / files[0], tmp_path / "elsewhere.faiss")
    sidecar_path.write_text(json.dumps({**sidecar, "index_file": "../elsewhere.faiss"}))
    counting = CountingEmbedder(minilm)
    later = Retriever(counting, index_dir=index_dir)
    found = later.retrieve(store, "site", "Where is my package?", mode="topk", k=1)
    assert found.workflows[0].name == "track_order"
    assert (later.stats.index_loads, later.stats.index_builds) == (0, 1)
