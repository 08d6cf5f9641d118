"""Candidate ranking for Mind2Web: MindAct's published scores, or an offline MiniLM ranker.

Why a ranker at all: a Mind2Web page has hundreds of candidate elements; MindAct, and AWM after it, show
the model only the top-k of a ranker. Step success is capped by the ranker's recall@k (a target that is
not shown cannot be chosen), so `recall_at_k` is reported with every run.

Two rankers behind one protocol, `Ranker.rank(task, action, previous_actions) -> [(id, score)]`, best
first:

* `MindActRanker`: the DeBERTa ranker's scores as MindAct published them (``scores_all_data.pkl``:
  ``{"scores": {key: {id: score}}, "ranks": {key: {id: rank}}}`` with ``key =
  "{annotation_id}_{action_uid}"``), read by `load_mindact_scores` through a restricted unpickler that
  builds only plain containers, strings and numbers: a pickle that asks for any class or function
  (``os.system``...) is refused before anything runs. Numpy numeric scalars, which such dumps may hold,
  are rebuilt by our own code from their bytes, never by numpy's reducer.
* `EmbeddingRanker`: no download, no training: cosine similarity between the task (plus the last
  previous actions) and each candidate's tag, readable attributes and text, with the local
  all-MiniLM-L6-v2.
"""

from __future__ import annotations

import io
import pickle
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, Field

from awm.errors import DataError
from awm.memory.embeddings import Embedder
from awm.mind2web.prune import Dom, describe_attributes, element_text, parse_dom
from awm.mind2web.schema import ActionRecord, Candidate, TaskRecord

Ranking = list[tuple[str, float]]


def step_id(annotation_id: str, action_uid: str) -> str:
    """MindAct's key for one step (the same as `data.step_key`)."""
    return f"{annotation_id}_{action_uid}"


class Ranker(Protocol):
    """Ranks one step's candidates (positives and negatives together), best first."""

    name: str

    def rank(
        self,
        task: TaskRecord,
        action: ActionRecord,
        previous_actions: Sequence[str],
        *,
        dom: Dom | None = None,
    ) -> Ranking: ...


def candidates_of(action: ActionRecord) -> list[Candidate]:
    """Positives then negatives, each id once (the dataset sometimes repeats one)."""
    seen: dict[str, Candidate] = {}
    for candidate in [*action.pos_candidates, *action.neg_candidates]:
        seen.setdefault(candidate.backend_node_id, candidate)
    return list(seen.values())


def _best_first(scores: dict[str, float]) -> Ranking:
    # Ties broken by id so a ranking never depends on dict order.
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


# --- MindAct's scores ---------------------------------------------------------------------------

_SAFE_BUILTINS = {  # the names a plain-data pickle may use for containers (protocol 0-1 spell them so)
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("__builtin__", "set"): set,
    ("__builtin__", "frozenset"): frozenset,
}
_NUMPY_SCALAR = {("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar")}
_NUMPY_DTYPE = {("numpy", "dtype")}
_NUMERIC_DTYPES = {  # numpy dtype code -> struct format (without byte order)
    "f2": "e", "f4": "f", "f8": "d", "i1": "b", "i2": "h", "i4": "i", "i8": "q",
    "u1": "B", "u2": "H", "u4": "I", "u8": "Q", "b1": "?",
}  # fmt: skip


class _DType:
    """Stands in for `numpy.dtype` while unpickling: records the code and byte order, nothing else."""

    def __init__(self, code: Any, align: Any = False, copy: Any = False) -> None:
        if not isinstance(code, str) or code not in _NUMERIC_DTYPES:
            raise pickle.UnpicklingError(f"numpy dtype {code!r} is not a plain number type")
        self.code = code
        self.order = "<"

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) > 1 and state[1] in ("<", ">", "|", "="):
            self.order = "<" if state[1] in ("|", "=") else state[1]


