"""Two runs side by side: `/compare?a=RUN&b=RUN` and `GET /api/compare?a=RUN&b=RUN`.

Episodes are paired by task and seed (`Task.key`), never by order; a run that tried a task more than
once is shown by its latest attempt (as `awm traces show` finds a task key), and a task only one run
tried is listed as such rather than dropped. `compare_runs` is pure: the routes read the two runs and
hand it their episodes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from awm.traces.db import EpisodeRow

from .catalog import NotServed
from .runs import EpisodeStatus, decided_by, episode_status, read_run, verdict_short
from .web import AppContext, FormatQuery, context, list_response, page

router = APIRouter()
Ctx = Annotated[AppContext, Depends(context)]
Change = Literal["same", "better in b", "better in a", "only in a", "only in b"]


class Outcome(BaseModel):
    """One run's episode of a task: how it ended, what decided, and where its page is."""

    episode: str
    url: str
    status: EpisodeStatus
    verdict: str  # the deciding value ("raw reward 0.2 < 1"); `decided_by` says it in words
    decided_by: str
    model_steps: int
    sub_steps: int
    attempts: int  # episodes of this task and seed in the run; the latest is shown


class CompareRow(BaseModel):
    task_key: str
    task: str
    seed: int | None
    a: Outcome | None
    b: Outcome | None
    change: Change


class Comparison(BaseModel):
    a: str
    b: str
    counts: dict[str, int]  # by `Change`
    success: dict[str, int]  # each run's successes on the tasks both tried
    shared: int  # tasks both runs tried
    rows: list[CompareRow]


def _latest(run_key: str, episodes: list[EpisodeRow]) -> dict[str, Outcome]:
    by_task: dict[str, list[EpisodeRow]] = {}
    for e in episodes:  # in start order: the last of a task is its latest attempt
        by_task.setdefault(e.task_key, []).append(e)
    out = {}
    for key, tries in by_task.items():
        e = tries[-1]
        out[key] = Outcome(
            episode=e.id, url=f"/runs/{quote(run_key, safe='')}/episodes/{quote(e.id, safe='')}",
            status=episode_status(e), verdict=verdict_short(e), decided_by=decided_by(e),
            model_steps=e.model_steps, sub_steps=e.sub_steps, attempts=len(tries),
        )  # fmt: skip
    return out


def _change(a: Outcome | None, b: Outcome | None) -> Change:
    if b is None:
        return "only in a"
    if a is None:
        return "only in b"
    solved_a, solved_b = a.status == "success", b.status == "success"
    if solved_a == solved_b:
        return "same"
    return "better in b" if solved_b else "better in a"


def compare_runs(a_key: str, a_episodes: list[EpisodeRow], b_key: str, b_episodes: list[EpisodeRow]) -> Comparison:
    """Per task and seed, both runs' latest outcomes side by side, sorted by task then seed (pure)."""
    a, b = _latest(a_key, a_episodes), _latest(b_key, b_episodes)
    tasks = {e.task_key: e.task for e in [*a_episodes, *b_episodes]}
    order = sorted(tasks, key=lambda k: (tasks[k].task_id, tasks[k].seed if tasks[k].seed is not None else -1, k))
    rows = [
        CompareRow(
            task_key=k, task=tasks[k].task_id, seed=tasks[k].seed, a=a.get(k), b=b.get(k), change=_change(a.get(k), b.get(k))
        )
        for k in order
    ]
    shared = [r for r in rows if r.a is not None and r.b is not None]
    counts = {c: sum(r.change == c for r in rows) for c in ("same", "better in b", "better in a", "only in a", "only in b")}
    success = {
        "a": sum(r.a is not None and r.a.status == "success" for r in shared),
        "b": sum(r.b is not None and r.b.status == "success" for r in shared),
    }
    return Comparison(a=a_key, b=b_key, counts=counts, success=success, shared=len(shared), rows=rows)


def comparison(ctx: AppContext, a: str, b: str) -> Comparison:
    """The two served runs compared; `NotServed` (404) names a run that is not served."""
    folders = [ctx.catalog.folder(key, "run") for key in (a, b)]
    (_, a_episodes, _), (_, b_episodes, _) = (read_run(f) for f in folders)
    return compare_runs(a, a_episodes, b, b_episodes)


def csv_rows(result: Comparison) -> list[dict[str, Any]]:
    """One line per task and seed for `?format=csv`: the two outcomes as `a.*` and `b.*` columns."""
    empty = dict.fromkeys(Outcome.model_fields, None)
    return [
        {"task_key": r.task_key, "task": r.task, "seed": r.seed, "change": r.change,
         "a": r.a.model_dump() if r.a else empty, "b": r.b.model_dump() if r.b else empty}
        for r in result.rows
    ]  # fmt: skip


@router.get("/api/compare")
def api_compare(
    ctx: Ctx, a: Annotated[str, Query(min_length=1)], b: Annotated[str, Query(min_length=1)], fmt: FormatQuery = "json"
) -> Response:
    """The comparison as JSON (`a`, `b`, `counts`, `success`, `shared`, `rows`), or its rows as CSV."""
    result = comparison(ctx, a, b)
    if fmt == "csv":
        return list_response(csv_rows(result), fmt, f"compare-{a}-{b}")
    return JSONResponse(result.model_dump(mode="json"))


@router.get("/compare")
def compare_page(request: Request, ctx: Ctx, a: Annotated[str, Query()] = "", b: Annotated[str, Query()] = "") -> Response:
    """The two chosen runs side by side; without both, the form to choose them."""
    runs = sorted(key for key, folder in ctx.catalog.folders().items() if folder.kind == "run")
    result, error, status = None, "", 200
    if a and b:
        try:
            result = comparison(ctx, a, b)
        except NotServed as exc:  # the form stays, so another run can be chosen
            error, status = str(exc), 404
    query = {"a": a, "b": b}
    return page(request, "compare.html", status_code=status, runs=runs, a=a, b=b, result=result, error=error, query=query)
