"""scripts/guidance_report.py: guidance on against off, paired by task, and what each filter did."""

from __future__ import annotations

import json
from pathlib import Path

from awm.trajectory import Step, Task, Trajectory, Verdict
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


def report_module():
    return load_script("guidance_report")


def write_run(folder: Path, outcomes: dict[str, tuple[float, list[list[str]]]]) -> Path:
    (folder / "trajectories").mkdir(parents=True)
    for template, (reward, acted) in outcomes.items():
        task = Task(task_id=f"browsergym/sites.forum.{template}", seed=2, scope=f"sites/forum/{template}", benchmark="sites")
        steps = [Step(index=i, guidance=names) for i, names in enumerate(acted)]
        t = Trajectory(trajectory_id=f"{folder.name}-{template}", task=task, steps=steps, verdict=Verdict(reward=reward))
        (folder / "trajectories" / f"{t.trajectory_id}.json").write_text(t.to_json())
    return folder


def test_pairs_by_task_and_credits_a_filter_only_with_the_episodes_it_acted_in(tmp_path: Path) -> None:
    module = report_module()
    on = write_run(tmp_path / "on", {
        "reply-topic": (1.0, [["goal_note"], ["sending_composed_text"]]),
        "pin-topic": (1.0, [["goal_note"]]),
        "close-topic": (0.0, [["spent_choices"]]),
    })  # fmt: skip
    off = write_run(tmp_path / "off", {"reply-topic": (0.0, [[]]), "pin-topic": (1.0, [[]]), "close-topic": (1.0, [[]])})
    pair = module.compare(module.episodes_of(on), module.episodes_of(off))
    assert (pair["tasks"], pair["solved_on"], pair["solved_off"]) == (3, 2, 2)
    assert pair["only_on"] == ["browsergym/sites.forum.reply-topic#2"]
    assert pair["only_off"] == ["browsergym/sites.forum.close-topic#2"]
    assert pair["filters"]["goal_note"] == {"steps": 2, "episodes": 2, "solved": 2, "solved_only_with_guidance": 1}
    assert pair["filters"]["spent_choices"]["solved"] == 0
    text = module.render({"forum": pair})
    assert "| forum | 3 | 2 | 2 | +0.0 pts |" in text
    assert "| `sending_composed_text` | 1 / 1 / 1 / 1 |" in text


def test_a_live_bench_folder_is_scored_by_what_its_pages_logged(tmp_path: Path) -> None:
    module = report_module()
    run = tmp_path / "live"
    (run / "trajectories").mkdir(parents=True)
    task = Task(task_id="browsergym/openended", scope="live/settings", benchmark="live")
    (run / "trajectories" / "settings.json").write_text(Trajectory(trajectory_id="x", task=task, end="answered").to_json())
    pages = [{"name": "settings", "reached": True, "trajectory_file": "trajectories/settings.json"}]
    (run / "results.json").write_text(json.dumps({"pages": pages}))
    [(name, (trajectory, solved))] = module.episodes_of(run).items()
    assert (name, trajectory.task.scope, solved) == ("settings", "live/settings", True)
