"""The grounded executor in real Chromium: each failure class, and each recovery that fixes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from awm.grounding.executor import ExecutorConfig, run_step
from awm.grounding.model import ElementVisible, GroundedStep, Target, TextIs
from awm.grounding.postconditions import holds

pytestmark = pytest.mark.browser

LABEL_CHANGED = """
<form id="newsletter"><label for="e">Work email</label><input id="e" name="mail">
<button type="submit">Subscribe</button></form>
<p id="status"></p>
<script>document.getElementById('newsletter').onsubmit = (ev) => { ev.preventDefault();
  document.getElementById('status').textContent = 'Subscribed ' + document.getElementById('e').value; };</script>
"""

OVERLAY = """
<form id="f"><button id="go" type="button" onclick="document.getElementById('status').textContent='Sent'">Send</button></form>
<p id="status"></p>
<div id="cookie" style="position:fixed;inset:0;background:rgba(0,0,0,.5)">
  <button onclick="document.getElementById('cookie').remove()" style="margin:40vh auto;display:block">Accept all</button>
</div>
"""

DEAD_DECOY = """
<form id="ticket"><button type="button">Submit</button><input type="submit" value="Send ticket"></form>
<p id="status"></p>
<script>document.getElementById('ticket').onsubmit = (ev) => { ev.preventDefault();
  document.getElementById('status').textContent = 'Ticket sent'; };</script>
"""


@pytest.fixture(scope="module")
def page(chromium: Any) -> Iterator[Any]:
    page = chromium.new_page()
    yield page
    page.close()


def _log() -> tuple[list[dict], Any]:
    events: list[dict] = []
    return events, events.append


def test_target_not_found_without_recovery_and_the_structural_fallback_with_it(page: Any) -> None:
    step = GroundedStep(action="fill", target=Target(role="textbox", label="Email", form="newsletter"), value="a@b.c")
    page.set_content(LABEL_CHANGED)
    events, log = _log()
    off = run_step(page, step, 0, ExecutorConfig(recovery=False), log)
    assert not off.ok and off.failure == "target_not_found" and off.recoveries == 0
    assert [e["event"] for e in events] == ["observe", "failure"]
    page.set_content(LABEL_CHANGED)
    events, log = _log()
    on = run_step(page, step, 0, ExecutorConfig(resnapshot_wait_s=0.05), log)
    assert on.ok and on.recoveries == 1 and on.grounding[-1].startswith("only_in_scope")
    assert page.input_value("#e") == "a@b.c"
    assert [e["event"] for e in events] == ["observe", "failure", "recovery", "observe", "step_ok"]


def test_an_intercepted_click_is_an_action_error_and_dismissing_the_overlay_fixes_it(page: Any) -> None:
    step = GroundedStep(
        action="click", target=Target(role="button", text="Send"), post=TextIs(selector="#status", text="Sent")
    )
    page.set_content(OVERLAY)
    off = run_step(page, step, 0, ExecutorConfig(recovery=False, action_timeout_ms=800), lambda _e: None)
    assert not off.ok and off.failure == "action_error" and "intercepts" in off.error
    page.set_content(OVERLAY)
    events, log = _log()
    on = run_step(page, step, 0, ExecutorConfig(action_timeout_ms=800), log)
    assert on.ok and on.recoveries == 1
    assert any("dismissed overlay button 'Accept all'" in e.get("remedy", "") for e in events)
    assert holds(page, TextIs(selector="#status", text="Sent"))


def test_a_step_whose_page_does_not_change_is_verify_failed_and_regrounding_in_the_form_fixes_it(page: Any) -> None:
    step = GroundedStep(
        action="click",
        target=Target(role="button", text="Submit", form="ticket", kind="submit"),
        post=TextIs(selector="#status", text="Ticket sent"),
    )
    page.set_content(DEAD_DECOY)
    off = run_step(page, step, 0, ExecutorConfig(recovery=False, verify_timeout_s=0.5), lambda _e: None)
    assert not off.ok and off.failure == "verify_failed"
    page.set_content(DEAD_DECOY)
    on = run_step(page, step, 0, ExecutorConfig(verify_timeout_s=0.5), lambda _e: None)
    assert on.ok and on.recoveries == 1 and on.grounding[-1].startswith("form_submit")


def test_recovery_gives_up_after_two_retries_and_says_why(page: Any) -> None:
    page.set_content("<p>No form here</p>")
    report = run_step(
        page,
        GroundedStep(action="click", target=Target(role="button", text="Pay")),
        0,
        ExecutorConfig(resnapshot_wait_s=0.01),
        lambda _e: None,
    )
    assert not report.ok and report.attempts == 3 and report.recoveries == 2
    assert report.failure == "target_not_found" and "structure does not decide" in report.error
    assert holds(page, ElementVisible(selector="p")) and not holds(page, ElementVisible(selector="#nothing"))
