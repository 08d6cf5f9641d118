"""scripts/bench_demo.py's report, from trajectories as the driver writes them (no model, no site)."""

from __future__ import annotations

from pathlib import Path

from awm.trajectory import Step, Task, Trajectory, Verdict
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


def bench_demo():
    return load_script("bench_demo")


def episode(reward: float, *steps: tuple[int, int, float]) -> Trajectory:
    task = Task(task_id="browsergym/sites.trac.file-ticket", seed=2, scope="sites/trac/file-ticket", benchmark="sites")
    return Trajectory(
        trajectory_id=f"t{reward}{len(steps)}", task=task, verdict=Verdict(reward=reward),
        steps=[Step(index=i, prompt_tokens=p, cached_prompt_tokens=c, llm_calls=1, timings_ms={"llm": ms})
               for i, (p, c, ms) in enumerate(steps)],
    )  # fmt: skip


def test_the_report_times_each_stage_and_says_which_targets_the_job_met() -> None:
    bench = bench_demo()
    off = bench.arm_figures("off", [episode(0.0, (2600, 600, 38000.0), (900, 800, 7000.0))], 120.0)
    memory = bench.arm_figures("memory", [episode(1.0, (800, 700, 4000.0)), episode(1.0, (800, 780, 3000.0))], 30.0)
    assert (off["solved"], off["episodes_per_min"], memory["episodes_per_min"]) == (0, 0.5, 4.0)
    assert memory["reused_fraction"] == (700 + 780) / 1600
    data = {
        "command": "python scripts/bench_demo.py", "commit": "abc1234", "written": "2026-12-07T22:00:00",
        "setup_s": 2.0, "demonstrations_s": 60.0, "arms": [off, memory], "total_s": 212.0,
    }  # fmt: skip
    text = bench.render(data)
    assert "| **all** (target 600) | **212.0** (met) |" in text
    assert "| off | 0/1 | 0.50 | 22.5 | 38.0 | 1,750 | 2,600 | 40% |" in text
    assert "| memory | 2/2 | 4.00 | 3.5 | 4.0 | 800 | 800 | 92% |" in text
    assert "NOT met" in bench.render({**data, "total_s": 1071.0})
