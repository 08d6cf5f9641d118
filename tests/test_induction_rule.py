"""Rule-based induction: grouping by abstract steps, placeholders for differing values only."""

from __future__ import annotations

from pathlib import Path

from awm.induction.abstraction import abstract_trajectory
from awm.induction.rule import induce_rule, slugify
from awm.trajectory import Step, TargetDesc, Task, Trajectory, load_trajectories

FIXTURES = Path(__file__).parent / "fixtures" / "trajectories"


def _traj(
    tid: str, steps: list[tuple[str, dict, TargetDesc | None]], goal: str = "g", scope: str = "s"
) -> Trajectory:
    return Trajectory(
        trajectory_id=tid,
        task=Task(task_id=tid, goal=goal, scope=scope, benchmark="miniwob"),
        steps=[Step(index=i, action={"name": n, "args": a}, target=t) for i, (n, a, t) in enumerate(steps)],
    )


def _login_fixtures() -> list[Trajectory]:
    return [t for t in load_trajectories(FIXTURES) if t.task.scope == "miniwob/login-user"]


def test_abstract_sequence_has_no_bids_and_keeps_values_apart():
    trajectory = _login_fixtures()[0]
    abstract = abstract_trajectory(trajectory)
    assert abstract.signature == (
        ("fill", "textbox", "username"),
        ("fill", "textbox", "password"),
        ("click", "button", "login"),
    )
    assert abstract.values == ("kanesha", "Ux7q", "")
    assert "14" not in repr(abstract.signature)


def test_trajectories_differing_in_bids_and_values_form_one_workflow_with_placeholders():
    logins = _login_fixtures()[:3]
    workflows, report = induce_rule(logins, admission="gt")
    assert len(workflows) == 1
    workflow = workflows[0]
    assert [s.value for s in workflow.steps] == ["{username}", "{password}", ""]
    assert workflow.parameters == ["username", "password"]
    assert workflow.description == (
        'Enter the username "{username}" and the password "{password}" into the text fields and press login.'
    )
    assert workflow.provenance.trajectory_ids == ["login-s1", "login-s2", "login-s3"]
    assert workflow.provenance.mode == "rule" and workflow.provenance.admission == "gt"
    assert workflow.steps[0].reasoning == "I type the username {username} into the Username box."
    assert report.groups[workflow.name] == ["login-s1", "login-s2", "login-s3"]


def test_values_equal_across_members_stay_literal():
    box = TargetDesc(role="textbox", label="Search")
    go = TargetDesc(role="button", label="Go")
    a = _traj(
        "a",
        [
            ("fill", {"bid": "3", "value": "shoes"}, box),
            ("select_option", {"bid": "4", "options": "EUR"}, go),
        ],
    )
    b = _traj(
        "b",
        [("fill", {"bid": "9", "value": "hats"}, box), ("select_option", {"bid": "7", "options": "EUR"}, go)],
    )
    (workflow,), _ = induce_rule([a, b])
    assert [s.value for s in workflow.steps] == ["{search}", "EUR"]
    assert workflow.parameters == ["search"]


def test_different_abstract_sequences_form_different_workflows():
    box = TargetDesc(role="textbox", label="Search")
    a = _traj(
        "a",
        [
            ("fill", {"bid": "3", "value": "x"}, box),
            ("click", {"bid": "4"}, TargetDesc(role="button", label="Go")),
        ],
    )
    b = _traj(
        "b", [("fill", {"bid": "3", "value": "y"}, box), ("press", {"bid": "3", "key_comb": "Enter"}, box)]
    )
    c = _traj(
        "c",
        [
            ("fill", {"bid": "5", "value": "z"}, box),
            ("click", {"bid": "6"}, TargetDesc(role="button", label="Go")),
        ],
    )
    workflows, report = induce_rule([a, b, c])
    assert len(workflows) == 2
    assert sorted(report.groups.values()) == [["a", "c"], ["b"]]
    assert workflows[0].abstract_signature() != workflows[1].abstract_signature()


def test_same_steps_in_different_scopes_are_not_grouped():
    box = TargetDesc(role="textbox", label="Search")
    a = _traj("a", [("fill", {"bid": "3", "value": "x"}, box)], scope="one")
    b = _traj("b", [("fill", {"bid": "3", "value": "y"}, box)], scope="two")
    workflows, _ = induce_rule([a, b])
    assert len(workflows) == 2


