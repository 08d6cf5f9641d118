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

Speed (issue 4: commits and head reads at 10,000 workflows): a content key names one JSON body
forever, and a version's id list never changes, so a store instance caches both (`_ContentCache`,
bounded) without any staleness across processes; only the head pointer is read from SQLite each time.
A repeated `head()` therefore parses only workflows it has not seen. Workflows returned by reads are
shared, read-only values (copy with ``model_copy(update=...)`` to change one, as all of awm does). A
commit serialises every workflow it is given (so one mutated in place is stored as it now is) but looks
known bodies up instead of hashing them; ``trust_unchanged=True`` skips even that for objects this
instance returned or committed, for callers that never mutate workflows in place.
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
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, Field, ValidationError

from awm.errors import AwmError, DataError, StoreConflictError
from awm.memory.composition import check_calls
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
CREATE TABLE IF NOT EXISTS workflow_uses (
    scope TEXT NOT NULL,
    trajectory_id TEXT NOT NULL,
    call INTEGER NOT NULL,
    name TEXT NOT NULL,
    completed INTEGER NOT NULL,
    steps_run INTEGER NOT NULL,
    steps_total INTEGER NOT NULL,
    error TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    PRIMARY KEY (scope, trajectory_id, call)
) WITHOUT ROWID;
"""


class WorkflowUse(NamedTuple):
    """One `run_workflow` call of one episode, as the memory keeps it (`awm.memory.health` reads them)."""

    trajectory_id: str
    call: int  # its place among the episode's calls
    name: str
    completed: bool
    steps_run: int
    steps_total: int
    error: str  # why it stopped (the broken step), empty when it ran to the end
    recorded_at: str = ""


class UnknownScopeError(DataError):
    """A scope with no version in this store (the CLI prints it; the application answers 404)."""


class NoStoreError(DataError):
    """No memory database at the path a read (or a rollback) named: only a commit creates one."""


# How a store opens its file, in SQLite's own words: "ro" reads an existing database (never creates
# nor changes a file), "rw" reads and writes an existing one, "rwc" creates it when missing.
StoreMode = Literal["ro", "rw", "rwc"]


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


_TO_JSON = Workflow.__pydantic_serializer__.to_json


def workflow_body(workflow: Workflow) -> str:
    """A workflow's canonical JSON (what `model_dump_json()` returns, without its per-call overhead)."""
    return _TO_JSON(workflow).decode()


class _VersionRow(NamedTuple):
    parent: int | None
    author: str
    message: str
    created_at: str
    ids: tuple[str, ...]


