"""A workflow calling a workflow: expansion (parameters passed on, nested calls, depth), the call graph,
cycles refused at commit, calls resolved within their own version, and merges that keep calls pointing
at their callees. The run of a composed workflow on a real site is the replay admission test in
tests/test_sites_arena.py (the induced whole calls its log-in part there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from awm.cli import app
from awm.errors import WorkflowParseError
from awm.induction.merge import merge_workflows
from awm.memory.composition import (
    MAX_CALL_DEPTH,
    CompositionError,
    call_graph,
    call_step,
    check_calls,
    compose_from_parts,
    expand,
    find_cycle,
)
from awm.memory.store import WorkflowStore
from awm.memory.text_format import parse_workflows, render_workflows
from awm.memory.view import MemoryView, view_over_prefix
from awm.memory.workflow import Workflow, WorkflowStep
from awm.trajectory import TargetDesc
from awm.webarena.workflow_run import callable_workflows, not_executable


def _step(action: str, role: str, label: str, value: str = "") -> WorkflowStep:
    return WorkflowStep(action=action, target=TargetDesc(role=role, label=label), value=value)


LOG_IN = Workflow(
    name="log in",
    description="Log in as {username}",
    parameters=["username", "password"],
    steps=[
        _step("fill", "textbox", "Username", "{username|lower}"),
        _step("fill", "textbox", "Password", "{password}"),
        _step("click", "button", "Login"),
    ],
)
OPEN_ITEM = Workflow(
    name="open item",
    description="Open {item}",
    parameters=["item"],
    steps=[_step("click", "link", "Tickets"), _step("click", "link", "{item}")],
)
CLOSE = Workflow(
    name="close ticket",
    description="As {user}, close ticket {ticket}",
    parameters=["user", "password", "ticket"],
    steps=[
        call_step(LOG_IN, {"username": "{user}", "password": "{password}"}),
        call_step(OPEN_ITEM, {"item": "#{ticket}"}),
        _step("click", "button", "Close"),
    ],
)


def _library(*workflows: Workflow) -> dict[str, Workflow]:
    return {w.name: w for w in workflows}


def test_a_call_runs_the_callees_steps_with_the_callers_values() -> None:
    expanded = expand(CLOSE, _library(LOG_IN, OPEN_ITEM, CLOSE))
    assert [(s.action, s.target.label, s.value) for s in expanded.steps] == [
        ("fill", "Username", "{user|lower}"),  # renamed to the caller's placeholder, the transform kept
        ("fill", "Password", "{password}"),
        ("click", "Login", ""),
        ("click", "Tickets", ""),
        ("click", "#{ticket}", ""),  # text around a placeholder passed as it is
        ("click", "Close", ""),
    ]
    assert (expanded.name, expanded.description, expanded.parameters) == (CLOSE.name, CLOSE.description, CLOSE.parameters)
    assert expand(LOG_IN, {}) is LOG_IN  # nothing to expand
    assert call_graph([LOG_IN, OPEN_ITEM, CLOSE]) == {"close ticket": ["log in", "open item"]}


def test_a_literal_argument_takes_the_callees_transform() -> None:
    shout = Workflow(name="shout", steps=[call_step(LOG_IN, {"username": "ADMIN", "password": "{pw}"})])
    expanded = expand(shout, _library(LOG_IN))
    assert [s.value for s in expanded.steps[:2]] == ["admin", "{pw}"]


def test_calls_nest_to_a_depth_and_no_further() -> None:
    chain = [Workflow(name="w0", steps=[_step("click", "button", "Go")])]
    for n in range(1, MAX_CALL_DEPTH + 2):
        chain.append(Workflow(name=f"w{n}", steps=[call_step(chain[-1]), _step("click", "link", f"L{n}")]))
    library = _library(*chain)
    ok = expand(chain[MAX_CALL_DEPTH], library)
    assert [s.target.label for s in ok.steps] == ["Go", *(f"L{n}" for n in range(1, MAX_CALL_DEPTH + 1))]
    with pytest.raises(CompositionError, match=f"more than {MAX_CALL_DEPTH} deep: 'w{MAX_CALL_DEPTH + 1}' -> "):
        expand(chain[MAX_CALL_DEPTH + 1], library)


def test_a_cycle_is_refused_with_its_path() -> None:
    a = Workflow(name="a", steps=[_step("click", "button", "A"), call_step(Workflow(name="b"))])
    b = Workflow(name="b", steps=[call_step(Workflow(name="c"))])
    c = Workflow(name="c", steps=[call_step(Workflow(name="a"))])
    assert find_cycle(call_graph([a, b, c])) == ["a", "b", "c", "a"]
    assert find_cycle(call_graph([a, b])) is None  # 'c' not held: no cycle, an unresolved call
    with pytest.raises(CompositionError, match="'a' calls itself: 'a' -> 'b' -> 'c' -> 'a'"):
        expand(a, _library(a, b, c))
    with pytest.raises(CompositionError, match="'a' -> 'b' -> 'c' -> 'a'"):
        check_calls([a, b, c])
    selfish = Workflow(name="s", steps=[call_step(Workflow(name="s"))])
    assert find_cycle(call_graph([selfish])) == ["s", "s"]


def test_the_store_refuses_a_version_whose_calls_loop_and_stays_unchanged(tmp_path: Path) -> None:
    a = Workflow(name="a", steps=[call_step(Workflow(name="b"))])
    b = Workflow(name="b", steps=[call_step(Workflow(name="a"))])
    with WorkflowStore(tmp_path / "m.sqlite") as store:
        first = store.commit("site/t", [LOG_IN, CLOSE], parent=None, author="manual")
        with pytest.raises(CompositionError, match="calls itself"):
            store.commit("site/t", [LOG_IN, a, b], parent=first.version, author="manual")
        assert store.head_version("site/t") == first.version
        assert [w.name for w in store.head("site/t").workflows] == ["log in", "close ticket"]


def test_an_unresolved_call_makes_the_workflow_not_callable_and_says_so() -> None:
    view = MemoryView(scope="t", workflows=(CLOSE, LOG_IN), use="executable")  # 'open item' not held
    assert list(callable_workflows(view, "As Erin, close ticket 7")) == ["log in"]
    assert not_executable(CLOSE) == "step 1 calls 'log in', which its memory version does not resolve"


def test_a_callable_composed_workflow_is_bound_from_its_own_goal() -> None:
    view = MemoryView(scope="t", workflows=(CLOSE, LOG_IN, OPEN_ITEM), use="executable")
    close = callable_workflows(view, "As Erin, close ticket 7")["close ticket"]
    assert close.bound == {"user": "Erin", "ticket": "7"}
    assert close.open == ("password",)
    assert [s.target.label for s in close.workflow.steps] == ["Username", "Password", "Login", "Tickets", "#{ticket}", "Close"]


def test_calls_resolve_within_their_own_scopes_version_in_a_site_view(tmp_path: Path) -> None:
    other_log_in = LOG_IN.model_copy(update={"steps": [_step("click", "link", "Sign in with SSO")]})
    with WorkflowStore(tmp_path / "m.sqlite") as store:
        store.commit("site/a", [other_log_in], parent=None, author="manual")
        store.commit("site/b", [CLOSE, LOG_IN, OPEN_ITEM], parent=None, author="manual")
        view = view_over_prefix(store, "site", use="executable")
    by_name = {w.name: w for w in view.workflows}
    assert "log in (b)" in by_name  # the view renamed b's log in: a call by name would have found a's
    assert [s.target.label for s in by_name["close ticket"].steps][:3] == ["Username", "Password", "Login"]


def test_a_merge_points_calls_at_where_their_callees_went() -> None:
    flat = expand(CLOSE, _library(LOG_IN, OPEN_ITEM))
    part = Workflow(name="log in", parameters=["user", "password"], steps=flat.steps[:3])
    existing = [part.model_copy(update={"name": "sign in"})]  # the same steps, learnt before
    whole = compose_from_parts(flat, [part])
    assert whole.steps[0].is_call and whole.steps[0].value == "log in"
    assert whole.steps[0].params == {"user": "{user}", "password": "{password}"}
    assert len(whole.steps) == 4 and expand(whole, _library(part)) == flat
    merged, report = merge_workflows(existing, [whole, part])
    assert [d.existing for d in report.duplicates] == ["sign in"]
    [merged_whole] = [w for w in merged if w.name == "close ticket"]
    assert merged_whole.steps[0].value == "sign in"
    assert expand(merged_whole, _library(*merged)).steps[0].value == "{user|lower}"


def test_parts_that_do_not_match_leave_the_whole_as_it_is() -> None:
    flat = expand(CLOSE, _library(LOG_IN, OPEN_ITEM))
    assert compose_from_parts(flat, [Workflow(name="x", steps=[_step("click", "button", "Elsewhere")])]) is flat


def test_a_call_is_written_and_read_back_as_the_agent_writes_it() -> None:
    text = render_workflows([CLOSE, LOG_IN], "webarena")
    assert "run_workflow('log in', {'username': '{user}', 'password': '{password}'})" in text
    back = [w.model_dump(exclude={"provenance"}) for w in parse_workflows(text, "webarena")]
    assert back == [w.model_dump(exclude={"provenance"}) for w in (CLOSE, LOG_IN)]
    with pytest.raises(WorkflowParseError, match="run_workflow"):
        parse_workflows("## w\nDo it.\n\nrun_workflow('log in', 'not a dict')\n", "webarena")


def test_memory_show_lists_the_call_graph(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    with WorkflowStore(db) as store:
        store.commit("site/t", [CLOSE, LOG_IN, OPEN_ITEM], parent=None, author="manual")
    result = CliRunner().invoke(app, ["memory", "show", "site/t", "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert "'close ticket' -> 'log in', 'open item'" in result.output
    result = CliRunner().invoke(app, ["memory", "show", "site/t", "--db", str(db), "--json"])
    assert json.loads(result.output)["call_graph"] == {"close ticket": ["log in", "open item"]}


def test_a_prompt_is_shown_the_steps_of_a_call_not_the_call() -> None:
    view = MemoryView(scope="t", workflows=(CLOSE, LOG_IN, OPEN_ITEM), use="text")
    shown = {w.name: w for w in view.select("As Erin, close ticket 7")}
    assert not any(s.is_call for s in shown["close ticket"].steps) and len(shown["close ticket"].steps) == 6
