"""An infeasible report that says something is missing, checked against a forum page (not a benchmark
page): contradicted by an element of that name, by a field's form key, and not by a one-word label or a
reason that claims no absence; and the harness refusing such a report once, in Chromium."""

from __future__ import annotations

import pytest

from awm.config import BrowserSettings, RailsSettings
from awm.trajectory import TargetDesc, Task
from awm.webarena.absence_check import contradicted_absence
from awm.webarena.env import BrowserSession, PageState
from awm.webarena.harness import HarnessConfig, run_episode
from awm.webarena.policies import ScriptedPolicy

LINES = [
    ("12", "link", "New topic", ""),
    ("14", "link", "Search", ""),
    ("20", "link", "new", ""),
    ("30", "textbox", "Cc:", " (name=field_cc)"),
    ("31", "textbox", "Be kind. Markdown works here.", " (name=comment)"),
    ("32", "button", "Post reply", ""),
]


def forum_page() -> PageState:
    text = "\n".join(f"[{b}] {r} '{label}'{extra}" for b, r, label, extra in LINES) + "\nheading 'Reply to this topic'"
    elements = {b: TargetDesc(role=r, label=label) for b, r, label, _ in LINES}
    keys = {"30": "field_cc", "31": "comment"}
    return PageState(
        text=text, ids=[b for b, *_ in LINES], elements=elements, url="http://forum.test/t/9", goal="",
        fingerprint="fp", field_keys=keys,
    )  # fmt: skip


def test_a_reason_that_says_what_the_page_shows_is_missing_is_contradicted() -> None:
    page = forum_page()
    assert contradicted_absence("The page does not have a link to start a new topic.", page) == "[12] link 'New topic'"
    assert contradicted_absence("Cannot reply: there is no comment field.", page) == "[31] textbox 'Be kind. Markdown works here.'"
    assert contradicted_absence("There is no button to post a reply.", page) == "[32] button 'Post reply'"


def test_a_reason_the_page_does_not_contradict_stands() -> None:
    page = forum_page()
    assert contradicted_absence("The topic is closed, so new replies are not accepted.", page) is None  # 'new': one word
    assert contradicted_absence("You may not delete other members' topics.", page) is None  # nothing by that name
    assert contradicted_absence("The reply was already posted as a new topic.", page) is None  # claims no absence


@pytest.mark.browser
def test_the_harness_refuses_a_contradicted_report_once_and_takes_the_second(base_url: str) -> None:
    """On the reply page in Chromium, as a live task (the agent ends it): "no comment field" beside the
    comment box is refused with the box named; the same report again ends the episode infeasible."""
    task = Task(
        task_id="browsergym/openended", scope="live/fixture", benchmark="live",
        meta={"task_kwargs": {"start_url": f"{base_url}reply_box.html", "goal": "Reply with the comment 'Lovely beds!'"}},
    )  # fmt: skip
    settings = BrowserSettings(pre_observation_delay=0.2, slow_mo_ms=0, rails=RailsSettings(allow_hosts=["127.0.0.1"]))
    report = "report_infeasible('There is no comment field on this page.')"
    with BrowserSession(settings) as session:
        trajectory = run_episode(session, ScriptedPolicy([report, report]), task, HarnessConfig(max_steps=4))
    first, second = trajectory.steps
    assert first.outcome == "action_error" and "textbox 'Be kind. Markdown works here.'" in first.error
    assert second.outcome == "ok" and trajectory.end == "infeasible"
