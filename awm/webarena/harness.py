"""The episode loop: decide -> parse -> execute -> feedback -> observe, with typed failures and one config.

Each step runs four checked stages. Parse: the model's text becomes one typed action or a precise error,
fed back once; an action on the wrong kind of element (fill on a button) is such an error. Execute: the
target is checked before acting; transient errors are retried inside the step, structural ones go back
to the model. Feedback: what changed on the page, or the failure verbatim, plus a
nudge when the same action repeats on an unchanged page. Observe: a fresh page, ids from that page only.
The trace callback runs after every step in a `finally`, whatever happened.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from awm.actions import RUN_WORKFLOW, Action, ids_for_roles, parse_action, render_action
from awm.errors import ActionParseError, LLMError, PromptTooLargeError
from awm.gate import ControlInfo
from awm.grounding.executor import ExecutorConfig
from awm.memory.view import MemoryView
from awm.rails import RailsError
from awm.secrets import Secrets
from awm.trajectory import VALUE_ACTIONS, EpisodeEnd, Step, StepOutcome, Task, Trajectory, repeats_of
from awm.webarena.absence_check import contradicted_absence
from awm.webarena.env import BrowserSession, PageState, agent_ends, is_live
from awm.webarena.executor import read_control
from awm.webarena.fingerprint import describe_changes, new_text, render_changes
from awm.webarena.outcomes import EnvCrashError, ExecResult, RailsRefusal
from awm.webarena.workflow_run import CallableWorkflow, callable_workflows, catalog, run_workflow


class Decision(BaseModel):
    """One policy answer: the raw text (parsed by the harness, never executed as is) and its cost.

    `workflows` names the workflows this answer's prompt carried (after budget fitting); `prompt_hash`
    identifies the exact prompt and `prompt` holds its messages (what the episode viewer shows). All are
    recorded on the step (and the workflows on the trajectory) by the harness."""

    text: str
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the server reused from its prefix cache
    completion_tokens: int = 0
    llm_ms: float = 0
    llm_calls: int = 1
    prompt_hash: str = ""
    prompt: list[dict[str, str]] = Field(default_factory=list)
    workflows: list[str] = Field(default_factory=list)
    guidance: list[str] = Field(default_factory=list)  # the guidance filters that changed what it offered


class DecisionContext(BaseModel):
    """Everything a policy may look at to decide one step."""

    task: Task
    page: PageState
    history: list[Step]
    feedback: str
    retry_error: str = ""  # the exact parse error when the harness asks again
    step_index: int


class Policy(Protocol):
    """Decides each step. `memory` is the immutable view the driver chose before the episode (None:
    memory off); the harness records it on the trajectory."""

    name: str
    memory: MemoryView | None

    def decide(self, ctx: DecisionContext) -> Decision: ...


class HarnessConfig(BaseModel):
    """Every limit of an episode in one place (the one episode timeout, too)."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int = 10
    max_parse_retries: int = 1
    transient_retries: int = 2
    transient_backoff_s: float = 0.3
    loop_repeat_nudge: int = 2
    loop_repeat_stop: int = 3
    # A value that already went into a field this episode, typed or chosen into that field again
    # `repeat_stop` times (`awm.trajectory.repeat_key`), on any page, ends the episode as stuck.
    # Measured before it (bench_demo at 645df65): on the main job's off arm 2 of 6 episodes repeated
    # themselves and spent 10 of its 38 model steps, 217 of its 569 s, from the first
    # repeat on, solving none; on the forum and the live pages with guidance off 8 more, none solved.
    # Telling the model at the first repeat and ending at the second (tried at 0ca3c35) cost more: the
    # told model went on for more steps (15 after a repeat, 40 in all) and solved none either.
    repeat_stop: int = Field(default=1, ge=1)
    episode_timeout_s: float = 300
    role_checks: bool = True  # refuse e.g. fill() on a button at parse time (see `page_targets`)
    # Refusals of the rails fed back before the next one ends the run (`_slip`): a value typed into a
    # password field, a link off the site. Each is still refused; only the run goes on.
    slips_fed_back: int = Field(default=1, ge=0)
    workflow_executor: ExecutorConfig = ExecutorConfig()  # how `run_workflow` grounds and retries its steps


