"""Live runs from the application: start `awm run --url` as a child process, stream what it writes.

Why a child process per run: BrowserGym drives Chromium through one synchronous Playwright per process,
which cannot serve two runs at once nor live inside the server's event loop; a child also keeps the
server answering while the model thinks, and a run whose visitor closed the page simply finishes and
stays recorded. The child is the ordinary `awm run --url ... --confirm --confirm-with app`, so the rails
are the ones a terminal user gets (URL check before anything starts, domain lock, field refusals,
downloads off, the step budget), and the run folder lands in the served runs like any other.

The stream (`events`) reads the child's run folder: each `step` line of `events.jsonl` becomes a `step`
event (with its screenshot URL), each question the gate writes (`confirm/*.question.json`) an `approval`
event, and the end is exactly one terminal event: `verdict` when the episode ended on the agent's own
terms (answered, infeasible, out of steps, refused by the rails...), `error` when the machinery failed
(the child exited non-zero, or the episode ended llm_error/env_error/timeout), or `error` with "run
timed out" when nothing happened for `stream_idle_s`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse, Response
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sse_starlette.sse import EventSourceResponse

from awm.gate import QUESTION_SUFFIX, answer_question, read_answer
from awm.pipeline.summary import INFRA_ENDS, SUMMARY_JSON, live_facts, load_summary
from awm.rails import check_url
from awm.traces.db import EVENTS_NAME

from .catalog import Catalog, NotServed, inside
from .runs import screenshot_url
from .web import AppContext, AppSettings, context, page

Ctx = Annotated[AppContext, Depends(context)]
POLL_S = 0.25
LOG_NAME = "serve.log"
BUSY = "another run is in progress"

Intent = Literal["goal", "click", "type"]


class LiveRequest(BaseModel):
    """`POST /api/live`: a URL and a goal, or one of the two fixed intents of the public mode."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2000)
    goal: str = Field(default="", max_length=1000)
    intent: Intent = "goal"
    label: str = Field(default="", max_length=200)  # the intents: the element's label
    text: str = Field(default="", max_length=500)  # the type intent: what to type
    judge: bool = False

    @model_validator(mode="after")
    def _complete(self) -> LiveRequest:
        if self.intent == "goal" and not self.goal.strip():
            raise ValueError("a goal is needed (what the agent should do on the page)")
        if self.intent in ("click", "type") and not self.label.strip():
            raise ValueError(f"the {self.intent} intent needs the element's label")
        if self.intent == "type" and not self.text:
            raise ValueError("the type intent needs the text to type")
        return self

    def goal_text(self) -> str:
        """The goal the agent gets: the free text, or the intent written out."""
        if self.intent == "click":
            return f"Click the element labelled '{self.label.strip()}'."
        if self.intent == "type":
            return f"Type '{self.text}' into the field labelled '{self.label.strip()}' and submit it."
        return self.goal.strip()


class Approve(BaseModel):
    model_config = ConfigDict(extra="forbid")

    approve: bool
    question: str | None = None  # which question; default the oldest one still waiting


@dataclass
class LiveRun:
    run_id: str
    run_dir: Path
    url: str
    goal: str
    process: subprocess.Popen[bytes]
    started_at: str
    log: Any = field(repr=False, default=None)

    @property
    def confirm_dir(self) -> Path:
        return self.run_dir / "confirm"

    def running(self) -> bool:
        return self.process.poll() is None


def child_command(settings: AppSettings, run_dir: Path, url: str, goal: str, *, judge: bool) -> list[str]:
    """The `awm run` a live request becomes (pure)."""
    command = [
        sys.executable, "-m", "awm.cli", "run", "--url", url, "--goal", goal, "--out", str(run_dir),
        "--name", "live", "--confirm", "--confirm-with", "app",
    ]  # fmt: skip
    for host in settings.allow_hosts:
        command += ["--allow-host", host]
    if settings.config is not None:
        command += ["--config", str(settings.config)]
    if judge:
        command.append("--judge")
    return command


