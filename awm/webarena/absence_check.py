"""Checks a report that the task is infeasible against the page: a reason that says something is missing
(no link, no field, no order information) while the page shows an element or a text by that very name is
contradicted (pure).

Why: measured on the arena's Trac with the 1.5B model, the reports that ended most episodes named what
the page showed: "The page does not have a link to create a new ticket." beside `link 'NEW TICKET'`,
"Cannot add comment to ticket without a comment field" beside `link 'Add Comment'` and the comment box
(`name=comment`). On any site a claim that an element is missing is wrong when an element of that name
is on the page; told so once, the agent may use it, or report again (the harness takes the second
report as it is).

The same holds for what the page says: measured on the arena's shop (django-oscar's dashboard), the
order page showed "Order information" over a table with the order's status and total, and the model
reported "the current page does not show any order information" and "does not show any order details"
beside the heading 'Order Details' (order-status, order-total). A heading, a text or a table cell of a
few words that the reason names as missing is on the page; a text that itself says something is
absent ("No payment events.") agrees with such a reason and contradicts nothing.
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
# A text line with a role, as the observation writes a heading or a caption: heading 'Order Details'.
_ROLE_LINE = re.compile(r"^[a-zA-Z]+ '(.*)'$")
# A page text reads as a name when it has this many content words: more is a sentence, not a name.
_NAME_WORDS = range(2, 7)


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def _says(reason: list[str], name: list[str]) -> bool:
    """Whether the reason's words hold the name's words in a row ("start a new topic": 'New topic')."""
    return any(reason[i : i + len(name)] == name for i in range(len(reason) - len(name) + 1))


def contradicted_absence(reason: str, page: PageState) -> str | None:
    """The first element on the page whose name the reason says is missing (its line's head,
    ``[74] link 'NEW TICKET'``), or None: when the reason claims an absence, an actionable element whose
    label's words (two or more) stand in a row in the reason, or a field whose form key's words all are
    (`PageState.field_keys`: `comment`; not `field_cc` for "no comment field"); else the first text the
    page shows as a name (`page_names`) whose words stand in a row in the reason (``the text 'Order
    information'``). A one-word label ("new", "Search") is too common a word to read a claim by, and
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
    return next((f"the text '{text}'" for text in page_names(page) if _says(said, _words(text))), None)


def page_names(page: PageState) -> list[str]:
    """The page's texts that read as names, in page order: each line without an id (a heading's label,
    a text, each cell of a table row the observation joined with " | ") of two to six content words, none
    of them a word of absence, and not one the page itself says is absent (the heading 'Payment Events'
    over "No payment events." agrees with a reason that there are none)."""
    texts: list[str] = []
    for line in page.text.splitlines():
        line = line.strip()
        if line and not line.startswith("["):
            headed = _ROLE_LINE.match(line)
            texts += [cell.strip() for cell in ((headed.group(1),) if headed else line.split(" | "))]
    worded = [(text, _words(text), bool(_ABSENT.search(text))) for text in texts]
    denied = [words for _, words, absent in worded if absent]
    return [
        text
        for text, words, absent in worded
        if len(words) in _NAME_WORDS and not absent and not any(_says(said, words) for said in denied)
    ]


__all__ = ["contradicted_absence", "page_names"]
