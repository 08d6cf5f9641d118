"""An infeasible report that says something is missing, checked against a forum page and a store's order
page (not benchmark pages): contradicted by an element of that name, by a field's form key, by a heading,
text or table cell of that name, and not by a one-word label, a text the page says is absent, or a
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


ORDER_PAGE = """[15] link 'My Store'
[40] link 'Orders'
heading 'Order #1042'
Order information
Order Total | Date of purchase | Status
$54.99 | Nov. 5, 2026 | Shipped
heading 'Order Details'
[125] link 'Order contents'
heading 'Payment Events'
No payment events.
Thank you for shopping with us, we hope to see you again soon"""


def order_page() -> PageState:
    elements = {"15": TargetDesc(role="link", label="My Store"), "40": TargetDesc(role="link", label="Orders"),
                "125": TargetDesc(role="link", label="Order contents")}  # fmt: skip
    return PageState(text=ORDER_PAGE, ids=list(elements), elements=elements, url="http://store.test/o/1042", goal="", fingerprint="fp")


def test_a_reason_that_says_a_text_the_page_shows_is_missing_is_contradicted() -> None:
    page = order_page()
    said = contradicted_absence("The current page does not show any order information.", page)
    assert said == "the text 'Order information'"
    assert contradicted_absence("The page does not show the order details or its total.", page) == "the text 'Order Details'"
    assert contradicted_absence("There is no order total on this page.", page) == "the text 'Order Total'"


def test_a_text_the_page_itself_says_is_absent_or_a_sentence_contradicts_nothing() -> None:
    page = order_page()
    assert contradicted_absence("The order has no payment events.", page) is None  # the page agrees
    assert contradicted_absence("This order cannot be refunded.", page) is None  # nothing by that name
    assert contradicted_absence("The status is not shown for orders of another store.", page) is None  # 'Status': one word
    assert contradicted_absence("I cannot see you again soon.", page) is None  # a sentence is no name


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
