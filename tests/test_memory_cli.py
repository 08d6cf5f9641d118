"""`awm memory` commands: import, log, show, diff, rollback, export, and rejections that leave memory alone."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from awm.errors import AwmError, DataError, WorkflowParseError
from awm.memory.commands import app
from awm.memory.store import NoStoreError, WorkflowStore

M2W = """## search_site
Given that you are on the home page, this workflow searches the site.
[textbox] Search -> TYPE: {query}
[button] Go -> CLICK
"""

M2W_V2 = """## search_site
Given that you are on the home page, this workflow searches the site.
[searchbox] Search -> TYPE: {query}
[button] Go -> CLICK

## open_cart
Given that you are on any page, open the shopping cart.
[link] Cart -> CLICK
"""

runner = CliRunner()


def cli(*args: str, db: Path):
    result = runner.invoke(app, [*args, "--db", str(db)], catch_exceptions=True)
    return result


@pytest.fixture
def files(tmp_path: Path):
    (tmp_path / "v1.txt").write_text(M2W)
    (tmp_path / "v2.txt").write_text(M2W_V2)
    (tmp_path / "bad.txt").write_text(M2W + "[link] Broken -> FLY\n")
    return tmp_path


def test_import_log_show_diff_rollback_export(files: Path):
    db = files / "mem" / "memory.sqlite"
    result = cli("import", str(files / "v1.txt"), "--scope", "mind2web/shop", db=db)
    assert result.exit_code == 0, result.output
    assert "version 1" in result.output
    assert cli("import", str(files / "v2.txt"), "--scope", "mind2web/shop", db=db).exit_code == 0

    log = json.loads(cli("log", "mind2web/shop", "--json", db=db).output)
    assert [(v["version"], v["parent"], v["author"], v["n_workflows"]) for v in log] == [
        (1, None, "import", 1),
        (2, 1, "import", 2),
    ]
    assert set(log[0]) >= {"version", "parent", "author", "created_at", "n_workflows"}

    shown = json.loads(cli("show", "mind2web/shop", "--json", db=db).output)
    assert shown["scope"] == "mind2web/shop" and shown["version"] == 2
    assert [w["name"] for w in shown["workflows"]] == ["search_site", "open_cart"]
    assert shown["workflows"][0]["parameters"] == ["query"]
    assert shown["workflows"][0]["steps"][0]["target"] == {"role": "searchbox", "label": "Search"}
    text = cli("show", "mind2web/shop", "--version", "1", db=db).output
    assert "[textbox] Search -> TYPE: {query}" in text

    diff = cli("diff", "mind2web/shop", "1", "2", db=db).output
    assert "+ open_cart" in diff and "~ search_site" in diff and "searchbox" in diff

    assert "version 3" in cli("rollback", "mind2web/shop", "1", db=db).output
    log = json.loads(cli("log", "mind2web/shop", "--json", db=db).output)
    assert log[-1]["author"] == "rollback" and log[-1]["parent"] == 2 and log[-1]["n_workflows"] == 1

    scopes = json.loads(cli("scopes", "--json", db=db).output)
    assert scopes == [{"scope": "mind2web/shop", "head": 3, "n_workflows": 1, "versions": 3}]

    out = files / "export"
    assert cli("export", "mind2web/shop", str(out), db=db).exit_code == 0
    exported = out / "mind2web" / "shop.txt"
    assert exported.read_text() == M2W
    # The export re-imports to the same content.
    assert cli("import", str(exported), "--scope", "mind2web/copy", "--replace", db=db).exit_code == 0
    with WorkflowStore(db) as store:
        copy, original = store.head("mind2web/copy"), store.head("mind2web/shop")
        strip = lambda ws: [w.model_dump(exclude={"provenance"}) for w in ws]  # noqa: E731
        assert strip(copy.workflows) == strip(original.workflows)
        assert copy.workflows[0].provenance.mode == "import"


def test_unparseable_import_is_rejected_and_memory_unchanged(files: Path):
    db = files / "memory.sqlite"
    cli("import", str(files / "v1.txt"), "--scope", "mind2web/shop", db=db)
    result = cli("import", str(files / "bad.txt"), "--scope", "mind2web/shop", db=db)
    assert isinstance(result.exception, WorkflowParseError)
    assert "bad.txt, line 5" in str(result.exception)
    with WorkflowStore(db) as store:
        assert [v.version for v in store.log("mind2web/shop")] == [1]


def test_subprocess_errors_exit_2_with_one_line(files: Path):
    db = files / "memory.sqlite"
    base = [sys.executable, "-c", "from awm.cli import main; main()", "memory"]
    bad = subprocess.run(
        [*base, "import", str(files / "bad.txt"), "--scope", "s", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2
    assert "line 5" in bad.stderr and "Traceback" not in bad.stderr
    ok = subprocess.run(
        [*base, "import", str(files / "v1.txt"), "--scope", "s", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0 and "version 1" in ok.stdout
    missing = subprocess.run(
        [*base, "log", "nope", "--db", str(db)], capture_output=True, text=True, timeout=120
    )
    assert missing.returncode == 2 and "no memory scope 'nope'" in missing.stderr


READERS = [("scopes",), ("log", "s/x"), ("show", "s/x"), ("diff", "s/x", "1", "2"), ("export", "s/x")]


@pytest.mark.parametrize("args", [*READERS, ("rollback", "s/x", "1")], ids=lambda a: a[0])
def test_a_command_on_a_missing_database_names_it_and_creates_nothing(tmp_path: Path, args: tuple[str, ...]):
    """Only import may start a memory: a mistyped --db is an error naming it, never a new empty file."""
    db = tmp_path / "nowhere" / "none.sqlite"
    result = cli(*args, db=db)
    assert isinstance(result.exception, NoStoreError) and f"{db}: no memory database here" in str(result.exception)
    assert not db.exists() and not db.parent.exists()


def test_a_missing_database_is_one_line_and_exit_2(tmp_path: Path):
    db = tmp_path / "none.db"
    done = subprocess.run(
        [sys.executable, "-m", "awm.cli", "memory", "show", "s/x", "--db", str(db)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.startswith(f"error: {db}: no memory database here")
    assert len(done.stderr.strip().splitlines()) == 1 and not db.exists()


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_reading_a_database_that_is_not_memory_leaves_it_as_it_was(tmp_path: Path, args: tuple[str, ...]):
    """--db pointed at another SQLite file (a run database): refused, and no memory table added to it."""
    other = tmp_path / "run.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE run (id TEXT PRIMARY KEY)")
    conn.close()
    before = other.read_bytes()
    result = cli(*args, db=other)
    assert isinstance(result.exception, DataError) and "not a usable workflow memory database" in str(result.exception)
    assert other.read_bytes() == before


def test_reading_commands_work_on_a_read_only_open(files: Path):
    """scopes, log, show, diff and export read a database a writer made, without writing to it."""
    db = files / "memory.sqlite"
    for version in ("v1.txt", "v2.txt"):
        assert cli("import", str(files / version), "--scope", "mind2web/shop", db=db).exit_code == 0
    before = db.read_bytes()
    for args in (("scopes",), ("log", "mind2web/shop"), ("show", "mind2web/shop"), ("diff", "mind2web/shop", "1", "2")):
        result = cli(*args, db=db)
        assert result.exit_code == 0 and result.output.strip(), (args, result.output)
    assert cli("export", "mind2web/shop", str(files / "out"), db=db).exit_code == 0
    assert (files / "out" / "mind2web" / "shop.txt").read_text() == M2W_V2
    assert db.read_bytes() == before


def test_an_export_folder_that_cannot_be_written_is_refused_before_writing(files: Path):
    db = files / "memory.sqlite"
    assert cli("import", str(files / "v1.txt"), "--scope", "mind2web/shop", db=db).exit_code == 0
    result = cli("export", "mind2web/shop", str(files / "v1.txt" / "out"), db=db)  # below a plain file
    assert isinstance(result.exception, AwmError) and "cannot be written" in str(result.exception)


def test_without_db_every_command_uses_awm_memory_db(files: Path, monkeypatch: pytest.MonkeyPatch):
    """Import writes, and the readers read, the store AWM_MEMORY_DB names when --db is not given."""
    db = files / "env" / "memory.sqlite"
    monkeypatch.setenv("AWM_MEMORY_DB", str(db))
    assert runner.invoke(app, ["import", str(files / "v1.txt"), "--scope", "mind2web/shop"]).exit_code == 0
    with WorkflowStore(db) as store:
        assert store.head_version("mind2web/shop") == 1
    assert "mind2web/shop\tversion 1" in runner.invoke(app, ["scopes"]).output
    assert json.loads(runner.invoke(app, ["show", "mind2web/shop", "--json"]).output)["version"] == 1


def test_every_command_help_has_an_example():
    for command in ("scopes", "log", "show", "diff", "rollback", "export", "import"):
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0 and "Example: awm memory" in result.output, command
        assert "--db" in result.output, command


def test_importing_an_awm_file_says_what_it_took_and_what_it_left(tmp_path: Path):
    awm_file = Path(__file__).parent / "fixtures" / "awm_files" / "shopping_one_shot.txt"
    db = tmp_path / "memory.sqlite"
    result = cli("import", str(awm_file), "--scope", "webarena/shopping", db=db)
    assert result.exit_code == 0, result.output
    assert "imported 3 workflow(s): Open the order history, Browse a product category, Search the store" in result.output
    assert "skipped 1 section heading(s) with no action of their own: Summary Workflows" in result.output
    assert "skipped 2 concrete example(s)" in result.output and "skipped 2 usage note(s)" in result.output
    assert "workflow 'Open the order history', step 1: element id -> [link] My Account" in result.output
    shown = cli("show", "webarena/shopping", db=db).output
    assert "click('[link] My Account')" in shown and "click('')" not in shown and "'311'" not in shown
