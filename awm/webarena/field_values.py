"""A value typed into a date or time field, written the way the field takes it (pure).

HTML's date and time inputs accept only their own wire format (`17:36`, `2016-12-31`); Playwright's
fill refuses anything else ("Malformed value"), and a person's way of writing it (`5:36 PM`,
`12/31/2016`) is what a goal says and what a small model copies. So the executor rewrites a value it
can read into the field's format before filling, and says so in the step's feedback; a value it cannot
read goes through unchanged, and the field's own error reaches the model.

Why python-dateutil and not a hand-written reader: it reads the many ways people write dates and
times (month names, AM/PM, two-digit years); the one choice it makes for us, month first in `01/02/2016`,
is how the US-English pages we run write dates.
"""

from __future__ import annotations

from datetime import datetime

from dateutil import parser as date_parser

# The input types whose value has a fixed wire format, and that format (HTML's, for strftime).
WIRE_FORMATS: dict[str, str] = {
    "time": "%H:%M",
    "date": "%Y-%m-%d",
    "datetime-local": "%Y-%m-%dT%H:%M",
    "month": "%Y-%m",
    "week": "%G-W%V",
}
# A fixed default for the parts a value leaves out (a time has no date): never today's date, so the same
# value is written the same way on every day the benchmark runs.
_DEFAULT = datetime(2000, 1, 1)


def field_value(input_type: str, value: str) -> str | None:
    """`value` in the wire format of an ``<input type=input_type>``, or None when the type has none or the
    value cannot be read as a date or time (then it is filled as it is).

    >>> field_value("time", "5:36 PM"), field_value("date", "12/31/2016"), field_value("text", "5:36 PM")
    ('17:36', '2016-12-31', None)
    """
    wire = WIRE_FORMATS.get(input_type.lower())
    text = value.strip()
    if wire is None or not text:
        return None
    try:
        moment = date_parser.parse(text, default=_DEFAULT)
    except (ValueError, OverflowError):
        return None
    if input_type.lower() == "time" and moment.second:
        return moment.strftime("%H:%M:%S")
    return moment.strftime(wire)
