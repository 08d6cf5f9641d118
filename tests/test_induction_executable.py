"""Rule induction for executable workflows: values under a transformation, quoted labels, checks, reasoning.

Each workflow here is induced from one seed and then bound to another seed's goal, the way the
grounded executor will use it: `bind_parameters` reads the new goal, `instantiate` fills the steps.
"""

from __future__ import annotations

import pytest

from awm.induction.abstraction import abstract_trajectory
from awm.induction.rule import induce_rule, repeats_action
from awm.memory.workflow import StepCheck, Workflow, bind_parameters, instantiate
from awm.trajectory import Step, TargetDesc, Task, Trajectory

TEXTBOX = TargetDesc(role="textbox", label="")
SUBMIT = TargetDesc(role="button", label="Submit")


def _traj(
    tid: str, goal: str, steps: list[tuple[str, dict, TargetDesc | None, str]], scope: str = "miniwob/t"
) -> Trajectory:
    """A trajectory from (action name, args, target, thought) tuples."""
    return Trajectory(
        trajectory_id=tid,
        task=Task(task_id=tid, goal=goal, scope=scope, benchmark="miniwob"),
        steps=[
            Step(index=i, thought=thought, action={"name": n, "args": a}, target=t)
            for i, (n, a, t, thought) in enumerate(steps)
        ],
    )


def _one(*trajectories: Trajectory) -> Workflow:
    workflows, _ = induce_rule(list(trajectories))
    assert len(workflows) == 1
    return workflows[0]


def _for_goal(workflow: Workflow, goal: str) -> Workflow:
    values = bind_parameters(workflow, goal)
    assert values, f"{workflow.description!r} does not bind {goal!r}"
    return instantiate(workflow, values)


@pytest.mark.parametrize(
    ("word", "typed", "case", "template", "other", "expected"),
    [
        ("myron", "MYRON", "upper", "{textbox|upper}", "kanesha", "KANESHA"),
        ("MYRON", "myron", "lower", "{textbox|lower}", "Kanesha", "kanesha"),
    ],
)
def test_enter_text_2_value_is_the_goal_word_under_a_case_transform(
    word: str, typed: str, case: str, template: str, other: str, expected: str
):
    # the goal does not name the case as "<case> case" (that makes the case a parameter: next test)
    goal = f'Enter "{word}" as {case}-cased text into the text field and press Submit.'
    workflow = _one(
        _traj(
            "t0",
            goal,
            [
                ("fill", {"bid": "12", "value": typed}, TEXTBOX, f"fill, value='{typed}'"),
                ("click", {"bid": "14"}, SUBMIT, "fill, press"),
            ],
        )
    )
    assert [s.value for s in workflow.steps] == [template, ""]
    assert workflow.parameters == ["textbox"]
    assert (
        workflow.description
        == f'Enter "{{textbox}}" as {case}-cased text into the text field and press Submit.'
    )
    assert workflow.steps[1].target == SUBMIT  # "Submit" is not quoted: the button stays literal
    assert [s.reasoning for s in workflow.steps] == ["", ""]  # both thoughts only repeated actions
    second = _for_goal(
        workflow, f'Enter "{other}" as {case}-cased text into the text field and press Submit.'
    )
    assert second.steps[0].value == expected
    assert second.steps[0].post == StepCheck(kind="value_is", value=expected)
    assert second.parameters == []


def test_trimmed_value_binds_the_quoted_part_and_strips_it():
    workflow = _one(
        _traj(
            "t0",
            'Type " kanesha " into the box.',
            [("fill", {"bid": "3", "value": "kanesha"}, TEXTBOX, "I type the name without the spaces.")],
        )
    )
    assert workflow.steps[0].value == "{textbox|strip}"
    assert workflow.description == 'Type "{textbox}" into the box.'
    assert _for_goal(workflow, 'Type " myron " into the box.').steps[0].value == "myron"
    assert _for_goal(workflow, 'Type "myron  " into the box.').steps[0].value == "myron"


def test_title_case_value_and_its_reasoning_become_templates():
    workflow = _one(
        _traj(
            "t0",
            'Enter "myron smith" with each word capitalised.',
            [
                (
                    "fill",
                    {"bid": "3", "value": "Myron Smith"},
                    TargetDesc(role="textbox", label="Full name"),
                    "The goal says myron smith, so I type Myron Smith.",
                )
            ],
        )
    )
    assert workflow.steps[0].value == "{full_name|title}"
    assert workflow.steps[0].reasoning == "The goal says {full_name}, so I type {full_name|title}."
    second = _for_goal(workflow, 'Enter "ada lovelace" with each word capitalised.')
    assert second.steps[0].value == "Ada Lovelace"
    assert second.steps[0].reasoning == "The goal says ada lovelace, so I type Ada Lovelace."


