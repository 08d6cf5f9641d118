"""Reading a calendar a date field opened: which month it shows, its way to the next or previous month,
and the day to click (pure: page states in, ids out; the executor clicks).

Why: a date field a page makes read-only takes its date from its calendar alone (jQuery UI's datepicker
and most others), so `fill` is refused (Playwright waits for an editable field and times out). Measured
on MiniWoB++ choose-date, 0 of 3: the model filled '03/17/2016', was refused, pressed Enter (which took
the calendar's default day) and submitted; by hand the calendar was nine months and ten clicks away,
beyond the step limit. `fill(field, '03/17/2016')` on such a field now opens the calendar and clicks
its way there as a person does, one page state at a time (`awm.webarena.executor`).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Protocol

from dateutil import parser as date_parser

from awm.trajectory import TargetDesc


class PageState(Protocol):
    """What this module reads of a page (`awm.webarena.env.PageState` has it). A protocol, not that
    class: the executor imports this module, and the session module imports the executor."""

    text: str
    ids: Sequence[str]
    elements: Mapping[str, TargetDesc]

    def flags(self, bid: str) -> tuple[str, ...]: ...


_MONTHS = {name.casefold(): i for i, name in enumerate(calendar.month_name) if name} | {
    name.casefold(): i for i, name in enumerate(calendar.month_abbr) if name
}
_YEAR = re.compile(r"^(?:19|20)\d\d$")
_NEXT = re.compile(r"^\s*(?:next(?: month)?|[>»›→]+)\s*$", re.IGNORECASE)
_PREV = re.compile(r"^\s*(?:prev(?:ious)?(?: month)?|[<«‹←]+)\s*$", re.IGNORECASE)
_DAY_ROLES = frozenset({"link", "button", "gridcell", "cell", "clickable", "option"})
_NAV_ROLES = frozenset({"link", "button", "clickable"})
MAX_MONTHS = 36  # how far a calendar is paged before giving up


# What makes a value a date and not a number: a month's name, or numbers joined as dates join them.
_MONTH_WORD = re.compile(r"(?<![a-z])(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?(?![a-z])", re.IGNORECASE)
_NUMERIC_DATE = re.compile(r"(?<!\d)(?:\d{1,4}[/-]\d{1,2}(?:[/-]\d{1,4})?|\d{1,2}\.\d{1,2}\.\d{2,4})(?!\d)")


def date_asked(value: str) -> date | None:
    """The date a `fill` value names ('03/17/2016', 'March 17, 2016', '2016-03-17'), or None when it names
    none. A bare number ('3', '42', '3.5') is not a date, though a date parser reads one as a day: a
    read-only numeric field (a quantity, a score) then started a calendar search for March 3rd."""
    text = value.strip()
    if not re.search(r"\d", text) or not (_MONTH_WORD.search(text) or _NUMERIC_DATE.search(text)):
        return None
    try:
        return date_parser.parse(text, default=datetime(2000, 1, 1)).date()
    except (ValueError, OverflowError):
        return None


def _month_title(lines: list[str]) -> tuple[int, int, int] | None:
    """(line index, year, month) of the first "December 2016" (one line or two) in the page's text."""
    for i, line in enumerate(lines):
        words = line.strip().replace(",", " ").split()
        if not words or words[0].casefold() not in _MONTHS:
            continue
        month = _MONTHS[words[0].casefold()]
        if len(words) == 2 and _YEAR.match(words[1]):
            return i, int(words[1]), month
        if len(words) == 1 and i + 1 < len(lines) and _YEAR.match(lines[i + 1].strip()):
            return i + 1, int(lines[i + 1].strip()), month
    return None


def shown_month(page: PageState) -> tuple[int, int] | None:
    """(year, month) the open calendar shows, or None when no month title is on the page."""
    found = _month_title(page.text.splitlines())
    return (found[1], found[2]) if found else None


def _line_id(line: str) -> str | None:
    if not line.startswith("["):
        return None
    head = line[1:].split("]", 1)[0]
    return head or None


def _enabled(page: PageState, bid: str) -> bool:
    return "disabled" not in page.flags(bid)


def month_link(page: PageState, forward: bool) -> str | None:
    """The id of the calendar's way to the next (or previous) month, when the page shows one."""
    pattern = _NEXT if forward else _PREV
    for bid in page.ids:
        desc = page.elements.get(bid)
        if desc is not None and desc.role in _NAV_ROLES and pattern.match(desc.label) and _enabled(page, bid):
            return bid
    return None


def day_link(page: PageState, day: int) -> str | None:
    """The id of the day `day` in the calendar: the first element labelled with that number after the
    month title (so a '17' elsewhere on the page is not taken)."""
    lines = page.text.splitlines()
    found = _month_title(lines)
    if found is None:
        return None
    for line in lines[found[0] + 1 :]:
        bid = _line_id(line)
        desc = page.elements.get(bid) if bid else None
        if (
            desc is not None
            and desc.role in _DAY_ROLES
            and desc.label.strip() == str(day)
            and _enabled(page, bid)
        ):
            return bid
    return None


def months_between(shown: tuple[int, int], wanted: date) -> int:
    """Months from the calendar's (year, month) to `wanted`'s: positive forward, negative back."""
    return (wanted.year - shown[0]) * 12 + wanted.month - shown[1]
