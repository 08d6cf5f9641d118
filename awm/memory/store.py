"""The versioned workflow store: append-only versions per scope, a head moved only by compare-and-swap.

Why this shape: AWM overwrote workflow files whole, with no history, so one bad induction (or two
writers racing) silently destroyed memory. Here every commit is a new immutable version; the head of
a scope moves inside one SQLite transaction (``BEGIN IMMEDIATE``) with
``UPDATE heads SET version=? WHERE scope=? AND version IS ?``, so a writer whose parent is stale gets a
`StoreConflictError` instead of overwriting, and a crash at any point leaves the previous head intact.
Nothing is ever deleted. A rollback is recorded as a *new* version (author ``rollback``, parent = the
old head, content = the target version), so the log shows that it happened and it can be undone.

Storage: workflows are content-addressed rows (id = blake2b-128 of the workflow's JSON); a version
stores the ordered list of ids. Committing a large scope writes only the workflows that changed plus
the id list, and reading the head's metadata (`head_info`) never parses workflow bodies.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import random
import socket
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from awm.errors import AwmError, DataError, StoreConflictError
from awm.memory.workflow import Workflow
from awm.trajectory import utc_now

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workflows (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    body TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS versions (
    scope TEXT NOT NULL,
    version INTEGER NOT NULL,
    parent INTEGER,
    author TEXT NOT NULL,
    message TEXT NOT NULL,
    created_at TEXT NOT NULL,
    provenance TEXT NOT NULL,
    n_workflows INTEGER NOT NULL,
    workflow_ids TEXT NOT NULL,
    PRIMARY KEY (scope, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS heads (scope TEXT PRIMARY KEY, version INTEGER NOT NULL) WITHOUT ROWID;
"""


class MemoryVersion(BaseModel):
    """An immutable snapshot of one scope's workflows."""

    scope: str
    version: int
    parent: int | None
    author: str
    message: str
    created_at: str
    workflows: list[Workflow]


class VersionInfo(BaseModel):
    """One line of a scope's log: what a version is, without its workflows."""

    version: int
    parent: int | None
    author: str
    created_at: str
    n_workflows: int
    message: str


class HeadInfo(BaseModel):
    """The head of a scope without parsing workflow bodies: what retrieval needs to check its index."""

    scope: str
    version: int
    workflow_ids: list[str]
    names: list[str]


class WorkflowDiff(BaseModel):
    """What changed between two versions of a scope, by workflow name."""

    scope: str = ""
    a: int = 0
    b: int = 0
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    patches: dict[str, str] = Field(default_factory=dict)  # name -> unified diff of the workflow's JSON

    def is_empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def render(self) -> str:
        """A reviewable text: one ``+``/``-``/``~`` line per workflow, then the patches of changed ones."""
        head = f"{self.scope}: version {self.a} -> {self.b}"
        if self.is_empty():
            return f"{head}: no changes\n"
        lines = [head]
        lines += [f"+ {name}" for name in self.added]
        lines += [f"- {name}" for name in self.removed]
        lines += [f"~ {name}" for name in self.changed]
        for name in self.changed:
            patch = self.patches.get(name)
            if patch:
                lines += ["", patch.rstrip("\n")]
        return "\n".join(lines) + "\n"


def workflow_id(body: str) -> str:
    """Content address of a workflow's canonical JSON."""
    return hashlib.blake2b(body.encode(), digest_size=16).hexdigest()


