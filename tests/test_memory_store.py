"""The versioned store: compare-and-swap commits, no lost updates across processes, crash safety."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from awm.errors import AwmError, StoreConflictError
from awm.memory.store import WorkflowStore
from awm.memory.workflow import Provenance, Workflow, WorkflowStep
from awm.trajectory import TargetDesc


def wf(name: str, value: str = "{x}", n_steps: int = 1) -> Workflow:
    return Workflow(
        name=name,
        description=f"Workflow {name}.",
        parameters=["x"],
        steps=[
            WorkflowStep(
                reasoning=f"step {i}",
                action="fill",
                target=TargetDesc(role="textbox", label="Q"),
                value=value,
            )
            for i in range(n_steps)
        ],
        provenance=Provenance(mode="rule", trajectory_ids=[f"traj-{name}"]),
    )


@pytest.fixture
def store(tmp_path: Path):
    with WorkflowStore(tmp_path / "memory.sqlite") as s:
        yield s


def test_commit_head_get_log(store: WorkflowStore):
    assert store.head("s") is None and store.log("s") == [] and store.scopes() == []
    v1 = store.commit("s", [wf("a")], parent=None, author="rule", message="first")
    v2 = store.commit("s", [wf("a"), wf("b")], parent=1, author="neural")
    assert (v1.version, v2.version, v2.parent) == (1, 2, 1)
    head = store.head("s")
    assert head is not None and head.version == 2 and [w.name for w in head.workflows] == ["a", "b"]
    assert head.workflows == [wf("a"), wf("b")]  # JSON through SQLite, provenance included
    assert store.get("s", 1).workflows == [wf("a")]
    assert [(i.version, i.parent, i.author, i.n_workflows, i.message) for i in store.log("s")] == [
        (1, None, "rule", 1, "first"),
        (2, 1, "neural", 2, ""),
    ]
    assert store.scopes() == ["s"]
    with pytest.raises(AwmError, match="no version 7"):
        store.get("s", 7)


def test_stale_parent_is_a_conflict_and_changes_nothing(store: WorkflowStore):
    store.commit("s", [wf("a")], parent=None, author="rule")
    store.commit("s", [wf("b")], parent=1, author="rule")
    before = store.log("s")
    with pytest.raises(StoreConflictError, match="head is version 2, not 1"):
        store.commit("s", [wf("c")], parent=1, author="rule")
    with pytest.raises(StoreConflictError):
        store.commit("s", [wf("c")], parent=None, author="rule")
    assert store.log("s") == before and store.head("s").workflows == [wf("b")]


def test_update_rebases_on_the_new_head(tmp_path: Path):
    path = tmp_path / "m.sqlite"
    with WorkflowStore(path) as mine, WorkflowStore(path) as theirs:
        mine.commit("s", [wf("a")], parent=None, author="manual")
        calls = []

        def add_b(workflows):
            calls.append([w.name for w in workflows])
            if len(calls) == 1:  # another writer commits while we are thinking
                theirs.update("s", lambda ws: [*ws, wf("c")], author="neural")
            return [*workflows, wf("b")]

        result = mine.update("s", add_b, author="rule")
        assert calls == [["a"], ["a", "c"]]
        assert [w.name for w in result.workflows] == ["a", "c", "b"] and result.version == 3


def test_update_gives_up_clearly(tmp_path: Path):
    path = tmp_path / "m.sqlite"
    with WorkflowStore(path) as mine, WorkflowStore(path) as theirs:

        def always_raced(workflows):
            theirs.update("s", lambda ws: [*ws, wf(f"t{len(ws)}")], author="neural")
            return workflows

        with pytest.raises(StoreConflictError, match="gave up after 3 attempts"):
            mine.update("s", always_raced, author="rule", attempts=3)
        assert len(mine.log("s")) == 3  # only the other writer's versions


def test_rollback_is_a_new_version_and_diff(store: WorkflowStore):
    store.commit("s", [wf("a"), wf("b")], parent=None, author="rule")
    store.commit("s", [wf("a", value="{y}"), wf("c")], parent=1, author="neural")
    diff = store.diff("s", 1, 2)
    assert (diff.added, diff.removed, diff.changed) == (["c"], ["b"], ["a"])
    text = diff.render()
    assert "+ c" in text and "- b" in text and "~ a" in text and '"{y}"' in text
    assert store.diff("s", 2, 2).is_empty()
    back = store.rollback("s", 1)
    assert (back.version, back.parent, back.author) == (3, 2, "rollback")
    assert store.head("s").workflows == store.get("s", 1).workflows
    assert [i.author for i in store.log("s")] == ["rule", "neural", "rollback"]
    assert store.get("s", 2).workflows[1].name == "c"  # nothing deleted
    assert store.diff("s", 1, 3).is_empty()
    with pytest.raises(AwmError):
        store.rollback("s", 9)


def test_identical_workflows_are_stored_once(store: WorkflowStore):
    for i in range(5):
        store.commit("s", [wf("a"), wf("b"), wf(f"n{i}")], parent=i or None, author="rule")
    rows = store._db.execute("SELECT COUNT(*) FROM workflows").fetchone()[0]
    assert rows == 2 + 5


def test_head_info_does_not_need_bodies(store: WorkflowStore):
    store.commit("s", [wf("a"), wf("b")], parent=None, author="rule")
    info = store.head_info("s")
    assert info.version == 1 and info.names == ["a", "b"] and len(set(info.workflow_ids)) == 2


# --- two processes, one scope -----------------------------------------------------------------------


def _commit_worker(path: str, tag: str, attempts: int, start, results) -> None:
    """Commit `attempts` times on top of whatever head it reads; report each version or conflict."""
    outcomes = []
    with WorkflowStore(Path(path)) as store:
        start.wait()
        for i in range(attempts):
            head = store.head("shared")
            base = [] if head is None else head.workflows
            name = f"{tag}-{i}"
            try:
                new = store.commit(
                    "shared", [*base, wf(name)], parent=None if head is None else head.version, author=tag
                )
                outcomes.append((name, new.version))
            except StoreConflictError:
                outcomes.append((name, None))
    results.put(outcomes)


def test_two_processes_never_lose_an_update(tmp_path: Path):
    ctx = multiprocessing.get_context("spawn")
    path = str(tmp_path / "m.sqlite")
    WorkflowStore(Path(path)).close()
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_commit_worker, args=(path, tag, 100, start, results)) for tag in ("p", "q")]
    for p in procs:
        p.start()
    start.set()
    outcomes = [item for _ in procs for item in results.get(timeout=300)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert len(outcomes) == 200
    landed = {name: version for name, version in outcomes if version is not None}
    conflicts = [name for name, version in outcomes if version is None]
    assert len(landed) + len(conflicts) == 200
    with WorkflowStore(Path(path)) as store:
        log = store.log("shared")
        assert [i.version for i in log] == list(range(1, len(log) + 1))  # contiguous
        assert len(log) == len(landed)  # every success is a version, every version a success
        assert sorted(landed.values()) == [i.version for i in log]
        for name, version in landed.items():
            assert name in {w.name for w in store.get("shared", version).workflows}
        # Each success was built on the previous head, so the head holds every successful commit.
        head_names = [w.name for w in store.head("shared").workflows]
        assert sorted(head_names) == sorted(landed)
        assert [i.parent for i in log] == [None, *range(1, len(log))]
    assert len({tag.split("-")[0] for tag in landed}) == 2  # both writers got commits in


def _commit_forever(path: str, ready) -> None:
    with WorkflowStore(Path(path)) as store:
        i = 0
        while True:
            head = store.head("crash")
            base = [] if head is None else head.workflows[-200:]
            store.commit(
                "crash",
                [*base, wf(f"w{i}", value="x" * 2000, n_steps=5)],
                parent=None if head is None else head.version,
                author="rule",
            )
            i += 1
            if i == 3:
                ready.set()


@pytest.mark.parametrize("delay", [0.05, 0.4])
def test_sigkill_during_commits_leaves_a_complete_head(tmp_path: Path, delay: float):
    ctx = multiprocessing.get_context("spawn")
    path = str(tmp_path / "m.sqlite")
    ready = ctx.Event()
    proc = ctx.Process(target=_commit_forever, args=(path, ready))
    proc.start()
    assert ready.wait(timeout=120)
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=30)
    assert proc.exitcode == -signal.SIGKILL
    with WorkflowStore(Path(path)) as store:
        assert store._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        log = store.log("crash")
        head = store.head("crash")
        assert head is not None and head.version == log[-1].version >= 3
        assert len(head.workflows) == log[-1].n_workflows
        assert head.workflows[-1].name == f"w{head.version - 1}"
        # the store is still writable after the crash
        store.commit("crash", head.workflows[:1], parent=head.version, author="manual")


def test_not_a_database_is_a_clear_error(tmp_path: Path):
    bad = tmp_path / "bad.sqlite"
    bad.write_text("this is not sqlite " * 100)
    with pytest.raises(AwmError, match="not a usable workflow memory database"):
        WorkflowStore(bad)


def test_wal_mode(store: WorkflowStore):
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert isinstance(store._db, sqlite3.Connection)