class StepCapture(BaseModel):
    """What a recorder keeps of the page a step decided on, beside the step: its screenshot (PNG) and
    its HTML (`PageState.html`: elements carry their BrowserGym ``bid``, the ids actions name). Either
    is None where it was not taken (`[browser] screenshots`, `[browser] pages`).

    The one thing that travels with a step from the harness to the recorder, in process, through a
    worker's pipe (pickled) or from a Ray task."""

    png: bytes | None = None
    html: str | None = None
    final: bool = False  # the page after the episode's last action, not a step's page (`FinalCallback`)

    @classmethod
    def of(cls, page: PageState | None, *, final: bool = False) -> StepCapture | None:
        """The page's screenshot and HTML, made now (None: no page, or nothing taken)."""
        if page is None:
            return None
        # PNG encoding (~30 ms a page) and the HTML happen here, and only when someone records the step.
        capture = cls(png=page.screenshot_png(), html=page.html(), final=final)
        return capture if capture.png is not None or capture.html is not None else None


StepCallback = Callable[[Trajectory, Step, StepCapture | None], None]
# Called once as an episode ends, with the page after its last action (the end state a failed episode
# never showed in a step's picture); a recorder keeps it as the episode's final frame.
FinalCallback = Callable[[Trajectory, StepCapture], None]


# --------------------------------------------------------------------------------------------------
# Failure classes: the loop catches these and turns them into the step's outcome and the episode's end
# --------------------------------------------------------------------------------------------------


class StepFailure(Exception):
    """A step failed with `outcome`; when `end` is set the episode ends that way after the step is
    recorded, otherwise the error is the next step's feedback and the episode goes on."""

    outcome: StepOutcome = "action_error"
    end: EpisodeEnd | None = None


class Unparsable(StepFailure):
    """The model's answer is still not one valid action after the fed-back retry."""

    outcome = "parse_error"


class ContextOverflow(StepFailure):
    """The page does not fit the context window: not the model's fault nor a broken backend."""

    outcome, end = "context_overflow", "budget_exhausted"


class ModelUnavailable(StepFailure):
    """The model could not be reached after the client's retries."""

    outcome, end = "llm_error", "llm_error"


class NoProgress(StepFailure):
    """The same action on an unchanged page, again: the loop stop."""

    outcome, end = "no_progress", "stuck"


class RailsStop(StepFailure):
    """The rails ended a live run: a second slip (`HarnessConfig.slips_fed_back`), or a page off the site
    at the start of a step. The reason names the field or the domain."""

    outcome, end = "refused", "refused"


class BrowserCrashed(StepFailure):
    """The browser crashed or hung past the watchdog."""

    outcome, end = "env_error", "env_error"


class EpisodeOver(Exception):
    """Not a failure: the page or the agent ended the episode (`done`, `answered`, `infeasible`)."""

    def __init__(self, end: EpisodeEnd) -> None:
        super().__init__(end)
        self.end = end


def _max_steps(task: Task, config: HarnessConfig, session: BrowserSession, policy: Policy) -> int:
    override = task.meta.get("max_steps")
    steps = (
        int(override)
        if isinstance(override, int | float | str) and str(override).isdigit()
        else config.max_steps
    )
    own = getattr(policy, "max_steps", None)  # a policy that knows it has only so much to do (a replay)
    if isinstance(own, int):
        steps = min(steps, own)
    if session.rails is not None:  # a live run's hard budget: nothing asked for raises it
        steps = min(steps, session.rails.settings.max_steps)
    return steps


def _time_limit(config: HarnessConfig, session: BrowserSession) -> float:
    if session.rails is not None:
        return min(config.episode_timeout_s, session.rails.settings.max_seconds)
    return config.episode_timeout_s


