"""A trajectory's abstract shape: (action type, target role, target label) per step, values kept apart.

Why: two episodes of the same task family differ in element ids (bids change with every page load)
and in typed values (a different username each time); what they share is the sequence of *kinds* of
actions on *kinds* of elements. Grouping, duplicate detection and placeholder naming all start here.
Element ids never enter the abstract sequence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from awm.errors import ActionParseError, DataError
from awm.trajectory import Step, TargetDesc, Trajectory
from awm.webarena.choice_lists import list_options

# Argument names that hold an element id: never part of an abstract step or a value.
ID_ARGS = frozenset({"bid", "element", "element_id", "elem", "id", "from_bid", "to_bid", "backend_node_id"})

# Argument names that hold the step's value, in the order they are preferred.
VALUE_ARGS = ("value", "text", "options", "option", "key_comb", "key", "url", "reason", "answer", "query")

# Actions with no element: their abstract step is the action alone.
TARGETLESS = frozenset(
    {
        "send_msg_to_user",
        "noop",
        "scroll",
        "goto",
        "go_back",
        "go_forward",
        "report_infeasible",
        "new_tab",
        "tab_close",
    }
)

# Actions that change only which part of the page is in view. A workflow does not keep them: each of
# its steps is grounded over the whole page, not the part in view (`workflow_run.page_elements`), and the
# browser scrolls the element a step acts on into view first (Playwright does so before every action),
# so what a scroll was for, bringing the next step's target into view, happens on replay without it. A
# kept scroll acted on no element and made its workflow not executable; it also split one procedure
# into two groups by whether the page happened to need scrolling.
VIEW_ONLY = frozenset({"scroll"})

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class AbstractStep:
    """One step without ids: what kind of action on what kind of element; `value` is kept apart."""

    action: str
    role: str
    label: str
    value: str
    thought: str
    page: str = ""  # the path of the page it acted on (no query, no fragment): where a procedure's parts end
    row: str = ""  # the text of the row, list item or card its element sat in (`TargetDesc.row`)
    options: tuple[str, ...] = ()  # a drop-down list's options as the step's observation showed them

    @property
    def key(self) -> tuple[str, str, str]:
        """The comparable part: case and whitespace do not make two steps different."""
        return (normalise(self.action), normalise(self.role), normalise(self.label))

    @property
    def target(self) -> TargetDesc:
        return TargetDesc(role=self.role, label=self.label)


@dataclass(frozen=True)
class AbstractTrajectory:
    """A trajectory reduced to its abstract steps; `signature` is what grouping compares."""

    trajectory_id: str
    scope: str
    goal: str
    steps: tuple[AbstractStep, ...]

    @property
    def signature(self) -> tuple[tuple[str, str, str], ...]:
        return tuple(step.key for step in self.steps)

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(step.value for step in self.steps)


def normalise(text: str) -> str:
    """Lower case, one space between words: the form used to compare labels and actions."""
    return _SPACE.sub(" ", text).strip().lower()


def _stringify(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ", ".join(_stringify(v) for v in value)
    if value is None:
        return ""
    return str(value)


def step_action(step: Step, *, where: str = "") -> dict[str, Any] | None:
    """The step's action as {"name", "args"}: the stored dict, else the executed string parsed safely.

    Returns None for a step that executed nothing (no action and no action string).
    """
    if step.action is not None:
        name = step.action.get("name")
        if not isinstance(name, str) or not name:
            raise DataError(f"{where}step {step.index}: field 'action.name' must be a non-empty string")
        args = step.action.get("args") or {}
        if not isinstance(args, dict):
            raise DataError(f"{where}step {step.index}: field 'action.args' must be an object")
        return {"name": name, "args": args}
    if step.action_str.strip():
        return parse_action_text(step.action_str, where=f"{where}step {step.index}")
    return None


def parse_action_text(text: str, *, where: str = "") -> dict[str, Any]:
    """Parse an executed action string with the project's safe parser (never eval) into {"name", "args"}.

    BrowserGym calls (``click('12')``) are tried first, then Mind2Web's ``CLICK [12]`` form.
    """
    from awm.actions import parse_action

    try:
        parsed = parse_action(text)
    except ActionParseError as browser_error:
        try:
            parsed = parse_action(text, action_set="mind2web")
        except ActionParseError:
            raise DataError(f"{where}: action {text!r} is not a valid action: {browser_error}") from None
    return {"name": parsed.action.name, "args": dict(parsed.action.args)}


def _without_defaults(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Drop optional arguments left at their default (``noop()``'s ``wait_ms=1000``): they are not task values."""
    from awm.actions import ACTION_SETS

    for specs in ACTION_SETS.values():
        spec = specs.get(name)
        if spec is not None:
            defaults = {a.name: a.default for a in spec.args if not a.required}
            return {k: v for k, v in args.items() if not (k in defaults and defaults[k] == v)}
    return args


