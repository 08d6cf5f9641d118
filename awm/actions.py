"""The closed action set: one definition that yields the prompt text, the safe parser and the GBNF grammar.

Why one definition: the agent's prompt, the parser's whitelist and the constrained-decoding grammar must
never disagree, so all three are generated from the `ActionSpec` tables below.

Why our own parser: model text never reaches BrowserGym. It is parsed into a typed `Action` by walking the
AST of exactly one candidate call (literals only: strings, numbers, lists of strings; never eval/exec),
and the string BrowserGym executes is rendered by `render_action` from that typed value.

Two sets:
- ``browser``: BrowserGym 0.14.3 high-level functions (names and argument order as in
  ``browsergym/core/action/functions.py``; where BrowserGym has extra trailing parameters, e.g.
  ``fill(..., enable_autocomplete_menu)`` or ``click(..., modifiers)``, we expose the leading ones only).
  ``check``/``uncheck`` exist in BrowserGym but are not in its default ``HighLevelActionSet`` subsets;
  `browsergym_action_set()` builds the set that includes them, which the harness must use.
- ``mind2web``: AWM's Mind2Web answer format ``CLICK [id]``, ``TYPE [id] [value]``, ``SELECT [id] [value]``.
"""

from __future__ import annotations

import ast
import difflib
import json
import math
import re
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from awm.errors import ActionParseError, ConfigError

ActionSetName = Literal["browser", "mind2web"]
ArgValue = str | int | float | list[str] | dict[str, str]
ArgType = Literal["id", "str", "int", "float", "str_or_list", "params"]

# --------------------------------------------------------------------------------------------------
# The definition
# --------------------------------------------------------------------------------------------------


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
# A live page (a user-named URL): the page actions a small model uses well, plus the two ways it ends the
# task itself (the answer/finish message, or saying the site cannot do it); no tabs, URLs or waiting.
_LIVE_PAGE = frozenset({"miniwob", "live"})
_LIVE_END = frozenset({"live"})


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
    _browser("hover", (_BID,), "move the mouse over an element", sets_state=True, needs_interactable=True),
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
        "drag an element left, right, up or down with the mouse",
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


# Which element roles each action can act on. Why: a small model that has filled a form will often
# `fill` the Submit button too (Playwright refuses: "Element is not an <input>"), and repeats it until the
# loop stop. Holding each action to its own roles, in the grammar and in the parser, makes that mistake
# impossible (grammar) or answered with a precise correction (parser). Roles are ARIA/Chromium AXTree
# roles as the observation prints them; an action missing here acts on any element.
TEXT_ENTRY_ROLES = frozenset(
    {"textbox", "searchbox", "combobox", "spinbutton", "textarea", "date", "DateTime", "InputTime"}
)
SELECT_ROLES = frozenset({"combobox", "listbox", "PopUpButton"})
TOGGLE_ROLES = frozenset({"checkbox", "radio", "switch", "menuitemcheckbox", "menuitemradio"})
# Keys go to text fields and to buttons (Enter on a focused button presses it). Why buttons: measured on
# enter-password, the model planned `press[20]` on the Submit button, and with press held to text fields
# the grammar turned it into scroll(0, 300), three times, until the loop stop.
PRESS_ROLES = TEXT_ENTRY_ROLES | {"button"}
# Actions our executor carries out with BrowserGym's own (`awm.webarena.executor`), never rendered to it.
EXECUTED_BY_AWM = frozenset({"select_text", "drag"})
# The role of a block of text shown with its id (only when the goal asks to highlight text): it takes
# `select_text` and nothing else, and `select_text` takes nothing else.
TEXT_BLOCK_ROLE = "text"
ACTION_ROLES: dict[str, frozenset[str]] = {
    "select_text": frozenset({TEXT_BLOCK_ROLE}),
    "fill": TEXT_ENTRY_ROLES | {"slider"},  # a slider is filled with its value (`awm.webarena.slider`)
    "clear": TEXT_ENTRY_ROLES,
    "press": PRESS_ROLES,
    "select_option": SELECT_ROLES,
    "check": TOGGLE_ROLES,
    "uncheck": TOGGLE_ROLES,
    "TYPE": TEXT_ENTRY_ROLES,
    "SELECT": SELECT_ROLES,
}
_NEEDS = {
    "select_text": "a block of text",
    "fill": "a text field or a slider",
    "clear": "a text field",
    "press": "a text field or a button",
    "TYPE": "a text field",
    "select_option": "a dropdown (select, listbox or combobox)",
    "SELECT": "a dropdown (select, listbox or combobox)",
    "check": "a checkbox, radio button or switch",
    "uncheck": "a checkbox, radio button or switch",
}


def ids_for_roles(
    roles: Mapping[str, str], ids: Collection[str] | None = None, action_set: ActionSetName = "browser"
) -> dict[str, list[str]]:
    """Per action of `ACTION_ROLES`, the ids (in page order) whose role that action can act on.

    `roles` maps element id -> role. `ids` (default: the keys of `roles`) is the page's id list; an id
    with no known role goes into every set, so an unknown element is never made unreachable. Actions
    without a role rule are not in the result (they may act on any id), except on a page whose blocks of
    text carry ids (`TEXT_BLOCK_ROLE`): then every action has its list, without those blocks.
    """
    names = _specs(action_set)
    order = list(dict.fromkeys(str(i) for i in (roles if ids is None else ids)))
    texts = {i for i in order if roles.get(i) == TEXT_BLOCK_ROLE}
    out: dict[str, list[str]] = {}
    for name in names:
        allowed = ACTION_ROLES.get(name)
        if allowed is not None:
            out[name] = [i for i in order if roles.get(i, "") in allowed or not roles.get(i)]
        elif texts:  # a block of text takes only select_text
            out[name] = [i for i in order if i not in texts]
    return out


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


