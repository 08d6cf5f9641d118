"""The agent on a live page ends the task itself: the live action set and rules, spent clicks, the
finishing action written out after the page reacts, and the done check (a stub model, no browser).

Why these: measured on the ten pages of tests/fixtures/live (scripts/bench_live.py), the 1.5B model with
the whole action set reached the goal on three and ended none itself, clicking on until the loop stop.
"""

from __future__ import annotations

from awm.actions import actions_offered, parse_action
from awm.tokens import CharEstimateCounter
from awm.trajectory import Step, TargetDesc, Task
from awm.webarena import prompts
from awm.webarena.agent import DONE_GRAMMAR, LLMAgent
from awm.webarena.env import PageState
from awm.webarena.guidance_filters import without_spent_choices
from awm.webarena.harness import LIVE_REACTED, DecisionContext, finish_action
from tests.stub_llm_server import Reply, StubLLMServer
from tests.test_webarena_agent import local_style_client, stub_settings

LIVE = Task(task_id="live.0123456789", goal="Put the Blue Mug in my cart.", scope="live/example.test", benchmark="live")
PAGE = PageState(
    text="[11] button 'Add Blue Mug to cart'\n[12] button 'Add Teapot to cart'\nCart (1)",
    ids=["11", "12"],
    elements={"11": TargetDesc(role="button", label="Add Blue Mug to cart"),
              "12": TargetDesc(role="button", label="Add Teapot to cart")},
    url="http://shop.example.test/", goal=LIVE.goal, fingerprint="after",
)  # fmt: skip
REACTION = "Added to cart: Blue Mug (1 in cart)"


def clicked(bid: str, *, url: str = "http://shop.example.test/", reaction: str = "") -> Step:
    feedback = f"Page: new in the main frame: {reaction}." + (f" {LIVE_REACTED} {finish_action(reaction)}" if reaction else "")
    return Step(index=0, url=url, action={"name": "click", "args": {"bid": bid}}, action_str=f"click('{bid}')",
                target=PAGE.elements.get(bid), outcome="ok", fingerprint="before", feedback=feedback, reaction=reaction)  # fmt: skip


def context(history: list[Step]) -> DecisionContext:
    return DecisionContext(task=LIVE, page=PAGE, history=history, feedback="", step_index=len(history))


def test_live_pages_offer_the_page_actions_and_the_two_ways_to_end() -> None:
    names = actions_offered("live")
    assert names is not None and {"send_msg_to_user", "report_infeasible", "click", "fill"} <= set(names)
    assert not {"goto", "new_tab", "tab_focus", "go_forward", "noop"} & set(names)
    text = prompts.system_text(names, ending=True)
    assert prompts.ENDING_RULES in text and "Example: send_msg_to_user" not in text  # no sentence to copy
    assert prompts.ENDING_RULES not in prompts.system_text(actions_offered("miniwob"))


def test_the_finishing_action_written_out_parses_as_the_agents_answer() -> None:
    action = finish_action("It's done: 'Basic' plan")
    parsed = parse_action(f"The page shows it.\n{action}", page_ids=[])
    assert parsed.action.name == "send_msg_to_user" and parsed.action.args["text"] == "It's done: 'Basic' plan"


def test_on_a_live_page_clicks_made_here_are_spent_until_a_field_is_set() -> None:
    ids = ["11", "12", "13"]
    spent = lambda *history: without_spent_choices({}, ids, list(history), "", "now", ends_itself=True)  # noqa: E731
    assert spent(clicked("11"))["click"] == ["12", "13"]
    assert spent(clicked("11"), clicked("12"))["click"] == ["13"]  # no going back and forth
    other_page = spent(clicked("11", url="http://shop.example.test/a"), clicked("12", url="http://shop.example.test/b"))
    assert other_page["click"] == ["11", "13"]  # a click on another page does not spend this one's
    filled = Step(index=1, url="http://shop.example.test/", action={"name": "fill", "args": {"bid": "13"}}, outcome="ok")
    assert "click" not in spent(clicked("11"), filled)  # every click is offered again: Add after typing
    assert "click" not in without_spent_choices({}, ids, [clicked("11")], "", "now")  # benchmarks: unchanged


