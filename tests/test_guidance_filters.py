"""The agent's guidance filters, one by one on small shop pages (not benchmark pages): what each holds
back when its condition holds and that it holds nothing back when it does not; the switch that turns
them all off (the bare grammar, no goal note) or single ones; and the settings' check of their names."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from awm.actions import ACTION_SETS, action_grammar
from awm.config import GUIDANCE_FILTERS, NOT_RESULTS, config_hash, load_settings
from awm.errors import ConfigError
from awm.llm.base import ChatRequest, ChatResult
from awm.memory.workflow import Workflow, WorkflowStep, open_parameters
from awm.pipeline.policy import PolicyFactory
from awm.tokens import CharEstimateCounter, TokenCounter
from awm.trajectory import Step, TargetDesc, Task
from awm.webarena import prompts
from awm.webarena.agent import LLMAgent
from awm.webarena.env import PageState
from awm.webarena.fingerprint import ControlState, PageSnapshot
from awm.webarena.guidance_filters import (
    FILTERS,
    FilterContext,
    Offer,
    active_filters,
    broken_workflows,
    changes_offer,
    completed_workflows,
    disabled_targets,
    ending_before_composed_text,
    filled_not_clicked,
    first_step_infeasible,
    goal_note,
    goal_waiting,
    infeasible_after_reaction,
    narrowed,
    no_page_to_go_back_to,
    parts_in_order,
    refused_workflows,
    repeated_plain_actions,
    sending_composed_text,
    sending_typed_value,
    spent_choices,
    undoing_clicks,
    unstartable_workflows,
)
from awm.webarena.harness import DecisionContext, page_targets
from awm.webarena.workflow_run import CallableWorkflow

SHOP = "http://shop.example.test/checkout"
PLAIN_GOAL = "Buy the blue mug with the saved card."


def shop_page(
    lines: list[tuple[str, str, str, str]],
    *,
    goal: str = PLAIN_GOAL,
    fingerprint: str = "fp",
    snapshot: PageSnapshot | None = None,
) -> PageState:
    """A page from (id, role, label, extra) lines, as the observation prints them (extra: `value='...'`
    or flags after a comma)."""
    text = "\n".join(f"[{b}] {r} '{lab}'" + (f"{x}" if x else "") for b, r, lab, x in lines)
    elements = {b: TargetDesc(role=r, label=lab) for b, r, lab, _ in lines}
    return PageState(
        text=text, ids=[b for b, *_ in lines], elements=elements, url=SHOP, goal=goal, fingerprint=fingerprint,
        snapshot=snapshot,
    )  # fmt: skip


CHECKOUT = [
    ("11", "textbox", "Email", ""),
    ("12", "checkbox", "Gift wrap", ""),
    ("13", "button", "Place order", ""),
]


def done(name: str, args: dict[str, object], *, fingerprint: str = "before", outcome: str = "ok", **kw: object) -> Step:
    return Step(index=0, url=SHOP, action={"name": name, "args": args}, outcome=outcome, fingerprint=fingerprint, **kw)


def context(page: PageState, history: list[Step] | None = None, *, ends_itself: bool = False) -> FilterContext:
    return FilterContext(page, page.goal, history or [], ends_itself=ends_itself)


def every_id(page: PageState) -> Offer:
    """The offer before any filter: the page's role-aware id sets and every browser action."""
    return Offer(ids_for=page_targets(page).ids_for, names=None)


# --- each filter --------------------------------------------------------------------------------


def test_spent_choices_holds_a_field_already_filled_and_an_action_tried_on_this_page_state() -> None:
    page = shop_page([("11", "textbox", "Email", " value='ann@example.test'"), *CHECKOUT[1:]])
    offer = every_id(page)
    history = [done("fill", {"bid": "11", "value": "ann@example.test"}), done("click", {"bid": "12"}, fingerprint="fp")]
    left = spent_choices(context(page, history), offer)
    assert "11" in offer.ids_for["fill"] and "11" not in left.ids_for["fill"]  # filled and shows its value
    assert "12" not in left.ids_for["click"] and "13" in left.ids_for["click"]  # tried on this very state
    assert spent_choices(context(page, []), offer) == offer  # nothing done yet: nothing held
    # A fill refused on this state for typing the field's own label into it stays offered: the field was
    # never tried with a value. One the field did not take at all is held.
    empty = shop_page(CHECKOUT)
    refused = done(
        "fill", {"bid": "11", "value": "Email"}, fingerprint="fp", outcome="action_error", target=TargetDesc(role="textbox", label="Email")
    )
    assert "11" in spent_choices(context(empty, [refused]), every_id(empty)).ids_for["fill"]
    refused_plainly = done(  # the executor's comparison: case, spaces and end punctuation do not count
        "fill", {"bid": "11", "value": " email"}, fingerprint="fp", outcome="action_error", target=TargetDesc(role="textbox", label="Email:")
    )
    assert "11" in spent_choices(context(empty, [refused_plainly]), every_id(empty)).ids_for["fill"]
    hidden = done("fill", {"bid": "11", "value": "ann@example.test"}, fingerprint="fp", outcome="not_interactable")
    assert "11" not in spent_choices(context(empty, [hidden]), every_id(empty)).ids_for["fill"]


def test_undoing_clicks_holds_clicks_on_what_shows_chosen() -> None:
    controls = {"12": ControlState(role="checkbox", label="Gift wrap", flags=["checked"])}
    page = shop_page(CHECKOUT, snapshot=PageSnapshot(controls=controls))
    left = undoing_clicks(context(page), every_id(page))
    assert "12" not in left.ids_for["click"] and "13" in left.ids_for["click"]
    assert "12" in left.ids_for["uncheck"]  # a box that must be cleared can still be
    unticked = shop_page(CHECKOUT, snapshot=PageSnapshot(controls={"12": ControlState(role="checkbox")}))
    assert undoing_clicks(context(unticked), every_id(unticked)) == every_id(unticked)


