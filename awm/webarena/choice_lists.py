"""Which drop-down list of the page offers a workflow step's value (pure, read off the observation).

Why: a workflow taught by one task chooses in the list that task needed ("select_option Priority:
{priority}"); a site's other tasks do the same procedure on another list of the same form ("move the
ticket to milestone 1.2", "set the size to large"). Measured on the arena's Trac with site scope, the
milestone task was offered the priority task's part (open the form, choose, submit) with its value read
off the goal, `priority = 'milestone 1.2'`; the part broke choosing it, since the Priority list offers no
such option, and the model never opened the form itself. A value the step's own list does not offer,
which exactly one other list on the page offers (as the option itself, or as the list's name followed
or preceded by it: "milestone 1.2" is the Milestone list's "1.2"), says which list the goal means: the
step chooses there instead. On the step's own list, or when its options are not known (a long list
the observation cut), nothing changes. Nor in a workflow that makes a fixed choice of its own (ticks
"resolve", selects "duplicate"): that choice is its task's ending, and choosing the value elsewhere
would do that other task and this one's change together (close the ticket while changing its priority).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from awm.grounding.ground import norm
from awm.memory.workflow import PLACEHOLDER, Workflow

CHOICE_ACTIONS = frozenset({"check", "uncheck", "select_option", "SELECT"})

# An observation line of a drop-down list (`awm.webarena.observation`): `[219] combobox 'Milestone:'
# value='(unset)', options:  | 1.2 | 1.3, collapsed`. The state words after the options never hold "|".
_LIST_LINE = re.compile(r"^\s*\[(?P<bid>[^\]]+)\] combobox(?: '(?P<label>[^']*)')?.*?, options: (?P<options>.*)$")
_STATE_WORDS = re.compile(r"(?:, (?:disabled|collapsed|expanded|focused|required|readonly|invalid))+$")
_CUT = re.compile(r" \| … \d+ more$")


class ShownList(NamedTuple):
    """A drop-down list as the observation shows it: its label, its options (None where the observation
    shows only the first of them) and whether it is disabled."""

    label: str
    options: list[str] | None
    disabled: bool = False


def list_options(page_text: str) -> dict[str, ShownList]:
    """Each drop-down list shown in the observation, by element id."""
    out: dict[str, ShownList] = {}
    for line in page_text.splitlines():
        found = _LIST_LINE.match(line)
        if found is None:
            continue
        states = _STATE_WORDS.search(found.group("options"))
        shown = found.group("options")[: states.start()] if states else found.group("options")
        options = None if _CUT.search(shown) else [o.strip() for o in shown.split(" | ") if o.strip()]
        out[found.group("bid")] = ShownList(found.group("label") or "", options, bool(states and "disabled" in states.group()))
    return out


def _means(value: str, label: str, option: str) -> bool:
    """Whether `value` names `option` of the list `label`: the option itself, or the list's name and it."""
    name = norm(re.sub(r"[^\w\s]", " ", label))
    wanted, choice = norm(value), norm(option)
    return bool(choice) and (wanted == choice or (bool(name) and wanted in (f"{name} {choice}", f"{choice} {name}")))


def list_offering(page_text: str, bid: str, value: str) -> tuple[str, str] | None:
    """(The element id, the option) of the one other list that offers `value`, when the list `bid` does
    not offer it and its options are known; None when `bid`'s list offers it or cannot be read, when no
    enabled list or more than one offers it, or when a list cut short might offer it too."""
    lists = list_options(page_text)
    own = lists.get(bid)
    if own is None or own.options is None or any(_means(value, own.label, option) for option in own.options):
        return None
    others = {other: shown for other, shown in lists.items() if other != bid and not shown.disabled}
    if any(shown.options is None for shown in others.values()):
        return None  # a long list the observation cut might offer it too: no telling which is meant
    found = [
        (other, option)
        for other, shown in others.items()
        for option in shown.options or []
        if _means(value, shown.label, option)
    ]
    return found[0] if len({other for other, _ in found}) == 1 else None


def chooses_by_value_only(workflow: Workflow) -> bool:
    """Whether every choice the workflow makes (a box ticked, an option selected) is a value it is given,
    none a fixed label: only then may a choice go to the list that offers its value (`list_offering`)."""
    for step in workflow.steps:
        if step.action not in CHOICE_ACTIONS:
            continue
        given = step.target.label if step.action in ("check", "uncheck") else step.value
        if not PLACEHOLDER.fullmatch(given.strip()):
            return False
    return True