def _numpy_scalar(dtype: Any, data: Any = None) -> float | int | bool:
    """Rebuild a numpy numeric scalar from its bytes as a Python number."""
    if not isinstance(dtype, _DType) or not isinstance(data, bytes):
        raise pickle.UnpicklingError("a numpy scalar must be a plain number type with its bytes")
    fmt = dtype.order + _NUMERIC_DTYPES[dtype.code]
    if struct.calcsize(fmt) != len(data):
        raise pickle.UnpicklingError(f"numpy scalar of type {dtype.code} has {len(data)} bytes")
    (value,) = struct.unpack(fmt, data)
    return value


class RestrictedUnpickler(pickle.Unpickler):
    """Builds plain data only: every class or function lookup is refused (except the stand-ins above).

    `find_class` is the one door through which a pickle reaches code (``os.system``, ``eval``...); it
    returns only set/frozenset and our own numpy-scalar rebuilders, which call nothing of the pickle's
    choosing. Persistent ids are refused too.
    """

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _SAFE_BUILTINS:
            return _SAFE_BUILTINS[(module, name)]
        if (module, name) in _NUMPY_SCALAR:
            return _numpy_scalar
        if (module, name) in _NUMPY_DTYPE:
            return _DType
        raise pickle.UnpicklingError(f"refused to load {module}.{name}: only plain data may be unpickled")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("refused a persistent id: only plain data may be unpickled")


def restricted_loads(data: bytes) -> Any:
    """Unpickle plain data (dicts, lists, tuples, sets, str, bytes, numbers, None, bools) and nothing else."""
    return RestrictedUnpickler(io.BytesIO(data)).load()


class MindActScores(BaseModel):
    """Per step key, the ranker's score per candidate id (higher is better)."""

    scores: dict[str, dict[str, float]] = Field(default_factory=dict)
    source: str = ""


def _score_table(table: Any, where: str, *, negate: bool) -> dict[str, dict[str, float]]:
    if not isinstance(table, dict):
        raise DataError(f"{where}: expected a dict of step key -> {{candidate id: number}}")
    out: dict[str, dict[str, float]] = {}
    for key, per_id in table.items():
        if not isinstance(per_id, dict):
            raise DataError(f"{where}: entry {key!r}: expected a dict of candidate id -> number")
        row: dict[str, float] = {}
        for cid, value in per_id.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise DataError(
                    f"{where}: entry {key!r}, candidate {cid!r}: expected a number, got {value!r}"
                )
            row[str(cid)] = -float(value) if negate else float(value)
        out[str(key)] = row
    return out


def load_mindact_scores(path: Path) -> MindActScores:
    """Read ``scores_all_data.pkl`` safely: its ``scores`` (or, without them, ``ranks``: lower is better).

    A flat ``{key: {id: score}}`` dict is accepted as scores too.
    """
    path = Path(path)
    try:
        data = restricted_loads(path.read_bytes())
    except FileNotFoundError:
        raise DataError(f"{path}: no such ranker score file (MindAct's scores_all_data.pkl)") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, struct.error) as exc:
        raise DataError(f"{path}: not a plain-data pickle of ranker scores ({exc})") from None
    if isinstance(data, dict) and ("scores" in data or "ranks" in data):
        if "scores" in data:
            return MindActScores(
                scores=_score_table(data["scores"], f"{path}: 'scores'", negate=False), source=str(path)
            )
        return MindActScores(
            scores=_score_table(data["ranks"], f"{path}: 'ranks'", negate=True), source=str(path)
        )
    return MindActScores(scores=_score_table(data, str(path), negate=False), source=str(path))


