"""The runner, tasks, report and `awm run`: run folders, resume, failures that end one episode only,
WebArena's site check, and the summary's numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from awm.config import load_settings
from awm.errors import ConfigError
from awm.pipeline.config import PipelineConfig, parse_pipeline_table
from awm.pipeline.driver import run_arm
from awm.pipeline.summary import render_markdown, summarize
from awm.traces import open_run
from awm.trajectory import Step, Task, Trajectory, Verdict
from awm.webarena.tasks import (
    WEBARENA_SITES,
    parse_seeds,
    prepare_webarena_env,
    resolve_tasks,
    webarena_urls,
)
from tests.stub_llm_server import Reply, StubLLMServer

REPO = Path(__file__).resolve().parent.parent

# --- tasks --------------------------------------------------------------------------------------------


def test_seeds_parse_ranges_and_lists_and_reject_garbage() -> None:
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("3, 1,3,7-8") == [3, 1, 7, 8]
    for bad in ("a", "4-2", "", "1-"):
        with pytest.raises(ConfigError, match="--seeds"):
            parse_seeds(bad)


def test_tasks_resolve_per_benchmark() -> None:
    tasks = resolve_tasks("miniwob", "click-test,login-user", [0, 1])
    assert [t.key for t in tasks] == [
        "browsergym/miniwob.click-test#0",
        "browsergym/miniwob.click-test#1",
        "browsergym/miniwob.login-user#0",
        "browsergym/miniwob.login-user#1",
    ]
    assert {t.scope for t in tasks} == {"miniwob/click-test", "miniwob/login-user"}
    assert resolve_tasks("miniwob", "click-test")[0].seed == 0
    web = resolve_tasks("webarena", "0,12")
    assert [(t.task_id, t.seed, t.benchmark) for t in web] == [
        ("browsergym/webarena.0", None, "webarena"),
        ("browsergym/webarena.12", None, "webarena"),
    ]
    assert all(t.scope.startswith("webarena") for t in web)
    [raw] = resolve_tasks("browsergym", "browsergym/miniwob.book-flight", [2])
    assert (raw.task_id, raw.scope, raw.benchmark, raw.seed) == (
        "browsergym/miniwob.book-flight",
        "miniwob/book-flight",
        "miniwob",
        2,
    )
    with pytest.raises(ConfigError, match="click-tset"):
        resolve_tasks("miniwob", "click-tset")
    with pytest.raises(ConfigError, match="numbers"):
        resolve_tasks("webarena", "shopping")
    with pytest.raises(ConfigError, match="--benchmark"):
        resolve_tasks("mind2web", "x")


def test_webarena_sites_come_from_env_or_config_and_gaps_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as missing:
        webarena_urls({}, {"WA_REDDIT": "http://h:9999"})
    message = str(missing.value)
    assert "WA_REDDIT" not in message
    assert all(var in message for var in WEBARENA_SITES.values() if var != "WA_REDDIT")
    config = tmp_path / "wa.toml"
    sites = {site: f"http://host:{n}" for n, site in enumerate(WEBARENA_SITES)}
    config.write_text("[webarena]\n" + "".join(f'{k} = "{v}"\n' for k, v in sites.items()))
    environ = {"WA_MAP": "http://elsewhere:3000"}
    urls = prepare_webarena_env(config, environ)
    assert environ["WA_SHOPPING"] == sites["shopping"]  # exported for BrowserGym
    assert urls["WA_MAP"] == environ["WA_MAP"] == "http://elsewhere:3000"  # the environment wins
    config.write_text('[webarena]\nshoping = "http://h"\n')
    with pytest.raises(ConfigError, match="shoping"):
        prepare_webarena_env(config, {})


def test_cli_refuses_webarena_without_sites_and_names_the_variables() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WA_")}
    done = subprocess.run(
        [sys.executable, "-m", "awm.cli", "run", "--benchmark", "webarena", "--tasks", "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    for var in WEBARENA_SITES.values():
        assert var in done.stderr


# --- report -----------------------------------------------------------------------------------------


def _trajectory(
    key_seed: int, *, reward: float | None, judge: str | None, outcomes: list[str], end: str
) -> Trajectory:
    task = Task(
        task_id="browsergym/miniwob.click-test",
        scope="miniwob/click-test",
        benchmark="miniwob",
        seed=key_seed,
    )
    steps = [
        Step(
            index=i,
            outcome=o,
            prompt_tokens=100,
            completion_tokens=10,
            llm_calls=1,
            timings_ms={"llm": 500.0},
        )
        for i, o in enumerate(outcomes)
    ]
    return Trajectory(
        trajectory_id=f"t{key_seed}",
        task=task,
        steps=steps,
        end=end,
        verdict=Verdict(reward=reward, judge=judge),
        seconds=2.0,
    )


def test_summary_counts_success_by_ground_truth_then_judge_and_tallies_failures(tmp_path: Path) -> None:
    trajectories = [
        _trajectory(0, reward=1.0, judge="failure", outcomes=["ok"], end="done"),  # gt wins over the judge
        _trajectory(1, reward=None, judge="success", outcomes=["parse_error", "ok"], end="answered"),
        _trajectory(
            2, reward=None, judge="unknown", outcomes=["ok"], end="answered"
        ),  # unknown is not success
        _trajectory(
            3,
            reward=0.0,
            judge=None,
            outcomes=["target_not_found", "parse_error", "llm_error"],
            end="llm_error",
        ),
    ]
    summary = summarize(
        trajectories,
        name="r",
        run_dir=tmp_path,
        config_hash="abc",
        model="m",
        backend="local",
        policy="llm",
        memory="off",
    )
    assert [e.success for e in summary.episodes] == [True, True, False, False]
    assert summary.success_rate == 0.5
    assert summary.failure_classes() == {"parse_error": 2, "target_not_found": 1, "llm_error": 1}
    assert summary.totals()["prompt_tokens"] == 700 and summary.totals()["llm_seconds"] == 3.5
    markdown = render_markdown(summary)
    assert "`abc`" in markdown and "2/4 (50.0%)" in markdown and "llm_error: 1" in markdown


# --- runs in a real browser, through the one driver --------------------------------------------------


def _arm(**fields: object) -> PipelineConfig:
    return parse_pipeline_table({"name": "r", "memory": "off", "max_steps": 5, **fields})


@pytest.mark.browser
def test_scripted_run_writes_the_folder_and_a_rerun_resumes(tmp_path: Path) -> None:
    settings = load_settings()
    out = tmp_path / "run"
    first = run_arm(_arm(tasks=["click-test"], seeds=[0, 1], policy="scripted"), settings, out, show_progress=False)
    assert first.ok and sum(t.verdict.reward == 1.0 for t in first.trajectories) == 2
    ids = {t.trajectory_id for t in first.trajectories}
    # Same folder, more tasks: the two finished click-test episodes are kept, login-user runs.
    second = run_arm(
        _arm(tasks=["click-test", "login-user"], seeds=[0, 1], policy="scripted"), settings, out, show_progress=False
    )
    assert second.ok and len(second.trajectories) == 4
    assert ids <= {t.trajectory_id for t in second.trajectories}
    assert all(t.verdict.reward == 1.0 and t.verdict.raw_reward == 1.0 for t in second.trajectories)

    with open_run(out) as db:
        episodes = db.episodes()
        assert len(episodes) == 4  # nothing ran twice
        for episode in episodes:
            steps = db.steps(episode.id)
            assert episode.status == "ended" and len(steps) == episode.steps >= 1
            assert (out / "trajectories" / f"{episode.id.replace('#', '_')}.json").is_file()
            assert all(s.screenshot and (out / s.screenshot).is_file() for s in steps)
        login = [e for e in episodes if "login-user" in e.task_key]
        assert all(e.steps == 3 for e in login)  # fill, fill, click
    data = json.loads((out / "summary.json").read_text())
    assert data["successes"] == 4 and len(data["episodes"]) == 4
    assert {e["end"] for e in data["episodes"]} == {"done"}
    assert "config hash" in (out / "summary.md").read_text()
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["packages"]["browsergym-core"] and provenance["command"]


@pytest.mark.browser
def test_llm_errors_end_each_episode_and_the_run_goes_on(tmp_path: Path) -> None:
    with StubLLMServer(default=Reply(status=500)) as stub:
        settings = load_settings(
            overrides={
                "llm": {
                    "backend": "openai",
                    "base_url": stub.base_url,
                    "model": "stub",
                    "cache": False,
                    "max_attempts": 2,
                    "max_retry_seconds": 1.0,
                },
                "browser": {"screenshots": False},
            }
        )
        result = run_arm(
            _arm(tasks=["click-test"], seeds=[0, 1], max_steps=3), settings, tmp_path / "run", show_progress=False
        )
        attempts = len(stub.requests)
    assert result.ok
    assert [t.end for t in result.trajectories] == ["llm_error", "llm_error"]
    assert [s.outcome for t in result.trajectories for s in t.steps] == ["llm_error", "llm_error"]
    assert attempts == 4  # two attempts per episode, then the episode ends
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["model"] == "stub" and summary["successes"] == 0


@pytest.mark.browser
def test_two_worker_processes_return_trajectories_and_only_the_driver_writes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = run_arm(
        _arm(tasks=["click-test"], seeds=[0, 1], policy="scripted", max_steps=3, workers=2),
        load_settings(),
        out,
        show_progress=False,
    )
    assert result.ok and [t.verdict.reward for t in result.trajectories] == [1.0, 1.0]
    assert {t.meta.get("worker_pid") for t in result.trajectories} != {os.getpid()}
    with open_run(out) as db:
        episodes = db.episodes()
        assert sorted(e.task_key for e in episodes) == [
            "browsergym/miniwob.click-test#0",
            "browsergym/miniwob.click-test#1",
        ]
        for episode in episodes:
            [step] = db.steps(episode.id)
            assert (
                step.action_str.startswith("click(") and step.screenshot and (out / step.screenshot).is_file()
            )


@pytest.mark.browser
def test_awm_run_is_the_driver_with_one_arm_and_prints_the_run_summary(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "awm.cli", "run", "--policy", "scripted", "--tasks", "click-test", "--seeds", "0,1",
         "--workers", "2", "--out", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "miniwob-scripted" in done.stdout and "click-test" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["successes"] == 2 and summary["policy"] == "scripted" and summary["config_hash"]
    with open_run(out) as db:
        assert db.run().config["pipeline"]["memory"] == "off"  # one pipeline arm, memory off
