"""Two runs side by side: `/compare?a=RUN&b=RUN` and `GET /api/compare?a=RUN&b=RUN`; one task's two
episodes step by step: `/compare/steps?a=RUN&b=RUN&task=KEY` (JSON: `GET /api/compare/steps?...`).

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

from awm.traces.db import EpisodeRow, RunDatabase, StepRow

from .catalog import NotServed
from .runs import EpisodeStatus, decided_by, episode_status, read_run, screenshot_url, verdict_short
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


class StepSide(BaseModel):
    """One model step of one episode in the step-by-step view (its sub-steps are folded into it)."""

    index: int
    action: str
    target: str  # role and label of what it acted on: compared across runs, where element ids are not
    outcome: str
    sub_steps: int
    picture: str | None  # the step's picture (cropped, the target marked), when it was recorded


class StepPair(BaseModel):
    number: int  # the model step's place in its episode, from 1
    a: StepSide | None
    b: StepSide | None
    same: bool  # the same action on the same target (ids aside) with the same outcome


class StepComparison(BaseModel):
    a: str
    b: str
    task_key: str
    a_episode: Outcome | None
    b_episode: Outcome | None
    diverged_at: int | None  # the first step number where they differ; None when they never do
    pairs: list[StepPair]


def _sides(run_key: str, episode_id: str, steps: list[StepRow]) -> list[StepSide]:
    """The episode's model steps in order, each with how many workflow sub-steps it called."""
    called = {}
    for s in steps:
        if s.called_by is not None:
            called[s.called_by] = called.get(s.called_by, 0) + 1
    return [
        StepSide(
            index=s.idx, action=s.action_str or "(no action)",
            target=f"{s.target.role} '{s.target.label}'" if s.target is not None and s.target.role else "",
            outcome=s.outcome, sub_steps=called.get(s.idx, 0),
            picture=screenshot_url(run_key, episode_id, s.idx, "picture.png") if s.screenshot else None,
        )  # fmt: skip
        for s in steps
        if s.called_by is None
    ]


def _same(a: StepSide | None, b: StepSide | None) -> bool:
    if a is None or b is None:
        return False
    name = lambda side: side.action.split("(", 1)[0]  # noqa: E731  the action's name, ids differ per run
    return (name(a), a.target, a.outcome) == (name(b), b.target, b.outcome)


def compare_steps(
    a_key: str, a: tuple[Outcome, list[StepRow]] | None, b_key: str, b: tuple[Outcome, list[StepRow]] | None, task_key: str
) -> StepComparison:
    """Both runs' episodes of one task, model step by model step, and where they first differ (pure)."""
    a_steps = _sides(a_key, a[0].episode, a[1]) if a else []
    b_steps = _sides(b_key, b[0].episode, b[1]) if b else []
    pairs = []
    for i in range(max(len(a_steps), len(b_steps))):
        left = a_steps[i] if i < len(a_steps) else None
        right = b_steps[i] if i < len(b_steps) else None
        pairs.append(StepPair(number=i + 1, a=left, b=right, same=_same(left, right)))
    diverged = next((p.number for p in pairs if not p.same), None)
    return StepComparison(
        a=a_key, b=b_key, task_key=task_key, a_episode=a[0] if a else None, b_episode=b[0] if b else None,
        diverged_at=diverged, pairs=pairs,
    )  # fmt: skip


def step_comparison(ctx: AppContext, a: str, b: str, task: str) -> StepComparison:
    """One task's latest episode in each served run, step by step; `NotServed` (404) when a run is not
    served or neither run has the task."""
    sides = []
    for key in (a, b):
        folder = ctx.catalog.folder(key, "run")
        _, episodes, _ = read_run(folder)
        outcome = _latest(key, [e for e in episodes if e.task_key == task]).get(task)
        if outcome is None:
            sides.append(None)
            continue
        with RunDatabase(folder.path) as db:
            sides.append((outcome, db.steps(outcome.episode)))
    if sides[0] is None and sides[1] is None:
        raise NotServed(f"neither {a} nor {b} has an episode of task {task!r}")
    return compare_steps(a, sides[0], b, sides[1], task)


@router.get("/api/compare/steps")
def api_compare_steps(
    ctx: Ctx, a: Annotated[str, Query(min_length=1)], b: Annotated[str, Query(min_length=1)], task: Annotated[str, Query(min_length=1)]
) -> JSONResponse:
    """One task's two episodes side by side, step by step, and the first step where they differ."""
    return JSONResponse(step_comparison(ctx, a, b, task).model_dump(mode="json"))


@router.get("/compare/steps")
def compare_steps_page(
    request: Request, ctx: Ctx, a: Annotated[str, Query(min_length=1)], b: Annotated[str, Query(min_length=1)], task: Annotated[str, Query(min_length=1)]
) -> Response:
    """The page of `api_compare_steps`: two columns of steps, the first difference marked."""
    return page(request, "compare_steps.html", result=step_comparison(ctx, a, b, task))


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
