"""The memory browser: scopes, a scope's version log, a diff between two versions, the head's workflows
with their provenance, and rollback behind a confirmation; the same reads as a JSON API.

Why a browser over `awm memory`: reviewing what induction did means reading versions side by side and
following a workflow back to the episodes it was induced from, which the CLI cannot link. Everything
goes through `WorkflowStore` (the reads and the rollback `awm memory` uses, with its error messages), so
the pages never show memory the CLI would not. A rollback records a new version (nothing is deleted) and
only happens on a second, explicit click: the page's Confirm button or the API's ``"confirm": true``.

The store is opened per request, read-only for every page and API read (``mode="ro"``: a missing file
is a 404 naming it, and looking at memory never creates nor changes a file) and read-write only for the
rollback, which also needs the file to exist (``mode="rw"``).

Scope names hold ``/`` (``miniwob/login-user``), so every route ends in ``{scope:path}`` after a fixed
word (``/memory/scope/``, ``/memory/rollback/``) or, in the API, is followed by a fixed word
(``/versions``, ``/diff``, ``/rollback``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from awm.errors import AwmError
from awm.memory.health import health
from awm.memory.store import (
    NoStoreError,
    StoreMode,
    UnknownScopeError,
    VersionInfo,
    WorkflowDiff,
    WorkflowStore,
)
from awm.memory.workflow import Workflow
from awm.traces.db import RunDatabase

from .catalog import NotServed
from .web import AppContext, FormatQuery, context, list_response, page

router = APIRouter()
Ctx = Annotated[AppContext, Depends(context)]


# --- reading the store ------------------------------------------------------------------------------


@contextmanager
def open_store(ctx: AppContext, mode: StoreMode = "ro") -> Iterator[WorkflowStore]:
    """The served memory database, or `NotServed` when there is none (never created: see `StoreMode`)."""
    path = ctx.settings.memory_db
    if path is None:
        raise NotServed("no memory database (start awm serve with --memory DB)")
    try:
        store = WorkflowStore(path, mode=mode)
    except NoStoreError:
        raise NotServed(f"no memory database at {path}") from None
    with store:
        yield store


def require_head(store: WorkflowStore, scope: str) -> int:
    """The scope's head version; an unknown scope is a 404 with `awm memory`'s message."""
    try:
        return store.require_head(scope)
    except UnknownScopeError as exc:
        raise NotServed(str(exc)) from None


def require_version(store: WorkflowStore, scope: str, version: int) -> int:
    """`version` if the scope has it, else `NotServed` (the store says the same, as a 422)."""
    head = require_head(store, scope)
    if not any(v.version == version for v in store.log(scope)):
        raise NotServed(
            f"{store.path}: scope {scope!r} has no version {version} (the head is version {head}; see `awm memory log`)"
        )
    return version


def scope_rows(store: WorkflowStore) -> list[dict[str, Any]]:
    """One row per scope about its head: what `GET /api/memory/scopes` answers and /memory lists."""
    rows = []
    for scope in store.scopes():
        log = store.log(scope)
        head = store.head_version(scope)
        current = next(v for v in log if v.version == head)
        rows.append(
            {
                "scope": scope,
                "head": head,
                "n_workflows": current.n_workflows,
                "author": current.author,
                "created_at": current.created_at,
                "versions": len(log),
            }
        )
    return rows


def default_pair(log: list[VersionInfo]) -> tuple[int, int] | None:
    """The diff a scope page opens with: the version before the newest one against the newest (the head
    is always the newest version: every commit, a rollback too, appends one and moves the head to it)."""
    return (log[-2].version, log[-1].version) if len(log) >= 2 else None


def patch_lines(patch: str) -> list[tuple[str, str]]:
    """A unified diff as (css class, line): the file headers and ``@@`` hunks, added and removed lines."""
    out = []
    for line in patch.splitlines():
        if line.startswith(("+++", "---", "@@")):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = ""
        out.append((kind, line))
    return out


def source_ids(workflows: Iterable[Workflow]) -> set[str]:
    """The episode ids a list of workflows names in its provenance (induced from, replayed as)."""
    ids: set[str] = set()
    for w in workflows:
        ids.update(w.provenance.trajectory_ids)
        if w.provenance.replay_trajectory_id:
            ids.add(w.provenance.replay_trajectory_id)
    return ids


def episode_links(ctx: AppContext, wanted: set[str]) -> dict[str, str]:
    """Episode page URL by episode id, for the ids in `wanted` that some served run holds.

    A trajectory id is its episode's id, so this is a scan of the served runs' episode lists; a run
    that cannot be read is skipped (the runs page names its error).
    """
    links: dict[str, str] = {}
    if not wanted:
        return links
    for folder in ctx.catalog.folders().values():
        if folder.kind != "run":
            continue
        try:
            with RunDatabase(folder.path) as db:
                ids = [e.id for e in db.episodes()]
        except AwmError:
            continue
        for episode_id in ids:
            if episode_id in wanted and episode_id not in links:
                links[episode_id] = f"/runs/{quote(folder.key, safe='')}/episodes/{quote(episode_id, safe='')}"
    return links


# Provenance fields a reviewer compares between two versions (`created_at` left out: a re-induced copy
# always has a new one, and the version's own time says when).
PROVENANCE_FIELDS = ("mode", "model", "prompt_hash", "trajectory_ids", "admission", "replay_trajectory_id", "replay_verdict", "part_of")


class ProvenanceChange(BaseModel):
    """One provenance field of a workflow that differs between two versions."""

    workflow: str
    field: str
    before: str
    after: str


def provenance_changes(before: Iterable[Workflow], after: Iterable[Workflow]) -> list[ProvenanceChange]:
    """The provenance fields that differ for each workflow in both lists (by name, in `after`'s order).
    Why besides the store's diff: it compares content only (so re-induced copies compare equal), and a
    workflow re-admitted, replayed anew or induced from other episodes is a change a reviewer must see."""
    old = {w.name: w.provenance for w in before}
    out = []
    for w in after:
        if w.name not in old:
            continue
        for field in PROVENANCE_FIELDS:
            a, b = getattr(old[w.name], field), getattr(w.provenance, field)
            if a != b:
                out.append(ProvenanceChange(workflow=w.name, field=field, before=_words(a), after=_words(b)))
    return out


def _words(value: object) -> str:
    return ", ".join(map(str, value)) if isinstance(value, list) else str(value)


def diff_view(store: WorkflowStore, scope: str, a: int, b: int) -> dict[str, Any]:
    """A diff as the page and the API give it: the store's diff of the workflows, each version's author
    and message, and the provenance changes (`provenance_changes`)."""
    first, second = store.get(scope, a), store.get(scope, b)
    return {
        **store.diff(scope, a, b).model_dump(mode="json"),
        "versions": {
            str(v.version): {"author": v.author, "message": v.message, "created_at": v.created_at} for v in (first, second)
        },
        "provenance": [c.model_dump() for c in provenance_changes(first.workflows, second.workflows)],
    }


def scope_path(scope: str) -> str:
    """A scope as the tail of a URL: its ``/`` kept (the routes take ``{scope:path}``), the rest quoted."""
    return quote(scope, safe="/")


def scope_view(ctx: AppContext, scope: str, a: int | None, b: int | None) -> dict[str, Any]:
    """Everything the scope page shows: the log, the chosen diff, the head's workflows and their links."""
    with open_store(ctx) as store:
        head_version = require_head(store, scope)
        log = store.log(scope)
        if a is None or b is None:
            pair = default_pair(log)
            a, b = (None, None) if pair is None else pair
        diff: WorkflowDiff | None = None
        diff_extra: dict[str, Any] = {}
        diff_error = ""
        if a is not None and b is not None:
            known = {v.version for v in log}
            missing = [v for v in (a, b) if v not in known]
            if missing:  # the page stays: the log and the head are still worth showing
                diff_error = (
                    f"{scope} has no version {missing[0]} (versions: {', '.join(f'v{v}' for v in sorted(known))}): "
                    "choose two versions below"
                )
            else:
                diff_extra = diff_view(store, scope, a, b)
                diff = WorkflowDiff.model_validate(diff_extra)
        head = store.get(scope, head_version)
        calls = health(store.uses(scope))
    return {
        "scope": scope,
        "path": scope_path(scope),
        "db": ctx.settings.memory_db,
        "head": head,
        "log": log,
        "a": a,
        "b": b,
        "diff": diff,
        "diff_error": diff_error,
        "diff_versions": diff_extra.get("versions", {}),
        "provenance": [ProvenanceChange.model_validate(c) for c in diff_extra.get("provenance", [])],
        "patches": {} if diff is None else {n: patch_lines(p) for n, p in diff.patches.items()},
        "links": episode_links(ctx, source_ids(head.workflows)),
        "calls": calls,
    }


# --- JSON API ---------------------------------------------------------------------------------------


class RollbackRequest(BaseModel):
    """`POST /api/memory/{scope}/rollback`: the version to restore, and the explicit confirmation."""

    version: int
    confirm: bool = False


def do_rollback(ctx: AppContext, scope: str, version: int, confirm: bool) -> dict[str, Any]:
    """Record a new version with `version`'s workflows, if confirmed; the store's own rollback."""
    with open_store(ctx, "rw") as store:
        require_version(store, scope, version)
        if not confirm:
            raise AwmError(
                f"rolling {scope!r} back to version {version} needs confirmation: send \"confirm\": true "
                "(it records a new version with that version's workflows; nothing is deleted)"
            )
        new = store.rollback(scope, version)
    return {
        "scope": scope,
        "version": new.version,
        "parent": new.parent,
        "rollback_to": version,
        "n_workflows": len(new.workflows),
    }


@router.get("/api/memory/scopes")
def api_scopes(ctx: Ctx, fmt: FormatQuery = "json") -> Response:
    with open_store(ctx) as store:
        return list_response(scope_rows(store), fmt, "memory-scopes")


@router.get("/api/memory/{scope:path}/versions/{version:int}")
def api_version(scope: str, version: int, ctx: Ctx) -> dict:
    with open_store(ctx) as store:
        require_version(store, scope, version)
        return store.get(scope, version).model_dump(mode="json")


@router.get("/api/memory/{scope:path}/versions")
def api_versions(scope: str, ctx: Ctx, fmt: FormatQuery = "json") -> Response:
    with open_store(ctx) as store:
        require_head(store, scope)
        rows = [v.model_dump(mode="json") for v in store.log(scope)]
    return list_response(rows, fmt, f"{scope.replace('/', '-')}-versions")


@router.get("/api/memory/{scope:path}/diff")
def api_diff(scope: str, a: Annotated[int, Query()], b: Annotated[int, Query()], ctx: Ctx) -> dict:
    """The store's diff, with each version's author and message and the provenance changes."""
    with open_store(ctx) as store:
        require_version(store, scope, a)
        require_version(store, scope, b)
        return diff_view(store, scope, a, b)


@router.post("/api/memory/{scope:path}/rollback")
def api_rollback(scope: str, body: RollbackRequest, ctx: Ctx) -> dict:
    return do_rollback(ctx, scope, body.version, body.confirm)


# --- pages ------------------------------------------------------------------------------------------


@router.get("/memory")
def memory_page(request: Request, ctx: Ctx) -> Response:
    try:
        with open_store(ctx) as store:
            rows = scope_rows(store)
    except NotServed as exc:  # the Memory tab explains instead of answering an error page
        return page(request, "memory.html", rows=[], missing=str(exc), db=ctx.settings.memory_db)
    for row in rows:
        row["path"] = scope_path(row["scope"])
    return page(request, "memory.html", rows=rows, missing="", db=ctx.settings.memory_db)


def version_view(ctx: AppContext, scope: str, version: int) -> dict[str, Any]:
    """What a version's page shows: the version (its workflows, parent, author, message, provenance),
    the scope's log around it, and its source episodes' links; a version the scope lacks is `error`
    (the page says so and keeps the log), an unknown scope is `NotServed`."""
    with open_store(ctx) as store:
        head = require_head(store, scope)
        log = store.log(scope)
        known = [v.version for v in log]
        shown = store.get(scope, version) if version in known else None
        calls = health(store.uses(scope)) if shown is not None else {}
    error = "" if shown is not None else (
        f"{scope} has no version {version} (versions: {', '.join(f'v{v}' for v in known)}; the head is v{head})"
    )
    children = [v.version for v in log if v.parent == version]
    return {
        "scope": scope, "path": scope_path(scope), "head": head, "log": log, "asked": version, "shown": shown,
        "error": error, "children": children,
        "before": max((v for v in known if v < version), default=None),
        "after": min((v for v in known if v > version), default=None),
        "links": episode_links(ctx, source_ids(shown.workflows)) if shown is not None else {},
        "calls": calls,
    }  # fmt: skip


def version_url(scope: str, version: int) -> str:
    """A version's page: the one place that spells it (the scope page, the episode page link here)."""
    return f"/memory/scope/{scope_path(scope)}/versions/{version}"


@router.get("/memory/scope/{scope:path}/versions/{version:int}")
def version_page(request: Request, scope: str, version: int, ctx: Ctx) -> Response:
    view = version_view(ctx, scope, version)
    return page(request, "memory_version.html", status_code=404 if view["error"] else 200, **view)


@router.get("/memory/{scope:path}/versions/{version:int}")
def version_short(scope: str, version: int) -> Response:
    """`/memory/SCOPE/versions/N`, as people write it, goes to the version's page."""
    return RedirectResponse(version_url(scope, version), status_code=307)


@router.get("/memory/scope/{scope:path}")
def scope_page(
    request: Request,
    scope: str,
    ctx: Ctx,
    a: Annotated[int | None, Query()] = None,
    b: Annotated[int | None, Query()] = None,
    done: Annotated[int | None, Query()] = None,
) -> Response:
    view = scope_view(ctx, scope, a, b)
    recorded = next((v for v in view["log"] if v.version == done), None)
    return page(request, "memory_scope.html", recorded=recorded, **view)


@router.get("/memory/rollback/{scope:path}")
def rollback_confirm_page(request: Request, scope: str, version: Annotated[int, Query()], ctx: Ctx) -> Response:
    """The second step: what a rollback to `version` records, and the button that does it."""
    with open_store(ctx) as store:
        head = require_head(store, scope)
        require_version(store, scope, version)
        diff = store.diff(scope, head, version)
        n_workflows = len(store.get(scope, version).workflows)
        new_version = store.log(scope)[-1].version + 1
    return page(
        request, "memory_rollback.html", scope=scope, path=scope_path(scope), version=version, head=head,
        new_version=new_version, diff=diff, n_workflows=n_workflows,
    )  # fmt: skip


@router.post("/memory/rollback/{scope:path}")
async def rollback_form(request: Request, scope: str, ctx: Ctx) -> Response:
    """The Confirm button's form POST; then back to the scope page (303, so a reload does not repost).

    The form is parsed here (two urlencoded fields) rather than with `Form()`, which would add
    python-multipart as a dependency for nothing else.
    """
    form = parse_qs((await request.body()).decode("utf-8", "replace"))
    raw = form.get("version", [""])[0]
    if not raw.isdigit():
        raise AwmError(f"a rollback needs a version number, got {raw!r}")
    confirmed = form.get("confirm", [""])[0] == "yes"
    result = await run_in_threadpool(do_rollback, ctx, scope, int(raw), confirmed)
    return RedirectResponse(f"/memory/scope/{scope_path(scope)}?done={result['version']}", status_code=303)
