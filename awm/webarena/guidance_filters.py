"""The agent's guidance: named filters that hold back, each step, what the model is offered (pure).

Under constrained decoding the model can only answer what the grammar admits. Each filter here narrows
that offer (per action, the element ids it may name; the action names) or adds the prompt's note on the
goal's state, for one measured failure of the 1.5B model, and says which in its docstring. They apply in
the order of `FILTERS`, in one loop (`narrowed`), inside `LLMAgent.build_request`; the model still
decides among what is left.

Each filter is switchable: `[agent] guidance = "off"` switches them all off (the grammar is then the
action set's, with role-aware id sets when `role_aware` is on, and the prompt carries no goal note);
`[agent] guidance_off = ["name", ...]` switches single filters off (`active_filters`). The names are
also `awm.config.GUIDANCE_FILTERS`, where the settings check them (a test holds the two lists equal).
"""

from __future__ import annotations

import inspect
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from awm.actions import ACTION_SETS, TEXT_ENTRY_ROLES, TOGGLE_ROLES
from awm.config import GuidanceMode
from awm.errors import ConfigError
from awm.goal_values import extract_goal_literals
from awm.grounding.snapshot import Element
from awm.memory.view import opened_item
from awm.memory.workflow import PLACEHOLDER
from awm.trajectory import Step, action_values
from awm.webarena.answer_check import asks_question
from awm.webarena.env import PageState
from awm.webarena.fingerprint import ControlState
from awm.webarena.goal_progress import GoalGuidance, guidance
from awm.webarena.sanitize import ELLIPSIS, plain_words, sanitize_text
from awm.webarena.workflow_run import CallableWorkflow, page_elements, starts_here


@dataclass(frozen=True)
class Offer:
    """What the model is offered this step: per action the element ids it may name (`ids_for`; an action
    not listed takes every id on the page; None: no per-action sets at all), the action names (None: the
    browser action set), the prompt's note on the goal's state and the workflows it may not call."""

    ids_for: dict[str, list[str]] | None
    names: list[str] | None
    note: str = ""
    spent_workflows: frozenset[str] = frozenset()  # workflows not offered to `run_workflow` this step
    # The filters that changed this offer (held an answer back or added to the note), in the order they
    # acted: recorded on the step (`Step.guidance`), so a run shows which filters did anything, and where.
    acted: tuple[str, ...] = ()

    def without_ids(self, held: Collection[str], actions: Iterable[str], page_ids: list[str]) -> Offer:
        """This offer with the ids `held` taken from each of `actions` (whatever each offered before)."""
        ids_for = self.ids_for or {}
        return replace(
            self, ids_for={**ids_for, **{n: [i for i in ids_for.get(n, page_ids) if i not in held] for n in actions}}
        )


@dataclass
class FilterContext:
    """What a filter reads: the page, the goal, the steps so far, whether the agent ends the task itself
    (a live page, an arena site) and the workflows it may call, by name, bound from the goal. The goal's
    state is worked out once, on first use."""

    page: PageState
    goal: str
    history: Sequence[Step]
    ends_itself: bool = False
    workflows: Mapping[str, CallableWorkflow] = field(default_factory=dict)
    # Part name -> the parts it follows in any procedure that taught it (`MemoryView.follows`); a part
    # not listed follows what its own provenance says.
    follows: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @cached_property
    def goal_state(self) -> GoalGuidance:
        return guidance(self.page, self.goal, self.history)

    @cached_property
    def elements(self) -> list[Element]:
        """The page's elements as grounding sees them (`page_elements`): once per step, for every filter
        that asks whether a workflow starts here."""
        return page_elements(self.page)

    @cached_property
    def opened(self) -> dict[str, tuple[str, str, str] | None]:
        """What each workflow ends by opening, its values bound (`awm.memory.view.opened_item`): once
        per step, for every filter that compares the items workflows open."""
        return {name: opened_item(c.workflow, c.bound) for name, c in self.workflows.items()}


@dataclass(frozen=True)
class GuidanceFilter:
    """One named filter: `narrow(context, offer)` returns the offer it leaves.

    `role_aware_only`: applied only with `[agent] role_aware` on, as before the filters were named (with
    it off the grammar is the page's ids alone, the grammar the role-aware one was measured against).
    `gives_way`: taken back when what is left gives the grammar no answer at all.
    """

    narrow: Callable[[FilterContext, Offer], Offer]
    role_aware_only: bool = True
    gives_way: bool = False

    @property
    def name(self) -> str:
        return self.narrow.__name__

    @property
    def why(self) -> str:
        return inspect.getdoc(self.narrow) or ""


# -- what the filters compute ----------------------------------------------------------------------


def _target(step: Step, *, failed_too: bool = False) -> tuple[str, str] | None:
    """(action name, element id) of a step that executed without error (`failed_too`: or that was
    tried and failed), else None."""
    if not step.action or (step.outcome != "ok" and not failed_too):
        return None
    args = step.action.get("args")
    bid = args.get("bid") if isinstance(args, dict) else None
    return (str(step.action.get("name", "")), str(bid)) if bid is not None else None


