"""Which element a target means: exact grounding always, structural fallback only during recovery.

Pure functions over a snapshot (`awm.grounding.snapshot.Element` list), so the rules are tested on
fixtures without a browser. Every answer says how it was reached (rule, score, candidates), because a
trace that only says "clicked element 7" cannot be audited.

Exact: only visible, enabled candidates whose role matches (and whose row holds the target's row
words, when it names some); a named label, name attribute or form must
match exactly (case and spacing aside); with target text, an exact text match scores 100 and a
substring 50 (no match rejects); the highest score wins, an exact tie goes to the one element whose
text has the target's case too, and any other tie is ambiguity, never a choice.
Structural (recovery only), in order, and only when it answers unambiguously: narrow to the target's
form or container; a submit-kind target takes the only submit/button control in scope; else the only
element of the role in scope; else the only visible element of that role on the page. A field (a box
or list that takes a value) whose own label names another datum than the target's is never the answer
(`names_another_field`): the one text box on a shop's catalogue page is its search box, not a login
form's "Username:".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from awm.grounding.model import Target
from awm.grounding.snapshot import Element

Rule = Literal["exact", "form_submit", "only_in_scope", "only_on_page"]
TEXT_EXACT, TEXT_SUBSTRING = 100, 50
FIELD_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton"})
# Words a field's label wraps around the datum it names ("Enter your email"), never the datum itself.
_LABEL_FILLER = frozenset("a an the your my of for to in on and or enter type here please".split())


class Resolution(BaseModel):
    """The element a target grounded to, and why."""

    element: Element
    rule: Rule
    score: int
    candidates: int

    def explain(self) -> str:
        return (
            f"{self.rule} (score {self.score}, {self.candidates} candidate(s)) -> {self.element.describe()}"
        )


class NoMatch(BaseModel):
    """Why a target did not ground: nothing matched, or several matched equally (ambiguity)."""

    reason: str
    candidates: int = 0
    ambiguous: bool = False


def norm(text: str | None) -> str:
    return " ".join((text or "").split()).casefold()


def _in_scope(element: Element, scope: str) -> bool:
    want = norm(scope)
    return norm(element.form_id) == want or want in {norm(a) for a in element.ancestors}


def _eligible(elements: Sequence[Element], target: Target) -> list[Element]:
    """Visible, enabled elements of the target's role (inside a row that contains the target's `row`
    words, when it names some: a hard filter like the role, never a score)."""
    row = norm(target.row) if target.row is not None else None
    return [
        e for e in elements
        if e.visible and e.enabled and e.role == target.role and (row is None or row in norm(e.row))
    ]  # fmt: skip


def text_score(element: Element, text: str) -> int:
    """100 for an exact match of the visible text (or aria-label), 50 for a substring, else 0."""
    want = norm(text)
    for have in (norm(element.text), norm(element.aria_label)):
        if have and have == want:
            return TEXT_EXACT
    for have in (norm(element.text), norm(element.aria_label)):
        if have and want in have:
            return TEXT_SUBSTRING
    return 0


def _same_case(elements: Sequence[Element], text: str) -> list[Element]:
    """The elements whose visible text (or aria-label) is `text` with its case too: a recorded 'ROADMAP'
    (a navigation bar's link) is that link, not the paragraph's 'roadmap' beside it (Trac's start page),
    though both match it case aside. Only a tie-break: case never rejects."""
    want = " ".join(text.split())
    return [e for e in elements if want in {" ".join((e.text or "").split()), " ".join((e.aria_label or "").split())}]


def ground_exact(elements: Sequence[Element], target: Target) -> Resolution | NoMatch:
    """Exact grounding: hard filters (label, name, form, submit), then the best text score."""
    pool = _eligible(elements, target)
    if target.label is not None:
        pool = [e for e in pool if norm(e.label) == norm(target.label)]
    if target.name is not None:
        pool = [e for e in pool if norm(e.name) == norm(target.name)]
    if target.form is not None:
        pool = [e for e in pool if _in_scope(e, target.form)]
    if target.kind == "submit":
        pool = [e for e in pool if e.submit or e.role == "button"]
    scored = (
        [(text_score(e, target.text), e) for e in pool] if target.text is not None else [(0, e) for e in pool]
    )
    if target.text is not None:
        scored = [(s, e) for s, e in scored if s > 0]
    if not scored:
        return NoMatch(reason=f"no visible, enabled {_describe(target)}", candidates=len(pool))
    best = max(s for s, _ in scored)
    top = [e for s, e in scored if s == best]
    if len(top) > 1 and best == TEXT_EXACT and target.text is not None:
        top = _same_case(top, target.text) or top
    if len(top) > 1:
        return NoMatch(
            reason=f"{len(top)} elements match {_describe(target)} equally (score {best})",
            candidates=len(scored),
            ambiguous=True,
        )
    return Resolution(element=top[0], rule="exact", score=best, candidates=len(scored))


def _field_label(element: Element) -> str:
    """What a field's own label says: its label, else its aria-label, else its placeholder."""
    return element.label or element.aria_label or element.placeholder


def _label_words(text: str) -> list[str]:
    return [word for word in re.findall(r"[a-z0-9]+", norm(text)) if word not in _LABEL_FILLER]


def names_another_field(element: Element, target: Target) -> bool:
    """Whether `element`, a field, is labelled for another datum than the field `target` names: no word
    of one label is in a word of the other, nor one label's letters in the other's ("Username:" against
    the search box's "Search"; "User name" and "Username", "Email" and "Work email" name one datum).
    A field's label says what it holds, which a site rewords but does not swap; a button's words say
    what it does and may be swapped outright ("Join free" for "Get the newsletter"), so buttons, links
    and options are never judged here. A field or a target without label words is not judged either."""
    if target.role not in FIELD_ROLES:
        return False
    wanted = _label_words(target.label or target.text or "")
    have = _label_words(_field_label(element))
    if not wanted or not have:
        return False
    if "".join(wanted) in "".join(have) or "".join(have) in "".join(wanted):
        return False
    return not any(min(len(a), len(b)) >= 3 and (a in b or b in a) for a in wanted for b in have)


def ground_structural(elements: Sequence[Element], target: Target) -> Resolution | NoMatch:
    """The structural fallback of recovery: answers only when the page's structure leaves one choice,
    and that choice is not a field labelled for another datum (`names_another_field`)."""
    found = _ground_by_structure(elements, target)
    if isinstance(found, Resolution) and names_another_field(found.element, target):
        label, wanted = _field_label(found.element), target.label or target.text
        return NoMatch(
            reason=f"the only {target.role} left is labelled {label!r}, another field than {wanted!r}",
            candidates=found.candidates,
        )
    return found


def _ground_by_structure(elements: Sequence[Element], target: Target) -> Resolution | NoMatch:
    pool = _eligible(elements, target)
    scope = [e for e in pool if _in_scope(e, target.form)] if target.form is not None else pool
    if target.kind == "submit":
        submits = [e for e in scope if e.submit] or scope  # a real submit control first, else any button
        if len(submits) == 1:
            return Resolution(element=submits[0], rule="form_submit", score=0, candidates=len(submits))
    if len(scope) == 1:
        return Resolution(element=scope[0], rule="only_in_scope", score=0, candidates=1)
    if len(pool) == 1:
        return Resolution(element=pool[0], rule="only_on_page", score=0, candidates=1)
    return NoMatch(
        reason=f"structure does not decide: {len(scope)} {target.role}(s) in scope, {len(pool)} on the page",
        candidates=len(scope),
        ambiguous=len(scope) > 1,
    )


def _describe(target: Target) -> str:
    parts = [target.role]
    for key in ("text", "label", "name", "form", "kind", "row"):
        value = getattr(target, key)
        if value is not None:
            parts.append(f"{key}={value!r}")
    return " ".join(parts)