def test_disabled_targets_holds_a_disabled_element_for_every_action_that_needs_an_enabled_one() -> None:
    page = shop_page([*CHECKOUT[:2], ("13", "button", "Place order", ", disabled")])
    left = disabled_targets(context(page), every_id(page))
    acting = [n for n, spec in ACTION_SETS["browser"].items() if spec.needs_interactable or n == "focus"]
    assert "click" in acting and "focus" in acting
    assert all("13" not in left.ids_for.get(name, page.ids) for name in acting)
    assert "11" in left.ids_for["fill"] and "12" in left.ids_for["click"]
    enabled = shop_page(CHECKOUT)
    assert disabled_targets(context(enabled), every_id(enabled)) == every_id(enabled)


def test_filled_not_clicked_holds_clicks_on_filled_or_clicked_fields_and_sliders_but_not_on_a_combobox() -> None:
    filled = ("11", "textbox", "Email", " value='ann@example.test'")
    page = shop_page([filled, *CHECKOUT[1:], ("14", "slider", "Quantity", ""), ("15", "combobox", "Country", "")])
    left = filled_not_clicked(context(page), every_id(page))
    assert left.ids_for["click"] == ["12", "13", "15"]
    assert "11" in left.ids_for["fill"] and "11" in left.ids_for.get("focus", page.ids)  # filled or focused
    # on a site the agent ends itself, an empty field keeps one click (a date picker, an autocomplete
    # opens on it), then it is filled; on a benchmark page every click on a field stays held
    date = shop_page([("21", "textbox", "Delivery date", ""), *CHECKOUT[1:]])
    assert "21" in filled_not_clicked(context(date, ends_itself=True), every_id(date)).ids_for["click"]
    once = [done("click", {"bid": "21"})]
    assert "21" not in filled_not_clicked(context(date, once, ends_itself=True), every_id(date)).ids_for["click"]
    assert "21" not in filled_not_clicked(context(date), every_id(date)).ids_for["click"]
    no_fields = shop_page(CHECKOUT[1:])
    assert filled_not_clicked(context(no_fields), every_id(no_fields)).ids_for["click"] == no_fields.ids


LINKS = [("21", "link", "Returns", ""), ("22", "link", "Shipping", ""), ("23", "button", "Search", "")]
LINK_GOAL = 'Click on the link "Returns".'


def test_goal_waiting_holds_the_other_links_when_the_goal_names_one() -> None:
    page = shop_page(LINKS, goal=LINK_GOAL)
    left = goal_waiting(context(page), every_id(page))
    assert left.ids_for["click"] == ["21"]  # Shipping waits, and the Search button until Returns is clicked
    assert "22" not in left.ids_for["press"]
    plain = shop_page(LINKS)
    assert goal_waiting(context(plain), every_id(plain)) == every_id(plain)


def test_goal_note_says_what_the_goal_names_that_is_not_on_this_page() -> None:
    page = shop_page(LINKS[1:], goal=LINK_GOAL)  # no Returns link here
    note = goal_note(context(page), every_id(page)).note
    assert note == "The link 'Returns' named in the goal is not on this page: look for it elsewhere."
    assert goal_note(context(shop_page(LINKS[1:])), every_id(page)).note == ""


def test_first_step_infeasible_holds_giving_up_before_looking_where_the_agent_ends_the_task() -> None:
    page = shop_page(CHECKOUT)
    offer = Offer(ids_for=None, names=["click", "send_msg_to_user", "report_infeasible"])
    assert first_step_infeasible(context(page, ends_itself=True), offer).names == ["click", "send_msg_to_user"]
    assert first_step_infeasible(context(page, [done("click", {"bid": "12"})], ends_itself=True), offer) == offer
    assert first_step_infeasible(context(page, ends_itself=False), offer) == offer


def test_infeasible_after_reaction_holds_giving_up_right_after_the_page_moved() -> None:
    """A shop's checkout: the click on Gift wrap made the page show the box checked; giving up there is
    held (the answer and every action stay), and offered again after a step the page did not react to."""
    page = shop_page(CHECKOUT)
    offer = Offer(ids_for=None, names=["click", "send_msg_to_user", "report_infeasible"])
    reacted = done("click", {"bid": "12"}, reaction="[12] checkbox 'Gift wrap' is now checked")
    assert infeasible_after_reaction(context(page, [reacted], ends_itself=True), offer).names == ["click", "send_msg_to_user"]
    assert infeasible_after_reaction(context(page, [reacted, done("click", {"bid": "13"})], ends_itself=True), offer) == offer
    assert infeasible_after_reaction(context(page, [reacted], ends_itself=False), offer) == offer  # MiniWoB++: the page ends it


