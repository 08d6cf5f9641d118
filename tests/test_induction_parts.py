"""A workflow's reusable parts, on recorded arena trajectories (Trac demonstrations, observations left
out): split where a form was submitted or the goal's item was opened, and shared across a site's
templates. Their admission with their whole is tested by a replay on a real site (tests/test_sites_arena.py)."""

from __future__ import annotations

from pathlib import Path

from awm.induction.parts import part_ends
from awm.induction.rule import induce_rule
from awm.memory.composition import call_graph, expand, expand_all
from awm.memory.view import merge_scopes
from awm.memory.workflow import Workflow
from awm.trajectory import Trajectory, load_trajectories

ARENA = Path(__file__).parent / "fixtures" / "arena"


def _template(name: str) -> list[Trajectory]:
    return [t for t in load_trajectories(ARENA) if t.task.task_id == f"browsergym/sites.trac.{name}"]


def _steps(workflow: Workflow) -> list[tuple[str, str, str]]:
    return [(s.action, s.target.label, s.value) for s in workflow.steps]


def test_a_trajectory_splits_where_a_form_was_submitted_and_where_the_goals_item_opened() -> None:
    workflows, _ = induce_rule(_template("change-priority"), admission="gt", parts=True)
    whole, login, open_ticket, change = workflows
    assert whole.provenance.part_of == ""
    assert {w.provenance.part_of for w in (login, open_ticket, change)} == {whole.name}
    # each part names the part that ran before it (the agent keeps that order: log in first)
    assert [w.provenance.follows for w in (whole, login, open_ticket, change)] == ["", "", login.name, open_ticket.name]
    # the whole is built on its parts: three calls, each passing its parameters on under their names
    assert call_graph(workflows) == {whole.name: [login.name, open_ticket.name, change.name]}
    assert [s.params for s in whole.steps] == [
        {"username": "{username}", "password": "{password}"}, {"link": "{link}"}, {"priority": "{priority}"},
    ]  # fmt: skip
    assert _steps(login) == [
        ("fill", "Username:", "{username}"), ("fill", "Password:", "{password}"), ("click", "Login", ""),
    ]  # fmt: skip
    assert _steps(open_ticket) == [
        ("click", "VIEW TICKETS", ""), ("click", "{1} Active Tickets", ""), ("click", "{link}", ""),
    ]  # fmt: skip
    assert _steps(change) == [
        ("click", "Modify Ticket", ""), ("select_option", "Priority:", "{priority}"), ("click", "Submit changes", ""),
    ]  # fmt: skip
    # named by their own labels: no training ticket's summary in a name ("click {link}", not its title)
    assert open_ticket.name == "click VIEW TICKETS, click {1} Active Tickets, click {link}"
    # each part takes only its own parameters, bound from the same goal template as its whole
    assert (login.parameters, open_ticket.parameters, change.parameters) == (["username", "password"], ["link"], ["priority"])
    assert {w.description for w in workflows} == {whole.description}
    # expanded, it is the workflow induced without parts (parts, and calls, only when asked)
    [alone], _ = induce_rule(_template("change-priority"), admission="gt")
    assert len(alone.steps) == 9 and not any(s.is_call for s in alone.steps)
    assert expand(whole, {w.name: w for w in workflows}) == alone


def test_an_information_workflow_ends_on_the_items_page_and_has_no_parts() -> None:
    [workflow], _ = induce_rule(_template("ticket-priority"), admission="gt", parts=True)
    assert _steps(workflow)[-1] == ("click", "{link}", "")  # the answer is read there, by the agent


def test_no_page_no_parts() -> None:
    [whole], _ = induce_rule(_template("change-priority"), admission="gt")
    assert part_ends(whole, [""] * len(whole.steps)) == []
    assert part_ends(whole, ["/login"] * len(whole.steps)) == []  # one page: nothing left it


def test_two_templates_share_their_log_in_and_open_the_ticket_parts_in_a_site_view() -> None:
    priority, _ = induce_rule(_template("change-priority"), admission="gt", parts=True)
    milestone, _ = induce_rule(_template("set-milestone"), admission="gt", parts=True)
    # a site view expands each scope's calls within that scope's version before merging (`view_over_prefix`)
    merged = merge_scopes(
        [("sites/trac/change-priority", expand_all(priority)), ("sites/trac/set-milestone", expand_all(milestone))]
    )
    assert len(merged) == 6  # two wholes, one log in, one open-the-ticket, two changes
    assert [len(w.steps) for w in merged] == [9, 3, 3, 3, 9, 3]


def test_a_site_scope_offers_other_templates_parts_not_their_wholes(tmp_path: Path) -> None:
    """Offered another template's whole, the model ran its ending on its own task (a reassignment done
    with set-milestone's workflow); the log-in and open-the-ticket parts are what carry over."""
    from awm.memory.store import WorkflowStore
    from awm.pipeline.config import PipelineConfig
    from awm.pipeline.stages import memory_view
    from awm.trajectory import Task

    store = WorkflowStore(tmp_path / "m.sqlite")
    for name in ("change-priority", "set-milestone", "ticket-priority"):
        workflows, _ = induce_rule(_template(name), admission="gt", parts=True)
        store.commit(f"sites/trac/{name}", workflows, parent=None, author="rule")
    reassign = Task(task_id="browsergym/sites.trac.reassign-ticket", scope="sites/trac/reassign-ticket", benchmark="sites", goal="x")
    config = PipelineConfig(benchmark="sites", tasks=["trac"], scope="site", k=3, workflows="executable")
    offered = memory_view(store, config, reassign).workflows
    assert offered and all(w.provenance.part_of or len(w.steps) == 3 for w in offered)
    wholes = {w.provenance.part_of for w in offered if w.provenance.part_of}
    assert not wholes & {w.name for w in offered}  # no whole beside its own parts
    # the information template's whole splits into none and is the open-the-ticket part's steps: offered once
    opening = [w for w in offered if [s.target.label for s in w.steps] == ["VIEW TICKETS", "{1} Active Tickets", "{link}"]]
    assert len(opening) == 1
    assert len(offered) == 4  # log in, open the ticket, the two changes (top k is taken by the goal later)
