"""The observation of real pages in Chromium: which form each element sits in (tests/fixtures/pages/
cookie_banner.html: only the form's own button waits for a value the goal names, not the cookie banner's
beside it), a table's rows (tests/fixtures/pages/grades.html), and a fill on a dropdown list
(tests/fixtures/pages/product_list.html)."""

from __future__ import annotations

import pytest

from awm.actions import Action
from awm.config import BrowserSettings, RailsSettings
from awm.trajectory import Task
from awm.webarena.env import BrowserSession
from awm.webarena.goal_progress import guidance

pytestmark = pytest.mark.browser


def _task(base_url: str, page: str, goal: str) -> Task:
    return Task(
        task_id="browsergym/openended", scope="live/fixture", benchmark="live",
        meta={"task_kwargs": {"start_url": f"{base_url}{page}.html", "goal": goal}},
    )  # fmt: skip


SETTINGS = BrowserSettings(pre_observation_delay=0.2, slow_mo_ms=0, rails=RailsSettings(allow_hosts=["127.0.0.1"]))


def _open(base_url: str, page: str, goal: str):
    with BrowserSession(SETTINGS) as session:
        return session.reset(_task(base_url, page, goal))


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


def test_a_field_whose_label_does_not_name_it_shows_the_forms_key_for_it(base_url: str) -> None:
    """A reply box labelled "Be kind. Markdown works here." and a field whose only name is its placeholder
    "1234 5678 9012 3456" do not say they are the comment and the card number; their form keys do. A key
    the label already says (``email``, ``user`` in "Username", ``field_cc`` for "Cc:") and one too short to mean anything
    (``q``) are not shown. The reply box is the page's one text box of several lines."""
    page = _open(base_url, "reply_box", "Reply to the post with the comment 'Lovely beds!'")
    fields = [line.partition("] ")[2] for line in page.text.splitlines() if "] textbox" in line]
    assert fields == [
        "textbox 'Be kind. Markdown works here.' (name=comment)",
        "textbox '1234 5678 9012 3456' (name=card)",
        "textbox 'Email'",
        "textbox 'Username'",
        "textbox 'Cc:'",
        "textbox 'Anything else?'",
    ]
    by_label = {d.label: bid for bid, d in page.elements.items()}
    assert page.multiline == {by_label["Be kind. Markdown works here."]}  # the textarea, not the inputs
    assert page.field_keys[by_label["Be kind. Markdown works here."]] == "comment"  # kept, shown or not
    assert page.field_keys[by_label["Cc:"]] == "field_cc"
    assert page.forms[by_label["Be kind. Markdown works here."]] == page.forms[by_label["Post reply"]] != ""


def test_typing_a_fields_own_label_into_it_is_refused_unless_the_goal_states_it(base_url: str) -> None:
    """The reply box labelled "Be kind. Markdown works here." refuses that very text (the model's copying
    slip on Trac's comment box) and names the goal's quoted texts the page does not show, takes the goal's
    comment, and takes its label where the goal states it."""
    goal = "Reply to the post with the comment 'Lovely beds!'"
    with BrowserSession(SETTINGS) as session:
        page = session.reset(_task(base_url, "reply_box", goal))
        box = next(bid for bid, d in page.elements.items() if d.label == "Be kind. Markdown works here.")
        slip = session.execute(Action(name="fill", args={"bid": box, "value": "Be kind. Markdown works here."}))
        assert slip.outcome == "action_error" and "the field's own label" in slip.error
        assert slip.error.endswith("type the text the goal gives ('Lovely beds!')")  # what to type instead
        assert session.observe().snapshot.controls[box].value in (None, "")
        assert session.execute(Action(name="fill", args={"bid": box, "value": "Lovely beds!"})).outcome == "ok"
    with BrowserSession(SETTINGS) as session:  # a quoted text the page shows (the post's title) is not offered
        page = session.reset(_task(base_url, "reply_box", "Reply to 'Moving the garden beds' with 'Lovely beds!'"))
        box = next(bid for bid, d in page.elements.items() if d.label == "Be kind. Markdown works here.")
        slip = session.execute(Action(name="fill", args={"bid": box, "value": "Be kind. Markdown works here."}))
        assert slip.error.endswith("type the text the goal gives ('Lovely beds!')")
    with BrowserSession(SETTINGS) as session:
        page = session.reset(_task(base_url, "reply_box", "Type 'Be kind. Markdown works here.' into the reply box."))
        box = next(bid for bid, d in page.elements.items() if d.label == "Be kind. Markdown works here.")
        assert session.execute(Action(name="fill", args={"bid": box, "value": "Be kind. Markdown works here."})).outcome == "ok"