def test_ending_before_composed_text_holds_the_endings_while_a_sentence_waits_for_its_box() -> None:
    """A blog post's reply form: the goal's comment is neither typed nor shown and the reply box (several
    lines) is on the page, so giving up and answering are held; typed and not yet posted, still held;
    posted, or with only a one-line search box, or for a goal that states no sentence or asks a question,
    or on MiniWoB++ (the page ends it), both are offered. A box that holds something else (the model typed the box's
    label into it) holds them still."""
    goal = 'Reply to the post "Moving the garden beds" with the comment "Lovely beds, what soil did you use?".'
    lines = [
        ("20", "textbox", "Search", ""), ("30", "heading", "Moving the garden beds", ""),
        ("31", "textbox", "Be kind.", ""), ("32", "button", "Post reply", ""),
    ]  # fmt: skip

    def reply_page(rows: list[tuple[str, str, str, str]], goal: str = goal) -> PageState:
        return shop_page(rows, goal=goal).model_copy(update={"multiline": frozenset({"31"})})

    page = reply_page(lines)
    offer = Offer(ids_for=None, names=["fill", "click", "send_msg_to_user", "report_infeasible"])
    assert ending_before_composed_text(context(page, ends_itself=True), offer).names == ["fill", "click"]
    typed = done("fill", {"bid": "31", "value": "Lovely beds, what soil did you use?"})
    assert ending_before_composed_text(context(page, [typed], ends_itself=True), offer).names == ["fill", "click"]
    sent = [typed, done("click", {"bid": "32"})]  # typed and posted: both endings come back
    assert ending_before_composed_text(context(page, sent, ends_itself=True), offer) == offer
    still_there = reply_page([*lines[:2], ("31", "textbox", "Be kind.", " value='Lovely beds, what soil did you use?'"), lines[3]])
    previewed = ending_before_composed_text(context(still_there, sent, ends_itself=True), offer)
    assert previewed.names == ["fill", "click"]  # clicked, and the box still holds it: not sent
    mistyped = reply_page([*lines[:2], ("31", "textbox", "Be kind.", " value='Be kind.'"), lines[3]])
    assert ending_before_composed_text(context(mistyped, ends_itself=True), offer).names == ["fill", "click"]
    one_line = page.model_copy(update={"multiline": frozenset()})
    assert ending_before_composed_text(context(one_line, ends_itself=True), offer) == offer
    named_only = reply_page(lines, goal='Open the post "Moving the garden beds".')
    assert ending_before_composed_text(context(named_only, ends_itself=True), offer) == offer
    asked = reply_page(lines, goal='Who wrote the comment "Lovely beds, what soil did you use?"?')
    assert ending_before_composed_text(context(asked, ends_itself=True), offer) == offer  # a question: what to find
    assert ending_before_composed_text(context(page, ends_itself=False), offer) == offer


def test_sending_composed_text_keeps_the_agent_in_the_form_until_its_button_sends_the_text() -> None:
    """A blog post's reply form: the goal's comment typed into the reply box (several lines, in the reply
    form), and the box still holds it. The site's search box and its links are held, the form's help link
    and the box's resize grip too, and so is going back; the form's box and its buttons stay, and the
    note names the buttons. A button clicked since that left the text in the box (Preview) is held and
    named as such. Once the box is empty (posted), or where the text went into the one-line search box
    only, or on a page without forms, nothing is held."""
    goal = 'Reply to the post "Moving the garden beds" with the comment "Lovely beds, what soil did you use?".'
    box = ("31", "textbox", "Be kind.", " value='Lovely beds, what soil did you use?'")
    lines = [
        ("20", "textbox", "Search", ""), ("21", "link", "Home", ""), ("30", "heading", "Moving the garden beds", ""),
        box, ("32", "button", "Preview", ""), ("33", "button", "Post reply", ""), ("34", "link", "Markdown help", ""),
        ("35", "clickable", "", ""),
    ]  # fmt: skip
    forms = {"20": "search", "31": "reply", "32": "reply", "33": "reply", "34": "reply", "35": "reply"}

    def reply_page(rows: list[tuple[str, str, str, str]], form_keys: dict[str, str] = forms) -> PageState:
        return shop_page(rows, goal=goal).model_copy(update={"multiline": frozenset({"31"}), "forms": form_keys})

    page = reply_page(lines)
    names = ["fill", "click", "go_back", "scroll", "send_msg_to_user"]
    offer = replace(every_id(page), names=names, note="a note")
    typed = done("fill", {"bid": "31", "value": "Lovely beds, what soil did you use?"})
    left = sending_composed_text(context(page, [typed], ends_itself=True), offer)
    assert left.ids_for is not None
    assert left.ids_for["fill"] == ["31"] and left.ids_for["click"] == ["31", "32", "33"]
    assert left.names == ["fill", "click", "scroll", "send_msg_to_user"]
    assert left.note == (
        "a note\nThe goal's text is typed in [31] and not sent yet: its form sends it with [32] 'Preview', [33] 'Post reply'."
    )
    grip = done("click", {"bid": "35"}, target=TargetDesc(role="clickable"))  # the box's resize grip
    assert sending_composed_text(context(page, [typed, grip], ends_itself=True), offer) == left
    preview = done("click", {"bid": "32"}, target=TargetDesc(role="button", label="Preview"))
    previewed = sending_composed_text(context(page, [typed, preview], ends_itself=True), offer)
    assert previewed.ids_for is not None and previewed.ids_for["click"] == ["31", "33"]
    assert previewed.note.endswith("its form sends it with [33] 'Post reply' ('Preview' left it in the box).")
    posted = reply_page([*lines[:3], box[:3] + ("",), *lines[4:]])  # the box is empty again
    post = done("click", {"bid": "33"}, target=TargetDesc(role="button", label="Post reply"))
    assert sending_composed_text(context(posted, [typed, post], ends_itself=True), offer) == offer
    in_search = done("fill", {"bid": "20", "value": "Lovely beds, what soil did you use?"})
    only_search = reply_page([*lines[:3], box[:3] + ("",), *lines[4:]])
    assert sending_composed_text(context(only_search, [in_search], ends_itself=True), offer) == offer
    assert sending_composed_text(context(reply_page(lines, {}), [typed], ends_itself=True), offer) == offer
    # The post's title typed into the box (it was on the page before: a name, not a text to post).
    titled = reply_page([*lines[:3], ("31", "textbox", "Be kind.", " value='Moving the garden beds'"), *lines[4:]])
    title = done("fill", {"bid": "31", "value": "Moving the garden beds"}, observation=titled.text)
    assert sending_composed_text(context(titled, [title], ends_itself=True), offer) == offer


