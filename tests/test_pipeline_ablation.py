"""Ablations: arms on the same stream, numbers that match the trajectories, errors counted as failures,
the statistics by hand, the budget-matched sizing, and a resumable report folder."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path
from typing import Any

import pytest

from awm.errors import ConfigError
from awm.evaluation.success import SUCCESS_RULE
from awm.pipeline.ablation import arm_dir, budget_match, load_ablation, run_ablation
from awm.pipeline.report import (
    BUDGET_ARM,
    AblationReport,
    ArmRun,
    arm_stats,
    build_report,
    compare,
    episode_rows,
)
from awm.pipeline.report_render import PLOT_STREAM, PLOT_SUCCESS_PER_TASK, PLOT_TOKENS, render_markdown
from awm.pipeline.results import REPLAY_WARNING
from awm.pipeline.stats import CI_TASK_BOOTSTRAP, CI_WILSON, bootstrap_mean_ci, sign_test_p, wilson_interval
from awm.trajectory import Step, Task, Trajectory, Verdict, WorkflowCall, load_trajectories


def _wilson_by_hand(k: int, n: int) -> tuple[float, float]:
    z = 1.96
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _traj(
    key_seed: int,
    *,
    reward: float,
    end: str,
    steps: int = 1,
    tokens: int = 100,
    error: str = "",
    raw_reward: float | None = None,
) -> Trajectory:
    outcome = end if end in ("env_error", "llm_error") else "ok"
    return Trajectory(
        trajectory_id=f"t{key_seed}-{end}",
        task=Task(
            task_id="browsergym/miniwob.login-user",
            scope="miniwob/login-user",
            benchmark="miniwob",
            seed=key_seed,
        ),
        steps=[
            Step(
                index=i,
                prompt_tokens=tokens,
                completion_tokens=10,
                outcome=outcome if i == steps - 1 else "ok",
                error=error,
            )
            for i in range(steps)
        ],
        end=end,
        verdict=Verdict(reward=reward, raw_reward=raw_reward),
        seconds=2.0,
    )


def _run(arm: str, repeat: int, solved: dict[int, bool]) -> ArmRun:
    """One repeat of `arm` over the tasks (seeds) in `solved`, each solved or not."""
    trajectories = [_traj(seed, reward=float(ok), end="done") for seed, ok in solved.items()]
    return ArmRun(arm=arm, repeat=repeat, run_dir=f"{arm}{repeat}", trajectories=trajectories)


def _report(runs: list[ArmRun], repeats: int, **kwargs: Any) -> AblationReport:
    common = {"name": "x", "config_path": "c", "config_hash": "h", "base": {}, "model": "m", "backend": "b"}
    return build_report(runs, repeats=repeats, **common, **kwargs)


# --- statistics -------------------------------------------------------------------------------------


def test_wilson_sign_and_bootstrap_match_hand_computation() -> None:
    for k, n in ((0, 4), (2, 4), (4, 4), (7, 20)):
        low, high = wilson_interval(k, n)
        want = _wilson_by_hand(k, n)
        assert low == pytest.approx(max(0.0, want[0]), abs=1e-4) and high == pytest.approx(
            min(1.0, want[1]), abs=1e-4
        )
    assert wilson_interval(4, 4)[0] == pytest.approx(1 / (1 + 1.96**2 / 4), abs=1e-4)  # 0.510
    assert wilson_interval(0, 0) is None
    assert sign_test_p(5, 0) == pytest.approx(2 / 32)
    assert sign_test_p(3, 3) == pytest.approx(1.0)
    assert sign_test_p(0, 0) is None
    assert bootstrap_mean_ci([1.0] * 6) == (1.0, 1.0)
    low, high = bootstrap_mean_ci([0.0, 1.0] * 10)
    assert low < 0.5 < high and bootstrap_mean_ci([0.0, 1.0] * 10) == (low, high)  # seeded


def test_errors_count_as_failures_and_are_listed_by_name() -> None:
    run = ArmRun(
        arm="online",
        repeat=1,
        run_dir="x",
        memory="online",
        trajectories=[
            _traj(0, reward=1.0, end="done", steps=3),
            _traj(1, reward=0.0, end="env_error", error="browser crashed"),
            _traj(2, reward=0.0, end="llm_error", error="model unreachable"),
            _traj(3, reward=0.0, end="timeout", steps=2),
            _traj(4, reward=0.0, end="max_steps", steps=6),
        ],
        usage={"induction": {"prompt_tokens": 400, "completion_tokens": 100, "cost_usd": 0.5, "calls": 2}},
        versions={"browsergym/miniwob.login-user#1": (1, 2)},
    )
    stats = arm_stats("online", [run])
    assert (stats.episodes, stats.successes) == (5, 1)  # errors are in the denominator
    assert stats.ci95 == pytest.approx(_wilson_by_hand(1, 5), abs=1e-4)
    assert stats.mean_steps == pytest.approx((3 + 1 + 1 + 2 + 6) / 5)
    assert [(e["key"].rsplit("#", 1)[1], e["end"]) for e in stats.errors] == [
        ("1", "env_error"),
        ("2", "llm_error"),
        ("3", "timeout"),
    ]
    assert stats.errors[0]["error"] == "browser crashed"
    assert stats.ends == {"done": 1, "env_error": 1, "llm_error": 1, "timeout": 1, "max_steps": 1}
    actor = sum(110 * s for s in (3, 1, 1, 2, 6)) / 5
    assert stats.tokens_per_task["actor"] == pytest.approx(actor, abs=0.1)
    assert stats.tokens_per_task["induction"] == pytest.approx(100.0)
    assert stats.tokens_per_task["total"] == pytest.approx(actor + 100.0, abs=0.1)
    assert stats.cost_per_task_usd == pytest.approx(0.1)
    md = render_markdown(
        build_report(
            [run], name="x", config_path="c", config_hash="h", base={}, repeats=1, model="m", backend="local"
        )
    )
    assert "browser crashed" in md and "model unreachable" in md


def test_paired_comparison_pairs_by_task_and_repeat() -> None:
    a = ArmRun(
        arm="off",
        repeat=1,
        run_dir="a",
        trajectories=[_traj(s, reward=float(s == 0), end="done") for s in range(4)],
    )
    b = ArmRun(
        arm="online",
        repeat=1,
        run_dir="b",
        trajectories=[_traj(s, reward=float(s != 3), end="done") for s in range(4)],
    )
    c = compare("off", "online", episode_rows(a) + episode_rows(b))
    assert (c.pairs, c.b_wins, c.a_wins, c.ties) == (4, 2, 0, 2)
    assert c.mean_success_diff == pytest.approx(0.5)
    assert c.sign_test_p == pytest.approx(0.5)  # 2 wins, 0 losses: 2 * (1/4)


def test_paired_comparison_names_the_templates_only_one_arm_ever_solved() -> None:
    def run(arm: str, solved: dict[str, bool]) -> ArmRun:
        trajectories = []
        for name, ok in solved.items():
            t = _traj(0, reward=float(ok), end="done")
            task = t.task.model_copy(update={"task_id": f"browsergym/sites.trac.{name}"})
            trajectories.append(t.model_copy(update={"task": task, "trajectory_id": f"{arm}-{name}"}))
        return ArmRun(arm=arm, repeat=1, run_dir=arm, trajectories=trajectories)

    off = run("off", {"create": True, "close": True, "search": False, "edit": False})
    memory = run("memory", {"create": True, "close": False, "search": True, "edit": True})
    report = _report([off, memory], 1)
    (c,) = report.comparisons
    assert c.solved_only_by_b == ["sites.trac.edit", "sites.trac.search"]
    assert c.solved_only_by_a == ["sites.trac.close"]
    from awm.pipeline.report_render import render_markdown

    row = "| memory | off | sites.trac.edit, sites.trac.search | sites.trac.close |"
    assert row in render_markdown(report)


def test_with_repeats_the_task_is_the_unit_of_the_interval() -> None:
    # 4 tasks x 3 repeats: tasks 0 and 1 always solved, task 2 once, task 3 never.
    pattern = {0: [1, 1, 1], 1: [1, 1, 1], 2: [1, 0, 0], 3: [0, 0, 0]}
    runs = [_run("off", rep + 1, {seed: bool(v[rep]) for seed, v in pattern.items()}) for rep in range(3)]
    stats = arm_stats("off", runs)
    assert (stats.tasks, stats.episodes, stats.successes, stats.ci_method) == (4, 12, 7, CI_TASK_BOOTSTRAP)
    assert stats.success_rate == pytest.approx(7 / 12)
    assert stats.ci95 == bootstrap_mean_ci([1.0, 1.0, 1 / 3, 0.0])  # resampling the 4 tasks, seeded
    pooled = wilson_interval(7, 12)  # 12 "independent" episodes: narrower than 4 tasks allow
    assert stats.ci95[1] - stats.ci95[0] > pooled[1] - pooled[0]
    one = arm_stats("off", runs[:1])
    assert (one.ci_method, one.ci95) == (CI_WILSON, wilson_interval(3, 4))
    md = render_markdown(_report(runs, 3))
    assert "bootstrap" in md and "over tasks" in md and "Wilson" not in md


def test_paired_comparison_with_repeats_compares_per_task_means() -> None:
    # A solves task 0 in both repeats, task 1 in one; B solves task 1 in both, task 2 in one; task 3 only A ran.
    a = [_run("off", 1, {0: True, 1: True, 2: False, 3: True}), _run("off", 2, {0: True, 1: False, 2: False})]
    b = [_run("online", 1, {0: True, 1: True, 2: True}), _run("online", 2, {0: True, 1: True, 2: False})]
    rows = [row for run in a + b for row in episode_rows(run)]
    c = compare("off", "online", rows)
    diffs = [0.0, 0.5, 0.5]  # task 0 tie; tasks 1 and 2 B better by half a success
    assert (c.pairs, c.b_wins, c.a_wins, c.ties, c.unpaired) == (3, 2, 0, 1, 1)
    assert c.mean_success_diff == pytest.approx(sum(diffs) / 3)
    assert c.ci95 == bootstrap_mean_ci(diffs)  # resamples the 3 tasks, not 6 (task, repeat) pairs
    assert c.sign_test_p == pytest.approx(sign_test_p(2, 0))
    assert c.mean_steps_diff == pytest.approx(0.0)


def _with_workflow(seed: int, *, solved: bool, completed: bool) -> Trajectory:
    """An episode of 2 model steps (2 + 1 model calls: one re-prompt) whose first step called a
    3-step workflow: 3 sub-steps of step 0 ran (all of them when `completed`)."""
    run = 3 if completed else 2
    steps = [
        Step(index=0, llm_calls=2, prompt_tokens=50, action={"name": "run_workflow", "args": {}}),
        *(Step(index=1 + i, called_by=0, workflow="login") for i in range(run)),
        Step(index=1 + run, llm_calls=1, prompt_tokens=50),
    ]
    call = WorkflowCall(step=0, name="login", steps_total=3, steps_run=run, completed=completed)
    return _traj(seed, reward=float(solved), end="done").model_copy(
        update={"trajectory_id": f"w{seed}", "steps": steps, "workflow_calls": [call]}
    )


def test_model_calls_steps_and_workflow_calls_per_arm() -> None:
    run = ArmRun(
        arm="exec",
        repeat=1,
        run_dir="x",
        memory="online",
        trajectories=[
            _with_workflow(0, solved=True, completed=True),
            _with_workflow(1, solved=False, completed=False),
            _traj(2, reward=0.0, end="max_steps", steps=4),  # 4 model steps, no model calls recorded
        ],
    )
    rows = episode_rows(run)
    assert [(r.steps, r.model_steps, r.llm_calls) for r in rows] == [(5, 2, 3), (4, 2, 3), (4, 4, 0)]
    assert [(r.workflow_calls, r.workflow_calls_completed) for r in rows] == [(1, 1), (1, 0), (0, 0)]
    stats = arm_stats("exec", [run])
    assert stats.model_steps_per_task == pytest.approx((2 + 2 + 4) / 3)
    assert stats.mean_steps == pytest.approx((5 + 4 + 4) / 3)  # sub-steps included
    assert stats.llm_calls_per_task == pytest.approx(6 / 3)
    assert stats.llm_calls_per_solved_task == pytest.approx(6 / 1)  # every call, over the one solved
    assert (stats.workflow_calls, stats.workflow_calls_completed) == (2, 1)
    unsolved = arm_stats("off", [_run("off", 1, {0: False, 1: False})])
    assert unsolved.llm_calls_per_solved_task is None and unsolved.workflow_calls == 0
    md = render_markdown(_report([run, _run("off", 1, {0: False, 1: False})], 1))
    assert "## Model calls and workflow calls" in md
    assert "| exec | 2.67 | 2.00 | 6.00 | 2 | 1 |" in md
    assert "| off | 1.00 | 0.00 | n/a | 0 | 0 |" in md


def test_every_arm_is_also_compared_with_the_budget_matched_arm() -> None:
    solved = {
        "off": {0: False, 1: False, 2: True},
        "text": {0: True, 1: False, 2: True},
        "exec": {0: True, 1: True, 2: True},
        BUDGET_ARM: {0: False, 1: True, 2: True},
    }
    runs = [_run(arm, 1, tasks) for arm, tasks in solved.items()]
    report = _report(runs, 1)
    assert [(c.arm_a, c.arm_b) for c in report.comparisons] == [
        ("off", "text"),
        ("off", "exec"),
        ("off", BUDGET_ARM),
    ]
    assert [(c.arm_a, c.arm_b) for c in report.budget_comparisons] == [
        (BUDGET_ARM, "text"),
        (BUDGET_ARM, "exec"),
    ]
    text, exec_ = report.budget_comparisons
    assert (text.b_wins, text.a_wins, text.ties) == (1, 1, 1)
    assert (exec_.b_wins, exec_.a_wins, exec_.ties) == (1, 0, 2)
    assert exec_.mean_success_diff == pytest.approx(1 / 3)
    md = render_markdown(report)
    assert f"## Paired differences against `{BUDGET_ARM}`" in md
    assert f"| {BUDGET_ARM} | exec | 3 | 1 | 0 | 2 | 0 | +33.3 pts |" in md
    without = _report(runs[:3], 1)
    assert without.budget_comparisons == [] and "against `budget-matched`" not in render_markdown(without)


def test_success_is_the_full_reward_rule_and_is_stated() -> None:
    partial = _traj(0, reward=1.0, raw_reward=0.5, end="done")  # BrowserGym's reward counts partial credit
    full = _traj(1, reward=1.0, raw_reward=1.0, end="done")
    run = ArmRun(arm="off", repeat=1, run_dir="x", trajectories=[partial, full])
    assert [r.success for r in episode_rows(run)] == [False, True]
    report = _report([run], 1)
    assert report.success_rule == SUCCESS_RULE and SUCCESS_RULE in render_markdown(report)


def test_replayed_repeats_are_warned_about() -> None:
    runs = [_run("off", rep, {0: True, 1: False}) for rep in (1, 2)]
    report = _report(runs, 2, temperature=0.0, cache=True)
    assert report.warnings == [REPLAY_WARNING]
    assert REPLAY_WARNING in render_markdown(report)
    assert json.loads(report.model_dump_json())["warnings"] == [REPLAY_WARNING]
    for kwargs in ({"temperature": 0.7, "cache": True}, {"temperature": 0.0, "cache": False}, {}):
        assert _report(runs, 2, **kwargs).warnings == []
    assert _report(runs[:1], 1, temperature=0.0, cache=True).warnings == []  # one repeat replays nothing


def test_provenance_is_carried_and_summarised() -> None:
    provenance = {
        "commit": "a" * 40,
        "dirty": True,
        "command": ["awm", "ablate", "my config.toml"],
        "command_line": "awm ablate 'my config.toml'",
        "python": "3.11.9",
        "platform": "Linux",
        "packages": {"Jinja2": "3.1", "playwright": "1.50.0", "pydantic": "2.10.0"},
    }
    report = _report([_run("off", 1, {0: True})], 1, provenance=provenance)
    assert json.loads(report.model_dump_json())["provenance"] == provenance
    md = render_markdown(report)
    assert f"commit `{'a' * 40}`, dirty" in md
    assert "awm ablate 'my config.toml'" in md
    assert "3 installed" in md and "playwright 1.50.0" in md and "pydantic 2.10.0" in md
    assert "provenance.json" in md
    assert "not recorded" in render_markdown(_report([_run("off", 1, {0: True})], 1))


def test_budget_match_scales_steps_within_floor_and_cap() -> None:
    m = budget_match(
        memory_arm="online",
        off_arm="off",
        memory_tokens_per_task=3000,
        off_tokens_per_task=1000,
        base_max_steps=5,
        cap=2.0,
    )
    assert (m.scale, m.max_steps) == (2.0, 10)  # 3x wanted, capped at 2x
    m = budget_match(
        memory_arm="online",
        off_arm="off",
        memory_tokens_per_task=1500,
        off_tokens_per_task=1000,
        base_max_steps=5,
        cap=3.0,
    )
    assert (m.scale, m.max_steps) == (1.5, 8)  # rounded up
    m = budget_match(
        memory_arm="online",
        off_arm="off",
        memory_tokens_per_task=500,
        off_tokens_per_task=1000,
        base_max_steps=5,
        cap=3.0,
    )
    assert (m.scale, m.max_steps) == (1.0, 5)  # never fewer steps than the off arm


def test_config_errors_name_the_arm_and_field(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    head = '[pipeline]\ntasks = ["click-test"]\npolicy = "scripted"\n'
    path.write_text(head + '[[arm]]\nname = "x"\nmemroy = "off"\n')
    with pytest.raises(ConfigError, match=r"arm 'x'.*memroy"):
        load_ablation(path)
    path.write_text(head + '[[arm]]\nname = "x"\nseeds = [3]\n')
    with pytest.raises(ConfigError, match="arm 'x' sets seeds"):
        load_ablation(path)
    path.write_text("budget_matched = true\n" + head + '[[arm]]\nname = "x"\nmemory = "off"\n')
    with pytest.raises(ConfigError, match="budget_matched"):
        load_ablation(path)
    path.write_text(head + '[[arm]]\nname = "a b"\n')
    with pytest.raises(ConfigError, match="arm name 'a b'"):
        load_ablation(path)
    # an offline arm's inputs are checked before any arm runs (not after the arms before it)
    path.write_text(head + '[[arm]]\nname = "off"\nmemory = "off"\n[[arm]]\nname = "x"\nmemory = "offline"\n'
                    'offline_from = ["no/such/run"]\n')  # fmt: skip
    with pytest.raises(ConfigError, match=r"arm 'x': offline_from \S*no/such/run does not exist"):
        load_ablation(path)


def test_shipped_configs_load() -> None:
    root = Path(__file__).resolve().parent.parent / "configs"
    demo = load_ablation(root / "miniwob-demo.toml")
    assert [a.name for a in demo.arms] == ["off", "executable"]
    assert {a.config.memory for a in demo.arms} == {"off", "online"}
    assert (demo.arms[1].config.workflows, demo.arms[1].config.verify) == ("executable", "replay")
    dev = load_ablation(root / "miniwob-dev.toml")
    assert dev.ablation.budget_matched and dev.ablation.budget_memory_arm == "exec-task"
    arms = {a.name: a.config for a in dev.arms}
    assert list(arms) == ["off", "text", "exec-task", "exec-benchmark"]
    assert {a.induction for a in arms.values()} == {"rule"} and not any(a.judge for a in arms.values())
    assert (arms["exec-task"].workflows, arms["exec-task"].scope) == ("executable", "task")
    bench = arms["exec-benchmark"]
    assert (bench.workflows, bench.scope, bench.memory_mode) == ("executable", "benchmark", "topk")
    assert (arms["text"].memory, arms["text"].workflows) == ("online", "text")


# --- a real ablation (scripted policy, real Chromium) -----------------------------------------------


@pytest.mark.browser
def test_scripted_ablation_writes_the_report_and_its_numbers_match_the_trajectories(tmp_path: Path) -> None:
    config = tmp_path / "ablate.toml"
    config.write_text(
        textwrap.dedent(
            """
            [pipeline]
            name = "t"
            tasks = ["click-test", "login-user"]
            seeds = [0, 1]
            max_steps = 2   # login-user needs 3 steps: it fails by max_steps, click-test succeeds
            policy = "scripted"

            [[arm]]
            name = "off"
            memory = "off"

            [[arm]]
            name = "online"
            memory = "online"
            induction = "rule"
            admission = "gt"
            """
        )
    )
    out = tmp_path / "out"
    report, md = run_ablation(load_ablation(config), out, show_progress=False)
    for name in ("RESULTS.md", "results.json", PLOT_SUCCESS_PER_TASK, PLOT_STREAM, PLOT_TOKENS):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    data = json.loads((out / "results.json").read_text())
    assert [a["name"] for a in data["arms"]] == ["off", "online"]
    for arm in data["arms"]:
        trajectories = load_trajectories(arm_dir(out, arm["name"], 1) / "trajectories")
        k = sum(1 for t in trajectories if (t.verdict.reward or 0) > 0)
        assert (arm["episodes"], arm["successes"]) == (len(trajectories), k) == (4, 2)
        assert arm["success_rate"] == pytest.approx(0.5)
        assert arm["ci95"] == pytest.approx(list(_wilson_by_hand(2, 4)), abs=1e-4)
        assert arm["mean_steps"] == pytest.approx(sum(len(t.steps) for t in trajectories) / 4)
        assert arm["ends"] == {"done": 2, "max_steps": 2}
    online = data["arms"][1]
    assert online["final_versions"] == {"miniwob/click-test": 2}  # only successes are admitted (gt)
    seen = [
        (e["key"].rsplit(".", 1)[1], e["memory_version_seen"])
        for e in data["episodes"]
        if e["arm"] == "online"
    ]
    assert seen == [
        ("click-test#0", None),
        ("click-test#1", 1),
        ("login-user#0", None),
        ("login-user#1", None),
    ]
    [pair] = data["comparisons"]
    assert (pair["pairs"], pair["ties"]) == (4, 4)
    text = md.read_text()
    assert "Wilson" in text and "| miniwob.login-user | 0/2 | 0/2 |" in text and "playwright" in text

    # The same command again resumes: nothing re-runs, the numbers stay.
    before = sorted(p.name for p in out.glob("arms/*/rep1/trajectories/*.json"))
    again, _ = run_ablation(load_ablation(config), out, show_progress=False)
    assert sorted(p.name for p in out.glob("arms/*/rep1/trajectories/*.json")) == before
    assert [(a.successes, a.episodes) for a in again.arms] == [(a.successes, a.episodes) for a in report.arms]
