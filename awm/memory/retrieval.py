"""Which workflows of a scope go into the prompt: all of them, or the top-k most similar to the goal.

Why top-k returns the most similar *first*: the prompt fitter (`awm.tokens.fit_prompt`) drops workflows
from the end of the list when the budget is tight, so the order is the relevance order. (AWM's code
sorted distances the wrong way and returned metadata instead of the index; the tests pin both.)

The index is a faiss ``IndexFlatIP`` over L2-normalised embeddings of ``name + description`` (inner
product = cosine), persisted with ``faiss.write_index`` plus a JSON sidecar (scope, version, ids digest,
workflow ids and names, embedder name, index file name) in a cache folder next to the database. No
pickle. The index is rebuilt when the sidecar no longer matches the scope's head; vectors of workflows
that did not change are reused, so only new workflows are embedded. Each index file is named after its
version and ids digest and the sidecar names it, so parallel workers writing different versions can
never pair one version's sidecar with another's vectors (the sidecar is written last, older files are
then removed).

Speed (issue 4: top-k under 20 ms at 10,000 workflows): a `Retriever` (one per run) holds the embedder,
each scope's loaded index keyed by database and head version, the "all" lists, and recent goal
vectors. A repeated lookup then costs one head-version query, one goal embedding (none for a goal
seen before) and one faiss search; the index is re-read or rebuilt only when the head moved. faiss
searches on one thread: its default (a thread per core) spins against other processes on a shared
machine, ~16 ms instead of ~0.7 ms per search at 10,000 rows under load.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from awm.errors import AwmError, DataError
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
    index_file: str = ""  # the faiss file in the same folder (written before this sidecar)


def default_index_dir(db_path: Path) -> Path:
    """The index cache folder next to the database: ``<db stem>-index/``."""
    return Path(db_path).with_name(Path(db_path).stem + "-index")


def _sidecar_path(index_dir: Path, scope: str) -> Path:
    """``<slug>-<sha1 of scope>.json``: readable, and distinct for scopes whose slugs collide."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", scope).strip("._")[:60] or "scope"
    digest = hashlib.sha1(scope.encode()).hexdigest()[:10]  # noqa: S324 - a file name, not security
    return index_dir / f"{slug}-{digest}.json"


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


def _head(store: WorkflowStore, scope: str) -> tuple[int, list[str]] | None:
    found = store.head_workflow_ids(scope)
    return None if found is None else (found[0], list(found[1]))


def _ids_digest(ids: list[str]) -> str:
    return _digest(json.dumps(ids))


def _index_file(sidecar_path: Path, version: int, ids_digest: str) -> Path:
    return sidecar_path.with_name(f"{sidecar_path.stem}-v{version}-{ids_digest[:12]}.faiss")


def _is_index_file_of(sidecar_path: Path, name: str) -> bool:
    return re.fullmatch(re.escape(sidecar_path.stem) + r"-v\d+-[0-9a-f]{12}\.faiss", name) is not None


def _read_index(sidecar_path: Path, sidecar: IndexSidecar) -> faiss.Index | None:
    """The faiss file the sidecar names, if it is there and has the sidecar's shape."""
    import faiss

    name = sidecar.index_file
    if not _is_index_file_of(sidecar_path, name):
        return None  # old layout, or not a file name of ours: rebuild rather than follow it
    try:
        index = faiss.read_index(str(sidecar_path.with_name(name)))
    except RuntimeError:
        return None
    if index.ntotal != len(sidecar.workflow_ids) or index.d != sidecar.dimension:
        return None
    return index


def _previous_from_disk(sidecar_path: Path) -> tuple[faiss.Index, IndexSidecar] | None:
    sidecar = _read_sidecar(sidecar_path)
    if sidecar is None:
        return None
    index = _read_index(sidecar_path, sidecar)
    return None if index is None else (index, sidecar)