def test_sending_typed_value_keeps_the_agent_in_the_form_until_it_sends_the_goals_value() -> None:
    """A bookshop's catalogue: the goal's title typed into the header's search box. Until the form is
    sent, the sort list and the links are held, and so are going back, scrolling and both endings; the
    search form's box and button and `press` stay, and the note says how the form sends it; a scroll
    since does not release it. Nothing is held where the page answered the typing (suggestions), where
    the value typed is not the goal's, once a click or a key press worked, after the search ran (the
    results page), on a benchmark page (the page ends the task), or where the field is in no form."""
    goal = 'How much does "The Hobbit" cost?'
    lines = [
        ("54", "textbox", "Search", " value='The Hobbit'"), ("55", "button", "Search", ""),
        ("60", "link", "Fiction", ""), ("113", "combobox", "Sort by", ""), ("114", "button", "Sort", ""),
    ]  # fmt: skip
    forms = {"54": "search", "55": "search", "113": "sort", "114": "sort"}
    page = shop_page(lines, goal=goal).model_copy(update={"forms": forms})
    names = ["fill", "click", "press", "go_back", "scroll", "send_msg_to_user", "report_infeasible"]
    offer = replace(every_id(page), names=names)
    typed = done("fill", {"bid": "54", "value": "The Hobbit"})
    left = sending_typed_value(context(page, [typed], ends_itself=True), offer)
    assert left.ids_for is not None
    assert left.ids_for["fill"] == ["54"] and left.ids_for["click"] == ["54", "55"] and left.ids_for["press"] == ["54", "55"]
    assert left.names == ["fill", "click", "press"]
    assert left.note == "The goal's value is typed in [54] and not sent yet: its form sends it with [55] 'Search', or press('54', 'Enter')."
    scrolled = done("scroll", {"delta_x": 0, "delta_y": 300})
    assert sending_typed_value(context(page, [typed, scrolled], ends_itself=True), offer) == left
    suggested = done("fill", {"bid": "54", "value": "The Hobbit"}, reaction="The Hobbit; The Hobbit (illustrated)")
    assert sending_typed_value(context(page, [suggested], ends_itself=True), offer) == offer
    other = page.model_copy(update={"text": page.text.replace("The Hobbit", "Tolkien")})
    assert sending_typed_value(context(other, [done("fill", {"bid": "54", "value": "Tolkien"})], ends_itself=True), offer) == offer
    pressed = done("press", {"bid": "54", "key_comb": "Enter"})
    assert sending_typed_value(context(page, [typed, pressed], ends_itself=True), offer) == offer
    results = page.model_copy(update={"url": "http://shop.example.test/search/?q=The+Hobbit"})
    assert sending_typed_value(context(results, [typed], ends_itself=True), offer) == offer
    assert sending_typed_value(context(page, [typed]), offer) == offer
    formless = page.model_copy(update={"forms": {}})
    assert sending_typed_value(context(formless, [typed], ends_itself=True), offer) == offer


def test_no_page_to_go_back_to_holds_go_back_until_the_episode_left_its_first_page() -> None:
    """On a library's opening-hours page the model's first action was go_back(), which left for
    about:blank; once a step was on another page of the task, going back is offered."""
    page = shop_page(CHECKOUT)
    offer = Offer(ids_for=None, names=["click", "go_back", "send_msg_to_user"])
    assert no_page_to_go_back_to(context(page), offer).names == ["click", "send_msg_to_user"]
    here = done("click", {"bid": "12"})  # still on the checkout page
    assert no_page_to_go_back_to(context(page, [here]), offer).names == ["click", "send_msg_to_user"]
    elsewhere = Step(index=0, url="http://shop.example.test/cart", action={"name": "click", "args": {"bid": "3"}}, outcome="ok")
    assert no_page_to_go_back_to(context(page, [elsewhere]), offer) == offer


def test_repeated_plain_actions_holds_a_scroll_that_showed_nothing_new() -> None:
    page = shop_page(CHECKOUT)
    scrolled = done("scroll", {"delta_x": 0, "delta_y": 300}, fingerprint="fp", observation=page.text)
    left = repeated_plain_actions(context(page, [scrolled]), Offer(ids_for=None, names=None))
    assert left.names == [n for n in ACTION_SETS["browser"] if n != "scroll"]
    longer = shop_page([*CHECKOUT, ("14", "link", "Terms", "")])  # the scroll revealed a line
    assert repeated_plain_actions(context(longer, [scrolled]), Offer(None, None)) == Offer(None, None)


def test_completed_workflows_holds_a_workflow_that_ran_to_its_end_and_not_one_that_broke() -> None:
    """An ordinary site: a workflow opened the order the goal asks about; the answer is the agent's."""
    page = shop_page(CHECKOUT)
    ran = done("run_workflow", {"name": "open the order", "params": {}})
    broke = done("run_workflow", {"name": "log in", "params": {}}, outcome="action_error")
    sub_step = done("click", {"bid": "13"}, called_by=0, workflow="open the order")
    left = completed_workflows(context(page, [ran, sub_step, broke]), Offer(None, None))
    assert left.spent_workflows == frozenset({"open the order"})
    assert completed_workflows(context(page, [broke]), Offer(None, None)) == Offer(None, None)


def test_completed_workflows_holds_another_way_to_open_what_a_call_opened() -> None:
    """An ordinary shop: a part opened the order the goal names from the open orders; the part that
    opens the same order from all orders would open it again, and is held; one that opens another
    order, or ends on a fixed button, is not."""
    from dataclasses import replace as with_

    bound = {"order": "A-17"}
    workflows = {
        "from open": callable_from("from open", ("click", "link", "Open orders", ""), ("click", "link", "{order}", ""), bound=bound),
        "from all": callable_from("from all", ("click", "link", "All orders", ""), ("click", "link", "{order}", ""), bound=bound),
        "other order": callable_from("other order", ("click", "link", "All orders", ""), ("click", "link", "{order}", ""), bound={"order": "B-2"}),
        "save": callable_from("save", ("select_option", "combobox", "Delivery:", "{order}"), ("click", "button", "Save", ""), bound=bound),
    }  # fmt: skip
    page = shop_page(CHECKOUT)
    ran = done("run_workflow", {"name": "from open", "params": {}})
    left = completed_workflows(with_(context(page, [ran]), workflows=workflows), Offer(None, None))
    assert left.spent_workflows == frozenset({"from open", "from all"})


