"""Pages that open tabs, in real Chromium: a link with target="_blank" and a window.open move the episode
to the new tab; the observation says which tabs are open and which one the page is, the tab actions are
offered only then, and the rails hold in every tab (tests/fixtures/pages/tabs_*.html on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from awm.config import BrowserSettings, RailsSettings
from awm.trajectory import Task
from awm.webarena import prompts
from awm.webarena.env import BrowserSession
from awm.webarena.harness import HarnessConfig, run_episode
from tests.test_webarena_harness import LabelScript

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def live() -> Iterator[BrowserSession]:
    settings = BrowserSettings(pre_observation_delay=0.2, slow_mo_ms=0, rails=RailsSettings(allow_hosts=["127.0.0.1"]))
    with BrowserSession(settings) as session:
        yield session


def cafe(base_url: str) -> Task:
    goal = "Check the allergens of the soup of the day, then show its price."
    return Task(
        task_id="browsergym/openended", scope="live/cafe", benchmark="live",
        meta={"task_kwargs": {"start_url": f"{base_url}tabs_opener.html", "goal": goal}},
    )  # fmt: skip


def test_a_link_that_opens_a_tab_is_followed_and_the_agent_can_switch_back(live: BrowserSession, base_url: str) -> None:
    script = LabelScript(["click('{Allergen list (opens in a new tab)}')", "tab_focus(0)", "click('{Show the price}')"])
    trajectory = run_episode(live, script, cafe(base_url), HarnessConfig(max_steps=3))
    opened, back, ordered = (ctx.page for ctx in script.contexts)
    assert opened.tabs == [] and "tab_focus" not in (prompts.action_names_for(cafe(base_url), tabs=len(opened.tabs)) or [])
    assert back.url.endswith("tabs_allergens.html") and "celery, milk" in back.text
    assert back.tabs == [f"'Harbour Café · Menu' {base_url}tabs_opener.html", f"'Allergens · Harbour Café' {base_url}tabs_allergens.html"]
    assert back.tab_in_focus == 1
    shown = prompts.tabs_text(back.tabs, back.tab_in_focus)
    assert shown.startswith("Open tabs (2; tab_focus(index) switches to one") and "1: 'Allergens · Harbour Café'" in shown
    assert shown.endswith("tabs_allergens.html (this page)")
    assert {"tab_focus", "tab_close"} <= set(prompts.action_names_for(cafe(base_url), tabs=2) or [])
    assert ordered.tab_in_focus == 0 and ordered.url.endswith("tabs_opener.html")
    assert [s.outcome for s in trajectory.steps] == ["ok", "ok", "ok"]
    assert live.page.locator("#status").inner_text() == "Soup of the day: 4.50"


def test_a_tab_opened_by_a_script_can_be_closed(live: BrowserSession, base_url: str) -> None:
    script = LabelScript(["click('{Opening hours}')", "tab_close()", "noop()"])
    run_episode(live, script, cafe(base_url), HarnessConfig(max_steps=3))
    hours, after_close = script.contexts[1].page, script.contexts[2].page
    assert hours.url.endswith("tabs_hours.html") and "8:00 to 17:00" in hours.text and len(hours.tabs) == 2
    assert after_close.tabs == [] and after_close.url.endswith("tabs_opener.html")


def test_the_rails_hold_in_the_new_tab(live: BrowserSession, base_url: str) -> None:
    script = LabelScript(["click('{Allergen list (opens in a new tab)}')", "click('{Our supplier}')", "noop()"])
    trajectory = run_episode(live, script, cafe(base_url), HarnessConfig(max_steps=3))
    slip = trajectory.steps[1]
    assert slip.outcome == "refused" and "other.test" in slip.error
    assert script.contexts[2].page.url.endswith("tabs_allergens.html")  # brought back, in the tab in focus
    assert trajectory.meta["rails"]["blocked_hosts"] == ["other.test"]
