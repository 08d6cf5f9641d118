"""The executor's one rails review (`executor._review`): the real rails and gate, no browser."""

from __future__ import annotations

from typing import Any

from awm.actions import Action
from awm.config import RailsSettings
from awm.gate import DenyGate
from awm.webarena.executor import _review, _Target
from awm.webarena.guard import LiveRails


class UntouchablePage:
    """A page that must not be read: any look at it fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the page was read ({name})")


class Session:
    """What `_review` needs of a session: its page and, on a live run, its rails."""

    def __init__(self, rails: LiveRails | None, page: Any = None) -> None:
        self.page = page
        if rails is not None:
            self.rails = rails


def _rails() -> LiveRails:
    settings = RailsSettings(allow_hosts=["127.0.0.1"])
    return LiveRails("http://127.0.0.1:8000/", settings, DenyGate())


DELETE = _Target(tag="button", type="button", text="Delete account")


def test_a_sensitive_action_is_denied_with_the_reason_the_person_and_what_was_denied() -> None:
    click = Action(name="click", args={"bid": "12"})
    for what in ("this action", "the drag", "a click in the calendar"):
        denied, approval = _review(Session(_rails()), click, DELETE, what)
        assert approval is not None and not approval.approved and approval.approver == "nobody"
        assert denied is not None and denied.outcome == "denied" and denied.approval == approval
        assert denied.error == (
            f"a person must approve {what} (the control says 'delete') and it was denied "
            "(answered by nobody); do not try it again"
        )


def test_an_ordinary_action_goes_through_and_a_benchmark_run_reads_nothing() -> None:
    search = _Target(tag="button", type="button", text="Search")
    assert _review(Session(_rails()), Action(name="click", args={"bid": "12"}), search, "this action") == (None, None)
    # No rails (a benchmark task): nothing is asked, and a control with no pre-check is not read off the page.
    benchmark = Session(None, page=UntouchablePage())
    assert _review(benchmark, Action(name="click", args={"bid": "12"}), None, "a click in the calendar") == (None, None)
    assert _review(benchmark, Action(name="click", args={"bid": "12"}), DELETE, "this action") == (None, None)
