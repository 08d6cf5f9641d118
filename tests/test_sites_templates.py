"""Arena task files: parsed as data, validated before any site or browser starts, errors that name the
file, the template and the key; and the success checks, against a real SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from awm.errors import DataError
from awm.sites.checks import (
    Check,
    Evidence,
    connect_read_only,
    contains_words,
    evaluate,
    normalise,
    validate_sql,
)
from awm.sites.templates import SiteFacts, load_task_file

SCHEMA = """
CREATE TABLE ticket (id integer PRIMARY KEY, summary text, priority text, status text, owner text);
CREATE TABLE wiki (name text, version integer, text text);
"""
SITES = {"tracker": SiteFacts(frozenset({"alice", "bob"}), SCHEMA)}

GOOD = """
site = "tracker"

[[template]]
id = "ticket-priority"
kind = "information"
start = "/report/1"
goal = 'What priority does the ticket "{summary}" have?'
demo = ["click('[link] View Tickets')", "click('[link] {summary}')", "send_msg_to_user('{priority}')"]
check = { answer = "{priority}" }

[[template.instance]]
split = "train"
values = { summary = "Crash on save", priority = "major" }

[[template.instance]]
split = "test"
values = { summary = "Slow search", priority = "minor" }

[[template]]
id = "close-ticket"
kind = "update"
login = "alice"
goal = "As {user} (password {password}), close the ticket \\"{summary}\\" as fixed."
demo = [
  "fill('[textbox] Username', '{user}')",
  "fill('[textbox] Password', '{password}')",
  "click('[button] Login')",
]
check = { sql = "SELECT status FROM ticket WHERE summary = :summary", value = "closed" }

[[template.instance]]
split = "train"
values = { summary = "Crash on save" }

[[template.instance]]
split = "test"
values = { summary = "Slow search" }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "tasks.toml"
    path.write_text(text)
    return path


def test_a_good_file_loads_with_goals_values_and_demonstrations(tmp_path: Path) -> None:
    first, second = load_task_file(write(tmp_path, GOOD), sites=SITES)
    assert (first.key, first.scope) == ("tracker.ticket-priority", "sites/tracker/ticket-priority")
    assert first.numbers("train") == [0] and first.numbers("test") == [1]
    assert first.goal_for(1) == 'What priority does the ticket "Slow search" have?'
    demo = first.demonstration(0)
    assert demo is not None and [s.action for s in demo.steps] == ["click", "click", "send_msg_to_user"]
    assert demo.steps[1].target.label == "{summary}" and demo.parameters == ["summary", "priority"]
    # A login template: the user is filled in, the password stays a placeholder the model sees.
    assert second.goal_for(0) == 'As alice (password {password}), close the ticket "Crash on save" as fixed.'
    assert second.values(0) == {"summary": "Crash on save", "user": "alice"}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (('kind = "information"', 'kind = "gossip"'), "template 'ticket-priority': kind"),
        (('start = "/report/1"', 'start = "/report/1"\ncolour = "red"'), "colour: unknown key"),
        (("check = { answer = \"{priority}\" }", "check = { }"), "check: Value error, a check needs at least one"),
        (('login = "alice"', 'login = "mallory"'), "login: 'mallory' is not an account of tracker"),
        (("SELECT status FROM ticket", "SELECT colour FROM ticket"), "check.sql: no such column: colour"),
        (("SELECT status FROM ticket WHERE", "DELETE FROM ticket WHERE"), "check.sql: it must only read"),
        (("SELECT status FROM ticket", "SELECT status FROM tickets"), "check.sql: no such table: tickets"),
        (("click('[link] View Tickets')", "click('12')"), "demo[0]: \"click('12')\" names an element id"),
        (('values = { summary = "Slow search", priority = "minor" }', 'values = { summary = "Slow search" }'),
         "instance[1].values: no value for {priority}"),  # fmt: skip
        (('split = "test"\nvalues = { summary = "Slow search" }', 'split = "train"\nvalues = { summary = "Slow search" }'),
         "a template needs at least one test instance"),  # fmt: skip
        (('site = "tracker"', 'site = "tracker"\nextra = 1'), "extra: unknown key"),
    ],
)
def test_each_defect_is_refused_naming_file_template_and_key(tmp_path: Path, change: tuple[str, str], named: str) -> None:
    old, new = change
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(DataError) as caught:
        load_task_file(path, sites=SITES)
    assert str(path) in str(caught.value)
    assert named in str(caught.value)


