"""Execute one typed action: pre-check its target, run the rendered string through BrowserGym, classify.

One path: every action is rendered by `awm.actions.render_action` and executed by BrowserGym's `env.step`;
Playwright is used directly only to look before acting (does the target exist, is it visible and enabled)
and to dismiss an overlay that intercepted a click. Why pre-check: BrowserGym would wait for a disabled
button until its timeout and report an opaque TimeoutError; the check answers in milliseconds with a
failure class the model can act on.
"""

from __future__ import annotations

import calendar
import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from typing import Any, Protocol

from awm.actions import ACTION_SETS, Action, render_action
from awm.gate import ControlInfo
from awm.goal_values import extract_goal_literals
from awm.grounding.ground import norm
from awm.secrets import Secrets
from awm.trajectory import Approval, Box, StepOutcome
from awm.webarena.datepicker import MAX_MONTHS, date_asked, day_link, month_link, months_between, shown_month
from awm.webarena.field_values import field_value
from awm.webarena.outcomes import EnvCrashError, ExecResult, looks_like_crash
from awm.webarena.sanitize import plain_words, sanitize_text
from awm.webarena.slider import ROUNDS, SliderState, presses, read_slider, shown, target_value


class BrowserSession(Protocol):
    """What the executor needs of a session (`awm.webarena.env.BrowserSession` is one): the live page,
    a way to step BrowserGym with a rendered action, and a way to say the browser is gone."""

    @property
    def page(self) -> Any: ...

    def step_rendered(self, rendered: str) -> str: ...

    def mark_broken(self) -> None: ...


DISMISS_WORDS = re.compile(
    r"^\W*(close|accept|accept all|dismiss|ok|okay|got it|×|✕|✖|x|no thanks)\W*$", re.IGNORECASE
)
_CHECK_TIMEOUT_MS = 1000
ERROR_PAGE = "chrome-error://"  # where Chromium shows a navigation it could not complete

# Runs in the target's frame: what the pre-check needs to know about the element, in one round trip.
_INSPECT_JS = r"""
(e) => {
  const style = window.getComputedStyle(e);
  const rect = e.getBoundingClientRect();
  let visible = rect.width > 0 && rect.height > 0 && style.visibility !== 'hidden' && style.display !== 'none';
  if (visible && typeof e.checkVisibility === 'function') visible = e.checkVisibility({checkVisibilityCSS: true});
  const tag = e.tagName.toLowerCase();
  const select = tag === 'option' ? e.closest('select') : null;
  const optionLabel = (o) => (o.label || o.textContent || '').trim();
  // A <label> acts for its control (a fill or click on it reaches the control), so the rails read the control.
  const f = (tag === 'label' && e.control) ? e.control : e;
  const ftag = f.tagName.toLowerCase();
  const attr = (n) => f.getAttribute(n) || '';
  let label = '';
  if (f.labels && f.labels.length) label = Array.from(f.labels).map(l => l.innerText || l.textContent || '').join(' ');
  else if (attr('aria-labelledby')) label = attr('aria-labelledby').split(/\s+/).map(i => {
    const l = document.getElementById(i); return l ? (l.innerText || l.textContent || '') : ''; }).join(' ');
  const type = (attr('type') || (ftag === 'button' ? 'submit' : '')).toLowerCase();
  const form = f.form || (typeof f.closest === 'function' ? f.closest('form') : null);
  const submits = !!form && ((ftag === 'button' && type === 'submit') || (ftag === 'input' && (type === 'submit' || type === 'image')));
  return {
    tag: tag,
    type: ftag === 'input' ? (attr('type') || 'text').toLowerCase() : (ftag === 'button' ? type : ''),
    name: attr('name'),
    id: f.id || '',
    placeholder: attr('placeholder'),
    aria_label: attr('aria-label'),
    label: label.trim().slice(0, 200),
    text: ((ftag === 'input' ? (attr('type').toLowerCase() === 'password' ? '' : f.value) : (e.innerText || e.textContent)) || '').trim().slice(0, 200),
    in_form: !!form,
    submits: submits,
    role: attr('role'),
    form_words: form ? [form.id, form.getAttribute('name'), form.getAttribute('action'), form.getAttribute('aria-label'),
      ((form.querySelector('legend, h1, h2, h3, h4') || {}).innerText || ''),
      Array.from(form.elements || []).map(x => (x.getAttribute('autocomplete') || '') + ' ' + (x.name || '')).join(' ')]
      .filter(Boolean).join(' ').slice(0, 600) : '',
    visible: visible,
    disabled: (typeof e.matches === 'function' && e.matches(':disabled')) || e.getAttribute('aria-disabled') === 'true',
    inert: !!e.closest('[inert]'),
    editable: e.isContentEditable === true,
    readonly: ftag === 'input' && f.readOnly === true,
    select_bid: select ? select.getAttribute('bid') : null,
    option_label: tag === 'option' ? optionLabel(e) : null,
    select_multiple: select ? select.multiple : false,
    option_selected: tag === 'option' ? e.selected : false,
    selected_options: select ? Array.from(select.selectedOptions).map(optionLabel) : [],
    options: ftag === 'select' ? Array.from(f.options).slice(0, 200).map(optionLabel) : [],
  };
}
"""

