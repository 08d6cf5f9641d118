"""Reading an open calendar (`awm.webarena.datepicker`): pure, no browser."""

from __future__ import annotations

from datetime import date

from awm.trajectory import TargetDesc
from awm.webarena.datepicker import date_asked, day_link, month_link, months_between, shown_month
from awm.webarena.env import PageState


def calendar_page(title: list[str], prev_flags: str = "") -> PageState:
    """jQuery UI's calendar as the observation prints it: a '17' outside it, Prev/Next, title, days."""
    lines = ["[12] button '17'", "[17] textbox 'Date:'", "[22] link 'Prev'" + (f", {prev_flags}" if prev_flags else ""),
             "[24] link 'Next'", *title, "Su", "[53] link '1'", "[87] link '17'"]  # fmt: skip
    elements = {"12": TargetDesc(role="button", label="17"), "17": TargetDesc(role="textbox", label="Date:"),
                "22": TargetDesc(role="link", label="Prev"), "24": TargetDesc(role="link", label="Next"),
                "53": TargetDesc(role="link", label="1"), "87": TargetDesc(role="link", label="17")}  # fmt: skip
    return PageState(text="\n".join(lines), ids=list(elements), elements=elements, url="", goal="", fingerprint="fp")


def test_the_month_shown_the_way_to_it_and_the_day_in_the_calendar() -> None:
    page = calendar_page(["December", "2016"])
    assert shown_month(page) == (2016, 12)
    assert shown_month(calendar_page(["March 2016"])) == (2016, 3)
    assert shown_month(calendar_page(["Sep", "1999"])) == (1999, 9)
    assert months_between((2016, 12), date(2016, 3, 17)) == -9 and months_between((2015, 11), date(2016, 1, 2)) == 2
    assert month_link(page, forward=False) == "22" and month_link(page, forward=True) == "24"
    assert month_link(calendar_page(["December", "2016"], "disabled"), forward=False) is None
    assert day_link(page, 17) == "87"  # not the button '17' above the calendar
    assert day_link(page, 30) is None


def test_a_page_without_a_month_title_shows_no_calendar_and_a_value_without_digits_is_no_date() -> None:
    assert shown_month(calendar_page(["Holidays", "2016"])) is None
    assert day_link(calendar_page(["Holidays"]), 1) is None
    assert date_asked("03/17/2016") == date(2016, 3, 17) and date_asked("March 17, 2016") == date(2016, 3, 17)
    assert date_asked("soon") is None and date_asked("17 apples and 3") is None
    assert date_asked("2016-03-17") == date(2016, 3, 17) and date_asked("17.03.2016") == date(2016, 3, 17)
    # a number is not a date (a read-only quantity field must not start a calendar search)
    assert [date_asked(v) for v in ("3", "42", "3.5", "1,200", "May")] == [None] * 5
