"""Role rules: which element roles each action can act on, and the ids of a page each action may name.

Why: a small model that has filled a form will often `fill` the Submit button too (Playwright refuses:
"Element is not an <input>"), and repeats it until the loop stop. Holding each action to its own roles, in
the grammar and in the parser, makes that mistake impossible (grammar) or answered with a precise
correction (parser). Roles are ARIA/Chromium AXTree roles as the observation prints them; an action missing
here acts on any element.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from awm.actions.table import ActionSetName, specs_of

TEXT_ENTRY_ROLES = frozenset(
    {"textbox", "searchbox", "combobox", "spinbutton", "textarea", "date", "DateTime", "InputTime"}
)
SELECT_ROLES = frozenset({"combobox", "listbox", "PopUpButton"})
TOGGLE_ROLES = frozenset({"checkbox", "radio", "switch", "menuitemcheckbox", "menuitemradio"})
# Keys go to text fields and to buttons (Enter on a focused button presses it). Why buttons: measured on
# enter-password, the model planned `press[20]` on the Submit button, and with press held to text fields
# the grammar turned it into scroll(0, 300), three times, until the loop stop.
PRESS_ROLES = TEXT_ENTRY_ROLES | {"button"}
# The role of a block of text shown with its id (only when the goal asks to highlight text or to drag
# something): it takes `select_text` and `drag` (a list item dragged into place, or a heading dropped
# on) and nothing else, and `select_text` takes nothing else.
TEXT_BLOCK_ROLE = "text"
TEXT_BLOCK_ACTIONS = frozenset({"select_text", "drag"})
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
# What an action held to roles needs, in words: the parser's correction names it.
ROLE_NEEDS = {
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
    text carry ids (`TEXT_BLOCK_ROLE`): then every action but `drag` has its list, without those blocks.
    """
    names = specs_of(action_set)
    order = list(dict.fromkeys(str(i) for i in (roles if ids is None else ids)))
    texts = {i for i in order if roles.get(i) == TEXT_BLOCK_ROLE}
    out: dict[str, list[str]] = {}
    for name in names:
        allowed = ACTION_ROLES.get(name)
        if allowed is not None:
            out[name] = [i for i in order if roles.get(i, "") in allowed or not roles.get(i)]
        elif texts and name not in TEXT_BLOCK_ACTIONS:  # a block of text takes only select_text and drag
            out[name] = [i for i in order if i not in texts]
    return out
