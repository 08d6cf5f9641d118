"""Run recorder, run database, event log and the `awm traces` viewer."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from awm.cli import app as awm_app
from awm.errors import ConfigError, DataError
from awm.traces import RunRecorder, open_run, read_events
from awm.traces.commands import app
from awm.trajectory import Step, TargetDesc, Task, Trajectory, Verdict, load_trajectory
from awm.webarena.harness import StepCapture

PNG = b"\x89PNG\r\n\x1a\n fake image bytes"


def make_trajectory(
    episode_id: str = "ep-0001", task_id: str = "miniwob.click-button", seed: int = 0
) -> Trajectory:
    task = Task(
        task_id=task_id,
        goal="Click the OK button.",
        scope="miniwob/click-button",
        benchmark="miniwob",
        seed=seed,
    )
    return Trajectory(
        trajectory_id=episode_id, task=task, model="qwen-test", memory_scope=task.scope, memory_version=3
    )


def make_step(index: int, **extra: object) -> Step:
    fields: dict = {
        "index": index,
        "url": f"file:///miniwob/click-button.html#{index}",
        "observation": f"[{10 + index}] button 'OK'\n[{20 + index}] button 'Cancel'",
        "model_output": f"thought... click('{10 + index}')",
        "thought": f"thought number {index}: the OK button is the target",
        "action": {"name": "click", "args": {"bid": str(10 + index)}},
        "action_str": f"click('{10 + index}')",
        "target": TargetDesc(role="button", label="OK"),
        "feedback": f"clicked {10 + index}",
        "timings_ms": {"llm": 120.5, "exec": 30.0, "observe": 12.0, "parse": 0.4},
        "prompt_tokens": 150 + index,
        "completion_tokens": 12,
        "llm_calls": 1,
        "guidance": ["spent_choices", "goal_note"][: index % 3],  # the filters that acted, none at step 0
    }
    fields.update(extra)
    return Step(**fields)


def read_step_rows(run_dir: Path, episode_id: str) -> list[sqlite3.Row]:
    """A second, independent connection: what any other process would see right now."""
    conn = sqlite3.connect(run_dir / "run.sqlite")
    conn.row_factory = sqlite3.Row
    try:
        return conn.execute("SELECT * FROM step WHERE episode_id = ? ORDER BY idx", (episode_id,)).fetchall()
    finally:
        conn.close()


@pytest.fixture()
def recorder(tmp_path: Path):
    rec = RunRecorder(
        tmp_path / "run", config={"llm": {"model": "qwen-test"}}, config_hash="abc123", name="test-run"
    )
    yield rec
    rec.close()


def test_steps_are_visible_to_another_connection_as_they_happen(recorder: RunRecorder) -> None:
    traj = make_trajectory()
    recorder.start_episode(traj)
    episodes = open_run(recorder.run_dir).episodes()
    assert [(e.id, e.status, e.task_key) for e in episodes] == [
        ("ep-0001", "running", "miniwob.click-button#0")
    ]
    for index in range(3):
        step = make_step(index).model_copy(update={"prompt_hash": f"hash{index}"})
        traj.steps.append(step)
        recorder.record_step(traj, step)
        rows = read_step_rows(recorder.run_dir, traj.trajectory_id)
        assert [r["idx"] for r in rows] == list(range(index + 1))
        assert rows[-1]["thought"] == step.thought
        assert rows[-1]["prompt_hash"] == f"hash{index}"
        assert rows[-1]["llm_ms"] == 120.5 and rows[-1]["exec_ms"] == 30.0 and rows[-1]["observe_ms"] == 12.0
        assert json.loads(rows[-1]["timings"]) == {"parse": 0.4}
    with open_run(recorder.run_dir) as db:
        (row,) = db.episodes()
        assert row.steps == 3 and row.status == "running"
        assert [s.to_step() for s in db.steps(traj.trajectory_id)] == traj.steps


def test_recoveries_count_failed_top_level_steps_the_agent_got_past(recorder: RunRecorder) -> None:
    """One SQL aggregate: a failed step counts when an ok step comes later; workflow sub-steps never."""
    outcomes = {
        "ep-a": ["parse_error", "ok", "target_not_found", "no_progress"],  # the last two: never got past
        "ep-b": ["parse_error", "not_interactable", "ok", "ok"],
        "ep-c": ["no_progress"],
        "ep-d": [],
    }
    for episode_id, outs in outcomes.items():
        traj = make_trajectory(episode_id)
        recorder.start_episode(traj)
        for index, outcome in enumerate(outs):
            step = make_step(index, outcome=outcome)
            traj.steps.append(step)
            recorder.record_step(traj, step)
    # ep-c again: a failed workflow sub-step (called by step 0) and a later ok sub-step change nothing
    traj = make_trajectory("ep-c")
    for index, outcome in ((1, "action_error"), (2, "ok")):
        sub = make_step(index, outcome=outcome, called_by=0)
        recorder.record_step(traj, sub)
    with open_run(recorder.run_dir) as db:
        assert db.recoveries() == {"ep-a": 1, "ep-b": 2, "ep-c": 0, "ep-d": 0}


def test_one_episode_and_one_step_by_id(recorder: RunRecorder) -> None:
    traj = make_trajectory("ep-x#0")
    recorder.start_episode(traj)
    for index in range(2):
        step = make_step(index)
        traj.steps.append(step)
        recorder.record_step(traj, step)
    with open_run(recorder.run_dir) as db:
        row = db.episode("ep-x#0")
        assert row is not None and row.steps == 2 and row == db.episodes()[0]
        assert db.episode("ep-x") is None  # exact ids only (find_episode takes prefixes)
        step = db.step("ep-x#0", 1)
        assert step is not None and step.to_step() == traj.steps[1]
        assert db.step("ep-x#0", 2) is None
        steps = db.steps("ep-x#0")
        assert db.trajectory_of(row, steps) == db.trajectory("ep-x") == db.trajectory_of(row)


def test_step_recorded_in_finally_survives_the_exception(recorder: RunRecorder) -> None:
    traj = make_trajectory()
    recorder.start_episode(traj)

    def run_one_step() -> None:
        step = make_step(0)
        try:
            raise RuntimeError("browser crashed during exec")
        except RuntimeError as exc:
            step.outcome, step.error = "env_error", str(exc)
            raise
        finally:
            traj.steps.append(step)
            recorder.record_step(traj, step)

    with pytest.raises(RuntimeError):
        run_one_step()
    (row,) = read_step_rows(recorder.run_dir, traj.trajectory_id)
    assert row["outcome"] == "env_error" and row["error"] == "browser crashed during exec"
    # The episode never ended: export rebuilds the trajectory from the rows alone.
    rebuilt = open_run(recorder.run_dir).trajectory("ep-0001")
    assert rebuilt.end == "running" and rebuilt.steps == traj.steps


def test_rerecording_a_step_replaces_it(recorder: RunRecorder) -> None:
    traj = make_trajectory()
    recorder.start_episode(traj)
    first = make_step(0, feedback="first try")
    recorder.record_step(traj, first)
    recorder.record_step(traj, first)
    second = make_step(0, feedback="second try", outcome="target_not_found")
    recorder.record_step(traj, second)
    rows = read_step_rows(recorder.run_dir, traj.trajectory_id)
    assert len(rows) == 1
    assert (rows[0]["feedback"], rows[0]["outcome"]) == ("second try", "target_not_found")


def test_end_episode_writes_row_and_trajectory_json_round_trip(recorder: RunRecorder) -> None:
    traj = make_trajectory()
    recorder.start_episode(traj)
    for index in range(2):
        step = make_step(index)
        traj.steps.append(step)
        recorder.record_step(traj, step, StepCapture(png=PNG) if index == 1 else None)
    traj.steps.append(make_step(2))  # never passed to record_step: end_episode back-fills it
    traj.end, traj.final_answer, traj.seconds = "done", "OK clicked", 4.25
    traj.verdict = Verdict(reward=1.0)
    recorder.record_final(traj, StepCapture(png=PNG + b"end", html="<p>after</p>", final=True))
    recorder.end_episode(traj)

    assert traj.steps[1].screenshot == "screenshots/ep-0001/1.png"
    assert (recorder.run_dir / "screenshots" / "ep-0001" / "1.png").read_bytes() == PNG
    assert traj.meta["final_screenshot"] == "screenshots/ep-0001/final.png"  # the page after the last action
    assert (recorder.run_dir / "screenshots" / "ep-0001" / "final.png").read_bytes() == PNG + b"end"
    assert (recorder.run_dir / "pages" / "ep-0001" / "final.html").read_text() == "<p>after</p>"
    path = recorder.run_dir / "trajectories" / "ep-0001.json"
    assert load_trajectory(path) == traj
    with open_run(recorder.run_dir) as db:
        (row,) = db.episodes()
        assert (row.status, row.end, row.reward, row.steps) == ("ended", "done", 1.0, 3)
        assert (row.prompt_tokens, row.completion_tokens, row.seconds) == (453, 36, 4.25)
        assert (row.scope, row.memory_version, row.model) == ("miniwob/click-button", 3, "qwen-test")
        assert [s.to_step() for s in db.steps("ep-0001")] == traj.steps


def test_record_verdict_updates_database_and_json(recorder: RunRecorder) -> None:
    traj = make_trajectory()
    recorder.start_episode(traj)
    traj.end, traj.verdict = "done", Verdict(reward=0.0)
    recorder.end_episode(traj)
    verdict = Verdict(reward=0.0, judge="failure", judge_reason="the page still shows the form")
    recorder.record_verdict("ep-0001", verdict)
    assert load_trajectory(recorder.run_dir / "trajectories" / "ep-0001.json").verdict == verdict
    (row,) = open_run(recorder.run_dir).episodes()
    assert row.verdict == verdict
    with pytest.raises(DataError, match="no-such-episode"):
        recorder.record_verdict("no-such-episode", verdict)


def test_events_jsonl_is_valid_and_ordered(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with RunRecorder(run_dir, config={}, config_hash="h") as rec:
        traj = make_trajectory()
        rec.start_episode(traj)
        for index in range(2):
            step = make_step(index)
            traj.steps.append(step)
            rec.record_step(traj, step)
        traj.end = "done"
        rec.end_episode(traj)
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    objects = [json.loads(line) for line in lines]
    assert [o["kind"] for o in objects] == [
        "run_start",
        "episode_start",
        "step",
        "step",
        "episode_end",
        "run_close",
    ]
    assert objects[2]["data"]["action_str"] == "click('10')" and objects[2]["episode_id"] == "ep-0001"
    assert "observation" not in objects[2]["data"]  # summaries only; the database holds the full step
    assert [e.kind for e in read_events(run_dir / "events.jsonl")] == [o["kind"] for o in objects]
    assert open_run(run_dir).run().status == "done"


def test_read_events_skips_a_torn_tail_but_not_a_bad_middle_line(tmp_path: Path) -> None:
    good = json.dumps({"ts": "t", "kind": "step", "run_id": "r", "episode_id": "e", "data": {}})
    torn = tmp_path / "torn.jsonl"
    torn.write_text(good + "\n" + good[:20])
    assert len(list(read_events(torn))) == 1
    broken = tmp_path / "broken.jsonl"
    broken.write_text(good + "\n{not json\n" + good + "\n")
    with pytest.raises(DataError, match="line 2"):
        list(read_events(broken))


def test_finished_episodes_and_resume(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    rec = RunRecorder(run_dir, config={}, config_hash="h1")
    done, crashed = make_trajectory("ep-a", seed=0), make_trajectory("ep-b", seed=1)
    for traj in (done, crashed):
        rec.start_episode(traj)
    done.end = "done"
    rec.end_episode(done)
    assert rec.finished_episodes() == {"miniwob.click-button#0"}
    run_id = rec.run_id
    rec.close()

    with pytest.raises(ConfigError, match="h1"):
        RunRecorder(run_dir, config={}, config_hash="other")
    resumed = RunRecorder(run_dir, config={}, config_hash="h1")
    assert resumed.run_id == run_id
    assert resumed.finished_episodes() == {"miniwob.click-button#0"}
    retry = make_trajectory("ep-c", seed=1)
    resumed.start_episode(retry)
    retry.end = "max_steps"
    resumed.end_episode(retry)
    assert resumed.finished_episodes() == {"miniwob.click-button#0", "miniwob.click-button#1"}
    resumed.close()
    kinds = [e.kind for e in read_events(run_dir / "events.jsonl")]
    assert kinds.count("run_start") == 1 and kinds.count("run_resume") == 1


def _finished_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "runs" / "r1"
    with RunRecorder(run_dir, config={}, config_hash="h") as rec:
        for episode_id, seed in (("aa11", 0), ("aa22", 1)):
            traj = make_trajectory(episode_id, seed=seed)
            rec.start_episode(traj)
            for index in range(2):
                step = make_step(index, thought=f"{episode_id} thinks step {index}")
                traj.steps.append(step)
                rec.record_step(traj, step)
            traj.end, traj.verdict = "done", Verdict(reward=1.0 if seed == 0 else 0.0)
            rec.end_episode(traj)
    return run_dir


def test_viewer_lists_episodes_and_shows_steps(tmp_path: Path) -> None:
    run_dir = _finished_run(tmp_path)
    runner = CliRunner()
    table = runner.invoke(app, ["show", str(run_dir)], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert "miniwob.click-button#0" in table.output and "miniwob.click-button#1" in table.output
    assert "2 episodes, 1 solved (full reward)" in table.output

    episode = runner.invoke(app, ["show", str(run_dir), "aa22"], env={"COLUMNS": "200"})
    assert episode.exit_code == 0, episode.output
    assert "aa22 thinks step 0" in episode.output and "aa22 thinks step 1" in episode.output
    assert "click('11')" in episode.output and "llm 120 ms" in episode.output
    assert "aa11 thinks" not in episode.output

    by_task = runner.invoke(app, ["show", str(run_dir), "miniwob.click-button#0", "--json"])
    payload = json.loads(by_task.output)
    assert payload["episode"]["id"] == "aa11" and [s["idx"] for s in payload["steps"]] == [0, 1]

    ambiguous = runner.invoke(app, ["show", str(run_dir), "aa"])
    assert isinstance(ambiguous.exception, DataError) and "matches 2 episodes" in str(ambiguous.exception)

    runs = runner.invoke(app, ["list", str(tmp_path / "runs")], env={"COLUMNS": "200"})
    assert runs.exit_code == 0 and "r1" in runs.output


def test_export_writes_the_trajectory(tmp_path: Path) -> None:
    run_dir = _finished_run(tmp_path)
    out = tmp_path / "export.json"
    result = CliRunner().invoke(awm_app, ["traces", "export", str(run_dir), "aa11", str(out)])
    assert result.exit_code == 0, result.output
    assert load_trajectory(out) == load_trajectory(run_dir / "trajectories" / "aa11.json")


def _unwritable(tmp_path: Path) -> list[Path]:
    """Folders no file can be made in, even by root: one below a plain file, and one in /proc."""
    (tmp_path / "a-file").write_text("not a folder")
    return [tmp_path / "a-file" / "out", *([Path("/proc/awm-forbidden")] if Path("/proc").is_dir() else [])]


@pytest.mark.parametrize("how", ["json", "html"])
def test_an_export_that_cannot_be_written_is_one_line_and_exit_2(tmp_path: Path, how: str) -> None:
    """Checked before any work, so nothing is left half-written (the JSON and the --html exports;
    --mind2web in test_traces_mind2web_export)."""
    run_dir = _finished_run(tmp_path)
    for folder in _unwritable(tmp_path):
        dest = folder / "sub" / ("aa11.json" if how == "json" else "run.html")
        args = [str(run_dir), "aa11", str(dest)] if how == "json" else [str(run_dir), "--html", str(dest)]
        done = subprocess.run(
            [sys.executable, "-m", "awm.cli", "traces", "export", *args], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert str(dest) in done.stderr and "cannot be written" in done.stderr
        assert not folder.exists() or folder.is_file()


def test_open_run_on_a_folder_without_database(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no run.sqlite"):
        open_run(tmp_path)
