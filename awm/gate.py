"""The confirmation gate of live runs: which actions need a person, and the people who can answer.

Why in code and not in the prompt: a model told "ask before you pay" can still click Pay; here the
executor asks `sensitive_reason` about every action right before it runs (a workflow's steps too), and a
sensitive one runs only if a `Gate` approves it. An action is sensitive for what it does, read off the
acted control itself: a click whose control's own text says one of the configured words (buy, pay,
order, checkout, delete, remove, send, post, publish, transfer, confirm, deactivate, ...); submitting a
form (its submit control, or Enter in one of its fields) whose own words say one of them or that takes a
payment card (a search form or a settings form is ordinary work); a fill of a field whose label, name,
placeholder, aria-label or id has a configured sensitive-field term (identity numbers by default; an
email, phone or address field is ordinary form work unless `sensitive_fields` names it). A checkbox,
radio button or switch is never sensitive for its words: its label names the item or setting it marks
("buy milk" on a to-do list is no purchase).

The gates: `DenyGate` when no person is there (every sensitive action is denied, and the model is told
so), `TerminalGate` for `awm run --confirm` (y/n, default no, silence past the timeout denies), and
`FolderGate` for the live application (`awm serve`): the run, a child process, writes each question to a
file; the page shows it with approve/deny buttons and the server writes the answer beside it. Every answer is an `Approval` that the
harness records on the step: who approved what, when, and what they were shown.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
import uuid
from pathlib import Path
from typing import IO, Protocol

from pydantic import BaseModel, ConfigDict

from awm.files import write_bytes_atomic, write_text_atomic
from awm.rails import FieldInfo, field_term, words_of
from awm.trajectory import Approval

# Actions that put a value into a field (the field rules apply), and those that press on a control.
FILL_ACTIONS = frozenset({"fill", "press", "select_option"})
CLICK_ACTIONS = frozenset({"click", "dblclick"})


class ControlInfo(FieldInfo, frozen=True):
    """What the executor reads off the element right before acting: the field attributes plus the
    element's tag, visible text (or value), and whether it belongs to a form and would submit it."""

    tag: str = ""
    text: str = ""
    in_form: bool = False
    submits: bool = False
    role: str = ""  # the element's ARIA role attribute ("switch", "checkbox"...), "" when it has none
    form_words: str = ""  # its form's id, name, action, aria-label, heading and its fields' names/autocomplete

    def describe(self) -> str:
        """A short description for a person: `<button> 'Delete account'`."""
        name = self.label or self.aria_label or self.text or self.placeholder or self.name or self.id
        kind = f"<{self.tag}{' type=' + self.type if self.type else ''}>" if self.tag else "element"
        return f"{kind} '{name[:80]}'" if name else kind


def sensitive_reason(
    action: str,
    control: ControlInfo,
    *,
    key: str = "",
    sensitive_fields: list[str],
    sensitive_clicks: list[str],
) -> str | None:
    """Why `action` on `control` needs a person's approval, or None. `key` is what `press` presses."""
    if action in CLICK_ACTIONS:
        if _is_toggle(control):
            return None  # its label names what it marks, not what clicking it does
        said = _says(control, sensitive_clicks)
        if said:
            return f"the control says {said!r}"
        if control.submits:
            purpose = _form_says(control, sensitive_clicks)
            if purpose:
                return f"it submits a form that says {purpose!r}"
    if action == "press" and control.in_form and key.strip().lower() == "enter":
        purpose = _form_says(control, sensitive_clicks)
        if purpose:
            return f"it submits a form that says {purpose!r} (Enter in a form field)"
    if action in FILL_ACTIONS:
        found = field_term(control, sensitive_fields)
        if found is not None:
            attribute, value, _word, term = found
            return f"the field is marked sensitive: its {attribute} {value!r} has {term!r}"
    return None


_TOGGLE_TYPES = frozenset({"checkbox", "radio"})
_TOGGLE_ROLES = frozenset({"checkbox", "radio", "switch", "menuitemcheckbox", "menuitemradio"})
# A form that takes a payment card pays, whatever its button says (autocomplete tokens and field names).
PAYMENT_FORM_WORDS = ("cc", "card", "cvv", "cvc", "payment", "billing")


def _is_toggle(control: ControlInfo) -> bool:
    return (control.tag == "input" and control.type in _TOGGLE_TYPES) or control.role in _TOGGLE_ROLES


def _form_says(control: ControlInfo, words: list[str]) -> str | None:
    """The first sensitive word, or payment word, among the words of the control's form."""
    wanted = {w.lower() for w in [*words, *PAYMENT_FORM_WORDS] if w.strip()}
    return next((w.lower() for w in words_of(control.form_words) if w.lower() in wanted), None)


def _says(control: ControlInfo, words: list[str]) -> str | None:
    """The first sensitive word that is a whole word of the control's text, label or aria-label."""
    wanted = {w.lower() for w in words if w.strip()}
    for text in (control.text, control.label, control.aria_label, control.name if control.tag == "input" else ""):
        for word in words_of(text):
            if word.lower() in wanted:
                return word.lower()
    return None