class PageTargets(BaseModel):
    """Which ids each action may act on, and how each id is described, for one page.

    Why here: the agent's grammar and the harness's parser must hold actions to the same sets (a
    `fill` on a button is impossible under the grammar and refused, with the fix, by the parser).
    """

    ids_for: dict[str, list[str]]
    describe: dict[str, str]


def page_targets(page: PageState) -> PageTargets:
    """Per-action id sets from the page's element roles (`awm.actions.ids_for_roles`), plus descriptions."""
    roles = {bid: desc.role for bid, desc in page.elements.items()}
    describe = {
        bid: f"{desc.role} '{desc.label}'" if desc.label else desc.role
        for bid, desc in page.elements.items()
        if desc.role
    }
    return PageTargets(ids_for=ids_for_roles(roles, page.ids), describe=describe)


def _decide_and_parse(
    policy: Policy,
    ctx: DecisionContext,
    step: Step,
    config: HarnessConfig,
    trajectory: Trajectory,
    callables: dict[str, CallableWorkflow],
) -> Action:
    """Stage 1: ask, parse; on a parse error ask again with the exact error; `Unparsable` when still not."""
    retry_error = ""
    targets = page_targets(ctx.page) if config.role_checks else None
    for attempt in range(config.max_parse_retries + 1):
        asked = ctx.model_copy(update={"retry_error": retry_error}) if attempt else ctx
        started = time.perf_counter()
        try:
            decision = policy.decide(asked)
        except PromptTooLargeError as exc:
            raise ContextOverflow(str(exc)) from None
        except LLMError as exc:
            raise ModelUnavailable(str(exc)) from None
        finally:
            step.timings_ms["llm"] = step.timings_ms.get("llm", 0.0) + (time.perf_counter() - started) * 1000
        step.model_output = decision.text
        step.prompt_tokens += decision.prompt_tokens
        step.cached_prompt_tokens += decision.cached_prompt_tokens
        step.completion_tokens += decision.completion_tokens
        step.llm_calls += decision.llm_calls
        step.prompt_hash = decision.prompt_hash or step.prompt_hash
        step.prompt = decision.prompt or step.prompt
        step.guidance = decision.guidance or step.guidance
        for name in decision.workflows:
            if name not in trajectory.workflows_used:
                trajectory.workflows_used.append(name)
        try:
            parsed = parse_action(
                decision.text,
                page_ids=ctx.page.ids,
                ids_for=targets.ids_for if targets else None,
                describe=targets.describe if targets else None,
                workflows=catalog(callables) or None,
            )
        except ActionParseError as exc:
            retry_error = f"{exc.kind}: {exc}"
            step.error = retry_error
            continue
        step.thought = parsed.thought
        step.error = ""
        return parsed.action
    raise Unparsable(step.error)


def _contradicted_report(trajectory: Trajectory, action: Action, page: PageState) -> str | None:
    """The element the page shows that an infeasible report says is missing
    (`awm.webarena.absence_check`), where the agent ends the task itself; once per episode (a second
    report is taken as it is)."""
    if action.name != "report_infeasible" or not agent_ends(trajectory.task):
        return None
    if any(s.action and s.action.get("name") == "report_infeasible" for s in trajectory.steps):
        return None
    return contradicted_absence(str(action.args.get("reason", "")), page)


def _execute(session: BrowserSession, action: Action, config: HarnessConfig) -> ExecResult:
    """Stage 2: execute, retrying transient failures with backoff inside this step."""
    result = session.execute(action)
    for attempt in range(config.transient_retries):
        if not result.transient or result.outcome == "ok":
            break
        time.sleep(config.transient_backoff_s * (2**attempt))
        result = session.execute(action)
    return result


LIVE_REACTED = "If the page now shows the goal done, finish with"


# States that can be what a goal asks for (a tab opened, a box ticked); not expanded/collapsed (opening a
# dropdown is a means, and was taken as the goal done) or states lost.
GAINED_STATES = (" is now selected", " is now checked", " is now unchecked", " is now pressed")


