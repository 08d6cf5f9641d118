"""The evidence judge: goal values, end-based decisions, the yes/no question, and the offline report.

Model calls go to the stub OpenAI-compatible server on 127.0.0.1 (tests/stub_llm_server.py); the
"local" client is the class the embedded backend uses, in its llama.cpp configuration, pointed at it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, get_args

import pytest

from awm.config import load_settings
from awm.evaluation.evidence import (
    FAILED_ENDS,
    SELF_ENDS,
    GoalLiteral,
    check_literals,
    extra_choices,
    extract_goal_literals,
    field_cue,
    literal_in,
    pre_decide,
    pre_judge_figures,
    required_actions,
)
from awm.evaluation.judge import YES_NO_GRAMMAR, judge_trajectory, parse_yes_no
from awm.evaluation.success import verdict_passes
from awm.llm.factory import make_client
from awm.llm.openai_backend import OpenAICompatibleClient
from awm.trajectory import EpisodeEnd, Step, TargetDesc, Task, Trajectory, Verdict, save_trajectory
from tests.stub_llm_server import Reply, StubLLMServer

REPO = Path(__file__).resolve().parents[1]


def step(
    index: int,
    name: str,
    args: dict[str, Any] | None = None,
    *,
    role: str = "",
    label: str = "",
    outcome: str = "ok",
    feedback: str = "",
    observation: str = "",
) -> Step:
    args = args or {}
    shown = ", ".join(repr(v) for v in args.values())
    return Step(
        index=index,
        action={"name": name, "args": args},
        action_str=f"{name}({shown})",
        target=TargetDesc(role=role, label=label) if role or label else None,
        outcome=outcome,  # type: ignore[arg-type]
        feedback=feedback,
        observation=observation,
    )


def trajectory(
    goal: str,
    steps: list[Step],
    *,
    end: str = "done",
    answer: str = "",
    reward: float | None = 1.0,
    **meta: Any,
) -> Trajectory:
    return Trajectory(
        trajectory_id="ep",
        task=Task(task_id="t", goal=goal, scope="s", benchmark="miniwob"),
        steps=steps,
        end=end,  # type: ignore[arg-type]
        final_answer=answer,
        verdict=Verdict(reward=reward, raw_reward=reward),
        meta=dict(meta),
    )


def select_then_submit(value: str = "Blue") -> list[Step]:
    return [
        step(0, "click", {"bid": "4"}, role="textbox", label="Name", feedback="Page: focus moved."),
        step(1, "fill", {"bid": "4", "value": "Ann"}, role="textbox", label="Name"),
        step(2, "select_option", {"bid": "7", "options": value}, role="listbox", label="colors"),
        step(3, "click", {"bid": "9", "button": "left"}, role="button", label="Submit"),
    ]


# A goal that names no values: the trajectory settles nothing, the model is asked.
OPEN_GOAL = "Choose the colour the card shows and click Submit."


def openai_client(stub: StubLLMServer):
    settings = load_settings(
        overrides={"llm": {"backend": "openai", "base_url": stub.base_url, "model": "stub", "cache": False}}
    )
    return make_client(settings)


def local_client(stub: StubLLMServer) -> OpenAICompatibleClient:
    settings = load_settings(
        overrides={"llm": {"backend": "openai", "base_url": stub.base_url, "model": "stub", "cache": False}}
    )
    return OpenAICompatibleClient(
        model="qwen-stub", api_key="not-needed", settings=settings.llm, base_url=stub.base_url,
        backend="local", llama_cpp=True,
    )  # fmt: skip


def prompt_of(stub: StubLLMServer) -> str:
    (request,) = stub.requests
    return request.body["messages"][-1]["content"]


# --- the goal's literal values ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        (
            "Book the shortest one-way flight from: Corpus Christi, TX to: SHG on 12/05/2016.",
            ["12/05/2016", "Corpus Christi", "TX", "SHG"],
        ),
        ("Select 03/17/2016 as the date and hit submit.", ["03/17/2016"]),
        ('Click on the "cancel" button.', ["cancel"]),
        ("Select Norfolk Island from the list and click Submit.", ["Norfolk Island"]),
        ("Select Jc, s6WcI, XMHY, HJ6c and click Submit.", ["Jc", "s6WcI", "XMHY", "HJ6c"]),
        ("Select tN, 1LO4eNb and click Submit.", ["tN", "1LO4eNb"]),
        ("Click button ONE, then click button TWO.", ["ONE", "TWO"]),
        ("Click on Tab #1.", ["Tab #1"]),
        ("Create a line that bisects the angle evenly in two, then press submit.", []),
        ("Expand the section below and click submit.", []),
        ('Find the email by Trudey and reply to them with the text "Ut."', ["Ut.", "Trudey"]),
        ("Pay $12.50 for 3 items at 10:30 PM on March 5, 2016; open the 5th tab.",
         ["March 5, 2016", "10:30 PM", "$12.50", "3"]),
        ("Enter 'x9' as the password; it's José's account.", ["x9", "José"]),
        ("Set the sliders to the combination [17,15,11] and submit.", ["17", "15", "11"]),  # not 171,511
        ("Pay $1,250.50 now.", ["$1,250.50"]),  # thousands come in threes
        ("Add a new task to my list: Call the plumber", ["Call the plumber"]),  # a to-do page: one value
        ("Order one of each item: Chicken wings, Caesar Salad", ["Chicken", "Caesar Salad"]),  # a list: one by one
    ],
)  # fmt: skip
def test_extractor_on_real_looking_goals(goal: str, expected: list[str]) -> None:
    assert [x.text for x in extract_goal_literals(goal)] == expected


def test_a_date_is_one_value_not_three_numbers_and_duplicates_collapse() -> None:
    found = extract_goal_literals('Pick 11/26/2016, then confirm "11/26/2016" again.')
    assert [(x.text, x.kind) for x in found] == [("11/26/2016", "quoted")]


def test_names_listed_together_share_a_group_and_separate_ones_do_not() -> None:
    listed = extract_goal_literals("Select tN, kMLSI5 and 1LO4eNb and click Submit.")
    assert len({x.group for x in listed}) == 1 and listed[0].group is not None
    apart = extract_goal_literals("Click button ONE, then click button TWO.")
    assert [x.group for x in apart] == [None, None]
    roles = extract_goal_literals("Find the email by Trudey and forward it to Bob.")
    assert [(x.text, x.group) for x in roles] == [("Trudey", None), ("Bob", None)]


@pytest.mark.parametrize(
    ("literal", "text", "found"),
    [
        (GoalLiteral("5", "number"), "page 15 of 25", False),
        (GoalLiteral("5", "number"), "5 results", True),
        (GoalLiteral("CA", "name"), "[3] button 'Cancel'", False),
        (GoalLiteral("cancel", "quoted"), "[3] button 'Cancel'", True),
        (GoalLiteral("tN", "name"), "checkbox 'TN'", False),  # codes match exactly
        (GoalLiteral("tN", "name"), "checkbox 'tN'", True),
        (GoalLiteral("Norfolk Island", "name"), "value='norfolk\n island'", True),
        (GoalLiteral("03/05/2016", "date"), "Date: 3/5/2016", True),
        (GoalLiteral("$1,200", "number"), "total 1200 dollars", True),
        (GoalLiteral("x", "quoted"), "[20] button 'Close'", True),  # the dialog's "x" by its name
        (GoalLiteral("2", "number"), "[21] checkbox (id=checkbox-2)", False),  # part of a name
        (GoalLiteral("-3", "number"), "[22] checkbox (id=checkbox-3)", False),
        (GoalLiteral("-3", "number"), "[16] slider value='-3'", True),
        (GoalLiteral("2", "number"), "-2 or 2.5", False),  # another number
    ],
)
def test_literal_matching_respects_word_boundaries_and_case_of_codes(
    literal: GoalLiteral, text: str, found: bool
) -> None:
    assert literal_in(literal, text) is found


def test_checks_are_written_as_short_facts() -> None:
    traj = trajectory("Set the name to Bob and the color to 'Blue', then submit.", select_then_submit())
    facts = [c.render() for c in check_literals(traj)]
    assert facts[0].startswith("goal value 'Blue': chosen by select_option on listbox 'colors' at step 2")
    assert facts[1] == "goal value 'Bob': not found in any action or the final page"


def test_the_last_action_on_a_value_is_reported_with_what_the_page_said() -> None:
    steps = [
        step(
            0, "click", {"bid": "18"}, role="checkbox", label="CA9b", feedback="Page: 'CA9b' is now checked."
        ),
        step(
            1,
            "click",
            {"bid": "18"},
            role="checkbox",
            label="CA9b",
            feedback="Page: 'CA9b' is now unchecked.",
        ),
    ]
    (check,) = check_literals(trajectory("Select CA9b and click Submit.", steps))
    assert check.status == "acted"
    assert "at step 1 (also at step 0)" in check.where and "now unchecked" in check.where


def test_a_value_only_in_a_failed_action_or_the_harness_echo_is_missing() -> None:
    fill = {"bid": "17", "value": "03/15/2016"}
    steps = [
        step(0, "fill", fill, role="textbox", label="Date:", outcome="not_interactable"),
        step(1, "click", {"bid": "19"}, role="button", label="Submit",
             feedback="Page: no change. You repeated fill('17', '03/15/2016') with no change."),
    ]  # fmt: skip
    (check,) = check_literals(trajectory("Select 03/15/2016 as the date and hit submit.", steps))
    assert check.status == "failed" and check.missing and "not_interactable" in check.where


def test_a_listed_value_only_shown_while_another_of_the_list_was_used_is_skipped() -> None:
    goal = "Select Jc, XMHY, HJ6c and click Submit."
    page = "Items: Jc, XMHY, HJ6c\n[20] button 'Submit'"  # the values as text, not as controls

    def clicks(*labels: str) -> list[Step]:
        out = [step(i, "click", {"bid": str(i)}, role="checkbox", label=x) for i, x in enumerate(labels)]
        return [*out, step(len(out), "click", {"bid": "20"}, role="button", label="Submit", observation=page)]

    partial = pre_decide(trajectory(goal, clicks("XMHY")))
    assert partial.label == "failure" and partial.rule == "literal"
    assert [c.status for c in partial.checks] == ["skipped", "acted", "skipped"]
    assert "listed with 'XMHY', which an action used" in partial.checks[0].render()
    assert pre_decide(trajectory(goal, clicks("Jc", "XMHY", "HJ6c"))).label == "success"
    none_used = pre_decide(trajectory(goal, clicks()[:1] + clicks()[:1]))  # only seen: the model decides
    assert [c.status for c in none_used.checks] == ["page", "page", "page"]


def test_a_value_the_page_offered_as_a_control_that_no_action_used_is_unused() -> None:
    page = "[23] clickable 'et'\n[24] clickable 'sed'\nLorem ipsum et dolor"
    steps = [step(0, "click", {"bid": "24"}, role="clickable", label="sed", observation=page)]
    goal = 'Click on the link "et".'
    (check,) = check_literals(trajectory(goal, steps))
    assert check.status == "unused" and check.missing
    assert check.render() == "goal value 'et': the page offered it (clickable 'et'), but no action used it"
    # A question may name a control it only had to read: with a final answer the value is only "seen".
    (read,) = check_literals(trajectory(goal, steps, end="answered", answer="The link says hello."))
    assert read.status == "page" and not read.missing
    # Text that is no control (no element id, or a heading) is only "seen" as well.
    text_only = [
        step(0, "click", {"bid": "24"}, role="clickable", label="sed", observation="[2] heading 'et'")
    ]
    assert check_literals(trajectory(goal, text_only))[0].status == "page"
    # A value inside a longer label only locates the target ("the email by Anne": click its star).
    row = "[18] clickable 'Anne Ullamcorper. Semper leo.'\n[19] image (class=star)"
    star = [step(0, "click", {"bid": "19"}, role="image", observation=row)]
    (anne,) = check_literals(trajectory("Find the email by Anne and click the star icon.", star))
    assert anne.status == "page" and not anne.missing


def test_a_page_that_repeats_the_goal_does_not_show_its_values() -> None:
    goal = "Select Ertha from the list and click Submit."
    page = f"[2] heading '{goal}'\n[13] combobox value='Aurie'"
    steps = [step(0, "click", {"bid": "19"}, role="button", label="Submit")]
    (check,) = check_literals(trajectory(goal, steps, final_observation=page))
    assert check.status == "missing"
    (seen,) = check_literals(trajectory(goal, steps, final_observation=page + "\nErtha is listed"))
    assert seen.status == "page" and not seen.missing


def test_a_step_without_a_parsed_action_is_checked_by_its_action_string() -> None:
    steps = [Step(index=0, action_str="fill('6', '123')"), Step(index=1, action_str="click('9')")]
    (check,) = check_literals(trajectory("Log in with password 123.", steps))
    assert check.status == "acted" and "typed by fill at step 0" in check.where


# --- decisions without the model ----------------------------------------------------------------


def test_every_episode_end_is_either_decided_or_sent_on() -> None:
    assert FAILED_ENDS | SELF_ENDS == set(get_args(EpisodeEnd)) and not FAILED_ENDS & SELF_ENDS
    assert SELF_ENDS == {"done", "answered", "infeasible"}


@pytest.mark.parametrize("end", sorted(FAILED_ENDS))
def test_harness_ends_are_failures_without_a_model_call(end: str) -> None:
    traj = trajectory("Select 'Blue' and submit.", select_then_submit(), end=end)
    with StubLLMServer(default=Reply(text="yes")) as stub:
        verdict = judge_trajectory(openai_client(stub), traj)
        assert stub.requests == []
    assert verdict.judge == "failure" and f"episode ended '{end}'" in verdict.judge_reason
    assert verdict.reward == 1.0  # the ground truth is kept beside the verdict, never used by it


def test_no_executed_action_is_a_failure_without_a_model_call() -> None:
    steps = [step(0, "click", {"bid": "9"}, role="button", label="Submit", outcome="target_not_found")]
    with StubLLMServer(default=Reply(text="yes")) as stub:
        verdict = judge_trajectory(openai_client(stub), trajectory("Press submit.", steps))
        assert stub.requests == []
    assert verdict.judge == "failure" and "no action was executed" in verdict.judge_reason


def test_a_missing_goal_value_forces_failure_even_when_the_model_would_say_yes() -> None:
    traj = trajectory("Select 'Green' from the colors and click Submit.", select_then_submit("Blue"))
    with StubLLMServer(default=Reply(text="yes")) as stub:
        verdict = judge_trajectory(openai_client(stub), traj)
        assert stub.requests == []
    assert verdict.judge == "failure" and "'Green'" in verdict.judge_reason
    assert not verdict_passes(verdict, "judge")


@pytest.mark.parametrize(
    ("goal", "verbs"),
    [
        ("Expand the section below and click submit.", ["expand", "click"]),
        ("Create a line that bisects the angle evenly in two, then press submit.", ["create", "press"]),
        ("Select Jc, s6WcI, XMHY, HJ6c and click Submit.", ["select", "click"]),
        ("Click button ONE, then click button TWO.", ["click", "click"]),
        ("Click the checkbox to select it.", ["click"]),  # "to select" is the purpose, not a step
        ('Click on the "Select and submit" button.', ["click"]),  # never inside a quoted value
        ("Find the email by Trudey and reply to them.", ["reply"]),  # finding needs no action of its own
        ("Drag the circle and drop it on the box.", ["drag"]),  # one drag-and-drop
        ("What is the price of the Blue Widget?", []),
        ("Generate a number less than 6, then press submit.", ["generate", "press"]),
        ("Select nothing and click Submit.", ["click"]),  # a clause that asks for nothing is no action
    ],
)
def test_required_actions_are_the_clause_opening_verbs(goal: str, verbs: list[str]) -> None:
    assert required_actions(goal) == verbs


def test_fewer_executed_actions_than_the_goal_asks_for_is_a_failure_without_a_model_call() -> None:
    steps = [
        step(0, "click", {"bid": "3"}, role="tab", label="Section #1", outcome="not_interactable"),
        step(1, "click", {"bid": "22"}, role="button", label="Submit"),
    ]
    goal = "Expand the section below and click submit."
    with StubLLMServer(default=Reply(text="yes")) as stub:
        verdict = judge_trajectory(openai_client(stub), trajectory(goal, steps))
        assert stub.requests == []
        decision = pre_decide(trajectory(goal, steps, end="infeasible"))
    assert verdict.judge == "failure"
    assert "at least 2 actions (expand, click); 1 ran (click)" in verdict.judge_reason
    assert decision.label == "ask_model"  # an infeasibility claim needs no actions


# --- the yes/no question ------------------------------------------------------------------------


def test_every_goal_value_used_before_the_page_closed_the_task_is_success_without_the_model() -> None:
    """Measured: asked about such episodes, the 1.5B model's yes/no was a coin toss (P(yes) ~0.5)."""
    traj = trajectory("Select 'Blue' from the colors and click Submit.", select_then_submit("Blue"))
    with StubLLMServer(default=Reply(text="no")) as stub:
        verdict = judge_trajectory(openai_client(stub), traj)
        assert stub.requests == []
    assert verdict.judge == "success" and verdict.reward == 1.0
    assert verdict.judge_reason.startswith("no model asked: every value the goal names was used")
    assert "goal value 'Blue': chosen by select_option on listbox 'colors' at step 2" in verdict.judge_reason
    # Not without the model: a position the values cannot show, an answer, a value only a page showed.
    ordinal = trajectory("Select 'Blue', then click the 2nd button.", select_then_submit("Blue"))
    answered = trajectory("Select 'Blue' and click Submit.", select_then_submit("Blue"), end="answered", answer="ok")
    shown = select_then_submit("Blue")
    shown[0].feedback = "Page: the card reads Anne"
    seen = trajectory("Select 'Blue' from Anne's colors and click Submit.", shown)
    assert [pre_decide(t).label for t in (ordinal, answered, seen)] == ["ask_model"] * 3