# Runs in the main frame: find a visible close/accept control on top of the page and tag it for a click.
_FIND_DISMISS_JS = """
(pattern) => {
  const re = new RegExp(pattern, 'i');
  const nodes = document.querySelectorAll('button, a, [role=button], input[type=button], input[type=submit], [aria-label]');
  for (const el of nodes) {
    const text = ((el.getAttribute('aria-label') || '') + '|' + (el.innerText || el.value || '')).split('|');
    if (!text.some(t => re.test(t.trim()))) continue;
    const r = el.getBoundingClientRect();
    if (r.width <= 0 || r.height <= 0) continue;
    const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (!top || !(el === top || el.contains(top))) continue;
    el.setAttribute('awm-dismiss', '1');
    return (el.getAttribute('aria-label') || el.innerText || el.value || '').trim().slice(0, 40);
  }
  return null;
}
"""


class _Target(ControlInfo, frozen=True):
    """What the pre-check reads of a target: the rails' facts plus visibility, state and select info."""

    visible: bool = True
    disabled: bool = False
    inert: bool = False
    editable: bool = False
    readonly: bool = False
    select_bid: str | None = None
    option_label: str | None = None
    select_multiple: bool = False  # the option's <select> takes several choices
    option_selected: bool = False
    selected_options: list[str] = []  # the labels its <select> has chosen now
    options: list[str] = []  # a <select>'s own option labels (a fill on it chooses one: `_fill_in_list`)


def locate(page: Any, bid: str) -> Any | None:
    """A Locator for `bid`, descending through iframes as BrowserGym's `get_elem_by_bid` does; None if absent.

    BrowserGym's bids encode the frame path: ``aDb12`` lives in frame ``aD`` inside frame ``a``.
    """
    frame = page
    i = 0
    while bid[i:] and not bid[i:].isnumeric():
        i += 1
        while bid[i:] and bid[i].isalpha() and bid[i].isupper():
            i += 1
        frame_elem = frame.get_by_test_id(bid[:i])
        if not frame_elem.count():
            return None
        frame = frame_elem.frame_locator(":scope")
    elem = frame.get_by_test_id(bid)
    return elem.first if elem.count() else None


def _inspect(locator: Any) -> _Target:
    data = locator.evaluate(_INSPECT_JS, timeout=_CHECK_TIMEOUT_MS)
    return _Target.model_validate({k: v for k, v in data.items() if k in _Target.model_fields})


def control_of(target: _Target) -> ControlInfo:
    """What the rails and the gate read of a target (`awm.gate.ControlInfo`)."""
    return ControlInfo(**target.model_dump(include=set(ControlInfo.model_fields)))


def read_control(page: Any, bid: str) -> ControlInfo | None:
    """The element `bid` as the rails see it (tag, type, label, name, ...), or None if it is not there."""
    locator = locate(page, bid)
    if locator is None:
        return None
    try:
        return control_of(_inspect(locator))
    except Exception:  # detached: the check right before the action reads it again
        return None


