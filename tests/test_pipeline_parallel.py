"""Parallel episodes: local worker processes and Ray give the per-episode results of one worker, in
task order; a hung worker is killed and its episode recorded as env_error; a missing Ray is one
clear sentence and exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from awm.config import BrowserSettings, load_settings
from awm.memory.view import MemoryView
from awm.pipeline.parallel import AllJobs, EpisodeJob, PoolConfig, job_for, run_jobs, run_tasks_parallel
from awm.pipeline.policy import PolicyFactory
from awm.trajectory import Task, Trajectory
from awm.webarena.harness import Decision, DecisionContext, HarnessConfig
from awm.webarena.tasks import resolve_tasks

REPO = Path(__file__).resolve().parent.parent


class SleepingPolicy:
    """Never answers in time: a stand-in for a model call or a page that hangs for good."""

    name = "sleeping"
    memory = None

    def decide(self, ctx: DecisionContext) -> Decision:
        time.sleep(3600)
        return Decision(text="noop()")


class HangOn(PolicyFactory):
    """The scripted MiniWoB policy, except that the episode of one task key hangs (picklable)."""

    def __init__(self, hang_key: str) -> None:
        super().__init__(load_settings(), "scripted")
        self.hang_key = hang_key

    def __call__(self, task: Task, view: MemoryView | None):
        return SleepingPolicy() if task.key == self.hang_key else super().__call__(task, view)


def _outcome(t: Trajectory) -> tuple:
    """What must not depend on how episodes were spread over workers."""
    return (
        t.task.key,
        t.end,
        t.verdict.reward,
        [s.action_str for s in t.steps],
        [s.outcome for s in t.steps],
    )


def _env() -> BrowserSettings:
    return BrowserSettings(screenshots=False)


@pytest.mark.browser
def test_two_local_workers_give_the_same_episodes_as_one_in_task_order() -> None:
    tasks = resolve_tasks("miniwob", "enter-text,click-test", [0, 1])
    factory = PolicyFactory(load_settings(), "scripted")
    common = dict(policy_factory=factory, env_config=_env(), harness_config=HarnessConfig(max_steps=4))
    seen: list[int] = []
    one = run_tasks_parallel(tasks, **common)
    two: dict[int, Trajectory] = {}

    def keep(job: EpisodeJob, trajectory: Trajectory, _shots: list) -> None:
        seen.append(job.index)
        two[job.index] = trajectory

    run_jobs(AllJobs([job_for(i, t) for i, t in enumerate(tasks)]), pool=PoolConfig(workers=2), on_result=keep, **common)
    assert [two[i].task.key for i in range(4)] == [t.key for t in tasks]
    assert [_outcome(two[i]) for i in range(4)] == [_outcome(t) for t in one]
    assert all(t.verdict.reward == 1.0 for t in one)
    assert sorted(seen) == [0, 1, 2, 3]  # every episode reported to the driver once
    assert len({two[i].meta["worker_pid"] for i in range(4)} - {os.getpid()}) == 2  # two other processes


@pytest.mark.browser
def test_a_hung_local_worker_is_killed_and_its_episode_is_an_env_error() -> None:
    tasks = resolve_tasks("miniwob", "click-test", [0, 1, 2])
    started = time.monotonic()
    out = run_tasks_parallel(
        tasks,
        policy_factory=HangOn(tasks[0].key),
        env_config=_env(),
        # a click-test episode takes 2-6 s on a loaded 2-core machine
        harness_config=HarnessConfig(max_steps=3, episode_timeout_s=12),
        pool=PoolConfig(workers=2, kill_grace_s=3),
    )
    assert time.monotonic() - started < 90  # not the hour the policy sleeps
    hung, *rest = out
    assert hung.end == "env_error" and hung.verdict.reward == 0.0
    assert "timeout" in hung.steps[0].error and hung.steps[0].outcome == "env_error"
    assert hung.seconds >= 15  # killed after timeout + grace, not before
    assert [(t.task.key, t.end, t.verdict.reward) for t in rest] == [(k.key, "done", 1.0) for k in tasks[1:]]


@pytest.mark.ray
@pytest.mark.browser
def test_ray_runs_episodes_in_task_order_and_cancels_a_hung_one() -> None:
    pytest.importorskip("ray")
    tasks = resolve_tasks("miniwob", "click-test,enter-text", [0, 1]) + resolve_tasks(
        "miniwob", "click-button", [5]
    )
    out = run_tasks_parallel(
        tasks,
        policy_factory=HangOn(tasks[-1].key),
        env_config=_env(),
        harness_config=HarnessConfig(max_steps=4, episode_timeout_s=15),
        pool=PoolConfig(workers=2, backend="ray", kill_grace_s=5),
    )
    assert [t.task.key for t in out] == [t.key for t in tasks]
    assert [(t.end, t.verdict.reward) for t in out[:4]] == [("done", 1.0)] * 4
    assert [len(t.steps) for t in out[:4]] == [1, 1, 2, 2]  # click; fill + submit
    assert out[4].end == "env_error" and "cancelled" in out[4].steps[0].error


def test_ray_backend_without_ray_says_how_to_install_it_and_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "ablate.toml"
    config.write_text(
        textwrap.dedent(
            """
            [pipeline]
            tasks = ["click-test"]
            policy = "scripted"
            memory = "off"
            parallel_backend = "ray"
            workers = 2

            [[arm]]
            name = "off"
            """
        )
    )
    wrapper = textwrap.dedent(
        f"""
        import sys
        sys.modules["ray"] = None  # `import ray` now raises ImportError, as without the extra
        import awm.cli
        from awm.pipeline.ablate_cli import register
        if not any(c.name == "ablate" for c in awm.cli.app.registered_commands):
            register(awm.cli.app)
        sys.argv = ["awm", "ablate", {str(config)!r}, "--out", {str(tmp_path / "out")!r}]
        awm.cli.main()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", wrapper], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install 'awm[ray]'" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "arms").exists()  # refused before anything ran


def test_screenshots_follow_step_indexes_not_the_order_steps_were_recorded() -> None:
    """A run_workflow step is recorded after its sub-steps; its screenshot must still be its own."""
    from awm.pipeline.parallel import _Captures
    from awm.trajectory import Step, Task, Trajectory
    from awm.webarena.harness import StepCapture

    task = Task(task_id="t", scope="s", benchmark="miniwob")
    steps = [Step(index=0), Step(index=1, called_by=0), Step(index=2, called_by=0)]
    trajectory = Trajectory(trajectory_id="x", task=task, steps=steps)
    collect = _Captures()
    for step, png in ((steps[1], b"sub1"), (steps[2], b"sub2"), (steps[0], b"call")):
        collect(trajectory, step, StepCapture(png=png))
    assert [c.png for c in collect.aligned(trajectory)] == [b"call", b"sub1", b"sub2"]
    collect.keep_final(trajectory, StepCapture(png=b"end", final=True))  # the page after the last action: last
    assert [c.png for c in collect.aligned(trajectory)] == [b"call", b"sub1", b"sub2", b"end"]
