"""What an episode changed in a site's database, and checks that see collateral damage: the difference of
two SQLite files (bookkeeping left out), a template's `changes`, and an arena task whose check fails when
the task was done and something else broke (the real Trac, its database edited as an episode would)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from awm.errors import DataError
from awm.sites import lifecycle
from awm.sites.changes import database_changes, undeclared
from awm.sites.registry import get_site
from awm.sites.site import INSTANCE_ENV
from awm.sites.task import SiteTask
from awm.sites.templates import load_task_file, load_templates


def _db(path: Path, rows: list[tuple[int, str, str]], seen: str = "mon") -> Path:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE ticket (id INTEGER PRIMARY KEY, summary TEXT, priority TEXT)")
        db.execute("CREATE TABLE session (sid TEXT, last_visit TEXT)")
        db.executemany("INSERT INTO ticket VALUES (?, ?, ?)", rows)
        db.execute("INSERT INTO session VALUES ('carol', ?)", (seen,))
    return path


def test_the_difference_names_rows_added_removed_and_changed_and_leaves_bookkeeping_out(tmp_path: Path) -> None:
    before = _db(tmp_path / "a.db", [(1, "Login page", "major"), (2, "Export", "minor")])
    after = _db(tmp_path / "b.db", [(1, "Login page", "critical"), (3, "New one", "minor")], seen="tue")
    changes = database_changes(before, after)
    assert [c.table for c in changes] == ["session", "ticket"]
    ticket = changes[1]
    assert (ticket.added, ticket.removed, ticket.changed) == (1, 1, 1)
    assert ticket.describe().startswith("ticket: 1 added, 1 removed, 1 changed (+(3, 'New one', 'minor'); -(2,")
    assert "~(1, 'Login page', 'major') -> (1, 'Login page', 'critical')" in ticket.describe()
    kept = database_changes(before, after, bookkeeping={"session": ("last_visit",)})
    assert [c.table for c in kept] == ["ticket"]
    assert database_changes(before, after, bookkeeping={"session": ("*",), "ticket": ("*",)}) == []
    assert [c.table for c in undeclared(changes, ["ticket"])] == ["session"]
    assert undeclared(changes, None) == [] and len(undeclared(changes, [])) == 2


def test_a_template_may_only_name_tables_of_its_site(tmp_path: Path) -> None:
    assert load_templates()["trac.change-priority"].may_change == ["ticket", "ticket_change"]
    assert load_templates()["trac.ticket-priority"].may_change == []  # information: nothing
    assert load_templates()["trac.file-ticket"].may_change is None  # a create template without the key
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'site = "trac"\n[[template]]\nid = "look"\nkind = "navigation"\ngoal = "Open the roadmap."\n'
        'changes = ["tickets"]\ncheck = { url = "/roadmap" }\ndemo = ["click(\'[link] ROADMAP\')"]\n'
        '[[template.instance]]\nsplit = "train"\n[[template.instance]]\nsplit = "test"\n'
    )
    with pytest.raises(DataError, match=r"look.*changes: tickets is not a table of trac's database"):
        load_task_file(bad)


@pytest.fixture
def trac_copy(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    monkeypatch.setenv(INSTANCE_ENV, "test-changes")
    site = get_site("trac")
    lifecycle.reset(site)
    yield site
    lifecycle.down(site)
    shutil.rmtree(site.home, ignore_errors=True)


def _edit(site: object, sql: str, *args: object) -> None:
    with sqlite3.connect(site.database) as db:  # type: ignore[attr-defined]
        db.execute(sql, args)


@pytest.mark.sites
def test_a_check_that_passed_fails_when_the_episode_also_broke_something(trac_copy: object) -> None:
    page = SimpleNamespace(url="http://127.0.0.1/ticket/1")
    task = SiteTask(2, template_key="trac.change-priority")
    values = task.template.values(2)
    _edit(trac_copy, "UPDATE ticket SET priority = ? WHERE summary = ?", values["priority"], values["summary"])
    reward, done, _, info = task.validate(page, [])
    assert (reward, done) == (1.0, True) and info["changes"][0].startswith("ticket: 1 changed")
    # The task done plus an extra edit elsewhere: a milestone's description rewritten.
    _edit(trac_copy, "UPDATE milestone SET description = 'gone' WHERE name = (SELECT name FROM milestone LIMIT 1)")
    reward, done, _, info = task.validate(page, [])
    assert (reward, done) == (0.0, True)
    assert "but the episode also changed what the task may not (ticket, ticket_change may change): milestone: 1 changed" in info["check"]


@pytest.mark.sites
def test_an_answer_is_not_enough_when_the_episode_edited_the_site(trac_copy: object) -> None:
    page = SimpleNamespace(url="http://127.0.0.1/ticket/1")
    task = SiteTask(2, template_key="trac.ticket-priority")
    answer = [{"role": "user", "message": task.template.goal_for(2)}, {"role": "assistant", "message": task.template.values(2)["priority"]}]
    assert task.validate(page, answer)[0] == 1.0
    _edit(trac_copy, "UPDATE ticket SET priority = 'trivial' WHERE id = 1")  # and it changed another ticket
    reward, _, _, info = task.validate(page, answer)
    assert reward == 0.0 and "(nothing may change): ticket: 1 changed" in info["check"]


@pytest.mark.sites
def test_the_task_done_on_the_wrong_record_fails_and_says_what_changed(trac_copy: object) -> None:
    page = SimpleNamespace(url="http://127.0.0.1/ticket/1")
    task = SiteTask(2, template_key="trac.change-priority")
    values = task.template.values(2)
    _edit(trac_copy, "UPDATE ticket SET priority = ? WHERE summary != ? AND id = 1", values["priority"], values["summary"])
    reward, _, _, info = task.validate(page, [{"role": "infeasible", "message": "x"}])
    assert reward == 0.0 and info["changes"] == [c for c in info["changes"] if c.startswith("ticket: 1 changed")]