def test_quoted_phrase_value_is_a_parameter_and_an_unquoted_key_stays_literal():
    search = TargetDesc(role="searchbox", label="Search")
    workflow = _one(
        _traj(
            "t0",
            'Search for "red umbrella" and press Enter.',
            [
                ("fill", {"bid": "3", "value": "red umbrella"}, search, "I type the product."),
                ("press", {"bid": "3", "key_comb": "Enter"}, search, "Then I submit the search."),
            ],
        )
    )
    assert [s.value for s in workflow.steps] == ["{search}", "Enter"]
    assert workflow.parameters == ["search"]
    assert workflow.description == 'Search for "{search}" and press Enter.'
    assert workflow.steps[1].post is None  # a key press leaves nothing in the field to check
    assert _for_goal(workflow, 'Search for "blue hat" and press Enter.').steps[0].value == "blue hat"


def test_click_link_label_stated_in_the_goal_becomes_a_parameter():
    link = TargetDesc(role="link", label="Faucibus")
    workflow = _one(
        _traj(
            "t0",
            'Click on the link "Faucibus".',
            [("click", {"bid": "7"}, link, "The Faucibus link is in the second paragraph; I click it.")],
        )
    )
    assert workflow.steps[0].target == TargetDesc(role="link", label="{link}")
    assert workflow.parameters == ["link"]
    assert workflow.description == 'Click on the link "{link}".'
    assert workflow.steps[0].post is None  # clicks get no check
    second = _for_goal(workflow, 'Click on the link "Tortor".')
    assert second.steps[0].target == TargetDesc(role="link", label="Tortor")
    assert second.steps[0].reasoning == "The Tortor link is in the second paragraph; I click it."


def test_click_links_with_different_labels_are_one_workflow_taught_by_both():
    workflows, report = induce_rule(
        [
            _traj(
                "a",
                'Click on the link "Faucibus".',
                [("click", {"bid": "7"}, TargetDesc(role="link", label="Faucibus"), "")],
            ),
            _traj(
                "b",
                'Click on the link "Tortor".',
                [("click", {"bid": "9"}, TargetDesc(role="link", label="Tortor"), "")],
            ),
        ]
    )
    assert len(workflows) == 1
    assert workflows[0].provenance.trajectory_ids == ["a", "b"]
    assert report.groups == {"click {link}": ["a", "b"]}  # named after its own label, not a teaching one


def test_button_label_matches_the_quoted_part_whatever_its_case():
    workflow = _one(_traj("t0", 'Click on the "submit" button.', [("click", {"bid": "4"}, SUBMIT, "")]))
    assert workflow.steps[0].target.label == "{button}"
    assert _for_goal(workflow, 'Click on the "Cancel" button.').steps[0].target.label == "Cancel"


def test_selected_option_is_a_parameter_with_a_value_check():
    listbox = TargetDesc(role="combobox", label="")
    workflow = _one(
        _traj(
            "t0",
            'Select "Arielle" from the list and click Submit.',
            [
                (
                    "select_option",
                    {"bid": "5", "options": "Arielle"},
                    listbox,
                    "select_option, options='Arielle'",
                ),
                ("click", {"bid": "6"}, SUBMIT, "click"),
            ],
        )
    )
    assert workflow.steps[0].value == "{combobox}"
    assert workflow.steps[0].post == StepCheck(kind="value_is", value="{combobox}")
    assert [s.reasoning for s in workflow.steps] == ["", ""]
    second = _for_goal(workflow, 'Select "Deon" from the list and click Submit.')
    assert second.steps[0].post == StepCheck(kind="value_is", value="Deon")


def _login(username: str, password: str) -> Trajectory:
    goal = (
        f'Enter the username "{username}" and the password "{password}" into the text fields and press login.'
    )
    return _traj(
        f"login-{username}",
        goal,
        [
            (
                "fill",
                {"bid": "16", "value": username},
                TargetDesc(role="textbox", label="Username"),
                "Type the username into the Username field",
            ),
            (
                "fill",
                {"bid": "19", "value": password},
                TargetDesc(role="textbox", label="Password"),
                "fill[19]",
            ),
            ("click", {"bid": "20"}, TargetDesc(role="button", label="Login"), "click('20')"),
        ],
        scope="miniwob/login-user",
    )


