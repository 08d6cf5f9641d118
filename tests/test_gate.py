"""Which actions the confirmation gate holds for a person, and how the gates answer (no browser)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from awm.config import DEFAULT_SENSITIVE_CLICKS, DEFAULT_SENSITIVE_FIELDS
from awm.gate import ControlInfo, DenyGate, GateRequest, TerminalGate, sensitive_reason


def reason(action: str, key: str = "", **control: object) -> str | None:
    return sensitive_reason(
        action, ControlInfo(**control), key=key,
        sensitive_fields=list(DEFAULT_SENSITIVE_FIELDS), sensitive_clicks=list(DEFAULT_SENSITIVE_CLICKS),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("action", "control", "key", "expected"),
    [
        ("click", {"tag": "button", "text": "Place order"}, "", "the control says 'order'"),
        ("click", {"tag": "a", "text": "Remove item"}, "", "the control says 'remove'"),
        # a link that only names a page is held too: failing safe costs a person one "y"
        ("click", {"tag": "a", "text": "Order history"}, "", "the control says 'order'"),
        ("click", {"tag": "button", "aria_label": "Delete message"}, "", "the control says 'delete'"),
        ("dblclick", {"tag": "button", "text": "Pay now"}, "", "the control says 'pay'"),
        ("click", {"tag": "input", "type": "button", "name": "sendMessage"}, "", "the control says 'send'"),
        ("click", {"tag": "button", "text": "Post comment"}, "", "the control says 'post'"),
        # a form is sensitive for what it is for: its own words, or a payment card field
        ("click", {"tag": "button", "type": "submit", "text": "Continue", "in_form": True, "submits": True,
                   "form_words": "checkout /checkout/step-2"}, "", "it submits a form that says 'checkout'"),
        ("click", {"tag": "button", "type": "submit", "text": "Save profile", "in_form": True, "submits": True,
                   "form_words": "profile display_name email cc-number cc-number"}, "", "it submits a form that says 'cc'"),
        ("press", {"tag": "input", "in_form": True, "form_words": "payment-form"}, "Enter",
         "it submits a form that says 'payment' (Enter in a form field)"),
        ("fill", {"tag": "input", "label": "Passport number"}, "", "the field is marked sensitive: its label 'Passport number' has 'passport'"),
    ],
)  # fmt: skip
def test_sensitive_actions_and_why(action: str, control: dict, key: str, expected: str) -> None:
    assert reason(action, key, **control) == expected


@pytest.mark.parametrize(
    ("action", "control", "key"),
    [
        ("click", {"tag": "a", "text": "Orders"}, ""),  # whole words only: 'orders' is not 'order'
        ("click", {"tag": "a", "text": "Confirmation details"}, ""),
        ("click", {"tag": "button", "type": "button", "text": "Save", "in_form": True}, ""),  # does not submit
        ("press", {"tag": "input", "in_form": False}, "Enter"),  # Enter outside any form
        ("press", {"tag": "input", "in_form": True}, "Tab"),
        ("fill", {"tag": "input", "label": "Display name"}, ""),
        ("fill", {"tag": "button", "text": "Send"}, ""),  # a fill does not press the control
        # ordinary work: a search form, a settings form, an email typed into a form, a to-do ticked
        ("click", {"tag": "button", "type": "submit", "text": "Search", "in_form": True, "submits": True, "form_words": "search /search q"}, ""),
        ("press", {"tag": "input", "in_form": True, "form_words": "search q"}, "Enter"),
        ("click", {"tag": "button", "type": "submit", "text": "Save settings", "in_form": True, "submits": True, "form_words": "settings dark_mode"}, ""),
        ("fill", {"tag": "input", "label": "Work email"}, ""),
        ("fill", {"tag": "input", "name": "phoneNumber"}, ""),
        ("click", {"tag": "input", "type": "checkbox", "label": "buy milk"}, ""),  # its label names the item
        ("click", {"tag": "div", "role": "switch", "aria_label": "Send me the newsletter"}, ""),
    ],
)  # fmt: skip
def test_ordinary_actions_pass(action: str, control: dict, key: str) -> None:
    assert reason(action, key, **control) is None


def request(png: bytes | None = None) -> GateRequest:
    return GateRequest(action="click('12')", reason="the control says 'delete'", element="<button> 'Delete'",
                       url="http://shop.example.test/", screenshot_png=png, label="ep-1/step 0")  # fmt: skip


def test_an_email_field_asks_when_the_configuration_names_it() -> None:
    found = sensitive_reason(
        "fill", ControlInfo(tag="input", label="Work email"), sensitive_fields=["email"], sensitive_clicks=[]
    )
    assert found == "the field is marked sensitive: its label 'Work email' has 'email'"


def test_deny_gate_denies_and_says_nobody_was_there() -> None:
    approval = DenyGate().ask(request())
    assert not approval.approved and approval.approver == "nobody"
    assert approval.action == "click('12')" and approval.reason == "the control says 'delete'"


@pytest.mark.parametrize(("typed", "approved"), [("y\n", True), ("YES\n", True), ("n\n", False), ("\n", False), ("", False)])
def test_terminal_gate_reads_one_answer_default_no(typed: str, approved: bool) -> None:
    out = io.StringIO()
    approval = TerminalGate(5, input_stream=io.StringIO(typed), output=out).ask(request())
    assert approval.approved is approved
    assert approval.approver == ("terminal" if typed else "timeout")  # end of input counts as no answer
    shown = out.getvalue()
    assert "click('12')" in shown and "<button> 'Delete'" in shown and "Allow it? [y/N] (no answer in 5 s denies)\n" in shown


def test_terminal_gate_times_out_on_a_silent_terminal_and_saves_the_screenshot(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(read_end) as silent:
            gate = TerminalGate(0.2, shots_dir=tmp_path, input_stream=silent, output=io.StringIO())
            approval = gate.ask(request(b"\x89PNG\r\n\x1a\nfake"))
    finally:
        os.close(write_end)
    assert not approval.approved and approval.approver == "timeout"
    saved = Path(approval.screenshot)
    assert saved.parent == tmp_path and saved.read_bytes().startswith(b"\x89PNG") and "step-0" in saved.name
    again = TerminalGate(0.01, shots_dir=tmp_path, input_stream=io.StringIO("n\n"), output=io.StringIO())
    assert Path(again.ask(request(b"\x89PNG second")).screenshot) != saved  # never overwritten
    assert saved.read_bytes() == b"\x89PNG\r\n\x1a\nfake"
