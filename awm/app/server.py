"""The application: `create_app(settings)` mounts the static files, the run and episode routes (here),
and the memory, ablation and live routers; the HTML pages and the JSON API read the same rows.

Errors: a name that is not served is a 404 (`NotServed`); a run folder that cannot be read is a 422
naming the file and what was wrong (`AwmError`); the API answers JSON, the pages an HTML page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel
from starlette.middleware.trustedhost import TrustedHostMiddleware

from awm.errors import AwmError
from awm.pipeline.summary import live_facts, summarize_episode
from awm.traces import page_relpath
from awm.traces.db import EpisodeRow, RunDatabase, StepRow, screenshot_relpath
from awm.trajectory import Box, Trajectory

from .catalog import Catalog, Folder, NotServed, arm_place, file_in
from .memory_pages import version_url
from .pictures import step_picture
from .runs import (
    STATUSES,
    RunListing,
    StepImage,
    ablation_listing,
    arena_groups,
    call_values,
    decided_by,
    episode_status,
    page_url,
    read_run,
    run_listing,
    screenshot_url,
    step_counts,
    step_tree,
    verdict_short,
)
from .web import STATIC_DIR, AppContext, AppSettings, FormatQuery, context, list_response, page

Ctx = Annotated[AppContext, Depends(context)]


def list_runs(ctx: AppContext) -> list[RunListing]:
    """Every served run and ablation folder, newest first, an ablation's arms nested under it (not rows
    of their own); an unreadable run is listed with its error."""
    folders = ctx.catalog.folders()
    rows: list[RunListing] = []
    arms: dict[str, list[RunListing]] = {}
    for folder in folders.values():
        if folder.kind == "ablation":
            continue
        row = _listing(folder)
        place = arm_place(folder, folders)
        if place is None:
            rows.append(row)
        else:
            placed = row.model_copy(update={"ablation": place.ablation, "arm": place.arm, "repeat": place.repeat})
            arms.setdefault(place.ablation, []).append(placed)
    for folder in folders.values():
        if folder.kind == "ablation":
            created = datetime.fromtimestamp(folder.path.stat().st_mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            rows.append(ablation_listing(folder.key, folder.path.name, created, arms.get(folder.key, [])))
    return sorted(rows, key=lambda r: (r.created_at, r.key), reverse=True)


def _listing(folder: Folder) -> RunListing:
    try:
        run, episodes, recovered = read_run(folder)
    except AwmError as exc:
        return RunListing(key=folder.key, name=folder.path.name, created_at="", status="unreadable", error=str(exc))
    return run_listing(folder, run, episodes, sum(recovered.values()))


def _matches(row: RunListing, status: str, needle: str) -> bool:
    if status and not (row.counts.get(status) or row.status == status):
        return False
    return not needle or needle in row.search_text


def filter_runs(rows: list[RunListing], status: str, text: str) -> list[RunListing]:
    """Runs with at least one episode of `status` (or a run status such as running), whose text has `text`;
    an ablation is kept with the arms that match (all of them when only the ablation itself does)."""
    needle = text.strip().lower()
    out = []
    for row in rows:
        kept = [a for a in row.arms if _matches(a, status, needle)]
        if kept:
            out.append(row.model_copy(update={"arms": kept}))
        elif _matches(row, status, needle):
            out.append(row)
    return out


def _run(ctx: AppContext, key: str) -> Folder:
    return ctx.catalog.folder(key, "run")


def cut_at_hash(db: RunDatabase, episode_id: str) -> list[EpisodeRow]:
    """The episodes an address cut at `#` may have named. Episode ids hold `#` (`login-user#0-cb04e18b`);
    pasted unencoded, the browser sends only `login-user` and keeps `#0-cb04e18b` as the fragment,
    which the page (not the server) can still read."""
    if not episode_id or "#" in episode_id:
        return []
    return [e for e in db.episodes() if e.id.startswith(episode_id + "#")]


def _episode_in(db: RunDatabase, folder: Folder, episode_id: str) -> tuple[EpisodeRow, list[StepRow]]:
    """An episode of the run by its exact id, and its steps; `NotServed` when the run has no such episode."""
    row = db.episode(episode_id)
    if row is None:
        hint = ""
        if cut_at_hash(db, episode_id):
            hint = f" (episode ids hold '#': write it as %23, e.g. {quote(episode_id + '#', safe='')}...)"
        raise NotServed(f"no episode '{episode_id}' in run {folder.key}{hint}")
    return row, db.steps(episode_id)


def _recorded_page(path: Path) -> Response:
    """A recorded page's HTML as plain text: it is a record to read, and the page's own scripts must never
    run in the app's origin (`nosniff` keeps a browser from guessing otherwise)."""
    return Response(
        path.read_text(errors="replace"), media_type="text/plain; charset=utf-8",
        headers={"X-Content-Type-Options": "nosniff"},
    )  # fmt: skip


