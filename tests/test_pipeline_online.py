"""The online loop in a real browser: memory versions in stream order, each episode shown the last one."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from awm.config import load_settings
from awm.memory.store import WorkflowStore
from awm.pipeline.config import parse_pipeline_table
from awm.pipeline.driver import run_arm

CLICK, LOGIN = "browsergym/miniwob.click-test", "browsergym/miniwob.login-user"


@pytest.mark.browser
def test_online_loop_commits_after_each_task_and_the_next_seed_sees_it(tmp_path: Path) -> None:
    config = parse_pipeline_table(
        {"name": "online-t", "tasks": ["click-test", "login-user"], "seeds": [0, 1], "policy": "scripted"}
    )
    run_dir = tmp_path / "run"
    result = run_arm(config, load_settings(), run_dir, show_progress=False)
    assert result.ok, result.error
    keys = [f"{CLICK}#0", f"{CLICK}#1", f"{LOGIN}#0", f"{LOGIN}#1"]
    assert [t.task.key for t in result.trajectories] == keys  # stream order: task, then seed
    assert all(t.verdict.reward == 1.0 for t in result.trajectories)
    seen = {v.task_key: (v.memory_version_seen, v.memory_version_after) for v in result.versions}
    assert seen == {keys[0]: (None, 1), keys[1]: (1, 2), keys[2]: (None, 1), keys[3]: (1, 2)}
    # the episode itself records the version it was shown (what the agent's prompt would carry)
    by_key = {t.task.key: t for t in result.trajectories}
    assert by_key[keys[1]].memory_version == 1 and by_key[keys[1]].memory_scope == "miniwob/click-test"
    assert by_key[keys[3]].memory_version == 1 and by_key[keys[0]].memory_version is None
    assert by_key[keys[3]].workflows_used == []  # a scripted policy has no prompt to carry workflows
    with sqlite3.connect(run_dir / "run.sqlite") as conn:
        rows = dict(conn.execute("SELECT task_key, memory_version FROM episode").fetchall())
        states = conn.execute("SELECT task_key, status FROM pipeline_state ORDER BY position").fetchall()
    assert rows[keys[1]] == 1 and rows[keys[3]] == 1
    assert states == [(k, "done") for k in keys]
    with WorkflowStore(run_dir / "memory.sqlite") as store:  # the arm's own memory, in its run folder
        assert store.scopes() == ["miniwob/click-test", "miniwob/login-user"]
        log = store.log("miniwob/login-user")
        head = store.head("miniwob/login-user")
    assert [v.message for v in log] == [f"online after {keys[2]}", f"online after {keys[3]}"]
    assert head is not None and [s.action for s in head.workflows[0].steps] == ["fill", "fill", "click"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert len(summary["episodes"]) == 4

    # running the finished arm again changes nothing and starts no browser
    again = run_arm(config, load_settings(), run_dir, show_progress=False)
    assert [t.trajectory_id for t in again.trajectories] == [t.trajectory_id for t in result.trajectories]
    with WorkflowStore(run_dir / "memory.sqlite") as store:
        assert len(store.log("miniwob/login-user")) == 2


@pytest.mark.browser
def test_offline_arm_freezes_memory_induced_from_an_earlier_run(tmp_path: Path) -> None:
    fixtures = Path(__file__).parent / "fixtures" / "trajectories"
    config = parse_pipeline_table(
        {
            "name": "offline-t",
            "tasks": ["login-user"],
            "seeds": [0],
            "policy": "scripted",
            "memory": "offline",
            "offline_from": [str(fixtures)],
        }
    )
    result = run_arm(config, load_settings(), tmp_path / "run", show_progress=False)
    assert result.ok, result.error
    [record] = result.versions
    assert record.memory_version_seen == 1 and record.memory_version_after == 1  # read-only while solving
    [trajectory] = result.trajectories
    assert trajectory.memory_version == 1 and trajectory.verdict.reward == 1.0
    with WorkflowStore(tmp_path / "run" / "memory.sqlite") as store:
        [version] = store.log("miniwob/login-user")
    assert version.message.startswith("offline rule from 1 source(s)")


@pytest.mark.browser
def test_offline_then_online_seeds_the_memory_and_keeps_growing_it(tmp_path: Path) -> None:
    fixtures = Path(__file__).parent / "fixtures" / "trajectories"
    config = parse_pipeline_table(
        {
            "name": "offline-online-t",
            "tasks": ["login-user"],
            "seeds": [0, 1],
            "policy": "scripted",
            "memory": "online",
            "offline_from": [str(fixtures)],
        }
    )
    result = run_arm(config, load_settings(), tmp_path / "run", show_progress=False)
    assert result.ok, result.error
    seen = [(v.memory_version_seen, v.memory_version_after) for v in result.versions]
    assert seen == [(1, 2), (2, 3)]  # the first test task already reads the memory induced from the sources
    with WorkflowStore(tmp_path / "run" / "memory.sqlite") as store:
        log = store.log("miniwob/login-user")
    assert log[0].message.startswith("offline rule from 1 source(s)")
    assert [v.message for v in log[1:]] == [f"online after {LOGIN}#0", f"online after {LOGIN}#1"]


@pytest.mark.browser
def test_online_arm_with_two_workers_runs_scopes_in_parallel_and_each_scope_in_order(tmp_path: Path) -> None:
    config = parse_pipeline_table(
        {
            "name": "online-2",
            "tasks": ["click-test", "login-user"],
            "seeds": [0, 1],
            "policy": "scripted",
            "workers": 2,
        }
    )
    result = run_arm(config, load_settings(), tmp_path / "run", show_progress=False)
    assert result.ok, result.error
    keys = [f"{CLICK}#0", f"{CLICK}#1", f"{LOGIN}#0", f"{LOGIN}#1"]
    assert [t.task.key for t in result.trajectories] == keys
    seen = {v.task_key: (v.memory_version_seen, v.memory_version_after) for v in result.versions}
    # the same versions as with one worker: each seed 1 saw the version committed after its seed 0
    assert seen == {keys[0]: (None, 1), keys[1]: (1, 2), keys[2]: (None, 1), keys[3]: (1, 2)}
    pids = {t.task.key: t.meta["worker_pid"] for t in result.trajectories}
    assert len(set(pids.values())) == 2  # two worker processes shared the stream
    starts = {t.task.key: t.started_at for t in result.trajectories}
    assert starts[keys[0]] <= starts[keys[1]] and starts[keys[2]] <= starts[keys[3]]


@pytest.mark.browser
def test_an_induction_that_teaches_nothing_is_recorded_and_the_stream_goes_on(tmp_path: Path) -> None:
    from tests.stub_llm_server import Reply, StubLLMServer

    config = parse_pipeline_table(
        {
            "name": "neural-t",
            "tasks": ["click-test"],
            "seeds": [0, 1],
            "policy": "scripted",
            "induction": "neural",
        }
    )
    with StubLLMServer(default=Reply(text="I like turtles. No workflow here.")) as stub:
        settings = load_settings(
            overrides={
                "llm": {"backend": "openai", "base_url": stub.base_url, "model": "stub", "cache": False},
                "memory_db": str(tmp_path / "unused.sqlite"),
            }
        )
        result = run_arm(config, settings, tmp_path / "run", show_progress=False)
        asked = len(stub.requests)
    assert result.ok, result.error
    assert [t.verdict.reward for t in result.trajectories] == [1.0, 1.0]  # both episodes ran
    assert asked == 2  # one induction call per commit point
    assert all(
        v.induction.startswith("no workflow: neural induction produced no usable workflow")
        for v in result.versions
    )
    assert [v.memory_version_after for v in result.versions] == [None, None]  # nothing committed
    assert result.usage["induction"].calls == 2  # its tokens are counted
    with sqlite3.connect(tmp_path / "run" / "run.sqlite") as conn:
        notes = [r[0] for r in conn.execute("SELECT induction FROM pipeline_state ORDER BY position")]
    assert all("no usable workflow" in n for n in notes)