def test_scrolls_are_not_kept_and_empty_trajectories_are_skipped():
    """A scroll only brought the next target into view (the executor finds it on the whole page), so
    the episode that needed one and the episode that did not teach one workflow."""
    link = TargetDesc(role="link", label="Reports")
    a = _traj(
        "a",
        [
            ("scroll", {"delta_x": 0, "delta_y": 200}, TargetDesc(role="main", label="page")),
            ("click", {"bid": "12"}, link),
            ("send_msg_to_user", {"text": "42"}, None),
        ],
    )
    b = _traj("b", [("click", {"bid": "7"}, link), ("send_msg_to_user", {"text": "7"}, None)])
    only_scrolled = _traj("scrolled", [("scroll", {"delta_x": 0, "delta_y": 200}, None)])
    empty = _traj("empty", [])
    failed = Trajectory(
        trajectory_id="failed",
        task=Task(task_id="f", scope="s", benchmark="miniwob"),
        steps=[Step(index=0, outcome="parse_error", model_output="click(")],
    )
    workflows, report = induce_rule([a, b, only_scrolled, empty, failed])
    assert len(workflows) == 1
    # the answers (42, 7) are read off the page, not stated by the goal: the workflow ends before them
    assert workflows[0].abstract_signature() == (("click", "link", "reports"),)
    assert workflows[0].provenance.trajectory_ids == ["a", "b"]
    assert report.skipped_empty == ["scrolled", "empty", "failed"]


def test_repeated_value_shares_one_placeholder_and_clashing_labels_get_suffixes():
    box = TargetDesc(role="textbox", label="Name")
    a = _traj(
        "a",
        [
            ("fill", {"bid": "1", "value": "ann"}, box),
            ("fill", {"bid": "2", "value": "ann"}, box),
            ("fill", {"bid": "3", "value": "x"}, box),
        ],
    )
    b = _traj(
        "b",
        [
            ("fill", {"bid": "1", "value": "bob"}, box),
            ("fill", {"bid": "2", "value": "bob"}, box),
            ("fill", {"bid": "3", "value": "y"}, box),
        ],
    )
    (workflow,), _ = induce_rule([a, b])
    assert [s.value for s in workflow.steps] == ["{name}", "{name}", "{name_2}"]
    assert workflow.parameters == ["name", "name_2"]


def test_slugify():
    assert slugify("User name") == "user_name"
    assert slugify("2nd field") == "v_2nd_field"
    assert slugify("***") == "value"


def test_values_stated_in_the_goal_become_placeholders_even_from_one_trajectory():
    """One successful login must not teach the next episode its username and password."""
    from awm.induction.rule import induce_rule
    from awm.trajectory import Step, TargetDesc, Task, Trajectory, Verdict

    goal = 'Enter the username "cierra" and the password "11L" into the text fields and press login.'
    steps = [
        Step(
            index=0,
            thought="fill[16] first",
            action={"name": "fill", "args": {"bid": "16", "value": "cierra"}},
            target=TargetDesc(role="textbox", label="Username"),
        ),
        Step(
            index=1,
            action={"name": "fill", "args": {"bid": "19", "value": "11L"}},
            target=TargetDesc(role="textbox", label="Password"),
        ),
        Step(
            index=2,
            action={"name": "click", "args": {"bid": "20"}},
            target=TargetDesc(role="button", label="Login"),
        ),
    ]
    task = Task(
        task_id="browsergym/miniwob.login-user",
        seed=0,
        goal=goal,
        scope="miniwob/login-user",
        benchmark="miniwob",
    )
    (workflow,), _ = induce_rule(
        [Trajectory(trajectory_id="t0", task=task, steps=steps, verdict=Verdict(reward=1.0))]
    )
    assert [s.value for s in workflow.steps] == ["{username}", "{password}", ""]
    assert workflow.parameters == ["username", "password"]
    assert "cierra" not in workflow.description and "{username}" in workflow.description
    assert workflow.steps[0].reasoning == "fill first"  # the element id quoted in the thought is gone


def test_quoted_parts_skip_apostrophes_inside_words():
    from awm.goal_values import quoted_parts

    assert quoted_parts("Don't click 'Submit', click \"OK\" or \u201cGo on\u201d.") == [
        "Submit",
        "OK",
        "Go on",
    ]


def test_a_key_is_a_parameter_only_when_the_goal_quotes_it():
    box = TargetDesc(role="textbox", label="Field")
    plain = _traj(
        "a", [("press", {"bid": "3", "key_comb": "Enter"}, box)], goal="Focus the field and press Enter."
    )
    quoted = _traj(
        "b", [("press", {"bid": "3", "key_comb": "Tab"}, box)], goal='Press the "Tab" key.', scope="two"
    )
    first, second = induce_rule([plain, quoted])[0]
    assert first.steps[0].value == "Enter" and first.description == "Focus the field and press Enter."
    assert second.steps[0].value == "{field}" and second.description == 'Press the "{field}" key.'


def test_a_quoted_value_replaces_only_its_quoted_occurrence_and_spacing_is_collapsed():
    from awm.memory.workflow import bind_parameters

    goal = 'Enter  "ann" as first name,   "ann smith" as full name (ann is fine).'
    first = TargetDesc(role="textbox", label="First name")
    full = TargetDesc(role="textbox", label="Full name")
    trajectory = _traj(
        "a",
        [("fill", {"bid": "1", "value": "ann"}, first), ("fill", {"bid": "2", "value": "ann smith"}, full)],
        goal,
    )
    (workflow,), _ = induce_rule([trajectory])
    assert (
        workflow.description
        == 'Enter "{first_name}" as first name, "{full_name}" as full name (ann is fine).'
    )
    other = 'Enter "bo" as first name, "bo li" as full name (ann is fine).'
    assert bind_parameters(workflow, other) == {"first_name": "bo", "full_name": "bo li"}


