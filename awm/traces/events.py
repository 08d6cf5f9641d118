"""The event log (`events.jsonl`): one JSON object per line, appended and flushed per event.

Why a second record next to the database: a plain append-only text file survives anything short
of a disk failure, can be tailed while a run is going (`tail -f events.jsonl | jq`), and needs
no SQLite to read. It carries summaries (what happened, when); the database carries the full steps.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, Field, ValidationError

from awm.errors import DataError
from awm.trajectory import Step, Trajectory, utc_now

EventKind = Literal["run_start", "run_resume", "episode_start", "step", "episode_end", "verdict", "run_close"]

_DURABLE = ("episode_end", "run_close")


class Event(BaseModel):
    """One line of the log. `data` holds the kind-specific fields (see the `*_event` builders)."""

    ts: str = Field(default_factory=utc_now)
    kind: EventKind
    run_id: str
    episode_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


def episode_start_data(trajectory: Trajectory) -> dict[str, Any]:
    return {
        "task_key": trajectory.task.key,
        "goal": trajectory.task.goal,
        "scope": trajectory.memory_scope or trajectory.task.scope,
        "memory_version": trajectory.memory_version,
        "model": trajectory.model,
    }


def step_data(step: Step, *, prompt_hash: str = "", screenshot: str | None = None) -> dict[str, Any]:
    """A step's summary: enough to follow a run live, without the (large) observation text."""
    return {
        "index": step.index,
        "outcome": step.outcome,
        "thought": step.thought,
        "action_str": step.action_str,
        "error": step.error,
        "feedback": step.feedback,
        "url": step.url,
        "timings_ms": step.timings_ms,
        "prompt_tokens": step.prompt_tokens,
        "completion_tokens": step.completion_tokens,
        "prompt_hash": prompt_hash,
        "screenshot": screenshot,
        "called_by": step.called_by,
        "workflow": step.workflow,
        "grounding": step.grounding,
        "approval": None if step.approval is None else step.approval.model_dump(mode="json"),
        "reaction": step.reaction,
    }


def episode_end_data(trajectory: Trajectory) -> dict[str, Any]:
    return {
        "task_key": trajectory.task.key,
        "end": trajectory.end,
        "steps": len(trajectory.steps),
        "verdict": trajectory.verdict.model_dump(mode="json"),
        "seconds": trajectory.seconds,
        "prompt_tokens": trajectory.prompt_tokens,
        "completion_tokens": trajectory.completion_tokens,
    }


class EventLog:
    """Appends events to a JSONL file; each line is written whole and flushed before returning."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def append(self, event: Event) -> None:
        line = event.model_dump_json() + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()
            if event.kind in _DURABLE:  # the few events worth a disk sync: ends of things
                os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()


def read_events(path: Path) -> Iterator[Event]:
    """Events in file order. A torn last line (a crash mid-write) is skipped; any other bad line
    raises `DataError` naming the file and line number."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: no such event log") from None
    lines = text.split("\n")
    torn_tail = not text.endswith("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield Event.model_validate(json.loads(line))
        except (ValueError, ValidationError) as exc:
            if torn_tail and number == len(lines):
                return
            raise DataError(
                f"{path}: line {number}: not a valid event ({exc.__class__.__name__}: {exc})"
            ) from None