def test_the_done_check_ends_with_what_the_page_said_when_the_model_says_yes() -> None:
    with StubLLMServer([Reply(text="yes")]) as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        decision = agent.decide(context([clicked("11", reaction=REACTION)]))
        [request] = stub.requests
    assert decision.text.splitlines()[-1] == finish_action(REACTION) and decision.llm_calls == 1
    assert request.body["grammar"] == DONE_GRAMMAR and request.body["max_tokens"] == 3
    question = request.body["messages"][1]["content"]
    assert LIVE.goal in question and REACTION in question and "click('11')" in question


def test_a_no_from_the_done_check_leaves_the_step_to_the_agent_and_counts_both_calls() -> None:
    with StubLLMServer([Reply(text="no"), Reply(text="Add the mug.\nclick('12')")]) as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        decision = agent.decide(context([clicked("11", reaction=REACTION)]))
        grammar = stub.requests[1].body["grammar"]
    assert decision.text.endswith("click('12')") and decision.llm_calls == 2
    assert "send-msg-to-user ::=" in grammar
    assert "report-infeasible ::=" not in grammar  # the page just moved: no giving up here (`infeasible_after_reaction`)
    assert "\"'11'\"" not in grammar.split("bid-click ::=")[1].splitlines()[0]  # the spent click


def test_no_done_check_without_a_reaction_and_no_giving_up_before_looking() -> None:
    with StubLLMServer(default=Reply(text="Look.\nclick('11')")) as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        first = agent.decide(context([]))
        later = agent.decide(context([clicked("11")]))  # clicked, the page showed nothing new
        bodies = [r.body for r in stub.requests]
    assert first.llm_calls == 1 and later.llm_calls == 1 and len(bodies) == 2
    assert "report-infeasible ::=" not in bodies[0]["grammar"] and "report-infeasible ::=" in bodies[1]["grammar"]
    assert bodies[0]["messages"][0]["content"] == bodies[1]["messages"][0]["content"]  # the prefix holds


def test_no_done_check_while_fewer_actions_ran_than_the_goal_asks_for() -> None:
    """A settings page: "Turn on dark mode and save the settings." After the switch the page showed
    "Unsaved changes"; asked, the model said done and the run ended unsaved. Two clauses, one action:
    no check, the step goes to the agent."""
    task = LIVE.model_copy(update={"goal": "Turn on dark mode and save the settings."})
    page = PAGE.model_copy(update={"goal": task.goal})
    history = [clicked("11", reaction="[13] switch 'Dark mode' is now checked; Unsaved changes")]
    with StubLLMServer(default=Reply(text="Save.\nclick('12')")) as stub:
        settings = stub_settings(stub)
        agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
        decision = agent.decide(DecisionContext(task=task, page=page, history=history, feedback="", step_index=1))
        [request] = stub.requests
    assert decision.llm_calls == 1 and request.body.get("grammar") != DONE_GRAMMAR


def test_no_done_check_for_a_goal_about_a_thing_no_page_ever_named() -> None:
    """An account page with no two-factor setting: "Turn on two-factor authentication for my account."
    After "Save preferences" the page said "Preferences saved", the model answered yes and the run
    claimed success (scripts/bench_live.py, page `account`). No page named the thing: no check. The same
    click on a page that names it is asked about."""
    task = LIVE.model_copy(update={"goal": "Turn on two-factor authentication for my account."})
    prefs = "[29] button 'Save preferences'\nheading 'Account preferences'"
    history = [clicked("11", reaction="Preferences saved")]

    def calls_on(page_text: str) -> list[dict[str, object]]:
        page = PAGE.model_copy(update={"goal": task.goal, "text": page_text})
        with StubLLMServer(default=Reply(text="no")) as stub:
            settings = stub_settings(stub)
            agent = LLMAgent(local_style_client(stub, settings), CharEstimateCounter(), settings=settings)
            agent.decide(DecisionContext(task=task, page=page, history=history, feedback="", step_index=1))
            return [r.body for r in stub.requests]

    assert [b.get("grammar") == DONE_GRAMMAR for b in calls_on(prefs)] == [False]
    named = calls_on(prefs + "\n[30] switch 'Two-factor authentication', checked")
    assert [b.get("grammar") == DONE_GRAMMAR for b in named] == [True, False]
