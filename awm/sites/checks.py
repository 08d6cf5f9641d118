"""Success checks of the arena's tasks: declarative, read after (or during) the episode from the site's
own state, never from the agent's words about it (WebArena's lesson).

A check is data (`Check`, a table of a task file). Every part it names must hold:

- ``sql``: one read-only query on the site's SQLite database; ``:name`` parameters are bound from the
  instance's values (never spliced into the text). With ``rows`` the result must be exactly those rows
  (in any order), with ``count`` that many rows, with ``value`` its first cell that value; with none of
  them, at least one row.
- ``url``: the final page's URL contains this; ``text``: the final page's text contains this.
- ``answer``: the agent's last message (`send_msg_to_user`) contains each expected string as whole
  words, after normalising case, spaces, currency signs and number formats ("$1,200.50" = "1200.5").
- ``infeasible``: the agent ended by reporting the task infeasible.

Strings may hold ``{placeholders}`` filled from the instance's values. Why the read-only connection
and the authorizer both: a task file comes from anyone (``--task-file``), and a check must not be able
to change the state it judges.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from pydantic import BaseModel, ConfigDict, model_validator

from awm.memory.workflow import fill_placeholders

Cell = str | int | float | None

# sqlite3 authorizer action codes a SELECT needs (https://sqlite.org/c3ref/c_alter_table.html).
_READ_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, 33})  # 33: RECURSIVE
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")


class Check(BaseModel):
    """What must hold for the task to count as solved (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    sql: str | None = None
    rows: list[list[Cell]] | None = None
    count: int | None = None
    value: Cell = None
    url: str | None = None
    text: str | None = None
    answer: str | list[str] | None = None
    infeasible: bool = False

    @model_validator(mode="after")
    def _one_part_at_least(self) -> Check:
        if not (self.sql or self.url or self.text or self.answer is not None or self.infeasible):
            raise ValueError("a check needs at least one of: sql, url, text, answer, infeasible")
        if self.sql is None and (self.rows is not None or self.count is not None or self.value is not None):
            raise ValueError("rows, count and value compare the result of sql: give sql too")
        return self

    @property
    def waits_for_the_agent(self) -> bool:
        """Decided only when the agent ends (it answers or reports the task infeasible); a check of the
        site's state alone is decided as soon as it holds."""
        return self.answer is not None or self.infeasible

    def parameters(self) -> list[str]:
        """The ``:name`` parameters its SQL binds."""
        return list(dict.fromkeys(_PARAM.findall(self.sql or "")))

    def placeholders(self) -> list[str]:
        """The ``{name}`` placeholders its strings use."""
        from awm.memory.workflow import PLACEHOLDER

        texts = [self.url or "", self.text or "", str(self.value or "")]
        texts += [self.answer] if isinstance(self.answer, str) else list(self.answer or [])
        texts += [str(c) for row in self.rows or [] for c in row]
        return list(dict.fromkeys(name for t in texts for name in PLACEHOLDER.findall(t)))


@dataclass(frozen=True)
class Evidence:
    """What the episode left to check against, besides the database."""

    url: str = ""
    page_text: str = ""
    answer: str | None = None  # the agent's last message to the user
    infeasible: bool = False  # the agent reported the task infeasible
    ended: bool = False  # the agent ended the episode (answered or reported infeasible)


@dataclass(frozen=True)
class Outcome:
    passed: bool
    detail: str  # what held or failed, in words: recorded with the reward


# --------------------------------------------------------------------------------------------------
# Read-only SQL
# --------------------------------------------------------------------------------------------------


def _read_only(action: int, *args: object) -> int:
    return sqlite3.SQLITE_OK if action in _READ_ACTIONS else sqlite3.SQLITE_DENY


def connect_read_only(database: Path) -> sqlite3.Connection:
    """The database opened read-only (a URI with mode=ro) and with an authorizer that denies anything
    but reading: a check can neither write nor attach another file."""
    if not Path(database).is_file():
        raise FileNotFoundError(f"no database at {database}")
    conn = sqlite3.connect(f"{Path(database).resolve().as_uri()}?mode=ro", uri=True)
    conn.set_authorizer(_read_only)
    return conn


def query(conn: sqlite3.Connection, sql: str, values: dict[str, str]) -> list[tuple[Cell, ...]]:
    """Run one statement with its ``:name`` parameters bound from `values` (a missing one is None)."""
    params = {name: values.get(name) for name in _PARAM.findall(sql)}
    return [tuple(row) for row in conn.execute(sql, params).fetchall()]


_INTERNAL = re.compile(r"^\s*CREATE\s+TABLE\s+[\"']?sqlite_", re.IGNORECASE)


def _creatable(schema: str) -> str:
    """The schema without SQLite's own tables (sqlite_sequence...), which only SQLite may create."""
    statements = [s for s in schema.split(";\n") if s.strip() and not _INTERNAL.match(s)]
    return ";\n".join(statements) + ";\n"


def validate_sql(sql: str, schema: str) -> str | None:
    """Why `sql` cannot be a check on a database with this schema (None: it can): it must be one
    statement, read only, and compile against the schema's tables and columns."""
    if not sqlite3.complete_statement(sql.strip().rstrip(";") + ";") or ";" in sql.strip().rstrip(";"):
        return "it must be exactly one SQL statement"
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(_creatable(schema))
        conn.set_authorizer(_read_only)
        params = {name: None for name in _PARAM.findall(sql)}
        conn.execute(f"EXPLAIN {sql}", params)  # compiles (tables, columns, syntax) without running
    except sqlite3.DatabaseError as exc:
        message = str(exc)
        if "not authorized" in message:
            return "it must only read (SELECT)"
        return message
    finally:
        conn.close()
    return None


# --------------------------------------------------------------------------------------------------
# Normalising and comparing
# --------------------------------------------------------------------------------------------------

_CURRENCY = re.compile(r"[$€£¥]")
_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
_EDGE_PUNCT = re.compile(r"(?:(?<=\s)|^)[\"'“”‘’(\[]+|[\"'“”‘’)\].,;:!?]+(?=\s|$)")


def _number(text: str) -> str:
    try:
        value = Decimal(text.replace(",", ""))
    except InvalidOperation:
        return text
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")


def normalise(text: Cell) -> str:
    """Case, spaces, currency signs, thousands separators and trailing zeros made uniform."""
    if text is None:
        return ""
    out = _CURRENCY.sub("", str(text)).casefold()
    out = _NUMBER.sub(lambda m: _number(m.group(0)), out)
    out = _EDGE_PUNCT.sub("", out)
    return " ".join(out.split())


def contains_words(haystack: str, needle: str) -> bool:
    """Whether normalised `needle` is in normalised `haystack` as whole words."""
    hay, want = normalise(haystack), normalise(needle)
    if not want:
        return False
    return re.search(rf"(?<!\w){re.escape(want)}(?!\w)", hay) is not None


def _fill(cell: Cell, values: dict[str, str]) -> Cell:
    return fill_placeholders(cell, values, transforms=False) if isinstance(cell, str) else cell


def _rows_text(rows: list[tuple[Cell, ...]] | list[list[Cell]]) -> list[tuple[str, ...]]:
    return sorted(tuple(normalise(c) for c in row) for row in rows)


# --------------------------------------------------------------------------------------------------
# Evaluating
# --------------------------------------------------------------------------------------------------


def evaluate(check: Check, values: dict[str, str], database: Path | None, evidence: Evidence) -> Outcome:
    """Every part of `check` against the site's database and the episode's evidence."""
    held: list[str] = []

    def failed(why: str) -> Outcome:
        return Outcome(False, "; ".join([*held, f"FAILED: {why}"]))

    if check.infeasible:
        if not evidence.infeasible:
            return failed("the agent did not report the task infeasible")
        held.append("reported infeasible")
    if check.answer is not None:
        expected = [check.answer] if isinstance(check.answer, str) else check.answer
        if evidence.answer is None:
            return failed("the agent gave no answer")
        for want in expected:
            filled = str(_fill(want, values))
            if not contains_words(evidence.answer, filled):
                return failed(f"the answer {evidence.answer[:120]!r} does not contain {filled!r}")
        held.append("answer contains " + ", ".join(repr(str(_fill(w, values))) for w in expected))
    if check.url is not None:
        want = str(_fill(check.url, values))
        if want not in evidence.url:
            return failed(f"the URL {evidence.url!r} does not contain {want!r}")
        held.append(f"URL contains {want!r}")
    if check.text is not None:
        want = str(_fill(check.text, values))
        if not contains_words(evidence.page_text, want):
            return failed(f"the page does not show {want!r}")
        held.append(f"page shows {want!r}")
    if check.sql is not None:
        if database is None:
            return failed("no database to check")
        conn = connect_read_only(database)
        try:
            rows = query(conn, check.sql, values)
        finally:
            conn.close()
        if check.rows is not None:
            want_rows = [[_fill(c, values) for c in row] for row in check.rows]
            if _rows_text(rows) != _rows_text(want_rows):
                return failed(f"the query gave {rows[:5]!r}, expected {want_rows[:5]!r}")
            held.append(f"query gave the {len(rows)} expected row(s)")
        elif check.count is not None:
            if len(rows) != check.count:
                return failed(f"the query gave {len(rows)} row(s), expected {check.count}")
            held.append(f"query gave {check.count} row(s)")
        elif check.value is not None:
            want = _fill(check.value, values)
            got = rows[0][0] if rows and rows[0] else None
            if normalise(got) != normalise(want):
                return failed(f"the query gave {got!r}, expected {want!r}")
            held.append(f"query gave {want!r}")
        else:
            if not rows:
                return failed("the query found no row")
            held.append("query found a row")
    return Outcome(True, "; ".join(held))
