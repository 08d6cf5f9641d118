"""Traces: every step of every episode, written as it happens, and read back for viewing.

A run folder holds `run.sqlite` (the run database), `events.jsonl` (the event log),
`screenshots/<episode>/<step>.png`, `pages/<episode>/<step>.html` (the page each step decided on, its
elements carrying BrowserGym's ``bid``) and `trajectories/<episode_id>.json` (written on episode end).
`RunRecorder` is the one object a runner uses; `open_run` is the read side.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from awm.errors import ConfigError, DataError
from awm.files import write_bytes_atomic, write_text_atomic
from awm.trajectory import Step, Trajectory, Verdict, load_trajectory, save_trajectory, utc_now

from .db import (
    DB_NAME,
    EVENTS_NAME,
    EpisodeRow,
    RunDatabase,
    RunRow,
    RunWriter,
    StepRow,
    open_run,
    safe_name,
    screenshot_relpath,
    step_values,
    trajectory_path,
)
from .events import Event, EventLog, episode_end_data, episode_start_data, read_events, step_data

if TYPE_CHECKING:
    from awm.webarena.harness import StepCapture

__all__ = [
    "PAGES_DIR",
    "EpisodeRow",
    "Event",
    "RunDatabase",
    "RunRecorder",
    "RunRow",
    "StepRow",
    "open_run",
    "page_relpath",
    "read_events",
]

PAGES_DIR = "pages"


def page_relpath(episode_id: str, index: int | str) -> str:
    """A step's page HTML, relative to the run folder: `pages/<safe episode name>/<index>.html` (`final`:
    the page after the last action)."""
    return f"{PAGES_DIR}/{safe_name(episode_id)}/{index}.html"


class RunRecorder:
    """Writes a run folder as the run goes. Call it from the driver process only.

    Opening an existing run folder resumes it (same run id), but only with the same config hash:
    mixing two configurations in one run would make its numbers meaningless.
    """

    def __init__(self, run_dir: Path, *, config: dict[str, Any], config_hash: str, name: str = "") -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._db = RunWriter(self.run_dir / DB_NAME)
        existing = self._db.run_row()
        if existing is None:
            self.run_id = uuid.uuid4().hex[:12]
            self._db.insert_run(
                self.run_id,
                name=name or self.run_dir.name,
                created_at=utc_now(),
                config=config,
                config_hash=config_hash,
            )
            kind = "run_start"
        else:
            if existing["config_hash"] != config_hash:
                self._db.close()
                raise ConfigError(
                    f"{self.run_dir}: this run was made with config hash {existing['config_hash']}, "
                    f"not {config_hash}; resume it with the same config or choose a new run folder"
                )
            self.run_id = existing["id"]
            self._db.set_run_status("running")
            kind = "run_resume"
        self._events = EventLog(self.run_dir / EVENTS_NAME)
        self._events.append(
            Event(kind=kind, run_id=self.run_id, data={"config_hash": config_hash, "name": name})
        )
        self._closed = False

    def __enter__(self) -> RunRecorder:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self.close(status="failed" if exc_type is not None else "done")

    def start_episode(self, trajectory: Trajectory) -> None:
        """Create the episode row (status running) before the first step, so a crash still shows it."""
        self._db.upsert_episode(self.run_id, trajectory, status="running")
        self._events.append(
            Event(
                kind="episode_start",
                run_id=self.run_id,
                episode_id=trajectory.trajectory_id,
                data=episode_start_data(trajectory),
            )
        )

    def record_step(
        self,
        trajectory: Trajectory,
        step: Step,
        capture: StepCapture | None = None,
    ) -> None:
        """Write one step now (re-recording the same index replaces it).

        The capture's screenshot is saved under `screenshots/<episode>/<index>.png` and its run-relative
        path is set on `step.screenshot`, so the trajectory JSON written at episode end points to it; its
        page HTML goes to `pages/<episode>/<index>.html` (`page_relpath`).
        """
        episode_id = trajectory.trajectory_id
        screenshot = step.screenshot
        if capture is not None and capture.png is not None:
            screenshot = screenshot_relpath(episode_id, step.index)
            write_bytes_atomic(self.run_dir / screenshot, capture.png)
            step.screenshot = screenshot
        if capture is not None and capture.html is not None:
            write_text_atomic(self.run_dir / page_relpath(episode_id, step.index), capture.html)
        self._db.upsert_step(
            step_values(
                episode_id, step, prompt_hash=step.prompt_hash, screenshot=screenshot, recorded_at=utc_now()
            )
        )
        self._events.append(
            Event(
                kind="step",
                run_id=self.run_id,
                episode_id=episode_id,
                data=step_data(step, prompt_hash=step.prompt_hash, screenshot=screenshot),
            )
        )

    def record_final(self, trajectory: Trajectory, capture: StepCapture) -> None:
        """Keep the page after the episode's last action: `screenshots/<episode>/final.png` (its path in
        `meta["final_screenshot"]`, so the trajectory JSON written at episode end points to it) and
        `pages/<episode>/final.html`. A failed episode's end state is only visible here."""
        episode_id = trajectory.trajectory_id
        if capture.png is not None:
            path = screenshot_relpath(episode_id, "final")
            write_bytes_atomic(self.run_dir / path, capture.png)
            trajectory.meta["final_screenshot"] = path
        if capture.html is not None:
            write_text_atomic(self.run_dir / page_relpath(episode_id, "final"), capture.html)

    def end_episode(self, trajectory: Trajectory) -> None:
        """Close the episode: final row (end, verdict, seconds, tokens), any steps not yet recorded,
        and the full trajectory JSON (atomic write)."""
        episode_id = trajectory.trajectory_id
        for step in trajectory.steps:  # back-fill only: rows written by record_step are kept as they are
            self._db.upsert_step(
                step_values(
                    episode_id, step, prompt_hash=step.prompt_hash, screenshot=step.screenshot, recorded_at=utc_now()
                ),
                replace=False,
            )
        self._db.upsert_episode(self.run_id, trajectory, status="ended")
        save_trajectory(trajectory, trajectory_path(self.run_dir, episode_id))
        self._events.append(
            Event(
                kind="episode_end",
                run_id=self.run_id,
                episode_id=episode_id,
                data=episode_end_data(trajectory),
            )
        )

    def record_verdict(self, episode_id: str, verdict: Verdict) -> None:
        """Store a verdict that came later (e.g. the judge's), in the database and the trajectory JSON."""
        if self._db.set_verdict(episode_id, verdict) == 0:
            raise DataError(f"{self.run_dir / DB_NAME}: no episode '{episode_id}' to record a verdict for")
        path = trajectory_path(self.run_dir, episode_id)
        if path.is_file():
            trajectory = load_trajectory(path)
            trajectory.verdict = verdict
            save_trajectory(trajectory, path)
        self._events.append(
            Event(
                kind="verdict",
                run_id=self.run_id,
                episode_id=episode_id,
                data=verdict.model_dump(mode="json"),
            )
        )

    def finished_episodes(self) -> set[str]:
        """Task keys of ended episodes: what a resumed run skips."""
        return self._db.ended_task_keys()

    def close(self, status: str = "done") -> None:
        """Mark the run `done` (or `failed`) and release the files; calling it twice is harmless."""
        if self._closed:
            return
        self._closed = True
        self._db.set_run_status(status)
        self._events.append(Event(kind="run_close", run_id=self.run_id, data={"status": status}))
        self._events.close()
        self._db.close()
