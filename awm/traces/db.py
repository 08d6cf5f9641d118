"""The run database (`run.sqlite`): one run, its episodes and their steps, written as they happen.

Why SQLite in WAL mode: a viewer (or a test) can read a run while the driver is still writing it,
and every write is committed at once, so a crash loses at most the step that was being written.
The write side (`RunWriter`) belongs to the driver process; the read side (`RunDatabase`) opens the
file read-only and returns pydantic rows, never tuples.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from awm.errors import DataError
from awm.trajectory import (
    Approval,
    Box,
    Step,
    TargetDesc,
    Task,
    Trajectory,
    Verdict,
    WorkflowCall,
    load_trajectory,
)

DB_NAME = "run.sqlite"
EVENTS_NAME = "events.jsonl"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")

# Timings with a column of their own; any other key of `Step.timings_ms` goes to the `timings` json.
TIMING_COLUMNS = {"llm": "llm_ms", "exec": "exec_ms", "observe": "observe_ms"}

SCHEMA = """
CREATE TABLE IF NOT EXISTS run (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    config TEXT NOT NULL DEFAULT '{}',
    config_hash TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'running'
);
CREATE TABLE IF NOT EXISTS episode (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES run(id),
    task_key TEXT NOT NULL,
    task TEXT NOT NULL,
    scope TEXT NOT NULL DEFAULT '',
    memory_version INTEGER,
    model TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL DEFAULT 'running',
    "end" TEXT NOT NULL DEFAULT 'running',
    final_answer TEXT NOT NULL DEFAULT '',
    reward REAL,
    raw_reward REAL,
    judge TEXT,
    judge_reason TEXT NOT NULL DEFAULT '',
    started_at TEXT NOT NULL DEFAULT '',
    seconds REAL NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    workflow_calls TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX IF NOT EXISTS episode_task_key ON episode(task_key);
CREATE TABLE IF NOT EXISTS step (
    episode_id TEXT NOT NULL REFERENCES episode(id),
    idx INTEGER NOT NULL,
    prompt_hash TEXT NOT NULL DEFAULT '',
    observation TEXT NOT NULL DEFAULT '',
    model_output TEXT NOT NULL DEFAULT '',
    thought TEXT NOT NULL DEFAULT '',
    action TEXT,
    action_str TEXT NOT NULL DEFAULT '',
    target TEXT,
    outcome TEXT NOT NULL DEFAULT 'ok',
    error TEXT NOT NULL DEFAULT '',
    feedback TEXT NOT NULL DEFAULT '',
    url TEXT NOT NULL DEFAULT '',
    fingerprint TEXT NOT NULL DEFAULT '',
    llm_ms REAL,
    exec_ms REAL,
    observe_ms REAL,
    timings TEXT NOT NULL DEFAULT '{}',
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    llm_calls INTEGER NOT NULL DEFAULT 0,
    screenshot TEXT,
    recorded_at TEXT NOT NULL DEFAULT '',
    called_by INTEGER,
    workflow TEXT NOT NULL DEFAULT '',
    grounding TEXT NOT NULL DEFAULT '',
    approval TEXT,
    reaction TEXT NOT NULL DEFAULT '',
    prompt TEXT NOT NULL DEFAULT '[]',
    box TEXT,
    guidance TEXT NOT NULL DEFAULT '[]',
    cached_prompt_tokens INTEGER NOT NULL DEFAULT 0,
    UNIQUE(episode_id, idx)
);
"""


# Columns added after run folders were first written: (table, column, declaration), added on open.
ADDED_COLUMNS = (
    ("episode", "raw_reward", "REAL"),
    ("episode", "workflow_calls", "TEXT NOT NULL DEFAULT '[]'"),
    ("step", "called_by", "INTEGER"),
    ("step", "workflow", "TEXT NOT NULL DEFAULT ''"),
    ("step", "grounding", "TEXT NOT NULL DEFAULT ''"),
    ("step", "approval", "TEXT"),
    ("step", "reaction", "TEXT NOT NULL DEFAULT ''"),
    ("step", "prompt", "TEXT NOT NULL DEFAULT '[]'"),
    ("step", "box", "TEXT"),
    ("step", "guidance", "TEXT NOT NULL DEFAULT '[]'"),
    ("step", "cached_prompt_tokens", "INTEGER NOT NULL DEFAULT 0"),
)


def safe_name(episode_id: str) -> str:
    """A file-name-safe form of an episode id (ids come from outside and may hold `/` or `#`)."""
    return _UNSAFE.sub("_", episode_id) or "_"


def trajectory_path(run_dir: Path, episode_id: str) -> Path:
    return Path(run_dir) / "trajectories" / f"{safe_name(episode_id)}.json"


def screenshot_relpath(episode_id: str, index: int | str) -> str:
    """Screenshot path relative to the run folder, as stored in the step row and in `Step.screenshot`;
    `index="final"` names the page after the episode's last action (`meta["final_screenshot"]`)."""
    return f"screenshots/{safe_name(episode_id)}/{index}.png"


class RunRow(BaseModel):
    """The run's own record: what configuration produced everything in this folder."""

    id: str
    name: str
    created_at: str
    config: dict[str, Any]
    config_hash: str
    status: str


class EpisodeRow(BaseModel):
    """One episode as the database holds it; `steps` is the number of recorded steps, `sub_steps` how
    many of them a `run_workflow` call ran (no model call each), so `model_steps` are the rest."""

    id: str
    run_id: str
    task_key: str
    task: Task
    scope: str
    memory_version: int | None
    model: str
    status: str  # running | ended
    end: str
    final_answer: str
    reward: float | None
    judge: str | None
    judge_reason: str
    started_at: str
    raw_reward: float | None = None
    seconds: float
    prompt_tokens: int
    completion_tokens: int
    workflow_calls: list[WorkflowCall] = Field(default_factory=list)
    steps: int = 0
    sub_steps: int = 0

    @property
    def model_steps(self) -> int:
        return self.steps - self.sub_steps

    @property
    def verdict(self) -> Verdict:
        return Verdict(
            reward=self.reward,
            raw_reward=self.raw_reward,
            judge=self.judge,  # type: ignore[arg-type]
            judge_reason=self.judge_reason,
        )


class StepRow(BaseModel):
    """One recorded step; `to_step()` gives back the `Step` that was recorded."""

    episode_id: str
    idx: int
    prompt_hash: str
    observation: str
    model_output: str
    thought: str
    action: dict[str, Any] | None
    action_str: str
    target: TargetDesc | None
    outcome: str
    error: str
    feedback: str
    url: str
    fingerprint: str
    llm_ms: float | None
    exec_ms: float | None
    observe_ms: float | None
    timings: dict[str, float]
    prompt_tokens: int
    completion_tokens: int
    llm_calls: int
    screenshot: str | None
    recorded_at: str
    called_by: int | None = None  # a `run_workflow` sub-step: the calling step's index
    workflow: str = ""
    grounding: str = ""
    approval: Approval | None = None  # the confirmation gate's answer (live runs)
    reaction: str = ""
    prompt: list[dict[str, str]] = Field(default_factory=list)  # the messages sent (old folders: none)
    box: Box | None = None  # the target's box on the screenshot (old folders: none)
    guidance: list[str] = Field(default_factory=list)  # the guidance filters that acted (old folders: none)
    cached_prompt_tokens: int = 0  # of prompt_tokens, reused from the server's prefix cache (old folders: 0)

    @property
    def timings_ms(self) -> dict[str, float]:
        """All timings again under their `Step.timings_ms` keys."""
        out = dict(self.timings)
        for key, column in TIMING_COLUMNS.items():
            value = getattr(self, column)
            if value is not None:
                out[key] = value
        return out

    def to_step(self) -> Step:
        return Step(
            index=self.idx,
            url=self.url,
            observation=self.observation,
            fingerprint=self.fingerprint,
            model_output=self.model_output,
            thought=self.thought,
            action=self.action,
            action_str=self.action_str,
            target=self.target,
            outcome=self.outcome,  # type: ignore[arg-type]
            error=self.error,
            feedback=self.feedback,
            timings_ms=self.timings_ms,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            llm_calls=self.llm_calls,
            prompt_hash=self.prompt_hash,
            screenshot=self.screenshot,
            called_by=self.called_by,
            workflow=self.workflow,
            grounding=self.grounding,
            approval=self.approval,
            reaction=self.reaction,
            prompt=self.prompt,
            box=self.box,
            guidance=self.guidance,
            cached_prompt_tokens=self.cached_prompt_tokens,
        )


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def step_values(
    episode_id: str, step: Step, *, prompt_hash: str, screenshot: str | None, recorded_at: str
) -> dict:
    """The column values of one step (pure; the writer binds them by name)."""
    timings = {k: v for k, v in step.timings_ms.items() if k not in TIMING_COLUMNS}
    return {
        "episode_id": episode_id,
        "idx": step.index,
        "prompt_hash": prompt_hash,
        "observation": step.observation,
        "model_output": step.model_output,
        "thought": step.thought,
        "action": None if step.action is None else _dumps(step.action),
        "action_str": step.action_str,
        "target": None if step.target is None else step.target.model_dump_json(),
        "outcome": step.outcome,
        "error": step.error,
        "feedback": step.feedback,
        "url": step.url,
        "fingerprint": step.fingerprint,
        "llm_ms": step.timings_ms.get("llm"),
        "exec_ms": step.timings_ms.get("exec"),
        "observe_ms": step.timings_ms.get("observe"),
        "timings": _dumps(timings),
        "prompt_tokens": step.prompt_tokens,
        "completion_tokens": step.completion_tokens,
        "llm_calls": step.llm_calls,
        "screenshot": screenshot,
        "recorded_at": recorded_at,
        "called_by": step.called_by,
        "workflow": step.workflow,
        "grounding": step.grounding,
        "approval": None if step.approval is None else step.approval.model_dump_json(),
        "reaction": step.reaction,
        "prompt": _dumps(step.prompt),
        "box": None if step.box is None else step.box.model_dump_json(),
        "guidance": _dumps(step.guidance),
        "cached_prompt_tokens": step.cached_prompt_tokens,
    }


def _connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    if read_only:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
    else:
        conn = sqlite3.connect(path, check_same_thread=False, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
    conn.row_factory = sqlite3.Row
    return conn


class RunWriter:
    """Write side of `run.sqlite`. Every call commits, so a reader sees it at once.

    Held by the driver process only; a lock makes calls from the driver's threads safe too.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = _connect(self.path, read_only=False)
        self._lock = threading.Lock()
        with self._lock, self._conn:
            self._conn.executescript(SCHEMA)
            for table, column, declaration in ADDED_COLUMNS:  # a run folder written before they existed
                columns = {r["name"] for r in self._conn.execute(f"PRAGMA table_info({table})")}
                if column not in columns:
                    self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")

    def run_row(self) -> sqlite3.Row | None:
        with self._lock:
            return self._conn.execute("SELECT * FROM run LIMIT 1").fetchone()

    def insert_run(self, run_id: str, *, name: str, created_at: str, config: dict, config_hash: str) -> None:
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT INTO run(id, name, created_at, config, config_hash, status) VALUES (?, ?, ?, ?, ?, 'running')",
                (run_id, name, created_at, _dumps(config), config_hash),
            )

    def set_run_status(self, status: str) -> None:
        with self._lock, self._conn:
            self._conn.execute("UPDATE run SET status = ?", (status,))

    def upsert_episode(self, run_id: str, trajectory: Trajectory, *, status: str) -> None:
        """Insert or update the whole episode row from the trajectory (idempotent)."""
        t = trajectory
        values = {
            "id": t.trajectory_id,
            "run_id": run_id,
            "task_key": t.task.key,
            "task": t.task.model_dump_json(),
            "scope": t.memory_scope or t.task.scope,
            "memory_version": t.memory_version,
            "model": t.model,
            "status": status,
            "end": t.end,
            "final_answer": t.final_answer,
            "reward": t.verdict.reward,
            "raw_reward": t.verdict.raw_reward,
            "judge": t.verdict.judge,
            "judge_reason": t.verdict.judge_reason,
            "started_at": t.started_at,
            "seconds": t.seconds,
            "prompt_tokens": t.prompt_tokens,
            "completion_tokens": t.completion_tokens,
            "workflow_calls": _dumps([c.model_dump(mode="json") for c in t.workflow_calls]),
        }
        columns = ", ".join(f'"{c}"' for c in values)
        marks = ", ".join(f":{c}" for c in values)
        updates = ", ".join(f'"{c}" = excluded."{c}"' for c in values if c != "id")
        with self._lock, self._conn:
            self._conn.execute(
                f"INSERT INTO episode({columns}) VALUES ({marks}) ON CONFLICT(id) DO UPDATE SET {updates}",
                values,
            )

    def set_verdict(self, episode_id: str, verdict: Verdict) -> int:
        """Store a verdict; returns the number of episodes updated (0 when the id is unknown)."""
        with self._lock, self._conn:
            cur = self._conn.execute(
                "UPDATE episode SET reward = ?, raw_reward = ?, judge = ?, judge_reason = ? WHERE id = ?",
                (verdict.reward, verdict.raw_reward, verdict.judge, verdict.judge_reason, episode_id),
            )
            return cur.rowcount

    def upsert_step(self, values: dict, *, replace: bool = True) -> None:
        """Write one step. `replace=False` keeps a row already there (used to back-fill on episode end)."""
        columns = ", ".join(values)
        marks = ", ".join(f":{c}" for c in values)
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        with self._lock, self._conn:
            self._conn.execute(f"{verb} INTO step({columns}) VALUES ({marks})", values)

    def ended_task_keys(self) -> set[str]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT task_key FROM episode WHERE status = 'ended'"
            ).fetchall()
        return {r["task_key"] for r in rows}

    def close(self) -> None:
        with self._lock:
            self._conn.close()


# An episode row with its number of recorded steps and of workflow sub-steps among them.
_EPISODE_SELECT = (
    "SELECT e.*, (SELECT COUNT(*) FROM step s WHERE s.episode_id = e.id) AS steps,"
    " (SELECT COUNT(*) FROM step s WHERE s.episode_id = e.id AND s.called_by IS NOT NULL) AS sub_steps"
    " FROM episode e"
)


class RunDatabase:
    """Read side of a run folder: the run, its episodes and steps as pydantic rows."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        path = self.run_dir / DB_NAME
        if not path.is_file():
            raise DataError(f"{self.run_dir}: no {DB_NAME} here; expected a run folder written by `awm run`")
        self._conn = _connect(path, read_only=True)

    def __enter__(self) -> RunDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._conn.close()

    def _row(self, model: type[BaseModel], row: sqlite3.Row, json_fields: tuple[str, ...]) -> Any:
        data = dict(row)
        try:
            for field in json_fields:
                if data.get(field) is not None:
                    data[field] = json.loads(data[field])
            return model.model_validate(data)
        except (ValueError, ValidationError) as exc:
            key = data.get("id") or f"{data.get('episode_id')}#{data.get('idx')}"
            raise DataError(f"{self.run_dir / DB_NAME}: {model.__name__} {key}: {exc}") from None

    def run(self) -> RunRow:
        row = self._conn.execute("SELECT * FROM run LIMIT 1").fetchone()
        if row is None:
            raise DataError(f"{self.run_dir / DB_NAME}: the run table is empty")
        return self._row(RunRow, row, ("config",))

    def episodes(self) -> list[EpisodeRow]:
        """All episodes in the order they started (then by id, for a stable order)."""
        rows = self._conn.execute(f"{_EPISODE_SELECT} ORDER BY e.started_at, e.rowid").fetchall()
        return [self._episode_row(r) for r in rows]

    def episode(self, episode_id: str) -> EpisodeRow | None:
        """One episode by its exact id (None when the run has no such episode): one row, not the list."""
        row = self._conn.execute(f"{_EPISODE_SELECT} WHERE e.id = ?", (episode_id,)).fetchone()
        return None if row is None else self._episode_row(row)

    def _episode_row(self, row: sqlite3.Row) -> EpisodeRow:
        return self._row(EpisodeRow, row, ("task", "workflow_calls"))

    def steps(self, episode_id: str) -> list[StepRow]:
        rows = self._conn.execute(
            "SELECT * FROM step WHERE episode_id = ? ORDER BY idx", (episode_id,)
        ).fetchall()
        return [self._step_row(r) for r in rows]

    def step(self, episode_id: str, index: int) -> StepRow | None:
        """One step of an episode (None when it was not recorded): what serving its screenshot needs."""
        row = self._conn.execute(
            "SELECT * FROM step WHERE episode_id = ? AND idx = ?", (episode_id, index)
        ).fetchone()
        return None if row is None else self._step_row(row)

    def _step_row(self, row: sqlite3.Row) -> StepRow:
        return self._row(StepRow, row, ("action", "target", "timings", "approval", "prompt", "box", "guidance"))

    def recoveries(self) -> dict[str, int]:
        """Recoveries by episode id, every episode of the run listed (0 when none): failed top-level
        steps the agent got past, i.e. not ok and followed later by an ok step; workflow sub-steps are
        left out (their caller's outcome already says how the call went).

        One aggregate query, so the runs listing counts them without reading any step into Python.
        """
        rows = self._conn.execute(
            "SELECT e.id, COUNT(s.idx) FROM episode e"
            " LEFT JOIN (SELECT episode_id, MAX(idx) AS last_ok FROM step"
            "            WHERE called_by IS NULL AND outcome = 'ok' GROUP BY episode_id) k ON k.episode_id = e.id"
            " LEFT JOIN step s ON s.episode_id = e.id AND s.called_by IS NULL AND s.outcome != 'ok'"
            "                     AND s.idx < k.last_ok"
            " GROUP BY e.id"
        ).fetchall()
        return {episode_id: count for episode_id, count in rows}

    def find_episode(self, ref: str) -> EpisodeRow:
        """An episode by exact id, unique id prefix, or task key (the latest attempt of that task)."""
        exact = self.episode(ref)
        if exact is not None:
            return exact
        episodes = self.episodes()
        by_prefix = [e for e in episodes if e.id.startswith(ref)]
        if len(by_prefix) == 1:
            return by_prefix[0]
        if len(by_prefix) > 1:
            ids = ", ".join(e.id for e in by_prefix[:5])
            raise DataError(
                f"{self.run_dir}: episode prefix '{ref}' matches {len(by_prefix)} episodes ({ids}); give more characters"
            )
        by_task = [e for e in episodes if e.task_key == ref]
        if by_task:
            return by_task[-1]
        raise DataError(
            f"{self.run_dir}: no episode with id, id prefix or task key '{ref}'; `awm traces show {self.run_dir}` lists them"
        )

    def trajectory(self, ref: str) -> Trajectory:
        """The episode's trajectory (`ref` as in `find_episode`): its JSON file when the episode
        ended, else rebuilt from the rows. Rebuilding matters for an episode that crashed: the rows
        are then the only record.
        """
        return self.trajectory_of(self.find_episode(ref))

    def trajectory_of(self, episode: EpisodeRow, steps: list[StepRow] | None = None) -> Trajectory:
        """`trajectory` of an episode row already read; `steps`, its step rows when the caller has
        them too (the episode page does), so a rebuild reads nothing twice."""
        path = trajectory_path(self.run_dir, episode.id)
        if path.is_file():
            return load_trajectory(path)
        return Trajectory(
            trajectory_id=episode.id,
            task=episode.task,
            steps=[s.to_step() for s in (self.steps(episode.id) if steps is None else steps)],
            end=episode.end,  # type: ignore[arg-type]
            final_answer=episode.final_answer,
            verdict=episode.verdict,
            model=episode.model,
            memory_scope=episode.scope or None,
            memory_version=episode.memory_version,
            workflow_calls=episode.workflow_calls,
            started_at=episode.started_at,
            seconds=episode.seconds,
        )


def open_run(run_dir: Path) -> RunDatabase:
    """Open a run folder for reading (raises `DataError` when it is not one)."""
    return RunDatabase(run_dir)