def _shows_value(page_text: str, bid: str) -> bool:
    """Whether the page line of element `bid` shows a current value (`value='...'`)."""
    head = f"[{bid}] "
    return any(line.startswith(head) and " value='" in line for line in page_text.splitlines())


def typed_own_label(step: Step) -> bool:
    """Whether the step was a fill of its field's own label that the executor refused
    (`awm.webarena.executor.own_words_refusal`, the same comparison)."""
    args = step.action.get("args") if step.action else None
    value = plain_words(str(args.get("value", ""))) if isinstance(args, dict) else ""
    label = plain_words(step.target.label) if step.target is not None else ""
    return step.outcome == "action_error" and bool(value) and value == label


def without_spent_choices(
    ids_for: dict[str, list[str]],
    page_ids: list[str],
    history: Sequence[Step],
    page_text: str,
    fingerprint: str,
    *,
    ends_itself: bool = False,
) -> dict[str, list[str]]:
    """Per-action ids minus the choices that cannot move the task on (why: `spent_choices`): the same
    state-setting action on the element the last step just set; `fill` on a field this episode already
    filled that still shows a value; every action already tried on this very page state (same
    fingerprint), worked or failed (but not a `fill` that typed the field's own label into it); and, where the agent ends the task itself (`ends_itself`), every
    click made on this page since its last fill, select or check."""
    out = dict(ids_for)

    def drop(name: str, bid: str) -> None:
        out[name] = [i for i in out.get(name, page_ids) if i != bid]

    last = _target(history[-1]) if history else None
    if last is not None and ACTION_SETS["browser"][last[0]].sets_state:
        drop(*last)
    if ends_itself and history:
        # A click already made on this page (same URL) since the last state-setting action is spent: a
        # button clicked before a field was filled (Add, Search) is offered again once it was filled.
        url = history[-1].url
        for step in reversed(history):
            done = _target(step)
            if step.url != url or (done is not None and ACTION_SETS["browser"][done[0]].sets_state):
                break
            if done is not None and done[0] == "click":
                drop("click", done[1])
    for step in history:
        done = _target(step)
        if done is not None and done[0] == "fill" and _shows_value(page_text, done[1]):
            drop("fill", done[1])
        tried = _target(step, failed_too=True) if step.fingerprint == fingerprint else None
        if tried is not None and tried[0] == "fill" and typed_own_label(step):
            continue  # refused (`executor.own_words_refusal`): the field was never tried with a value
        if tried is not None and tried[0] in ACTION_SETS["browser"]:
            drop(*tried)
    return out


CHOSEN_BY_CLICK_ROLES = frozenset({"option", "tab"})


def _already_chosen(control: ControlState) -> bool:
    """A ticked checkbox or radio button, a selected option or tab: what a click on it chose is chosen."""
    if control.role in TOGGLE_ROLES:
        return "checked" in control.flags
    return control.role in CHOSEN_BY_CLICK_ROLES and "selected" in control.flags


def without_undoing_clicks(ids_for: dict[str, list[str]], page: PageState) -> dict[str, list[str]]:
    """Per-action ids minus clicks on what the page shows already chosen: ticked boxes and radio buttons,
    selected options and tabs (why: `undoing_clicks`)."""
    controls = page.snapshot.controls if page.snapshot else {}
    chosen = {bid for bid, control in controls.items() if _already_chosen(control)}
    if not chosen:
        return ids_for
    return {**ids_for, "click": [i for i in ids_for.get("click", page.ids) if i not in chosen]}


def spent_plain_actions(history: Sequence[Step], page: PageState) -> set[str]:
    """Names of actions without an element (scroll, noop...) already taken on this page as it is now:
    same fingerprint and the same text, so the page, scrolled or not, showed nothing new (why:
    `repeated_plain_actions`)."""
    return {
        str(step.action.get("name", ""))
        for step in history
        if step.action
        and _target(step, failed_too=True) is None
        and step.fingerprint == page.fingerprint
        and step.observation == page.text
    }


# Roles that `fill` sets and a click only disturbs (`filled_not_clicked`).
FILLED_NOT_CLICKED = (TEXT_ENTRY_ROLES - {"combobox"}) | {"slider"}
# Actions whose click or key press would use a control that waits for the goal's own (`goal_waiting`).
WAITING_ACTIONS = ("click", "press", "select_text")


# -- the filters -----------------------------------------------------------------------------------


