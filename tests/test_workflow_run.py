"""Executable workflows: `run_workflow` parsing and grammar, grounding on changed pages, sub-step traces.

Browser tests open fixture pages (served on 127.0.0.1) and MiniWoB++ pages in real Chromium; policies
answer with action text, so every call goes through the parser like a model's answer.
"""

from __future__ import annotations

import pytest

from awm.actions import action_grammar, parse_action, render_action
from awm.errors import ActionParseError
from awm.memory.view import MemoryView
from awm.memory.workflow import StepCheck, Workflow, WorkflowStep
from awm.trajectory import Step, TargetDesc, Task, Trajectory
from awm.webarena.env import BrowserSession
from awm.webarena.harness import HarnessConfig, run_episode
from awm.webarena.policies import ScriptedPolicy
from awm.webarena.tasks import resolve_tasks
from awm.webarena.workflow_run import callable_workflows, catalog, not_executable

SIGN_IN = Workflow(
    name="sign in",
    description='Sign in as "{username}" with the password "{password}".',
    parameters=["username", "password"],
    steps=[
        WorkflowStep(
            action="fill",
            target=TargetDesc(role="textbox", label="Username"),
            value="{username}",
            post=StepCheck(kind="value_is", value="{username}"),
        ),
        WorkflowStep(action="fill", target=TargetDesc(role="textbox", label="Password"), value="{password}"),
        WorkflowStep(
            action="click",
            target=TargetDesc(role="button", label="Sign in"),
            post=StepCheck(kind="text_appears", value="Welcome {username}"),
        ),
    ],
)


# --- parsing and grammar (pure) ---------------------------------------------------------------------

CATALOG = {"sign in": ["password"], "search": []}


def test_run_workflow_parses_with_its_open_parameters_and_renders_back() -> None:
    parsed = parse_action("Thought: use it\nrun_workflow('sign in', {'password': 'pw1'})", workflows=CATALOG)
    assert parsed.action.name == "run_workflow"
    assert parsed.action.args == {"name": "sign in", "params": {"password": "pw1"}}
    assert render_action(parsed.action) == "run_workflow('sign in', {'password': 'pw1'})"
    assert parse_action("run_workflow('search')", workflows=CATALOG).action.args["params"] == {}


@pytest.mark.parametrize(
    ("text", "kind", "words"),
    [
        ("run_workflow('log in', {})", "unknown_workflow", "'sign in'"),
        ("run_workflow('sign in', {'password': 'x', 'user': 'y'})", "bad_argument", "no parameter 'user'"),
        ("run_workflow('sign in', {})", "wrong_arity", "needs parameter(s) 'password'"),
        ("run_workflow('search', {'q': 'x'})", "bad_argument", "no parameters"),
        ("run_workflow('sign in', {'password': open('x')})", "non_literal", "quoted string"),
        ("run_workflow('sign in', {'password': '...'})", "bad_argument", "'password' is '...', which is no value"),
        ("run_workflow('sign in', {'password': ' '})", "bad_argument", "which is no value"),
    ],
)
def test_run_workflow_calls_are_held_to_the_catalog(text: str, kind: str, words: str) -> None:
    with pytest.raises(ActionParseError) as caught:
        parse_action(text, workflows=CATALOG)
    assert caught.value.kind == kind
    assert words in str(caught.value)


def test_run_workflow_is_not_an_action_without_executable_memory() -> None:
    with pytest.raises(ActionParseError) as caught:
        parse_action("run_workflow('sign in', {'password': 'x'})")
    assert caught.value.kind == "unknown_action"


def test_grammar_offers_each_workflow_with_exactly_its_keys() -> None:
    grammar = action_grammar(page_ids=["12"], names=["click"], workflows=CATALOG)
    assert '"run_workflow(" (wf-1 | wf-2) ")"' in grammar
    assert "wf-1 ::= \"'sign in', {\" \"'password': \" string \"}\"" in grammar
    assert "wf-2 ::= \"'search', {}\"" in grammar
    assert "action ::= click | run-workflow" in grammar
    assert "run_workflow" not in action_grammar(page_ids=["12"], names=["click"])