def _screenshot_of(ctx: AppContext, run: str, episode: str, index: int) -> tuple[Path, StepRow]:
    """The file of a step's screenshot, through the catalog's checks, and the step; `NotServed` else."""
    folder = _run(ctx, run)
    with RunDatabase(folder.path) as db:
        step = db.step(episode, index)  # one row: an episode page asks for each of its screenshots
    if step is None:
        raise NotServed(f"no step {index} in episode '{episode}' of run {folder.key}")
    if not step.screenshot:
        raise NotServed(f"step {index} of '{episode}' has no screenshot")
    return file_in(folder, step.screenshot), step


def episode_payload(folder: Folder, episode: EpisodeRow, steps: list[StepRow]) -> dict:
    """`GET /api/runs/{run}/episodes/{episode}`: the episode, its status and its steps, with each step's
    screenshot URL (or null) and its sub-steps' indexes."""
    return {
        "run": folder.key,
        "episode": episode.model_dump(mode="json"),
        "status": episode_status(episode),
        "decided_by": decided_by(episode),
        "model_steps": episode.model_steps,
        "sub_steps": episode.sub_steps,
        "steps": [
            {
                **s.model_dump(mode="json"),
                "screenshot_url": screenshot_url(folder.key, episode.id, s.idx) if s.screenshot else None,
                "picture_url": screenshot_url(folder.key, episode.id, s.idx, "picture.png") if s.screenshot else None,
            }
            for s in steps
        ],
    }


def episode_line(episode: EpisodeRow) -> dict[str, Any]:
    """One line of `GET /api/runs/{run}/episodes`: the row, its status word, what decided it, and its
    model steps (`steps` counts the workflow sub-steps too; `sub_steps` says how many)."""
    return {
        **episode.model_dump(mode="json"),
        "status_word": episode_status(episode),
        "decided_by": decided_by(episode),
        "model_steps": episode.model_steps,
    }


def register_routes(app: FastAPI) -> None:
    @app.get("/api/runs")
    def api_runs(
        ctx: Ctx, fmt: FormatQuery = "json", status: Annotated[str, Query()] = "", q: Annotated[str, Query()] = ""
    ) -> Response:
        """The runs, filtered as the runs page filters them (`status`, `q`); `?format=csv` for a file."""
        rows = filter_runs(list_runs(ctx), status, q)
        if fmt == "csv":  # a flat file: each ablation's arms as rows after it, named by their `ablation`
            rows = [flat for r in rows for flat in (r.model_copy(update={"arms": []}), *r.arms)]
        return list_response([r.model_dump(mode="json", exclude={"arms"} if fmt == "csv" else None) for r in rows], fmt, "runs")

    @app.get("/api/runs/{run}/episodes")
    def api_episodes(run: str, ctx: Ctx, fmt: FormatQuery = "json") -> Response:
        folder = _run(ctx, run)
        with RunDatabase(folder.path) as db:
            rows = [episode_line(e) for e in db.episodes()]
        return list_response(rows, fmt, f"{folder.key}-episodes")

    @app.get("/api/runs/{run}/episodes/{episode}")
    def api_episode(run: str, episode: str, ctx: Ctx) -> dict:
        folder = _run(ctx, run)
        with RunDatabase(folder.path) as db:
            row, steps = _episode_in(db, folder, episode)
        return episode_payload(folder, row, steps)

    @app.get("/api/runs/{run}/episodes/{episode}/steps/{index}/screenshot.png")
    def api_screenshot(run: str, episode: str, index: int, ctx: Ctx) -> FileResponse:
        """The step's screenshot as recorded: the full frame."""
        path, _ = _screenshot_of(ctx, run, episode, index)
        return FileResponse(path, media_type="image/png")

    @app.get("/api/runs/{run}/episodes/{episode}/steps/{index}/picture.png")
    def api_picture(run: str, episode: str, index: int, ctx: Ctx) -> Response:
        """The step's picture: its screenshot cropped to the page's content, the acted element marked."""
        path, step = _screenshot_of(ctx, run, episode, index)
        return Response(ctx.pictures.picture(path, step.box), media_type="image/png")

    @app.get("/api/runs/{run}/episodes/{episode}/steps/{index}/page.html")
    def api_step_page(run: str, episode: str, index: int, ctx: Ctx) -> Response:
        """The page a step decided on, as recorded (`[browser] pages`)."""
        return _recorded_page(file_in(_run(ctx, run), page_relpath(episode, index)))

    @app.get("/api/runs/{run}/episodes/{episode}/final/page.html")
    def api_final_page(run: str, episode: str, ctx: Ctx) -> Response:
        """The page after the episode's last action, as recorded."""
        return _recorded_page(file_in(_run(ctx, run), page_relpath(episode, "final")))

    @app.get("/api/runs/{run}/episodes/{episode}/final/{image}")
    def api_final_frame(run: str, episode: str, image: StepImage, ctx: Ctx) -> Response:
        """The page after the episode's last action: the full frame, or its picture (cropped to the page)."""
        path = file_in(_run(ctx, run), screenshot_relpath(episode, "final"))
        if image == "screenshot.png":
            return FileResponse(path, media_type="image/png")
        return Response(ctx.pictures.picture(path, None), media_type="image/png")

    @app.get("/")
    def runs_page(
        request: Request, ctx: Ctx, status: Annotated[str, Query()] = "", q: Annotated[str, Query()] = ""
    ) -> Response:
        rows = list_runs(ctx)
        return page(
            request, "runs.html", runs=filter_runs(rows, status, q), total=len(rows), status=status, q=q,
            statuses=STATUSES,
        )  # fmt: skip

    @app.get("/runs/{run}")
    def run_page(request: Request, run: str, ctx: Ctx) -> Response:
        folders = ctx.catalog.folders()
        found = folders.get(run)
        if found is not None and found.kind == "ablation":  # an ablation is a page of its own
            return RedirectResponse(f"/ablations/{quote(run, safe='')}", status_code=307)
        folder = _run(ctx, run)
        run_row, episodes, recovered = read_run(folder)
        listing = run_listing(folder, run_row, episodes, sum(recovered.values()))
        rows = [(e, episode_status(e), recovered.get(e.id, 0), decided_by(e), verdict_short(e)) for e in episodes]
        summary = (folder.path / "summary.md").is_file()
        return page(
            request, "run.html", folder=folder, run=run_row, listing=listing, rows=rows, has_summary=summary,
            place=arm_place(folder, folders), groups=arena_groups(episodes),
        )  # fmt: skip

    @app.get("/runs/{run}/episodes/{episode}")
    def episode_page(request: Request, run: str, episode: str, ctx: Ctx) -> Response:
        folder = _run(ctx, run)
        with RunDatabase(folder.path) as db:
            try:
                data = episode_view_data(ctx, folder, db, episode, embed=False)
            except NotServed as exc:
                cut = cut_at_hash(db, episode)
                if not cut:
                    raise
                return page(request, "episode_cut.html", status_code=404, folder=folder, stem=episode, episodes=cut, message=str(exc))
        return page(request, "episode.html", **data)