def test_refused_workflows_holds_a_workflow_whose_call_was_refused_twice() -> None:
    page = shop_page(CHECKOUT)
    refused = Step(
        index=0, outcome="parse_error", model_output="Log in first.\nrun_workflow('log in', {'username': '...'})",
        error="bad_argument: workflow 'log in': 'username' is '...', which is no value",
    )
    once = refused_workflows(context(page, [refused]), Offer(None, None))
    assert once.spent_workflows == frozenset()  # one refusal leaves a try to mend the call
    twice = refused_workflows(context(page, [refused, refused.model_copy(update={"index": 1})]), Offer(None, None))
    assert twice.spent_workflows == {"log in"}


def test_broken_workflows_holds_a_call_that_broke_on_this_very_page_only() -> None:
    """An ordinary site: 'open the order' broke on the sign-in page (its link is not there); from the
    same page it is held, from another page it is offered again."""
    page = shop_page(CHECKOUT)
    broke = done("run_workflow", {"name": "open the order", "params": {}}, outcome="action_error", fingerprint=page.fingerprint)
    assert broken_workflows(context(page, [broke]), Offer(None, None)).spent_workflows == {"open the order"}
    elsewhere = page.model_copy(update={"fingerprint": "another page"})
    assert broken_workflows(context(elsewhere, [broke]), Offer(None, None)) == Offer(None, None)
    ran = done("run_workflow", {"name": "open the order", "params": {}}, fingerprint=page.fingerprint)
    assert broken_workflows(context(page, [ran]), Offer(None, None)) == Offer(None, None)


def test_broken_workflows_holds_a_call_that_broke_twice_at_the_same_step_from_any_pages() -> None:
    """An ordinary shop: 'set the size' broke choosing the size from two page states; held on a third.
    Broken once, or at two different steps, it is still offered there."""
    page = shop_page(CHECKOUT)

    def broke(index: int, fingerprint: str, at: int) -> list[Step]:
        """A call at `index` and its sub-steps as the harness records them: those before step `at`
        went right, step `at` failed."""
        call = done("run_workflow", {"name": "set the size", "params": {}}, outcome="action_error", fingerprint=fingerprint)
        subs = [
            done("click", {"bid": "12"}, called_by=index, workflow="set the size", outcome="ok" if n < at else "action_error")
            for n in range(1, at + 1)
        ]
        return [call.model_copy(update={"index": index}), *(s.model_copy(update={"index": index + n}) for n, s in enumerate(subs, 1))]

    twice = [*broke(0, "a", 2), *broke(3, "b", 2)]
    assert broken_workflows(context(page, twice), Offer(None, None)).spent_workflows == {"set the size"}
    assert broken_workflows(context(page, twice[:3]), Offer(None, None)) == Offer(None, None)
    elsewhere = [*broke(0, "a", 2), *broke(3, "b", 3)]
    assert broken_workflows(context(page, elsewhere), Offer(None, None)) == Offer(None, None)


def callable_from(name: str, *steps: tuple[str, str, str, str], bound: dict[str, str] | None = None) -> CallableWorkflow:
    """A callable workflow of (action, role, label, value) steps, with `bound` read off the goal."""
    workflow = Workflow(
        name=name,
        steps=[WorkflowStep(action=a, target=TargetDesc(role=r, label=lab), value=v) for a, r, lab, v in steps],
    )
    bound = bound or {}
    return CallableWorkflow(workflow=workflow, bound=bound, open=open_parameters(workflow, bound))


def test_broken_workflows_holds_at_once_a_call_that_broke_at_the_goals_value_after_its_route_ran() -> None:
    """An ordinary shop: 'browse cookware' clicks the Cookware category, then the product the goal names
    (bound from the goal); the product was not there. Called again it would click Cookware again and
    miss the product again: held after one break. Not so where the call gave the value itself (another
    value may be there), where its first step broke (nothing ran), or where the step that broke is a
    fixed control."""
    page = shop_page(CHECKOUT)
    route = [("click", "link", "Cookware", ""), ("click", "link", "{link}", "")]
    workflows = {
        "browse cookware": callable_from("browse cookware", *route, bound={"link": "Trail Socks"}),
        "open basket": callable_from("open basket", ("click", "link", "Cookware", ""), ("click", "link", "Basket", "")),
    }

    def broke(name: str, at: int, params: dict[str, str] | None = None) -> list[Step]:
        call = done("run_workflow", {"name": name, "params": params or {}}, outcome="action_error", fingerprint="a")
        subs = [done("click", {"bid": "9"}, called_by=0, workflow=name, outcome="ok" if n < at else "action_error") for n in range(1, at + 1)]
        return [call, *(sub.model_copy(update={"index": n}) for n, sub in enumerate(subs, 1))]

    def held(history: list[Step]) -> frozenset[str]:
        return broken_workflows(FilterContext(page, PLAIN_GOAL, history, workflows=workflows), Offer(None, None)).spent_workflows

    assert held(broke("browse cookware", 2)) == {"browse cookware"}
    assert held(broke("browse cookware", 2, {"link": "Saucepan"})) == frozenset()
    assert held(broke("browse cookware", 1)) == frozenset()
    assert held(broke("open basket", 2)) == frozenset()