def test_a_value_typed_in_another_letter_case_than_the_goal_asks_is_a_failure() -> None:
    typed = [step(0, "fill", {"bid": "4", "value": "Cristin"}, role="textbox"), step(1, "click", {"bid": "5"}, role="button", label="Submit")]
    goal = 'Type "cristin" in all upper case letters in the text input and press Submit.'
    decision = pre_decide(trajectory(goal, typed))
    assert (decision.label, decision.rule) == ("failure", "literal")
    assert "as 'Cristin': not in upper case as the goal asks" in decision.facts[0]
    typed[0].action = {"name": "fill", "args": {"bid": "4", "value": "CRISTIN"}}
    assert pre_decide(trajectory(goal, typed)).label == "success"


def test_yes_over_the_evidence_is_success_and_the_prompt_is_evidence_not_a_story() -> None:
    traj = trajectory(OPEN_GOAL, select_then_submit("Blue"), env_info={"RAW_REWARD_GLOBAL": 1, "REWARD_GLOBAL": 0.99})
    with StubLLMServer(default=Reply(text="yes")) as stub:
        verdict = judge_trajectory(openai_client(stub), traj)
        prompt = prompt_of(stub)
        body = stub.requests[0].body
    assert verdict.judge == "success" and verdict.reward == 1.0
    assert "model answered 'yes'" in verdict.judge_reason
    assert "step 3: click() on button 'Submit' -> ok" in prompt
    assert "step 2: select_option('Blue') on listbox 'colors' -> ok" in prompt
    assert "the goal names no literal values to check" in prompt
    assert "yes or no" in prompt
    assert "REWARD" not in prompt and "0.99" not in prompt  # never the ground truth
    assert "grammar" not in body and body["max_tokens"] <= 5
    assert len(prompt) < 1500  # a few hundred tokens for the 1.5B model