# --------------------------------------------------------------------------------------------------
# Binding and checking arguments (shared by parser and renderer)
# --------------------------------------------------------------------------------------------------


def _specs(action_set: str) -> dict[str, ActionSpec]:
    try:
        return ACTION_SETS[action_set]
    except KeyError:
        raise ConfigError(
            f"unknown action set {action_set!r}; expected one of {sorted(ACTION_SETS)}"
        ) from None


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split()) if "\n" in text else text
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _arity_text(spec: ActionSpec) -> str:
    required = sum(a.required for a in spec.args)
    total = len(spec.args)
    if total == 0:
        return f"{spec.name}() takes no arguments"
    count = f"{required}" if required == total else f"{required} to {total}"
    noun = "argument" if total == 1 else "arguments"
    params = ", ".join(a.signature() for a in spec.args)
    return f"{spec.name}() takes {count} {noun} ({params})"


def _fail(kind: str, message: str) -> ActionParseError:
    return ActionParseError(kind, message)


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def _check_value(spec: ActionSpec, arg: ArgSpec, value: Any) -> ArgValue:
    """Type-check one bound value; returns the canonical value (ints given as ids become strings)."""
    where = f"argument '{arg.name}' of {spec.name}()"
    texts = value if isinstance(value, list | tuple) else [value]
    if any(isinstance(t, str) and _SURROGATE_RE.search(t) for t in texts):
        # lone surrogates cannot be stored as JSON (trajectories) nor typed into a page
        raise _fail("bad_argument", f"{where} must be valid Unicode text; got a lone surrogate in {value!r}")
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if arg.type == "id":
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            value = str(value)  # small models often drop the quotes around numeric bids
        if not isinstance(value, str) or not value or any(c.isspace() for c in value):
            raise _fail(
                "bad_argument",
                f"{where} must be an element id string like '{BID_PLACEHOLDER}'; got {value!r}",
            )
        if spec.name in ACTION_SETS["mind2web"] and ("[" in value or "]" in value):
            raise _fail("bad_argument", f"{where} must not contain brackets; got {value!r}")
        return value
    if arg.type == "str":
        if not isinstance(value, str):
            raise _fail("bad_argument", f"{where} must be a quoted string; got {value!r}")
        return value
    if arg.type == "int":
        if not isinstance(value, int) or isinstance(value, bool):
            raise _fail("bad_argument", f"{where} must be an integer; got {value!r}")
        return value
    if arg.type == "float":
        if not is_number or not math.isfinite(value):
            raise _fail("bad_argument", f"{where} must be a finite number; got {value!r}")
        return value
    if arg.type == "params":
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise _fail("bad_argument", f"{where} must be a dict of parameter names to values; got {value!r}")
        out: dict[str, str] = {}
        for key, item in value.items():
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                raise _fail("bad_argument", f"{where}: the value of '{key}' must be a quoted string; got {item!r}")
            out[key] = str(item)
        return out
    # str_or_list
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        return value
    raise _fail("bad_argument", f"{where} must be a string or a list of strings; got {value!r}")


def _bind(
    spec: ActionSpec,
    positional: Sequence[Any],
    keywords: Sequence[tuple[str, Any]],
    literal: Callable[[Any, str], Any] | None = None,
) -> dict[str, ArgValue]:
    """Bind call arguments to the signature like Python would; returns all args in order, defaults filled.

    The parser passes AST nodes and `literal` to read them, so an unknown keyword is reported as such
    before its value is looked at.
    """
    names = [a.name for a in spec.args]
    given = len(positional) + len(keywords)
    if len(positional) > len(spec.args):
        raise _fail("wrong_arity", f"{_arity_text(spec)}; got {given}")
    bound: dict[str, Any] = dict(zip(names, positional, strict=False))
    for key, value in keywords:
        if key not in names:
            params = ", ".join(a.signature() for a in spec.args)
            raise _fail(
                "wrong_arity",
                f"{spec.name}() got an unexpected keyword argument '{key}'; its arguments are ({params})",
            )
        if key in bound:
            raise _fail("wrong_arity", f"{spec.name}() got multiple values for argument '{key}'")
        bound[key] = value
    missing = [a.name for a in spec.args if a.required and a.name not in bound]
    if missing:
        raise _fail("wrong_arity", f"{_arity_text(spec)}; got {given} (missing {', '.join(missing)})")
    out: dict[str, ArgValue] = {}
    for arg in spec.args:
        value = bound.get(arg.name, arg.default)
        if literal is not None and arg.name in bound:
            value = literal(value, f"argument '{arg.name}' of {spec.name}()")
        out[arg.name] = _check_value(spec, arg, value)
    return out


