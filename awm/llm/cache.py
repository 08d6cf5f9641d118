"""On-disk response cache for deterministic model calls (SQLite, JSON values, safe across processes).

Why: re-running a stage, a resumed run or an ablation that shares its first steps repeats the same
deterministic requests; serving them from disk makes zero model calls. Only deterministic requests
(temperature 0 or a fixed seed) are cached, and only under the same backend, server URL and model
(`response_key`): one model name on two servers need not be one model. Values are JSON
(`ChatResult`), never pickle. WAL mode and a busy timeout let parallel workers share one file; a
connection is opened per operation, so the cache survives forks and threads.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path

from pydantic import ValidationError

from awm.llm.base import ChatRequest, ChatResult, LLMClient, Usage
from awm.llm.usage import UsageMeter
from awm.tokens import TokenCounter

BUSY_TIMEOUT_MS = 30_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    result TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def response_key(request: ChatRequest, *, backend: str, base_url: str, model: str) -> str:
    """The cache key of `request` sent to `model` on `backend` at `base_url`.

    Why the URL: a model name says nothing about the weights behind it (two vLLM servers, or a gateway
    and the vendor, can both answer to "gpt-4o" or "qwen"), so answers are shared only between clients
    that send the same request to the same backend, server and model. An empty `base_url` (the embedded
    server) leaves the URL out.
    """
    payload = request.model_dump(mode="json", exclude={"purpose"})
    payload.update(backend=backend, model=model)
    if base_url:
        payload["base_url"] = base_url.rstrip("/")
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def client_base_url(client: LLMClient) -> str:
    """The server a client talks to, for the cache key ("" when it has none or it is the embedded one).

    The embedded llama.cpp server (backend ``local``) listens on a fresh loopback port in every process;
    its identity is the model file, already in the key as the model name, so its port is left out, or
    no answer would survive a restart and workers would miss what the parent stored.
    """
    if client.backend == "local":
        return ""
    return str(getattr(client, "endpoint", "") or "")


class ResponseCache:
    """Key -> `ChatResult` JSON in one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._init_schema()

    def _init_schema(self) -> None:
        """Switch to WAL and create the table. SQLite answers "locked" at once (no busy wait) when
        several processes switch the journal mode together, so that step is retried briefly."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            conn = self._connect()
            try:
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode=WAL")
                with conn:
                    conn.execute(_SCHEMA)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
            finally:
                conn.close()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        return conn

    def get(self, key: str) -> ChatResult | None:
        """The stored result, or None (a row that no longer parses counts as a miss)."""
        conn = self._connect()
        try:
            row = conn.execute("SELECT result FROM responses WHERE key = ?", (key,)).fetchone()
        finally:
            conn.close()
        if row is None:
            return None
        try:
            return ChatResult.model_validate_json(row[0])
        except ValidationError:
            return None

    def put(self, key: str, result: ChatResult) -> None:
        conn = self._connect()
        try:
            with conn:
                conn.execute(
                    "INSERT OR REPLACE INTO responses (key, backend, model, result, created) VALUES (?, ?, ?, ?, ?)",
                    (key, result.backend, result.model, result.model_dump_json(), time.time()),
                )
        finally:
            conn.close()

    def __len__(self) -> int:
        conn = self._connect()
        try:
            return int(conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])
        finally:
            conn.close()


class CachedClient:
    """Wraps a backend: deterministic requests are looked up first and stored after a real call.

    A hit returns the stored reply with ``cached=True``, ``attempts=0`` and zero cost (the tokens are
    kept so reports still show the size of the request).
    """

    def __init__(self, inner: LLMClient, cache: ResponseCache, meter: UsageMeter | None = None) -> None:
        self.inner = inner
        self.cache = cache
        self.backend = inner.backend
        self.model = inner.model
        self.base_url = client_base_url(inner)
        self._meter = meter

    def token_counter(self) -> TokenCounter:
        """The wrapped client's counter: the cache changes where answers come from, not their size."""
        return self.inner.token_counter()

    def chat(self, request: ChatRequest) -> ChatResult:
        if not request.deterministic:
            return self.inner.chat(request)
        key = response_key(request, backend=self.backend, base_url=self.base_url, model=self.model)
        started = time.perf_counter()
        hit = self.cache.get(key)
        if hit is not None:
            usage = Usage(
                prompt_tokens=hit.usage.prompt_tokens, completion_tokens=hit.usage.completion_tokens
            )
            result = hit.model_copy(
                update={
                    "cached": True,
                    "attempts": 0,
                    "usage": usage,
                    "seconds": time.perf_counter() - started,
                }
            )
            if self._meter is not None:
                self._meter.record(request.purpose, usage, cached=True)
            return result
        result = self.inner.chat(request)
        self.cache.put(key, result)
        return result