def test_catalog_leaves_out_what_the_goal_states_and_what_cannot_run() -> None:
    chatty = Workflow(name="tell", steps=[WorkflowStep(action="send_msg_to_user", value="done")])
    view = MemoryView(scope="fixtures", workflows=(SIGN_IN, chatty), use="executable")
    goal = 'Sign in as "ada" with the password "pw1".'
    callables = callable_workflows(view, goal)
    assert catalog(callables) == {"sign in": []}
    assert callables["sign in"].bound == {"username": "ada", "password": "pw1"}
    assert not_executable(chatty) == "step 1 is 'send_msg_to_user', which acts on no element"
    assert catalog(callable_workflows(view, "Sign in somehow")) == {"sign in": ["username", "password"]}
    assert callable_workflows(view.model_copy(update={"use": "text"}), goal) == {}


CANCEL_AS = Workflow(
    name="cancel as",
    description='Cancel the order "{order}" as a {reason} of the order "A-1", with a note that names it.',
    parameters=["order", "note", "reason"],
    steps=[
        WorkflowStep(action="click", target=TargetDesc(role="link", label="{order}")),
        WorkflowStep(action="fill", target=TargetDesc(role="textbox", label="Note"), value="{note}"),
        WorkflowStep(
            action="select_option",
            target=TargetDesc(role="combobox", label="Reason"),
            value="{reason}",
            options=["duplicate", "mistake", "fraud"],
        ),
        WorkflowStep(action="click", target=TargetDesc(role="button", label="Cancel order")),
    ],
)


def test_another_familys_workflow_leaves_out_a_text_its_own_task_composed() -> None:
    """A shop's "cancel as a duplicate" part, served to a goal of another family that names the
    reason: the note its own task wrote is not typed (no goal states it), the rest runs with the
    goal's values; its own family's goal still types the note, which the call must give."""
    view = MemoryView(scope="fixtures", workflows=(CANCEL_AS,), use="executable")
    other = callable_workflows(view, 'Cancel the order "B-2" with the reason mistake.')["cancel as"]
    assert [s.action for s in other.workflow.steps] == ["click", "select_option", "click"]
    assert other.bound == {"order": "B-2", "reason": "mistake"} and other.open == ()
    assert other.workflow.parameters == ["order", "reason"]
    own = 'Cancel the order "C-3" as a fraud of the order "A-1", with a note that names it.'
    same = callable_workflows(view, own)["cancel as"]
    assert same.workflow == CANCEL_AS and same.open == ("note",)
    # a note the goal does state is bound, and typed
    stated = CANCEL_AS.model_copy(update={"description": 'Cancel the order "{order}" with the note "{note}".'})
    view = MemoryView(scope="fixtures", workflows=(stated,), use="executable")
    noted = callable_workflows(view, 'Please cancel the order "B-2" with the note "wrong size".')["cancel as"]
    assert len(noted.workflow.steps) == 4 and noted.bound["note"] == "wrong size"
    # a description without placeholders (hand-written) says nothing of what a goal states: all stay
    plain = CANCEL_AS.model_copy(update={"description": "Cancel an order."})
    view = MemoryView(scope="fixtures", workflows=(plain,), use="executable")
    assert callable_workflows(view, 'Cancel the order "B-2".')["cancel as"].workflow == plain


# --- on real pages ---------------------------------------------------------------------------------


def _page_task(base_url: str, page: str) -> Task:
    return Task(
        task_id="browsergym/openended",
        scope=f"fixtures/{page}",
        benchmark="browsergym",
        meta={"task_kwargs": {"start_url": f"{base_url}{page}.html", "goal": "Sign in somehow"}},
    )


def _call(session: BrowserSession, task: Task, workflow: Workflow, text: str) -> tuple[Trajectory, list[Step]]:
    recorded: list[Step] = []
    policy = ScriptedPolicy([text, "noop()"], memory=MemoryView(scope=task.scope, workflows=(workflow,), use="executable"))
    trajectory = run_episode(
        session, policy, task, HarnessConfig(max_steps=2), on_step=lambda _t, step, _png: recorded.append(step)
    )
    return trajectory, recorded


CALL = "run_workflow('sign in', {'username': 'ada', 'password': 'pw1'})"


