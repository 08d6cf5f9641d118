"""Replay: admission by replay (ASI's verification) and `awm replay`, on MiniWoB++ pages in real Chromium.

A scripted policy solves the source episodes (no model); the workflows induced from them are replayed
on a fresh page of the same task and seed, and the task's own reward decides.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from awm.assets import configure_runtime_env
from awm.config import BrowserSettings
from awm.induction.rule import induce_rule
from awm.memory.workflow import Workflow
from awm.pipeline.replay import ReplayGate, recording_workflow, replay_values, verify_candidates
from awm.trajectory import TargetDesc, Trajectory
from awm.webarena.env import BrowserSession
from awm.webarena.harness import HarnessConfig, run_episode
from awm.webarena.policies import MiniWobScriptedPolicy
from awm.webarena.tasks import resolve_tasks

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def solved() -> Iterator[Trajectory]:
    configure_runtime_env()
    [task] = resolve_tasks("miniwob", "login-user", [3])
    with BrowserSession(BrowserSettings(pre_observation_delay=0.3, slow_mo_ms=0)) as session:
        trajectory = run_episode(session, MiniWobScriptedPolicy(), task, HarnessConfig(max_steps=5))
    assert trajectory.verdict.raw_reward == 1.0
    yield trajectory


@pytest.fixture()
def gate(tmp_path: Path) -> Iterator[ReplayGate]:
    gate = ReplayGate(tmp_path, BrowserSettings(pre_observation_delay=0.3, slow_mo_ms=0))
    yield gate
    gate.close()


def _with_step(workflow: Workflow, index: int, name: str, **changes: object) -> Workflow:
    steps = list(workflow.steps)
    steps[index] = steps[index].model_copy(update=changes)
    return workflow.model_copy(update={"steps": steps, "name": name})


def test_replay_admits_a_good_workflow_and_refuses_broken_ones(solved: Trajectory, gate: ReplayGate, tmp_path: Path) -> None:
    [good], _ = induce_rule([solved], admission="gt")
    assert good.parameters == ["username", "password"]
    assert replay_values(good, solved) == {}  # the goal states both values
    # a renamed button would still be found (the only button on the page); a link there is none
    missing_link = _with_step(good, 2, "missing link", target=TargetDesc(role="link", label="Cancel"))
    wrong_value = _with_step(good, 1, "wrong value", value="not-the-password", post=None)
    passed, refused = verify_candidates(gate, [good, missing_link, wrong_value], [solved])
    assert [w.name for w in passed] == [good.name]
    provenance = passed[0].provenance
    assert provenance.replay_verdict == "success"
    replay_file = tmp_path / "replays" / f"{provenance.replay_trajectory_id}.json"
    replay = Trajectory.model_validate_json(replay_file.read_text())
    assert replay.meta["replay_of"] == solved.trajectory_id and replay.task.key == solved.task.key
    assert sum(s.llm_calls for s in replay.steps) == 0  # no model call
    assert [s.called_by for s in replay.steps] == [None, 0, 0, 0]
    assert refused[0].startswith("missing link: replay stopped at step 3 of 3 (click [link] Cancel): target_not_found")
    assert refused[1] == "wrong value: every step ran, but the task did not succeed (reward -1.0)"
    checked = _with_step(good, 1, "checked wrong value", value="not-the-password")  # its check still wants the password
    _, [why] = verify_candidates(gate, [checked], [solved])
    assert "stopped at step 2 of 3 (fill [textbox] Password): verify_failed" in why


def test_a_candidate_with_the_steps_of_a_replayed_head_workflow_is_not_replayed_again(
    solved: Trajectory, gate: ReplayGate, tmp_path: Path
) -> None:
    [good], _ = induce_rule([solved], admission="gt")
    replayed = good.provenance.model_copy(update={"replay_trajectory_id": "abc123", "replay_verdict": "success"})
    head = good.model_copy(update={"name": "log in", "provenance": replayed})
    passed, refused = verify_candidates(gate, [good], [solved], known=[head])
    assert refused == [] and [w.name for w in passed] == [good.name]
    assert passed[0].provenance.replay_trajectory_id == "abc123"
    assert passed[0].provenance.replay_verdict == "same steps as 'log in', admitted by its replay"
    assert not (tmp_path / "replays").exists()  # no browser was opened, nothing replayed
    never_replayed = good.model_copy(update={"name": "log in"})  # imported, or from an arm without replay
    passed, _ = verify_candidates(gate, [good], [solved], known=[never_replayed])
    assert passed[0].provenance.replay_verdict == "success"
    assert len(list((tmp_path / "replays").glob("*.json"))) == 1


def test_replay_reads_open_parameters_off_the_source_steps(solved: Trajectory) -> None:
    [good], _ = induce_rule([solved], admission="gt")
    untemplated = good.model_copy(update={"description": "Log in."})  # the goal no longer binds anything
    username = solved.steps[0].action["args"]["value"]  # type: ignore[index]
    assert replay_values(untemplated, solved)["username"] == username


def test_recorded_episode_becomes_literal_steps(solved: Trajectory) -> None:
    workflow, skipped = recording_workflow(solved)
    assert [s.action for s in workflow.steps] == ["fill", "fill", "click"]
    assert workflow.steps[2].target == TargetDesc(role="button", label="Login")
    assert workflow.parameters == [] and skipped == []


def test_awm_replay_reexecutes_a_recorded_episode(tmp_path: Path) -> None:
    run = tmp_path / "run"
    awm = [sys.executable, "-m", "awm.cli"]
    subprocess.run(
        [*awm, "run", "--tasks", "login-user", "--seeds", "2", "--policy", "scripted", "--out", str(run)],
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    )
    done = subprocess.run(
        [*awm, "replay", str(run), "browsergym/miniwob.login-user#2"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("exact (score 100") == 3
    assert "reward 1.0 (raw 1.0) -> success" in done.stdout
    [folder] = (run / "replays").iterdir()
    assert (folder / "trajectory.json").is_file() and (folder / "1.png").is_file()
    missing = subprocess.run([*awm, "replay", str(tmp_path), "x"], capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "not a run folder" in missing.stderr


def test_a_workflow_that_stops_where_the_answer_is_read_is_replayed_with_its_sources_answer() -> None:
    from awm.pipeline.replay import with_source_answer
    from awm.trajectory import Step, Task

    def source(*steps: tuple[str, dict, TargetDesc | None]) -> Trajectory:
        return Trajectory(
            trajectory_id="s",
            task=Task(task_id="t", goal='What does the "Desk lamp" cost?', scope="s", benchmark="sites"),
            steps=[Step(index=i, action={"name": n, "args": a}, target=t) for i, (n, a, t) in enumerate(steps)],
        )

    link = TargetDesc(role="link", label="Desk lamp")
    asked = source(("click", {"bid": "4"}, link), ("send_msg_to_user", {"text": "$12"}, None))
    [workflow], _ = induce_rule([asked], admission="gt")
    assert [s.action for s in workflow.steps] == ["click"]  # the answer is left to the agent...
    replayed = with_source_answer(workflow, asked)  # ... and the replay gives the source's own
    assert [(s.action, s.value) for s in replayed.steps] == [("click", ""), ("send_msg_to_user", "$12")]
    navigated = source(("click", {"bid": "4"}, link))
    assert with_source_answer(workflow, navigated) == workflow  # no answer in the source: as it is