def spent_choices(context: FilterContext, offer: Offer) -> Offer:
    """Holds the choices that cannot move the task on (`without_spent_choices`).

    Why: measured on the 1.5B model, once the grammar stopped it filling the Submit button it filled
    the same text field again step after step, or pressed Enter in it and filled it again, until the
    loop stop. Taken out for the next step: the same state-setting action on the element the last step
    just set, and `fill` on a field this episode already filled that still shows a value (a `press` that
    left the page as it was is taken out by the same-state rule below). What is left (click Submit) moves
    the task on; a real correction stays possible (clear, then fill).

    On every page also each action already tried on this very page state (same fingerprint: same
    structure, values, checks and focus), whether it worked or failed: the page answers an action the
    same way twice, so taking it again from here can only fail again or go round a cycle. Measured on
    the development split before this rule: 58 of 131 failed episodes ended at the loop stop, most of
    them one click repeated, and navigate-tree toggled a folder open and shut (A-B-A-B) until it.

    Where the agent ends the task itself (a live page, an arena site) also every click already made on
    this page since its last fill, select or check: measured on ten small pages, the model clicked the
    button that had just worked again and again (the mug added to the cart ten times, the open tab
    clicked until the loop stop), and with only the last click taken away it went back and forth between
    two tabs; with those clicks spent it finishes or moves on, and a button clicked too early (Add
    before typing) comes back once the field is filled.
    """
    page = context.page
    ids_for = without_spent_choices(
        offer.ids_for or {}, page.ids, context.history, page.text, page.fingerprint, ends_itself=context.ends_itself
    )
    return replace(offer, ids_for=ids_for)


def undoing_clicks(context: FilterContext, offer: Offer) -> Offer:
    """Holds clicks on what the page shows already chosen: ticked boxes and radio buttons, selected
    options and tabs (`uncheck` stays offered for a box that must be cleared).

    Why: measured on the development split, the 1.5B model clicked the box it had to tick, then clicked
    it again (unticking it) and again until the loop stop (click-checkboxes); it clicked the radio button
    or the list option it had chosen three and four times (click-option, click-scroll-list). A click on
    what is chosen undoes it or does nothing.
    """
    return replace(offer, ids_for=without_undoing_clicks(offer.ids_for or {}, context.page))


def disabled_targets(context: FilterContext, offer: Offer) -> Offer:
    """Holds the elements the page shows disabled, for every action that needs an enabled target (the
    executor refuses it there anyway), and for `focus`: a disabled element takes no focus either (the
    model focused the disabled password field).

    Why: measured on login-user-popup, a popup disabled the form; the model filled, cleared, clicked and
    pressed Enter on the disabled fields until the step limit, while the popup's own buttons waited.
    """
    page = context.page
    disabled = {bid for bid in page.ids if "disabled" in page.flags(bid)}
    if not disabled:
        return offer
    acting = [name for name, spec in ACTION_SETS["browser"].items() if spec.needs_interactable or name == "focus"]
    return offer.without_ids(disabled, acting, page.ids)


def filled_not_clicked(context: FilterContext, offer: Offer) -> Offer:
    """Holds clicks on sliders and text fields (`FILLED_NOT_CLICKED`): a field is filled, not clicked
    (`fill` focuses the field itself; `focus` stays offered). On a page where the agent ends the task
    itself (a live page, an arena site) an empty field that was not clicked yet keeps one click: a date
    picker or an autocomplete opens on it there. A combobox keeps its click: a custom one opens its list
    that way.

    Why: measured, the model clicked the 'to:' field of email-inbox-forward again and again after filling
    it, and multi-layouts' fields before filling them, until the step limit; a click on a slider moves
    its handle to the box's centre (use-slider). Holding every click on a text field, as before, left a
    field that opens a picker on click unusable on ordinary sites; on MiniWoB++ pages, where the
    failures above were measured and no field opens anything, every click on a field stays held.
    """
    page = context.page
    clicked = {
        str((s.action or {}).get("args", {}).get("bid"))
        for s in context.history
        if s.outcome == "ok" and (s.action or {}).get("name") == "click"
    }
    held = {
        bid
        for bid, d in page.elements.items()
        if d.role in FILLED_NOT_CLICKED
        and (not context.ends_itself or d.role == "slider" or bid in clicked or _shows_value(page.text, bid))
    }
    return offer.without_ids(held, ["click"], page.ids)


def goal_waiting(context: FilterContext, offer: Offer) -> Offer:
    """Holds, for click, press and select_text, what waits for the goal's own controls
    (`awm.webarena.goal_progress.guidance`, which lists every case and the failure it came from): the
    buttons while a box the goal names is not ticked yet or a value it names is not typed yet, the other
    links when it names one by its text, the other options of a list it names options of.

    Why: Submit clicked early ends the task half done (click-checkboxes-large: one of the listed boxes
    ticked, then Submit); another word than the link the goal names ends it wrong (click-collapsible-2,
    click-tab-2, click-link).
    """
    waiting = context.goal_state.waiting
    if not waiting:
        return offer
    return offer.without_ids(waiting, WAITING_ACTIONS, context.page.ids)


def goal_note(context: FilterContext, offer: Offer) -> Offer:
    """Adds to the prompt, after the page, what the goal names that is not done yet on this page (its
    controls not done, its values not typed, a link it names that is not here) and why a button waits
    (`awm.webarena.goal_progress.guidance`).

    Why: held off a button by `goal_waiting`, the model is told what is left instead of guessing why;
    measured on the development split, it ticked one of the boxes a goal listed and clicked Submit
    (click-checkboxes-large 0/3), or ticked two of four.
    """
    return replace(offer, note=context.goal_state.note)


