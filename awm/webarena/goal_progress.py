"""Which of the goal's own controls on this page are not done yet, and which buttons wait for them (pure).

A goal that names the things to act on ("Select tN, kMLSI5, NQ and click Submit", "click the link
'et'") names controls the page shows under exactly those labels. Until each is done (a box ticked, a
link or tab clicked), the agent is told which are left, and under the grammar it cannot press a button
that is not one of them (Submit, OK, Search): pressed early, such a button ends the episode with the
goal half done.

Why: measured on the development split, the 1.5B model ticked one of the boxes a goal listed and clicked
Submit (click-checkboxes-large 0/3, each episode two steps), or ticked two of four; a page ends a task
on its Submit, so nothing after that can mend it.

Only a control whose whole label is the value counts (`awm.goal_values.is_whole_value`): a value inside a
longer label ("Anne" in an inbox row) may only say where to look. Text fields are never goal controls:
their labels name fields, not values.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from awm.actions import TEXT_BLOCK_ROLE, TEXT_ENTRY_ROLES, TOGGLE_ROLES
from awm.goal_values import (
    PLACE,
    GoalLiteral,
    asked_case,
    extract_goal_literals,
    goal_clauses,
    in_case,
    is_whole_value,
    literal_in,
    place_number,
)
from awm.trajectory import Step, action_values
from awm.webarena.env import PageState

# Roles whose label can be a value the goal names (what the agent picks, not a field it types into).
PICKED_ROLES = frozenset(
    {
        "button", "link", "checkbox", "radio", "switch", "option", "tab", "treeitem", "menuitem",
        "menuitemcheckbox", "menuitemradio", "clickable", "listitem", "cell", "gridcell",
    }
)  # fmt: skip
# Roles of the controls that wait while goal controls or values are left: what submits or moves the task
# on (a clickable box with a handler is a page's own button: multi-layouts' Search is one).
WAITING_ROLES = frozenset({"button", "clickable"})
# Roles that wait when the goal names a link by its text: the other links and clickable words.
LINK_ROLES = frozenset({"link", "clickable"})
# Roles that wait when the goal names options of a list: the other options, and the list box, whose
# click lands on whatever option is under its centre and replaces the choice.
OPTION_ROLES = frozenset({"option", "listbox"})


@dataclass(frozen=True)
class GoalControl:
    """A control on the page whose whole label is a value the goal names."""

    bid: str
    role: str
    label: str
    literal: GoalLiteral

    def render(self) -> str:
        if self.label:
            return f"[{self.bid}] {self.role} '{self.label}'"
        return f"[{self.bid}] {self.role} (the {self.literal.text})"


_EDGE_PUNCTUATION = ".,;:!?"


def _names(literal: GoalLiteral, label: str) -> bool:
    """Whether `label` is the value as a whole, spaces collapsed and a word's trailing comma or full
    stop ignored on either side (a link's text 'vel,' is the goal's "vel")."""
    label = " ".join(label.split())
    if is_whole_value(literal, label):
        return True
    bare = GoalLiteral(literal.text.strip(_EDGE_PUNCTUATION), literal.kind, literal.group)
    return bool(bare.text) and is_whole_value(bare, label.strip(_EDGE_PUNCTUATION))


def goal_controls(page: PageState, literals: Sequence[GoalLiteral]) -> list[GoalControl]:
    """The page's controls, in page order, whose whole label is one of `literals`."""
    found = []
    for bid in page.ids:
        desc = page.elements.get(bid)
        if desc is None or desc.role not in PICKED_ROLES:
            continue
        literal = next((x for x in literals if _names(x, desc.label)), None)
        if literal is not None:
            found.append(GoalControl(bid, desc.role, desc.label, literal))
    return found


# What a goal calls a control by its place ("the 3rd checkbox"): the noun and the role it means.
_PLACED_ROLES = {
    "checkbox": "checkbox", "checkboxes": "checkbox", "radio button": "radio", "radio": "radio",
    "button": "button", "link": "link", "tab": "tab", "option": "option", "paragraph": TEXT_BLOCK_ROLE,
}  # fmt: skip
# "... in the results", "... of the form", "... under Settings": the place counts within a part of the page
# ("from the top", "on the page" still count over the whole page).
_WITHIN_PART = re.compile(
    r"(?:e?s)?\s+(?:in|of|on|under|within|inside|from|below|above|beneath)\s+"
    r"(?!order\b|(?:the\s+)?(?:top|bottom|left|right|page|screen|list below)\b)\S"
)