def test_unstartable_workflows_holds_a_call_whose_first_control_is_not_on_this_page() -> None:
    """An ordinary shop: on the checkout page 'open my orders' (its first step clicks the 'My orders'
    link) cannot start, 'enter my email' can (its field is here), 'open one order' names its link by a
    value the call gives (not judged), and 'open the order' by a value the goal gave: not here, held.
    On the account page, where the links are and no Email field is, only 'enter my email' is held."""
    workflows = {
        "open my orders": callable_from("open my orders", ("click", "link", "My orders", "")),
        "enter my email": callable_from("enter my email", ("fill", "textbox", "Email", "{email}")),
        "open one order": callable_from("open one order", ("click", "link", "{order}", "")),
        "open the order": callable_from("open the order", ("click", "link", "{order}", ""), bound={"order": "A-17"}),
    }
    checkout = shop_page(CHECKOUT)
    held = unstartable_workflows(FilterContext(checkout, PLAIN_GOAL, [], workflows=workflows), Offer(None, None))
    assert held.spent_workflows == {"open my orders", "open the order"}
    account = shop_page([("21", "link", "My orders", ""), ("22", "link", "A-17", ""), ("23", "link", "A-18", "")])
    held = unstartable_workflows(FilterContext(account, PLAIN_GOAL, [], workflows=workflows), Offer(None, None))
    assert held.spent_workflows == {"enter my email"}
    assert unstartable_workflows(FilterContext(account, PLAIN_GOAL, []), Offer(None, None)) == Offer(None, None)


def test_unstartable_workflows_judges_as_the_executor_grounds() -> None:
    """The executor's recovery takes the one element of the step's role when exact text finds none
    (a 'Continue' step on a form whose one button says 'Place order'): such a call starts, so it is
    offered; two links that match equally break the call (ambiguous), so it is held."""
    workflows = {
        "continue": callable_from("continue", ("click", "button", "Continue", "")),
        "open details": callable_from("open details", ("click", "link", "Details", "")),
    }
    page = shop_page([*CHECKOUT, ("31", "link", "Details", ""), ("32", "link", "Details", "")])
    held = unstartable_workflows(FilterContext(page, PLAIN_GOAL, [], workflows=workflows), Offer(None, None))
    assert held.spent_workflows == {"open details"}


def test_unstartable_workflows_holds_a_log_in_part_whose_field_is_not_the_one_box_on_the_page() -> None:
    """A shop's catalogue page has one text box, its search box: a log-in part whose first step fills
    "Username:" would type the user name into the search, so it does not start here; a part that fills
    "E-mail" starts where the one box reads "Email address" (the same datum, reworded)."""
    workflows = {
        "log in": callable_from("log in", ("fill", "textbox", "Username:", "{username}")),
        "subscribe": callable_from("subscribe", ("fill", "textbox", "E-mail", "{email}")),
    }
    catalogue = shop_page([("51", "textbox", "Search", ""), ("52", "link", "Books", ""), ("53", "button", "Search", "")])
    held = unstartable_workflows(FilterContext(catalogue, PLAIN_GOAL, [], workflows=workflows), Offer(None, None))
    assert held.spent_workflows == {"log in", "subscribe"}
    newsletter = shop_page([("61", "textbox", "Email address", ""), ("62", "button", "Subscribe", "")])
    held = unstartable_workflows(FilterContext(newsletter, PLAIN_GOAL, [], workflows=workflows), Offer(None, None))
    assert held.spent_workflows == {"log in"}


SIGN_IN = [
    ("41", "textbox", "Email", ""),
    ("42", "textbox", "Password", ""),
    ("43", "button", "Sign in", ""),
    ("44", "link", "My orders", ""),
]


def shop_parts(*, stated: bool) -> dict[str, CallableWorkflow]:
    """A shop's procedure in two parts, as induction splits it: sign in, then open the order (which
    follows it). `stated`: the goal gave the sign-in values."""
    sign_in = callable_from(
        "sign in",
        ("fill", "textbox", "Email", "{email}"), ("fill", "textbox", "Password", "{password}"),
        ("click", "button", "Sign in", ""),
        bound={"email": "ann@example.test", "password": "{password}"} if stated else {},
    )  # fmt: skip
    open_order = callable_from("open the order", ("click", "link", "My orders", ""), ("click", "link", "A-17", ""))
    open_order.workflow.provenance.follows = "sign in"
    return {"sign in": sign_in, "open the order": open_order}


def test_parts_in_order_holds_a_part_until_the_part_before_it_ran() -> None:
    """An ordinary shop: "As ann@example.test (password ...), reorder A-17". On the sign-in page
    'open the order' (taught after 'sign in') waits; once 'sign in' ran it is offered."""
    page = shop_page(SIGN_IN)
    workflows = shop_parts(stated=True)
    held = parts_in_order(FilterContext(page, PLAIN_GOAL, [], workflows=workflows), Offer(None, None))
    assert held.spent_workflows == {"open the order"}
    ran = done("run_workflow", {"name": "sign in", "params": {}})
    after = parts_in_order(FilterContext(page, PLAIN_GOAL, [ran], workflows=workflows), Offer(None, None))
    assert after == Offer(None, None)
    broke = done("run_workflow", {"name": "sign in", "params": {}}, outcome="action_error")
    still = parts_in_order(FilterContext(page, PLAIN_GOAL, [broke], workflows=workflows), Offer(None, None))
    assert still.spent_workflows == {"open the order"}


