"""The observation of real pages in Chromium: which form each element sits in (tests/fixtures/pages/
cookie_banner.html: only the form's own button waits for a value the goal names, not the cookie banner's
beside it), and a table's rows (tests/fixtures/pages/grades.html)."""

from __future__ import annotations

import pytest

from awm.config import BrowserSettings, RailsSettings
from awm.trajectory import Task
from awm.webarena.env import BrowserSession
from awm.webarena.goal_progress import guidance

pytestmark = pytest.mark.browser


def _open(base_url: str, page: str, goal: str):
    task = Task(
        task_id="browsergym/openended", scope="live/fixture", benchmark="live",
        meta={"task_kwargs": {"start_url": f"{base_url}{page}.html", "goal": goal}},
    )  # fmt: skip
    settings = BrowserSettings(pre_observation_delay=0.2, slow_mo_ms=0, rails=RailsSettings(allow_hosts=["127.0.0.1"]))
    with BrowserSession(settings) as session:
        return session.reset(task)


def test_a_tables_rows_are_lines_of_their_own_cells_and_a_field_keeps_its_line(base_url: str) -> None:
    """A grades table printed a cell a line (Ada, A, B, Ben, C, A) does not say whose grade is whose."""
    lines = _open(base_url, "grades", "What grade did Ben get in Art?").text.splitlines()
    assert "Student | Maths | Art" in lines and "Ada | A | B" in lines and "Ben | C | A" in lines
    note = next(i for i, line in enumerate(lines) if line == "Note")
    assert "textbox 'Note for Ada'" in lines[note + 1]  # a cell with a field is not joined to the text


def test_a_cookie_banner_button_is_not_held_while_the_search_form_waits_for_its_value(base_url: str) -> None:
    goal = "Find Acme kettles."
    page = _open(base_url, "cookie_banner", goal)
    by_label = {(d.role, d.label): bid for bid, d in page.elements.items()}
    accept, search, field = by_label[("button", "Accept cookies")], by_label[("button", "Search")], by_label[("textbox", "Search")]
    assert page.forms[search] == page.forms[field] and accept not in page.forms
    assert guidance(page, goal, []).waiting == {search}
