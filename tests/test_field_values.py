"""Values for date and time fields, written in the field's own format (pure)."""

from __future__ import annotations

import pytest

from awm.webarena.field_values import field_value


@pytest.mark.parametrize(
    ("input_type", "value", "wire"),
    [
        ("time", "5:36 PM", "17:36"),
        ("time", "12:05 AM", "00:05"),
        ("time", "12:05 PM", "12:05"),
        ("time", "7:03", "07:03"),
        ("time", "17:36", "17:36"),
        ("time", "1:05:30 pm", "13:05:30"),
        ("TIME", " 9:15 am ", "09:15"),
        ("date", "12/31/2016", "2016-12-31"),
        ("date", "01/02/2016", "2016-01-02"),  # month first, as US-English pages write it
        ("date", "Dec 31, 2016", "2016-12-31"),
        ("date", "2016-12-31", "2016-12-31"),
        ("month", "March 2016", "2016-03"),
        ("week", "2016-01-05", "2016-W01"),
        ("datetime-local", "12/31/2016 5:36 PM", "2016-12-31T17:36"),
    ],
)
def test_readable_values_are_written_in_the_wire_format(input_type: str, value: str, wire: str) -> None:
    assert field_value(input_type, value) == wire


@pytest.mark.parametrize(
    ("input_type", "value"),
    [("text", "5:36 PM"), ("email", "12/31/2016"), ("time", ""), ("time", "noon-ish"), ("date", "tomorrow")],
)
def test_other_fields_and_unreadable_values_are_left_alone(input_type: str, value: str) -> None:
    assert field_value(input_type, value) is None
