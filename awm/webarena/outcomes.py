"""How an action went, and the one way a browser failure is told apart from an action failure.

Why a module of its own: the session (`env.py`) runs the executor, and the executor reports with these
types; keeping them here lets both import them without importing each other.
"""

from __future__ import annotations

from pydantic import BaseModel

from awm.trajectory import Approval, StepOutcome


class ExecResult(BaseModel):
    """How an action went: `ok` or a failure class; `transient` failures are worth retrying as is."""

    outcome: StepOutcome = "ok"
    error: str = ""
    transient: bool = False
    note: str = ""  # what the executor did on the model's behalf (dismissed an overlay, used select_option)
    approval: Approval | None = None  # the confirmation gate's answer, when the action needed one


class RailsRefusal(Exception):
    """The rails refused an action of a live run (a field they never fill, leaving the site): the run
    ends with this reason (`refused`); the model is not asked to try something else."""


class EnvCrashError(RuntimeError):
    """The browser crashed, hung past the watchdog, or Playwright lost it; the episode ends `env_error`."""


_CRASH_MARKERS = (
    "Target page, context or browser has been closed",
    "Browser has been closed",
    "browser has disconnected",
    "Target crashed",
    "Connection closed",
    "has been closed",
    "Page crashed",
)


def looks_like_crash(message: str) -> bool:
    return any(marker.lower() in message.lower() for marker in _CRASH_MARKERS)