def page_reaction(before: PageState, after: PageState, changes: list[str]) -> str:
    """What the page showed in answer to an action (`changes`: `describe_changes` of the two pages):
    states gained (selected, checked...) and the first lines of new text; '' when it only moved focus or
    echoed the agent's typing. Measured: a reminder to finish after a mere focus move made the model give
    up with report_infeasible."""
    if before.snapshot is None or after.snapshot is None:
        return ""
    states = [c for c in changes if c.endswith(GAINED_STATES) and not c.startswith("the value of")]
    shown = [*states, *new_text(before.snapshot, after.snapshot)]
    return "; ".join(shown)[:200]


def _changes(before: PageState, after: PageState) -> list[str] | None:
    """What changed between the two pages (None without snapshots)."""
    if before.snapshot is None or after.snapshot is None:
        return None
    return describe_changes(before.snapshot, after.snapshot)


def _feedback(result: ExecResult, changes: list[str] | None, nudge: str, *, reaction: str = "") -> str:
    """Stage 3: what the action did (the page diff), the failure verbatim, what we did on its behalf.
    On a live page that reacted (`reaction`), the finishing action is written out with what the page
    showed: a small model copies what it is shown (told "send_msg_to_user('the answer')", it sent
    'the answer'), so it is shown the right text."""
    parts: list[str] = []
    if result.outcome != "ok":
        parts.append(f"{result.outcome}: {result.error}")
    if result.note:
        parts.append(result.note)
    if changes is not None:
        parts.append("Page: " + render_changes(changes))
    if nudge:
        parts.append(nudge)
    if reaction:
        parts.append(f"{LIVE_REACTED} {finish_action(reaction)}")
    return " ".join(parts)


def finish_action(reaction: str) -> str:
    """`send_msg_to_user('<what the page showed>')`, quoted as the parser reads it."""
    return render_action(Action(name="send_msg_to_user", args={"text": reaction}))


def run_episode(
    session: BrowserSession,
    policy: Policy,
    task: Task,
    config: HarnessConfig,
    *,
    on_step: StepCallback | None = None,
    on_final: FinalCallback | None = None,
    trajectory_id: str | None = None,
) -> Trajectory:
    """Solve one task with `policy` on `session` under `config`'s limits: the one way an episode runs.

    Every step is recorded and handed to `on_step`, whatever happens; `on_final` gets the page after
    the last action once the episode ends (not when the page never opened or the browser broke). The
    trajectory holds a copy of the task with the page's goal, and the memory view the policy was given
    (scope and version).
    """
    started = time.monotonic()
    view = getattr(policy, "memory", None)
    trajectory = Trajectory(
        trajectory_id=trajectory_id or uuid.uuid4().hex[:12],
        task=task,
        model=getattr(policy, "name", ""),
        memory_scope=view.scope if view is not None else None,
        memory_version=view.version if view is not None else None,
    )
    if view is not None and view.versions:
        trajectory.meta["memory_versions"] = dict(view.versions)
    end: EpisodeEnd = "max_steps"
    feedback = ""
    seen: dict[tuple[str, str], int] = {}
    session.last_page = None  # no page of an earlier episode passes for this one's final page
    try:
        page = session.reset(task)
    except EnvCrashError as exc:
        step = Step(index=0, outcome="env_error", error=str(exc))
        _record(trajectory, step, None, on_step)
        return _finish(trajectory, "env_error", session, started)
    except RailsError as exc:  # the start URL itself is refused: no page was opened
        step = Step(index=0, outcome="refused", error=str(exc))
        _record(trajectory, step, None, on_step)
        return _finish(trajectory, "refused", session, started)
    trajectory.task = task.model_copy(update={"goal": page.goal or task.goal})
    callables = callable_workflows(view, trajectory.task.goal)

    def record_sub(sub: Step, shown: PageState | None) -> None:
        _record(trajectory, sub, shown, on_step, session.secrets)

    time_limit = _time_limit(config, session)
    for _turn in range(_max_steps(task, config, session, policy)):  # model steps; a workflow's sub-steps do not count
        if time.monotonic() - started > time_limit:
            end = "timeout"
            break
        index = trajectory.steps[-1].index + 1 if trajectory.steps else 0
        step = Step(index=index, url=page.url, observation=page.text, fingerprint=page.fingerprint)
        shown = page  # the page this step decided on; its screenshot and HTML are made only for a recorder
        try:
            page, feedback = _run_step(
                session, policy, config, trajectory, step, page, feedback, seen, callables, record_sub
            )
        except EpisodeOver as over:
            end = over.end
            break
        except StepFailure as failure:
            step.outcome, step.error = failure.outcome, str(failure)
            if failure.end is not None:
                end = failure.end
                break
            page, feedback = _observe_after_failure(session, step)
        except EnvCrashError as exc:
            step.outcome, step.error = BrowserCrashed.outcome, str(exc)
            session.mark_broken()
            end = "env_error"
            break
        finally:
            _record(trajectory, step, shown, on_step, session.secrets)
    return _finish(trajectory, end, session, started, on_final)