def test_an_answer_read_off_the_page_is_left_to_the_agent_and_a_stated_one_is_kept():
    """An information task on an ordinary shop: open the product the goal names, answer its price. The
    price was read on the product page (each task's differs), so the workflow stops on that page; a
    reply the goal dictates ("reply 'done'") is a value of the task and stays."""
    link = TargetDesc(role="link", label="Desk lamp")
    other = TargetDesc(role="link", label="Floor lamp")
    asked = [
        _traj("a", [("click", {"bid": "4"}, link), ("send_msg_to_user", {"text": "$12"}, None)],
                goal='What does the "Desk lamp" cost?'),
        _traj("b", [("click", {"bid": "9"}, other), ("send_msg_to_user", {"text": "$12"}, None)],
                goal='What does the "Floor lamp" cost?'),
    ]  # fmt: skip
    [workflow], report = induce_rule(asked, admission="gt")
    assert [(s.action, s.target.label) for s in workflow.steps] == [("click", "{link}")]  # same answer twice: still read
    assert workflow.parameters == ["link"] and report.skipped_empty == []

    dictated = _traj(
        "c", [("click", {"bid": "4"}, link), ("send_msg_to_user", {"text": "done"}, None)],
        goal='Open the "Desk lamp" page and reply "done"',
    )  # fmt: skip
    [kept], _ = induce_rule([dictated], admission="gt")
    assert [s.action for s in kept.steps] == ["click", "send_msg_to_user"] and kept.steps[1].value == "{send_msg_to_user}"

    only_answered = _traj("d", [("send_msg_to_user", {"text": "42"}, None)], goal="How many lamps are there?")
    assert induce_rule([only_answered], admission="gt") == ([], report.__class__(skipped_empty=["d"]))


def test_a_field_set_right_before_a_read_answer_and_never_submitted_is_not_taught():
    """An ordinary shop: the product was opened, then its name typed into the search box and never
    searched, then the price answered. The typing changed nothing the answer was read from; a search
    that was submitted before answering is kept."""
    link = TargetDesc(role="link", label="Desk lamp")
    search = TargetDesc(role="searchbox", label="Search")
    go = TargetDesc(role="button", label="Go")
    goal = 'What does the "Desk lamp" cost?'
    typed = _traj("a", [("click", {"bid": "4"}, link), ("fill", {"bid": "2", "value": "Desk lamp"}, search),
                        ("send_msg_to_user", {"text": "$12"}, None)], goal=goal)  # fmt: skip
    [workflow], _ = induce_rule([typed], admission="gt")
    assert [(s.action, s.target.label) for s in workflow.steps] == [("click", "{link}")]
    searched = _traj("b", [("fill", {"bid": "2", "value": "Desk lamp"}, search), ("click", {"bid": "3"}, go),
                           ("click", {"bid": "4"}, link), ("send_msg_to_user", {"text": "$12"}, None)], goal=goal)  # fmt: skip
    [kept], _ = induce_rule([searched], admission="gt")
    assert [s.action for s in kept.steps] == ["fill", "click", "click"]


def test_an_answer_that_only_looks_like_a_word_of_the_goal_is_still_read_off_the_page():
    road = TargetDesc(role="link", label="Roadmap")
    asked = _traj("a", [("click", {"bid": "2"}, road), ("send_msg_to_user", {"text": "3"}, None)],
                  goal="How many open tickets does milestone 1.3 have?")  # fmt: skip
    [workflow], _ = induce_rule([asked], admission="gt")
    assert [s.action for s in workflow.steps] == ["click"]


def test_labels_built_from_the_goals_value_become_one_workflow_with_the_value_in_the_label():
    """An ordinary site: a milestone's page is opened by its link "Milestone: 1.3"; the goal names the
    milestone unquoted. Two demonstrations differing exactly there teach one workflow, not one per item;
    a label that differs where the goals do not (a ticket's author) keeps them apart."""
    road = TargetDesc(role="link", label="Roadmap")

    def demo(tid: str, milestone: str, clicked: str) -> Trajectory:
        return _traj(tid, [("click", {"bid": "1"}, road), ("click", {"bid": "7"}, TargetDesc(role="link", label=clicked))],
                     goal=f"How many open tickets does milestone {milestone} have?")  # fmt: skip

    [workflow], report = induce_rule([demo("a", "1.3", "Milestone: 1.3"), demo("b", "1.2", "Milestone: 1.2")])
    assert [s.target.label for s in workflow.steps] == ["Roadmap", "Milestone: {milestone}"]
    assert workflow.description == "How many open tickets does milestone {milestone} have?"
    assert report.groups == {workflow.name: ["a", "b"]}
    from awm.memory.workflow import bind_parameters

    assert bind_parameters(workflow, "How many open tickets does milestone 2.0 have?") == {"milestone": "2.0"}

    apart, _ = induce_rule([demo("c", "1.3", "bilal"), demo("d", "1.2", "maria")])
    assert [w.steps[1].target.label for w in apart] == ["bilal", "maria"]
