"""The goal's own controls on a page, which are not done yet, and which ids wait for them (pure)."""

from __future__ import annotations

from awm.trajectory import Step, TargetDesc
from awm.webarena.env import PageState
from awm.webarena.goal_progress import GoalGuidance, guidance, named_links

GOAL = "Select Jc, s6WcI, XMHY and click Submit."


def page(lines: list[tuple[str, str, str, str]], goal: str = GOAL) -> PageState:
    """A page from (id, role, label, flags) lines, as the observation prints them."""
    text = "\n".join(f"[{b}] {r} '{lab}'" + (f", {f}" if f else "") for b, r, lab, f in lines)
    elements = {b: TargetDesc(role=r, label=lab) for b, r, lab, _ in lines}
    return PageState(text=text, ids=[b for b, *_ in lines], elements=elements, url="", goal=goal, fingerprint="fp")


def clicked(label: str, role: str = "checkbox", outcome: str = "ok") -> Step:
    return Step(
        index=0, action={"name": "click", "args": {"bid": "x"}}, target=TargetDesc(role=role, label=label),
        outcome=outcome,
    )  # fmt: skip


BOXES = [
    ("18", "checkbox", "Jc", ""),
    ("21", "checkbox", "s6WcI", "checked"),
    ("24", "checkbox", "XMHY", ""),
    ("27", "checkbox", "0QW", ""),
    ("36", "button", "Submit", ""),
]


def test_boxes_the_goal_lists_are_pending_until_they_show_checked() -> None:
    state = guidance(page(BOXES), GOAL, [clicked("Jc")])  # clicked, but it does not show checked
    assert [c.bid for c in state.pending] == ["18", "24"]  # s6WcI shows checked; 0QW is not in the goal
    assert state.note == "Named in the goal and not done yet: [18] checkbox 'Jc'; [24] checkbox 'XMHY'"
    assert state.waiting == {"36"}  # Submit waits
    done = page([(b, r, lab, "checked" if r == "checkbox" and lab != "0QW" else f) for b, r, lab, f in BOXES])
    ticked = [clicked("Jc"), clicked("s6WcI"), clicked("XMHY")]
    assert guidance(done, GOAL, ticked) == guidance(page(BOXES), "Click Submit.", []) == GoalGuidance([], set(), "")


EXPAND_PAGE = [("16", "tab", "Section #11", "collapsed"), ("19", "tab", "Submit", "collapsed"), ("22", "button", "Submit", "")]


def test_the_closing_control_waits_while_fewer_actions_ran_than_the_clauses_before_it() -> None:
    """Measured: on "Expand the section below and click submit" the model clicked the header named
    'Submit' (or the button) first, and on "Generate a number..., then press submit" it pressed Submit."""
    goal = "Expand the section below and click submit."
    state = guidance(page(EXPAND_PAGE, goal), goal, [])
    assert state.waiting == {"19", "22"}  # both controls named 'Submit'; the section's header is left
    assert state.note == "Before 'click submit', the goal asks: expand the section below."
    assert guidance(page(EXPAND_PAGE, goal), goal, [clicked("Section #11", "tab")]).waiting == set()
    failed = clicked("Section #11", "tab", outcome="not_interactable")
    assert guidance(page(EXPAND_PAGE, goal), goal, [failed]).waiting == {"19", "22"}  # a failed action did nothing
    generate = "Generate a number less than 6, then press submit."
    two = [("3", "button", "Generate", ""), ("4", "button", "Submit", "")]
    assert guidance(page(two, generate), generate, []).waiting == {"4"}
    # One clause, a clause that asks for nothing, or a quoted name (a link may be there already): no hold.
    for alone in ("Click submit.", "Select nothing and click Submit.", 'Switch tabs, then click the link "Submit".'):
        assert guidance(page(EXPAND_PAGE, alone), alone, []).waiting == set(), alone


def test_a_button_the_goal_names_is_done_once_an_action_acted_on_it() -> None:
    goal = "Click button ONE, then click button TWO."
    p = page([("5", "button", "ONE", ""), ("6", "button", "TWO", ""), ("7", "button", "Reset", "")], goal)
    assert [c.label for c in guidance(p, goal, []).pending] == ["ONE", "TWO"]
    state = guidance(p, goal, [clicked("ONE", "button"), clicked("TWO", "button", outcome="not_interactable")])
    assert [c.label for c in state.pending] == ["TWO"]  # a failed click did not do it
    assert state.waiting == {"7"}  # the goal's own buttons never wait


