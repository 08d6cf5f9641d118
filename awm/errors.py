"""Errors a user can cause: one base class so the CLI can print a clear sentence and exit 2.

Anything that is *not* an `AwmError` is a bug and keeps its traceback.
"""

from __future__ import annotations


class AwmError(Exception):
    """A problem the user can fix; the message says what was expected and what to do."""

    exit_code = 2


class ConfigError(AwmError):
    """Bad or missing configuration (unknown backend, missing key, wrong model file...)."""


class SetupError(AwmError):
    """A required asset (model file, Chromium, tiktoken cache...) is missing or corrupt."""


class LLMError(AwmError):
    """A model call failed for good: retries exhausted, endpoint unreachable, or a non-retryable answer."""


class PromptTooLargeError(AwmError):
    """The irreducible part of a request does not fit the model's context window."""


class ActionParseError(AwmError):
    """Model output is not exactly one whitelisted action with literal arguments.

    `kind` is a short machine-readable class (``syntax``, ``no_action``, ``multiple_actions``,
    ``unknown_action``, ``wrong_arity``, ``bad_argument``, ``non_literal``, ``id_not_on_page``);
    the message is precise enough to be fed back to the model verbatim.
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class DataError(AwmError):
    """A data or log file is malformed; the message names the file, record and field."""


class WorkflowParseError(AwmError):
    """Workflow text could not be parsed; the message names the line and the reason."""


class StoreConflictError(AwmError):
    """A compare-and-swap on a memory scope's head lost the race (the head moved)."""


class StageError(AwmError):
    """A pipeline stage failed; the message names the stage and the cause."""