def test_login_keeps_the_unquoted_button_literal_and_parameterises_the_credentials():
    workflow = _one(_login("cierra", "11L"))
    assert [s.target.label for s in workflow.steps] == ["Username", "Password", "Login"]
    assert [s.value for s in workflow.steps] == ["{username}", "{password}", ""]
    assert workflow.parameters == ["username", "password"]
    assert workflow.description == (
        'Enter the username "{username}" and the password "{password}" into the text fields and press login.'
    )


def test_fill_steps_check_their_value_and_the_check_instantiates():
    workflow = _one(_login("cierra", "11L"))
    assert [s.post for s in workflow.steps] == [
        StepCheck(kind="value_is", value="{username}"),
        StepCheck(kind="value_is", value="{password}"),
        None,
    ]
    second = _for_goal(
        workflow, 'Enter the username "kanesha" and the password "Ux7q" into the text fields and press login.'
    )
    assert [s.post.value for s in second.steps[:2]] == ["kanesha", "Ux7q"]
    assert [s.value for s in second.steps] == ["kanesha", "Ux7q", ""]


def test_reasoning_that_only_repeats_the_action_is_dropped_and_sentences_are_kept():
    workflow = _one(_login("cierra", "11L"))
    assert [s.reasoning for s in workflow.steps] == ["Type the username into the Username field", "", ""]
    assert repeats_action("fill, value='MYRON'")
    assert repeats_action("fill, press")
    assert repeats_action("click then fill and press")
    assert not repeats_action("then and then fill")  # more filler than a couple: something is said
    assert not repeats_action("fill first")
    assert not repeats_action("I press Enter to submit the form.")


def test_one_goal_word_typed_twice_in_two_cases_is_one_parameter():
    workflow = _one(
        _traj(
            "t0",
            'Enter "myron" into both fields, the second in upper case.',
            [
                ("fill", {"bid": "1", "value": "myron"}, TargetDesc(role="textbox", label="First"), ""),
                ("fill", {"bid": "2", "value": "MYRON"}, TargetDesc(role="textbox", label="Second"), ""),
            ],
        )
    )
    # the goal names the case, so the case is read off the goal too (`{first|case}`)
    assert [s.value for s in workflow.steps] == ["{first}", "{first|case}"]
    assert workflow.parameters == ["first", "case"]
    second = _for_goal(workflow, 'Enter "ada" into both fields, the second in upper case.')
    assert [s.value for s in second.steps] == ["ada", "ADA"]
    lower = _for_goal(workflow, 'Enter "BO" into both fields, the second in lower case.')
    assert [s.value for s in lower.steps] == ["BO", "bo"]


def test_a_state_setting_step_repeated_later_on_the_same_element_is_superseded() -> None:
    """Fields filled by hand, then filled again by a workflow: the trajectory teaches one fill each."""
    user, password = TargetDesc(role="textbox", label="Username"), TargetDesc(role="textbox", label="Password")
    login = TargetDesc(role="button", label="Login")
    acts = [
        ("fill", {"bid": "16", "value": "juan"}, user, None),
        ("fill", {"bid": "19", "value": "Jc"}, password, None),
        ("fill", {"bid": "16", "value": "juan"}, user, 2),
        ("fill", {"bid": "19", "value": "Jc"}, password, 2),
        ("click", {"bid": "20"}, login, 2),
        ("click", {"bid": "20"}, login, None),
    ]
    steps = [
        Step(index=i, action={"name": n, "args": a}, target=t, called_by=c) for i, (n, a, t, c) in enumerate(acts)
    ]
    trajectory = Trajectory(
        trajectory_id="t",
        task=Task(task_id="x", goal="g", scope="miniwob/login-user", benchmark="miniwob"),
        steps=steps,
    )
    abstract = abstract_trajectory(trajectory)
    assert [(s.action, s.label) for s in abstract.steps] == [
        ("fill", "Username"),
        ("fill", "Password"),
        ("click", "Login"),
        ("click", "Login"),  # clicks are events, not states: both stay
    ]


