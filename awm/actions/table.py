"""The action table: every action's spec (one definition for prompt, parser, renderer and grammar), the sets,
and the typed `Action` that parsing yields and rendering consumes.

Two sets:
- ``browser``: BrowserGym 0.14.3 high-level functions (names and argument order as in
  ``browsergym/core/action/functions.py``; where BrowserGym has extra trailing parameters, e.g.
  ``fill(..., enable_autocomplete_menu)`` or ``click(..., modifiers)``, we expose the leading ones only).
  ``check``/``uncheck`` exist in BrowserGym but are not in its default ``HighLevelActionSet`` subsets;
  `browsergym_action_set()` (`awm.actions.browsergym`) builds the set that includes them, which the harness
  must use.
- ``mind2web``: AWM's Mind2Web answer format ``CLICK [id]``, ``TYPE [id] [value]``, ``SELECT [id] [value]``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from awm.errors import ConfigError

ActionSetName = Literal["browser", "mind2web"]
ArgValue = str | int | float | list[str] | dict[str, str]
ArgType = Literal["id", "str", "int", "float", "str_or_list", "params"]


@dataclass(frozen=True)
class ArgSpec:
    """One parameter. ``id`` is an element id (a BrowserGym bid or a Mind2Web backend node id)."""

    name: str
    type: ArgType
    required: bool = True
    default: ArgValue | None = None

    def signature(self) -> str:
        return self.name if self.required else f"{self.name}={self.default!r}"


@dataclass(frozen=True)
class ActionSpec:
    """One action: its parameters, a short description for the prompt, example argument values, and
    its properties: `sets_state` (right after it succeeds, the same action on the same element changes
    nothing: a field's text, a box's tick, focus), `needs_interactable` (its target must be visible and
    enabled before BrowserGym tries it), and `benchmarks` (where it is offered; empty: everywhere that
    offers the whole set)."""

    name: str
    args: tuple[ArgSpec, ...]
    description: str
    example: dict[str, ArgValue]
    sets_state: bool = False
    needs_interactable: bool = False
    benchmarks: frozenset[str] = frozenset()

    @property
    def id_arg(self) -> str | None:
        return next((a.name for a in self.args if a.type == "id"), None)

    def signature(self) -> str:
        return f"{self.name}({', '.join(a.signature() for a in self.args)})"


# Placeholders in examples are never ids a real page could have: BrowserGym bids are lowercase letters
# and digits, Mind2Web ids are digits.
BID_PLACEHOLDER = "BID"
ID_PLACEHOLDER = "ID"

_BID = ArgSpec("bid", "id")


# MiniWoB++ pages are one tab with no answer box: tab, URL and chat actions only add prompt tokens
# and ways to go wrong, so only the actions marked with it are offered there.
_MINIWOB = frozenset({"miniwob"})
# A live page (a user-named URL) and an arena site: the page actions a small model uses well, plus the two
# ways it ends the task itself (the answer/finish message, or saying the site cannot do it), and going
# back; no tabs, URLs or waiting.
_LIVE_PAGE = frozenset({"miniwob", "live", "sites"})
_LIVE_END = frozenset({"live", "sites"})


def _browser(
    name: str,
    args: tuple[ArgSpec, ...],
    description: str,
    *,
    sets_state: bool = False,
    needs_interactable: bool = False,
    benchmarks: frozenset[str] = frozenset(),
    **example: ArgValue,
) -> ActionSpec:
    if any(a.type == "id" for a in args):
        example = {"bid": BID_PLACEHOLDER, **example}
    return ActionSpec(name, args, description, example, sets_state, needs_interactable, benchmarks)


BROWSER_ACTIONS: tuple[ActionSpec, ...] = (
    # A left click only: offered `button=`, the 1.5B model answered click('20', button='right') on a
    # dialog's Close button three episodes in a row (click-dialog, 0 of 3); no task we run needs another.
    _browser("click", (_BID,), "click an element", needs_interactable=True, benchmarks=_LIVE_PAGE),
    # Not offered on MiniWoB++ pages: no task of the development split needs them, and under the role-aware
    # grammar they were what came out when the action the model wanted was not allowed (dblclick on a
    # filled password field, repeated until the loop stop; hovers repeated on menus).
    _browser("dblclick", (_BID,), "double-click an element", needs_interactable=True),
    # Offered on a live page, where a menu may open only under the mouse (the arena's sites need none).
    _browser(
        "hover", (_BID,), "move the mouse over an element (opens a menu shown on hover)", sets_state=True,
        needs_interactable=True, benchmarks=frozenset({"live"}),
    ),  # fmt: skip
    _browser(
        "fill",
        (_BID, ArgSpec("value", "str")),
        "replace the text of an input field",
        value="Seattle",
        sets_state=True,
        needs_interactable=True,
        benchmarks=_LIVE_PAGE,
    ),
    _browser(
        "clear",
        (_BID,),
        "empty an input field",
        sets_state=True,
        needs_interactable=True,
        benchmarks=_MINIWOB,
    ),
    _browser(
        "select_option",
        (_BID, ArgSpec("options", "str_or_list")),
        "choose option(s) of a <select> by label or value",
        options="Blue",
        sets_state=True,
        needs_interactable=True,
        benchmarks=_LIVE_PAGE,
    ),
    _browser(
        "check",
        (_BID,),
        "make sure a checkbox or radio button is checked",
        sets_state=True,
        needs_interactable=True,
        benchmarks=_LIVE_PAGE,
    ),
    _browser(
        "uncheck",
        (_BID,),
        "make sure a checkbox is unchecked",
        sets_state=True,
        needs_interactable=True,
        benchmarks=_LIVE_PAGE,
    ),
    _browser(
        "press",
        (_BID, ArgSpec("key_comb", "str")),
        "focus an element and press keys such as 'Enter' or 'Control+a'",
        key_comb="Enter",
        benchmarks=_LIVE_PAGE,
    ),
    _browser("focus", (_BID,), "focus an element", sets_state=True, benchmarks=_MINIWOB),
    # Offered only when the goal asks to highlight or select text (`awm.goal_values.asks_to_select_text`):
    # the page's text blocks then carry ids, and they take this action alone. Done as a person does it,
    # a mouse drag over the element's box (`awm.webarena.executor`).
    _browser("select_text", (_BID,), "highlight all the text of an element, as a mouse drag over it does"),
    # Offered only when the goal asks to drag something (`awm.goal_values.asks_to_drag`).
    _browser(
        "drag",
        (_BID, ArgSpec("direction", "str")),
        "drag an element left, right, up or down with the mouse, or onto another element (its id)",
        direction="left",
    ),
    _browser(
        "scroll",
        (ArgSpec("delta_x", "float"), ArgSpec("delta_y", "float")),
        "scroll the page by pixels (positive: right/down)",
        delta_x=0,
        delta_y=300,
        benchmarks=_LIVE_PAGE,
    ),
    _browser("go_back", (), "go back to the previous page", benchmarks=_LIVE_END),
    _browser("go_forward", (), "go forward to the next page"),
    _browser("goto", (ArgSpec("url", "str"),), "open a URL", url="https://example.com"),
    _browser("new_tab", (), "open a new tab"),
    _browser("tab_close", (), "close the current tab"),
    _browser("tab_focus", (ArgSpec("index", "int"),), "switch to the tab at this index (from 0)", index=0),
    _browser(
        "send_msg_to_user",
        (ArgSpec("text", "str"),),
        "send a message to the user, e.g. the answer to their question",
        benchmarks=_LIVE_END,
    ),
    _browser(
        "report_infeasible",
        (ArgSpec("reason", "str"),),
        "say the task cannot be done, and why",
        benchmarks=_LIVE_END,
    ),
    _browser("noop", (ArgSpec("wait_ms", "float", False, 1000),), "do nothing and wait", wait_ms=500),
)

_M2W_ID = ArgSpec("id", "id")
MIND2WEB_ACTIONS: tuple[ActionSpec, ...] = (
    ActionSpec("CLICK", (_M2W_ID,), "click the element", {"id": ID_PLACEHOLDER}),
    ActionSpec(
        "TYPE",
        (_M2W_ID, ArgSpec("value", "str")),
        "type the value into a text field",
        {"id": ID_PLACEHOLDER, "value": "New York"},
    ),
    ActionSpec(
        "SELECT",
        (_M2W_ID, ArgSpec("value", "str")),
        "choose the option of a dropdown",
        {"id": ID_PLACEHOLDER, "value": "Economy"},
    ),
)


# `run_workflow` is offered only when the episode's memory holds executable workflows, and only with the
# names and parameters of those workflows (a `WorkflowCatalog`), so it is not in the fixed tables above.
RUN_WORKFLOW = ActionSpec(
    "run_workflow",
    (ArgSpec("name", "str"), ArgSpec("params", "params", False, {})),
    "run the steps of a saved workflow as one action; give the values of its parameters",
    {"name": "WORKFLOW", "params": {"PARAM": "value"}},
)
# Workflow name -> the parameter names a call must give (those the goal does not already state).
WorkflowCatalog = Mapping[str, Sequence[str]]


def actions_offered(benchmark: str) -> list[str] | None:
    """The browser actions offered on a benchmark's pages (None: the whole set)."""
    names = [s.name for s in BROWSER_ACTIONS if benchmark in s.benchmarks]
    return names or None


