"""The answer check: a question goal the agent answers itself is asked, on each new page that names its
subject, "what is the answer on this page?"; an answer the page bears out ends the step (a stub model on
127.0.0.1, no browser; the pages are an ordinary shop's, not a benchmark's).
"""

from __future__ import annotations

from awm.actions import parse_action
from awm.tokens import CharEstimateCounter
from awm.trajectory import Step, TargetDesc, Task
from awm.webarena.agent import LLMAgent
from awm.webarena.answer_check import (
    ANSWER_GRAMMAR,
    asked_before,
    asks_question,
    grounded_answer,
    page_names_subject,
)
from awm.webarena.env import PageState
from awm.webarena.harness import DecisionContext
from tests.stub_llm_server import Reply, StubLLMServer
from tests.test_webarena_agent import local_style_client, stub_settings

GOAL = 'Who makes the kettle "Aurora 1.7 L"?'
PRODUCT = (
    "[11] link 'Home'\n[12] textbox 'Search'\nheading 'Aurora 1.7 L'\nPrice: | 39.90\n"
    "Brand:\n[20] link 'Kessler & Sons'\nIn stock\n[21] button 'Add to basket'"
)
HOME = "[11] link 'Home'\n[12] textbox 'Search'\nheading 'Kettles'\n[30] link 'Browse all kettles'"
SHOP = Task(task_id="sites.shop.kettle-brand#0", goal=GOAL, scope="sites/shop/kettle-brand", benchmark="sites")


def page(text: str, fingerprint: str = "product") -> PageState:
    return PageState(
        text=text, ids=["11", "12", "20", "21"], url="http://127.0.0.1:8000/p/aurora", goal=GOAL,
        fingerprint=fingerprint,
        elements={"11": TargetDesc(role="link", label="Home"), "12": TargetDesc(role="textbox", label="Search"),
                  "20": TargetDesc(role="link", label="Kessler & Sons"),
                  "21": TargetDesc(role="button", label="Add to basket")},
    )  # fmt: skip


def decide(
    replies: list[Reply], text: str, *, task: Task = SHOP, history: list[Step] | None = None
) -> tuple[str, int, list[dict[str, object]]]:
    with StubLLMServer(replies, default=Reply(text="Look.\nclick('11')")) as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        state = page(text).model_copy(update={"goal": task.goal})
        decision = agent.decide(
            DecisionContext(task=task, page=state, history=history or [], feedback="", step_index=0)
        )
        return decision.text, decision.llm_calls, [r.body for r in stub.requests]


def test_a_question_is_a_goal_that_ends_with_a_question_mark() -> None:
    assert asks_question(GOAL) and asks_question("When does the shop open on Sunday? ")
    assert not asks_question('Add the kettle "Aurora 1.7 L" to the basket.')


def test_the_page_must_name_what_the_question_is_about() -> None:
    assert page_names_subject(GOAL, PRODUCT)
    assert not page_names_subject(GOAL, HOME)  # the kettle is not named here: nothing to read yet
    # No value stated: the question's object words stand in ("opening hours").
    assert page_names_subject("what are the opening hours?", "heading 'Opening hours'\nMonday | 9:00")
    assert not page_names_subject("what are the opening hours?", "heading 'Our kettles'")


def test_an_answer_counts_only_when_the_page_bears_it_out() -> None:
    assert grounded_answer("Kessler & Sons", GOAL, PRODUCT) == "Kessler & Sons"
    assert grounded_answer("'Kessler & Sons'.", GOAL, PRODUCT) == "Kessler & Sons"  # quotes, full stop
    assert grounded_answer("not on this page", GOAL, PRODUCT) is None
    assert grounded_answer("Bosch", GOAL, PRODUCT) is None  # not on the page
    assert grounded_answer("Aurora 1.7 L", GOAL, PRODUCT) is None  # the goal's own words answer nothing
    assert grounded_answer("link", GOAL, PRODUCT) is None  # a role of the page's lines is no word of it
    assert grounded_answer("39.90", "What does it cost?", PRODUCT) == "39.90"  # a number keeps its digits


def test_a_page_state_is_asked_once_per_episode() -> None:
    inner = Step(index=1, fingerprint="product", called_by=0)  # a workflow's own step: never asked there
    assert not asked_before([inner], "product")
    assert asked_before([Step(index=0, fingerprint="product")], "product")
    assert not asked_before([Step(index=0, fingerprint="home")], "product")


def test_the_answer_the_page_bears_out_ends_the_step_as_the_message() -> None:
    text, calls, bodies = decide([Reply(text="Kessler & Sons")], PRODUCT)
    assert calls == 1 and len(bodies) == 1 and bodies[0]["grammar"] == ANSWER_GRAMMAR
    question = bodies[0]["messages"][1]["content"]
    assert GOAL in question and "Brand:" in question
    parsed = parse_action(text, page_ids=[])
    assert parsed.action.name == "send_msg_to_user" and parsed.action.args["text"] == "Kessler & Sons"


def test_an_answer_the_page_does_not_bear_out_leaves_the_step_to_the_agent() -> None:
    text, calls, bodies = decide([Reply(text="Bosch")], PRODUCT)
    assert text.endswith("click('11')") and calls == 2 and bodies[1].get("grammar") != ANSWER_GRAMMAR


def test_no_question_asked_where_it_cannot_be_answered() -> None:
    """The home page does not name the kettle; the same product page seen before was asked already; an
    instruction is no question; a benchmark that ends episodes by its reward is not asked."""
    for text, history, task in (
        (HOME, [], SHOP),
        (PRODUCT, [Step(index=0, fingerprint="product")], SHOP),
        (PRODUCT, [], SHOP.model_copy(update={"goal": 'Add the kettle "Aurora 1.7 L" to the basket.'})),
        (PRODUCT, [], SHOP.model_copy(update={"benchmark": "miniwob", "task_id": "miniwob.click-test"})),
    ):
        _, calls, bodies = decide([], text, task=task, history=history)
        assert calls == 1 and all(b.get("grammar") != ANSWER_GRAMMAR for b in bodies)


def test_what_the_agent_typed_is_not_what_the_page_says() -> None:
    """Measured on Trac: the summary typed into the search box made the start page 'name' the ticket."""
    typed = HOME.replace("[12] textbox 'Search'", "[12] textbox 'Search' value='Aurora 1.7 L', focused")
    assert not page_names_subject(GOAL, typed)
    assert grounded_answer("Bosch", GOAL, typed.replace("Aurora 1.7 L", "Bosch")) is None