def test_a_case_the_goal_names_becomes_a_parameter_so_the_next_seed_can_ask_for_the_other() -> None:
    """enter-text-2: "myron" typed in upper case on one seed; "KANESHA" asked in lower case on the next."""
    trajectory = Trajectory(
        trajectory_id="a",
        task=Task(
            task_id="x",
            goal='Type "myron" in all upper case letters in the text input and press Submit.',
            scope="miniwob/enter-text-2",
            benchmark="miniwob",
        ),
        steps=[
            Step(index=0, action={"name": "fill", "args": {"bid": "14", "value": "MYRON"}}, target=TargetDesc(role="textbox")),
            Step(index=1, action={"name": "click", "args": {"bid": "15"}}, target=TargetDesc(role="button", label="Submit")),
        ],
    )
    [workflow], _ = induce_rule([trajectory])
    assert workflow.description == 'Type "{textbox}" in all {case} case letters in the text input and press Submit.'
    assert workflow.steps[0].value == "{textbox|case}"
    lower = 'Type "KANESHA" in all lower case letters in the text input and press Submit.'
    filled = instantiate(workflow, bind_parameters(workflow, lower))
    assert filled.steps[0].value == "kanesha" and filled.steps[0].post == StepCheck(kind="value_is", value="kanesha")
    same = instantiate(workflow, bind_parameters(workflow, trajectory.task.goal))
    assert same.steps[0].value == "MYRON"


def test_a_secret_typed_as_its_placeholder_gets_no_value_check() -> None:
    """The arena records a login's password as `{password}` (the executor typed the secret): a check
    against the placeholder could never pass, so the step has none; the username keeps its check."""
    goal = "As erin (password {password}), open the roadmap."
    workflow = _one(_traj("login-erin", goal, [
        ("fill", {"bid": "16", "value": "erin"}, TargetDesc(role="textbox", label="Username:"), ""),
        ("fill", {"bid": "19", "value": "{password}"}, TargetDesc(role="textbox", label="Password:"), ""),
        ("click", {"bid": "20"}, TargetDesc(role="button", label="Login"), ""),
    ], scope="sites/trac/open-roadmap"))  # fmt: skip
    assert [s.value for s in workflow.steps] == ["{username}", "{password}", ""]
    assert [s.post for s in workflow.steps] == [StepCheck(kind="value_is", value="{username}"), None, None]


def test_another_templates_workflow_is_bound_by_the_words_around_each_placeholder() -> None:
    """A site's goals share their phrasing: the log-in and open-the-ticket parts that "change the
    priority" taught bind on a "reassign" goal, value by value, where the whole template does not."""
    from awm.memory.workflow import bind_by_context

    taught = Workflow(name="w", description='As {username} (password {password}), change the priority of ticket "{link}" to {priority}.')
    goal = 'As carol (password {password}), reassign ticket "Sync token invalid after refresh" to dave.'
    bound = bind_parameters(taught, goal)
    assert bound["username"] == "carol" and bound["link"] == "Sync token invalid after refresh"
    assert bound == bind_by_context(taught.description, goal)
    # a quote inside the value, and a value at the very end of the goal
    assert bind_by_context('Open "{link}" now', 'Please open "A "x" b" now')["link"] == 'A "x" b'
    assert bind_by_context("Find the member {name}.", "Find the member Alice Smith") == {"name": "Alice Smith"}
    assert bind_by_context("Plan it for milestone {milestone}.", "Plan it for milestone 1.2.") == {"milestone": "1.2"}
    # a quoted value whose words after the quote differ: the quotes hold the value
    moved = 'As bob (password {password}), move the ticket "Crash when a name is long" to milestone 1.2.'
    assert bind_by_context('Open the ticket "{link}".', moved) == {"link": "Crash when a name is long"}
    # words said another way, or found twice, leave the value to the model
    assert bind_by_context("Log in as {username} with password {password}", "Open the profile of bob") == {}
    assert bind_by_context('Then open "{link}"', 'Open "a" or open "b"') == {}
    # the words that open the description are read where they open the goal, also when said again
    # later ("marked as being worked on" does not hide the user of "As erin (password ...)")
    accept = 'As erin (password {password}), accept the ticket "Agenda view", so that it is marked as being worked on.'
    assert bind_by_context(taught.description, accept)["username"] == "erin"
    assert bind_by_context('Open "{link}"', 'Open "a" or open "b"') == {"link": "a"}
    assert "username" not in bind_by_context(taught.description, 'Please, as erin, or as bob, accept "Agenda view".')
    # a quote mark alone is no context: the comment another template typed is not this goal's title
    comment = 'As {user} (password {password}), add the comment "{text}" to the ticket "{summary}".'
    assert bind_by_context(comment, goal) == {
        "user": "carol", "password": "{password}", "summary": "Sync token invalid after refresh"
    }
    # an unquoted value is a word or a short name, not a clause or a quoted title
    priority = "Change the priority to {priority}."
    assert bind_by_context(priority, "Move the ticket to milestone 1.2.") == {"priority": "milestone 1.2"}
    assert bind_by_context(priority, "According to the project wiki, who looks after security reviews?") == {}
    assert bind_by_context(priority, 'Add the comment "Slow" to the ticket "Agenda view".') == {}
    # an unquoted placeholder is not read inside a text the goal quotes (a comment is no choice)
    closing = 'Close the order "{order}" as a {reason} of the order "A-1".'
    asked = 'Add the note "Users asked for a choice of colour." to the order "B-2".'
    assert bind_by_context(closing, asked) == {"order": "B-2"}
    assert bind_by_context(closing, 'Close the order "B-2" as a duplicate of the order "A-1".')["reason"] == "duplicate"
    assert bind_by_context('Add the comment "{text}".', 'Add the comment "Slow, and 5 s on a phone".') == {
        "text": "Slow, and 5 s on a phone"
    }  # quoted: whatever the quotes hold
    # a placeholder right after its own name: another goal names its own field there, or none
    move = 'Move the order "{order}" to delivery {delivery}.'
    assert bind_by_context(move, 'Change the size of the order "A-17" to 42.') == {"order": "A-17", "delivery": "42"}
    assert bind_by_context(move, 'Move the order "A-17" to delivery express.')["delivery"] == "express"
    assert "delivery" not in bind_by_context(move, 'Add the note "Fragile" to the order "A-17".')
    # the whole template still wins where it matches
    assert bind_parameters(taught, 'As erin (password x), change the priority of ticket "T" to high.') == {
        "username": "erin", "password": "x", "link": "T", "priority": "high",
    }  # fmt: skip


