"""Run a workflow as one action on a BrowserGym page: ground each step, act through BrowserGym, check it.

Why here and not in the model's hands: a small model that reads a workflow as text does what it would
have done without it (measured: 12 ties out of 12 on the demo). Executed, a workflow that solved a task
once solves the next seed of it without a model call per step. The grounding rules, retries and
recovery are the grounded executor's (`awm.grounding.executor.execute_step`, the adversarial suite's
too); this module is its BrowserGym backend: elements come from the observation the model sees
(role + label per bid), actions go through `BrowserSession.execute` (so BrowserGym's reward sees every
one), and a step's check (`StepCheck`) is read off the next observation. Execution stops at the first
step that cannot be grounded, fails, or fails its check; the caller tells the model which and why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict

from awm.actions import Action, render_action
from awm.grounding.executor import (
    ActionFailed,
    ExecutorConfig,
    StepReport,
    TargetNotFound,
    execute_step,
    ground_in_mode,
)
from awm.grounding.ground import norm
from awm.grounding.model import Target
from awm.grounding.snapshot import Element
from awm.memory.composition import CompositionError, expand
from awm.memory.view import MemoryView
from awm.memory.workflow import (
    PLACEHOLDER,
    Workflow,
    WorkflowStep,
    bind_parameters,
    describes,
    instantiate,
    open_parameters,
)
from awm.trajectory import Approval, Step, StepOutcome, TargetDesc, WorkflowCall
from awm.webarena.choice_lists import chooses_by_value_only, list_offering
from awm.webarena.env import BrowserSession, PageState
from awm.webarena.fingerprint import shows_masked

# Workflow actions the executor can run, with the browser action each becomes (Mind2Web's names too,
# so an imported Mind2Web workflow runs on a live page).
EXECUTABLE_ACTIONS: dict[str, str] = {
    "click": "click",
    "dblclick": "dblclick",
    "hover": "hover",
    "fill": "fill",
    "clear": "clear",
    "select_option": "select_option",
    "check": "check",
    "uncheck": "uncheck",
    "press": "press",
    "focus": "focus",
    "select_text": "select_text",
    "drag": "drag",
    "CLICK": "click",
    "TYPE": "fill",
    "SELECT": "select_option",
}
_VALUE_ARG = {"fill": "value", "select_option": "options", "press": "key_comb"}
# Steps that end a task on no element: the answer of an information-seeking task, or the report that
# it cannot be done. Allowed as a workflow's last step (a demonstration of "find X and tell me" ends so).
ENDING_ACTIONS: dict[str, str] = {"send_msg_to_user": "text", "report_infeasible": "reason"}
_FAILURE_OUTCOME: dict[str, StepOutcome] = {
    "target_not_found": "target_not_found",
    "action_error": "action_error",
    "verify_failed": "action_error",
}


def not_executable(workflow: Workflow) -> str | None:
    """Why the executor cannot run this workflow (None: it can): an action it has no way to ground, or
    a step without a target role. An ending action (`ENDING_ACTIONS`) may close a workflow of other steps."""
    if not workflow.steps:
        return "it has no steps"
    for number, step in enumerate(workflow.steps, start=1):
        if step.action in ENDING_ACTIONS and number == len(workflow.steps) > 1:
            continue  # the answer after the steps that found it (an ending alone is no routine)
        if step.is_call:
            return f"step {number} calls {step.value!r}, which its memory version does not resolve"
        if step.action not in EXECUTABLE_ACTIONS:
            return f"step {number} is {step.action!r}, which acts on no element"
        if not step.target.role.strip():
            return f"step {number} names no target role"
    return None


class CallableWorkflow(BaseModel):
    """A workflow the agent may call in this episode: its values from the goal, and what is left open."""

    model_config = ConfigDict(frozen=True)

    workflow: Workflow  # as stored, its calls to other workflows expanded (`awm.memory.composition`)
    bound: dict[str, str]  # placeholder values read off the goal (`bind_parameters`)
    open: tuple[str, ...]  # parameters the call must give, in the workflow's order

    @property
    def name(self) -> str:
        return self.workflow.name


def callable_workflows(view: MemoryView | None, goal: str) -> dict[str, CallableWorkflow]:
    """The executable workflows of an episode's view, by name (empty unless the view's use is
    ``executable``). Binding is done once per episode: the goal is fixed, and the prompt, the grammar
    and the parser must all agree on which parameters a call gives."""
    if view is None or view.use != "executable":
        return {}
    library = {w.name: w for w in view.workflows}
    out: dict[str, CallableWorkflow] = {}
    for stored in view.workflows:
        try:
            workflow = expand(stored, library)  # a call to another workflow runs as that one's steps
        except CompositionError:
            continue
        if workflow.name in out or not_executable(workflow) is not None:
            continue
        bound = bind_parameters(workflow, goal)
        workflow = without_unasked_text(workflow, goal, bound)
        out[workflow.name] = CallableWorkflow(workflow=workflow, bound=bound, open=open_parameters(workflow, bound))
    return out


# Steps that type a text of their own into a field (not a choice among options, not a key).
TYPING_ACTIONS = frozenset({"fill", "TYPE"})


def without_unasked_text(workflow: Workflow, goal: str, bound: dict[str, str]) -> Workflow:
    """Another task family's workflow (its description does not match `goal` as a whole: `describes`)
    less the steps that type a text neither goal states: a value no placeholder of its description
    holds and `bound` leaves open, typed by a step of its own. Its own family's goal keeps every step.

    Why: the text was one the teaching task composed for its own ending ("close as a duplicate, with a
    comment that names the original": the comment "Duplicate of #13"); another goal that does not ask
    for it leaves the field as it is. Measured on the arena's Trac with site scope, close-ticket was
    shown close-duplicate's closing part with its comment left open; the call example asked for it as
    '...', and the 1.5B model typed '...' into the comment field by hand instead of closing the ticket.
    On any site, a note, a message or a gift card text that one task wrote is not another's to type;
    a value the goal does state (a name, a quoted title) is bound and stays. A description without
    placeholders (a hand-written or model-written workflow) says nothing of which values a goal states:
    its steps all stay."""
    if describes(workflow, goal) or not PLACEHOLDER.search(workflow.description):
        return workflow
    stated = set(PLACEHOLDER.findall(workflow.description)) | set(bound)
    uses: dict[str, int] = {}
    for step in workflow.steps:
        for name in set(step.placeholders()):
            uses[name] = uses.get(name, 0) + 1
    kept: list[WorkflowStep] = []
    dropped: set[str] = set()
    for step in workflow.steps:
        own = PLACEHOLDER.fullmatch(step.value.strip()) if step.action in TYPING_ACTIONS else None
        if own is not None and own.group(1) not in stated and uses[own.group(1)] == 1:
            dropped.add(own.group(1))
        else:
            kept.append(step)
    if not dropped or not kept:
        return workflow
    return workflow.model_copy(
        update={"steps": kept, "parameters": [p for p in workflow.parameters if p not in dropped]}
    )


def catalog(callables: dict[str, CallableWorkflow]) -> dict[str, list[str]]:
    """Name -> the parameters a call gives: what `parse_action` and `action_grammar` hold calls to."""
    return {name: list(c.open) for name, c in callables.items()}


def call_text(callable_workflow: CallableWorkflow) -> str:
    """How the prompt shows the call, with the open parameters to fill in."""
    params = ", ".join(f"{p!r}: '...'" for p in callable_workflow.open)
    return f"run_workflow({callable_workflow.name!r}, {{{params}}})"


def page_elements(page: PageState) -> list[Element]:
    """Every element of the observation's page as grounding sees them (role and label), in page order:
    also those the prompt's size budget left out. A workflow step is not read by the model, so the
    budget does not bind it, and a target below the fold is found where it is (the browser scrolls it
    into view to act on it): what a demonstration's scroll step was for (`abstraction.VIEW_ONLY`)."""
    out = []
    for bid, desc in page.elements.items():
        if not desc.role:
            continue
        out.append(Element(ref=bid, tag="", role=desc.role, text=desc.label, label=desc.label, row=desc.row))
    return out


def step_target(step: WorkflowStep) -> Target:
    """A workflow step's target for grounding: its role, its label as the text to match (exact text
    scores over a substring, so 'Password' does not pick 'Verify password') and its row's words."""
    label = " ".join(step.target.label.split())
    row = " ".join(step.target.row.split())
    return Target(role=step.target.role.strip(), text=label or None, row=row or None)


def starts_here(elements: list[Element], callable_workflow: CallableWorkflow) -> bool:
    """Whether the workflow's first step grounds among the page's `elements` (`page_elements`) as the
    executor grounds it after a recovery: exactly, else by the structural fallback
    (`awm.grounding.executor.ground_in_mode`). False only when neither finds the one element, so a call
    from here would break on its first step. A first step whose target still holds a value the call
    itself gives cannot be judged before the call, and counts as starting here; so does one that acts on
    no element (an ending)."""
    first = instantiate(callable_workflow.workflow, callable_workflow.bound).steps[0]
    if first.action in ENDING_ACTIONS or any(PLACEHOLDER.search(text) for text in (first.target.label, first.target.row)):
        return True
    try:
        ground_in_mode(elements, step_target(first), "structural")
    except TargetNotFound:
        return False
    return True


def step_action(step: WorkflowStep, bid: str) -> Action:
    """The typed browser action of a (filled-in) workflow step on element `bid`."""
    name = EXECUTABLE_ACTIONS[step.action]
    args: dict[str, Any] = {"bid": bid}
    if name in _VALUE_ARG:
        args[_VALUE_ARG[name]] = step.value or ("Enter" if name == "press" else "")
    return Action(name=name, args=args)


def _holds(page: PageState, bid: str, step: WorkflowStep) -> bool:
    check = step.post
    if check is None:
        return True
    if check.kind == "url_contains":
        return check.value in page.url
    if check.kind == "text_appears":  # anywhere on the page, also where the prompt's size budget cut it
        wanted = norm(check.value)
        shown = page.snapshot.shown.values() if page.snapshot is not None else ()
        return wanted in norm(page.text) or any(wanted in norm(line) for line in shown)
    control = page.snapshot.controls.get(bid) if page.snapshot is not None else None
    shown = (control.value or "") if control is not None else ""
    return shows_masked(shown, check.value) or norm(shown) == norm(check.value)


class SessionBackend:
    """`StepBackend` on a BrowserGym session: what the steps need of the page, and what each did."""

    def __init__(self, session: BrowserSession, config: ExecutorConfig, *, choose_by_value: bool = False) -> None:
        self.session = session
        self.config = config
        self.choose_by_value = choose_by_value  # a choice may go to the list offering its value
        self.page: PageState | None = None  # the page of the latest snapshot
        self.shown: PageState | None = None  # the page the current step first saw (its screenshot)
        self.action: Action | None = None
        self.note = ""
        self.approval: Approval | None = None  # the confirmation gate's answer on this step (live runs)
        self.chosen_in: tuple[str, str] | None = None  # (list, option) a choice went to instead (`list_offering`)

    def snapshot(self) -> list[Element]:
        self.page = self.session.observe()
        if self.shown is None:
            self.shown = self.page
        return page_elements(self.page)

    def act(self, element: Element, step: WorkflowStep) -> None:
        self.action = step_action(step, element.ref)
        self.chosen_in = None
        if self.choose_by_value and step.action in ("select_option", "SELECT") and self.page is not None:
            self.chosen_in = list_offering(self.page.text, element.ref, step.value)
            if self.chosen_in is not None:
                self.action = Action(name="select_option", args={"bid": self.chosen_in[0], "options": self.chosen_in[1]})
        result = self.session.execute(self.action)
        if result.transient and result.outcome != "ok":
            time.sleep(0.3)
            result = self.session.execute(self.action)
        self.note = result.note
        if self.chosen_in is not None:
            own = self.page.elements.get(element.ref) if self.page is not None else None
            there = self.page.elements.get(self.chosen_in[0]) if self.page is not None else None
            self.note = (
                f"chose '{self.chosen_in[1]}' in '{there.label if there else self.chosen_in[0]}': "
                f"'{own.label if own else element.ref}' offers no '{step.value}'; {self.note}"
            ).rstrip("; ")
        self.approval = result.approval or self.approval
        if result.outcome == "target_not_found":
            raise TargetNotFound(result.error)
        if result.outcome != "ok":
            raise ActionFailed(result.error, intercepted="intercept" in result.error)

    def verify(self, element: Element, step: WorkflowStep) -> bool:
        if step.post is None:
            # Nothing to check: the page the action left is observed once, by the next step's snapshot
            # (observing it here too cost every sub-step a second extraction of the page, ~0.3-1 s).
            return True
        deadline = time.monotonic() + self.config.verify_timeout_s
        bid = element.ref
        if self.chosen_in is not None:  # the choice went to another list: that one must hold the option
            bid = self.chosen_in[0]
            if step.post.kind == "value_is":
                step = step.model_copy(update={"post": step.post.model_copy(update={"value": self.chosen_in[1]})})
        while True:
            self.page = self.session.observe()
            if _holds(self.page, bid, step):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def dismiss_overlay(self) -> None:
        return None  # `execute_action` already dismissed an intercepting overlay once and retried


SubStepRecorder = Callable[[Step, PageState | None], None]


def describe_step(step: WorkflowStep) -> str:
    """``fill [textbox] Username`` : how a feedback line or a trace names a workflow step."""
    return f"{step.action} {step.target.render()}".strip()


def secret_named(value: str, secrets: Iterable[str]) -> str:
    """A call's value that holds a secret's placeholder among other words is that placeholder alone.

    Why: an arena goal says "As carol (password {password}), ..." and the model passed
    'password {password}' for the password: typed, that is neither the secret nor anything the page
    takes (a password field takes only a named secret), and the call broke at its second step three
    times in one episode. No value a task means holds a secret's placeholder and more."""
    held = [name for name in secrets if "{" + name + "}" in value]
    if len(held) == 1 and value.strip() != "{" + held[0] + "}":
        return "{" + held[0] + "}"
    return value


def run_workflow(
    session: BrowserSession,
    callable_workflow: CallableWorkflow,
    params: dict[str, str],
    *,
    called_by: int,
    first_index: int,
    config: ExecutorConfig,
    record: SubStepRecorder,
) -> WorkflowCall:
    """Run the workflow's steps in order on the session's page; each is recorded as a sub-step (index
    `first_index`, `first_index + 1`...) of the model step `called_by`. Stops at the first failure, or
    when the page ends the episode."""
    # Values read off the goal take the workflow's transforms; values the caller gives are typed as given.
    params = {name: secret_named(value, session.secrets.names) for name, value in params.items()}
    workflow = instantiate(instantiate(callable_workflow.workflow, callable_workflow.bound), params, transforms=False)
    call = WorkflowCall(
        step=called_by,
        name=workflow.name,
        params=dict(params),
        bound=dict(callable_workflow.bound),
        steps_total=len(workflow.steps),
    )
    secret = set(session.secrets.names)  # typed by the executor from the placeholder, never bound here
    choose_by_value = chooses_by_value_only(callable_workflow.workflow)
    for number, wstep in enumerate(workflow.steps):
        left = [name for name in wstep.placeholders() if name not in secret]
        if left:
            call.error = f"step {number + 1} ({describe_step(wstep)}): no value for {{{left[0]}}}"
            break
        backend = SessionBackend(session, config, choose_by_value=choose_by_value)
        started = time.perf_counter()
        if wstep.action in ENDING_ACTIONS:
            report = _end_task(backend, wstep, number)
        else:
            report = execute_step(backend, wstep, step_target(wstep), number, config, lambda _event: None)
        sub = _sub_step(first_index + number, called_by, workflow.name, wstep, backend, report)
        sub.timings_ms["execute"] = (time.perf_counter() - started) * 1000
        record(sub, backend.shown)
        if not report.ok:
            call.error = f"step {number + 1} of {call.steps_total} ({describe_step(wstep)}): {report.failure}: {report.error}"
            break
        call.steps_run += 1
        if session.done or session.truncated:
            break
    call.completed = call.steps_run == call.steps_total
    if not call.completed and not call.error:
        call.error = f"the page ended the episode after step {call.steps_run} of {call.steps_total}"
    return call


def _end_task(backend: SessionBackend, wstep: WorkflowStep, number: int) -> StepReport:
    """An ending step (`ENDING_ACTIONS`): the answer or the infeasible report, sent as the model sends it."""
    backend.snapshot()
    backend.action = Action(name=wstep.action, args={ENDING_ACTIONS[wstep.action]: wstep.value})
    result = backend.session.execute(backend.action)
    backend.note = result.note
    ok = result.outcome == "ok"
    return StepReport(index=number, ok=ok, failure=None if ok else "action_error", error=result.error)


def _sub_step(
    index: int, called_by: int, name: str, wstep: WorkflowStep, backend: SessionBackend, report: StepReport
) -> Step:
    shown = backend.shown
    action = backend.action
    denied = backend.approval is not None and not backend.approval.approved
    target = None
    if action is not None and shown is not None and action.target_id in shown.elements:
        target = shown.elements[action.target_id]
    return Step(
        index=index,
        url=shown.url if shown is not None else "",
        observation=shown.text if shown is not None else "",
        fingerprint=shown.fingerprint if shown is not None else "",
        thought=wstep.reasoning,
        action=action.model_dump(mode="json") if action is not None else None,
        action_str=render_action(action) if action is not None else "",
        target=target or TargetDesc(role=wstep.target.role, label=wstep.target.label, row=wstep.target.row),
        box=shown.box(action.target_id) if shown is not None and action is not None else None,
        outcome="ok" if report.ok else "denied" if denied else _FAILURE_OUTCOME.get(report.failure or "", "action_error"),
        error=report.error,
        feedback=backend.note,
        called_by=called_by,
        workflow=name,
        grounding="; ".join(report.grounding) or report.error,
        approval=backend.approval,
    )
