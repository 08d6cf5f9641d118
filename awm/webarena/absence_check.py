"""Checks a report that the task is infeasible against the page: a reason that says something is missing
(no link, no field) while the page shows an element by that very name is contradicted (pure).

Why: measured on the arena's Trac with the 1.5B model, the reports that ended most episodes named what
the page showed: "The page does not have a link to create a new ticket." beside `link 'NEW TICKET'`,
"Cannot add comment to ticket without a comment field" beside `link 'Add Comment'` and the comment box
(`name=comment`). On any site a claim that an element is missing is wrong when an element of that name
is on the page; told so once, the agent may use it, or report again (the harness takes the second
report as it is).
"""

from __future__ import annotations

import re

from awm.webarena.env import PageState

# Words that make a reason a claim of absence ("does not have", "no ... field", "without", "missing").
_ABSENT = re.compile(
    r"\b(?:no|not|without|missing|cannot|can't|unable|doesn't|isn't|lacks?|none)\b", re.IGNORECASE
)
_WORD = re.compile(r"[a-z]+")
# Words that do not name an element: left out of both the reason and the labels before they are compared.
_STOP = frozenset(
    {"a", "an", "the", "to", "of", "and", "for", "with", "this", "that", "page", "here", "you", "your", "may",
     "use", "are", "can", "is", "on", "in", "it", "or"}
)  # fmt: skip
_ACTIONABLE = frozenset({"link", "button", "textbox", "searchbox", "combobox", "checkbox", "radio", "tab", "menuitem"})


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def _says(reason: list[str], name: list[str]) -> bool:
    """Whether the reason's words hold the name's words in a row ("start a new topic": 'New topic')."""
    return any(reason[i : i + len(name)] == name for i in range(len(reason) - len(name) + 1))


def contradicted_absence(reason: str, page: PageState) -> str | None:
    """The first element on the page whose name the reason says is missing (its line's head,
    ``[74] link 'NEW TICKET'``), or None: when the reason claims an absence, an actionable element whose
    label's words (two or more) stand in a row in the reason, or a field whose form key's words all are
    (`PageState.field_keys`: `comment`; not `field_cc` for "no comment field"). A one-word label ("new", "Search") is too common a word to read a claim by, and
    words apart ("the topic is closed, so new replies...") name no 'New topic'."""
    if not _ABSENT.search(reason):
        return None
    said = _words(reason)
    for bid in page.ids:  # the elements the page shows, in its order
        desc = page.elements.get(bid)
        if desc is None or desc.role not in _ACTIONABLE:
            continue
        label = _words(desc.label)
        key = _words(page.field_keys.get(bid, ""))
        if (len(label) >= 2 and _says(said, label)) or (key and set(key) <= set(said)):
            return f"[{bid}] {desc.role} '{desc.label}'"
    return None


__all__ = ["contradicted_absence"]