def _shipping(order: str, service: str) -> Trajectory:
    """A shop's order page: open the order, choose its shipping service in a list, save."""
    listed = "[12] combobox 'Shipping:' value='standard', options: standard | express | overnight, collapsed"
    trajectory = _traj(
        f"ship-{order}",
        f'Ship the order "{order}" by {service}.',
        [
            ("click", {"bid": "3"}, TargetDesc(role="link", label=order), "Open the order"),
            ("select_option", {"bid": "12", "options": service}, TargetDesc(role="combobox", label="Shipping:"), ""),
            ("click", {"bid": "14"}, TargetDesc(role="button", label="Save"), ""),
        ],
        scope="sites/shop/ship-order",
    )
    trajectory.steps[1].observation = f"[3] link '{order}'\n{listed}\n[14] button 'Save'"
    return trajectory


def test_a_list_choice_is_bound_by_the_option_another_goal_names() -> None:
    """Another template's goal names the choice in its own words: the option of the step's list it
    says, outside its quoted titles and the values already bound, is the value; two options said, or
    none, leave it to the model."""
    from awm.memory.view import unstated_values

    workflow = _one(_shipping("A-17", "express"))
    choose = workflow.steps[1]
    assert choose.value == "{shipping}" and choose.options == ["standard", "express", "overnight"]
    assert "options" not in workflow.steps[0].model_dump() and "options" in choose.model_dump()
    other = 'Send the order "B-2" with the Overnight service, please.'
    assert bind_parameters(workflow, other) == {"link": "B-2", "shipping": "overnight"}
    assert unstated_values(workflow, other) == []
    assert instantiate(workflow, bind_parameters(workflow, other)).steps[1].value == "overnight"
    # an option inside a quoted title, or inside a value already bound, is not a choice
    assert "shipping" not in bind_parameters(workflow, 'Send the order "Express kettle" today.')
    assert "shipping" not in bind_parameters(workflow, "Send the order express-kettle today.")
    assert bind_parameters(workflow, 'Send the order "Overnight bag" by express.')["shipping"] == "express"
    # two options said: no telling which is meant
    assert "shipping" not in bind_parameters(workflow, 'Change the order "B-2" from standard to express.')
    assert unstated_values(workflow, 'Open the order "B-2".') == ["shipping"]
    # the teaching template itself still binds as a whole
    assert bind_parameters(workflow, 'Ship the order "C-9" by standard.') == {"link": "C-9", "shipping": "standard"}


def test_a_list_the_observation_cut_records_no_options() -> None:
    """A long list the observation shows only the start of (`… N more`) gives no options: a choice is
    not read off a goal by a partial list."""
    trajectory = _shipping("A-17", "express")
    trajectory.steps[1].observation = (
        "[12] combobox 'Shipping:' value='standard', options: standard | express | … 9 more, collapsed"
    )
    assert _one(trajectory).steps[1].options == []
