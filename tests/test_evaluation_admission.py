"""Admission rules, unknown judge verdicts, and joining verdicts by key (never by order)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from awm.errors import DataError
from awm.evaluation.admission import admit, load_verdicts, review_workflows
from awm.memory.workflow import Workflow, WorkflowStep
from awm.trajectory import Task, Trajectory, Verdict


def _traj(tid: str, seed: int, reward: float | None = None, judge: str | None = None) -> Trajectory:
    return Trajectory(
        trajectory_id=tid,
        task=Task(task_id="miniwob.login-user", scope="miniwob/login-user", benchmark="miniwob", seed=seed),
        verdict=Verdict(reward=reward, judge=judge),
    )


MIXED = [
    _traj("t-gt-only", 1, reward=1.0),
    _traj("t-judge-only", 2, reward=0.0, judge="success"),
    _traj("t-both", 3, reward=1.0, judge="success"),
    _traj("t-unknown", 4, reward=None, judge="unknown"),
    _traj("t-fail", 5, reward=0.0, judge="failure"),
]


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ("gt", ["t-gt-only", "t-both"]),
        ("judge", ["t-judge-only", "t-both"]),
        ("both", ["t-both"]),
        ("any", ["t-gt-only", "t-judge-only", "t-both"]),
        ("manual", ["t-gt-only", "t-judge-only", "t-both", "t-unknown", "t-fail"]),
    ],
)
def test_rules(rule, expected):
    result = admit(MIXED, rule)
    assert result.admitted_ids == expected
    assert set(result.rejected) == {t.trajectory_id for t in MIXED} - set(expected)


def test_unknown_judge_verdict_is_never_success():
    for rule in ("judge", "any", "both"):
        assert admit([_traj("u", 1, judge="unknown")], rule).admitted == []
    assert "judge unknown" in admit([_traj("u", 1, judge="unknown")], "judge").rejected["u"]


def test_unknown_rule_is_an_error():
    with pytest.raises(DataError, match="admission rule 'best'"):
        admit(MIXED, "best")


def test_separate_verdicts_join_by_task_key_regardless_of_input_order():
    trajectories = [_traj(f"t{seed}", seed) for seed in range(6)]
    # Only even seeds succeeded; the verdicts are keyed by task key, in reversed order.
    verdicts = {
        t.task.key: Verdict(judge="success" if t.task.seed % 2 == 0 else "failure")
        for t in trajectories[::-1]
    }
    for shuffle_seed in range(3):
        shuffled = trajectories[:]
        random.Random(shuffle_seed).shuffle(shuffled)
        result = admit(shuffled, "judge", verdicts)
        assert sorted(result.admitted_ids) == ["t0", "t2", "t4"]
        assert all(t.verdict.judge == "success" for t in result.admitted)


def test_separate_verdict_by_trajectory_id_overrides_field_by_field():
    trajectory = _traj("t1", 1, reward=1.0, judge="failure")
    result = admit([trajectory], "both", {"t1": Verdict(judge="success")})
    assert result.admitted_ids == ["t1"]
    assert result.admitted[0].verdict.reward == 1.0


def test_verdict_for_unknown_key_is_an_error_naming_it():
    with pytest.raises(DataError, match="miniwob.nope#9"):
        admit([_traj("t1", 1)], "judge", {"miniwob.nope#9": Verdict(judge="success")})


def test_task_key_shared_by_two_trajectories_is_ambiguous():
    with pytest.raises(DataError, match="shared by trajectories a, b"):
        admit([_traj("a", 1), _traj("b", 1)], "judge", {"miniwob.login-user#1": Verdict(judge="success")})


def test_load_verdicts_jsonl_and_object(tmp_path: Path):
    jsonl = tmp_path / "v.jsonl"
    jsonl.write_text(
        json.dumps({"task_key": "miniwob.login-user#1", "judge": "success"})
        + "\n"
        + json.dumps({"trajectory_id": "t2", "judge": "maybe"})
        + "\n"
    )
    with pytest.raises(DataError, match="verdict 't2': field 'judge'"):
        load_verdicts(jsonl)
    obj = tmp_path / "v.json"
    obj.write_text(json.dumps({"t1": {"reward": 1.0}}))
    assert load_verdicts(obj) == {"t1": Verdict(reward=1.0)}


def test_manual_review_asks_per_workflow():
    flows = [Workflow(name=n, steps=[WorkflowStep(action="click")]) for n in ("keep", "drop")]
    asked = []

    def prompt(workflow: Workflow) -> bool:
        asked.append(workflow.name)
        return workflow.name == "keep"

    kept, declined = review_workflows(flows, prompt)
    assert [w.name for w in kept] == ["keep"] and declined == ["drop"] and asked == ["keep", "drop"]
    assert len(review_workflows(flows, None, auto=True)[0]) == 2
    with pytest.raises(DataError, match="--auto"):
        review_workflows(flows, None)


def test_rule_all_admits_every_trajectory_without_a_verdict():
    """AWM's online Mind2Web setting: no verdict exists at test time, every trajectory teaches."""
    from awm.evaluation.admission import admit
    from awm.trajectory import Task, Trajectory, Verdict

    task = Task(task_id="t", scope="mind2web/site", benchmark="mind2web")
    unjudged = Trajectory(trajectory_id="a", task=task)
    failed = Trajectory(trajectory_id="b", task=task.model_copy(update={"task_id": "u"}), verdict=Verdict(reward=0.0))
    assert admit([unjudged, failed], "any").admitted == []
    assert [t.trajectory_id for t in admit([unjudged, failed], "all").admitted] == ["a", "b"]