def ordinal_controls(page: PageState, goal: str) -> list[GoalControl]:
    """The controls a goal names by their place among those of one kind ("click the 3rd checkbox"):
    the n-th element of that role on the page, in page order, when there are that many.

    Why: measured on form-sequence, the model ticked the 3rd checkbox and then the 1st as well. A place
    counted within a part of the page ("the first link in the results", "the 2nd button of the form")
    is not counted over the whole page: on an ordinary site the first link of a page is its logo, and
    which part the goal means is not something the page's roles say, so such a goal names no control.
    """
    found: list[GoalControl] = []
    for match in PLACE.finditer(goal):
        rest = goal[match.end() :].lstrip().lower()
        noun = next((n for n in sorted(_PLACED_ROLES, key=len, reverse=True) if re.match(rf"{n}\b", rest)), None)
        if noun is None or _WITHIN_PART.match(rest[len(noun) :]):
            continue
        place = place_number(match)
        role = _PLACED_ROLES[noun]
        of_role = [bid for bid in page.ids if (d := page.elements.get(bid)) is not None and d.role == role]
        if place is not None and 0 < place <= len(of_role):
            bid = of_role[place - 1]
            words = f"{match.group(0)} {noun}"
            found.append(GoalControl(bid, role, page.elements[bid].label, GoalLiteral(words, "name")))
    return found


def _done(control: GoalControl, page: PageState, history: Sequence[Step]) -> bool:
    """A box or radio button is done when it shows checked now (a second click unticks it); any other
    control when it shows selected, or an executed action acted on a control of that label."""
    flags = page.flags(control.bid)
    if control.role in TOGGLE_ROLES:
        return "checked" in flags
    if "selected" in flags:
        return True
    return any(
        step.outcome == "ok"
        and (
            (step.target is not None and _names(control.literal, step.target.label))
            or (step.action is not None and (step.action.get("args") or {}).get("bid") == control.bid)
        )
        for step in history
        if step.called_by is None
    )


# A link the goal names by its text: 'click on the link "vel"', 'the link labeled "et"'.
_NAMED_LINK = re.compile(
    r"\blinks?\s+(?:(?:labell?ed|named|called|with the text)\s+)?[\"“']([^\"”']+)[\"”']", re.IGNORECASE
)


def named_links(goal: str) -> list[str]:
    """The texts of the links a goal names ('find and click on the link "vel"' -> ['vel'])."""
    return [m.group(1).strip() for m in _NAMED_LINK.finditer(goal) if m.group(1).strip()]


@dataclass(frozen=True)
class GoalGuidance:
    """What the goal's values say about this page: controls not done yet, the ids that wait, the note."""

    pending: list[GoalControl]
    waiting: set[str]
    note: str
    untyped: tuple[str, ...] = ()  # the goal's values not typed yet, in goal order (the note's list)


