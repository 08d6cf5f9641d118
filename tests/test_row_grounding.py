"""A control repeated in every row (an Edit link per ticket, a star per e-mail) grounded through its
row's text: recorded on the page, turned into a parameter by induction where the goal names the row,
and used by grounding as a hard filter. On a small non-benchmark page (a ticket table, a list of
e-mails) in real Chromium, and as pure functions."""

from __future__ import annotations

import pytest

from awm.grounding.ground import ground_exact
from awm.grounding.model import Target
from awm.grounding.snapshot import Element
from awm.induction.rule import induce_rule, row_part
from awm.memory.view import MemoryView
from awm.memory.workflow import Workflow, WorkflowStep, bind_parameters
from awm.pipeline.replay import replay_values
from awm.sites.templates import Template
from awm.trajectory import Step, TargetDesc, Task, Trajectory
from awm.webarena.env import BrowserSession
from awm.webarena.harness import HarnessConfig, run_episode
from awm.webarena.policies import ReplayPolicy, ScriptedPolicy


@pytest.mark.parametrize(
    ("row", "label", "goal", "part"),
    [
        ("Alice Smith Meeting tomorrow", "", "Find the email by Alice Smith and click the star icon", "Alice Smith"),
        ("#42 Crash on save Edit", "Edit", "Open the Edit page of ticket #42", "#42"),  # not its own label
        ("Bob Lunch plans", "", 'Star the email from "Bob"', "Bob"),
        ("1.3 Release notes Edit", "Edit", "Change the due date of milestone 1.3", "1.3"),
        ("Carol Budget", "", "Star the email from Dave", None),  # the goal names another row
        ("Star wars fan club", "", "Star the email about the party", None),  # the goal's first word is a verb
    ],
)
def test_the_rows_words_are_the_part_of_the_goal_that_names_a_row(row: str, label: str, goal: str, part: str | None) -> None:
    assert row_part(row, label, goal) == part


def _starred(tid: str, sender: str, row: str) -> Trajectory:
    star = TargetDesc(role="button", label="star", row=row)
    return Trajectory(
        trajectory_id=tid,
        task=Task(task_id="inbox", goal=f"Star the newsletter from {sender}", scope="site/star", benchmark="browsergym"),
        steps=[Step(index=0, action={"name": "click", "args": {"bid": "9"}}, target=star)],
    )


def test_induction_makes_the_row_a_parameter_bound_from_the_next_goal() -> None:
    [workflow], _ = induce_rule([_starred("a", "Ada Park", "Newsletter from Ada Park"), _starred("b", "Lee Wu", "Newsletter from Lee Wu")])
    [step] = workflow.steps
    assert (step.target.label, step.target.row) == ("star", "{row}")
    assert workflow.description == "Star the newsletter from {row}" and workflow.parameters == ["row"]
    assert bind_parameters(workflow, "Star the newsletter from Sam Ito") == {"row": "Sam Ito"}


def test_a_row_the_goal_does_not_name_is_not_kept() -> None:
    [workflow], _ = induce_rule([_starred("a", "someone", "Newsletter from Ada Park")])
    assert workflow.steps[0].target.row == ""


def test_a_replay_reads_a_row_the_goal_does_not_state_off_its_source_step() -> None:
    unstated = STAR.model_copy(update={"description": "Star a mail."})  # the goal binds nothing
    assert replay_values(unstated, _starred("a", "Ada Park", "Newsletter from Ada Park")) == {"row": "Newsletter from Ada Park"}


def test_grounding_takes_the_one_control_in_the_named_row() -> None:
    stars = [Element(ref=str(i), tag="button", role="button", text="star", row=f"Invoice from {who}") for i, who in enumerate(["Ada", "Sam", "Lee"])]
    found = ground_exact(stars, Target(role="button", text="star", row="sam"))
    assert found.element.ref == "1"  # type: ignore[union-attr]
    assert ground_exact(stars, Target(role="button", text="star")).ambiguous  # type: ignore[union-attr]
    assert "row='Kim'" in ground_exact(stars, Target(role="button", text="star", row="Kim")).reason  # type: ignore[union-attr]


