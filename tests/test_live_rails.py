"""The rails of a live run through the harness, in real Chromium, on a fixture page on 127.0.0.1.

The page (tests/fixtures/pages/live_account.html) has a password field, a card-number field, an email
field, a form's submit button, a "Delete account" button, a link to another site and a download link.
Loopback is reachable only because the session names it (`allow_hosts`), as `--allow-host` does. The
link to `other.test` is refused by name at request time; nothing is resolved and nothing leaves the host.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from awm.actions import Action
from awm.config import BrowserSettings, RailsSettings
from awm.gate import DenyGate, TerminalGate
from awm.trajectory import Task
from awm.webarena.env import BrowserSession
from awm.webarena.harness import HarnessConfig, run_episode
from awm.webarena.outcomes import RailsRefusal
from tests.test_webarena_harness import LabelScript

pytestmark = pytest.mark.browser


def live_task(base_url: str, page: str = "live_account", **meta: object) -> Task:
    return Task(
        task_id="browsergym/openended",
        scope="live/fixture",
        benchmark="live",
        meta={"task_kwargs": {"start_url": f"{base_url}{page}.html", "goal": "tidy up my account"}, **meta},
    )


def settings(**rails: object) -> BrowserSettings:
    return BrowserSettings(
        pre_observation_delay=0.2, slow_mo_ms=0, rails=RailsSettings(allow_hosts=["127.0.0.1"], **rails)
    )


@pytest.fixture(scope="module")
def live() -> Iterator[BrowserSession]:
    with BrowserSession(settings()) as session:
        yield session


def status_text(session: BrowserSession) -> str:
    return session.page.locator("#status").inner_text()


def test_a_menu_that_opens_under_the_mouse_is_reached_by_hover(live: BrowserSession, base_url: str) -> None:
    from awm.webarena.prompts import action_names_for

    task = live_task(base_url, "live_menu")
    assert "hover" in (action_names_for(task) or [])  # offered on a live page
    script = LabelScript(["hover('{Products}')", "click('{Kettles}')"])
    trajectory = run_episode(live, script, task, HarnessConfig(max_steps=2))
    assert [s.outcome for s in trajectory.steps] == ["ok", "ok"]
    assert status_text(live) == "Kettles opened"


def test_the_start_url_needs_allow_host_for_loopback(base_url: str) -> None:
    with BrowserSession(BrowserSettings()) as session:
        trajectory = run_episode(session, LabelScript(["noop()"]), live_task(base_url), HarnessConfig(max_steps=2))
        assert trajectory.end == "refused"
        assert "127.0.0.1 is a loopback address" in trajectory.steps[0].error
        assert not session.pids  # no browser was started


@pytest.mark.parametrize(
    ("field", "why"),
    [("Password", "a password field (type=password)"), ("Card number", "has the payment term 'card'")],
)
def test_a_refused_field_is_fed_back_once_and_a_second_refusal_ends_the_run(
    live: BrowserSession, base_url: str, field: str, why: str
) -> None:
    script = LabelScript([f"I fill it.\nfill('{{{field}}}', 'secret')", "fill('{Display name}', 'Ann')", f"fill('{{{field}}}', 'x')"])
    trajectory = run_episode(live, script, live_task(base_url), HarnessConfig(max_steps=4))
    slip, after, again = trajectory.steps
    assert slip.outcome == "refused" and why in slip.error
    assert slip.feedback.startswith("Refused: refused to fill") and "Nothing was typed" in slip.feedback
    assert script.contexts[1].feedback == slip.feedback  # the model is told, and the run goes on
    assert after.outcome == "ok" and live.page.locator("#display").input_value() == "Ann"
    assert trajectory.end == "refused" and again.outcome == "refused" and "2 refusals in this run" in again.error
    assert live.page.locator("#password").input_value() == "" and live.page.locator("#card").input_value() == ""
    assert trajectory.verdict.reward is None  # a live page has no reward


def test_the_field_is_checked_again_right_before_the_fill(live: BrowserSession, base_url: str) -> None:
    """The executor's own check (what a workflow's steps go through): no fill reaches the page."""
    live.reset(live_task(base_url))
    # the field, and its <label> (Playwright fills a label's control)
    bids = [b for b, t in live.observe().elements.items() if t.label == "Password"]
    assert len(bids) == 2
    for bid in bids:
        with pytest.raises(RailsRefusal, match="password field"):
            live.execute(Action(name="fill", args={"bid": bid, "value": "hunter2"}))
    assert live.page.locator("#password").input_value() == ""


def test_a_sensitive_click_is_denied_without_a_person_and_the_run_goes_on(live: BrowserSession, base_url: str) -> None:
    live.gate = DenyGate()
    script = LabelScript(["Delete it.\nclick('{Delete account}')", "Fine.\nfill('{Display name}', 'Ann')", "noop()"])
    trajectory = run_episode(live, script, live_task(base_url), HarnessConfig(max_steps=2))
    first, second = trajectory.steps[0], trajectory.steps[1]
    assert first.outcome == "denied" and first.approval is not None
    assert first.approval.approver == "nobody" and not first.approval.approved
    assert first.approval.reason == "the control says 'delete'"
    assert "denied" in first.feedback  # the model is told
    assert status_text(live) == "Nothing changed yet"
    assert second.outcome == "ok" and live.page.locator("#display").input_value() == "Ann"
    assert trajectory.end == "max_steps"
    assert trajectory.meta["rails"]["approvals"][0]["approved"] is False


def _terminal_gate(answer: str | None, tmp_path: Path) -> TerminalGate:
    read_end, write_end = os.pipe()
    if answer is not None:
        os.write(write_end, answer.encode())
    stream = os.fdopen(read_end)
    out = (tmp_path / "prompt.txt").open("w")
    return TerminalGate(0.5, shots_dir=tmp_path / "confirm", input_stream=stream, output=out)


@pytest.mark.parametrize(
    ("answer", "approver", "approved", "status"),
    [("y\n", "terminal", True, "Account deleted"), ("n\n", "terminal", False, "Nothing changed yet"),
     (None, "timeout", False, "Nothing changed yet")],
)  # fmt: skip
def test_the_terminal_gate_approves_denies_and_times_out(
    live: BrowserSession, base_url: str, tmp_path: Path, answer: str | None, approver: str, approved: bool, status: str
) -> None:
    live.gate = _terminal_gate(answer, tmp_path)
    try:
        script = LabelScript(["Delete it.\nclick('{Delete account}')"])
        trajectory = run_episode(live, script, live_task(base_url), HarnessConfig(max_steps=1))
    finally:
        live.gate = None
    approval = trajectory.steps[0].approval
    assert approval is not None and approval.approver == approver and approval.approved is approved
    assert trajectory.steps[0].outcome == ("ok" if approved else "denied")
    assert status_text(live) == status
    prompt = (tmp_path / "prompt.txt").read_text()
    assert "click(" in prompt and "Delete account" in prompt and "Allow it? [y/N]" in prompt
    assert approval.screenshot and Path(approval.screenshot).read_bytes().startswith(b"\x89PNG")


def test_an_email_is_typed_but_a_form_that_takes_a_card_asks_the_gate(live: BrowserSession, base_url: str) -> None:
    """Typing an email into a form is ordinary work; the profile form also takes a card number, so
    submitting it is paying-adjacent and waits for a person (denied: nobody is there)."""
    live.gate = DenyGate()
    script = LabelScript(["fill('{Email}', 'ann@example.test')", "click('{Save profile}')"])
    trajectory = run_episode(live, script, live_task(base_url), HarnessConfig(max_steps=2))
    reasons = [s.approval.reason for s in trajectory.steps if s.approval is not None]
    assert reasons == ["it submits a form that says 'cc'"]
    assert live.page.locator("#email").input_value() == "ann@example.test" and status_text(live) == "Nothing changed yet"


def test_a_link_off_the_site_is_refused_and_the_page_brought_back_and_a_second_try_ends_the_run(
    live: BrowserSession, base_url: str
) -> None:
    script = LabelScript(["Look at the offers.\nclick('{Partner offers}')", "click('{Partner offers}')", "noop()"])
    trajectory = run_episode(live, script, live_task(base_url), HarnessConfig(max_steps=3))
    slip, again = trajectory.steps
    assert slip.outcome == "refused" and "127.0.0.1" in slip.error and "other.test" in slip.error
    assert f"the page is back at {base_url}live_account.html" in slip.feedback
    assert script.contexts[1].page.url == f"{base_url}live_account.html"  # the next step saw the site again
    assert "Partner offers" in script.contexts[1].page.text
    assert trajectory.end == "refused" and again.outcome == "refused" and "2 refusals in this run" in again.error
    assert trajectory.meta["rails"]["blocked_hosts"] == ["other.test"]


def test_goto_off_the_site_is_refused_before_it_is_sent(live: BrowserSession, base_url: str) -> None:
    script = LabelScript(["goto('http://other.test/page.html')", "fill('{Display name}', 'Ann')"])
    trajectory = run_episode(live, script, live_task(base_url), HarnessConfig(max_steps=2))
    slip, after = trajectory.steps
    assert slip.outcome == "refused" and "would leave 127.0.0.1" in slip.error
    assert after.outcome == "ok" and trajectory.end == "max_steps"
    assert trajectory.meta["rails"]["blocked"] == []  # refused before any request


def test_with_no_slip_fed_back_the_first_refusal_ends_the_run(live: BrowserSession, base_url: str) -> None:
    script = LabelScript(["fill('{Password}', 'secret')", "noop()"])
    trajectory = run_episode(live, script, live_task(base_url), HarnessConfig(max_steps=3, slips_fed_back=0))
    assert trajectory.end == "refused" and len(trajectory.steps) == 1


def test_a_download_is_cancelled(live: BrowserSession, base_url: str) -> None:
    script = LabelScript(["click('{Download statement}')", "noop()"])
    trajectory = run_episode(live, script, live_task(base_url), HarnessConfig(max_steps=2))
    assert [Path(u).name for u in trajectory.meta["rails"]["downloads_cancelled"]] == ["statement.csv"]
    assert trajectory.end == "max_steps"


def test_the_step_budget_cannot_be_raised_past_the_rails(base_url: str) -> None:
    with BrowserSession(settings(max_steps=2)) as session:
        script = LabelScript(["noop(10)"] * 5)
        trajectory = run_episode(session, script, live_task(base_url, max_steps=40), HarnessConfig(max_steps=30))
    assert trajectory.end == "max_steps" and len(trajectory.steps) == 2