def test_only_whole_labels_count_and_text_fields_never() -> None:
    goal = 'Find the email by Anne and reply with "Thanks".'
    p = page([("3", "clickable", "Anne Ullamcorper, re: lunch", ""), ("4", "textbox", "Thanks", ""), ("9", "button", "Send", "")], goal)
    assert guidance(p, goal, []).pending == [] and guidance(p, goal, []).waiting == set()


def test_a_link_the_goal_names_is_the_only_word_to_click_and_its_absence_is_said() -> None:
    """Measured: the model opened one section, did not find the named link, and clicked another word."""
    goal = 'Expand the sections below, to find and click on the link "vel".'
    assert named_links(goal) == ["vel"] and named_links('Enter "Kasie" and press "Search".') == []
    words = [("16", "tab", "Section #1", "collapsed"), ("31", "tab", "Section #3", "expanded"),
             ("34", "clickable", "Justo", ""), ("36", "clickable", "ultricies.", "")]  # fmt: skip
    away = guidance(page(words, goal), goal, [])
    assert away.waiting == {"34", "36"}  # the sections stay: they are how to find it
    assert away.note == "The link 'vel' named in the goal is not on this page: look for it elsewhere."
    here = guidance(page([*words, ("38", "clickable", "vel,", "")], goal), goal, [])  # a trailing comma
    assert [c.bid for c in here.pending] == ["38"] and here.waiting == {"34", "36"}
    assert here.note == "Named in the goal and not done yet: [38] clickable 'vel,'"


def filled(value: str) -> Step:
    return Step(index=0, action={"name": "fill", "args": {"bid": "20", "value": value}}, outcome="ok")


def test_a_value_to_type_holds_the_buttons_until_it_is_typed_or_shown() -> None:
    """Measured on multi-layouts: Search clicked before the director and the year were typed."""
    goal = "Search for crime movies directed by Holcomb from year 2010."
    form = [("17", "textbox", "Genre", ""), ("20", "textbox", "Director", ""), ("23", "button", "Search", "")]
    state = guidance(page(form, goal), goal, [])
    assert state.waiting == {"23"} and state.note == "Values in the goal not typed yet: 'Holcomb', '2010'"
    typed = page([("17", "textbox", "Genre", ""), ("20", "textbox", "Director", "")] + form[2:], goal)
    typed = typed.model_copy(update={"text": typed.text.replace("'Director'", "'Director' value='2010'")})
    assert guidance(typed, goal, [filled("HOLCOMB")]).waiting == set()  # typed in any case, or shown
    assert guidance(page(form[2:], goal), goal, []).waiting == set()  # no empty field: nothing to type into


def test_part_of_a_word_counts_as_typed_and_a_value_seen_on_a_page_is_not_one_to_type() -> None:
    goal = 'Enter an item that starts with "Ant" and ends with "ary".'
    field = page([("5", "textbox", "", ""), ("6", "button", "Submit", "")], goal)
    assert guidance(field, goal, [filled("Antiquary")]).waiting == set()
    assert guidance(field, goal, [filled("Ant")]).note == "Values in the goal not typed yet: 'ary'"
    goal = "Find the email by Anne and forward it to Alfi."
    inbox = Step(index=0, observation="[18] clickable 'Anne Ullamcorper'", outcome="ok")
    forward = page([("85", "textbox", "to:", ""), ("81", "button", "Send", "")], goal)
    assert guidance(forward, goal, [inbox]).note == "Values in the goal not typed yet: 'Alfi'"


def test_when_the_goal_names_options_of_a_list_the_others_and_the_list_box_wait() -> None:
    """Measured: with both named options chosen, the model clicked the list box (its click chooses the
    option under the box's centre instead), then options the goal did not name, until the step limit."""
    goal = "Select Ertha, Aurel from the scroll list and click Submit."
    lines = [
        ("13", "listbox", "", ""), ("14", "option", "Ertha", "selected"), ("15", "option", "Merridie", ""),
        ("18", "option", "Aurel", "selected"), ("23", "button", "Submit", ""),
    ]  # fmt: skip
    chosen = [clicked("Ertha", "option"), clicked("Aurel", "option")]
    state = guidance(page(lines, goal), goal, chosen)
    assert state.pending == [] and state.waiting == {"13", "15"}  # Submit is free, the rest waits
    unchosen = [(b, r, lab, "") for b, r, lab, _ in lines]
    assert guidance(page(unchosen, goal), goal, chosen[:1]).waiting == {"13", "15", "23"}