class GateRequest(BaseModel):
    """What a person is asked about: the action, why it needs them, the element, the value, the page."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    action: str
    reason: str
    element: str
    value: str = ""
    url: str = ""
    screenshot_png: bytes | None = None
    label: str = ""  # names the request in files and messages (the episode and step)

    def approval(self, approved: bool, approver: str, screenshot: str = "") -> Approval:
        return Approval(
            approved=approved, approver=approver, reason=self.reason, action=self.action,
            element=self.element, value=self.value, url=self.url, screenshot=screenshot,
        )  # fmt: skip


class Gate(Protocol):
    """Answers one request; must always answer (a gate that cannot ask a person denies)."""

    def ask(self, request: GateRequest) -> Approval: ...


class DenyGate:
    """No person is watching: every sensitive action is denied (run with --confirm to be asked)."""

    def ask(self, request: GateRequest) -> Approval:
        return request.approval(False, "nobody")


class TerminalGate:
    """Asks on the terminal: shows the action, element, value and a saved screenshot, reads y/n.

    Anything but y/yes denies, and so does no answer within `timeout_s` or a closed input. Why `select`
    on the input and not `input()`: a run left unattended must not wait forever on a prompt.
    """

    def __init__(
        self,
        timeout_s: float,
        *,
        shots_dir: Path | None = None,
        input_stream: IO[str] | None = None,
        output: IO[str] | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.shots_dir = shots_dir
        self.input = input_stream or sys.stdin
        self.output = output or sys.stderr

    def ask(self, request: GateRequest) -> Approval:
        shot = self._save(request)
        lines = [
            "",
            f"The agent wants to: {request.action}",
            f"  why a person must approve: {request.reason}",
            f"  element: {request.element}",
        ]
        if request.value:
            lines.append(f"  value: {request.value!r}")
        if request.url:
            lines.append(f"  page: {request.url}")
        if shot:
            lines.append(f"  screenshot: {shot}")
        # A whole line: under a Rich progress bar, output is shown line by line (a bare prompt would hide).
        lines.append(f"Allow it? [y/N] (no answer in {self.timeout_s:.0f} s denies)\n")
        self.output.write("\n".join(lines))
        self.output.flush()
        answer = self._read_line()
        if answer is None:
            self.output.write("no answer: denied\n")
            self.output.flush()
            return request.approval(False, "timeout", shot)
        return request.approval(answer.strip().lower() in ("y", "yes"), "terminal", shot)

    def _read_line(self) -> str | None:
        """One line from the input, or None after the timeout or at end of input."""
        try:
            ready, _, _ = select.select([self.input], [], [], self.timeout_s)
        except (ValueError, OSError, TypeError):  # no file descriptor (a StringIO): read what is there
            ready = [self.input]
        if not ready:
            return None
        line = self.input.readline()
        return line if line else None

    def _save(self, request: GateRequest) -> str:
        if self.shots_dir is None or not request.screenshot_png:
            return ""
        name = "".join(c if c.isalnum() or c in "-_" else "-" for c in (request.label or "request"))
        # One file per question: each Approval keeps pointing at what that person was shown.
        path = Path(self.shots_dir) / f"{name}-{uuid.uuid4().hex[:8]}.png"
        write_bytes_atomic(path, request.screenshot_png)
        return str(path)


QUESTION_SUFFIX = ".question.json"
ANSWER_SUFFIX = ".answer.json"


def answer_question(folder: Path, question_id: str, *, approve: bool, by: str) -> bool:
    """Write the answer to one question, once: False when it was already answered (by a person, or by the
    run itself when its wait ran out). Exclusive by `os.link`, so two answers can never both count."""
    folder = Path(folder)
    final = folder / f"{question_id}{ANSWER_SUFFIX}"
    tmp = folder / f"{question_id}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.write_text(json.dumps({"approve": bool(approve), "by": by, "answered_at": time.time()}))
    try:
        os.link(tmp, final)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def read_answer(folder: Path, question_id: str) -> dict | None:
    path = Path(folder) / f"{question_id}{ANSWER_SUFFIX}"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class FolderGate:
    """Asks through a folder: `<id>.question.json` (and `<id>.png`, what the page showed) out, then waits
    for `<id>.answer.json` (`{"approve": true|false, "by": ...}`), polling every `poll_s`.

    Why files and not a socket: the run is a child process of `awm serve`, files survive either side
    restarting, and the question and its answer stay in the run folder as the record. No answer within
    `timeout_s` denies, and the gate writes that answer itself, so a late click finds it answered.
    """

    def __init__(self, folder: Path, timeout_s: float, *, poll_s: float = 0.2) -> None:
        self.folder = Path(folder)
        self.timeout_s = timeout_s
        self.poll_s = poll_s

    def ask(self, request: GateRequest) -> Approval:
        name = "".join(c if c.isalnum() or c in "-_" else "-" for c in (request.label or "request"))
        question_id = f"{name}-{uuid.uuid4().hex[:8]}"
        shot = ""
        if request.screenshot_png:
            shot = f"{question_id}.png"
            write_bytes_atomic(self.folder / shot, request.screenshot_png)
        question = {
            "id": question_id, "action": request.action, "reason": request.reason, "element": request.element,
            "value": request.value, "url": request.url, "screenshot": shot, "asked_at": time.time(),
            "timeout_s": self.timeout_s,
        }  # fmt: skip
        write_text_atomic(self.folder / f"{question_id}{QUESTION_SUFFIX}", json.dumps(question))
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            answer = read_answer(self.folder, question_id)
            if answer is not None:
                return self._approval(request, answer, shot)
            time.sleep(self.poll_s)
        answer_question(self.folder, question_id, approve=False, by="timeout")
        return self._approval(request, read_answer(self.folder, question_id) or {}, shot)

    def _approval(self, request: GateRequest, answer: dict, shot: str) -> Approval:
        by = str(answer.get("by") or "timeout")
        path = str(self.folder / shot) if shot else ""
        return request.approval(answer.get("approve") is True, by, path)