def guidance(page: PageState, goal: str, history: Sequence[Step]) -> GoalGuidance:
    """Goal controls not done yet and what waits for them:

    - while any is pending, every button or clickable box whose label is not itself a goal value waits
      (Submit, OK);
    - when the goal names options of a list shown on the page, the other options and the list box wait
      (measured on click-scroll-list: with both named options chosen, the model clicked the list box,
      which chose the option under its centre instead, then clicked options the goal did not name);
    - when the goal names a link by its text, every other link and clickable word waits: the named one
      is the only one to click, and while it is not on the page, what is left (tabs, sections, buttons)
      is how to find it;
    - while a value the goal names is neither a control here, nor typed yet (no action used it and no
      field shows it), nor shown on any page so far (then it says where to look: "the email by Anne"),
      and the page has an empty text field (or, for a number, a slider), every button or clickable box
      that is not a goal value waits (only those of the empty fields' forms, where the page has forms:
      `_held_for_typing`);
    - a control the goal names by its place ("the 3rd checkbox") is a goal control too, and the others
      of its kind wait (`ordinal_controls`);
    - a value typed in another letter case than the goal asks holds the buttons;
    - while no name the goal gives was on any page and there is nothing to type it into, on a page that
      turns pages, links that do not turn pages wait (phone-book: the model clicked the phone number of
      whoever was shown);
    - the control the goal's last clause names by a plain word waits while fewer actions ran than the
      clauses before it (`_closing_hold`).

    Why the second: measured on the development split, the model expanded one section, did not find
    the link the goal named, and clicked another word, which ends the task (click-collapsible-2,
    click-tab-2, click-link). Why the third: it clicked Search on a form before typing the director and
    the year the goal named (multi-layouts).
    """
    literals = extract_goal_literals(goal)
    closing = _closing_hold(page, goal, history)
    ordinals = ordinal_controls(page, goal)
    if not literals and not ordinals:
        return closing
    controls = goal_controls(page, literals)
    named_here = {c.literal for c in controls}
    controls += ordinals
    pending = [c for c in controls if not _done(c, page, history)]
    pages = [s.observation.replace(goal, " ") for s in history] + [page.text.replace(goal, " ")]
    untyped = [
        x
        for x in literals
        if x not in named_here
        and not _typed(x, page, history)
        and not any(literal_in(x, text) for text in pages)
    ]
    names = [x for x in literals if x.kind == "name"]
    to_find = names if names and all(x in untyped for x in names) and not _empty_fields(page) else []
    if not _empty_fields(page):
        # A slider is never empty: a number not set yet waits for it all the same (use-slider: the model
        # clicked Submit with the slider wherever it started).
        untyped = [x for x in untyped if x.kind == "number" and _has_slider(page)]
    waiting = _other_ids(page, literals, WAITING_ROLES) if pending else set()
    if untyped:
        waiting |= _held_for_typing(page, _other_ids(page, literals, WAITING_ROLES))
    for control in ordinals:
        # "the 3rd checkbox": the other checkboxes wait (form-sequence: the model ticked the 1st too).
        waiting |= _other_ids(page, [], frozenset({control.role}))
    waiting -= {c.bid for c in ordinals}
    if any(c.role == "option" for c in controls):
        # The goal names options of a list shown here: the others, and the list box itself, wait.
        waiting |= _other_ids(page, literals, OPTION_ROLES)
    links = [GoalLiteral(text, "quoted") for text in named_links(goal)]
    notes = (
        ["Named in the goal and not done yet: " + "; ".join(c.render() for c in pending)] if pending else []
    )
    untyped_texts = tuple(x.text for x in sorted(untyped, key=lambda x: goal.find(x.text)))  # in goal order
    if untyped_texts:
        notes.append("Values in the goal not typed yet: " + ", ".join(f"'{text}'" for text in untyped_texts))
    case = asked_case(goal)
    miscased = [
        v for v in _field_values(page) if case and any(literal_in(x, v) for x in literals) and not in_case(v, case)
    ]
    if case and miscased:
        # "Type "cristin" in all upper case letters": the model typed 'Cristin' and submitted.
        waiting |= _other_ids(page, literals, WAITING_ROLES)
        notes.append(f"'{miscased[0]}' is not in {case} case as the goal asks: type it again.")
    if to_find:
        # "Find Catherina in the contact book": while no name the goal gives was on any page, the pages
        # are the way (`_PAGING`); the links of the contact shown here are someone else's.
        others = _other_ids(page, literals, LINK_ROLES)
        paging = {b for b in others if _PAGING.match(page.elements[b].label)}
        onward = {b for b in paging if _ONWARD.match(page.elements[b].label)}
        # With a way onward, the pages seen (this one's number, back) wait too: measured, the model clicked
        # the current page's number and went back to the first page, until the step limit. A page that
        # turns no pages is no paged list: its links (a site's "People", "Search") are how to find the
        # name, and none waits (on a directory page every link but the paging ones was held, "People" too).
        if paging:
            waiting |= others - (onward or paging)
        quoted = ", ".join(f"'{x.text}'" for x in to_find)
        notes.append(f"{quoted} named in the goal is not on this page: look for it on the other pages.")
    if links:
        waiting |= _other_ids(page, links, LINK_ROLES)
        shown = {c.literal.text.casefold() for c in goal_controls(page, links)}
        missing = [x.text for x in links if x.text.casefold() not in shown]
        if missing:
            quoted = ", ".join(f"'{text}'" for text in missing)
            notes.append(f"The link {quoted} named in the goal is not on this page: look for it elsewhere.")
    if closing.waiting:
        waiting |= closing.waiting
        notes.append(closing.note)
    return GoalGuidance(pending, waiting, "\n".join(notes), untyped_texts)


# Verbs of a goal's closing clause ("..., then press submit") and the words around the control's name there.
_CLOSING_VERBS = frozenset({"click", "press", "hit", "tap"})
# Verbs that name the closing control themselves ("... and save the settings": 'Save settings' or 'Save').
_SUBMIT_VERBS = frozenset({"save", "submit", "send", "apply", "confirm"})
_AROUND_NAME = frozenset({"a", "an", "the", "on", "at", "button", "link", "tab", "icon", "box"})


# A link that turns pages: a page number, an arrow, next/previous.
_PAGING = re.compile(
    r"^\s*(?:\d{1,3}|[<>«»‹›]+|next|prev|previous|more|older|newer|first|last)\s*$", re.IGNORECASE
)


_ONWARD = re.compile(r"^\s*(?:[>»›]+|next|more|older)\s*$", re.IGNORECASE)


