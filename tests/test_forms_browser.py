"""Which form each element sits in, read from a real page in Chromium (tests/fixtures/pages/cookie_banner.html):
only the form's own button waits for a value the goal names, not the cookie banner's beside it."""

from __future__ import annotations

import pytest

from awm.config import BrowserSettings, RailsSettings
from awm.trajectory import Task
from awm.webarena.env import BrowserSession
from awm.webarena.goal_progress import guidance

pytestmark = pytest.mark.browser


def test_a_cookie_banner_button_is_not_held_while_the_search_form_waits_for_its_value(base_url: str) -> None:
    goal = "Find Acme kettles."
    task = Task(
        task_id="browsergym/openended", scope="live/fixture", benchmark="live",
        meta={"task_kwargs": {"start_url": f"{base_url}cookie_banner.html", "goal": goal}},
    )  # fmt: skip
    settings = BrowserSettings(pre_observation_delay=0.2, slow_mo_ms=0, rails=RailsSettings(allow_hosts=["127.0.0.1"]))
    with BrowserSession(settings) as session:
        page = session.reset(task)
    by_label = {(d.role, d.label): bid for bid, d in page.elements.items()}
    accept, search, field = by_label[("button", "Accept cookies")], by_label[("button", "Search")], by_label[("textbox", "Search")]
    assert page.forms[search] == page.forms[field] and accept not in page.forms
    assert guidance(page, goal, []).waiting == {search}
