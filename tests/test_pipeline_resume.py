"""Kill -9 in the middle of an online run, resume: each episode exactly once, no commit twice."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from awm.memory.store import WorkflowStore
from awm.pipeline.driver import resume

ROOT = Path(__file__).resolve().parent.parent
KEYS = [
    "browsergym/miniwob.click-test#0",
    "browsergym/miniwob.click-test#1",
    "browsergym/miniwob.login-user#0",
    "browsergym/miniwob.login-user#1",
]


def _query(db: Path, sql: str) -> list[tuple]:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # not created yet, or a table not there yet
        return []


def _kill_mid_episode(proc: subprocess.Popen, db: Path, timeout_s: float = 120) -> tuple[int, int]:
    """SIGKILL the pipeline once at least one episode ended and another is recording steps."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the pipeline ended before it could be killed: {proc.stderr.read()!r}")
        ended = _query(db, "SELECT COUNT(*) FROM episode WHERE status = 'ended'")
        running = _query(
            db,
            "SELECT COUNT(*) FROM episode e WHERE status = 'running' AND EXISTS (SELECT 1 FROM step s WHERE s.episode_id = e.id)",
        )
        if ended and running and ended[0][0] >= 2 and running[0][0] >= 1:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            return ended[0][0], running[0][0]
        time.sleep(0.02)
    proc.kill()
    raise AssertionError("no episode was seen in flight")


@pytest.mark.browser
def test_kill_9_mid_episode_then_resume_runs_each_episode_once(tmp_path: Path) -> None:
    cfg = tmp_path / "arm.toml"
    cfg.write_text(
        '[pipeline]\nname = "killed"\ntasks = ["click-test", "login-user"]\nseeds = [0, 1]\npolicy = "scripted"\n'
    )
    run_dir = tmp_path / "run"
    db = run_dir / "run.sqlite"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "awm.pipeline.commands",
            "online",
            "--config",
            str(cfg),
            "--out",
            str(run_dir),
            "--quiet",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    ended, _ = _kill_mid_episode(proc, db)
    assert proc.returncode == -signal.SIGKILL
    partial = _query(db, "SELECT id, task_key FROM episode WHERE status = 'running'")
    assert partial, "an episode was cut short"
    ended_before = dict(_query(db, "SELECT task_key, id FROM episode WHERE status = 'ended'"))

    result = resume(run_dir, show_progress=False)
    assert result.ok, result.error
    assert [t.task.key for t in result.trajectories] == KEYS
    counts = Counter(k for (k,) in _query(db, "SELECT task_key FROM episode"))
    assert counts == Counter(KEYS)  # each episode once: the partial one replaced, none re-run
    for key, episode_id in ended_before.items():  # finished episodes were kept, not re-run
        assert {t.task.key: t.trajectory_id for t in result.trajectories}[key] == episode_id
    partial_ids = {pid for pid, _ in partial}
    assert not partial_ids & {t.trajectory_id for t in result.trajectories}
    orphan_steps = _query(db, "SELECT COUNT(*) FROM step WHERE episode_id NOT IN (SELECT id FROM episode)")
    assert orphan_steps == [(0,)]
    assert not any((run_dir / "screenshots" / pid.replace("#", "_")).exists() for pid in partial_ids)
    with WorkflowStore(run_dir / "memory.sqlite") as store:
        messages = [v.message for scope in store.scopes() for v in store.log(scope)]
    assert sorted(messages) == sorted(f"online after {k}" for k in KEYS)  # no duplicate commits
    assert [(v.memory_version_seen, v.memory_version_after) for v in result.versions] == [
        (None, 1),
        (1, 2),
        (None, 1),
        (1, 2),
    ]
    assert ended >= 2


@pytest.mark.browser
def test_resume_after_a_commit_that_was_not_marked_done_commits_nothing_twice(tmp_path: Path) -> None:
    """A kill between a commit and its state row, and between an episode's end and its state row."""
    from awm.config import load_settings
    from awm.pipeline.config import parse_pipeline_table
    from awm.pipeline.driver import run_arm

    config = parse_pipeline_table({"tasks": ["click-test"], "seeds": [0, 1], "policy": "scripted"})
    run_dir = tmp_path / "run"
    first = run_arm(config, load_settings(), run_dir, show_progress=False)
    assert first.ok, first.error
    with sqlite3.connect(run_dir / "run.sqlite") as conn:  # roll the state back as a kill would leave it
        conn.execute("UPDATE pipeline_state SET status = 'evaluated' WHERE task_key = ?", (KEYS[1],))
        conn.execute(
            "UPDATE pipeline_state SET status = 'solving', episode_id = NULL WHERE task_key = ?", (KEYS[0],)
        )
    again = resume(run_dir, show_progress=False)
    assert again.ok, again.error
    assert [t.trajectory_id for t in again.trajectories] == [t.trajectory_id for t in first.trajectories]
    with WorkflowStore(run_dir / "memory.sqlite") as store:
        assert [v.message for v in store.log("miniwob/click-test")] == [f"online after {k}" for k in KEYS[:2]]
    assert _query(run_dir / "run.sqlite", "SELECT COUNT(*) FROM episode") == [(2,)]