def episode_view_data(
    ctx: AppContext | None, folder: Folder, db: RunDatabase, episode_id: str, *, embed: bool
) -> dict[str, Any]:
    """What the episode template needs, read through `db` (the caller's one open of the run: one per
    page, one per whole-run export): the episode row, its steps once, and the trajectory rebuilt from
    those rows when the episode has no trajectory file. `embed` (a self-contained export) puts each
    screenshot in the page as a data URL instead of linking to the API; `ctx` None: no server (no
    memory link)."""
    row, steps = _episode_in(db, folder, episode_id)
    trajectory = db.trajectory_of(row, steps)
    shots = {s.idx: _shot(folder, row.id, s, embed) for s in steps if s.screenshot}
    memory_url = None
    if ctx is not None and ctx.settings.memory_db is not None and row.memory_version is not None and row.scope:
        memory_url = version_url(row.scope, row.memory_version)  # the version it used, not the head
    summary = summarize_episode(trajectory)
    live = summary.start_url or summary.verdict_source == "self-reported"  # as summary.md's Live pages
    tree = step_tree(steps)
    calls = {c.step: c for c in row.workflow_calls}
    values = {n.step.idx: call_values(calls[n.step.idx], n.children) for n in tree if n.step.idx in calls}
    return {
        "folder": folder, "episode": row, "status": episode_status(row), "decided": decided_by(row),
        "step_counts": step_counts(row.model_steps, row.sub_steps), "tree": tree, "call_values": values,
        "shots": shots, "memory_url": memory_url, "workflows_used": trajectory.workflows_used,
        "live_facts": live_facts(summary) if live else [], "site_facts": site_facts(trajectory), "embedded": embed,
        "final_page": _final_page(folder, trajectory, embed),
    }  # fmt: skip


def site_facts(trajectory: Trajectory) -> list[tuple[str, str]]:
    """An arena episode's check and what it changed in the site's database (`awm.sites.changes`), as the
    task reported them at its end: what a person reads to see whether it broke anything else."""
    info = trajectory.meta.get("env_info") or {}
    if "template" not in info:
        return []
    facts = [("check", str(info.get("check") or "not decided (the episode ended before its check)"))]
    if "changes" in info:
        changes = [str(c) for c in info.get("changes") or []]
        facts.append(("changed", "; ".join(changes) if changes else "nothing in the site's database"))
    return facts


