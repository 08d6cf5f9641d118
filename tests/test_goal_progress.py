"""The goal's own controls on a page, which are not done yet, and which buttons wait for them (pure)."""

from __future__ import annotations

from awm.trajectory import Step, TargetDesc
from awm.webarena.env import PageState
from awm.webarena.goal_progress import pending_goal_controls, pending_text, waiting_ids

GOAL = "Select Jc, s6WcI, XMHY and click Submit."


def page(lines: list[tuple[str, str, str, str]], goal: str = GOAL) -> PageState:
    """A page from (id, role, label, flags) lines, as the observation prints them."""
    text = "\n".join(f"[{b}] {r} '{lab}'" + (f", {f}" if f else "") for b, r, lab, f in lines)
    elements = {b: TargetDesc(role=r, label=lab) for b, r, lab, _ in lines}
    return PageState(text=text, ids=[b for b, *_ in lines], elements=elements, url="", goal=goal, fingerprint="fp")


def clicked(label: str, role: str = "checkbox", outcome: str = "ok") -> Step:
    return Step(index=0, action={"name": "click", "args": {"bid": "x"}}, target=TargetDesc(role=role, label=label), outcome=outcome)


BOXES = [
    ("18", "checkbox", "Jc", ""),
    ("21", "checkbox", "s6WcI", "checked"),
    ("24", "checkbox", "XMHY", ""),
    ("27", "checkbox", "0QW", ""),
    ("36", "button", "Submit", ""),
]


def test_boxes_the_goal_lists_are_pending_until_they_show_checked() -> None:
    p = page(BOXES)
    pending = pending_goal_controls(p, GOAL, [clicked("Jc")])  # clicked, but it does not show checked
    assert [c.bid for c in pending] == ["18", "24"]  # s6WcI shows checked; 0QW is not in the goal
    assert pending_text(pending) == "Named in the goal and not done yet: [18] checkbox 'Jc'; [24] checkbox 'XMHY'"
    assert waiting_ids(p, GOAL, pending) == {"36"}  # Submit waits
    done = page([(b, r, lab, "checked" if r == "checkbox" and lab != "0QW" else f) for b, r, lab, f in BOXES])
    assert pending_goal_controls(done, GOAL, []) == [] and waiting_ids(done, GOAL, []) == set()
    assert pending_text([]) == ""


def test_a_link_or_button_the_goal_names_is_done_once_an_action_acted_on_it() -> None:
    goal = "Click button ONE, then click button TWO."
    p = page([("5", "button", "ONE", ""), ("6", "button", "TWO", ""), ("7", "button", "Reset", "")], goal)
    assert [c.label for c in pending_goal_controls(p, goal, [])] == ["ONE", "TWO"]
    history = [clicked("ONE", "button"), clicked("TWO", "button", outcome="not_interactable")]
    pending = pending_goal_controls(p, goal, history)
    assert [c.label for c in pending] == ["TWO"]  # a failed click did not do it
    assert waiting_ids(p, goal, pending) == {"7"}  # the goal's own buttons never wait


def test_only_whole_labels_count_and_text_fields_never() -> None:
    goal = 'Find the email by Anne and reply with "Thanks".'
    p = page([("3", "clickable", "Anne Ullamcorper, re: lunch", ""), ("4", "textbox", "Thanks", ""), ("9", "button", "Send", "")], goal)
    assert pending_goal_controls(p, goal, []) == []
    assert pending_goal_controls(page(BOXES, "Click Submit."), "Click Submit.", []) == []  # no values at all