@pytest.mark.browser
def test_workflow_runs_as_traced_sub_steps_under_the_calling_step(session: BrowserSession, base_url: str) -> None:
    trajectory, recorded = _call(session, _page_task(base_url, "wf_signin"), SIGN_IN, CALL)
    [call] = trajectory.workflow_calls
    assert call.completed and call.steps_run == 3 and call.params == {"username": "ada", "password": "pw1"}
    model, *subs = trajectory.steps[:4]
    assert model.called_by is None and model.action_str == CALL and model.outcome == "ok"
    assert [s.index for s in subs] == [1, 2, 3] and {s.called_by for s in subs} == {0}
    assert [s.action["name"] for s in subs] == ["fill", "fill", "click"]  # type: ignore[index]
    assert subs[0].action["args"]["value"] == "ada"  # type: ignore[index]
    assert all(s.grounding.startswith("exact (score 100") for s in subs)
    assert all(s.workflow == "sign in" for s in subs)
    assert "ran all 3 steps" in model.feedback
    # recorded as they happened: the sub-steps first, then the step that called them
    assert [s.index for s in recorded[:4]] == [1, 2, 3, 0]
    # the next model step comes after the sub-steps, and the workflow did not use up the step budget
    assert trajectory.steps[4].index == 4 and trajectory.steps[4].called_by is None


@pytest.mark.browser
def test_a_call_records_the_values_it_read_off_the_goal_apart_from_the_models(session: BrowserSession, base_url: str) -> None:
    """What the episode page shows as "read off the goal": the call `run_workflow('sign in', {})` typed
    values that no argument of it names."""
    task = _page_task(base_url, "wf_signin")
    task.meta["task_kwargs"]["goal"] = 'Sign in as "ada" with the password "pw1".'
    trajectory, _ = _call(session, task, SIGN_IN, "run_workflow('sign in', {})")
    [call] = trajectory.workflow_calls
    assert call.completed and call.params == {} and call.bound == {"username": "ada", "password": "pw1"}
    assert trajectory.steps[1].action["args"]["value"] == "ada"  # type: ignore[index]


@pytest.mark.browser
def test_a_form_below_the_fold_that_the_prompt_left_out_is_found_without_a_scroll(
    session: BrowserSession, base_url: str
) -> None:
    """A demonstration scrolled to reach the form; its workflow keeps no scroll (`VIEW_ONLY`) and still
    runs: steps ground over the whole page, not the part of it the model's size budget kept."""
    trajectory, _ = _call(session, _page_task(base_url, "wf_signin_below"), SIGN_IN, CALL)
    model = trajectory.steps[0]
    assert "link 'Entry 1'" in model.observation and "'Sign in'" not in model.observation  # the prompt never saw the form
    [call] = trajectory.workflow_calls
    assert call.completed, call.error


@pytest.mark.browser
def test_moved_fields_ground_by_label_not_position(session: BrowserSession, base_url: str) -> None:
    trajectory, _ = _call(session, _page_task(base_url, "wf_signin_moved"), SIGN_IN, CALL)
    [call] = trajectory.workflow_calls
    assert call.completed, call.error
    user = next(s for s in trajectory.steps if s.called_by == 0 and s.target and s.target.label == "Username")
    assert user.action["args"]["value"] == "ada"  # type: ignore[index]


@pytest.mark.browser
def test_renamed_button_is_found_by_the_structural_fallback_only_because_it_is_the_only_one(
    session: BrowserSession, base_url: str
) -> None:
    trajectory, _ = _call(session, _page_task(base_url, "wf_signin_renamed"), SIGN_IN, CALL)
    [call] = trajectory.workflow_calls
    assert call.completed, call.error
    click = [s for s in trajectory.steps if s.called_by == 0][-1]
    assert "only_in_scope" in click.grounding and "Continue" in click.grounding


SET_PRICE = Workflow(
    name="set price",
    description="Change the price to ${price}.",
    parameters=["price"],
    steps=[
        WorkflowStep(
            action="fill",
            target=TargetDesc(role="spinbutton", label="Price:"),
            value="{price}",
            post=StepCheck(kind="value_is", value="{price}"),
        ),
        WorkflowStep(action="click", target=TargetDesc(role="button", label="Save"), post=StepCheck(kind="text_appears", value="Saved")),
    ],
)