def _review(
    session: BrowserSession, action: Action, target: _Target | None, what: str
) -> tuple[ExecResult | None, Approval | None]:
    """The rails' review of `action` right before it runs, on a live run: (the `denied` result when a person
    said no, else None; the gate's approval when one was asked, else None). `what` names the action in
    the denial the model reads ("the drag"). The rails read `target`, the control the pre-check read, or
    for an element with no pre-check (a calendar's own links) the control as it is now. A benchmark run
    has no rails: nothing is reviewed and the page is not read again.
    """
    rails = getattr(session, "rails", None)
    if rails is None:
        return None, None
    bid = action.target_id
    control = control_of(target) if target is not None else read_control(session.page, bid) if bid else None
    approval = rails.review(action, control, session.page)
    if approval is None or approval.approved:
        return None, approval
    error = (
        f"a person must approve {what} ({approval.reason}) and it was denied "
        f"(answered by {approval.approver}); do not try it again"
    )
    return ExecResult(outcome="denied", approval=approval, error=error), approval


def _describe(bid: str, target: _Target | None = None) -> str:
    return f"element [{bid}]" + (f" <{target.tag}>" if target and target.tag else "")


def classify_error(error: str) -> tuple[StepOutcome, bool]:
    """BrowserGym's last_action_error -> (failure class, transient?)."""
    low = error.lower()
    if "could not find element" in low:
        return "target_not_found", False
    if "intercepts pointer events" in low:
        return "not_interactable", False
    if "element is not enabled" in low or "element is disabled" in low or "not editable" in low:
        return "not_interactable", False
    if "element is not visible" in low or "element is outside of the viewport" in low:
        return "not_interactable", False
    if "detached" in low or "not attached" in low or "execution context was destroyed" in low:
        return "action_error", True
    if "timeout" in low:
        return "action_error", True
    return "action_error", False


def short_error(error: str, limit: int = 300) -> str:
    """The first line of a Playwright error plus its most telling call-log line, sanitized (page text inside)."""
    lines = [ln.strip() for ln in error.splitlines() if ln.strip()]
    if not lines:
        return ""
    head = lines[0]
    telling = [
        ln
        for ln in lines[1:]
        if "intercepts pointer events" in ln or "not enabled" in ln or "not visible" in ln
    ]
    if telling and telling[-1] not in head:
        head += " (" + telling[-1].lstrip("- ") + ")"
    return sanitize_text(head, limit)


def dismiss_overlay(page: Any) -> str | None:
    """Click a visible close/accept/dismiss/ok control on top of the page once; returns its text or None."""
    try:
        label = page.evaluate(_FIND_DISMISS_JS, DISMISS_WORDS.pattern)
        if label is None:
            return None
        button = page.locator("[awm-dismiss]").first
        button.click(timeout=_CHECK_TIMEOUT_MS)
        page.evaluate(
            "() => document.querySelectorAll('[awm-dismiss]').forEach(e => e.removeAttribute('awm-dismiss'))"
        )
        return sanitize_text(label, 40) or "×"
    except Exception:  # the overlay may vanish or navigate away; the retry below tells the truth
        return None


@dataclass
class _Prepared:
    """What the pre-check found: the actions to run, an early failure, a note, and the target read."""

    actions: list[Action]
    early: ExecResult | None = None
    note: str = ""
    target: _Target | None = None
    slider: SliderState | None = None  # a fill on a slider: moved by arrow keys (`awm.webarena.slider`)
    calendar_date: date | None = (
        None  # a fill on a read-only date field: picked in its calendar (`datepicker`)
    )