def build_index(
    store: WorkflowStore,
    scope: str,
    embedder: Embedder,
    index_dir: Path,
    *,
    previous: tuple[faiss.Index, IndexSidecar] | None = None,
) -> tuple[faiss.Index, IndexSidecar] | None:
    """(Re)build and persist the index of the scope's head; None when the scope has no workflows.

    Vectors of workflows already in `previous` (an index held in memory) or, without it, in the
    persisted index are reused when the same embedder made them: only new workflows are embedded.
    """
    import faiss

    found = _head(store, scope)
    if found is None or not found[1]:
        return None
    version, ids = found
    sidecar_path = _sidecar_path(index_dir, scope)
    name = embedder_name(embedder)
    old = previous if previous is not None else _previous_from_disk(sidecar_path)
    usable = (
        old is not None
        and old[1].embedder == name
        and old[0].ntotal == len(old[1].workflow_ids) == len(old[1].names)
    )
    for reuse in (old, None) if usable else (None,):
        old_ids: list[str] = [] if reuse is None else reuse[1].workflow_ids
        old_names: list[str] = [] if reuse is None else reuse[1].names
        old_matrix = None if reuse is None else reuse[0].reconstruct_n(0, reuse[0].ntotal)
        row_of = {wid: i for i, wid in enumerate(old_ids)}
        missing = [wid for wid in dict.fromkeys(ids) if wid not in row_of]
        texts = store.workflow_texts(missing)
        lost = [wid for wid in missing if wid not in texts]
        if lost:
            raise DataError(
                f"{store.path}: scope {scope!r} version {version} refers to missing workflow {lost[0]}"
            )
        fresh = (
            normalise(embedder.embed([workflow_text(*texts[wid]) for wid in missing])) if missing else None
        )
        if old_matrix is None or fresh is None:
            break
        if fresh.shape[1] == old_matrix.shape[1]:
            break
        # same embedder name, other vector size (a swapped model folder): embed everything afresh
    for j, wid in enumerate(missing):
        row_of[wid] = len(old_ids) + j
    names_all = old_names + [texts[wid][0] for wid in missing]
    parts = [m for m in (old_matrix, fresh) if m is not None]
    matrix = parts[0] if len(parts) == 1 else np.concatenate(parts)
    rows = np.fromiter((row_of[wid] for wid in ids), dtype=np.int64, count=len(ids))
    matrix = np.ascontiguousarray(matrix[rows], dtype=np.float32)
    index = faiss.IndexFlatIP(matrix.shape[1])
    index.add(matrix)
    digest = _ids_digest(ids)
    index_path = _index_file(sidecar_path, version, digest)
    sidecar = IndexSidecar(
        scope=scope,
        version=version,
        ids_digest=digest,
        embedder=name,
        dimension=int(matrix.shape[1]),
        workflow_ids=ids,
        names=[names_all[r] for r in rows.tolist()],
        index_file=index_path.name,
    )
    index_dir.mkdir(parents=True, exist_ok=True)
    # Index first, sidecar last: a crash in between leaves the previous sidecar naming the previous file.
    _atomic_write(index_path, lambda tmp: faiss.write_index(index, tmp))
    _atomic_write(sidecar_path, lambda tmp: Path(tmp).write_text(sidecar.model_dump_json()))
    for stale in index_dir.iterdir():
        if stale != index_path and _is_index_file_of(sidecar_path, stale.name):
            stale.unlink(missing_ok=True)  # a reader that loses its file this way just rebuilds
    sidecar_path.with_suffix(".faiss").unlink(missing_ok=True)  # the layout before index_file
    return index, sidecar


def _persisted_matches(
    index_dir: Path, scope: str, version: int, ids: list[str], name: str
) -> tuple[faiss.Index, IndexSidecar] | None:
    """The persisted index, if it is the one of exactly this head and embedder."""
    sidecar_path = _sidecar_path(index_dir, scope)
    sidecar = _read_sidecar(sidecar_path)
    if (
        sidecar is None
        or sidecar.scope != scope
        or sidecar.version != version
        or sidecar.embedder != name
        or sidecar.workflow_ids != ids
    ):
        return None
    index = _read_index(sidecar_path, sidecar)
    return None if index is None else (index, sidecar)


