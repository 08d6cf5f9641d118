"""The one commit path: idempotent by message, no version without a change, no update lost to a race."""

from __future__ import annotations

from pathlib import Path

import pytest

from awm.errors import AwmError
from awm.induction.commit import commit_candidates, committed_before, find_commit
from awm.memory.store import WorkflowStore
from awm.memory.workflow import Provenance, Workflow, WorkflowStep
from awm.trajectory import TargetDesc

SCOPE = "miniwob/login-user"


def flow(name: str, labels: list[str], trajectory_ids: list[str]) -> Workflow:
    return Workflow(
        name=name,
        description=f"{name}.",
        steps=[
            WorkflowStep(action="click", target=TargetDesc(role="button", label=label)) for label in labels
        ],
        provenance=Provenance(trajectory_ids=trajectory_ids, mode="rule"),
    )


def test_same_message_twice_commits_once(tmp_path: Path) -> None:
    with WorkflowStore(tmp_path / "m.sqlite") as store:
        first = commit_candidates(
            store, SCOPE, [flow("login", ["Login"], ["t1"])], author="rule", message="m1"
        )
        assert first.version is not None and first.version.version == 1 and first.changed
        assert (
            not first.already_committed and first.diff.added == ["login"] and first.merge.added == ["login"]
        )
        # a resumed commit point: other candidates even, but the same message -> the version made before
        again = commit_candidates(
            store, SCOPE, [flow("other", ["Other"], ["t2"])], author="rule", message="m1"
        )
        assert again.already_committed and not again.changed
        assert again.version.version == 1 and again.diff.added == ["login"]
        assert [w.name for w in again.merged] == ["login"]
        assert [v.version for v in store.log(SCOPE)] == [1]
        assert committed_before(store, SCOPE, "m1").version.version == 1
        assert committed_before(store, SCOPE, "m2") is None and find_commit(store, SCOPE, "m2") is None


def test_no_change_commits_no_version(tmp_path: Path) -> None:
    with WorkflowStore(tmp_path / "m.sqlite") as store:
        commit_candidates(store, SCOPE, [flow("login", ["Login"], ["t1"])], author="rule", message="m1")
        for message, candidates in (
            ("m2", [flow("login again", ["Login"], ["t1"])]),  # same steps, no new trajectory id
            ("m3", []),
        ):
            result = commit_candidates(store, SCOPE, candidates, author="rule", message=message)
            assert result.version is None and not result.changed and not result.already_committed
            assert result.diff is None and [w.name for w in result.merged] == ["login"]
        assert [v.version for v in store.log(SCOPE)] == [1]
        assert commit_candidates(store, "empty", [], author="rule", message="m").version is None
        assert store.head("empty") is None
        # a duplicate that brings a new trajectory id does change memory: its provenance grows
        grown = commit_candidates(store, SCOPE, [flow("x", ["Login"], ["t2"])], author="rule", message="m4")
        assert grown.version.version == 2 and grown.merge.updated == ["login"] and grown.diff.changed == []
        assert grown.merged[0].provenance.trajectory_ids == ["t1", "t2"]


def test_dry_run_previews_and_commits_nothing(tmp_path: Path) -> None:
    with WorkflowStore(tmp_path / "m.sqlite") as store:
        commit_candidates(store, SCOPE, [flow("login", ["Login"], ["t1"])], author="rule", message="m1")
        store.rollback(SCOPE, 1)  # version 2; the next would be 3, not head + 1
        preview = commit_candidates(
            store, SCOPE, [flow("logout", ["Logout"], ["t2"])], author="rule", message="m2", dry_run=True
        )
        assert preview.version is None and preview.changed and not preview.already_committed
        assert (preview.diff.a, preview.diff.b, preview.diff.added) == (2, 3, ["logout"])
        assert [w.name for w in preview.merged] == ["login", "logout"]
        assert store.head_version(SCOPE) == 2 and find_commit(store, SCOPE, "m2") is None


def test_a_concurrent_head_move_is_merged_not_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.sqlite"
    with WorkflowStore(path) as mine, WorkflowStore(path) as theirs:
        commit_candidates(mine, SCOPE, [flow("login", ["Login"], ["t1"])], author="rule", message="base")
        real_commit = mine.commit
        raced: list[int] = []

        def commit_after_the_other_writer(*args, **kwargs):
            if not raced:  # between our read of the head and our compare-and-swap, another process commits
                other = commit_candidates(
                    theirs, SCOPE, [flow("logout", ["Logout"], ["t2"])], author="rule", message="theirs"
                )
                raced.append(other.version.version)
            return real_commit(*args, **kwargs)

        monkeypatch.setattr(mine, "commit", commit_after_the_other_writer)
        result = commit_candidates(
            mine, SCOPE, [flow("search", ["Search"], ["t3"])], author="rule", message="mine"
        )
    assert raced == [2]
    assert result.version.version == 3 and result.version.parent == 2
    assert [w.name for w in result.merged] == ["login", "logout", "search"]
    assert result.diff.a == 2 and result.diff.added == ["search"]  # the diff is against the head it replaced
    with WorkflowStore(path) as store:
        assert [w.name for w in store.head(SCOPE).workflows] == ["login", "logout", "search"]


def test_a_concurrent_commit_of_the_same_point_is_returned_not_repeated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "m.sqlite"
    with WorkflowStore(path) as mine, WorkflowStore(path) as theirs:
        real_commit = mine.commit
        raced: list[int] = []

        def commit_after_the_other_writer(*args, **kwargs):
            if not raced:
                other = commit_candidates(
                    theirs, SCOPE, [flow("login", ["Login"], ["t1"])], author="rule", message="point"
                )
                raced.append(other.version.version)
            return real_commit(*args, **kwargs)

        monkeypatch.setattr(mine, "commit", commit_after_the_other_writer)
        result = commit_candidates(
            mine, SCOPE, [flow("other", ["Other"], ["t9"])], author="rule", message="point"
        )
        assert result.already_committed and result.version.version == 1
        assert [v.version for v in mine.log(SCOPE)] == [1]


def test_a_commit_needs_a_message(tmp_path: Path) -> None:
    with WorkflowStore(tmp_path / "m.sqlite") as store, pytest.raises(AwmError, match="message"):
        commit_candidates(store, SCOPE, [flow("login", ["Login"], ["t1"])], author="rule", message=" ")