def _observe_after_failure(session: BrowserSession, step: Step) -> tuple[PageState, str]:
    """After a failure that does not end the episode: a fresh page, and the error as feedback."""
    t0 = time.perf_counter()
    after = session.observe()
    step.timings_ms["observe"] = (time.perf_counter() - t0) * 1000
    step.feedback = f"{step.outcome}: {step.error}"
    return after, step.feedback


def _step_keys(steps: list[Step]) -> list[tuple[str, str]]:
    """(page fingerprint, action) of each model step that chose an action, in order."""
    return [(s.fingerprint, s.action_str) for s in steps if s.called_by is None and s.action_str]


def cycle_period(keys: list[tuple[str, str]], longest: int = 3) -> int:
    """The period k (2..`longest`) when the last 2k (page, action) keys are one cycle gone round twice
    (A-B-A-B: the page came back and the same actions followed), else 0.

    Why besides the repeat count: an action that toggles the page (a folder opened and shut) changes
    the page every step, so the same-page-same-action count needs six steps to see A-B-A-B; this sees it
    at the fourth. Period 1 is the repeat count's job (same action on an unchanged page).
    """
    for k in range(2, longest + 1):
        if len(keys) >= 2 * k and keys[-k:] == keys[-2 * k : -k] and len(set(keys[-k:])) == k:
            return k
    return 0