class MindActRanker:
    """MindAct's published ranking: scores from the file, else the scores merged into the candidates."""

    name = "mindact"

    def __init__(self, scores: MindActScores | None = None) -> None:
        self.scores = scores or MindActScores()

    @classmethod
    def from_file(cls, path: Path) -> MindActRanker:
        return cls(load_mindact_scores(path))

    def rank(
        self,
        task: TaskRecord,
        action: ActionRecord,
        previous_actions: Sequence[str],
        *,
        dom: Dom | None = None,
    ) -> Ranking:
        key = step_id(task.annotation_id, action.action_uid)
        row = self.scores.scores.get(key)
        candidates = candidates_of(action)
        if row is None:
            merged = {
                c.backend_node_id: c.score if c.score is not None else -float(c.rank)
                for c in candidates
                if c.score is not None or c.rank is not None
            }
            if len(merged) != len(candidates):
                source = self.scores.source or "the ranker score file"
                raise DataError(
                    f"{source}: no scores for step {key} (task {task.annotation_id}, website {task.website})"
                )
            row = merged
        # Every candidate is ranked; one the file does not score goes last.
        floor = min(row.values(), default=0.0) - 1.0
        return _best_first({c.backend_node_id: row.get(c.backend_node_id, floor) for c in candidates})


# --- offline MiniLM ranker ------------------------------------------------------------------------

PREVIOUS_SHOWN = 3  # the last few previous actions say where in the task we are


def candidate_text(candidate: Candidate, dom: Dom | None) -> str:
    """What the ranker compares with the task: tag, readable attributes and the element's page text."""
    page = element_text(dom, candidate.backend_node_id) if dom is not None else ""
    text = page or describe_attributes(candidate.attributes)
    return f"{candidate.tag} {text}".strip()


def query_text(task: TaskRecord, previous_actions: Sequence[str]) -> str:
    recent = list(previous_actions)[-PREVIOUS_SHOWN:]
    return task.confirmed_task + (" Previous: " + "; ".join(recent) if recent else "")


class EmbeddingRanker:
    """Cosine similarity of MiniLM embeddings: task (+ recent actions) against each candidate's text.

    Offline and untrained: far weaker than MindAct's fine-tuned DeBERTa, which is why recall@k is measured
    and reported with every run.
    """

    name = "minilm"

    def __init__(self, embedder: Embedder | None = None) -> None:
        self._embedder = embedder

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            from awm.memory.embeddings import default_embedder

            self._embedder = default_embedder()
        return self._embedder

    def rank(
        self,
        task: TaskRecord,
        action: ActionRecord,
        previous_actions: Sequence[str],
        *,
        dom: Dom | None = None,
    ) -> Ranking:
        candidates = candidates_of(action)
        if not candidates:
            return []
        if dom is None and action.cleaned_html:
            dom = parse_dom(action.cleaned_html)
        texts = [candidate_text(c, dom) for c in candidates]
        vectors = self.embedder.embed([query_text(task, previous_actions), *texts])
        sims = np.asarray(vectors[1:] @ vectors[0], dtype=np.float64)
        return _best_first({c.backend_node_id: float(s) for c, s in zip(candidates, sims, strict=True)})


# --- recall ------------------------------------------------------------------------------------------


class RecallReport(BaseModel):
    """How often the scored target is among the top-k: the ceiling on element accuracy."""

    k: int
    ranker: str
    steps: int = 0
    hits: int = 0
    no_positive: int = 0  # steps without a positive candidate (never a hit)

    @property
    def recall(self) -> float:
        return self.hits / self.steps if self.steps else 0.0


def hit_at_k(action: ActionRecord, ranking: Ranking, k: int) -> bool:
    """Whether the scored target (the first positive candidate) is in the top k."""
    target = action.target_id
    return target is not None and target in {cid for cid, _ in ranking[:k]}


def recall_at_k(ranker: Ranker, records: Iterable[TaskRecord], k: int) -> RecallReport:
    """Recall@k of the target over every step of `records`, teacher-forced (gold previous actions)."""
    report = RecallReport(k=k, ranker=ranker.name)
    for record in records:
        for i, action in enumerate(record.actions):
            ranking = ranker.rank(record, action, record.action_reprs[:i])
            report.steps += 1
            report.no_positive += action.target_id is None
            report.hits += hit_at_k(action, ranking, k)
    return report