def first_step_infeasible(context: FilterContext, offer: Offer) -> Offer:
    """Holds `report_infeasible` on the first step where the agent ends the task itself (a live page, an
    arena site).

    Why: measured, the model gave up on a question page before looking.
    """
    if not context.ends_itself or context.history or offer.names is None:
        return offer
    return replace(offer, names=[n for n in offer.names if n != "report_infeasible"])


def infeasible_after_reaction(context: FilterContext, offer: Offer) -> Offer:
    """Holds `report_infeasible` right after the page visibly reacted to the last action (new text, a
    box checked, a tab selected: `Step.reaction`) where the agent ends the task itself; the finishing
    message, and every other action, stay.

    Why: measured on ten small pages (scripts/bench_live.py), the 1.5B model clicked the right button,
    the page showed the result, and it ended `infeasible` (3 of 7 such episodes). A page that just moved
    is no sign that the goal is impossible; one step later, with no reaction, giving up is offered again.
    """
    if not context.ends_itself or not context.history or offer.names is None:
        return offer
    last = context.history[-1]
    if last.outcome != "ok" or not last.reaction:
        return offer
    return replace(offer, names=[n for n in offer.names if n != "report_infeasible"])


# A value of this many words the goal states is a composed text (a comment, a message, a description),
# not a name or a choice.
COMPOSED_TEXT_WORDS = 3


def is_composed(text: str) -> bool:
    """Whether a value the goal states is a composed text (`COMPOSED_TEXT_WORDS` words or more)."""
    return len(text.split()) >= COMPOSED_TEXT_WORDS


def _composed_fills(goal: str, history: Sequence[Step]) -> list[tuple[int, str]]:
    """(step index, text) for each `fill` of this episode that worked and typed a text of several words
    the goal states that no page had shown before it: a text to post, not the name of a thing the site
    has (a ticket's title, typed into the comment box, is shown on the ticket's page)."""
    texts = [x.text for x in extract_goal_literals(goal) if is_composed(x.text)]
    return [
        (i, text)
        for i, step in enumerate(history)
        if step.outcome == "ok" and step.action and step.action.get("name") == "fill"
        for text in texts
        if any(text.casefold() in value.casefold() for value in action_values(step))
        and not any(sanitize_text(text, 0).casefold() in seen.observation.casefold() for seen in history[: i + 1])
    ]  # fmt: skip


def _holds(shown: str | None, text: str) -> bool:
    """Whether a field's shown value (sanitized, cut to a line's length) is, or holds, `text`."""
    if not shown:
        return False
    value, wanted = shown.casefold(), sanitize_text(text, 0).casefold()
    return wanted in value or (value.endswith(ELLIPSIS) and wanted.startswith(value.removesuffix(ELLIPSIS)))


def box_holding_typed_text(goal: str, page: PageState, history: Sequence[Step]) -> str | None:
    """The id of a text box of several lines on this page that holds a text of several words the goal
    states, typed by a `fill` of this episode: typed and not sent yet; else None. A site clears the box
    (or leaves the page) once the text is posted; a preview, a resize grip or a help link leaves it there."""
    typed = {text for _, text in _composed_fills(goal, history)}
    return next(
        (bid for bid in page.ids if bid in page.multiline and any(_holds(page.value(bid), t) for t in typed)), None
    )


def _sends(step: Step) -> bool:
    """Whether `step` is a click or key press that worked: what sends a form's typed value."""
    return step.outcome == "ok" and (step.action or {}).get("name") in ("click", "press")


def typed_not_sent(goal: str, history: Sequence[Step], page: PageState) -> bool:
    """Whether a text of several words the goal states is typed and not sent yet: a box of several lines
    here holds it (`box_holding_typed_text`), or its last `fill` is followed by no click or key press
    that worked (a one-line field that holds it)."""
    if box_holding_typed_text(goal, page, history) is not None:
        return True
    fills = _composed_fills(goal, history)
    if not fills:
        return False
    after = history[fills[-1][0] + 1 :]
    return not any(_sends(s) for s in after)


# The actions that end the task where the agent ends it itself.
ENDINGS = ("report_infeasible", "send_msg_to_user")


def ending_before_composed_text(context: FilterContext, offer: Offer) -> Offer:
    """Holds the endings (`report_infeasible`, `send_msg_to_user`), where the agent ends the task itself,
    while a text of several words the goal states is not on the site yet: neither typed nor shown on any
    page so far (`GoalGuidance.untyped`) while the page has a text box of several lines (a textarea,
    `PageState.multiline`) that takes text, or typed and not sent: a box of several lines still holds
    it, or no click or key press ran since (`typed_not_sent`); every other action stays.

    Why: measured on the arena's comment-ticket (Trac, instances 2 and 3): logged in, on the ticket's
    page, its comment box empty and the comment not typed, the 1.5B model reported the page had no
    comment field (5 of 5 episodes); with only giving up held, it sent the comment as its message to the
    user; with both held, it typed the comment into the box and reported it "already filled". Why it
    holds on an ordinary site: a sentence the user asks to post reaches the site only by being typed and
    sent, and a box of several lines is where a site takes one; a site that does not let this user post
    shows no such box (Trac hides the comment box from whoever may not comment), and once the text is
    typed and a button clicked (or a page shows it), both endings are offered again. A question's quoted
    texts are what to find, not what to type: a goal that asks one is left alone (a shop's contact form
    has a box of several lines on every page, and a product that is not there must be reported so).
    """
    if not context.ends_itself or offer.names is None or asks_question(context.goal):
        return offer
    page = context.page
    untyped = any(is_composed(text) for text in context.goal_state.untyped) and any(
        "disabled" not in page.flags(bid) for bid in page.multiline if bid in page.elements
    )
    if not untyped and not typed_not_sent(context.goal, context.history, page):
        return offer
    return replace(offer, names=[n for n in offer.names if n not in ENDINGS])