def _prepare(session: BrowserSession, action: Action) -> _Prepared:
    """Pre-check the target and rewrite what must be rewritten."""
    bid = action.target_id
    if bid is None:
        return _Prepared([action])
    locator = locate(session.page, bid)
    if locator is None:
        return _Prepared(
            [], ExecResult(outcome="target_not_found", error=f"element [{bid}] is not on the page")
        )
    try:
        target = _inspect(locator)
    except Exception as exc:  # detached between count() and evaluate(): worth a retry
        return _Prepared([], ExecResult(outcome="action_error", error=short_error(str(exc)), transient=True))
    note = ""
    if action.name == "click" and target.tag == "option" and target.select_bid:
        # A native <select>'s options cannot be clicked; choose the option through its select instead.
        label = target.option_label or ""
        shown = sanitize_text(label, 40)
        if target.select_multiple:
            # In a list that takes several choices a click adds the option, or takes a chosen one away, as
            # Ctrl+click does: replacing the choice undid the one before (click-scroll-list: the model chose
            # Ertha, then Aurel, and only Aurel was left).
            kept = [o for o in target.selected_options if o != label]
            chosen: str | list[str] = kept if target.option_selected else [*kept, label]
            verb = "took away" if target.option_selected else "added"
            now = sanitize_text(", ".join(chosen), 120) or "none"
            note = f"{verb} '{shown}' in the list [{target.select_bid}]; chosen now: {now}"
        else:
            chosen = label
            note = f"chose '{shown}' in the dropdown [{target.select_bid}] with select_option"
        return _chosen_in_list(session, target.select_bid, chosen, note)
    if ACTION_SETS["browser"][action.name].needs_interactable:
        what = _describe(bid, target=target)
        problem = (
            "is inert (behind a modal)" if target.inert
            else "is disabled" if target.disabled
            else "is not visible" if not target.visible
            else ""
        )  # fmt: skip
        if problem:
            return _Prepared(
                [], ExecResult(outcome="not_interactable", error=f"{what} {problem}"), target=target
            )
    if action.name == "fill":
        value = str(action.args.get("value", ""))
        secrets = getattr(session, "secrets", None)
        if secrets:
            refused, typed = _secret_fill(action, bid, value, secrets, target)
            if refused is not None:
                return _Prepared([], refused, target=target)
            if typed is not None:
                name = secrets.named_in_password_field(value)
                return _Prepared([typed], note=f"typed the secret {{{name}}}", target=target)
        refused_own = own_words_refusal(bid, value, target, _goal_of(session), _page_text_of(session))
        if refused_own is not None:
            return _Prepared([], refused_own, target=target)
        if target.options:
            return _fill_in_list(session, bid, value, target)
        if target.tag not in ("input", "textarea", "select") or target.type == "range":
            slider = read_slider(locator) if not target.editable else None
            if slider is not None:
                if target_value(value) is None:
                    asked = sanitize_text(value, 40)
                    error = (
                        f"{_describe(bid, target=target)} is a slider: fill it with a number, not '{asked}'"
                    )
                    return _Prepared([], ExecResult(outcome="action_error", error=error), target=target)
                if slider.value is None:
                    error = f"{_describe(bid, target=target)} is a slider that shows no value to set it by"
                    return _Prepared([], ExecResult(outcome="not_interactable", error=error), target=target)
                return _Prepared([action], target=target, slider=slider)
        wanted = date_asked(value) if target.tag == "input" and target.readonly else None
        if wanted is not None:
            return _Prepared([action], target=target, calendar_date=wanted)
        wire = field_value(target.type, value) if target.tag == "input" else None
        if wire is not None and wire != value:
            # A date or time field takes only its own format (`field_values`): 5:36 PM is written 17:36.
            written = Action(name="fill", args={**action.args, "value": wire})
            shown = f"wrote '{sanitize_text(value, 40)}' as '{wire}', the format of this {target.type} field"
            return _Prepared([written], note=shown, target=target)
        if value.endswith("\n") and target.tag != "textarea" and not target.editable:
            typed = Action(name="fill", args={**action.args, "value": value.rstrip("\r\n")})
            pressed = Action(name="press", args={"bid": bid, "key_comb": "Enter"})
            return _Prepared([typed, pressed], note="pressed Enter after filling", target=target)
    return _Prepared([action], note=note, target=target)


def _fill_in_list(session: BrowserSession, bid: str, value: str, target: _Target) -> _Prepared:
    """A fill on a dropdown list (a native ``<select>``): the option it names is chosen with select_option,
    as a person picks the entry they would have typed; a value that names no option is an action error
    that lists the options (at most eight).

    Why: typed text cannot go into a list, and Playwright's refusal ("Element is not an <input>,
    <textarea> or [contenteditable] element") says nothing of what the list takes. Measured on the
    arena's shop, the 1.5B model filled the product list's sort order ('Relevancy', its own choice, and
    product titles) 21 times across three arms, and repeated each refused fill."""
    match = next((option for option in target.options if norm(option) == norm(value)), None)
    if match is not None:
        note = f"chose '{sanitize_text(match, 40)}' in the dropdown [{bid}] with select_option"
        return _chosen_in_list(session, bid, match, note)
    shown = ", ".join(f"'{sanitize_text(option, 40)}'" for option in target.options[:8])
    more = f" (and {len(target.options) - 8} more)" if len(target.options) > 8 else ""
    error = (
        f"{_describe(bid, target=target)} is a dropdown list: it takes one of its options with "
        f"select_option('{bid}', ...), not typed text; '{sanitize_text(value, 40)}' is none of them. "
        f"Its options: {shown}{more}"
    )
    return _Prepared([], ExecResult(outcome="action_error", error=error), target=target)