def test_a_number_to_set_holds_the_buttons_while_a_slider_does_not_show_it() -> None:
    """Measured on use-slider: the model clicked Submit with the slider wherever it started."""
    goal = "Select -94 with the slider and hit Submit."
    lines = [("16", "slider", "", ""), ("19", "button", "Submit", "")]
    state = guidance(page(lines, goal), goal, [])
    assert state.waiting == {"19"} and "Values in the goal not typed yet: '-94'" in state.note
    moved = Step(index=0, action={"name": "fill", "args": {"bid": "16", "value": "-94"}}, outcome="ok")
    assert guidance(page(lines, goal), goal, [moved]).waiting == set()
    words = "Select Anne with the slider and hit Submit."  # only a number is set on a slider
    assert guidance(page(lines, words), words, [clicked("Other", "button")]).waiting == set()


def test_a_control_the_goal_names_by_its_place_is_pending_and_the_others_of_its_kind_wait() -> None:
    """Measured on form-sequence: the model ticked the 3rd checkbox and then the 1st as well."""
    goal = "Select 7 with the slider, click the 3rd checkbox, then hit Submit."
    lines = [
        ("16", "slider", "", ""), ("20", "checkbox", "", ""), ("21", "checkbox", "", ""),
        ("22", "checkbox", "", ""), ("24", "button", "Submit", ""),
    ]  # fmt: skip
    state = guidance(page(lines, goal), goal, [])
    assert [c.bid for c in state.pending] == ["22"] and state.waiting == {"20", "21", "24"}
    assert "Named in the goal and not done yet: [22] checkbox (the 3rd checkbox)" in state.note
    ticked = [(b, r, lab, "checked" if b == "22" else f) for b, r, lab, f in lines]
    moved = Step(index=0, action={"name": "fill", "args": {"bid": "16", "value": "7"}}, outcome="ok")
    third = Step(index=1, action={"name": "click", "args": {"bid": "22"}}, outcome="ok")
    assert guidance(page(ticked, goal), goal, [moved, third]).waiting == {"20", "21"}  # Submit is free
    # Not a control's place: no such kind, or fewer of them than the place.
    for other in ("Click the 4th search result.", "Click the 5th checkbox.", "First, click Submit."):
        assert guidance(page(lines, other), other, []).pending == [], other


def test_a_place_counted_within_a_part_of_the_page_names_no_control() -> None:
    """On a search results page the first link is the site's logo: "the first link in the results"
    must not make the logo the one link to click and hold the results back."""
    lines = [("3", "link", "Acme", ""), ("8", "searchbox", "Search", ""), ("12", "link", "Blue kettle", ""), ("14", "link", "Red kettle", "")]
    for goal in ("Click the first link in the results.", "Open the 2nd link of the list", "Click the 1st link under Kettles."):
        state = guidance(page(lines, goal), goal, [])
        assert state.pending == [] and not state.waiting, goal
    for plain in ("Click the 2nd link.", "Click the 2nd link from the top.", "Click the 2nd link on the page."):
        assert [c.bid for c in guidance(page(lines, plain), plain, []).pending] == ["12"], plain  # the whole page


def test_a_value_typed_in_another_letter_case_than_the_goal_asks_holds_the_buttons() -> None:
    """Measured on enter-text-2: the model typed 'Cristin' for "cristin in all upper case" and submitted."""
    goal = 'Type "cristin" in all upper case letters in the text input and press Submit.'
    typed = [clicked("x", "textbox")]
    wrong = page([("14", "textbox", "", ""), ("15", "button", "Submit", "")], goal)
    wrong.text = "[14] textbox value='Cristin'\n[15] button 'Submit'"
    state = guidance(wrong, goal, typed)
    assert state.waiting == {"15"} and "'Cristin' is not in upper case as the goal asks" in state.note
    wrong.text = "[14] textbox value='CRISTIN'\n[15] button 'Submit'"
    assert guidance(wrong, goal, typed).waiting == set()