class FinalPage(BaseModel):
    """The page after the episode's last action, as the harness recorded it (`meta["final_observation"]`,
    and its screenshot, `meta["final_screenshot"]`, as the step cards show theirs)."""

    url: str
    text: str
    shot: StepShot | None = None


def _final_page(folder: Folder, trajectory: Trajectory, embed: bool) -> FinalPage | None:
    text, url = trajectory.meta.get("final_observation"), trajectory.meta.get("final_url")
    if not isinstance(text, str) or not text:
        return None  # recorded before the harness kept it, or the episode never opened a page
    shot = None
    recorded = trajectory.meta.get("final_screenshot")
    if isinstance(recorded, str) and recorded:
        shot = _images(folder, trajectory.trajectory_id, "final", recorded, None, embed)
    return FinalPage(url=url if isinstance(url, str) else "", text=text, shot=shot)


class StepShot(BaseModel):
    """A step card's images: its picture (cropped, target marked) and the full frame, as URLs; and the
    page's recorded HTML, as text (None: not recorded, or an export)."""

    picture: str
    full: str
    page: str | None = None


def _shot(folder: Folder, episode_id: str, step: StepRow, embed: bool) -> StepShot | None:
    """The step's images (`_images`)."""
    return _images(folder, episode_id, step.idx, step.screenshot or "", step.box, embed)


def _images(
    folder: Folder, episode_id: str, index: int | Literal["final"], relpath: str, box: Box | None, embed: bool
) -> StepShot | None:
    """A recorded screenshot's images as the API's addresses, or embedded as `data:` URLs (an export:
    read through the catalog's checks; None when the file is missing)."""
    if not embed:
        recorded = (folder.path / page_relpath(episode_id, index)).is_file()
        return StepShot(
            picture=screenshot_url(folder.key, episode_id, index, "picture.png"),
            full=screenshot_url(folder.key, episode_id, index),
            page=page_url(folder.key, episode_id, index) if recorded else None,
        )
    import base64

    try:
        path = file_in(folder, relpath)
    except NotServed:
        return None
    png = path.read_bytes()
    as_url = "data:image/png;base64,{}".format
    return StepShot(picture=as_url(base64.b64encode(step_picture(png, box)).decode()), full=as_url(base64.b64encode(png).decode()))


def validation_message(errors: Sequence[Any]) -> str:
    """A request's bad parameters in words: which parameter, what was expected, what came
    ("query parameter 'a': expected a valid integer, got 'x'"), instead of pydantic's JSON."""
    parts = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ())]
        where, name = (loc[0], ".".join(loc[1:])) if len(loc) > 1 else ("request", ".".join(loc) or "?")
        expected = str(error.get("msg", "invalid")).removeprefix("Input should be ").removeprefix("Value error, ")
        if error.get("type") == "missing":
            parts.append(f"{where} parameter '{name}' is required")
        else:
            parts.append(f"{where} parameter '{name}': expected {expected}, got {error.get('input')!r}")
    return "; ".join(parts) or "the request's parameters are not valid"


def _error_response(request: Request, status: int, message: str) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"detail": message}, status_code=status)
    return page(request, "error.html", status_code=status, status=status, message=message)


def create_app(settings: AppSettings) -> FastAPI:
    """The application over `settings` (one per `awm serve`, one per test)."""
    from . import ablation_pages, compare, live, memory_pages

    ctx = AppContext(settings=settings, catalog=Catalog(settings.runs))
    ctx.live = live.LiveRuns(settings)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        yield
        ctx.live.stop_all()  # the server is going away: nobody is left to answer a run's gate

    app = FastAPI(title="awm", docs_url=None, redoc_url=None, openapi_url="/api/openapi.json", lifespan=lifespan)
    app.state.ctx = ctx
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.allowed_hosts)

    @app.exception_handler(NotServed)
    def not_served(request: Request, exc: NotServed) -> Response:
        return _error_response(request, 404, str(exc))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        """A bad query or path value is a 400 in words; a JSON body the API refuses keeps FastAPI's 422
        with pydantic's details (what `POST /api/live` has always answered)."""
        if any(str((e.get("loc") or ("",))[0]) == "body" for e in exc.errors()):
            return await request_validation_exception_handler(request, exc)
        return _error_response(request, 400, validation_message(exc.errors()))

    @app.exception_handler(AwmError)
    def awm_error(request: Request, exc: AwmError) -> Response:
        return _error_response(request, 422, str(exc))

    register_routes(app)
    app.include_router(memory_pages.router)
    app.include_router(ablation_pages.router)
    app.include_router(compare.router)
    app.include_router(live.router)
    return app


__all__ = ["AppSettings", "create_app", "Catalog"]