# What acts on an element and so may leave a form, or type a text into another one (`sending_composed_text`).
ELEMENT_ACTIONS = ("click", "press", "fill", "select_option", "check", "uncheck", "select_text")
# Inside a form, what is no field and no button: a link leaves the page, a clickable box (a resize grip,
# a help toggle) sends nothing (`sending_composed_text`).
LEAVING_ROLES = frozenset({"link", "clickable"})


def _outside_form(page: PageState, form: str) -> set[str]:
    """The ids outside `form`, and its links and clickable boxes (`LEAVING_ROLES`): what leaves it."""
    return {b for b in page.ids if page.forms.get(b) != form or page.elements[b].role in LEAVING_ROLES}


def _named(page: PageState, bids: Iterable[str]) -> list[str]:
    """`[id] 'label'` for each of `bids` that has a label, as a note names a button."""
    return [f"[{bid}] '{page.elements[bid].label}'" for bid in bids if page.elements[bid].label]


def _with_note(offer: Offer, note: str) -> Offer:
    """`offer` with `note` added after the note it carries."""
    return replace(offer, note="\n".join(part for part in (offer.note, note) if part))


def sending_composed_text(context: FilterContext, offer: Offer) -> Offer:
    """While a box of several lines in a form holds a text of several words the goal states, typed this
    episode (`box_holding_typed_text`): holds every element outside that form and the form's links and
    clickable boxes (`LEAVING_ROLES`), a button of the form already clicked since the text was typed
    (it left the text unsent: a preview), and `go_back`; and tells the model which of the form's buttons
    send it ("its form sends it with [313] 'Submit changes'"). The form's own fields, its other buttons
    and scrolling stay. With every button of the form clicked already, they all stay.

    Why: measured on the arena's comment-ticket (Trac, instance 3, e57ca5f): the 1.5B model typed the
    comment into the ticket's comment box, then typed it into the site's search box as well, scrolled,
    went back to the ticket list and reached the step limit; "Submit changes" was never clicked. With
    what lies outside the form held, it clicked the box's resize grip, and then "Preview" (instances 2
    and 3), after which the box still held the comment and it reported the box "already filled". Why it
    holds on an ordinary website: a message, a review or a reply typed into a box of several lines
    reaches the site only through its form's button, leaving the form (a link, another form's field,
    going back) loses what was typed, and a site clears the box once the text is posted, so a button
    that left it in the box did not post it. A page without forms (`PageState.forms` empty: a
    script-driven page) says nothing of which button sends, and nothing is held there.
    """
    page = context.page
    box = box_holding_typed_text(context.goal, page, context.history)
    form = page.forms.get(box, "") if box is not None else ""
    if not form:
        return offer
    outside = _outside_form(page, form)
    buttons = [bid for bid in page.ids if bid not in outside and page.elements[bid].role == "button"]
    since = _composed_fills(context.goal, context.history)[-1][0]
    clicked = {
        step.target.label
        for step in context.history[since + 1 :]
        if step.outcome == "ok" and step.target is not None and (step.action or {}).get("name") == "click"
    }
    tried = {bid for bid in buttons if page.elements[bid].label in clicked}
    if tried != set(buttons):
        outside |= tried
        buttons = [bid for bid in buttons if bid not in tried]
    offer = offer.without_ids(outside, ELEMENT_ACTIONS, page.ids)
    if offer.names is not None:
        offer = replace(offer, names=[n for n in offer.names if n != "go_back"])
    named = _named(page, buttons)
    if not named:
        return offer
    sent = f"The goal's text is typed in [{box}] and not sent yet: its form sends it with " + ", ".join(named)
    left = sorted({f"'{page.elements[bid].label}'" for bid in tried if bid in outside})
    sent += f" ({', '.join(left)} left it in the box)." if left else "."
    return _with_note(offer, sent)


def _fill_not_sent(history: Sequence[Step], url: str) -> Step | None:
    """The episode's last `fill` that worked, where no click or key press worked since and the page is
    still at its URL; else None."""
    for step in reversed(history):
        if _sends(step):
            return None
        if step.outcome == "ok" and (step.action or {}).get("name") == "fill":
            return step if step.url == url else None
    return None