def test_while_no_name_the_goal_gives_was_shown_only_the_page_links_are_offered() -> None:
    """Measured on phone-book: the model clicked the phone number of whoever the first page showed."""
    goal = "Find Catherina in the contact book and click on their phone number."
    lines = [("20", "link", "358-832-9871", ""), ("24", "link", "lauree@aol.eu", ""), ("35", "link", "1", ""), ("37", "link", ">", "")]
    state = guidance(page(lines, goal), goal, [])
    assert state.waiting == {"20", "24", "35"} and "'Catherina' named in the goal is not on this page" in state.note
    numbers_only = [line for line in lines if line[2] != ">"]  # no way onward: the page numbers stay
    assert guidance(page(numbers_only, goal), goal, []).waiting == {"20", "24"}
    found = page([("45", "link", "513-644-8868", ""), ("57", "link", "<", "")], goal)
    found.text += "\nheading 'Catherina'"
    assert guidance(found, goal, []).waiting == set()
    # A name shown somewhere (the e-mail by Ryann in the inbox), or a field to type it into: no hold.
    inbox = "Find the email by Ryann and forward that email to Marlo."
    rows = page([("38", "clickable", "Ryann In. Neque", ""), ("40", "clickable", "Anne Ut.", "")], inbox)
    assert guidance(rows, inbox, []).waiting == set()


def test_on_a_site_page_that_turns_no_pages_the_links_that_lead_to_a_name_stay_offered() -> None:
    """An ordinary site's home page: "Open the profile of Alice Smith" and no text field; the way to her
    is the "People" link (was: every link but paging ones held, and this page has none)."""
    goal = "Open the profile of Alice Smith."
    lines = [("3", "link", "Home", ""), ("4", "link", "People", ""), ("5", "link", "Projects", ""),
             ("9", "link", "Contact us", "")]  # fmt: skip
    state = guidance(page(lines, goal), goal, [])
    assert state.waiting == set() and "'Alice Smith' named in the goal is not on this page" in state.note


def test_a_paragraph_named_by_its_place_is_the_text_to_highlight_and_the_others_wait() -> None:
    """highlight-text-2: "Highlight the text in the 2nd paragraph and click submit."."""
    goal = "Highlight the text in the 2nd paragraph and click submit."
    lines = [("13", "button", "Submit", ""), ("15", "text", "In in morbi.", ""),
             ("16", "text", "Sagittis justo.", ""), ("17", "text", "Lorem tellus.", "")]  # fmt: skip
    state = guidance(page(lines, goal), goal, [])
    assert [c.bid for c in state.pending] == ["16"] and state.waiting == {"13", "15", "17"}
    selected = Step(index=0, action={"name": "select_text", "args": {"bid": "16"}}, outcome="ok")
    assert guidance(page(lines, goal), goal, [selected]).waiting == {"15", "17"}  # Submit is free


def test_a_value_to_type_holds_only_the_buttons_of_the_form_that_takes_it() -> None:
    """A shop page with a cookie banner beside its search form: "Find Acme kettles" (a brand, an empty
    field) held "Accept cookies" with Search. The banner's button submits nothing typed in the form."""
    goal = "Find Acme kettles."
    state = page([("3", "button", "Accept cookies", ""), ("8", "textbox", "Search", ""), ("9", "button", "Search", "")], goal)
    assert guidance(state, goal, []).waiting == {"3", "9"}  # no forms known: every button waits, as before
    state.forms = {"8": "f1", "9": "f1"}
    assert guidance(state, goal, []).waiting == {"9"}
    state.forms = {"9": "f1"}  # an empty field outside any form: no telling which button submits it
    assert guidance(state, goal, []).waiting == {"3", "9"}


def test_a_closing_verb_that_names_its_control_holds_it_until_the_clause_before_ran() -> None:
    """A settings page (not a benchmark page): "Turn on dark mode and save the settings." The model
    saved at once and reported the settings saved; 'Save settings' waits for one action first."""
    goal = "Turn on dark mode and save the settings."
    lines = [("12", "checkbox", "Dark mode", ""), ("13", "checkbox", "Email me", ""), ("27", "button", "Save settings", "")]
    assert guidance(page(lines, goal), goal, []).waiting == {"27"}
    assert guidance(page(lines, goal), goal, [clicked("Dark mode")]).waiting == set()
    plain = [("12", "checkbox", "Dark mode", ""), ("27", "button", "Save", "")]
    assert guidance(page(plain, goal), goal, []).waiting == {"27"}
    assert guidance(page(lines, "Save the settings."), "Save the settings.", []).waiting == set()  # one clause
