"""Memory that notices it broke: calls kept per workflow, counted, and the ones that keep breaking
retired in a new version (nothing deleted), from the store up to `awm memory show` and the online
driver's hook."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

from typer.testing import CliRunner

from awm.memory.commands import app
from awm.memory.health import WorkflowHealth, health, retire_broken, uses_of
from awm.memory.store import WorkflowStore, WorkflowUse
from awm.memory.workflow import Provenance, Workflow, WorkflowStep
from awm.pipeline.online import note_workflow_calls
from awm.trajectory import TargetDesc, Task, Trajectory, WorkflowCall

SCOPE = "sites/trac.change-priority"


def wf(name: str) -> Workflow:
    return Workflow(
        name=name, description=f"Workflow {name}.", parameters=["x"],
        steps=[WorkflowStep(reasoning="fill it", action="fill", target=TargetDesc(role="textbox", label="Q"), value="{x}")],
        provenance=Provenance(mode="rule", trajectory_ids=[f"traj-{name}"]),
    )  # fmt: skip


def use(trajectory: str, name: str, completed: bool, error: str = "") -> WorkflowUse:
    return WorkflowUse(trajectory, 0, name, completed, 3 if completed else 1, 3, error)


def test_health_counts_calls_completions_and_the_last_break() -> None:
    records = health([
        use("t1", "a", True), use("t2", "a", False, "step 2 of 3 (click [button] Save): target_not_found"),
        use("t3", "b", True), use("t4", "a", True),
    ])  # fmt: skip
    assert records["a"].model_dump(exclude={"recent"}) == {
        "name": "a", "calls": 3, "completions": 2, "breaks": 1,
        "last_break": "step 2 of 3 (click [button] Save): target_not_found",
    }  # fmt: skip
    assert (records["b"].calls, records["b"].breaks) == (1, 0)


def test_a_workflow_keeps_breaking_when_breaks_outnumber_completions_over_its_last_calls() -> None:
    def record(*completed: bool) -> WorkflowHealth:
        return health([use(f"t{i}", "a", done) for i, done in enumerate(completed)])["a"]

    assert not record(False).keeps_breaking()  # one break is no pattern
    assert record(False, False).keeps_breaking()
    assert not record(True, False).keeps_breaking()  # a tie keeps it
    assert record(True, False, False).keeps_breaking()
    # an old run of successes does not shield it: only the last 4 calls count
    assert record(True, True, True, True, True, False, False, False).keeps_breaking()
    assert not record(False, False, False, True, True, True, True).keeps_breaking()


def test_calls_are_kept_once_and_read_in_order(tmp_path: Path) -> None:
    with WorkflowStore(tmp_path / "m.db") as store:
        assert store.record_uses(SCOPE, [use("t1", "a", True), use("t2", "a", False)]) == 2
        assert store.record_uses(SCOPE, [use("t2", "a", False)]) == 0  # a resumed run records nothing twice
        assert [(u.trajectory_id, u.completed) for u in store.uses(SCOPE)] == [("t1", True), ("t2", False)]
        assert store.uses("other/scope") == []


def test_a_database_from_before_calls_were_kept_reads_as_no_calls(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with WorkflowStore(path) as store:
        store.commit(SCOPE, [wf("a")], parent=None, author="manual")
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE workflow_uses")
    with WorkflowStore(path, mode="ro") as store:
        assert store.uses(SCOPE) == []


def test_a_workflow_that_keeps_breaking_is_retired_in_a_new_version_and_kept_in_the_old(tmp_path: Path) -> None:
    with WorkflowStore(tmp_path / "m.db") as store:
        store.commit(SCOPE, [wf("a"), wf("b")], parent=None, author="online-rule")
        store.record_uses(SCOPE, [
            use("t1", "a", True), use("t2", "a", False, "step 1 of 3 (fill [textbox] Q): target_not_found"),
            use("t3", "a", False, "step 1 of 3 (fill [textbox] Q): target_not_found"),
            WorkflowUse("t1", 1, "b", True, 3, 3, ""), use("t4", "b", False),
        ])  # fmt: skip
        version, retired = retire_broken(store, SCOPE)
        assert retired == ["a"] and version is not None and version.version == 2
        assert [w.name for w in version.workflows] == ["b"]  # b: one of two broke, a tie keeps it
        info = store.log(SCOPE)[-1]
        assert info.author == "retire" and "a: 2 of its last 3 calls broke" in info.message
        assert "target_not_found" in info.message
        assert [w.name for w in store.get(SCOPE, 1).workflows] == ["a", "b"]  # nothing deleted
        assert retire_broken(store, SCOPE) == (None, [])  # repeated: nothing more to retire


def trajectory_with(calls: list[WorkflowCall], tid: str) -> Trajectory:
    task = Task(task_id="browsergym/sites.trac.change-priority", scope=SCOPE, benchmark="sites", seed=3)
    return Trajectory(trajectory_id=tid, task=task, workflow_calls=calls)


def test_the_online_hook_keeps_each_episode_s_calls_and_retires_after_the_second_break(tmp_path: Path) -> None:
    broken = WorkflowCall(step=0, name="a", steps_total=3, steps_run=1, error="step 2 of 3: target_not_found")
    with WorkflowStore(tmp_path / "m.db") as store:
        store.commit(SCOPE, [wf("a")], parent=None, author="online-rule")
        ctx = SimpleNamespace(store=store, config=SimpleNamespace(retire_window=4), run_dir=tmp_path)
        first = trajectory_with([broken], "ep-1")
        task = first.task
        assert note_workflow_calls(ctx, task, first) == ""  # type: ignore[arg-type]
        assert note_workflow_calls(ctx, task, first) == ""  # type: ignore[arg-type]  # resumed: not counted twice
        said = note_workflow_calls(ctx, task, trajectory_with([broken], "ep-2"))  # type: ignore[arg-type]
        assert said == "retired a in version 2"
        assert store.head(SCOPE).workflows == []
        assert json.loads(store._db.execute("SELECT provenance FROM versions WHERE version = 2").fetchone()[0])[
            "trajectory_id"
        ] == "ep-2"
        assert uses_of(trajectory_with([], "ep-3")) == []


def test_memory_show_prints_each_workflow_s_calls(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with WorkflowStore(db) as store:
        store.commit(SCOPE, [wf("a")], parent=None, author="online-rule")
        store.record_uses(SCOPE, [use("t1", "a", True), use("t2", "a", False, "step 2 of 3: target_not_found")])
    text = CliRunner().invoke(app, ["show", SCOPE, "--db", str(db)])
    assert text.exit_code == 0, text.output
    assert "a: 2 call(s), 1 ran to the end, 1 broke; last break: step 2 of 3: target_not_found" in text.output
    as_json = CliRunner().invoke(app, ["show", SCOPE, "--db", str(db), "--json"])
    assert json.loads(as_json.output)["calls"]["a"] == {
        "name": "a", "calls": 2, "completions": 1, "breaks": 1, "last_break": "step 2 of 3: target_not_found",
    }  # fmt: skip