def sending_typed_value(context: FilterContext, offer: Offer) -> Offer:
    """While a value the goal states (a quoted title, a code, a name: `extract_goal_literals`) typed into
    a one-line field of a form is not sent (no click or key press worked since the `fill`, the page is
    at the same URL, the field still holds it) and the page showed nothing in answer to the typing (no
    list of suggestions: `Step.reaction` empty): holds every element outside that form and the form's
    links (`LEAVING_ROLES`), `go_back`, scrolling and the endings, and tells the model how the form sends
    it ("its form sends it with [55] 'Search', or press('54', 'Enter')"). The form's fields and buttons,
    `press` and workflows stay. Only where the agent ends the task itself (`ends_itself`): on a benchmark
    page the page ends the task.

    Why: measured on the arena's shop (offline-demos, instance 2, 2e5f1a8; `runs/shop-probe4`): on
    product-price, product-brand and open-product the 1.5B model typed the product's title into the
    catalogue's search box and then, the search never run, reported the product missing, answered, or
    typed the title into the sort list (three episodes of three); held for one step only (eadf302), it
    scrolled and then answered from the page it was on. Why it holds on an ordinary website: a value
    typed into a form's one-line field reaches the site only when its form is sent (its button, or
    Enter): a search, a voucher code, a user name; an answer or a page left before that was given before
    the site saw it. A field that answered the typing (suggestions appeared: an autocomplete) is left
    alone, since choosing a suggestion is how such a field is sent.
    """
    if not context.ends_itself:
        return offer
    page = context.page
    fill = _fill_not_sent(context.history, page.url)
    if fill is None or fill.reaction:
        return offer
    bid = str(((fill.action or {}).get("args") or {}).get("bid", ""))
    form = page.forms.get(bid, "")
    one_line = bid in page.elements and page.elements[bid].role in TEXT_ENTRY_ROLES and bid not in page.multiline
    if not form or not one_line:
        return offer
    if not any(_holds(page.value(bid), x.text) for x in extract_goal_literals(context.goal)):
        return offer
    outside = _outside_form(page, form)
    offer = offer.without_ids(outside, ELEMENT_ACTIONS, page.ids)
    names = offer.names if offer.names is not None else list(ACTION_SETS["browser"])
    offer = replace(offer, names=[n for n in names if n not in ("go_back", "scroll", *ENDINGS)])
    buttons = _named(page, (b for b in page.ids if b not in outside and page.elements[b].role == "button"))
    sends = f"its form sends it with {', '.join(buttons)}, or " if buttons else "send it with "
    sends += f"press('{bid}', 'Enter')"
    return _with_note(offer, f"The goal's value is typed in [{bid}] and not sent yet: {sends}.")


def no_page_to_go_back_to(context: FilterContext, offer: Offer) -> Offer:
    """Holds `go_back` while every step of the episode so far was on the page shown now: there is no
    page of this task to go back to, and the browser's history holds only the blank tab it opened from.

    Why: measured on ten small pages (scripts/bench_live.py), the 1.5B model's first action on two
    question pages was `go_back()`, which left the site for about:blank, and it then reported the
    question infeasible.
    """
    names = offer.names if offer.names is not None else list(ACTION_SETS["browser"])
    if "go_back" not in names or any(step.url and step.url != context.page.url for step in context.history):
        return offer
    return replace(offer, names=[n for n in names if n != "go_back"])


def repeated_plain_actions(context: FilterContext, offer: Offer) -> Offer:
    """Holds the actions without an element (scroll, noop...) already taken on this page as it is now
    (`spent_plain_actions`): same fingerprint and the same text, so the page showed nothing new. Gives way
    when nothing else is left (a page with no element ids whose scroll did nothing): the repeat count
    then ends the episode as stuck.

    Why: measured on click-pie, the model scrolled a page that does not scroll three times, until the loop
    stop; on a long page a scroll that reveals lines changes the text and stays offered.
    """
    spent = spent_plain_actions(context.history, context.page)
    if not spent:
        return offer
    names = offer.names if offer.names is not None else list(ACTION_SETS["browser"])
    return replace(offer, names=[n for n in names if n not in spent])


def completed_workflows(context: FilterContext, offer: Offer) -> Offer:
    """Holds a workflow whose `run_workflow` call already ran all its steps in this episode.

    Why: it did its job, and what is left is the agent's (an information workflow ends on the page the
    answer is read from). Measured on the arena's Trac information templates: after the workflow opened
    the ticket, the model called it again instead of answering, and again, until the episode timed out;
    called again, a workflow starts over from wherever the page now is. Another way to open what a
    completed call opened (the same ticket through another report, `awm.memory.view.top_k_ways`) is
    held too: on Trac's site scope the model opened the ticket, then opened it again the other way.
    """
    done = completed_calls(context.history)
    opened = {item for name in done if (item := context.opened.get(name))}
    done |= {name for name, item in context.opened.items() if item in opened}
    return replace(offer, spent_workflows=offer.spent_workflows | done) if done else offer


def called_workflow(step: Step) -> str:
    """The name of the workflow a step of the agent's own (not a workflow's sub-step) called with
    `run_workflow`; "" for any other step."""
    if step.called_by is not None or (step.action or {}).get("name") != "run_workflow":
        return ""
    return str((step.action or {}).get("args", {}).get("name", ""))


def completed_calls(history: Sequence[Step]) -> set[str]:
    """The workflows whose `run_workflow` call ran all their steps in this episode, by name."""
    return {name for step in history if (name := called_workflow(step)) and step.outcome == "ok"}