ACTION_SETS: dict[str, dict[str, ActionSpec]] = {
    "browser": {s.name: s for s in BROWSER_ACTIONS},
    "mind2web": {s.name: s for s in MIND2WEB_ACTIONS},
}
# The two sets' names are disjoint (lower case vs upper case), so an Action finds its spec by name alone.
_ALL_SPECS: dict[str, ActionSpec] = {**ACTION_SETS["browser"], **ACTION_SETS["mind2web"]}


def specs_of(action_set: str) -> dict[str, ActionSpec]:
    """The actions of a set by name; an unknown set is a `ConfigError`."""
    try:
        return ACTION_SETS[action_set]
    except KeyError:
        raise ConfigError(
            f"unknown action set {action_set!r}; expected one of {sorted(ACTION_SETS)}"
        ) from None


def selected_specs(action_set: str, names: Collection[str] | None) -> list[ActionSpec]:
    """The named actions of a set in table order (None: all of them); an unknown name is a `ConfigError`."""
    specs = specs_of(action_set)
    if names is None:
        return list(specs.values())
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise ConfigError(f"unknown {action_set} action(s) {unknown}; known: {', '.join(specs)}")
    return [s for s in specs.values() if s.name in set(names)]


# --------------------------------------------------------------------------------------------------
# Public models
# --------------------------------------------------------------------------------------------------


class Action(BaseModel, frozen=True):
    """A typed action: the name and its arguments in keyword form, in signature order, defaults filled."""

    name: str
    args: dict[str, ArgValue] = {}

    @property
    def target_id(self) -> str | None:
        """The element id (bid or Mind2Web id) the action acts on, if it has one."""
        spec = _ALL_SPECS.get(self.name)
        key = spec.id_arg if spec else None
        value = self.args.get(key) if key else None
        return None if value is None else str(value)

    def __hash__(self) -> int:  # args is a dict, so the generated hash would fail
        return hash((self.name, json.dumps(self.args, sort_keys=True)))


class ParsedOutput(BaseModel):
    """What the model said: its reasoning text before the action, and the action."""

    thought: str
    action: Action