def test_parts_in_order_reads_what_a_merged_part_followed_in_any_procedure() -> None:
    """The view kept the copy of 'open the order' that a question taught (it follows nothing); the
    view's `follows` says a cancelling procedure taught it after 'sign in', so it still waits."""
    page = shop_page(SIGN_IN)
    workflows = shop_parts(stated=True)
    workflows["open the order"].workflow.provenance.follows = ""
    alone = parts_in_order(FilterContext(page, PLAIN_GOAL, [], workflows=workflows), Offer(None, None))
    assert alone == Offer(None, None)
    merged = FilterContext(page, PLAIN_GOAL, [], workflows=workflows, follows={"open the order": ("sign in",)})
    assert parts_in_order(merged, Offer(None, None)).spent_workflows == {"open the order"}


def test_parts_in_order_holds_another_way_to_the_same_item_as_it_holds_the_part() -> None:
    """A question taught a second way to open the order (from all orders, after nothing); it opens the
    same order as the part taught after 'sign in', so it waits for the sign-in too."""
    page = shop_page(SIGN_IN)
    workflows = shop_parts(stated=True)
    order = {"order": "A-17"}
    workflows["open the order"] = callable_from(
        "open the order", ("click", "link", "My orders", ""), ("click", "link", "{order}", ""), bound=order
    )
    workflows["open the order"].workflow.provenance.follows = "sign in"
    workflows["from all"] = callable_from(
        "from all", ("click", "link", "All orders", ""), ("click", "link", "{order}", ""), bound=order
    )
    held = parts_in_order(FilterContext(page, PLAIN_GOAL, [], workflows=workflows), Offer(None, None))
    assert held.spent_workflows == {"open the order", "from all"}


def test_parts_in_order_holds_nothing_when_the_goal_does_not_ask_for_the_part_before() -> None:
    """A question any visitor can answer states no sign-in values; a page without the sign-in form is
    past that part (the agent signed in by hand); a part before that is itself held is no reason."""
    page = shop_page(SIGN_IN)
    unstated = parts_in_order(FilterContext(page, PLAIN_GOAL, [], workflows=shop_parts(stated=False)), Offer(None, None))
    assert unstated == Offer(None, None)
    account = shop_page([("44", "link", "My orders", ""), ("45", "link", "A-17", "")])
    past = parts_in_order(FilterContext(account, PLAIN_GOAL, [], workflows=shop_parts(stated=True)), Offer(None, None))
    assert past == Offer(None, None)
    spent = Offer(None, None, spent_workflows=frozenset({"sign in"}))
    both = parts_in_order(FilterContext(page, PLAIN_GOAL, [], workflows=shop_parts(stated=True)), spent)
    assert both == spent


# --- the list and the switch ------------------------------------------------------------------------


def test_every_filter_is_named_in_the_settings_in_order_and_says_why() -> None:
    assert tuple(f.name for f in FILTERS) == GUIDANCE_FILTERS
    for f in FILTERS:
        assert "Why" in f.why, f.name


def test_active_filters_follow_the_switch_and_role_aware() -> None:
    assert active_filters("on") == FILTERS
    assert active_filters("off") == () == active_filters("off", ["goal_note"])
    assert [f.name for f in active_filters("on", ["goal_note", "spent_choices"])] == [
        n for n in GUIDANCE_FILTERS if n not in ("goal_note", "spent_choices")
    ]
    # With role_aware off, as before the filters were named: only the goal note and the first-step rule.
    assert [f.name for f in active_filters("on", role_aware=False)] == [
        "goal_note", "first_step_infeasible", "infeasible_after_reaction", "ending_before_composed_text",
        "no_page_to_go_back_to",
        "completed_workflows", "refused_workflows", "broken_workflows", "unstartable_workflows",
        "parts_in_order",
    ]  # fmt: skip
    with pytest.raises(ConfigError, match=r"guidance_off.*'spent_choice'.*known filters: spent_choices"):
        active_filters("on", ["spent_choice"])


def test_narrowed_applies_the_filters_in_order() -> None:
    page = shop_page(LINKS, goal=LINK_GOAL)
    left = narrowed(every_id(page), context(page), FILTERS)
    assert left.ids_for["click"] == ["21"]  # the Search button and the Shipping link wait
    assert left.note == "Named in the goal and not done yet: [21] link 'Returns'"
    # Each filter that changed the offer is named, in order; go_back is held on the episode's first page.
    assert left.acted == ("goal_waiting", "goal_note", "no_page_to_go_back_to")
    assert narrowed(every_id(page), context(page), ()) == every_id(page)


def test_a_filter_that_spells_out_the_same_ids_did_not_act() -> None:
    """An action absent from `ids_for` takes every id on the page: writing those ids out holds nothing."""
    page = shop_page(LINKS, goal=LINK_GOAL)
    bare = Offer(None, None)
    spelled = Offer({"click": list(page.ids)}, None)
    assert not changes_offer(bare, spelled, page.ids)
    assert changes_offer(bare, Offer({"click": page.ids[1:]}, None), page.ids)
    assert changes_offer(bare, Offer(None, ["click", "fill"]), page.ids)
    assert changes_offer(bare, Offer(None, None, note="Named in the goal"), page.ids)
    assert changes_offer(bare, Offer(None, None, spent_workflows=frozenset({"log in"})), page.ids)


@dataclass
class NoModel:
    """A client the agent never calls: `build_request` only builds the request."""

    backend: str = "local"
    model: str = "no-model"

    def chat(self, request: ChatRequest) -> ChatResult:
        raise AssertionError("build_request calls no model")

    def token_counter(self) -> TokenCounter:
        return CharEstimateCounter()


LIVE = Task(task_id="live.shop", goal=LINK_GOAL, scope="live/shop.example.test", benchmark="live")


def request_for(agent: LLMAgent, page: PageState, history: list[Step]) -> ChatRequest:
    ctx = DecisionContext(task=LIVE, page=page, history=history, feedback="", step_index=len(history))
    return agent.build_request(ctx)[0]