_CALLED = re.compile(r"run_workflow\(\s*(['\"])(.+?)\1")
REFUSALS_BEFORE_HOLD = 2


def refused_workflows(context: FilterContext, offer: Offer) -> Offer:
    """Holds a workflow whose `run_workflow` call the parser refused twice in this episode (a name it
    does not take, a value that is no value): the model is then left to act on the page itself.

    Why: measured on the arena (ticket-priority, site scope), the model called a workflow with
    `{'username': '...'}`, was told '...' is no value, and sent the same call again nine times, until
    the step limit; one refusal leaves it a try to mend the call.
    """
    counts: dict[str, int] = {}
    for step in context.history:
        if step.called_by is None and step.outcome == "parse_error" and (match := _CALLED.search(step.model_output)):
            counts[match.group(2)] = counts.get(match.group(2), 0) + 1
    refused = {name for name, n in counts.items() if n >= REFUSALS_BEFORE_HOLD}
    return replace(offer, spent_workflows=offer.spent_workflows | refused) if refused else offer


def broken_workflows(context: FilterContext, offer: Offer) -> Offer:
    """Holds a workflow whose `run_workflow` call broke (a step not grounded, an action that failed) on
    the page the agent is on now, the same page state (fingerprint): called again from there, it breaks
    the same way. Elsewhere it is offered again (a part called before its page was reached may fit later).

    Why: measured on the arena (Trac, site scope, 18 templates), the model called a part whose first
    step had no target on the page it stood on ("click Modify Ticket" on the login page), was told it
    broke, and sent the same call again until the loop stop ended the episode: all 15 of the 18 episodes
    that ended stuck ended that way. A call that broke twice at the same step, from any pages, is held
    for the rest of the episode: on Trac (site scope) "move the ticket X to milestone 1.2" called the
    priority-changing part five times from five page states, and each broke choosing the priority.
    A call that broke after some of its steps ran, at a step whose target is a value the goal gave (not
    one the call gave), is held at once: its steps before that one lead where they led, and the goal's
    value is still not there. Measured on the arena's shop (template scope, instance 2, 4f0e3b0): on
    product-brand the model called "click Coffee & Tea, click {link}" and then "click Camping, click
    {link}" twice each, every call breaking at the product's link, and ran out of steps on the search
    results that would have served it.
    """
    # A call's steps that ran, by the call's index: the sub-steps it recorded that went right.
    ran = Counter(step.called_by for step in context.history if step.called_by is not None and step.outcome == "ok")
    broke: set[str] = set()
    breaks: Counter[tuple[str, int]] = Counter()
    for step in context.history:
        name = called_workflow(step)
        if not name or step.outcome == "ok":
            continue
        if step.fingerprint and step.fingerprint == context.page.fingerprint:
            broke.add(name)
        if ran[step.index] and _breaks_at_goal_value(context.workflows.get(name), ran[step.index], step):
            broke.add(name)
        breaks[(name, ran[step.index])] += 1  # broke at the step after those that ran
        if breaks[(name, ran[step.index])] >= BREAKS_BEFORE_HOLD:
            broke.add(name)
    return replace(offer, spent_workflows=offer.spent_workflows | broke) if broke else offer


BREAKS_BEFORE_HOLD = 2


def _breaks_at_goal_value(callable_workflow: CallableWorkflow | None, at: int, call: Step) -> bool:
    """Whether the workflow's step `at` (the one its call broke at) targets a value bound from the goal
    and not given by the call's own arguments."""
    if callable_workflow is None or at >= len(callable_workflow.workflow.steps):
        return False
    given = (call.action or {}).get("args", {}).get("params") or {}
    target = callable_workflow.workflow.steps[at].target
    names = set(PLACEHOLDER.findall(f"{target.label} {target.row}"))
    return any(n in callable_workflow.bound and n not in given for n in names)


def unstartable_workflows(context: FilterContext, offer: Offer) -> Offer:
    """Holds a workflow whose first step does not ground on this page (`workflow_run.starts_here`):
    neither its exact target nor the one element the executor's structural fallback would take is here,
    so a call from this page breaks on its first step. Offered again on a page where it starts.

    Why: measured on the arena (Trac, site scope, 18 templates), the model called parts whose first
    step's control was not on the page yet: "click Modify Ticket" on the login page, a ticket's link
    before its report was open; each call broke and cost a model step (43 calls, 7 ran to the end). On
    any site a procedure starts where its first control is; the model is left the page's own actions
    (or another workflow) to get there.
    """
    if not context.workflows:
        return offer
    absent = {
        name for name, callable_workflow in context.workflows.items()
        if name not in offer.spent_workflows and not starts_here(context.elements, callable_workflow)
    }  # fmt: skip
    return replace(offer, spent_workflows=offer.spent_workflows | absent) if absent else offer