class LiveRuns:
    """The live runs of one application: at most `settings.max_live` executing at once."""

    def __init__(self, settings: AppSettings) -> None:
        self.settings = settings
        self._runs: dict[str, LiveRun] = {}
        self._lock = threading.Lock()

    def start(self, request: LiveRequest) -> LiveRun:
        """Check the URL (422 with the rail's reason), take a slot (429 when none is free), start the child."""
        verdict = check_url(request.url, allow_hosts=self.settings.allow_hosts)
        if not verdict.allowed:
            raise HTTPException(422, detail={"rail": "url", "reason": verdict.reason, "url": request.url})
        goal = request.goal_text()
        with self._lock:
            if sum(r.running() for r in self._runs.values()) >= self.settings.max_live:
                raise HTTPException(429, detail=BUSY)
            run_id = f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
            run_dir = Path(self.settings.live_dir) / run_id
            run_dir.mkdir(parents=True)
            log = (run_dir / LOG_NAME).open("wb")
            process = subprocess.Popen(  # noqa: S603 - our own command line, the request's text as arguments
                child_command(self.settings, run_dir, request.url, goal, judge=request.judge),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=os.getcwd(),
                start_new_session=True,  # a Ctrl-C meant for the server is not delivered to the run too
            )  # fmt: skip
            run = LiveRun(run_id, run_dir, request.url, goal, process, datetime.now().isoformat(timespec="seconds"), log)
            self._runs[run_id] = run
            return run

    def get(self, run_id: str) -> LiveRun:
        run = self._runs.get(run_id)
        if run is None:
            raise NotServed(f"no live run '{run_id}' started by this server")
        return run

    def runs(self) -> list[LiveRun]:
        return sorted(self._runs.values(), key=lambda r: r.started_at, reverse=True)

    def stop_all(self) -> None:
        """Stop every child still running (the server is shutting down) and wait for them."""
        for run in self._runs.values():
            if run.running():
                try:
                    os.killpg(run.process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for run in self._runs.values():
            try:
                run.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(run.process.pid, signal.SIGKILL)
            if run.log is not None:
                run.log.close()


# --------------------------------------------------------------------------------------------------
# The stream: pure readers of the run folder, then the async loop
# --------------------------------------------------------------------------------------------------


def pending_questions(confirm_dir: Path) -> list[dict]:
    """The gate's questions with no answer yet, oldest first."""
    out = []
    for path in sorted(Path(confirm_dir).glob(f"*{QUESTION_SUFFIX}")):
        try:
            question = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being written (the gate writes atomically, so only a foreign file lands here)
        if read_answer(confirm_dir, str(question.get("id"))) is None:
            out.append(question)
    return sorted(out, key=lambda q: q.get("asked_at", 0))


def _log_tail(run: LiveRun, lines: int = 6) -> str:
    try:
        text = (run.run_dir / LOG_NAME).read_text(errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip() and "Warning" not in line]
    return "\n".join(kept[-lines:])


def terminal_event(run: LiveRun, key: str | None) -> dict[str, Any]:
    """The one event a finished run ends its stream with (pure over the run folder)."""
    code = run.process.returncode
    summary_path = run.run_dir / SUMMARY_JSON
    if code != 0 or not summary_path.is_file():
        return {"event": "error", "data": {"message": f"the run stopped (exit {code})", "detail": _log_tail(run), "run": key}}
    summary = load_summary(run.run_dir)
    if not summary.episodes:
        return {"event": "error", "data": {"message": "the run recorded no episode", "detail": _log_tail(run), "run": key}}
    episode = summary.episodes[0]
    if episode.end in INFRA_ENDS:
        detail = ", ".join(f"{k} x{v}" for k, v in episode.failure_classes.items())
        return {"event": "error", "data": {"message": f"the run failed: {episode.end}", "detail": detail, "run": key}}
    return {
        "event": "verdict",
        "data": {
            "run": key, "episode": episode.trajectory_id, "end": episode.end, "success": episode.success,
            "verdict_source": episode.verdict_source, "shown": episode.shown_success,
            "final_answer": episode.final_answer, "facts": live_facts(episode), "steps": episode.steps,
        },
    }  # fmt: skip


def question_screenshot_url(run_id: str, question_id: str) -> str:
    """Where the page a gate question was asked on is served (`question_screenshot` below): the
    question's own picture, not a run step's (those are `runs.screenshot_url`)."""
    return f"/api/live/{quote(run_id, safe='')}/questions/{quote(question_id, safe='')}/screenshot.png"


def _json(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, default=str)


async def events(run: LiveRun, catalog: Catalog, idle_s: float) -> AsyncIterator[dict[str, str]]:
    """Every step and question so far, then the new ones as they come, then one terminal event."""
    offset = 0
    asked: set[str] = set()
    last = time.monotonic()
    events_path = run.run_dir / EVENTS_NAME
    while True:
        finished = not run.running()  # read before the files: what a finished child wrote is all there
        key = catalog.key_of(run.run_dir)
        if events_path.is_file():
            with events_path.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits for the next poll
            offset += len(complete)
            for line in complete.splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("kind") != "step":
                    continue
                data = dict(event.get("data") or {})
                data["episode_id"] = event.get("episode_id")
                if data.get("screenshot"):  # key None: the run folder is outside the served ones, no link
                    episode_id, index = str(event.get("episode_id")), int(data.get("index", 0))
                    data["screenshot_url"] = None if key is None else screenshot_url(key, episode_id, index)
                    data["picture_url"] = None if key is None else screenshot_url(key, episode_id, index, "picture.png")
                last = time.monotonic()
                yield {"event": "step", "data": _json(data)}
        for question in pending_questions(run.confirm_dir):
            if question.get("id") in asked:
                continue
            asked.add(str(question.get("id")))
            if question.get("screenshot"):
                question["screenshot_url"] = question_screenshot_url(run.run_id, str(question["id"]))
            last = time.monotonic()
            yield {"event": "approval", "data": _json(question)}
        if finished:
            yield {"event": (final := terminal_event(run, catalog.key_of(run.run_dir)))["event"], "data": _json(final["data"])}
            return
        if time.monotonic() - last > idle_s:
            yield {"event": "error", "data": _json({"message": "run timed out", "detail": f"no event for {idle_s:.0f} s"})}
            return
        await asyncio.sleep(POLL_S)


# --------------------------------------------------------------------------------------------------
# Routes
# --------------------------------------------------------------------------------------------------

router = APIRouter()


@router.post("/api/live", status_code=202)
def start_live(body: LiveRequest, ctx: Ctx) -> dict[str, str]:
    run = ctx.live.start(body)
    return {"run_id": run.run_id, "goal": run.goal, "events": f"/api/live/{run.run_id}/events"}


@router.get("/api/live/{run_id}/events")
async def live_events(run_id: str, request: Request, ctx: Ctx) -> EventSourceResponse:
    run = ctx.live.get(run_id)
    return EventSourceResponse(events(run, ctx.catalog, ctx.settings.stream_idle_s), ping=15)


@router.post("/api/live/{run_id}/approval")
def live_approval(run_id: str, body: Approve, ctx: Ctx) -> dict[str, Any]:
    run = ctx.live.get(run_id)
    waiting = pending_questions(run.confirm_dir)
    chosen = [q for q in waiting if body.question in (None, q.get("id"))]
    if not chosen:
        raise HTTPException(409, detail="no approval is waiting for an answer in this run")
    question_id = str(chosen[0]["id"])
    if not answer_question(run.confirm_dir, question_id, approve=body.approve, by="app"):
        raise HTTPException(409, detail="that question was answered already (or its wait ran out)")
    return {"question": question_id, "approve": body.approve}


@router.get("/api/live/{run_id}/questions/{question_id}/screenshot.png")
def question_screenshot(run_id: str, question_id: str, ctx: Ctx) -> FileResponse:
    run = ctx.live.get(run_id)
    base = run.confirm_dir.resolve()
    path = base / f"{question_id}.png"
    if not inside(base, path) or not path.is_file():
        raise NotServed(f"no screenshot for question '{question_id}'")
    return FileResponse(path.resolve(), media_type="image/png")


@router.get("/api/live")
def list_live(ctx: Ctx) -> list[dict[str, Any]]:
    return [
        {"run_id": r.run_id, "url": r.url, "goal": r.goal, "running": r.running(), "started_at": r.started_at,
         "run": ctx.catalog.key_of(r.run_dir)}
        for r in ctx.live.runs()
    ]  # fmt: skip


@router.get("/live")
def live_form(request: Request, ctx: Ctx) -> Response:
    runs = [(r, ctx.catalog.key_of(r.run_dir)) for r in ctx.live.runs()]
    return page(request, "live.html", runs=runs, max_live=ctx.settings.max_live, allow_hosts=ctx.settings.allow_hosts)


@router.get("/live/{run_id}")
def live_page(request: Request, run_id: str, ctx: Ctx) -> Response:
    run = ctx.live.get(run_id)
    return page(request, "live_run.html", run=run, key=ctx.catalog.key_of(run.run_dir))
