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
element of the role in scope; else the only visible element of that role on the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from awm.grounding.model import Target
from awm.grounding.snapshot import Element

Rule = Literal["exact", "form_submit", "only_in_scope", "only_on_page"]
TEXT_EXACT, TEXT_SUBSTRING = 100, 50


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


def ground_structural(elements: Sequence[Element], target: Target) -> Resolution | NoMatch:
    """The structural fallback of recovery: answers only when the page's structure leaves one choice."""
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