def _chosen_in_list(session: BrowserSession, select_bid: str, chosen: str | list[str], note: str) -> _Prepared:
    """The choice made through its list, `select_option` on `select_bid`, pre-checked as its own action
    (the list must be interactable), with `note` saying what was chosen and why."""
    inner = _prepare(session, Action(name="select_option", args={"bid": select_bid, "options": chosen}))
    return _Prepared(inner.actions, inner.early, note, inner.target)


def _goal_of(session: BrowserSession) -> str:
    """The episode's goal, as its latest observation carries it ("" before the first)."""
    page = getattr(session, "last_page", None)
    return page.goal if page is not None else ""


def _page_text_of(session: BrowserSession) -> str:
    """The text of the page the agent decided on ("" before the first observation)."""
    page = getattr(session, "last_page", None)
    return page.text if page is not None else ""


def own_words_refusal(bid: str, value: str, target: _Target, goal: str, page_text: str = "") -> ExecResult | None:
    """A fill that types the field's own label or placeholder into it is refused (an action error that
    says so), unless the goal itself states that text; else None.

    Why: measured on the arena's comment-ticket (Trac), the 1.5B model filled the comment box labelled
    "You may use WikiFormatting here." with "You may use WikiFormatting here.", after which the box was
    no longer empty and it reported there was no comment field. Typing what a field says about itself
    is a copying slip on any site ("Email" into the Email field), never a value a user means, and
    refused, the field stays empty for the value the goal gives. The error names the texts the goal
    quotes and the page does not show (at most three, in its order): measured on comment-ticket
    instance 2, told only "type the text the goal gives", the model typed the label a third time and the
    loop stop ended the episode; on reassign-ticket, told the ticket's title (shown on its page), it
    typed the title into the comment box.
    """
    typed = plain_words(value)
    if not typed or typed in plain_words(goal):
        return None
    own = {plain_words(words) for words in (target.label, target.placeholder, target.aria_label) if words}
    if typed not in own:
        return None
    shown = page_text.casefold()  # a quoted text the page shows names a thing here (a title), not one to type
    given = [
        x.text
        for x in extract_goal_literals(goal)
        if x.kind == "quoted" and plain_words(x.text) not in own and sanitize_text(x.text, 0).casefold() not in shown
    ]
    offered = " or ".join(f"'{sanitize_text(text, 80)}'" for text in given[:3])
    error = (
        f"{_describe(bid, target=target)}: '{sanitize_text(value, 60)}' is the field's own label, not a "
        "value; type the text the goal gives" + (f" ({offered})" if offered else "")
    )
    return ExecResult(outcome="action_error", error=error)


def _secret_fill(
    action: Action, bid: str, value: str, secrets: Secrets, target: _Target
) -> tuple[ExecResult | None, Action | None]:
    """A fill on a run with named secrets (`awm.secrets`): (why it is refused, None), (None, the fill
    with the secret's value) or (None, None) for an ordinary fill. A password field takes only a
    secret's placeholder; a secret goes into a password field only (a text field would show it on the
    page and in every screenshot)."""
    password = target.type == "password"  # the field itself, or the control its <label> fills
    name = secrets.named_in_password_field(value) if password else secrets.named(value)
    what = _describe(bid, target=target)
    if password and name is None:
        names = ", ".join("{" + n + "}" for n in secrets.names)
        error = f"{what} is a password field: fill it with a named secret ({names}), not a typed value"
        return ExecResult(outcome="action_error", error=error), None
    if name is None:
        return None, None
    if not password:
        error = f"{{{name}}} is a secret: it goes into a password field, and {what} is not one"
        return ExecResult(outcome="action_error", error=error), None
    return None, Action(name="fill", args={**action.args, "value": secrets.value_of(name)})