def _check_on_page(spec: ActionSpec, args: dict[str, ArgValue], page_ids: Collection[str] | None) -> None:
    key = spec.id_arg
    if page_ids is None or key is None:
        return
    target = str(args[key])
    valid = [str(i) for i in page_ids]
    if target in set(valid):
        return
    if not valid:
        raise _fail(
            "id_not_on_page", f"element '{target}' is not on the current page, which has no element ids"
        )
    close = difflib.get_close_matches(target, valid, n=3, cutoff=0.5)
    shown = list(dict.fromkeys(close + valid))[:5]
    more = ", ..." if len(valid) > len(shown) else ""
    listed = ", ".join(f"'{i}'" for i in shown)
    raise _fail(
        "id_not_on_page", f"element '{target}' is not on the current page; valid ids include {listed}{more}"
    )


def _check_role(
    spec: ActionSpec,
    args: dict[str, ArgValue],
    ids_for: Mapping[str, Collection[str]] | None,
    describe: Mapping[str, str] | None,
    action_set: str,
) -> None:
    """Refuse an action on an element of the wrong kind, saying what it is and what to do instead."""
    key = spec.id_arg
    if ids_for is None or key is None or spec.name not in ids_for:
        return
    target = str(args[key])
    if target in {str(i) for i in ids_for[spec.name]}:
        return
    what = (describe or {}).get(target, "")
    shown = f"[{target}] is {_article(what)}" if what else f"[{target}] is not one"
    need = _NEEDS.get(spec.name, f"an element {spec.name} can act on")
    m2w = action_set == "mind2web"
    head = f"{spec.name} needs {need}" if m2w else f"{spec.name}() needs {need}"
    select = "SELECT" if m2w else "select_option"
    if spec.name != select and target in {str(i) for i in ids_for.get(select, ())}:
        instead = f"SELECT [{target}] [option]" if m2w else f"select_option({target!r}, 'option')"
    elif m2w:
        instead = f"CLICK [{target}]"
    elif spec.name != "select_text" and target in {str(i) for i in ids_for.get("select_text", ())}:
        instead = f"select_text({target!r})"
    else:
        instead = f"click({target!r})"
    fitting = [str(i) for i in ids_for[spec.name]][:5]
    here = f"; ids that fit: {', '.join(repr(i) for i in fitting)}" if fitting else ""
    raise _fail("bad_argument", f"{head}; {shown}: use {instead}{here}")


def _article(text: str) -> str:
    return ("an " if text[:1].lower() in "aeiou" else "a ") + text


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------


def render_action(action: Action, action_set: ActionSetName = "browser") -> str:
    """The exact string BrowserGym's HighLevelActionSet executes (browser) or AWM's answer text (mind2web).

    Strings use Python's repr, so render -> parse is the identity for any string; optional arguments equal
    to their default are left out, and the rest are passed by keyword, as BrowserGym's examples do.
    """
    specs = _specs(action_set)
    spec = RUN_WORKFLOW if action.name == RUN_WORKFLOW.name and action_set == "browser" else specs.get(action.name)
    if spec is None:
        raise _fail("unknown_action", f"'{action.name}' is not an action of the {action_set} set")
    args = _bind(spec, [], list(action.args.items()))
    if spec is RUN_WORKFLOW:  # both arguments positional, the dict always shown: what the prompt teaches
        return f"run_workflow({args['name']!r}, {args['params']!r})"
    if action_set == "mind2web":
        text = f"{spec.name} [{args['id']}]"
        if "value" in args:
            value = str(args["value"])
            if "\n" in value or "\r" in value:
                raise _fail(
                    "bad_argument", f"argument 'value' of {spec.name} must be one line; got {value!r}"
                )
            text += f" [{value}]"
        return text
    parts: list[str] = []
    for arg in spec.args:
        value = args[arg.name]
        if arg.required:
            parts.append(repr(value))
        elif not (value == arg.default and type(value) is type(arg.default)):
            parts.append(f"{arg.name}={value!r}")
    return f"{spec.name}({', '.join(parts)})"


# --------------------------------------------------------------------------------------------------
# Prompt text
# --------------------------------------------------------------------------------------------------


def _selected(action_set: str, names: Collection[str] | None) -> list[ActionSpec]:
    specs = _specs(action_set)
    if names is None:
        return list(specs.values())
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise ConfigError(f"unknown {action_set} action(s) {unknown}; known: {', '.join(specs)}")
    return [s for s in specs.values() if s.name in set(names)]


def _example(spec: ActionSpec, action_set: str) -> str:
    return render_action(Action(name=spec.name, args=spec.example), action_set)  # type: ignore[arg-type]


def describe_actions(action_set: ActionSetName = "browser", names: Collection[str] | None = None) -> str:
    """Compact prompt text: one line per action with signature, description and an example.

    Examples use the placeholder 'BID' / ID, never an id a real page could have: a small model copies
    example ids (AgentLab's prompt made 60 of 105 actions hit an example's id).
    """
    lines = []
    for spec in _selected(action_set, names):
        if action_set == "mind2web":
            sig = " ".join([spec.name] + [f"[{a.name}]" for a in spec.args])
        else:
            sig = spec.signature()
        # No example without arguments (the signature is one) or for free text: a small model sends an
        # example's sentence as its own answer (measured: "The cheapest flight is $120." on a FAQ page).
        example = f" Example: {_example(spec, action_set)}" if spec.args and spec.example else ""
        lines.append(f"{sig}: {spec.description}.{example}")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# Parsing: browser set
# --------------------------------------------------------------------------------------------------

