"""Which workflows of a scope go into the prompt: all of them, or the top-k most similar to the goal.

Why top-k returns the most similar *first*: the prompt fitter (`awm.tokens.fit_prompt`) drops workflows
from the end of the list when the budget is tight, so the order is the relevance order. (AWM's code
sorted distances the wrong way and returned metadata instead of the index; the tests pin both.)

The index is a faiss ``IndexFlatIP`` over L2-normalised embeddings of ``name + description`` (inner
product = cosine), persisted with ``faiss.write_index`` plus a JSON sidecar (scope, version, ids digest,
workflow ids and names, embedder name) in a cache folder next to the database. No pickle. The index is
rebuilt when the sidecar no longer matches the scope's head; vectors of workflows that did not change
are reused, so only new workflows are embedded.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from awm.errors import AwmError
from awm.memory.embeddings import Embedder, default_embedder, embedder_name, normalise
from awm.memory.store import WorkflowStore
from awm.memory.workflow import Workflow

if TYPE_CHECKING:
    import faiss

RetrievalMode = Literal["all", "topk"]


class RetrievedMemory(BaseModel):
    """The workflows chosen for one task, most relevant first; `scores` are cosine similarities (top-k only)."""

    scope: str
    version: int | None
    workflows: list[Workflow] = Field(default_factory=list)
    scores: list[float] = Field(default_factory=list)


class IndexSidecar(BaseModel):
    """What an index file holds: which version of which scope, embedded by which model, row by row."""

    scope: str
    version: int
    ids_digest: str
    embedder: str
    dimension: int
    workflow_ids: list[str]
    names: list[str]


def default_index_dir(db_path: Path) -> Path:
    """The index cache folder next to the database: ``<db stem>-index/``."""
    return Path(db_path).with_name(Path(db_path).stem + "-index")


def _index_paths(index_dir: Path, scope: str) -> tuple[Path, Path]:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", scope).strip("._")[:60] or "scope"
    digest = hashlib.sha1(scope.encode()).hexdigest()[:10]  # noqa: S324 - a file name, not security
    stem = index_dir / f"{slug}-{digest}"
    return stem.with_suffix(".faiss"), stem.with_suffix(".json")


def workflow_text(name: str, description: str) -> str:
    """What is embedded for a workflow: its name (underscores as spaces) and its description."""
    return f"{name.replace('_', ' ')}: {description}".strip().rstrip(":")


def _digest(ids_json: str) -> str:
    return hashlib.blake2b(ids_json.encode(), digest_size=16).hexdigest()


def _read_sidecar(path: Path) -> IndexSidecar | None:
    try:
        return IndexSidecar.model_validate_json(path.read_bytes())
    except (OSError, ValidationError, ValueError):
        return None


def _atomic_write(path: Path, write: Any) -> None:
    """Write via a temporary file in the same folder and rename, so readers never see half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _old_vectors(index_path: Path, sidecar: IndexSidecar | None, name: str) -> dict[str, np.ndarray]:
    """Vectors of the previous index by workflow id, when it was built by the same embedder."""
    import faiss

    if sidecar is None or sidecar.embedder != name or not index_path.exists():
        return {}
    try:
        old = faiss.read_index(str(index_path))
    except RuntimeError:
        return {}
    if old.ntotal != len(sidecar.workflow_ids):
        return {}
    matrix = old.reconstruct_n(0, old.ntotal)
    return {wid: matrix[i] for i, wid in enumerate(sidecar.workflow_ids)}