def test_only_the_last_actions_go_into_the_question() -> None:
    steps = [step(i, "click", {"bid": str(i)}, role="link", label=f"item {i}") for i in range(12)]
    with StubLLMServer(default=Reply(text="no")) as stub:
        verdict = judge_trajectory(openai_client(stub), trajectory("Open the last item.", steps))
        prompt = prompt_of(stub)
    assert verdict.judge == "failure"
    assert "(7 earlier steps not shown)" in prompt and "item 11" in prompt and "item 3'" not in prompt


def test_the_grammar_goes_only_to_the_local_backend() -> None:
    traj = trajectory(OPEN_GOAL, select_then_submit("Blue"))
    with StubLLMServer(default=Reply(text="yes")) as stub:
        local = judge_trajectory(local_client(stub), traj, ask_model=True)
        hosted = judge_trajectory(openai_client(stub), traj)
        local_body, hosted_body = (r.body for r in stub.requests)
    assert local_body["grammar"] == YES_NO_GRAMMAR == 'root ::= "Yes" | "No" | "yes" | "no"'
    assert "grammar" not in hosted_body and "response_format" not in hosted_body
    assert local.judge == hosted.judge == "success"


def test_the_embedded_model_is_not_asked_unless_told_and_what_it_leaves_open_is_unknown() -> None:
    """Measured: the 1.5B model's yes/no over what the evidence leaves open was a coin toss."""
    traj = trajectory(OPEN_GOAL, select_then_submit("Blue"))
    with StubLLMServer(default=Reply(text="yes")) as stub:
        verdict = judge_trajectory(local_client(stub), traj)
        assert stub.requests == []
        hosted = judge_trajectory(openai_client(stub), traj, ask_model=False)
        assert stub.requests == []
    assert verdict.judge == hosted.judge == "unknown" and not verdict_passes(verdict, "judge")
    assert verdict.judge_reason.startswith("no model asked: the evidence does not settle it")


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        ("yes", "success"),
        ("Yes.", "success"),
        ("**No** - the list still shows Aurie", "failure"),
        ("no", "failure"),
        ("Not sure", "unknown"),
        ("Maybe yes", "unknown"),
        ("The answer is yes", "unknown"),
        ("yesterday", "unknown"),
        ("", "unknown"),
        ('{"success": true}', "unknown"),
    ],
)
def test_anything_but_a_leading_yes_or_no_is_unknown(raw: str, label: str) -> None:
    traj = trajectory(OPEN_GOAL, select_then_submit("Blue"))
    with StubLLMServer(default=Reply(text=raw)) as stub:
        verdict = judge_trajectory(openai_client(stub), traj)
    assert verdict.judge == label
    if label == "unknown":
        assert not verdict_passes(verdict, "judge") and "not yes or no" in verdict.judge_reason