def _closing_hold(page: PageState, goal: str, history: Sequence[Step]) -> GoalGuidance:
    """The controls a goal's last clause names by a plain word ("..., then press submit": 'Submit'), held
    while fewer actions ran than the clauses before it ("Expand the section below": one).

    Why: measured on the development split, the model clicked Submit first on "Expand the section below
    and click submit" (click-collapsible: the section's header shares the name 'Submit' with the button
    under it) and on "Generate a number less than 6, then press submit"; a page ends the task on its
    Submit. A quoted value is not a plain word: a link the goal names may be on the first page already.
    A closing verb that names its control ("Turn on dark mode and save the settings": 'Save settings'
    or 'Save') holds it the same way: measured on a settings page (scripts/bench_live.py), the model
    saved at once and reported the settings saved, dark mode still off.
    """
    clauses = goal_clauses(goal)
    if len(clauses) < 2 or clauses[-1].verb not in _CLOSING_VERBS | _SUBMIT_VERBS:
        return GoalGuidance([], set(), "")
    verb = clauses[-1].verb
    name = " ".join(w for w in clauses[-1].rest.split() if w.lower() not in _AROUND_NAME).casefold()
    names = {name} if verb in _CLOSING_VERBS else {verb, f"{verb} {name}".strip()}
    ran = sum(1 for step in history if step.outcome == "ok" and step.action is not None)
    if (not name and verb in _CLOSING_VERBS) or ran >= len(clauses) - 1:
        return GoalGuidance([], set(), "")
    held = {
        bid
        for bid in page.ids
        if (desc := page.elements.get(bid)) is not None
        and desc.role in PICKED_ROLES
        and " ".join(desc.label.split()).strip(_EDGE_PUNCTUATION).casefold() in names
    }
    if not held:
        return GoalGuidance([], set(), "")
    first = "; ".join(f"{c.verb} {c.rest}".strip() for c in clauses[:-1])
    return GoalGuidance([], held, f"Before '{clauses[-1].verb} {name}', the goal asks: {first}.")


def _typed(literal: GoalLiteral, page: PageState, history: Sequence[Step]) -> bool:
    """Whether an executed action entered the value, or a field on the page shows it (part of a word
    counts: 'starts with "Ant"' is typed as 'Antiquary', which the page may have completed itself)."""
    needle = literal.text.casefold()
    values = [v for step in history if step.outcome == "ok" for v in action_values(step)]
    values += _field_values(page)
    return any(needle in v.casefold() for v in values)


def _field_values(page: PageState, fields: Sequence[str] | None = None) -> list[str]:
    """The values the page's text fields (or those of `fields`) show now (from the page snapshot, else
    from their lines)."""
    fields = _text_fields(page) if fields is None else fields
    if page.snapshot is not None:
        return [v for bid in fields if (c := page.snapshot.controls.get(bid)) is not None and (v := c.value)]
    out = []
    for line in page.text.splitlines():
        head = line.partition("] ")[0]
        if head[1:] in fields and " value='" in line:
            out.append(line.split(" value='", 1)[1].rsplit("'", 1)[0])
    return out


def _empty_fields(page: PageState) -> list[str]:
    """The page's text fields with nothing in them that take text now (not disabled)."""
    return [
        bid for bid in _text_fields(page) if "disabled" not in page.flags(bid) and not _field_values(page, [bid])
    ]


def _held_for_typing(page: PageState, buttons: set[str]) -> set[str]:
    """Of `buttons`, those that wait while a value the goal names is not typed yet: the buttons of the
    forms that hold the empty fields, where every empty field is inside a form; else all of them.

    Why: a button outside the form does not submit what is typed there. On an ordinary shop page ("Find
    Acme kettles", an empty search field) the cookie banner's "Accept cookies" was held with the form's
    own Search button, and the banner covered the page. A page without forms (MiniWoB++'s, many script
    pages) says nothing of which button submits what: every button waits, as before."""
    empty = _empty_fields(page)
    forms = {page.forms.get(bid, "") for bid in empty}
    if not empty or "" in forms:
        return buttons
    return {bid for bid in buttons if page.forms.get(bid, "") in forms}


def _has_slider(page: PageState) -> bool:
    return any((d := page.elements.get(bid)) is not None and d.role == "slider" for bid in page.ids)


def _text_fields(page: PageState) -> list[str]:
    """The ids of the page's text fields (what a value is typed into)."""
    return [
        bid for bid in page.ids if (d := page.elements.get(bid)) is not None and d.role in TEXT_ENTRY_ROLES
    ]


def _other_ids(page: PageState, literals: Sequence[GoalLiteral], roles: frozenset[str]) -> set[str]:
    """Ids of the page's elements of `roles` whose label is none of `literals`."""
    return {
        bid
        for bid in page.ids
        if (desc := page.elements.get(bid)) is not None
        and desc.role in roles
        and not any(_names(x, desc.label) for x in literals)
    }