def build_index(
    store: WorkflowStore, scope: str, embedder: Embedder, index_dir: Path
) -> tuple[faiss.Index, IndexSidecar] | None:
    """(Re)build and persist the index of the scope's head; None when the scope has no workflows."""
    import faiss

    found = store.head_ids(scope)
    if found is None:
        return None
    version, ids_json = found
    ids: list[str] = json.loads(ids_json)
    if not ids:
        return None
    index_path, sidecar_path = _index_paths(index_dir, scope)
    name = embedder_name(embedder)
    reuse = _old_vectors(index_path, _read_sidecar(sidecar_path), name)
    texts = store.workflow_texts(ids)
    missing = [wid for wid in dict.fromkeys(ids) if wid not in reuse]
    if missing:
        fresh = normalise(embedder.embed([workflow_text(*texts[wid]) for wid in missing]))
        reuse.update(zip(missing, fresh, strict=True))
    matrix = normalise(np.stack([reuse[wid] for wid in ids]))
    index = faiss.IndexFlatIP(matrix.shape[1])
    index.add(matrix)
    sidecar = IndexSidecar(
        scope=scope,
        version=version,
        ids_digest=_digest(ids_json),
        embedder=name,
        dimension=int(matrix.shape[1]),
        workflow_ids=ids,
        names=[texts[wid][0] for wid in ids],
    )
    index_dir.mkdir(parents=True, exist_ok=True)
    # Index first, sidecar last: a crash in between leaves a sidecar that no longer matches -> rebuild.
    _atomic_write(index_path, lambda tmp: faiss.write_index(index, tmp))
    _atomic_write(sidecar_path, lambda tmp: Path(tmp).write_text(sidecar.model_dump_json()))
    return index, sidecar


def load_index(
    store: WorkflowStore, scope: str, embedder: Embedder, index_dir: Path
) -> tuple[faiss.Index, IndexSidecar] | None:
    """The persisted index of the scope's head, rebuilt first if it is missing or stale."""
    import faiss

    found = store.head_ids(scope)
    if found is None:
        return None
    version, ids_json = found
    index_path, sidecar_path = _index_paths(index_dir, scope)
    sidecar = _read_sidecar(sidecar_path)
    if (
        sidecar is not None
        and sidecar.scope == scope
        and sidecar.version == version
        and sidecar.ids_digest == _digest(ids_json)
        and sidecar.embedder == embedder_name(embedder)
    ):
        try:
            index = faiss.read_index(str(index_path))
        except RuntimeError:
            index = None
        if index is not None and index.ntotal == len(sidecar.workflow_ids):
            return index, sidecar
    return build_index(store, scope, embedder, index_dir)


def retrieve(
    store: WorkflowStore,
    scope: str,
    goal: str,
    *,
    mode: RetrievalMode = "all",
    k: int = 3,
    embedder: Embedder | None = None,
    index_dir: Path | None = None,
) -> RetrievedMemory:
    """The workflows of `scope` to show for `goal`: every one (``all``) or the k most similar (``topk``)."""
    if mode == "all":
        head = store.head(scope)
        if head is None:
            return RetrievedMemory(scope=scope, version=None)
        return RetrievedMemory(scope=scope, version=head.version, workflows=head.workflows)
    if mode != "topk":
        raise AwmError(f"unknown retrieval mode {mode!r}; expected 'all' or 'topk'")
    if k < 1:
        raise AwmError(f"retrieval k must be at least 1, got {k}")
    embedder = embedder or default_embedder()
    loaded = load_index(store, scope, embedder, index_dir or default_index_dir(store.path))
    if loaded is None:
        return RetrievedMemory(scope=scope, version=store.head_version(scope))
    index, sidecar = loaded
    query = normalise(embedder.embed([goal]))
    scores, rows = index.search(query, min(k, index.ntotal))
    ranked = sorted(
        ((float(s), int(r)) for s, r in zip(scores[0], rows[0], strict=True) if r >= 0),
        key=lambda pair: (-pair[0], pair[1]),
    )
    ids = [sidecar.workflow_ids[r] for _, r in ranked]
    workflows = store.load_workflows(ids, where=f"scope {scope!r} version {sidecar.version}")
    return RetrievedMemory(
        scope=scope, version=sidecar.version, workflows=workflows, scores=[s for s, _ in ranked]
    )
