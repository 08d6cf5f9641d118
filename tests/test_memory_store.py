"""The versioned store: compare-and-swap commits, no lost updates across processes, crash safety."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from awm.errors import AwmError, StoreConflictError
from awm.memory.store import WorkflowStore, workflow_body, workflow_id
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


# --- caches: reads parse once, commits skip known bodies, nothing goes stale ---------------------------


def test_repeated_head_reads_share_parsed_workflows_and_see_other_writers(tmp_path: Path):
    path = tmp_path / "m.sqlite"
    with WorkflowStore(path) as mine, WorkflowStore(path) as theirs:
        mine.commit("s", [wf("a"), wf("b")], parent=None, author="rule")
        first, second = mine.head("s"), mine.head("s")
        assert first is not second and first.workflows is not second.workflows
        assert all(x is y for x, y in zip(first.workflows, second.workflows, strict=True))
        theirs.update("s", lambda ws: [*ws, wf("c")], author="neural")  # another instance moves the head
        head = mine.head("s")
        assert head.version == 2 and [w.name for w in head.workflows] == ["a", "b", "c"]
        assert head.workflows[0] is first.workflows[0]  # unchanged workflows are not parsed again
        assert mine.head_workflow_ids("s") == (2, tuple(theirs.head_info("s").workflow_ids))


def test_a_workflow_mutated_in_place_is_committed_as_it_now_is(tmp_path: Path):
    path = tmp_path / "m.sqlite"
    with WorkflowStore(path) as store:
        store.commit("s", [wf("a"), wf("b")], parent=None, author="rule")
        head = store.head("s")
        head.workflows[0].description = "changed in place"
        head.workflows[1].steps[0].value = "{other}"  # nested, too
        store.commit("s", head.workflows, parent=1, author="manual")
        assert [w.description for w in store.head("s").workflows] == ["changed in place", "Workflow b."]
        # The old version, read through the same instance, is still the original content.
        assert store.get("s", 1).workflows == [wf("a"), wf("b")]
    with WorkflowStore(path) as fresh:
        assert fresh.get("s", 1).workflows == [wf("a"), wf("b")]
        latest = fresh.head("s").workflows
        assert latest[0].description == "changed in place" and latest[1].steps[0].value == "{other}"
        assert fresh.diff("s", 1, 2).changed == ["a", "b"]


def test_trusted_commit_stores_the_same_content(tmp_path: Path):
    path = tmp_path / "m.sqlite"
    base = [wf(f"w{i}") for i in range(50)]
    with WorkflowStore(path) as store:
        store.commit("s", base, parent=None, author="rule")
        head = store.head("s").workflows
        new = [*head[1:], wf("new"), base[0]]  # store-read objects, a new one, and a committed one
        v2 = store.commit("s", new, parent=1, author="neural", trust_unchanged=True)
        v3 = store.update("s", lambda ws: [*ws, wf("newer")], author="neural", trust_unchanged=True)
    with WorkflowStore(path) as fresh:
        assert fresh.get("s", 2).workflows == [*base[1:], wf("new"), base[0]] == v2.workflows
        assert fresh.head("s").workflows == [*base[1:], wf("new"), base[0], wf("newer")] == v3.workflows
        rows = fresh._db.execute("SELECT COUNT(*) FROM workflows").fetchone()[0]
        assert rows == 52


def test_canonical_body_and_ids_text_are_unchanged(store: WorkflowStore):
    """Content keys must stay what earlier versions of awm computed, or identical workflows would fork."""
    odd = wf('quote " back\\slash é 漢字 \u2028 \x01')
    assert workflow_body(odd) == odd.model_dump_json()
    store.commit("s", [odd, wf("b")], parent=None, author="rule")
    ids_text = store._db.execute("SELECT workflow_ids FROM versions WHERE scope = 's'").fetchone()[0]
    assert ids_text == json.dumps(
        [workflow_id(odd.model_dump_json()), workflow_id(wf("b").model_dump_json())]
    )
    assert store.head("s").workflows == [odd, wf("b")]


def test_caches_are_bounded_and_reads_stay_correct(tmp_path: Path):
    path = tmp_path / "m.sqlite"
    workflows = [wf(f"w{i}") for i in range(10)]
    with WorkflowStore(path, cache_limit=3) as store:
        store.commit("s", workflows, parent=None, author="rule")
        for _ in range(2):
            assert store.head("s").workflows == workflows
        store.commit("s", workflows[::-1], parent=1, author="rule", trust_unchanged=True)
        assert store.head("s").workflows == workflows[::-1]
        assert len(store._cache.body_by_key) <= 3 and len(store._cache.parsed) <= 3
        assert len(store._cache.by_object) <= 3
    with WorkflowStore(path) as fresh:
        assert fresh.head("s").workflows == workflows[::-1]


def test_db_id_is_kept_and_differs_between_databases(tmp_path: Path):
    with WorkflowStore(tmp_path / "a.sqlite") as a, WorkflowStore(tmp_path / "b.sqlite") as b:
        assert a.db_id != b.db_id and len(a.db_id) == 32
        first = a.db_id
    with WorkflowStore(tmp_path / "a.sqlite") as again:
        assert again.db_id == first


def test_commit_rejects_things_that_are_not_workflows(store: WorkflowStore):
    with pytest.raises(AwmError, match="Workflow objects"):
        store.commit("s", [{"name": "a"}], parent=None, author="rule")  # type: ignore[list-item]
    assert store.head("s") is None