def held_page() -> tuple[PageState, list[Step]]:
    """A page on which every kind of id filter holds something back, and the note says something."""
    lines = [
        ("11", "textbox", "Email", " value='ann@example.test'"),
        ("12", "checkbox", "Gift wrap", ", checked"),
        ("13", "button", "Place order", ", disabled"),
        ("22", "link", "Shipping", ""),
        ("23", "button", "Search", ""),
        ("14", "textbox", "Coupon", ", disabled"),
    ]
    controls = {"12": ControlState(role="checkbox", label="Gift wrap", flags=["checked"])}
    page = shop_page(lines, goal=LINK_GOAL, snapshot=PageSnapshot(controls=controls))
    return page, [done("fill", {"bid": "11", "value": "ann@example.test"})]


def test_guidance_off_gives_the_bare_grammar_and_no_goal_note() -> None:
    page, history = held_page()
    settings = load_settings(overrides={"agent": {"guidance": "off"}})
    names = prompts.action_names_for(LIVE, LINK_GOAL)
    on = request_for(LLMAgent(NoModel(), CharEstimateCounter(), settings=settings), page, history)
    off = LLMAgent(NoModel(), CharEstimateCounter(), settings=settings, guidance="off")
    bare = request_for(off, page, history)
    assert bare.grammar == action_grammar(
        "browser", page_ids=page.ids, names=names, with_thought=False, ids_for=page_targets(page).ids_for
    )
    assert on.grammar != bare.grammar and on.grammar is not None
    # The request names the filters that acted (recorded on the step by the harness); off, none did.
    ctx = DecisionContext(task=LIVE, page=page, history=history, feedback="", step_index=len(history))
    acted = LLMAgent(NoModel(), CharEstimateCounter(), settings=settings, guidance="on").build_request(ctx).guidance
    assert acted[:4] == ["spent_choices", "undoing_clicks", "disabled_targets", "filled_not_clicked"]
    assert off.build_request(ctx).guidance == []
    assert "look for it elsewhere" in on.messages[-1]["content"]
    assert "look for it elsewhere" not in bare.messages[-1]["content"]
    # With role_aware off too: every id for every action of the action set.
    plain = LLMAgent(NoModel(), CharEstimateCounter(), settings=settings, guidance="off", role_aware=False)
    assert request_for(plain, page, history).grammar == action_grammar(
        "browser", page_ids=page.ids, names=names, with_thought=False
    )


def test_the_agent_stops_offering_a_workflow_once_it_ran_to_its_end() -> None:
    from awm.memory.view import MemoryView
    from awm.memory.workflow import Workflow, WorkflowStep

    returns = Workflow(
        name="open returns", description=LINK_GOAL,
        steps=[WorkflowStep(action="click", target=TargetDesc(role="link", label="Returns"))],
    )  # fmt: skip
    memory = MemoryView(scope="live/shop.example.test", workflows=(returns,), use="executable")
    agent = LLMAgent(NoModel(), CharEstimateCounter(), settings=load_settings(), memory=memory)
    page = shop_page(LINKS, goal=LINK_GOAL)
    assert "run_workflow" in (request_for(agent, page, []).grammar or "")
    ran = done("run_workflow", {"name": "open returns", "params": {}})
    assert "run_workflow" not in (request_for(agent, page, [ran]).grammar or "x")


def test_a_single_filter_switched_off_gives_back_only_what_it_held() -> None:
    page, history = held_page()
    settings = load_settings()
    on = request_for(LLMAgent(NoModel(), CharEstimateCounter(), settings=settings), page, history)
    agent = LLMAgent(NoModel(), CharEstimateCounter(), settings=settings, guidance_off=["disabled_targets"])
    without = request_for(agent, page, history)
    assert on.grammar is not None and "fill ::=" not in on.grammar  # Email filled already, Coupon disabled
    # the Coupon field comes back, to fill, and (empty, on a live page) to click once; every other
    # filter still holds, so it is the one id left (click and fill then share one id rule)
    assert without.grammar is not None and 'fill ::= "fill(" bid-click' in without.grammar
    assert "bid-click ::= \"'14'\"\n" in without.grammar


def test_the_policy_factory_hands_the_switch_to_the_agent_and_it_changes_the_config_hash() -> None:
    settings = load_settings(overrides={"agent": {"guidance_off": ["goal_note"]}})
    agent = PolicyFactory(settings, client=NoModel())(LIVE, None)
    assert isinstance(agent, LLMAgent) and "goal_note" not in [f.name for f in agent.guidance]
    off = load_settings(overrides={"agent": {"guidance": "off"}})
    unguided = PolicyFactory(off, client=NoModel())(LIVE, None)
    assert isinstance(unguided, LLMAgent) and unguided.guidance == ()
    assert len({config_hash(load_settings()), config_hash(settings), config_hash(off)}) == 3
    # at their defaults the switches leave the hash as it was before they existed: older runs resume
    before = load_settings().model_dump(mode="json", exclude=NOT_RESULTS)
    for key in ("guidance", "guidance_off"):
        before["agent"].pop(key)
    assert config_hash(load_settings()) == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:12]


# --- the settings' check ----------------------------------------------------------------------------


def test_an_unknown_filter_name_is_a_config_error_naming_the_key_the_name_and_the_known_names(
    tmp_path: Path,
) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('[agent]\nguidance_off = ["goal_note", "spent_choice"]\n')
    with pytest.raises(ConfigError) as error:
        load_settings(config)
    message = str(error.value)
    assert "agent.guidance_off" in message and str(config) in message
    assert "unknown filter 'spent_choice'" in message and "Value error" not in message
    assert all(name in message for name in GUIDANCE_FILTERS)
    config.write_text('[agent]\nguidance = "partly"\n')
    with pytest.raises(ConfigError, match=r"agent\.guidance"):
        load_settings(config)
