"""Run grounded steps on a live page: ground, act, verify; recover by rule; explain every resolution.

The loop of one step: snapshot -> ground (exact, or the structural fallback during recovery) -> act
(3,000 ms action timeout) -> verify the step's postcondition (polled 0.1 s, up to 2 s). A failure is one
of three types, which the loop catches: `TargetNotFound`, `ActionFailed`, `VerifyFailed`. With recovery
on (at most `max_retries` = 2 per step), each has one remedy: a target not found gets a fresh snapshot
and the structural fallback; a click that another element intercepted gets an overlay dismissed (a
visible button saying x, Close, Accept, Accept all, Dismiss, Got it, OK or No thanks; 1,500 ms) and a
retry; a failed postcondition gets the target re-grounded inside its named form. Each retry counts as
a recovery. Nothing waits without a bound.

A library, not a test helper: the loop (`execute_step`) is written against a small `StepBackend`
(snapshot, act, verify, dismiss an overlay), so the same grounding, retries and recovery run the
suite's steps on a plain Playwright page (`PlaywrightBackend`, `run_step`) and a workflow's steps on a
BrowserGym session (`awm.webarena.workflow_run`), where acting goes through BrowserGym so its reward
sees every action.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from awm.grounding.ground import NoMatch, Resolution, ground_exact, ground_structural, norm
from awm.grounding.model import GroundedStep, SuiteTask, Target
from awm.grounding.postconditions import VERIFY_TIMEOUT_S, wait_for
from awm.grounding.snapshot import Element, locate, take_snapshot

FailureClass = Literal["target_not_found", "action_error", "verify_failed"]
DISMISS_WORDS = frozenset({"×", "x", "close", "accept", "accept all", "dismiss", "got it", "ok", "no thanks"})
MAX_RETRIES = 2


class ExecutorConfig(BaseModel):
    """Every limit of the grounded executor."""

    model_config = ConfigDict(extra="forbid")

    recovery: bool = True
    max_retries: int = MAX_RETRIES
    action_timeout_ms: int = 3000
    dismiss_timeout_ms: int = 1500
    verify_timeout_s: float = VERIFY_TIMEOUT_S
    resnapshot_wait_s: float = 0.7  # before the fresh snapshot of a target-not-found recovery

    @property
    def retries(self) -> int:
        return self.max_retries if self.recovery else 0


class StepFailed(Exception):
    """A grounded step failed; `failure` is its class."""

    failure: FailureClass = "action_error"


class TargetNotFound(StepFailed):
    failure = "target_not_found"


class ActionFailed(StepFailed):
    failure = "action_error"

    def __init__(self, message: str, *, intercepted: bool = False) -> None:
        super().__init__(message)
        self.intercepted = intercepted


class VerifyFailed(StepFailed):
    failure = "verify_failed"


class StepReport(BaseModel):
    """How one step went: attempts, recoveries, how its target was grounded, and any failure."""

    index: int
    ok: bool
    attempts: int = 0
    recoveries: int = 0
    grounding: list[str] = Field(default_factory=list)  # one explanation per attempt
    failure: FailureClass | None = None
    error: str = ""


class TaskReport(BaseModel):
    """One task run: success by its postcondition, steps completed, attempts and recoveries."""

    task_id: str
    variant: str
    success: bool
    steps_completed: int
    steps_total: int
    attempts: int
    recoveries: int
    failure: FailureClass | None = None
    error: str = ""  # "step N: <class>: <detail>" for a failed task
    steps: list[StepReport] = Field(default_factory=list)
    seconds: float = 0.0


LogFn = Callable[[dict[str, Any]], None]


class JsonlLog:
    """The run log of one task run: one JSON object per line, written as it happens."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("w", encoding="utf-8")

    def __call__(self, event: dict[str, Any]) -> None:
        self._file.write(json.dumps(event, ensure_ascii=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _act(page: Any, element: Element, step: GroundedStep, config: ExecutorConfig) -> None:
    locator = locate(page, element)
    timeout = config.action_timeout_ms
    try:
        if step.action == "click":
            locator.click(timeout=timeout)
        elif step.action == "fill":
            locator.fill(step.value or "", timeout=timeout)
        elif step.action == "select":
            locator.select_option(label=step.value or "", timeout=timeout)
        elif step.action == "check":
            locator.check(timeout=timeout)
        elif step.action == "press":
            locator.press(step.value or "Enter", timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - Playwright's errors are one class; we classify by text
        message = str(exc).splitlines()[0][:300]
        intercepted = "intercepts pointer events" in str(exc)
        raise ActionFailed(
            f"{step.action} on {element.describe()} failed: {message}"
            + (" (another element intercepts the click)" if intercepted else ""),
            intercepted=intercepted,
        ) from None


def dismiss_overlay(page: Any, config: ExecutorConfig) -> str | None:
    """Click a visible dismiss button (x, Close, Accept, ...); returns what was clicked, or None."""
    for element in take_snapshot(page):
        if element.role == "button" and element.visible and element.enabled:
            if norm(element.text or element.aria_label) in DISMISS_WORDS:
                try:
                    locate(page, element).click(timeout=config.dismiss_timeout_ms)
                except Exception:  # noqa: BLE001 - try the next candidate
                    continue
                return element.describe()
    return None


def ground_in_mode(elements: list[Element], target: Target, mode: str) -> Resolution:
    """Exact grounding. After a target was not found: exact on the fresh snapshot first (a late element
    may be there now), then the structural fallback. After a step's postcondition failed (``form``): the
    structural fallback inside the named form only, since exact grounding would pick the same element."""
    if mode == "form":
        if target.form is None:
            raise TargetNotFound("the target names no form to re-ground in")
        found: Resolution | NoMatch = ground_structural(elements, target)
    else:
        found = ground_exact(elements, target)
        if isinstance(found, NoMatch) and mode == "structural":
            found = ground_structural(elements, target)
    if isinstance(found, NoMatch):
        raise TargetNotFound(found.reason)
    return found


class StepBackend(Protocol):
    """Where grounded steps run: what the page offers, how to act on an element, how to check a step.

    `act` raises `ActionFailed` (or `TargetNotFound`); `verify` returns whether the step's own check
    holds (True when it has none); `dismiss_overlay` clicks a dismiss control and says which, or None.
    """

    def snapshot(self) -> list[Element]: ...

    def act(self, element: Element, step: Any) -> None: ...

    def verify(self, element: Element, step: Any) -> bool: ...

    def dismiss_overlay(self) -> str | None: ...


class PlaywrightBackend:
    """Grounded steps on a Playwright page: our DOM snapshot, Playwright actions, selector postconditions."""

    def __init__(self, page: Any, config: ExecutorConfig) -> None:
        self.page = page
        self.config = config

    def snapshot(self) -> list[Element]:
        return take_snapshot(self.page)

    def act(self, element: Element, step: GroundedStep) -> None:
        _act(self.page, element, step, self.config)

    def verify(self, element: Element, step: GroundedStep) -> bool:
        return step.post is None or wait_for(self.page, step.post, self.config.verify_timeout_s)

    def dismiss_overlay(self) -> str | None:
        return dismiss_overlay(self.page, self.config)


def run_step(page: Any, step: GroundedStep, index: int, config: ExecutorConfig, log: LogFn) -> StepReport:
    """Run one suite step on a Playwright page with recovery (see `execute_step`)."""
    return execute_step(PlaywrightBackend(page, config), step, step.target, index, config, log)


def execute_step(
    backend: StepBackend, step: Any, target: Target, index: int, config: ExecutorConfig, log: LogFn
) -> StepReport:
    """Ground `target`, act, verify, with recovery; the report says what happened (a failure is in the
    report, not raised). `step` is whatever the backend acts on (a suite step, a workflow step)."""
    report = StepReport(index=index, ok=False)
    mode = "exact"
    while True:
        report.attempts += 1
        try:
            elements = backend.snapshot()
            log({"event": "observe", "step": index, "elements": len(elements)})
            resolution = ground_in_mode(elements, target, mode)
            report.grounding.append(resolution.explain())
            backend.act(resolution.element, step)
            if not backend.verify(resolution.element, step):
                check = getattr(getattr(step, "post", None), "kind", "its check")
                raise VerifyFailed(f"the page did not show {check} within {config.verify_timeout_s:g} s")
        except StepFailed as failure:
            report.failure, report.error = failure.failure, str(failure)
            log({"event": "failure", "step": index, "class": failure.failure, "error": str(failure)})
            if report.recoveries >= config.retries:
                return report
            report.recoveries += 1
            remedy = _recover(backend, failure, config)
            mode = {"target_not_found": "structural", "action_error": mode, "verify_failed": "form"}[
                failure.failure
            ]
            log({"event": "recovery", "step": index, "class": failure.failure, "remedy": remedy})
            continue
        report.ok, report.failure, report.error = True, None, ""
        log({"event": "step_ok", "step": index, "grounding": report.grounding[-1]})
        return report


def _recover(backend: StepBackend, failure: StepFailed, config: ExecutorConfig) -> str:
    if isinstance(failure, TargetNotFound):
        time.sleep(config.resnapshot_wait_s)
        return "fresh snapshot, structural fallback"
    if isinstance(failure, ActionFailed) and failure.intercepted:
        dismissed = backend.dismiss_overlay()
        return f"dismissed overlay {dismissed}" if dismissed else "no overlay to dismiss; retry"
    if isinstance(failure, VerifyFailed):
        return "re-ground inside the named form"
    return "retry"


def run_task(page: Any, task: SuiteTask, url: str, config: ExecutorConfig, log: LogFn) -> TaskReport:
    """Open the task's page, run its steps in order, then check its success postcondition."""
    started = time.monotonic()
    page.goto(url, wait_until="load", timeout=10_000)
    steps: list[StepReport] = []
    failure: StepReport | None = None
    for index, step in enumerate(task.steps):
        report = run_step(page, step, index, config, log)
        steps.append(report)
        if not report.ok:
            failure = report
            break
    completed = sum(1 for s in steps if s.ok)
    success = failure is None and wait_for(page, task.success, config.verify_timeout_s)
    result = TaskReport(
        task_id=task.id,
        variant=task.variant,
        success=success,
        steps_completed=completed,
        steps_total=len(task.steps),
        attempts=sum(s.attempts for s in steps),
        recoveries=sum(s.recoveries for s in steps),
        steps=steps,
        seconds=round(time.monotonic() - started, 2),
    )
    if failure is not None:
        result.failure = failure.failure
        result.error = f"step {failure.index + 1}: {failure.failure}: {failure.error}"
    elif not success:
        result.failure, result.error = (
            "verify_failed",
            "every step ran, but the page does not show the task's result",
        )
    log(
        {
            "event": "task_success" if success else "task_failure",
            "task": task.id,
            "attempts": result.attempts,
            "recoveries": result.recoveries,
            "error": result.error,
        }
    )
    return result