_CALL_RE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\(")
_FENCE_RE = re.compile(r"^[ \t]*```[^\n`]*\n(.*?)(?:^[ \t]*```|\Z)", re.DOTALL | re.MULTILINE)
_LABEL_TAIL_RE = re.compile(
    r"(?:^[ \t]*```[\w+-]*|`|(?:next\s+)?(?:action|answer)\s*:)\s*\Z", re.IGNORECASE | re.MULTILINE
)
_LABEL_HEAD_RE = re.compile(r"^(?:thought|reasoning)\s*:\s*", re.IGNORECASE)


@dataclass(frozen=True)
class _Call:
    name: str
    start: int
    end: int | None  # index of the closing parenthesis, None when unbalanced
    attribute: bool  # written as obj.name(...)


def _closing_paren(text: str, open_idx: int) -> int | None:
    """Index of the parenthesis closing text[open_idx], skipping strings and comments; None if none."""
    depth = 0
    i, n = open_idx, len(text)
    while i < n:
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i if c == ")" else None
        elif c == "#":
            newline = text.find("\n", i)
            if newline < 0:
                return None
            i = newline
        elif c in "'\"":
            quote = c * 3 if text.startswith(c * 3, i) else c
            i += len(quote)
            while i < n and not text.startswith(quote, i):
                if text[i] == "\\":
                    i += 1
                elif len(quote) == 1 and text[i] in "\r\n":
                    return None
                i += 1
            if i >= n:
                return None
            i += len(quote) - 1
        i += 1
    return None


def _line_bounds(text: str, pos: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return start, (len(text) if end < 0 else end)


def _scan_calls(text: str, lo: int, hi: int) -> list[_Call]:
    """Every `name(` in text[lo:hi] outside comment lines, with the extent of its argument list."""
    calls: list[_Call] = []
    pos = lo
    while (m := _CALL_RE.search(text, pos, hi)) is not None:
        start = m.start(1)
        line_start, line_end = _line_bounds(text, start)
        if text[line_start:start].lstrip().startswith("#"):
            pos = line_end
            continue
        end = _closing_paren(text, m.end() - 1)
        if end is not None and end >= hi:
            end = None
        calls.append(_Call(m.group(1), start, end, start > 0 and text[start - 1] == "."))
        if end is None:
            pos = m.end()
            continue
        pos = end + 1
        _, rest_end = _line_bounds(text, pos) if pos < len(text) else (pos, pos)
        if text[pos:rest_end].lstrip().startswith("#"):  # a trailing comment is not code
            pos = rest_end
    return calls


def _call_text(text: str, call: _Call) -> str:
    return text[call.start : call.end + 1] if call.end is not None else text[call.start : call.start + 40]


def _candidate_calls(text: str) -> list[_Call]:
    """Calls inside ``` fences when the fences hold any; otherwise calls anywhere in the text."""
    fenced = [c for m in _FENCE_RE.finditer(text) for c in _scan_calls(text, m.start(1), m.end(1))]
    return fenced or _scan_calls(text, 0, len(text))


def _describe_node(node: ast.AST) -> str:
    kinds = {
        ast.Call: "a function call",
        ast.Attribute: "an attribute access",
        ast.Name: "a variable name",
        ast.JoinedStr: "an f-string",
        ast.Lambda: "a lambda",
        ast.ListComp: "a comprehension",
        ast.SetComp: "a comprehension",
        ast.DictComp: "a comprehension",
        ast.GeneratorExp: "a generator",
        ast.Starred: "a starred argument",
        ast.Subscript: "a subscript",
        ast.Dict: "a dict",
        ast.Set: "a set",
    }
    kind = kinds.get(type(node), "an expression")
    try:
        code = ast.unparse(node)
    except Exception:  # unparse of odd trees is best effort; it never executes anything
        code = type(node).__name__
    return f"{kind} `{_short(code, 60)}`"


def _literal(node: ast.AST, where: str) -> Any:
    """The value of a literal node: a constant, a signed number, or a list/tuple of constants."""
    literal_hint = "a literal (a quoted string, a number or a list of strings)"
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str | int | float) and not isinstance(node.value, bool):
            return node.value
        raise _fail("bad_argument", f"{where} must be a quoted string or a number; got {node.value!r}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = node.operand
        if (
            isinstance(operand, ast.Constant)
            and isinstance(operand.value, int | float)
            and not isinstance(operand.value, bool)
        ):
            return -operand.value if isinstance(node.op, ast.USub) else operand.value
    if isinstance(node, ast.Dict):  # run_workflow's parameters: {'name': 'value', ...}
        out: dict[Any, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
                raise _fail("non_literal", f"{where}: dict keys must be quoted parameter names")
            if not isinstance(item, ast.Constant) or isinstance(item.value, bool) or item.value is None:
                raise _fail(
                    "non_literal", f"{where}: the value of '{key.value}' must be a quoted string; got {_describe_node(item)}"
                )
            out[key.value] = item.value
        return out
    if isinstance(node, ast.List | ast.Tuple):
        items = []
        for element in node.elts:
            if not isinstance(element, ast.Constant):
                raise _fail(
                    "non_literal", f"{where} must be {literal_hint}; got {_describe_node(element)} in a list"
                )
            if not isinstance(element.value, str):
                raise _fail(
                    "bad_argument", f"{where}: list items must be quoted strings; got {element.value!r}"
                )
            items.append(element.value)
        return items
    raise _fail("non_literal", f"{where} must be {literal_hint}; got {_describe_node(node)}")


def _parse_call(text: str, call: _Call, spec: ActionSpec) -> dict[str, ArgValue]:
    if call.end is None:
        snippet = _short(text[call.start :], 60)
        raise _fail(
            "syntax", f"could not parse `{snippet}`: unbalanced parentheses or an unterminated string"
        )
    source = text[call.start : call.end + 1]
    if call.attribute:
        raise _fail(
            "syntax", f"write the action as a bare call like {spec.name}(...), not as `obj.{spec.name}(...)`"
        )
    after = text[call.end + 1 :].lstrip(" \t")
    if after[:1] in (".", "(", "["):
        raise _fail(
            "syntax", f"write the action as a bare call; `{_short(source, 50)}` is followed by `{after[:1]}`"
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences warn; they are still literals
            tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        reason = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
        raise _fail("syntax", f"could not parse `{_short(source, 60)}`: {reason}") from None
    node = tree.body
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
        raise _fail("syntax", f"could not parse `{_short(source, 60)}` as one call")
    if any(isinstance(arg, ast.Starred) for arg in node.args):
        raise _fail("non_literal", f"{spec.name}() arguments must be literals; `*` unpacking is not allowed")
    if any(kw.arg is None for kw in node.keywords):
        raise _fail("non_literal", f"{spec.name}() arguments must be literals; `**` unpacking is not allowed")
    keywords = [(kw.arg, kw.value) for kw in node.keywords if kw.arg is not None]
    return _bind(spec, node.args, keywords, literal=_literal)


def _clean_thought(prefix: str) -> str:
    thought = prefix.strip()
    while (stripped := _LABEL_TAIL_RE.sub("", thought).rstrip()) != thought:
        thought = stripped
    return _LABEL_HEAD_RE.sub("", thought).strip()


def _no_action_message(action_set: str) -> str:
    specs = _specs(action_set)
    spec = next(iter(specs.values()))
    return (
        f"no action found; reply with exactly one action, e.g. {_example(spec, action_set)}; "
        f"allowed actions: {', '.join(specs)}"
    )


def _check_workflow_call(args: dict[str, ArgValue], workflows: WorkflowCatalog) -> None:
    """Hold a `run_workflow` call to the episode's workflows: a known name, exactly its open parameters."""
    name = str(args["name"])
    if name not in workflows:
        known = list(workflows)
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise _fail(
            "unknown_workflow",
            f"there is no workflow {name!r}{hint}; workflows: {', '.join(repr(k) for k in known)}",
        )
    params = args["params"]
    assert isinstance(params, dict)
    wanted = list(workflows[name])
    unknown = [k for k in params if k not in wanted]
    if unknown:
        takes = ", ".join(repr(w) for w in wanted) if wanted else "no parameters (the goal gives them all)"
        raise _fail("bad_argument", f"workflow {name!r} has no parameter {unknown[0]!r}; it takes {takes}")
    missing = [w for w in wanted if w not in params]
    if missing:
        shown = ", ".join(f"{w!r}: 'value'" for w in wanted)
        raise _fail(
            "wrong_arity",
            f"workflow {name!r} needs parameter(s) {', '.join(repr(m) for m in missing)}: "
            f"run_workflow({name!r}, {{{shown}}})",
        )


def _parse_browser(
    text: str,
    page_ids: Collection[str] | None,
    ids_for: Mapping[str, Collection[str]] | None = None,
    describe: Mapping[str, str] | None = None,
    workflows: WorkflowCatalog | None = None,
) -> ParsedOutput:
    specs = dict(ACTION_SETS["browser"])
    if workflows:
        specs[RUN_WORKFLOW.name] = RUN_WORKFLOW
    calls = _candidate_calls(text)
    actions = [c for c in calls if c.name in specs]
    if len(actions) > 1:
        shown = ", ".join(f"`{_short(_call_text(text, c), 40)}`" for c in actions[:4])
        raise _fail(
            "multiple_actions",
            f"found {len(actions)} actions ({shown}); reply with exactly one action",
        )
    if not actions:
        if not calls:
            raise _fail("no_action", _no_action_message("browser"))
        call = calls[0]
        owner = re.search(r"[\w.]*$", text[: call.start]).group(0) if call.attribute else ""  # type: ignore[union-attr]
        name = owner + call.name
        close = difflib.get_close_matches(name.lower(), list(specs), n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise _fail(
            "unknown_action", f"'{name}' is not an allowed action{hint}; allowed actions: {', '.join(specs)}"
        )
    call = actions[0]
    spec = specs[call.name]
    args = _parse_call(text, call, spec)
    if spec is RUN_WORKFLOW:
        _check_workflow_call(args, workflows or {})
    _check_on_page(spec, args, page_ids)
    _check_role(spec, args, ids_for, describe, "browser")
    return ParsedOutput(thought=_clean_thought(text[: call.start]), action=Action(name=spec.name, args=args))


# --------------------------------------------------------------------------------------------------
# Parsing: mind2web set
# --------------------------------------------------------------------------------------------------

_M2W_OP_RE = re.compile(r"(?<![A-Za-z0-9_])(click|type|select)[ \t]*\[", re.IGNORECASE)
_M2W_UNKNOWN_RE = re.compile(r"(?<![A-Za-z0-9_])([A-Z]{3,})[ \t]*\[[^\]\n]*\]")


def _m2w_action_at(text: str, m: re.Match[str]) -> tuple[dict[str, ArgValue], ActionSpec, int]:
    """Parse one Mind2Web action starting at an op match; returns args, spec and the end offset."""
    spec = ACTION_SETS["mind2web"][m.group(1).upper()]
    _, line_end = _line_bounds(text, m.start())
    close = text.find("]", m.end(), line_end)
    if close < 0:
        raise _fail("syntax", f"`{_short(text[m.start() : line_end], 60)}`: the id must be closed with ']'")
    ident = text[m.end() : close].strip()
    if not ident or any(c.isspace() or c == "[" for c in ident):
        raise _fail(
            "bad_argument",
            f"{spec.name} needs an element id in brackets like [{ID_PLACEHOLDER}]; got [{ident}]",
        )
    end = close + 1
    rest = text[end:line_end]
    has_value = rest.lstrip(" \t").startswith("[")
    if spec.name == "CLICK":
        if has_value:
            raise _fail("wrong_arity", f"CLICK takes 1 argument [id]; got 2. Write: CLICK [{ident}]")
        return {"id": ident}, spec, end
    if not has_value:
        raise _fail(
            "wrong_arity",
            f"{spec.name} takes 2 arguments [id] [value]; got 1. Write: {spec.name} [{ident}] [value]",
        )
    value_start = end + rest.index("[") + 1
    value_end = text.rfind("]", value_start, line_end)
    if value_end < 0:
        raise _fail("syntax", f"{spec.name} [{ident}]: the value must be closed with ']' on the same line")
    return {"id": ident, "value": text[value_start:value_end]}, spec, value_end + 1


def _parse_mind2web(
    text: str,
    page_ids: Collection[str] | None,
    ids_for: Mapping[str, Collection[str]] | None = None,
    describe: Mapping[str, str] | None = None,
) -> ParsedOutput:
    m = _M2W_OP_RE.search(text)
    if m is None:
        unknown = _M2W_UNKNOWN_RE.search(text)
        allowed = "CLICK [id], TYPE [id] [value], SELECT [id] [value]"
        if unknown:
            raise _fail(
                "unknown_action", f"'{unknown.group(1)}' is not an allowed action; allowed actions: {allowed}"
            )
        raise _fail("no_action", f"no action found; reply with exactly one action: {allowed}")
    args, spec, end = _m2w_action_at(text, m)
    others = list(_M2W_OP_RE.finditer(text, end))
    if others:
        found = [_short(text[m.start() : end], 40)]
        found += [_short(text[o.start() : _line_bounds(text, o.start())[1]], 40) for o in others[:3]]
        shown = ", ".join(f"`{f}`" for f in found)
        raise _fail(
            "multiple_actions", f"found {1 + len(others)} actions ({shown}); reply with exactly one action"
        )
    _check_on_page(spec, args, page_ids)
    _check_role(spec, args, ids_for, describe, "mind2web")
    return ParsedOutput(thought=_clean_thought(text[: m.start()]), action=Action(name=spec.name, args=args))


def parse_action(
    text: str,
    *,
    action_set: ActionSetName = "browser",
    page_ids: Collection[str] | None = None,
    ids_for: Mapping[str, Collection[str]] | None = None,
    describe: Mapping[str, str] | None = None,
    workflows: WorkflowCatalog | None = None,
) -> ParsedOutput:
    """Parse model text into exactly one whitelisted action with literal arguments.

    Tolerates prose around the action, "Action:" labels, ``` fences and a trailing comment. Never evaluates
    anything: the candidate call is read with `ast.parse` and only literal nodes are accepted. With
    `page_ids`, the element id must be one of them. With `ids_for` (action name -> the ids it may act on,
    e.g. from `ids_for_roles`), an action listed there must target one of its own ids: `fill` on a button
    is refused (kind ``bad_argument``) with a message that says what the element is (from `describe`,
    id -> "button 'Submit'") and what to do instead. With `workflows` (browser set), `run_workflow(name,
    {param: value})` is allowed too, for those names and exactly their open parameters. Raises
    `ActionParseError(kind, message)`, whose message is written to be shown to the model as is.
    """
    _specs(action_set)
    if action_set == "mind2web":
        return _parse_mind2web(text, page_ids, ids_for, describe)
    return _parse_browser(text, page_ids, ids_for, describe, workflows)


# --------------------------------------------------------------------------------------------------
# GBNF grammar (llama.cpp)
# --------------------------------------------------------------------------------------------------


def _gbnf_literal(text: str) -> str:
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
        .replace("\x00", "\\x00")
    )
    return f'"{escaped}"'


def _rule_name(name: str) -> str:
    return name.lower().replace("_", "-")  # GBNF rule names allow letters, digits and '-'


_BROWSER_VALUE_RULES = {
    "string": "sq-string | dq-string",
    "sq-string": '"\'" ([^\'\\\\\\n\\r\\x00] | escape)* "\'"',
    "dq-string": '"\\"" ([^"\\\\\\n\\r\\x00] | escape)* "\\""',
    "escape": '"\\\\" (["\'\\\\nrt] | "x" hex hex | "u" (hex-no-d hex hex hex | [dD] [0-7] hex hex))',
    "hex-no-d": "[0-9a-cA-Ce-fE-F]",
    "hex": "[0-9a-fA-F]",
    "string-list": '"[" (string (", " string)*)? "]"',
    "int": '"-"? ("0" | [1-9] [0-9]{0,3})',  # Python refuses leading zeros
    "number": '"-"? ("0" | [1-9] [0-9]{0,5}) ("." [0-9]{1,4})?',
}
_TYPE_RULE = {"str": "string", "int": "int", "float": "number", "str_or_list": "(string | string-list)"}


def _browser_action_rule(spec: ActionSpec, id_rule: str = "bid") -> str:
    pieces: list[str] = [_gbnf_literal(f"{spec.name}(")]
    first = True
    for arg in spec.args:
        if arg.type == "id":
            value = id_rule
        else:
            value = _TYPE_RULE[arg.type]
        if arg.required:
            pieces.append(value if first else f'", " {value}')
        else:
            sep = "" if first else ", "
            pieces.append(f"({_gbnf_literal(f'{sep}{arg.name}=')} {value})?")
        first = False
    pieces.append('")"')
    return " ".join(pieces)


def _mind2web_action_rule(spec: ActionSpec, id_rule: str = "id") -> str:
    rule = f'{_gbnf_literal(spec.name + " [")} {id_rule} "]"'
    if len(spec.args) > 1:
        rule += ' " [" value "]"'
    return rule


def _workflow_rules(workflows: WorkflowCatalog) -> dict[str, str]:
    """``run-workflow ::= "run_workflow(" (wf-1 | wf-2 ...) ")"``: each name, then its keys in order."""
    rules: dict[str, str] = {}
    choices = []
    for n, (name, params) in enumerate(workflows.items(), start=1):
        keys = ' ", " '.join(f"{_gbnf_literal(repr(p) + ': ')} string" for p in params)
        body = f'{_gbnf_literal(repr(name) + ", {")} {keys} "}}"' if params else _gbnf_literal(repr(name) + ", {}")
        rules[f"wf-{n}"] = body
        choices.append(f"wf-{n}")
    rules["run-workflow"] = f'"run_workflow(" ({" | ".join(choices)}) ")"'
    return rules


def _grammar_ids(action_set: str, ids: Collection[str]) -> list[str]:
    """Ids a grammar can hold as literals: no whitespace (and no brackets in Mind2Web's format)."""
    out = list(dict.fromkeys(str(i) for i in ids))
    if action_set == "mind2web":
        return [i for i in out if i and not any(c.isspace() or c in "[]" for c in i)]
    return [i for i in out if i and not any(c.isspace() for c in i)]


def action_grammar(
    action_set: ActionSetName = "browser",
    page_ids: Collection[str] = (),
    names: Collection[str] | None = None,
    with_thought: bool = True,
    *,
    max_thought_chars: int = 300,
    ids_for: Mapping[str, Collection[str]] | None = None,
    workflows: WorkflowCatalog | None = None,
) -> str:
    """GBNF for llama.cpp: an optional one-line thought, a newline, then exactly one action.

    Every element-id argument is one of `page_ids`; with `ids_for` (action name -> its own ids, e.g. from
    `ids_for_roles`), an action listed there takes only its own ids (those also in `page_ids` when
    `page_ids` is given), so `fill` cannot name a button. An action with no id to take is left out.
    With `workflows` (browser set), `run_workflow` is one more action: one of those names and exactly
    its parameter keys, in order, each with a string value.
    Strings are quoted literals with only the escapes Python and BrowserGym both read. The thought line
    cannot hold '(' (browser) or '[' (mind2web), so it cannot contain a second action.
    """
    specs = _selected(action_set, names)
    ids = _grammar_ids(action_set, page_ids)
    on_page = set(ids)
    id_sets: dict[str, list[str]] = {}
    for spec in specs:
        if spec.id_arg is None:
            continue
        if ids_for is not None and spec.name in ids_for:
            own = _grammar_ids(action_set, ids_for[spec.name])
            id_sets[spec.name] = [i for i in own if i in on_page] if on_page else own
        else:
            id_sets[spec.name] = ids
    usable = [s for s in specs if s.id_arg is None or id_sets[s.name]]
    if workflows and action_set == "browser":
        usable.append(RUN_WORKFLOW)
    if not usable:
        raise ConfigError(
            f"no {action_set} action is possible: the selected actions all need an element id, and no ids were given"
        )
    base_rule = "id" if action_set == "mind2web" else "bid"
    quote = (lambda i: _gbnf_literal(i)) if action_set == "mind2web" else (lambda i: _gbnf_literal(repr(i)))
    id_rules: dict[str, str] = {}  # rule name -> body
    rule_of_set: dict[tuple[str, ...], str] = {}
    if ids:
        rule_of_set[tuple(ids)] = base_rule
    rules: dict[str, str] = {}
    thought_char = "[^\\n(]" if action_set == "browser" else "[^\\n\\[]"
    action_rules = [_rule_name(s.name) for s in usable]
    rules["root"] = '(thought "\\n")? action' if with_thought else "action"
    if with_thought:
        rules["thought"] = f"{thought_char}{{1,{max_thought_chars}}}"
    rules["action"] = " | ".join(action_rules)
    for spec in usable:
        id_rule = base_rule
        if spec.id_arg is not None:
            key = tuple(id_sets[spec.name])
            if key not in rule_of_set:
                rule_of_set[key] = f"{base_rule}-{_rule_name(spec.name)}"
            id_rule = rule_of_set[key]
            id_rules.setdefault(id_rule, " | ".join(quote(i) for i in key))
        if spec is RUN_WORKFLOW:
            rules.update(_workflow_rules(workflows or {}))
        elif action_set == "mind2web":
            rules[_rule_name(spec.name)] = _mind2web_action_rule(spec, id_rule)
        else:
            rules[_rule_name(spec.name)] = _browser_action_rule(spec, id_rule)
    if action_set == "mind2web":
        rules.update(id_rules)
        rules["value"] = "[^\\n\\r\\]]*"
    else:
        rules.update(id_rules)
        rules.update(_BROWSER_VALUE_RULES)
    reachable = _reachable(rules)
    return "\n".join(f"{name} ::= {body}" for name, body in rules.items() if name in reachable) + "\n"


TARGET_LEAD = "On: "
PAGE_TARGET = "page"


def target_line(bid: str, description: str) -> str:
    """The first line of a target-first answer: ``On: button 'Submit' [12]`` (parentheses dropped, so the
    line can never read as a call to the parser)."""
    shown = " ".join(description.replace("(", "").replace(")", "").split()) or "element"
    return f"{TARGET_LEAD}{shown} [{bid}]"


def target_first_grammar(
    targets: Mapping[str, str],
    names: Collection[str] | None = None,
    *,
    ids_for: Mapping[str, Collection[str]] | None = None,
    workflows: WorkflowCatalog | None = None,
) -> str:
    """GBNF (browser set) for an answer that names the element first and then the action that fits it:

        On: textbox 'To:' [21]
        fill('21', 'SHG')

    `targets` maps each element id on the page to its description (``role 'label'``), in page order. The
    first line is one of the page's elements as the page describes it (or ``On: page`` for an action that
    takes none: scroll, a workflow call); the second is an action that element takes (`ids_for`: the
    role rules and what is spent, as in `action_grammar`) with the id already fixed.

    Why: measured on the development split, the 1.5B model picked ids badly (the first link instead of
    the one named in the goal, the selected tab for another) and, when the action it wanted was not
    allowed for its id, constrained decoding produced noise (dblclick on a filled field). Choosing among
    the page's own lines by their text is what a small model does well (it copies), and once the element
    is chosen only its own actions are left, so no choice leaves it only nonsense.

    Measured, it does worse as it stands (`AgentSettings.target_first`, off by default): the model names
    the element of its last step again, copying its own history, and goes through that element's
    actions instead of moving on.
    """
    specs = _selected("browser", names)
    element_specs = [s for s in specs if s.id_arg is not None]
    plain_specs = [s for s in specs if s.id_arg is None]
    rules: dict[str, str] = {}
    choices: list[str] = []
    for n, (bid, description) in enumerate(targets.items(), start=1):
        if not _grammar_ids("browser", [bid]):
            continue
        fitting = [s for s in element_specs if ids_for is None or s.name not in ids_for or bid in ids_for[s.name]]
        if not fitting:
            continue
        rules[f"id-{n}"] = _gbnf_literal(repr(bid))
        for spec in fitting:
            rules[f"{_rule_name(spec.name)}-{n}"] = _browser_action_rule(spec, f"id-{n}")
        actions = " | ".join(f"{_rule_name(s.name)}-{n}" for s in fitting)
        rules[f"on-{n}"] = f'{_gbnf_literal(target_line(bid, description) + chr(10))} ({actions})'
        choices.append(f"on-{n}")
    plain = [_rule_name(s.name) for s in plain_specs]
    for spec in plain_specs:
        rules[_rule_name(spec.name)] = _browser_action_rule(spec)
    if workflows:
        rules.update(_workflow_rules(workflows))
        plain.append("run-workflow")
    if plain:
        rules["on-page"] = f'{_gbnf_literal(TARGET_LEAD + PAGE_TARGET + chr(10))} ({" | ".join(plain)})'
        choices.append("on-page")
    if not choices:
        raise ConfigError("no browser action is possible: no element takes any offered action, and none is plain")
    rules = {"root": " | ".join(choices), **rules, **_BROWSER_VALUE_RULES}
    reachable = _reachable(rules)
    return "\n".join(f"{name} ::= {body}" for name, body in rules.items() if name in reachable) + "\n"


_GBNF_REF_RE = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|([a-zA-Z0-9-]+)')


def _references(body: str) -> set[str]:
    """Rule names used in a GBNF rule body (skipping literals, character classes and repetition counts)."""
    refs = set()
    for m in _GBNF_REF_RE.finditer(body):
        name = m.group(1)
        if name and not name.isdigit():
            refs.add(name)
    return refs


def _reachable(rules: dict[str, str]) -> set[str]:
    seen, todo = set(), ["root"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_references(rules[name]) - seen)
    return seen


# --------------------------------------------------------------------------------------------------
# The BrowserGym side
# --------------------------------------------------------------------------------------------------


def browsergym_action_set(demo_mode: str = "off") -> Any:
    """BrowserGym's HighLevelActionSet that executes every browser action we render (check/uncheck included).

    Single-action and strict: anything but exactly one of our rendered calls is refused by BrowserGym too.
    Imported lazily so parsing and rendering do not need BrowserGym.
    """
    from browsergym.core.action.functions import check, uncheck
    from browsergym.core.action.highlevel import HighLevelActionSet

    return HighLevelActionSet(
        subsets=["chat", "infeas", "bid", "coord", "nav", "tab", "custom"],  # coord: select_text's drag
        custom_actions=[check, uncheck],
        multiaction=False,
        strict=True,
        demo_mode=demo_mode,  # type: ignore[arg-type]
    )