def execute_action(session: BrowserSession, action: Action) -> ExecResult:
    """Pre-check, execute through BrowserGym, dismiss an intercepting overlay once, classify the result."""

    try:
        prepared = _prepare(session, action)
    except EnvCrashError:
        raise
    except Exception as exc:  # Playwright lost the page during the pre-check
        message = str(exc)
        if looks_like_crash(message):
            session.mark_broken()
            raise EnvCrashError(f"the browser died during the pre-check: {short_error(message)}") from exc
        return ExecResult(outcome="action_error", error=short_error(message), transient=True)
    if prepared.early is not None:
        return prepared.early
    if prepared.slider is not None:
        return _move_slider(session, action, prepared.slider, prepared.target)
    if prepared.calendar_date is not None:
        return _pick_date(session, action, prepared.calendar_date, prepared.target)
    if action.name == "select_text":
        return _select_text(session, action, prepared.target)
    if action.name == "drag":
        return _drag(session, action, prepared.target)
    actions, note, approval = prepared.actions, prepared.note, None
    for planned in actions:  # a live run: field refusals, an off-site goto (RailsRefusal), the gate
        denied, asked = _review(session, planned, prepared.target, "this action")
        if denied is not None:
            return denied
        approval = asked or approval
    rendered = "\n".join(render_action(a) for a in actions)
    with _navigations(session.page) as loads:
        error = session.step_rendered(rendered)
    if error and "intercepts pointer events" in error:
        dismissed = dismiss_overlay(session.page)
        if dismissed:
            note = f"an overlay intercepted the click; dismissed it with '{dismissed}' and retried"
            error = session.step_rendered(rendered)
    if error and "timeout" in error.lower() and loads:
        # BrowserGym's actions give Playwright 500 ms, which includes waiting for the page load a click or
        # an Enter starts: on a real site that load often takes longer. The action was delivered and a new
        # page came (a retry would act on that page); it is no failure.
        error, note = "", (note + "; " if note else "") + "the page loaded a new document (it took over 500 ms)"
    if any(url.startswith(ERROR_PAGE) for url in loads) and getattr(session, "rails", None) is None:
        # The browser could not open what the action led to (a link off an arena site, whose requests are
        # blocked, or a dead link) and shows its error page, where nothing can be done: go back and say so.
        session.step_rendered("go_back()")
        return ExecResult(
            outcome="action_error", note=note, approval=approval,
            error="the page it leads to could not be opened (it is off this site or does not answer); "
            "the browser went back to the page you were on",
        )  # fmt: skip
    if not error:
        return ExecResult(outcome="ok", note=note, approval=approval)
    outcome, transient = classify_error(error)
    return ExecResult(
        outcome=outcome, error=short_error(error), transient=transient, note=note, approval=approval
    )


@contextlib.contextmanager
def _navigations(page: Any) -> Iterator[list[str]]:
    """The URLs the page's main frame loaded while the block ran (Playwright's own events: nothing is
    asked of the page, so a hung page costs nothing here)."""
    loads: list[str] = []

    def loaded(frame: Any) -> None:
        if frame.parent_frame is None:
            loads.append(str(frame.url))

    try:
        page.on("framenavigated", loaded)
    except Exception:  # no page to listen to: nothing to report
        yield loads
        return
    try:
        yield loads
    finally:
        with contextlib.suppress(Exception):
            page.remove_listener("framenavigated", loaded)