def test_a_fill_on_a_dropdown_chooses_the_option_it_names_or_lists_what_the_list_takes(base_url: str) -> None:
    """A store's sort list (a native <select>): typed text cannot go in, so a fill that names an option
    (in any case) chooses it with select_option, and one that names none is an action error listing the
    options; the list keeps its choice."""
    with BrowserSession(SETTINGS) as session:
        page = session.reset(_task(base_url, "product_list", 'How much do the "Trail Socks (3 Pack)" cost?'))
        sort = next(bid for bid, d in page.elements.items() if d.role == "combobox")
        chose = session.execute(Action(name="fill", args={"bid": sort, "value": "price HIGH to low"}))
        assert chose.outcome == "ok" and chose.note == f"chose 'Price high to low' in the dropdown [{sort}] with select_option"
        assert session.page.eval_on_selector("#sort_by", "e => e.value") == "price-desc"
        typed = session.execute(Action(name="fill", args={"bid": sort, "value": "Trail Socks (3 Pack)"}))
        assert typed.outcome == "action_error" and "is a dropdown list" in typed.error
        assert typed.error.endswith("Its options: 'Relevancy', 'Price high to low', 'Price low to high', 'Title A to Z'")
        assert session.page.eval_on_selector("#sort_by", "e => e.value") == "price-desc"
        box = next(bid for bid, d in page.elements.items() if d.role == "searchbox")
        assert session.execute(Action(name="fill", args={"bid": box, "value": "Trail Socks"})).outcome == "ok"


def test_a_title_typed_into_a_search_form_keeps_the_agent_in_that_form_until_it_is_sent(base_url: str) -> None:
    """The store's search box, typed with the title the goal asks about: the page only echoes the typing
    (no reaction), the box and its button share a form, so the agent is held to that form until it is
    sent, with the way it is sent named; the sort list, in a form of its own, is held."""
    from awm.trajectory import Step
    from awm.webarena.fingerprint import describe_changes
    from awm.webarena.guidance_filters import FilterContext, Offer, sending_typed_value
    from awm.webarena.harness import page_reaction

    goal = 'How much does "Steel Saucepan 2 qt" cost?'
    with BrowserSession(SETTINGS) as session:
        page = session.reset(_task(base_url, "product_list", goal))
        box = next(bid for bid, d in page.elements.items() if d.role == "searchbox")
        button = next(bid for bid, d in page.elements.items() if (d.role, d.label) == ("button", "Search"))
        sort = next(bid for bid, d in page.elements.items() if d.role == "combobox")
        action = Action(name="fill", args={"bid": box, "value": "Steel Saucepan 2 qt"})
        assert session.execute(action).outcome == "ok"
        after = session.observe()
    assert page.snapshot is not None and after.snapshot is not None
    reaction = page_reaction(page, after, describe_changes(page.snapshot, after.snapshot))
    typed = Step(index=0, url=page.url, action=action.model_dump(), outcome="ok", reaction=reaction)
    left = sending_typed_value(FilterContext(after, goal, [typed], ends_itself=True), Offer(None, None))
    assert reaction == "" and left.ids_for is not None
    assert box in left.ids_for["fill"] and sort not in left.ids_for["fill"] and sort not in left.ids_for["click"]
    assert left.names is not None and "send_msg_to_user" not in left.names and "press" in left.names
    assert left.note == f"The goal's value is typed in [{box}] and not sent yet: its form sends it with [{button}] 'Search', or press('{box}', 'Enter')."