def _run_step(
    session: BrowserSession,
    policy: Policy,
    config: HarnessConfig,
    trajectory: Trajectory,
    step: Step,
    page: PageState,
    feedback: str,
    seen: dict[tuple[str, str], int],
    callables: dict[str, CallableWorkflow],
    record_sub: Callable[[Step, PageState | None], None],
) -> tuple[PageState, str]:
    """One step; returns the next page and feedback, or raises a failure class or `EpisodeOver`."""
    rails = session.rails
    if rails is not None:  # the domain check before the step
        rails.new_step()
        stop = rails.stop_reason(page.url)
        if stop:
            raise RailsStop(stop)
    ctx = DecisionContext(
        task=trajectory.task, page=page, history=list(trajectory.steps), feedback=feedback, step_index=step.index
    )
    action = _decide_and_parse(policy, ctx, step, config, trajectory, callables)
    step.action = action.model_dump(mode="json")
    step.action_str = render_action(action)
    bid = action.target_id
    if bid and bid in page.elements:
        step.target = page.elements[bid]
        step.box = page.box(bid)
    key = (page.fingerprint, step.action_str)
    repeats = seen.get(key, 0) + 1
    seen[key] = repeats
    if repeats >= config.loop_repeat_stop:
        raise NoProgress(f"repeated {step.action_str} {repeats} times on an unchanged page")
    keys = [*_step_keys(trajectory.steps), key]
    period = cycle_period(keys)
    if period:
        cycle = " -> ".join(action for _, action in keys[-period:])
        raise NoProgress(f"went round the same cycle twice ({cycle}): the page came back to where it was")
    nudge = ""
    if repeats >= config.loop_repeat_nudge:
        nudge = f"You repeated {step.action_str} with no change; try something else."
    # Only a value typed or chosen again: a click on the same control again may be a toggle (a folder
    # opened and shut, an option of a list added), which the page-state counts above judge.
    done_before = repeats_of(trajectory.steps, step) if (action.name in VALUE_ACTIONS) else 0
    if done_before >= config.repeat_stop:
        raise NoProgress(f"did {step.action_str} again: the same act already worked {done_before} time(s) this episode")
    if rails is not None:  # plan time: the field the model chose, read off the page now
        refusal = rails.field_refusal(action, _control_for(session, action))
        if refusal:
            return page, _slip(trajectory, step, config, refusal, FIELD_HINT)
    t0 = time.perf_counter()
    try:
        if action.name == RUN_WORKFLOW.name:
            result = _call_workflow(session, config, trajectory, step, action, callables[str(action.args["name"])], record_sub)
        elif (shown := _contradicted_report(trajectory, action, page)) is not None:
            result = ExecResult(
                outcome="action_error",
                error=f"not reported: the page has {shown}, which the reason says is missing; use or read "
                "it, or report again if it cannot do the task",
            )
        else:
            result = _execute(session, action, config)
    except RailsRefusal as refusal:  # right before the action: the field, an off-site goto
        hint = SITE_HINT.format(url=page.url) if action.name == "goto" else FIELD_HINT
        return page, _slip(trajectory, step, config, str(refusal), hint)
    step.timings_ms["execute"] = (time.perf_counter() - t0) * 1000
    step.outcome, step.error, step.approval = result.outcome, result.error, result.approval
    t0 = time.perf_counter()
    after = session.observe()
    step.timings_ms["observe"] = (time.perf_counter() - t0) * 1000
    changes = _changes(page, after)
    if rails is not None and result.outcome == "ok" and changes is not None:
        step.reaction = page_reaction(page, after, changes)
    step.feedback = _feedback(result, changes, nudge, reaction=step.reaction)
    if rails is not None:  # the domain check after the step
        stop = rails.stop_reason(after.url)
        if stop:
            feedback = _slip(trajectory, step, config, stop, SITE_HINT.format(url=page.url))
            session.return_to(page.url)
            rails.forgive_navigation()
            return session.observe(), feedback
    if action.name == "send_msg_to_user" and result.outcome == "ok":
        trajectory.final_answer = str(action.args.get("text", ""))
    if session.done:
        raise EpisodeOver("infeasible" if action.name == "report_infeasible" else "done")
    if session.truncated:  # the environment's limit, not the page: the task was not closed
        raise EpisodeOver("max_steps")
    if result.outcome == "ok" and action.name == "report_infeasible":
        raise EpisodeOver("infeasible")
    if result.outcome == "ok" and action.name == "send_msg_to_user":
        raise EpisodeOver("answered")
    return after, step.feedback


FIELD_HINT = (
    "Nothing was typed. Only a secret given for this run goes into a password field, as its placeholder "
    "from the goal (such as {password}); other values belong in other fields."
)
SITE_HINT = "The run stays on this site: the page is back at {url}. Find what the goal needs here."


def _slip(trajectory: Trajectory, step: Step, config: HarnessConfig, refusal: str, hint: str) -> str:
    """A refusal of the rails as feedback the model can act on: the step is `refused`, nothing reached the
    page (or the page was brought back), and the model is told why. The run ends (`RailsStop`) when the
    episode already had `config.slips_fed_back` refused steps: a repeated attempt is no slip.

    Why: on public demo sites with the password given as a secret, 8 of 16 runs ended `refused` after one
    or two steps on the model's own slip (the product's name typed into the password field; a footer link
    to another domain, which the route guard blocked), not on anything dangerous. Every protection holds:
    the value is never typed and no request leaves the site; only the run goes on."""
    earlier = sum(s.outcome == "refused" for s in trajectory.steps)
    if earlier >= config.slips_fed_back:
        raise RailsStop(f"{refusal} (refused again: {earlier + 1} refusals in this run)")
    step.outcome, step.error = "refused", refusal
    step.feedback = f"Refused: {refusal}. {hint}"
    return step.feedback