@pytest.mark.browser
def test_a_price_typed_into_a_number_field_passes_its_check_as_the_number_the_field_reads(
    session: BrowserSession, base_url: str
) -> None:
    """The accessibility tree holds a number field's value as a 32-bit float ("59.99" is 59.9900016784668,
    "12.50" is 12.5); the page shows it, and the fill's `value_is` check reads it, as typed."""
    for price in ("59.99", "12.50"):
        task = _page_task(base_url, "wf_price")
        task.meta["task_kwargs"]["goal"] = f"Change the price to ${price}."
        trajectory, _ = _call(session, task, SET_PRICE, "run_workflow('set price', {})")
        [call] = trajectory.workflow_calls
        assert call.completed, call.error
        fill, save = (s for s in trajectory.steps if s.called_by == 0)
        assert fill.action["args"]["value"] == price  # type: ignore[index]
        assert f"spinbutton 'Price:' value='{price}'" in save.observation


@pytest.mark.browser
def test_ambiguous_target_stops_the_workflow_and_says_which_step(session: BrowserSession, base_url: str) -> None:
    trajectory, _ = _call(session, _page_task(base_url, "wf_signin_ambiguous"), SIGN_IN, CALL)
    [call] = trajectory.workflow_calls
    assert not call.completed and call.steps_run == 2
    assert call.error.startswith("step 3 of 3 (click [button] Sign in): target_not_found")
    model = trajectory.steps[0]
    assert model.outcome == "action_error"
    assert "stopped at step 3 of 3" in model.feedback and "continue with single actions" in model.feedback
    failed = trajectory.steps[3]
    assert failed.called_by == 0 and failed.outcome == "target_not_found" and failed.action is None
    assert "equally" in failed.error or "structure does not decide" in failed.error
    # the model's next step sees the fresh page (after the two fills)
    assert trajectory.steps[4].called_by is None and "ada" in trajectory.steps[4].observation


@pytest.mark.browser
def test_goal_values_are_bound_and_the_miniwob_reward_sees_the_workflow(session: BrowserSession) -> None:
    [task] = resolve_tasks("miniwob", "login-user", [1])
    workflow = Workflow(
        name="log in",
        description='Enter the username "{username}" and the password "{password}" into the text fields and press login.',
        parameters=["username", "password"],
        steps=[
            WorkflowStep(action="fill", target=TargetDesc(role="textbox", label="Username"), value="{username}"),
            WorkflowStep(action="fill", target=TargetDesc(role="textbox", label="Password"), value="{password}"),
            WorkflowStep(action="click", target=TargetDesc(role="button", label="Login")),
        ],
    )
    trajectory, _ = _call(session, task, workflow, "run_workflow('log in', {})")
    assert trajectory.end == "done" and trajectory.verdict.raw_reward == 1.0
    assert len([s for s in trajectory.steps if s.called_by is None]) == 1  # one model step solved it


def test_a_value_holding_a_secrets_placeholder_among_other_words_is_the_placeholder() -> None:
    from awm.webarena.workflow_run import secret_named

    assert secret_named("password {password}", ["password"]) == "{password}"  # copied from "(password {password})"
    assert secret_named("{password}", ["password"]) == "{password}"
    assert secret_named("carol", ["password"]) == "carol"
    assert secret_named("{password} and {pin}", ["password", "pin"]) == "{password} and {pin}"  # which one: not guessed


# --- a choice goes to the list that offers its value ---------------------------------------------------

CHOOSE_SIZE = WorkflowStep(
    action="select_option", target=TargetDesc(role="combobox", label="Size:"), value="{size}",
    post=StepCheck(kind="value_is", value="{size}"),
)  # fmt: skip
SAVE = WorkflowStep(action="click", target=TargetDesc(role="button", label="Save order"))
SET_SIZE = Workflow(
    name="set the size", description="Change the size of the order to {size}.", parameters=["size"],
    steps=[CHOOSE_SIZE, SAVE],
)  # fmt: skip
GIFT_SIZE = SET_SIZE.model_copy(
    update={
        "name": "gift wrap in a size",
        "steps": [WorkflowStep(action="check", target=TargetDesc(role="checkbox", label="Gift wrap")), *SET_SIZE.steps],
    }
)