def _pick_date(session: BrowserSession, action: Action, wanted: date, target: _Target | None) -> ExecResult:
    """Pick `wanted` in the calendar a read-only date field opens: click the field, page the calendar
    month by month (reading the month it shows after each click), click the day, read the field back.
    Each click goes through BrowserGym and, on a live run, the rails' review, as the model's own do."""
    bid = action.target_id or ""
    clicks = 0

    def click(element: str) -> ExecResult | None:
        nonlocal clicks
        planned = Action(name="click", args={"bid": element})
        denied, _ = _review(session, planned, None, "a click in the calendar")
        if denied is not None:
            return denied
        error = session.step_rendered(render_action(planned))
        clicks += 1
        if error:
            outcome, transient = classify_error(error)
            return ExecResult(outcome=outcome, error=short_error(error), transient=transient)
        return None

    asked = f"{wanted:%m/%d/%Y}"
    # The fill itself first: a field the rails refuse is refused here too.
    denied, _ = _review(session, action, target, f"filling [{bid}]")
    if denied is not None:
        return denied
    failed = click(bid)
    if failed is not None:
        return failed
    for _ in range(MAX_MONTHS + 1):
        page = session.observe()
        shown = shown_month(page)
        if shown is None:
            error = f"{_describe(bid, target=target)} is read-only and opened no calendar to pick {asked} in"
            return ExecResult(outcome="not_interactable", error=error)
        months = months_between(shown, wanted)
        if months == 0:
            break
        way = month_link(page, forward=months > 0)
        if way is None:
            where = f"{calendar.month_name[shown[1]]} {shown[0]}"
            error = f"the calendar of [{bid}] shows {where} and has no way to the {'next' if months > 0 else 'previous'} month"
            return ExecResult(outcome="action_error", error=error)
        failed = click(way)
        if failed is not None:
            return failed
    else:
        return ExecResult(outcome="action_error", error=f"the calendar of [{bid}] did not reach {asked}")
    day = day_link(page, wanted.day)
    if day is None:
        return ExecResult(
            outcome="action_error", error=f"the calendar of [{bid}] shows no day {wanted.day} to click"
        )
    failed = click(day)
    if failed is not None:
        return failed
    field = locate(session.page, bid)
    shows = _inspect(field).text if field is not None else ""
    return ExecResult(
        note=f"picked {asked} in the field's calendar ({clicks} clicks); the field shows '{sanitize_text(shows, 40)}'"
    )


def _observed_box(
    session: BrowserSession, bid: str, target: _Target | None
) -> tuple[dict[str, float] | None, ExecResult | None]:
    """The element's box as BrowserGym measured it for the observation the model acted on, in the
    coordinates its mouse actions take (the screenshot's: a page BrowserGym scales, as MiniWoB++'s by 1.5,
    has Playwright's boxes in other units), or why there is none to use."""
    obs = getattr(session, "last_obs", None) or {}
    properties = obs.get("extra_element_properties") or {}
    if (properties.get(bid) or {}).get("visibility") == 0:
        error = f"{_describe(bid, target=target)} is off-screen: scroll to it first"
        return None, ExecResult(outcome="not_interactable", error=error)
    box = Box.of((properties.get(bid) or {}).get("bbox"))
    if box is None or box.width < 2 or box.height < 2:
        error = f"{_describe(bid, target=target)} has no box on the page"
        return None, ExecResult(outcome="not_interactable", error=error)
    return box.model_dump(), None


def _mouse_drag(
    session: BrowserSession,
    action: Action,
    target: _Target | None,
    start: tuple[float, float],
    end: tuple[float, float],
) -> tuple[ExecResult | None, Approval | None]:
    """BrowserGym's own `mouse_drag_and_drop` from `start` to `end`, after the rails' review of `action`:
    (the failure, None when it went through; the gate's approval, if one was needed). Why BrowserGym's:
    the page sees the mouse events a person makes."""
    denied, approval = _review(session, action, target, "the drag")
    if denied is not None:
        return denied, approval
    (x0, y0), (x1, y1) = start, end
    error = session.step_rendered(f"mouse_drag_and_drop({x0:.1f}, {y0:.1f}, {x1:.1f}, {y1:.1f})")
    if error:
        outcome, transient = classify_error(error)
        return ExecResult(outcome=outcome, error=short_error(error), transient=transient), approval
    return None, approval


def _select_text(session: BrowserSession, action: Action, target: _Target | None) -> ExecResult:
    """Highlight an element's text as a person does: a mouse drag from just inside its box's top-left
    corner to just inside its bottom-right one, then say what the page has selected."""
    bid = action.target_id or ""
    box, problem = _observed_box(session, bid, target)
    if box is None:
        return problem or ExecResult(outcome="not_interactable", error=f"element [{bid}] has no box")
    start = (box["x"] + 1, box["y"] + 1)
    end = (box["x"] + box["width"] - 1, box["y"] + box["height"] - 1)
    failed, approval = _mouse_drag(session, action, target, start, end)
    if failed is not None:
        return failed
    locator = locate(session.page, bid)
    selected = (
        str(locator.evaluate("el => String(el.ownerDocument.getSelection())", timeout=_CHECK_TIMEOUT_MS))
        if locator
        else ""
    )
    if not selected.strip():
        return ExecResult(outcome="no_progress", error=f"the drag over [{bid}] selected no text")
    return ExecResult(
        note=f"highlighted '{sanitize_text(' '.join(selected.split()), 80)}'", approval=approval
    )