def _call_workflow(
    session: BrowserSession,
    config: HarnessConfig,
    trajectory: Trajectory,
    step: Step,
    action: Action,
    callable_workflow: CallableWorkflow,
    record_sub: Callable[[Step, PageState | None], None],
) -> ExecResult:
    """Stage 2 for `run_workflow`: its steps run as sub-steps (recorded as they happen, indexes after
    this step's); the result says how far it got, so the feedback tells the model where to go on."""
    params = action.args.get("params") or {}
    assert isinstance(params, dict)
    call = run_workflow(
        session,
        callable_workflow,
        {str(k): str(v) for k, v in params.items()},
        called_by=step.index,
        first_index=step.index + 1,
        config=config.workflow_executor,
        record=record_sub,
    )
    trajectory.workflow_calls.append(call)
    if call.completed:
        return ExecResult(outcome="ok", note=f"workflow {call.name!r} ran all {call.steps_total} steps")
    ran = f"workflow {call.name!r} ran {call.steps_run} of {call.steps_total} steps and stopped at {call.error}"
    if session.done:
        return ExecResult(outcome="ok", note=ran)
    return ExecResult(outcome="action_error", error=f"{ran}; continue with single actions")


def _record(
    trajectory: Trajectory,
    step: Step,
    page: PageState | None,
    on_step: StepCallback | None,
    secrets: Secrets | None = None,
) -> None:
    if secrets:  # a value typed for a `{name}` placeholder is recorded as the placeholder, everywhere
        step = secrets.redact_model(step)
    trajectory.steps.append(step)
    if len(trajectory.steps) > 1 and trajectory.steps[-2].index > step.index:
        # a model step is recorded after the sub-steps it called (which have the higher indexes)
        trajectory.steps.sort(key=lambda s: s.index)
    if on_step is not None:
        on_step(trajectory, step, StepCapture.of(page))


def _control_for(session: BrowserSession, action: Action) -> ControlInfo | None:
    """The element an action names, as the rails read it (None without one, or when it is gone)."""
    bid = action.target_id
    if bid is None:
        return None
    try:
        return read_control(session.page, bid)
    except EnvCrashError:
        return None


def _finish(
    trajectory: Trajectory,
    end: EpisodeEnd,
    session: BrowserSession,
    started: float,
    on_final: FinalCallback | None = None,
) -> Trajectory:
    trajectory = _finished(trajectory, end, session, started)
    final = session.last_page if end != "env_error" else None
    if final is not None:
        # The page after the last action (the loop observes after every step, so it is at hand): what the
        # judge reads (`evidence.final_page`) and the episode page shows as the episode's end state.
        trajectory.meta["final_observation"] = final.text
        trajectory.meta["final_url"] = final.url
    trajectory = session.secrets.redact_model(trajectory)
    capture = StepCapture.of(final, final=True) if on_final is not None else None
    if capture is not None and on_final is not None:
        on_final(trajectory, capture)
    return trajectory


def _finished(trajectory: Trajectory, end: EpisodeEnd, session: BrowserSession, started: float) -> Trajectory:
    trajectory.end = end
    trajectory.seconds = round(time.monotonic() - started, 3)
    if is_live(trajectory.task):
        # A user-named page has no reward: the judge decides, or the agent's own end is reported as such.
        if session.rails is not None:  # None: the start URL was refused before a page opened
            trajectory.meta["rails"] = session.rails.record()
        return trajectory
    if end != "env_error":
        session.validate_at_end()
    trajectory.verdict.reward = float(session.reward) if end != "env_error" else 0.0
    raw = session.info.get("task_info", {}).get("RAW_REWARD_GLOBAL") if end != "env_error" else None
    if isinstance(raw, int | float) or hasattr(raw, "item"):
        trajectory.verdict.raw_reward = float(raw)
    trajectory.meta.setdefault("env_info", _plain(session.info.get("task_info", {})))
    return trajectory


def _plain(value: Any) -> Any:
    """Keep only JSON-friendly parts of BrowserGym's info (it may hold numpy values)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    try:
        return value.item()  # numpy scalar
    except AttributeError:
        return str(value)