def test_a_file_that_is_not_toml_or_is_missing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="is not valid TOML"):
        load_task_file(write(tmp_path, "site = \n"), sites=SITES)
    with pytest.raises(DataError, match="does not exist"):
        load_task_file(tmp_path / "none.toml", sites=SITES)
    with pytest.raises(DataError, match="unknown site 'elsewhere'"):
        load_task_file(write(tmp_path, GOOD.replace('site = "tracker"', 'site = "elsewhere"')), sites=SITES)


def test_sql_validation_compiles_against_the_schema_without_running() -> None:
    assert validate_sql("SELECT id FROM ticket WHERE summary = :s", SCHEMA) is None
    assert validate_sql("SELECT 1; DROP TABLE ticket", SCHEMA) == "it must be exactly one SQL statement"
    assert validate_sql("UPDATE ticket SET status = 'x'", SCHEMA) == "it must only read (SELECT)"
    assert validate_sql("ATTACH DATABASE 'x.db' AS x", SCHEMA) == "it must only read (SELECT)"


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "site.sqlite"
    with sqlite3.connect(path) as conn:
        conn.executescript(SCHEMA)
        conn.executemany(
            "INSERT INTO ticket VALUES (?, ?, ?, ?, ?)",
            [(1, "Crash on save", "major", "new", "bob"), (2, "Slow search", "minor", "closed", "alice")],
        )
    return path


def test_checks_read_the_database_and_the_episode(database: Path) -> None:
    values = {"summary": "Crash on save", "who": "bob"}
    by_value = Check(sql="SELECT status FROM ticket WHERE summary = :summary", value="new")
    assert evaluate(by_value, values, database, Evidence()).passed
    by_rows = Check(sql="SELECT id, owner FROM ticket ORDER BY id", rows=[[2, "alice"], [1, "{who}"]])
    assert evaluate(by_rows, values, database, Evidence()).passed
    by_count = Check(sql="SELECT id FROM ticket WHERE status = 'closed'", count=2)
    outcome = evaluate(by_count, values, database, Evidence())
    assert not outcome.passed and "gave 1 row(s), expected 2" in outcome.detail
    answered = Check(answer=["major", "{who}"])
    assert evaluate(answered, values, None, Evidence(answer="It is MAJOR, owned by Bob.", ended=True)).passed
    assert not evaluate(answered, values, None, Evidence(answer="majority", ended=True)).passed
    refused = Check(infeasible=True, sql="SELECT id FROM ticket", count=2)
    assert evaluate(refused, values, database, Evidence(infeasible=True, ended=True)).passed
    assert not evaluate(refused, values, database, Evidence(answer="done", ended=True)).passed
    where = Check(url="/ticket/{who}")
    assert evaluate(where, values, None, Evidence(url="http://127.0.0.1:9/ticket/bob")).passed


def test_a_check_can_never_write_even_if_its_sql_was_not_validated(database: Path) -> None:
    conn = connect_read_only(database)
    try:
        with pytest.raises(sqlite3.DatabaseError):
            conn.execute("DELETE FROM ticket")
        with pytest.raises(sqlite3.DatabaseError):
            conn.execute("ATTACH DATABASE ':memory:' AS other")
    finally:
        conn.close()
    with sqlite3.connect(database) as conn:
        assert conn.execute("SELECT count(*) FROM ticket").fetchone()[0] == 2


def test_answers_are_normalised_as_people_write_them() -> None:
    assert normalise("$1,200.50") == "1200.5"
    assert normalise("  The  Priority is MAJOR. ") == "the priority is major"
    assert normalise("12.0") == "12"
    assert contains_words("Total: €1,200.50 in all", "1200.50")
    assert not contains_words("ticket 120", "12")