def test_parse_yes_no() -> None:
    assert (parse_yes_no(" YES"), parse_yes_no("`no`"), parse_yes_no("nope"), parse_yes_no("y")) == (
        "yes",
        "no",
        None,
        None,
    )


def test_a_live_run_answer_is_evidence_and_the_question_names_it() -> None:
    steps = [
        step(
            0,
            "click",
            {"bid": "3"},
            role="link",
            label="Blue Widget",
            feedback="Page: new heading 'Blue Widget'",
        ),
        step(1, "send_msg_to_user", {"text": "It costs $24.99."}),
    ]
    traj = trajectory(
        "What is the price of the Blue Widget?", steps, end="answered", answer="It costs $24.99."
    )
    with StubLLMServer(default=Reply(text="yes")) as stub:
        verdict = judge_trajectory(openai_client(stub), traj)
        prompt = prompt_of(stub)
    assert verdict.judge == "success"
    assert "The agent finished with the message: 'It costs $24.99.'" in prompt
    assert "goal value 'Blue Widget': target of click on link 'Blue Widget' at step 0" in prompt


def test_the_final_page_is_shown_only_when_it_is_the_page_after_the_last_action() -> None:
    goal = OPEN_GOAL
    with StubLLMServer(default=Reply(text="no")) as stub:
        client = openai_client(stub)
        judge_trajectory(
            client, trajectory(goal, select_then_submit(), final_observation="THANK-YOU " + "x" * 5000)
        )
        last_seen = select_then_submit()
        last_seen[-1].observation = "FORM-BEFORE-SUBMIT"
        judge_trajectory(client, trajectory(goal, last_seen))
        after, before = (r.body["messages"][-1]["content"] for r in stub.requests)
    assert "Final page (start):\nTHANK-YOU" in after and "more characters cut" in after and len(after) < 2500
    assert "FORM-BEFORE-SUBMIT" not in before