class _ContentCache:
    """What one store instance has seen, by content key: bodies, parsed workflows, version id lists.

    Why it can never be stale: a key is the hash of one body, and a version row is written once, so
    entries hold across processes and commits. It is bounded (oldest half dropped when full). Parsed
    workflows are handed out shared; `forget_object` drops one a caller turned out to have mutated.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.key_by_body: dict[str, str] = {}
        self.body_by_key: dict[str, str] = {}
        self.parsed: dict[str, Workflow] = {}
        self.by_object: dict[int, tuple[Workflow, str]] = {}  # id(obj) -> (obj, key when last seen)
        self.versions: dict[tuple[str, int], _VersionRow] = {}

    def add_body(self, key: str, body: str) -> None:
        if key not in self.body_by_key:
            if len(self.body_by_key) >= self.limit:
                for old in list(islice(self.body_by_key, len(self.body_by_key) // 2 + 1)):
                    self.key_by_body.pop(self.body_by_key.pop(old), None)
                    self.parsed.pop(old, None)
            self.body_by_key[key] = body
            self.key_by_body[body] = key

    def add_object(self, workflow: Workflow, key: str) -> None:
        if len(self.by_object) >= self.limit and id(workflow) not in self.by_object:
            for old in list(islice(self.by_object, len(self.by_object) // 2 + 1)):
                del self.by_object[old]
        self.by_object[id(workflow)] = (workflow, key)

    def forget_object(self, workflow: Workflow, key: str) -> None:
        """`workflow` was last seen as `key` but its content changed: stop handing it out as `key`."""
        if self.parsed.get(key) is workflow:
            del self.parsed[key]

    def add_version(self, scope: str, version: int, row: _VersionRow) -> None:
        if len(self.versions) >= 16:  # a 10,000-workflow version's ids are ~1 MB of strings
            for old in list(islice(self.versions, 8)):
                del self.versions[old]
        self.versions[(scope, version)] = row


class WorkflowStore:
    """Versioned memory of workflows in one SQLite file (WAL, busy timeout).

    One instance holds one connection; use it from one thread. Separate processes open their own
    instances on the same path: SQLite's write lock plus the compare-and-swap keep them consistent.
    Workflows that reads return are cached per instance and shared between calls: treat them as
    read-only (``model_copy(update=...)`` to change one). `cache_limit` bounds the cache in workflows
    (~6 KB each when parsed).

    `mode` (`StoreMode`): "rwc", the default, is a writer's (a run, an import), which may start a new
    memory; "ro" is for looking (`awm memory show`, the memory pages): the file must exist
    (`NoStoreError` naming it otherwise), is opened read-only and is left exactly as it was; "rw" is a
    change to memory that must already exist (a rollback).

    `db_id` is a random id given to the database file when it was created: it tells caches apart two
    files that were created at the same path (scope and version numbers alone would collide).
    """

    db_id: str

    def __init__(
        self, path: Path, *, mode: StoreMode = "rwc", busy_timeout_s: float = 30.0, cache_limit: int = 20_000
    ) -> None:
        self.path = Path(path)
        self._cache = _ContentCache(cache_limit)
        if mode == "rwc":
            self.path.parent.mkdir(parents=True, exist_ok=True)
            target, uri = str(self.path), False
        elif self.path.is_file():
            target, uri = f"{self.path.resolve().as_uri()}?mode={mode}", True
        else:
            raise NoStoreError(
                f"{self.path}: no memory database here (check --db or AWM_MEMORY_DB; a run with memory or "
                "`awm memory import` creates one)"
            )
        try:
            self._db = sqlite3.connect(target, uri=uri, timeout=busy_timeout_s, isolation_level=None)
        except sqlite3.DatabaseError as exc:
            raise DataError(f"{self.path}: not a usable workflow memory database ({exc})") from None
        try:
            self.db_id = self._check_schema(busy_timeout_s, create=mode == "rwc")
        except BaseException:
            self._db.close()
            raise

    def _check_schema(self, busy_timeout_s: float, *, create: bool) -> str:
        """Set the busy timeout, make the schema when `create`, check its version; the database's id."""
        try:
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            if create:
                self._create_schema()
            meta = dict(
                self._db.execute("SELECT key, value FROM meta WHERE key IN ('schema_version', 'db_id')")
            )
        except sqlite3.DatabaseError as exc:
            raise DataError(f"{self.path}: not a usable workflow memory database ({exc})") from None
        if "schema_version" not in meta or "db_id" not in meta:
            raise DataError(f"{self.path}: not a usable workflow memory database (no schema version in its meta)")
        found = meta["schema_version"]
        if int(found) != SCHEMA_VERSION:
            raise DataError(f"{self.path}: schema version {found}, this awm reads version {SCHEMA_VERSION}")
        return meta["db_id"]

    def _create_schema(self) -> None:
        """WAL mode, the tables, and the meta rows of a new database (a no-op on an existing one)."""
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = NORMAL")
        with self._write():
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
            self._db.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('db_id', ?)", (uuid.uuid4().hex,)
            )

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

    def require_head(self, scope: str) -> int:
        """The scope's head version; `UnknownScopeError` naming the known scopes when it has none."""
        head = self.head_version(scope)
        if head is None:
            known = ", ".join(self.scopes()) or "none"
            raise UnknownScopeError(f"{self.path}: no memory scope {scope!r} (known scopes: {known})")
        return head

    def head_info(self, scope: str) -> HeadInfo | None:
        """The head's version, workflow ids and names, without parsing any workflow body."""
        found = self.head_workflow_ids(scope)
        if found is None:
            return None
        version, ids = found
        names = {i: name for i, (name, _) in self.workflow_texts(ids).items()}
        missing = [i for i in ids if i not in names]
        if missing:
            raise DataError(
                f"{self.path}: scope {scope!r} version {version} refers to missing workflow {missing[0]}"
            )
        return HeadInfo.model_construct(
            scope=scope, version=version, workflow_ids=list(ids), names=[names[i] for i in ids]
        )

    def head_ids(self, scope: str) -> tuple[int, str] | None:
        """The head's version and its workflow ids as stored (a JSON list): the cheapest freshness check."""
        row = self._db.execute(
            "SELECT v.version, v.workflow_ids FROM heads h JOIN versions v ON v.scope = h.scope AND v.version = h.version"
            " WHERE h.scope = ?",
            (scope,),
        ).fetchone()
        return None if row is None else (int(row[0]), row[1])

    def workflow_texts(self, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
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

    def head_workflow_ids(self, scope: str) -> tuple[int, tuple[str, ...]] | None:
        """The head's version and its workflow ids in order (cached per version: cheap when repeated)."""
        version = self.head_version(scope)
        return None if version is None else (version, self._version_row(scope, version).ids)

    def _version_row(self, scope: str, version: int) -> _VersionRow:
        cached = self._cache.versions.get((scope, version))
        if cached is not None:
            return cached
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
        try:
            ids = json.loads(ids_json)
        except ValueError:
            ids = None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise DataError(
                f"{self.path}: scope {scope!r} version {version}: workflow_ids is not a list of ids"
            )
        found = _VersionRow(parent, author, message, created_at, tuple(ids))
        self._cache.add_version(scope, version, found)
        return found

    def get(self, scope: str, version: int) -> MemoryVersion:
        """One version of a scope; `AwmError` if it does not exist."""
        row = self._version_row(scope, version)
        workflows = self.load_workflows(row.ids, where=f"scope {scope!r} version {version}")
        # Built from rows this store wrote (validated on the way in), so no second validation.
        return MemoryVersion.model_construct(
            scope=scope,
            version=version,
            parent=row.parent,
            author=row.author,
            message=row.message,
            created_at=row.created_at,
            workflows=workflows,
        )

    def load_workflows(self, ids: Sequence[str], *, where: str = "") -> list[Workflow]:
        """Workflows by content id, in the given order (shared, read-only: parsed once per instance)."""
        parsed = self._cache.parsed
        out = [parsed.get(wid) for wid in ids]
        missing = list(dict.fromkeys(wid for wid, w in zip(ids, out, strict=True) if w is None))
        if not missing:
            return out  # type: ignore[return-value]
        bodies = dict(
            self._db.execute(
                "SELECT w.id, w.body FROM json_each(?) j JOIN workflows w ON w.id = j.value",
                (json.dumps(missing),),
            ).fetchall()
        )
        fresh: dict[str, Workflow] = {}
        for wid in missing:
            body = bodies.get(wid)
            if body is None:
                raise DataError(f"{self.path}: {where or 'a version'} refers to missing workflow {wid}")
            try:
                workflow = Workflow.model_validate_json(body)
            except ValidationError as exc:
                raise DataError(
                    f"{self.path}: workflow {wid} is malformed: {exc.errors()[0]['msg']}"
                ) from None
            fresh[wid] = workflow
            self._cache.add_body(wid, body)
            self._cache.add_object(workflow, wid)
            parsed[wid] = workflow
        return [w if w is not None else fresh[wid] for wid, w in zip(ids, out, strict=True)]

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

    def uses(self, scope: str) -> list[WorkflowUse]:
        """Every recorded workflow call of a scope, in the order they were recorded (empty in a
        database made before calls were recorded)."""
        try:
            rows = self._db.execute(
                "SELECT trajectory_id, call, name, completed, steps_run, steps_total, error, recorded_at"
                " FROM workflow_uses WHERE scope = ? ORDER BY recorded_at, trajectory_id, call",
                (scope,),
            ).fetchall()
        except sqlite3.OperationalError:  # opened read-only, from before the table existed
            return []
        return [WorkflowUse(t, c, n, bool(done), r, total, e, at) for t, c, n, done, r, total, e, at in rows]

    # --- writes -----------------------------------------------------------------------------------

    def record_uses(self, scope: str, uses: Sequence[WorkflowUse]) -> int:
        """Keep an episode's workflow calls; a call already kept (a resumed run) is not counted twice.
        Returns how many were new."""
        at = utc_now()
        rows = [
            (scope, u.trajectory_id, u.call, u.name, int(u.completed), u.steps_run, u.steps_total, u.error, at)
            for u in uses
        ]
        with self._write() as db:
            before = db.total_changes
            db.executemany(
                "INSERT OR IGNORE INTO workflow_uses (scope, trajectory_id, call, name, completed, steps_run,"
                " steps_total, error, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            return db.total_changes - before

    def commit(
        self,
        scope: str,
        workflows: list[Workflow],
        *,
        parent: int | None,
        author: str,
        message: str = "",
        provenance: dict[str, Any] | None = None,
        trust_unchanged: bool = False,
    ) -> MemoryVersion:
        """Append a version whose content is `workflows` and move the head to it, if the head is `parent`.

        Raises `StoreConflictError` when the head is not `parent` (another writer got there first), and
        `CompositionError` when the workflows' calls form a cycle; the store is then unchanged. Pass ``parent=None`` for a scope's first version.

        Every workflow is serialised, so one changed in place is stored as it now is. With
        ``trust_unchanged=True`` a workflow object this instance returned or committed before is taken
        at the content it had then, without serialising it (O(changed) instead of O(all)); pass it only
        when no workflow was mutated in place (awm itself always copies with ``model_copy``).
        """
        if not scope.strip():
            raise AwmError("a memory scope name must not be empty")
        if not author.strip():
            raise AwmError("a commit needs an author (the induction mode, import, manual or rollback)")
        ids, bodies = self._content_keys(workflows, trust_unchanged)
        check_calls(workflows)
        ids_json = '["' + '", "'.join(ids) + '"]' if ids else "[]"  # hex keys: json.dumps's text, faster
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
            known = () if head is None else self._version_row(scope, head).ids
            new_keys = bodies.keys() - set(known)
            if new_keys:
                by_key = dict(zip(ids, workflows, strict=True))
                fresh = [(k, by_key[k].name, by_key[k].description, bodies[k]) for k in new_keys]
                db.executemany(
                    "INSERT OR IGNORE INTO workflows (id, name, description, body) VALUES (?, ?, ?, ?)", fresh
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
        self._cache.add_version(scope, version, _VersionRow(parent, author, message, created_at, tuple(ids)))
        return MemoryVersion.model_construct(  # every item was checked to be a Workflow above
            scope=scope,
            version=version,
            parent=parent,
            author=author,
            message=message,
            created_at=created_at,
            workflows=list(workflows),
        )

    def _content_keys(self, workflows: list[Workflow], trust: bool) -> tuple[list[str], dict[str, str]]:
        """Each workflow's content key, and the body of every key (from the cache or serialised now).

        The hot loop of a large commit, so written flat: one dict probe per trusted workflow, one
        serialisation plus one dict probe (no hashing) per other workflow the store has seen.
        """
        cache = self._cache
        by_object, body_by_key, key_by_body = cache.by_object, cache.body_by_key, cache.key_by_body
        ids: list[str] = []
        bodies: dict[str, str] = {}
        for workflow in workflows:
            entry = by_object.get(id(workflow))
            if entry is not None and entry[0] is not workflow:
                entry = None
            if trust and entry is not None:
                body = body_by_key.get(entry[1])
                if body is not None:
                    ids.append(entry[1])
                    bodies[entry[1]] = body
                    continue
            if not isinstance(workflow, Workflow):
                raise AwmError(f"a commit takes Workflow objects, got {type(workflow).__name__}")
            body = _TO_JSON(workflow).decode()
            key = key_by_body.get(body)
            if key is None:
                key = workflow_id(body)
                cache.add_body(key, body)
            if entry is None or entry[1] != key:
                if entry is not None:  # mutated in place since the store last saw it
                    cache.forget_object(workflow, entry[1])
                cache.add_object(workflow, key)
            ids.append(key)
            bodies[key] = body
        return ids, bodies

    def update(
        self,
        scope: str,
        change: Callable[[list[Workflow]], list[Workflow]],
        *,
        author: str,
        message: str = "",
        attempts: int = 5,
        provenance: dict[str, Any] | None = None,
        trust_unchanged: bool = False,
    ) -> MemoryVersion:
        """Read the head, apply `change` to its workflows, commit; on a conflict re-base on the new head.

        `change` must be a pure function of the workflows it is given: it may run several times. When
        it also never mutates them in place, ``trust_unchanged=True`` makes the commit O(changed) (see
        `commit`).
        """
        last: StoreConflictError | None = None
        for attempt in range(max(1, attempts)):
            current = self.head(scope)
            parent = None if current is None else current.version
            base = [] if current is None else current.workflows
            try:
                return self.commit(
                    scope,
                    change(base),
                    parent=parent,
                    author=author,
                    message=message,
                    provenance=provenance,
                    trust_unchanged=trust_unchanged,
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
            trust_unchanged=True,  # just read by this instance: their keys are the target's own
        )

    def diff(self, scope: str, a: int, b: int) -> WorkflowDiff:
        """Workflows added, removed and changed (same name, other content) from version `a` to `b`."""
        return diff_workflows(scope, a, b, self.get(scope, a).workflows, self.get(scope, b).workflows)


def diff_workflows(
    scope: str, a: int, b: int, before: Sequence[Workflow], after: Sequence[Workflow]
) -> WorkflowDiff:
    """The diff of two workflow lists; also used for a dry run or a scope's first version (no `a`)."""
    old = {w.name: w for w in before}
    new = {w.name: w for w in after}
    changed = [n for n in new if n in old and _content(old[n]) != _content(new[n])]
    patches = {
        n: "".join(
            difflib.unified_diff(
                _content(old[n]).splitlines(keepends=True),
                _content(new[n]).splitlines(keepends=True),
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
        added=[n for n in new if n not in old],
        removed=[n for n in old if n not in new],
        changed=changed,
        patches=patches,
    )


def _content(workflow: Workflow) -> str:
    """A workflow's reviewable content (provenance left out, so re-induced copies compare equal)."""
    return (
        json.dumps(workflow.model_dump(mode="json", exclude={"provenance"}), indent=2, ensure_ascii=False)
        + "\n"
    )