ORDER_TEXT = """\
heading 'Order #1042: walking boots'
[14] combobox 'Size:' value='40', options: 39 | 40 | 41 | 42, collapsed
[21] combobox 'Colour:' value='black', options: black | brown | olive, collapsed
[30] combobox 'Ship from:', options:  | France | Spain, disabled, collapsed
[33] button 'Save order'"""
COUNTRY = "[25] combobox 'Country' value='France', options: Austria | Belgium | … 40 more"


def test_list_options_are_read_off_the_observation_lines() -> None:
    from awm.webarena.choice_lists import list_options

    lists = list_options(f"{ORDER_TEXT}\n{COUNTRY}")
    assert lists["14"] == ("Size:", ["39", "40", "41", "42"], False)
    assert lists["21"] == ("Colour:", ["black", "brown", "olive"], False)
    assert lists["25"] == ("Country", None, False)  # cut by the observation: not known
    assert lists["30"] == ("Ship from:", ["France", "Spain"], True)  # the empty option is no option
    assert "33" not in lists


@pytest.mark.parametrize(
    ("bid", "value", "expected"),
    [
        ("14", "41", None),  # its own list offers it
        ("14", "Brown", ("21", "brown")),  # only the colour list does
        ("14", "colour olive", ("21", "olive")),  # the list's name, then the option
        ("14", "olive colour", ("21", "olive")),
        ("14", "purple", None),  # no list does
        ("14", "Spain", None),  # only a disabled list offers it
        ("99", "brown", None),  # the step's list is not shown
    ],
)
def test_list_offering_names_the_one_other_list_with_the_value(
    bid: str, value: str, expected: tuple[str, str] | None
) -> None:
    from awm.webarena.choice_lists import list_offering

    assert list_offering(ORDER_TEXT, bid, value) == expected


def test_no_list_is_chosen_when_a_list_cut_short_might_offer_the_value() -> None:
    from awm.webarena.choice_lists import list_offering

    assert list_offering(f"{ORDER_TEXT}\n{COUNTRY}", "14", "brown") is None  # Country may hold a "brown"
    assert list_offering(f"{ORDER_TEXT}\n{COUNTRY}", "25", "brown") is None  # its own list may offer it


def test_only_a_workflow_whose_choices_are_all_given_values_may_choose_elsewhere() -> None:
    from awm.webarena.choice_lists import chooses_by_value_only

    assert chooses_by_value_only(SET_SIZE)
    assert not chooses_by_value_only(GIFT_SIZE)  # the gift wrap is its own task's choice
    fixed = SET_SIZE.model_copy(update={"steps": [SET_SIZE.steps[0].model_copy(update={"value": "42"})]})
    assert not chooses_by_value_only(fixed)


def _order_task(base_url: str) -> Task:
    task = _page_task(base_url, "wf_order_options")
    task.meta["task_kwargs"]["goal"] = "Change the colour of the order to brown."
    return task


@pytest.mark.browser
def test_a_value_its_list_does_not_offer_is_chosen_in_the_list_that_does(session: BrowserSession, base_url: str) -> None:
    """A size-changing workflow reused for a colour (its value read off the goal by the words around it):
    the colour list offers 'brown', the size list does not, so the step chooses it there, checks that
    list and says so."""
    trajectory, _ = _call(session, _order_task(base_url), SET_SIZE, "run_workflow('set the size', {})")
    [call] = trajectory.workflow_calls
    assert call.completed, call.error
    assert call.bound == {"size": "brown"}
    choice = trajectory.steps[1]
    assert choice.called_by == 0 and choice.target is not None and choice.target.label == "Colour:"
    assert "chose 'brown' in 'Colour:': 'Size:' offers no 'brown'" in choice.feedback
    assert "Saved: size 40, colour brown" in trajectory.steps[3].observation


@pytest.mark.browser
def test_a_workflow_with_a_fixed_choice_of_its_own_does_not_choose_elsewhere(
    session: BrowserSession, base_url: str
) -> None:
    trajectory, _ = _call(
        session, _order_task(base_url), GIFT_SIZE, "run_workflow('gift wrap in a size', {})"
    )
    [call] = trajectory.workflow_calls
    assert not call.completed and call.steps_run == 1
    assert call.error.startswith("step 2 of 3 (select_option [combobox] Size:)")
