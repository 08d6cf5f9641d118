"""What an episode changed in a site's database: its live copy against the pristine state it was reset to.

Why: a check reads the rows the task asks for, and nothing looks at what else changed, so an episode
that did the task and broke something else passed (the kind of false pass that had WebArena's checks
audited again). The difference of the two SQLite files, table by table, is what the site itself says
happened; a template declares which tables its task may change (`Template.changes`; an information, navigation
or infeasible template changes nothing), and a change anywhere else fails its check with the rows
named (`undeclared`).

Rows are compared by rowid (a row kept under its rowid with other values is a changed row); what a site
writes on its own whenever anyone logs in or looks (a session, a last-seen time: `Site.bookkeeping`) is
left out.
Read-only: both files are opened with `mode=ro`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

MAX_EXAMPLES = 3  # rows quoted per table: enough to see what changed, short enough for a check's detail


@dataclass(frozen=True)
class TableChange:
    """One table's difference: rows added, removed and changed (by rowid), and a few of them quoted."""

    table: str
    added: int = 0
    removed: int = 0
    changed: int = 0
    examples: list[str] = field(default_factory=list)

    def describe(self) -> str:
        counts = ", ".join(f"{n} {what}" for n, what in ((self.added, "added"), (self.removed, "removed"), (self.changed, "changed")) if n)
        shown = "; ".join(self.examples)
        return f"{self.table}: {counts}" + (f" ({shown})" if shown else "")


def _open(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)


def _tables(db: sqlite3.Connection) -> set[str]:
    rows = db.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall()
    return {name for (name,) in rows}


def _rows(db: sqlite3.Connection, table: str, skipped: Collection[str]) -> dict[int, tuple]:
    """rowid -> the row's values without the `skipped` columns (a table without rowids is keyed by its
    rows' order)."""
    quoted = '"' + table.replace('"', '""') + '"'
    try:
        cursor = db.execute(f"SELECT rowid, * FROM {quoted}")  # noqa: S608 - a name from sqlite_master
        keyed = True
    except sqlite3.OperationalError:  # WITHOUT ROWID
        cursor, keyed = db.execute(f"SELECT * FROM {quoted}"), False  # noqa: S608
    names = [d[0] for d in cursor.description][1 if keyed else 0 :]
    kept = [i for i, name in enumerate(names) if name not in skipped]
    rows = [(row[0], row[1:]) if keyed else (n, row) for n, row in enumerate(cursor)]
    return {key: tuple(values[i] for i in kept) for key, values in rows}


def _short(values: tuple) -> str:
    text = ", ".join(repr(v) if isinstance(v, str) else str(v) for v in values)
    return text if len(text) <= 120 else text[:117] + "..."


# In `Site.bookkeeping`, a table whose every column is bookkeeping.
WHOLE_TABLE = "*"


def database_changes(
    before: Path, after: Path, *, bookkeeping: Mapping[str, Collection[str]] | None = None
) -> list[TableChange]:
    """The tables whose rows differ between two SQLite files (the pristine state, the live copy after an
    episode), each with its counts and a few rows quoted. `bookkeeping` (table -> columns, or
    `WHOLE_TABLE`) is what a site writes on its own when anyone logs in or looks (a session, a last-seen
    time, a view count): those columns are not compared, those tables not read."""
    bookkeeping = bookkeeping or {}
    with _open(before) as old_db, _open(after) as new_db:
        old_tables, new_tables = _tables(old_db), _tables(new_db)
        tables = sorted(t for t in old_tables | new_tables if WHOLE_TABLE not in bookkeeping.get(t, ()))
        found = []
        for table in tables:
            skipped = bookkeeping.get(table, ())
            old = _rows(old_db, table, skipped) if table in old_tables else {}
            new = _rows(new_db, table, skipped) if table in new_tables else {}
            added = [new[k] for k in new.keys() - old.keys()]
            removed = [old[k] for k in old.keys() - new.keys()]
            changed = [(old[k], new[k]) for k in old.keys() & new.keys() if old[k] != new[k]]
            if not (added or removed or changed):
                continue
            examples = [f"+({_short(r)})" for r in added] + [f"-({_short(r)})" for r in removed]
            examples += [f"~({_short(b)}) -> ({_short(a)})" for b, a in changed]
            found.append(TableChange(table, len(added), len(removed), len(changed), examples[:MAX_EXAMPLES]))
    return found


def undeclared(changes: list[TableChange], allowed: Collection[str] | None) -> list[TableChange]:
    """The changes to tables the task may not change (`allowed` None: any table may change)."""
    return [] if allowed is None else [c for c in changes if c.table not in allowed]