class WorkflowStore:
    """Versioned memory of workflows in one SQLite file (WAL, busy timeout).

    One instance holds one connection; use it from one thread. Separate processes open their own
    instances on the same path: SQLite's write lock plus the compare-and-swap keep them consistent.
    """

    def __init__(self, path: Path, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None)
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = NORMAL")
            with self._write():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(
                    "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            found = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise DataError(f"{self.path}: not a usable workflow memory database ({exc})") from None
        if int(found) != SCHEMA_VERSION:
            raise DataError(f"{self.path}: schema version {found}, this awm reads version {SCHEMA_VERSION}")

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> WorkflowStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction holding SQLite's write lock from the start (no upgrade deadlocks)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    # --- reads ------------------------------------------------------------------------------------

    def scopes(self) -> list[str]:
        """Scopes that have a head, sorted."""
        return [row[0] for row in self._db.execute("SELECT scope FROM heads ORDER BY scope")]

    def head_version(self, scope: str) -> int | None:
        row = self._db.execute("SELECT version FROM heads WHERE scope = ?", (scope,)).fetchone()
        return None if row is None else int(row[0])

    def head_info(self, scope: str) -> HeadInfo | None:
        """The head's version, workflow ids and names, without parsing any workflow body."""
        found = self.head_ids(scope)
        if found is None:
            return None
        version, ids_json = found
        ids = json.loads(ids_json)
        texts = self.workflow_texts(ids)
        missing = [i for i in ids if i not in texts]
        if missing:
            raise DataError(
                f"{self.path}: scope {scope!r} version {version} refers to missing workflow {missing[0]}"
            )
        return HeadInfo(scope=scope, version=version, workflow_ids=ids, names=[texts[i][0] for i in ids])

    def head_ids(self, scope: str) -> tuple[int, str] | None:
        """The head's version and its workflow ids as stored (a JSON list): the cheapest freshness check."""
        row = self._db.execute(
            "SELECT v.version, v.workflow_ids FROM heads h JOIN versions v ON v.scope = h.scope AND v.version = h.version"
            " WHERE h.scope = ?",
            (scope,),
        ).fetchone()
        return None if row is None else (int(row[0]), row[1])

    def workflow_texts(self, ids: list[str]) -> dict[str, tuple[str, str]]:
        """Name and description by workflow id, without parsing bodies (what retrieval embeds)."""
        rows = self._db.execute(
            "SELECT w.id, w.name, w.description FROM json_each(?) j JOIN workflows w ON w.id = j.value",
            (json.dumps(ids),),
        )
        return {wid: (name, description) for wid, name, description in rows}

    def head(self, scope: str) -> MemoryVersion | None:
        """The current version of a scope, or None when the scope has never been committed."""
        version = self.head_version(scope)
        return None if version is None else self.get(scope, version)

    def get(self, scope: str, version: int) -> MemoryVersion:
        """One version of a scope; `AwmError` if it does not exist."""
        row = self._db.execute(
            "SELECT parent, author, message, created_at, workflow_ids FROM versions WHERE scope = ? AND version = ?",
            (scope, version),
        ).fetchone()
        if row is None:
            known = self.head_version(scope)
            hint = f"the head is version {known}" if known is not None else "the scope has no versions"
            raise AwmError(
                f"{self.path}: scope {scope!r} has no version {version} ({hint}; see `awm memory log`)"
            )
        parent, author, message, created_at, ids_json = row
        ids = json.loads(ids_json)
        return MemoryVersion(
            scope=scope,
            version=version,
            parent=parent,
            author=author,
            message=message,
            created_at=created_at,
            workflows=self.load_workflows(ids, where=f"scope {scope!r} version {version}"),
        )

    def load_workflows(self, ids: list[str], *, where: str = "") -> list[Workflow]:
        """Workflows by content id, in the given order."""
        if not ids:
            return []
        bodies = dict(
            self._db.execute(
                "SELECT w.id, w.body FROM json_each(?) j JOIN workflows w ON w.id = j.value",
                (json.dumps(ids),),
            ).fetchall()
        )
        out = []
        for wid in ids:
            body = bodies.get(wid)
            if body is None:
                raise DataError(f"{self.path}: {where or 'a version'} refers to missing workflow {wid}")
            try:
                out.append(Workflow.model_validate_json(body))
            except ValidationError as exc:
                raise DataError(
                    f"{self.path}: workflow {wid} is malformed: {exc.errors()[0]['msg']}"
                ) from None
        return out

    def log(self, scope: str) -> list[VersionInfo]:
        """Every version of a scope, oldest first (empty for an unknown scope)."""
        rows = self._db.execute(
            "SELECT version, parent, author, created_at, n_workflows, message FROM versions WHERE scope = ?"
            " ORDER BY version",
            (scope,),
        )
        return [
            VersionInfo(version=v, parent=p, author=a, created_at=c, n_workflows=n, message=m)
            for v, p, a, c, n, m in rows
        ]

    # --- writes -----------------------------------------------------------------------------------

    def commit(
        self,
        scope: str,
        workflows: list[Workflow],
        *,
        parent: int | None,
        author: str,
        message: str = "",
        provenance: dict[str, Any] | None = None,
    ) -> MemoryVersion:
        """Append a version whose content is `workflows` and move the head to it, if the head is `parent`.

        Raises `StoreConflictError` when the head is not `parent` (another writer got there first);
        the store is then unchanged. Pass ``parent=None`` for a scope's first version.
        """
        if not scope.strip():
            raise AwmError("a memory scope name must not be empty")
        if not author.strip():
            raise AwmError("a commit needs an author (the induction mode, import, manual or rollback)")
        bodies = [w.model_dump_json() for w in workflows]
        ids = [workflow_id(b) for b in bodies]
        ids_json = json.dumps(ids)
        prov = {"pid": os.getpid(), "host": socket.gethostname(), **(provenance or {})}
        created_at = utc_now()
        with self._write() as db:
            row = db.execute("SELECT version FROM heads WHERE scope = ?", (scope,)).fetchone()
            head = None if row is None else int(row[0])
            if head != parent:
                raise StoreConflictError(
                    f"scope {scope!r}: head is version {head}, not {parent}; another writer committed first "
                    "(re-read the head and retry, or use WorkflowStore.update)"
                )
            known: set[str] = set()
            if head is not None:
                known = set(
                    json.loads(
                        db.execute(
                            "SELECT workflow_ids FROM versions WHERE scope = ? AND version = ?", (scope, head)
                        ).fetchone()[0]
                    )
                )
            fresh = {
                wid: (wid, w.name, w.description, body)
                for wid, w, body in zip(ids, workflows, bodies, strict=True)
                if wid not in known
            }
            if fresh:
                db.executemany(
                    "INSERT OR IGNORE INTO workflows (id, name, description, body) VALUES (?, ?, ?, ?)",
                    fresh.values(),
                )
            latest = db.execute("SELECT MAX(version) FROM versions WHERE scope = ?", (scope,)).fetchone()[0]
            version = 1 if latest is None else int(latest) + 1
            db.execute(
                "INSERT INTO versions (scope, version, parent, author, message, created_at, provenance, n_workflows,"
                " workflow_ids) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (scope, version, parent, author, message, created_at, json.dumps(prov), len(ids), ids_json),
            )
            if head is None:
                moved = db.execute(
                    "INSERT INTO heads (scope, version) VALUES (?, ?) ON CONFLICT (scope) DO NOTHING",
                    (scope, version),
                ).rowcount
            else:
                moved = db.execute(
                    "UPDATE heads SET version = ? WHERE scope = ? AND version IS ?", (version, scope, parent)
                ).rowcount
            if moved != 1:  # cannot happen while we hold the write lock; kept as the CAS's own check
                raise StoreConflictError(f"scope {scope!r}: head moved during commit; retry")
        return MemoryVersion(
            scope=scope,
            version=version,
            parent=parent,
            author=author,
            message=message,
            created_at=created_at,
            workflows=list(workflows),
        )

    def update(
        self,
        scope: str,
        change: Callable[[list[Workflow]], list[Workflow]],
        *,
        author: str,
        message: str = "",
        attempts: int = 5,
        provenance: dict[str, Any] | None = None,
    ) -> MemoryVersion:
        """Read the head, apply `change` to its workflows, commit; on a conflict re-base on the new head.

        `change` must be a pure function of the workflows it is given: it may run several times.
        """
        last: StoreConflictError | None = None
        for attempt in range(max(1, attempts)):
            current = self.head(scope)
            parent = None if current is None else current.version
            base = [] if current is None else current.workflows
            try:
                return self.commit(
                    scope, change(base), parent=parent, author=author, message=message, provenance=provenance
                )
            except StoreConflictError as exc:
                last = exc
                time.sleep(random.uniform(0, 0.01 * (attempt + 1)))  # noqa: S311 - jitter, not crypto
        raise StoreConflictError(
            f"scope {scope!r}: gave up after {attempts} attempts, other writers kept moving the head ({last})"
        )

    def rollback(self, scope: str, version: int) -> MemoryVersion:
        """Make `version`'s content the head again, recorded as a new version with author ``rollback``."""
        target = self.get(scope, version)
        head = self.head_version(scope)
        return self.commit(
            scope,
            target.workflows,
            parent=head,
            author="rollback",
            message=f"rollback to version {version}",
            provenance={"rollback_to": version, "previous_head": head},
        )

    def diff(self, scope: str, a: int, b: int) -> WorkflowDiff:
        """Workflows added, removed and changed (same name, other content) from version `a` to `b`."""
        old, new = self.get(scope, a), self.get(scope, b)
        before = {w.name: w for w in old.workflows}
        after = {w.name: w for w in new.workflows}
        changed = [n for n in after if n in before and _content(before[n]) != _content(after[n])]
        patches = {
            n: "".join(
                difflib.unified_diff(
                    _content(before[n]).splitlines(keepends=True),
                    _content(after[n]).splitlines(keepends=True),
                    fromfile=f"{n}@{a}",
                    tofile=f"{n}@{b}",
                )
            )
            for n in changed
        }
        return WorkflowDiff(
            scope=scope,
            a=a,
            b=b,
            added=[n for n in after if n not in before],
            removed=[n for n in before if n not in after],
            changed=changed,
            patches=patches,
        )


def _content(workflow: Workflow) -> str:
    """A workflow's reviewable content (provenance left out, so re-induced copies compare equal)."""
    return (
        json.dumps(workflow.model_dump(mode="json", exclude={"provenance"}), indent=2, ensure_ascii=False)
        + "\n"
    )