# --- the offline figures ------------------------------------------------------------------------


def test_pre_judge_figures_count_what_the_evidence_decides_and_what_is_left_to_the_model() -> None:
    ok = trajectory("Select 'Blue' and submit.", select_then_submit("Blue"), reward=1.0)
    wrong = trajectory("Select 'Green' and submit.", select_then_submit("Blue"), reward=0.0)
    stuck = trajectory("Select 'Blue' and submit.", select_then_submit("Blue"), end="stuck", reward=0.0)
    lucky = trajectory("Select 'Blue' and submit.", select_then_submit("Blue"), reward=0.0)
    asked = trajectory(OPEN_GOAL, select_then_submit("Blue"), reward=1.0)
    rows = [(t, pre_decide(t), verdict_passes(t.verdict, "gt")) for t in (ok, wrong, stuck, lucky, asked)]
    figures = pre_judge_figures(rows)
    assert figures.by_rule == {"values_used": 2, "literal": 1, "end": 1, "none": 1}
    assert (figures.truth_successes, figures.evidence_successes, figures.evidence_false_successes) == (2, 1, ["ep"])
    assert (figures.successes_to_model, figures.failures_to_model) == (1, 0)
    assert figures.evidence_precision == 0.5 and figures.evidence_recall == 0.5
    assert figures.precision == 2 / 3 and figures.recall == 1.0 and figures.false_failures == []


