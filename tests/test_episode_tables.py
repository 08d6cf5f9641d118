"""The benchmarks' episode tables: which guidance filters acted, counted from the steps' records."""

from __future__ import annotations

from awm.pipeline.episode_tables import anatomy, anatomy_lines, guidance_acted
from awm.trajectory import Step, Task, Trajectory, Verdict


def episode(tid: str, reward: float, *acted: list[str]) -> Trajectory:
    task = Task(task_id="browsergym/sites.forum.reply-topic", goal="Reply", scope="sites/forum/reply-topic", benchmark="sites")
    steps = [Step(index=i, guidance=names) for i, names in enumerate(acted)]
    return Trajectory(trajectory_id=tid, task=task, steps=steps, end="answered", verdict=Verdict(reward=reward))


def test_guidance_acted_counts_steps_episodes_and_solved_episodes_per_filter() -> None:
    runs = [
        episode("a", 1.0, ["goal_note", "spent_choices"], ["goal_note"]),
        episode("b", 0.0, ["goal_note"], []),
        episode("c", 0.0, []),
    ]
    assert guidance_acted(runs) == {
        "goal_note": "3 steps in 2 episodes (1 solved)",
        "spent_choices": "1 steps in 1 episodes (1 solved)",
    }
    lines = anatomy_lines(anatomy(runs, lambda t: t.task.scope))
    at = lines.index("### Guidance filters that acted (all episodes)")
    assert lines[at + 2] == "- goal_note: 3 steps in 2 episodes (1 solved)"
    # A report written before the record existed still renders.
    old = {k: v for k, v in anatomy(runs, lambda t: t.task.scope).items() if k != "guidance_acted"}
    assert "- none" in anatomy_lines(old)[anatomy_lines(old).index("### Guidance filters that acted (all episodes)") + 2]