# Direction word -> unit vector (screen y grows downwards).
_DIRECTIONS = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
_DRAG_PX = (20, 100)  # a drag goes the element's own size along its direction, within these bounds


def _drag(session: BrowserSession, action: Action, target: _Target | None) -> ExecResult:
    """Drag an element from its centre by its own size (20 to 100 pixels) left, right, up or down, or
    onto another element: a `direction` that is an element's id drops it on that element's centre.

    Why a drop target: a direction alone cannot reach a place (a card onto a board's "Done" column, a
    file onto a folder); the page's own element says where, as the model names any other element."""
    bid = action.target_id or ""
    direction = str(action.args.get("direction", "")).strip().lower()
    onto = str(action.args.get("direction", "")).strip()
    properties = (getattr(session, "last_obs", None) or {}).get("extra_element_properties") or {}
    if direction not in _DIRECTIONS and onto not in properties:
        asked = sanitize_text(direction, 20)
        return ExecResult(
            outcome="action_error",
            error=f"drag() needs a direction (left, right, up or down) or the id of the element to drop it on, not '{asked}'",
        )
    box, problem = _observed_box(session, bid, target)
    if box is None:
        return problem or ExecResult(outcome="not_interactable", error=f"element [{bid}] has no box")
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    if direction not in _DIRECTIONS:
        drop, problem = _observed_box(session, onto, None)
        if drop is None:
            return problem or ExecResult(outcome="not_interactable", error=f"element [{onto}] has no box")
        end = (drop["x"] + drop["width"] / 2, drop["y"] + drop["height"] / 2)
        failed, approval = _mouse_drag(session, action, target, (cx, cy), end)
        return failed or ExecResult(note=f"dragged [{bid}] onto [{onto}]", approval=approval)
    dx, dy = _DIRECTIONS[direction]
    size = box["width"] if dx else box["height"]
    distance = min(max(size, _DRAG_PX[0]), _DRAG_PX[1])
    end = (cx + dx * distance, cy + dy * distance)
    failed, approval = _mouse_drag(session, action, target, (cx, cy), end)
    if failed is not None:
        return failed
    return ExecResult(note=f"dragged [{bid}] {distance:.0f} pixels {direction}", approval=approval)


def _move_slider(
    session: BrowserSession, action: Action, slider: SliderState, target: _Target | None
) -> ExecResult:
    """Press the arrow keys on the slider's handle until it shows the value `fill` asked for: a first
    round at one unit per press, then up to two more with the step the first round showed. The rails
    review the presses of a live run like any other action."""
    bid = action.target_id or ""
    goal = target_value(str(action.args.get("value", "")))
    assert goal is not None and slider.value is not None, "checked by _prepare"
    start, now, step, pressed = slider.value, slider.value, 1.0, 0
    for _ in range(ROUNDS):
        planned = presses(slider.handle, goal - now, step)
        if not planned:
            break
        denied, _ = _review(session, planned[0], target, "moving the slider")
        if denied is not None:
            return denied
        error = session.step_rendered("\n".join(render_action(a) for a in planned))
        if error:
            outcome, transient = classify_error(error)
            return ExecResult(outcome=outcome, error=short_error(error), transient=transient)
        pressed += len(planned)
        locator = locate(session.page, bid)
        after = read_slider(locator) if locator is not None else None
        if after is None or after.value is None or after.value == now:
            break  # at its end, or it stopped showing a value: say where it is
        step = abs(after.value - now) / len(planned)
        now = after.value
    if now == goal:
        moved = (
            f"moved the slider from {shown(start)} to {shown(now)} with the arrow keys ({pressed} presses)"
        )
        return ExecResult(note=moved)
    where = (
        f"the slider [{bid}] shows {shown(now)} after {pressed} arrow-key presses from {shown(start)}, "
        f"not {shown(goal)}"
    )
    if now == start:
        return ExecResult(outcome="no_progress", error=f"{where}: it did not move")
    return ExecResult(note=f"{where}: it may not reach that value")