def parts_in_order(context: FilterContext, offer: Offer) -> Offer:
    """Holds a part of a taught procedure while the part before it (`Provenance.follows`) is offered,
    has all its values from the goal, starts on this page and has not run in this episode: the
    procedure's order is kept (log in, then open the ticket). Once the part before it ran, or cannot
    start here (the agent did that part by hand, or the page is past it), the part is offered.

    Why: measured on the arena's Trac with site scope (7 change templates), goals such as "As dave
    (password ...), accept the ticket X" were offered the log-in and the open-the-ticket parts, and in 3
    of 7 episodes the model called open-the-ticket first: the ticket opened for a visitor, with no
    "Modify Ticket" to change it, and the model gave up. On any site a part taught after another ran on
    the state that one left (signed in, a cart filled). A goal that does not state the earlier part's
    values (a question any visitor can answer) does not ask for it, and nothing is held. A part that
    several procedures taught waits for any part it follows in one of them (`FilterContext.follows`),
    and another way to open the same item waits as that part does: on Trac with site scope the part
    that opens the ticket through the report of all tickets, taught only by a question, was called
    before logging in, while the way through Active Tickets waited for the log-in.
    """
    if not context.workflows:
        return offer
    done = completed_calls(context.history)
    follows = {
        name: set(context.follows.get(name) or (callable_workflow.workflow.provenance.follows,))
        for name, callable_workflow in context.workflows.items()
    }
    by_item: dict[tuple[str, str, str], set[str]] = {}
    for name, item in context.opened.items():
        if item is not None:
            by_item.setdefault(item, set()).update(follows[name])
    held: set[str] = set()
    for name in context.workflows:
        item = context.opened[name]
        for before_name in sorted(follows[name] | (by_item.get(item, set()) if item else set())):
            before = context.workflows.get(before_name)
            if before is None or before.open or before.name in done or before.name in offer.spent_workflows:
                continue
            if starts_here(context.elements, before):
                held.add(name)
    return replace(offer, spent_workflows=offer.spent_workflows | held) if held else offer


# In the order they apply. The goal note is added whatever `role_aware` says; so are the first-step rule
# and the workflow holds.
FILTERS: tuple[GuidanceFilter, ...] = (
    GuidanceFilter(spent_choices),
    GuidanceFilter(undoing_clicks),
    GuidanceFilter(disabled_targets),
    GuidanceFilter(filled_not_clicked),
    GuidanceFilter(goal_waiting),
    GuidanceFilter(goal_note, role_aware_only=False),
    GuidanceFilter(first_step_infeasible, role_aware_only=False),
    GuidanceFilter(infeasible_after_reaction, role_aware_only=False),
    GuidanceFilter(ending_before_composed_text, role_aware_only=False),
    GuidanceFilter(sending_composed_text, gives_way=True),
    GuidanceFilter(sending_typed_value, gives_way=True),
    GuidanceFilter(no_page_to_go_back_to, role_aware_only=False),
    GuidanceFilter(repeated_plain_actions, gives_way=True),
    GuidanceFilter(completed_workflows, role_aware_only=False),
    GuidanceFilter(refused_workflows, role_aware_only=False),
    GuidanceFilter(broken_workflows, role_aware_only=False),
    GuidanceFilter(unstartable_workflows, role_aware_only=False),
    GuidanceFilter(parts_in_order, role_aware_only=False),
)


def active_filters(
    mode: GuidanceMode = "on", switched_off: Collection[str] = (), *, role_aware: bool = True
) -> tuple[GuidanceFilter, ...]:
    """The filters that apply, in order: none with `mode` off, else all but those `switched_off` names
    (and, with `role_aware` off, but those that only narrow role-aware sets). An unknown name is a
    `ConfigError` naming the known ones (the settings check it first; this holds for direct callers)."""
    known = [f.name for f in FILTERS]
    unknown = [name for name in switched_off if name not in known]
    if unknown:
        raise ConfigError(
            f"[agent] guidance_off names an unknown filter '{unknown[0]}' (known filters: {', '.join(known)})"
        )
    if mode == "off":
        return ()
    return tuple(f for f in FILTERS if f.name not in switched_off and (role_aware or not f.role_aware_only))


def narrowed(offer: Offer, context: FilterContext, filters: Iterable[GuidanceFilter]) -> Offer:
    """The offer each filter in turn leaves: the one loop that applies the agent's guidance. Each filter
    that changed what is offered is named in the result's `acted`."""
    for guidance_filter in filters:
        left = guidance_filter.narrow(context, offer)
        if changes_offer(offer, left, context.page.ids):
            left = replace(left, acted=(*offer.acted, guidance_filter.name))
        offer = left
    return offer


def changes_offer(before: Offer, after: Offer, page_ids: Sequence[str]) -> bool:
    """Whether `after` offers less than `before` or says more: an action or an id of an action held back,
    a workflow held, or a note added. An action absent from `ids_for` takes every id on the page, so an
    offer rewritten with the same ids spelled out changes nothing."""
    if after.note != before.note or after.spent_workflows != before.spent_workflows:
        return True
    if (None if after.names is None else set(after.names)) != (None if before.names is None else set(before.names)):
        return True
    old, new = before.ids_for or {}, after.ids_for or {}
    return any(set(new.get(n, page_ids)) != set(old.get(n, page_ids)) for n in {*old, *new})
