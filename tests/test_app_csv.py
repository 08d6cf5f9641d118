"""The CSV of every list endpoint: text a spreadsheet would run as a formula stays text."""

from __future__ import annotations

import csv
import io

from awm.app.web import csv_text


def test_text_that_starts_like_a_formula_is_guarded_and_numbers_are_not() -> None:
    rows = [
        {"goal": '=HYPERLINK("http://127.0.0.1/x","click")', "reward": -1.0, "note": "-3 steps", "who": "@bob"},
        {"goal": "Log in as ada", "reward": 0.5, "note": "plain", "who": "ada"},
    ]
    read = list(csv.DictReader(io.StringIO(csv_text(rows))))
    assert read[0] == {"goal": '\'=HYPERLINK("http://127.0.0.1/x","click")', "reward": "-1.0", "note": "'-3 steps", "who": "'@bob"}
    assert read[1] == {"goal": "Log in as ada", "reward": "0.5", "note": "plain", "who": "ada"}