EDIT = Workflow(
    name="edit ticket",
    description="Edit ticket {row}",
    parameters=["row"],
    steps=[WorkflowStep(action="click", target=TargetDesc(role="link", label="Edit", row="{row}"))],
)
STAR = Workflow(
    name="star",
    description="Star the mail from {row}",
    parameters=["row"],
    steps=[WorkflowStep(action="click", target=TargetDesc(role="button", label="star", row="{row}"))],
)


@pytest.mark.browser
@pytest.mark.parametrize(
    ("workflow", "goal", "hash_"),
    [(EDIT, "Edit ticket #42", "#edit-42"), (STAR, "Star the mail from Sam Ito", "#star-sam")],
)
def test_a_workflow_clicks_the_control_of_the_row_its_goal_names(
    session: BrowserSession, base_url: str, workflow: Workflow, goal: str, hash_: str
) -> None:
    task = Task(
        task_id="browsergym/openended",
        scope="fixtures/rows",
        benchmark="browsergym",
        meta={"task_kwargs": {"start_url": f"{base_url}rows_edit.html", "goal": goal}},
    )
    policy = ScriptedPolicy(
        [f"run_workflow({workflow.name!r}, {{}})", "noop()"],
        memory=MemoryView(scope=task.scope, workflows=(workflow,), use="executable"),
    )
    trajectory = run_episode(session, policy, task, HarnessConfig(max_steps=2))
    [call] = trajectory.workflow_calls
    assert call.completed, call.error
    clicked = next(s for s in trajectory.steps if s.called_by == 0)
    assert clicked.target is not None and clicked.target.row  # the page recorded the row it acted in
    after = next(s for s in trajectory.steps if s.called_by is None and s.index > 0)
    assert after.url.endswith(hash_)


# A template's demonstration that names the row (`row=` in the demonstration language): three posts, each
# with an 'edit' link, told apart only by who wrote them.
POST_TEMPLATE = Template(
    id="edit-post-by",
    site="fixture",
    kind="navigation",
    goal="Edit the post by {author}.",
    demo=["click('[link] edit', row='{author}')"],
    check={"text": "Editing the post by {author}"},
    instance=[{"split": "train", "values": {"author": "Bilal Khan"}}, {"split": "test", "values": {"author": "Dana Kowalski"}}],
)


@pytest.mark.browser
@pytest.mark.parametrize(("number", "author", "hash_"), [(0, "Bilal Khan", "#edit-bilal"), (1, "Dana Kowalski", "#edit-dana")])
def test_a_demonstration_step_with_a_row_replays_on_the_link_of_that_row(
    session: BrowserSession, base_url: str, number: int, author: str, hash_: str
) -> None:
    """As `awm sites check` replays a template's demonstration (`ReplayPolicy`, one call of it)."""
    workflow = POST_TEMPLATE.demonstration(0)
    assert workflow is not None
    assert workflow.steps[0].target == TargetDesc(role="link", label="edit", row="{author}")
    assert workflow.parameters == ["author"]
    task = Task(
        task_id="browsergym/openended",
        scope="fixtures/rows",
        benchmark="browsergym",
        meta={"task_kwargs": {"start_url": f"{base_url}rows_posts.html", "goal": POST_TEMPLATE.goal_for(number)}},
    )
    policy = ReplayPolicy(workflow, POST_TEMPLATE.values(number), scope=task.scope)
    trajectory = run_episode(session, policy, task, HarnessConfig(max_steps=1))
    [call] = trajectory.workflow_calls
    assert call.completed, call.error
    clicked = next(s for s in trajectory.steps if s.called_by == 0)
    assert clicked.target is not None and author in clicked.target.row
    assert trajectory.meta["final_url"].endswith(hash_)
    assert f"Editing the post by {author}" in trajectory.meta["final_observation"]  # the page says which