@dataclass
class RetrieverStats:
    """What a `Retriever` did, for tests and benchmarks: loads and builds happen only when a head moved."""

    index_loads: int = 0  # persisted indexes read from disk
    index_builds: int = 0  # indexes (re)built, embedding only workflows not seen before
    workflows_embedded: int = 0
    goal_embeds: int = 0
    goal_cache_hits: int = 0
    all_loads: int = 0  # heads parsed for mode "all"


@dataclass
class _Loaded:
    """One scope's index as of one head version (index None: the head has no workflows)."""

    version: int
    index: faiss.Index | None = None
    sidecar: IndexSidecar | None = None


@dataclass
class _CountingEmbedder:
    inner: Embedder
    stats: RetrieverStats = field(default_factory=RetrieverStats)

    @property
    def name(self) -> str:
        return embedder_name(self.inner)

    def embed(self, texts: list[str]) -> np.ndarray:
        self.stats.workflows_embedded += len(texts)
        return self.inner.embed(texts)


class Retriever:
    """Retrieval for one run: the embedder, loaded indexes and goal vectors, kept between lookups.

    Why an object and not module state: its lifetime is the run's (the runner makes one), tests get a
    fresh one, and nothing leaks between runs. It takes the store per call, so a caller may open and
    close stores between lookups; entries are keyed by the database's `db_id`, the scope and the index
    folder, and used only while the scope's head is still the version they were built for. Calls are
    serialised by a lock, so threads may share one.
    """

    def __init__(
        self,
        embedder: Embedder | None = None,
        *,
        index_dir: Path | None = None,
        goal_cache_size: int = 512,
        search_threads: int | None = 1,
    ) -> None:
        self._embedder = embedder
        self.index_dir = index_dir
        self.goal_cache_size = goal_cache_size
        self.search_threads = search_threads
        self.stats = RetrieverStats()
        self._indexes: dict[tuple[str, str, str], _Loaded] = {}
        self._all: dict[tuple[str, str], tuple[int, tuple[Workflow, ...]]] = {}
        self._goals: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.RLock()

    @property
    def embedder(self) -> Embedder:
        """The embedder (the shared MiniLM unless one was given; loaded on first use)."""
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def clear(self) -> None:
        """Forget every loaded index, "all" list and goal vector (the files on disk stay)."""
        with self._lock:
            self._indexes.clear()
            self._all.clear()
            self._goals.clear()

    def _index_dir(self, store: WorkflowStore, index_dir: Path | None) -> Path:
        return Path(index_dir or self.index_dir or default_index_dir(store.path))

    def index(
        self, store: WorkflowStore, scope: str, *, index_dir: Path | None = None
    ) -> tuple[faiss.Index, IndexSidecar] | None:
        """The index of the scope's head: held, read from disk, or (re)built; None if no workflows."""
        loaded = self._index(store, scope, self._index_dir(store, index_dir))
        if loaded is None or loaded.index is None or loaded.sidecar is None:
            return None
        return loaded.index, loaded.sidecar

    def _index(self, store: WorkflowStore, scope: str, folder: Path) -> _Loaded | None:
        with self._lock:
            version = store.head_version(scope)
            if version is None:
                return None
            key = (store.db_id, scope, str(folder))
            held = self._indexes.get(key)
            if held is not None and held.version == version:
                return held
            import faiss

            if self.search_threads is not None and faiss.omp_get_max_threads() != self.search_threads:
                faiss.omp_set_num_threads(self.search_threads)
            found = _head(store, scope)
            if found is None:
                return None
            version, ids = found
            if not ids:
                loaded = _Loaded(version)
            else:
                name = embedder_name(self.embedder)
                hit = _persisted_matches(folder, scope, version, ids, name)
                if hit is not None:
                    self.stats.index_loads += 1
                else:
                    previous = None
                    if held is not None and held.index is not None and held.sidecar is not None:
                        previous = (held.index, held.sidecar)
                    counting = _CountingEmbedder(self.embedder, self.stats)
                    hit = build_index(store, scope, counting, folder, previous=previous)
                    self.stats.index_builds += 1
                loaded = _Loaded(version) if hit is None else _Loaded(version, *hit)
            self._indexes[key] = loaded
            return loaded

    def embed_goal(self, goal: str) -> np.ndarray:
        """The goal's unit vector (1 x d), memoised for the last `goal_cache_size` goals."""
        with self._lock:
            cached = self._goals.get(goal)
            if cached is not None:
                self._goals.move_to_end(goal)
                self.stats.goal_cache_hits += 1
                return cached
            vector = normalise(self.embedder.embed([goal]))
            self.stats.goal_embeds += 1
            vector.setflags(write=False)  # shared between calls
            self._goals[goal] = vector
            while len(self._goals) > max(0, self.goal_cache_size):
                self._goals.popitem(last=False)
            return vector

    def retrieve(
        self,
        store: WorkflowStore,
        scope: str,
        goal: str,
        *,
        mode: RetrievalMode = "all",
        k: int = 3,
        index_dir: Path | None = None,
    ) -> RetrievedMemory:
        """The workflows of `scope` to show for `goal`: every one (``all``) or the k most similar (``topk``)."""
        if mode == "all":
            return self._retrieve_all(store, scope)
        if mode != "topk":
            raise AwmError(f"unknown retrieval mode {mode!r}; expected 'all' or 'topk'")
        if k < 1:
            raise AwmError(f"retrieval k must be at least 1, got {k}")
        loaded = self._index(store, scope, self._index_dir(store, index_dir))
        if loaded is None:
            return RetrievedMemory(scope=scope, version=None)
        if loaded.index is None or loaded.sidecar is None:
            return RetrievedMemory(scope=scope, version=loaded.version)
        index, sidecar = loaded.index, loaded.sidecar
        query = self.embed_goal(goal)
        with self._lock:  # faiss indexes are not safe for concurrent searches
            scores, rows = index.search(query, min(k, index.ntotal))
        ranked = sorted(
            ((float(s), int(r)) for s, r in zip(scores[0], rows[0], strict=True) if r >= 0),
            key=lambda pair: (-pair[0], pair[1]),
        )
        ids = [sidecar.workflow_ids[r] for _, r in ranked]
        workflows = store.load_workflows(ids, where=f"scope {scope!r} version {sidecar.version}")
        return RetrievedMemory.model_construct(
            scope=scope, version=sidecar.version, workflows=workflows, scores=[s for s, _ in ranked]
        )

    def _retrieve_all(self, store: WorkflowStore, scope: str) -> RetrievedMemory:
        with self._lock:
            version = store.head_version(scope)
            if version is None:
                return RetrievedMemory(scope=scope, version=None)
            key = (store.db_id, scope)
            held = self._all.get(key)
            if held is None or held[0] != version:
                held = (version, tuple(store.get(scope, version).workflows))
                self._all[key] = held
                self.stats.all_loads += 1
        return RetrievedMemory.model_construct(
            scope=scope, version=held[0], workflows=list(held[1]), scores=[]
        )


def retrieve(
    store: WorkflowStore,
    scope: str,
    goal: str,
    *,
    mode: RetrievalMode = "all",
    k: int = 3,
    embedder: Embedder | None = None,
    index_dir: Path | None = None,
    retriever: Retriever | None = None,
) -> RetrievedMemory:
    """The workflows of `scope` to show for `goal`: every one (``all``) or the k most similar (``topk``).

    Without `retriever` this is a one-off lookup (the index is read from, or built into, `index_dir`);
    pass the run's `Retriever` to keep the index and goal vectors between calls.
    """
    if retriever is None:
        retriever = Retriever(embedder)
    elif embedder is not None and embedder is not retriever.embedder:
        raise AwmError("retrieve: pass the embedder to the Retriever, not with a retriever that has another")
    return retriever.retrieve(store, scope, goal, mode=mode, k=k, index_dir=index_dir)