def report_script():
    """The script as a module (scripts/ is not a package)."""
    path = REPO / "scripts/judge_evidence_report.py"
    spec = importlib.util.spec_from_file_location("judge_evidence_report", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_report_script_reads_a_run_folder_and_prints_the_figures(tmp_path: Path, capsys) -> None:
    module = report_script()
    folder = tmp_path / "run" / "trajectories"
    folder.mkdir(parents=True)
    ok = trajectory("Select 'Blue' and submit.", select_then_submit("Blue"), reward=1.0)
    wrong = trajectory("Select 'Green' and submit.", select_then_submit("Blue"), reward=0.0)
    running = trajectory("Select 'Blue' and submit.", [], end="running", reward=None)
    for i, t in enumerate((ok, wrong, running)):
        save_trajectory(t.model_copy(update={"trajectory_id": f"ep{i}"}), folder / f"ep{i}.json")
    assert module.main([str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    assert "ep0" in out and "SUCCESS (values_used)" in out and "FAIL (literal)" in out and "ep2" not in out
    assert "episodes: 2 (2 with ground truth, 1 true successes)" in out
    assert "success without the model: 1 (1 true successes): precision 100.0%, recall 100.0%" in out


def test_the_report_scripts_audit_asks_only_about_what_the_trajectory_leaves_open(capsys) -> None:
    ok = trajectory(OPEN_GOAL, select_then_submit("Blue"), reward=1.0)
    wrong = trajectory("Select 'Green' and submit.", select_then_submit("Blue"), reward=0.0)
    lucky = trajectory(OPEN_GOAL, select_then_submit("Blue"), reward=0.0)
    used = trajectory("Select 'Blue' and submit.", select_then_submit("Blue"), reward=1.0)
    with StubLLMServer([Reply(text="yes"), Reply(text="no")]) as stub:
        result = report_script().judge_and_audit([ok, wrong, lucky, used], openai_client(stub))
        assert len(stub.requests) == 2  # `wrong` and `used` were decided without the model
    assert (result.tp, result.fp, result.fn, result.tn, result.unknown) == (2, 0, 0, 2, 0)
    assert "judge=failure" in capsys.readouterr().out


# --- a value in the field the goal names for it ---------------------------------------------------


def _login(user_field: str, password_field: str) -> list[Step]:
    return [
        step(0, "fill", {"bid": "4", "value": "ann"}, role="textbox", label=user_field),
        step(1, "fill", {"bid": "5", "value": "pw1"}, role="textbox", label=password_field),
        step(2, "click", {"bid": "6"}, role="button", label="Sign in"),
    ]


def test_values_typed_into_each_others_fields_are_a_failure_without_the_model() -> None:
    """A staff portal's login (not a benchmark page): the username and the password swapped between the
    fields ended the page all the same, and was judged a success before."""
    goal = 'Sign in with username "ann" and password "pw1".'
    right = pre_decide(trajectory(goal, _login("Username", "Password")))
    assert (right.label, right.rule) == ("success", "values_used")
    swapped = pre_decide(trajectory(goal, _login("Password", "Username")))
    assert (swapped.label, swapped.rule) == ("failure", "literal")
    assert "typed into textbox 'Password' at step 0, but the goal names it as the username" in " ".join(swapped.facts)


def test_a_goal_that_names_no_field_for_its_value_checks_nothing_more() -> None:
    search = [step(0, "fill", {"bid": "3", "value": "kettle"}, role="searchbox", label="Search products"),
              step(1, "click", {"bid": "4"}, role="button", label="Go")]  # fmt: skip
    assert pre_decide(trajectory('Search for "kettle" and press Go.', search)).label == "success"
    assert field_cue(GoalLiteral("kettle", "quoted"), 'Search for "kettle"') == "search"
    assert field_cue(GoalLiteral("ann", "quoted"), '"ann" is the user') is None


# --- state the goal did not ask for -----------------------------------------------------------------


def _ticks(*labels: str) -> list[Step]:
    steps = [step(i, "click", {"bid": str(10 + i)}, role="checkbox", label=label) for i, label in enumerate(labels)]
    return [*steps, step(len(labels), "click", {"bid": "30"}, role="button", label="Save")]


def test_a_box_left_ticked_that_the_goal_does_not_name_is_a_failure_without_the_model() -> None:
    """A settings page (not a benchmark page): "Tick Newsletter and Offers" done with Partners ticked too
    used every value the goal names and ended the page, and was judged a success before."""
    goal = "Tick Newsletter and Offers, then click Save."
    assert pre_decide(trajectory(goal, _ticks("Newsletter", "Offers"))).rule == "values_used"
    extra = pre_decide(trajectory(goal, _ticks("Newsletter", "Partners", "Offers")))
    assert (extra.label, extra.rule) == ("failure", "extra_choice")
    assert "'Partners' left ticked" in extra.reason
    put_back = pre_decide(trajectory(goal, _ticks("Newsletter", "Partners", "Offers", "Partners")))
    assert put_back.rule == "values_used"  # unticked again: no extra state
    # A goal that names no box says nothing of which boxes belong: no failure by this rule.
    assert extra_choices(trajectory("Accept the terms and click Save.", _ticks("I agree"))) == []


def test_a_box_listed_by_a_plain_word_is_named_and_a_focus_uses_no_value() -> None:
    """A box listed by a word the value extractor passes over ("by", a lower-case word) is still named
    by the goal, so ticking it is no extra state; focusing the button the goal names is not pressing it."""
    goal = "Tick news, BY and Offers, then click Save."
    assert extra_choices(trajectory(goal, _ticks("news", "BY", "Offers"))) == []
    focused = [step(0, "focus", {"bid": "3"}, role="button", label="Save"), step(1, "click", {"bid": "4"}, role="button", label="Cancel")]
    decided = pre_decide(trajectory("Click the button Save.", focused))
    assert decided.label != "success" and "focus" not in " ".join(decided.facts)


SIGN_IN_PAGE = "[3] textbox 'Email'\n[4] button 'Sign in'\n[5] link 'Forgot password?'"
SHAPES_PAGE = "[6] button 'Circle'\n[7] button 'Square'"


@pytest.mark.parametrize(
    ("goal", "steps", "decided"),
    [
        # a sign-in page: the clause names the control, the one action did it, the page closed the task
        ("Click the Sign in button.", [step(0, "click", role="button", label="Sign in", observation=SIGN_IN_PAGE)], True),
        # "the button" on a page with one button; a section picked by its word among two tabs
        ("Click the button.", [step(0, "click", role="button", label="Go!", observation="[2] button 'Go!'")], True),
        ("Expand the section below and click submit.", [
            step(0, "click", role="tab", label="Section #4", observation="[1] tab 'Section #4', collapsed\n[2] tab 'Submit'"),
            step(1, "click", role="button", label="Submit", observation="[9] button 'Submit'"),
        ], True),  # fmt: skip
        # a button picked by a quality among several: the clause does not say which, the model is asked
        ("Click the button that best describes the figure.", [step(0, "click", role="button", label="Square", observation=SHAPES_PAGE)], False),
        # an extra action ran (another state may have been set), or another control was pressed
        ("Click the Sign in button.", [
            step(0, "click", role="link", label="Forgot password?", observation=SIGN_IN_PAGE),
            step(1, "click", role="button", label="Sign in", observation=SIGN_IN_PAGE),
        ], False),  # fmt: skip
        ("Click the Sign in button.", [step(0, "click", role="link", label="Forgot password?", observation=SIGN_IN_PAGE)], False),
        # a position the labels cannot show; a verb one click does not do
        ("Click the 2nd button.", [step(0, "click", role="button", label="Go!", observation="[2] button 'Go!'")], False),
        ("Type the text below into the field.", [step(0, "fill", {"value": "x"}, role="textbox", label="Text", observation="[3] textbox 'Text'")], False),
    ],
)
def test_a_goal_of_named_clicks_done_one_for_one_is_success_without_the_model(
    goal: str, steps: list[Step], decided: bool
) -> None:
    decision = pre_decide(trajectory(goal, steps))
    assert (decision.label, decision.rule) == (("success", "clauses_done") if decided else ("ask_model", "none"))
    ended_by_loop = pre_decide(trajectory(goal, steps, end="stuck"))
    assert ended_by_loop.label == "failure"
