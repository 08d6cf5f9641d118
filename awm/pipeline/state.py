"""Pipeline state in the run database: the arm's config, each task's stage, usage, the run's outcome.

Why in `run.sqlite` and not a side file: the episodes and steps that the state points at live there,
so one file says what finished. The tables are our own (`pipeline_*`), written through a separate
connection (WAL, busy timeout) next to the `RunRecorder`'s; every write commits at once, so after a
kill (SIGKILL included) the state is at most one stage behind the episodes, and each stage is written
so that doing it again is harmless (see `awm.pipeline.online`).

A task moves through ``solving -> solved -> evaluated -> done``; a missing row is "pending".
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from awm.config import Settings
from awm.errors import DataError
from awm.pipeline.config import PipelineConfig
from awm.traces.db import DB_NAME, safe_name, trajectory_path
from awm.trajectory import utc_now

TaskStatus = Literal["solving", "solved", "evaluated", "done"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS pipeline_config (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    config TEXT NOT NULL,
    settings TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pipeline_state (
    task_key TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    scope TEXT NOT NULL,
    status TEXT NOT NULL,
    episode_id TEXT,
    memory_version_seen INTEGER,
    memory_version_after INTEGER,
    commit_message TEXT NOT NULL DEFAULT '',
    induction TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pipeline_run (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    status TEXT NOT NULL,
    failed_stage TEXT,
    error TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pipeline_usage (
    purpose TEXT PRIMARY KEY,
    usage TEXT NOT NULL
);
"""


class TaskState(BaseModel):
    """Where one task of the stream stands."""

    task_key: str
    position: int
    scope: str
    status: TaskStatus
    episode_id: str | None = None
    memory_version_seen: int | None = None
    memory_version_after: int | None = None
    commit_message: str = ""
    induction: str = ""  # what this task's commit point did: a version, nothing new, or why no workflow
    updated_at: str = ""


class PipelineState:
    """Read and write the `pipeline_*` tables of one run folder (driver process only)."""

    def __init__(self, run_dir: Path, *, create: bool = True) -> None:
        self.run_dir = Path(run_dir)
        path = self.run_dir / DB_NAME
        if not create and not path.is_file():
            raise DataError(
                f"{self.run_dir}: no {DB_NAME} here; expected a run folder written by `awm pipeline`"
            )
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, timeout=30.0, isolation_level=None)
        self._conn.execute("PRAGMA busy_timeout = 30000")
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.row_factory = sqlite3.Row
        self._conn.executescript(SCHEMA)
        columns = {r["name"] for r in self._conn.execute("PRAGMA table_info(pipeline_state)")}
        if "induction" not in columns:  # a run folder written before the column existed
            self._conn.execute("ALTER TABLE pipeline_state ADD COLUMN induction TEXT NOT NULL DEFAULT ''")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> PipelineState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the arm's config -------------------------------------------------------------------------

    def save_config(self, config: PipelineConfig, settings: Settings) -> None:
        """Store the arm once (the first time); a later call with another config is refused upstream
        by the recorder's config hash."""
        self._conn.execute(
            "INSERT OR IGNORE INTO pipeline_config(id, config, settings, created_at) VALUES (1, ?, ?, ?)",
            (
                config.model_dump_json(),
                settings.model_dump_json(exclude={"llm": {"api_key"}}),
                utc_now(),
            ),
        )

    def load_config(self) -> tuple[PipelineConfig, Settings]:
        row = self._conn.execute("SELECT config, settings FROM pipeline_config WHERE id = 1").fetchone()
        if row is None:
            raise DataError(
                f"{self.run_dir / DB_NAME}: no pipeline config stored; this folder was not written by `awm pipeline`"
            )
        try:
            return PipelineConfig.model_validate_json(row["config"]), Settings.model_validate_json(
                row["settings"]
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise DataError(
                f"{self.run_dir / DB_NAME}: pipeline_config field '{where}': {first['msg']}"
            ) from None

    # --- tasks ------------------------------------------------------------------------------------

    def get(self, task_key: str) -> TaskState | None:
        row = self._conn.execute("SELECT * FROM pipeline_state WHERE task_key = ?", (task_key,)).fetchone()
        return None if row is None else TaskState.model_validate(dict(row))

    def put(self, state: TaskState) -> TaskState:
        values = state.model_dump() | {"updated_at": utc_now()}
        columns = ", ".join(values)
        marks = ", ".join(f":{c}" for c in values)
        self._conn.execute(f"INSERT OR REPLACE INTO pipeline_state({columns}) VALUES ({marks})", values)
        return TaskState.model_validate(values)

    # --- episodes of a task (the recorder's tables) -----------------------------------------------

    def ended_episode(self, task_key: str) -> str | None:
        """The latest ended episode of a task: a kill after the episode ended but before the state
        said so must not cost the episode again."""
        row = self._conn.execute(
            "SELECT id FROM episode WHERE task_key = ? AND status = 'ended' ORDER BY rowid DESC LIMIT 1",
            (task_key,),
        ).fetchone()
        return None if row is None else str(row["id"])

    def drop_partial_episodes(self, task_key: str) -> list[str]:
        """Delete a task's unfinished episodes (rows, steps, screenshots, pages, trajectory file) before it
        is re-run from its start; returns their ids. The event log keeps its lines (append-only)."""
        ids = [
            str(r["id"])
            for r in self._conn.execute(
                "SELECT id FROM episode WHERE task_key = ? AND status != 'ended'", (task_key,)
            ).fetchall()
        ]
        if not ids:
            return []
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            for episode_id in ids:
                self._conn.execute("DELETE FROM step WHERE episode_id = ?", (episode_id,))
                self._conn.execute("DELETE FROM episode WHERE id = ?", (episode_id,))
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")
        for episode_id in ids:
            for folder in ("screenshots", "pages"):  # its screenshots and page snapshots
                shutil.rmtree(self.run_dir / folder / safe_name(episode_id), ignore_errors=True)
            trajectory_path(self.run_dir, episode_id).unlink(missing_ok=True)
        return ids

    # --- the run ----------------------------------------------------------------------------------

    def set_run(self, status: str, *, failed_stage: str | None = None, error: str = "") -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO pipeline_run(id, status, failed_stage, error, updated_at) VALUES (1, ?, ?, ?, ?)",
            (status, failed_stage, error, utc_now()),
        )

    # --- usage, summed over the sessions of a resumed run -----------------------------------------

    def load_usage(self) -> dict[str, dict[str, Any]]:
        rows = self._conn.execute("SELECT purpose, usage FROM pipeline_usage").fetchall()
        return {r["purpose"]: json.loads(r["usage"]) for r in rows}

    def save_usage(self, usage: dict[str, dict[str, Any]]) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.execute("DELETE FROM pipeline_usage")
        self._conn.executemany(
            "INSERT INTO pipeline_usage(purpose, usage) VALUES (?, ?)",
            [(k, json.dumps(v, sort_keys=True)) for k, v in usage.items()],
        )
        self._conn.execute("COMMIT")