def action_value(action: dict[str, Any]) -> str:
    """The task-specific value of an action (typed text, chosen option, key, message), ids excluded."""
    args = _without_defaults(action["name"], action.get("args") or {})
    for name in VALUE_ARGS:
        if name in args and args[name] not in (None, ""):
            return _stringify(args[name])
    rest = [_stringify(v) for k, v in args.items() if k not in ID_ARGS and v not in (None, "")]
    return ", ".join(rest)


def abstract_step(step: Step, *, where: str = "") -> AbstractStep | None:
    """The abstract form of one step, or None if the step executed nothing or failed.

    Failed steps (outcome other than ``ok``) are dropped: they are noise a workflow should not teach.
    A `run_workflow` call is dropped too: its sub-steps are steps of the trajectory and teach instead;
    so is a scroll (`VIEW_ONLY`).
    """
    if step.outcome != "ok":
        return None
    action = step_action(step, where=where)
    if action is None:
        return None
    name = action["name"]
    if name == "run_workflow" or name in VIEW_ONLY:
        return None  # the call's sub-steps (recorded as steps of their own) hold what it did
    target = step.target if (step.target is not None and name not in TARGETLESS) else TargetDesc()
    return AbstractStep(
        action=name,
        role=target.role.strip(),
        label=_SPACE.sub(" ", target.label).strip(),
        value=action_value(action),
        thought=step.thought.strip(),
        page=urlsplit(step.url).path if step.url else "",
        row=_SPACE.sub(" ", target.row).strip(),
        options=offered_options(step, action),
    )


def offered_options(step: Step, action: dict[str, Any]) -> tuple[str, ...]:
    """The options of the drop-down list a ``select_option`` step chose in, as its observation showed
    them; () for any other step, or where the observation does not show them all (a long list cut)."""
    bid = (action.get("args") or {}).get("bid")
    if action["name"] != "select_option" or not isinstance(bid, str) or not step.observation:
        return ()
    shown = list_options(step.observation).get(bid)
    return tuple(shown.options) if shown is not None and shown.options else ()


def superseded(steps: list[Step]) -> set[int]:
    """Indexes of state-setting steps (fill, select, check...) that a later successful step of the same
    action on the same element (same id: ids hold within one episode) repeats: the later one decides
    the state. Why: an episode that filled two fields and then ran a workflow that fills them again
    taught 'fill, fill, fill, fill, click' as a second workflow."""
    from awm.actions import ACTION_SETS

    browser = ACTION_SETS["browser"]
    seen: set[tuple[str, str]] = set()
    out: set[int] = set()
    for step in reversed(steps):
        if step.outcome != "ok" or step.action is None:
            continue
        name, args = step.action.get("name"), step.action.get("args") or {}
        spec = browser.get(name) if isinstance(name, str) else None
        if spec is None or not spec.sets_state or not isinstance(args, dict) or "bid" not in args:
            continue
        key = (str(name), str(args["bid"]))
        if key in seen:
            out.add(step.index)
        seen.add(key)
    return out


def abstract_trajectory(trajectory: Trajectory) -> AbstractTrajectory:
    """Reduce a trajectory to its executed, successful steps without element ids (superseded
    state-setting steps dropped, see `superseded`)."""
    where = f"trajectory {trajectory.trajectory_id}: "
    dropped = superseded(trajectory.steps)
    found = (abstract_step(step, where=where) for step in trajectory.steps if step.index not in dropped)
    steps = tuple(s for s in found if s is not None)
    return AbstractTrajectory(
        trajectory_id=trajectory.trajectory_id,
        scope=trajectory.task.scope,
        goal=trajectory.task.goal.strip(),
        steps=steps,
    )
