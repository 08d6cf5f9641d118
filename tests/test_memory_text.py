"""Workflow text formats: round trips, imports of AWM-style files, and precise rejections."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awm.errors import WorkflowParseError
from awm.memory.text_format import (
    detect_style,
    import_workflows,
    parameters_of,
    parse_step,
    parse_workflows,
    render_workflow,
    render_workflows,
)
from awm.memory.workflow import Workflow, WorkflowStep
from awm.trajectory import TargetDesc


def _fields(workflows: list[Workflow]) -> list[dict]:
    return [w.model_dump(exclude={"provenance"}) for w in workflows]


def _with_derived_parameters(workflows: list[Workflow]) -> list[Workflow]:
    return [w.model_copy(update={"parameters": parameters_of(w.steps)}) for w in workflows]


MIND2WEB_EXAMPLE = """## enter_flight_cities
Given that you are on a flight search page, this workflow enters where you fly from and to.
I type the departure city into the origin box.
[textbox]  From -> TYPE: {departure-city}
[link]  {best-popup-option} -> CLICK
[textbox] To -> TYPE: {arrival-city}

## sort_results
Given that you are on a results page, this workflow sorts the results.
Task: sort hotels by price
[combobox] Sort by -> SELECT: {sort-option}
[button] Apply -> CLICK
"""

WEBARENA_EXAMPLE = """Workflow 1: Log in to the forum
<think>
I need to fill the user name box first.
</think>
```fill('145', '{username}')```

Thought: Then the password box.
Action: fill('[textbox] Password', '{password}')
click('[button] Sign in')
# the "Sign in" button

## Reply to a post
Given that you are on a post, write a reply.
Reasoning: open the reply form.
click('88')
fill('[textbox] Comment', '{reply-text}')
I send the reply and tell the user it was posted, which can take a
long sentence.
send_msg_to_user('Posted the reply to
{post-title}.')
scroll(0, 300)
"""


def test_import_mind2web_style():
    workflows = parse_workflows(MIND2WEB_EXAMPLE, source="m2w.txt")
    assert detect_style(MIND2WEB_EXAMPLE) == "mind2web"
    assert [w.name for w in workflows] == ["enter_flight_cities", "sort_results"]
    first = workflows[0]
    assert first.description.startswith("Given that you are on a flight search page")
    assert first.parameters == ["departure-city", "best-popup-option", "arrival-city"]
    assert first.steps[0] == WorkflowStep(
        reasoning="I type the departure city into the origin box.",
        action="TYPE",
        target=TargetDesc(role="textbox", label="From"),
        value="{departure-city}",
    )
    assert first.steps[1].target == TargetDesc(role="link", label="{best-popup-option}")
    assert first.steps[1].reasoning == "" and first.steps[1].value == ""
    second = workflows[1]
    assert [s.action for s in second.steps] == ["SELECT", "CLICK"]  # the Task: line is ignored
    assert second.steps[0].value == "{sort-option}"


def test_import_webarena_style():
    workflows = parse_workflows(WEBARENA_EXAMPLE, source="wa.txt")
    assert detect_style(WEBARENA_EXAMPLE) == "webarena"
    login, reply = workflows
    assert login.name == "Log in to the forum"
    assert login.description == ""  # think-tagged text is reasoning, not a description
    assert [s.action for s in login.steps] == ["fill", "fill", "click"]
    assert login.steps[0].reasoning == "I need to fill the user name box first."
    assert login.steps[0].target == TargetDesc(label="the field named in the reasoning")  # never the bid
    assert login.steps[0].value == "{username}"
    assert login.steps[1].reasoning == "Then the password box."
    assert login.steps[1].target == TargetDesc(role="textbox", label="Password")
    assert login.steps[2].target == TargetDesc(role="button", label="Sign in")
    assert login.parameters == ["username", "password"]
    assert reply.description == "Given that you are on a post, write a reply."
    assert reply.steps[0].reasoning == "open the reply form."
    assert reply.steps[2].reasoning.splitlines() == [
        "I send the reply and tell the user it was posted, which can take a",
        "long sentence.",
    ]
    assert reply.steps[2].action == "send_msg_to_user"
    assert reply.steps[2].value == "Posted the reply to {post-title}."  # a call cut over two lines
    assert reply.steps[3].action == "scroll" and reply.steps[3].value == "0, 300"


@pytest.mark.parametrize("style", ["mind2web", "webarena"])
def test_render_parse_round_trip_of_imported_examples(style):
    source = MIND2WEB_EXAMPLE if style == "mind2web" else WEBARENA_EXAMPLE
    workflows = parse_workflows(source, style)
    text = render_workflows(workflows, style)
    assert _fields(parse_workflows(text, style)) == _fields(workflows)
    assert _fields(parse_workflows(text)) == _fields(workflows)  # auto-detection picks the same style
    assert "145" not in text and "88" not in text  # example ids never reach a prompt


def test_rendered_formats_look_like_awm():
    workflow = Workflow(
        name="search",
        description="Search the site.",
        steps=[
            WorkflowStep(
                reasoning="Type the query.",
                action="TYPE",
                target=TargetDesc(role="textbox", label="Search"),
                value="{query}",
            ),
            WorkflowStep(action="CLICK", target=TargetDesc(role="button", label="Go")),
        ],
    )
    assert render_workflows([workflow], "mind2web") == (
        "## search\nSearch the site.\nType the query.\n[textbox] Search -> TYPE: {query}\n[button] Go -> CLICK\n"
    )
    browser = workflow.model_copy(
        update={
            "steps": [
                WorkflowStep(
                    reasoning="Type the query.",
                    action="fill",
                    target=TargetDesc(role="textbox", label="Search"),
                    value="{query}",
                ),
                WorkflowStep(action="click", target=TargetDesc(role="button", label="Go")),
            ]
        }
    )
    assert render_workflows([browser], "webarena") == (
        "## search\nSearch the site.\n\nType the query.\nfill('[textbox] Search', '{query}')\n\nclick('[button] Go')\n"
    )


def test_empty_description_and_empty_input():
    workflow = Workflow(
        name="n",
        steps=[WorkflowStep(reasoning="why", action="CLICK", target=TargetDesc(role="link", label="x"))],
    )
    assert _fields(parse_workflows(render_workflows([workflow], "mind2web"), "mind2web")) == _fields(
        [workflow]
    )
    browser = workflow.model_copy(
        update={"steps": [workflow.steps[0].model_copy(update={"action": "click"})]}
    )
    assert _fields(parse_workflows(render_workflows([browser], "webarena"), "webarena")) == _fields([browser])
    # In the other style, the actions both sets have are mapped.
    assert "click('[link] x')" in render_workflows([workflow], "webarena")
    assert "[link] x -> CLICK" in render_workflows([browser], "mind2web")
    assert parse_workflows("") == [] and render_workflows([], "webarena") == ""


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        ("Some notes\n## a\n", 1, "expected a workflow header"),
        ("## a\ndesc\n[link] Go -> DRAG\n", 3, "OP one of CLICK"),
        ("## a\ndesc\nclick(__import__('os').system('true'))\n", 3, "not a literal"),
        ("## a\ndesc\nexplode('[button] x')\n", 3, "not an allowed action"),
        ("## a\ndesc\nclick('[button] x', 'left', 3, 4)\n", 3, "takes 1 argument (bid); got 4"),
        ("## a\ndesc\nfill('[textbox] x', 'unterminated)\n", 3, "cannot parse action"),
        ("## a\ndesc\n[link] Go -> CLICK\ntrailing reasoning\n", 4, "not followed by an action line"),
        ("## a\n\n## a\n", 3, "already used at line 1"),
        ("##\n", 1, "no name"),
    ],
)
def test_unparseable_text_is_rejected_with_line_and_reason(text, line, reason):
    with pytest.raises(WorkflowParseError) as info:
        parse_workflows(text, source="bad.txt")
    message = str(info.value)
    assert message.startswith(f"bad.txt, line {line}:"), message
    assert reason in message


@pytest.mark.parametrize(
    ("text", "target", "value"),
    [
        ("click('[link] edit', row='{author}')", TargetDesc(role="link", label="edit", row="{author}"), ""),
        ("fill('[textbox] Reply', '{text}', row='#42 Crash on save')", TargetDesc(role="textbox", label="Reply", row="#42 Crash on save"), "{text}"),
        ("click('[button] star')", TargetDesc(role="button", label="star"), ""),
    ],
)
def test_a_step_with_a_row_parses_and_renders_back_as_written(text: str, target: TargetDesc, value: str) -> None:
    step = parse_step(text)
    assert (step.target, step.value) == (target, value)
    workflow = Workflow(name="w", steps=[step], parameters=parameters_of([step]))
    assert render_workflow(workflow, "webarena") == f"## w\n\n{text}"
    [back] = parse_workflows(render_workflows([workflow], "webarena"), "webarena")
    assert back.steps == [step]
    assert "{author}" not in text or back.parameters == ["author"]  # a placeholder in the row is a parameter


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("click('[link] edit', rows='{author}')", "unknown keyword rows="),
        ("fill('[textbox] Reply', value='hi')", "unknown keyword value="),
        ("click('[link] edit', **{'row': 'x'})", "unknown keyword **{'row': 'x'}"),
        ("send_msg_to_user('done', row='x')", "send_msg_to_user() acts on no element"),
        ("click('[link] edit', row=3)", "row= must be a string"),
    ],
)
def test_a_keyword_other_than_row_is_refused_by_name(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_step(text)
    with pytest.raises(WorkflowParseError, match=re.escape(says)):
        parse_workflows(f"## w\n\n{text}", "webarena", source="bad.md")


def test_workflow_json_round_trip():
    workflow = parse_workflows(WEBARENA_EXAMPLE)[1]
    workflow.provenance.trajectory_ids = ["t1", "t2"]
    assert Workflow.model_validate_json(workflow.model_dump_json()) == workflow


@pytest.mark.parametrize("message", ["0", "3.5", "-2", "1, 2"])
def test_a_message_that_reads_as_numbers_stays_a_quoted_string(message):
    """Only actions whose arguments are numbers (scroll) are written unquoted; an answer '0' is text."""
    workflow = Workflow(
        name="count",
        description="Count the open tickets",
        steps=[WorkflowStep(action="send_msg_to_user", value=message), WorkflowStep(action="scroll", value="0, 200")],
    )
    text = render_workflows([workflow], "webarena")
    assert f"send_msg_to_user({message!r})" in text and "scroll(0, 200)" in text
    back = parse_workflows(text, "webarena", source="t")[0]
    assert [(s.action, s.value) for s in back.steps] == [("send_msg_to_user", message), ("scroll", "0, 200")]


# --- property: render -> parse is the identity on the fields the format carries -------------------

_SPECIAL = [
    "{",
    "}",
    "'",
    '"',
    "->",
    " -> ",
    "→",
    "\\",
    "[",
    "]",
    "(",
    ")",
    ":",
    "`",
    "#",
    "<",
    ">",
    "é",
    "漢",
]
_chunk = st.one_of(
    st.sampled_from(_SPECIAL),
    st.text(
        alphabet=st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters="\t"),
        max_size=6,
    ),
)
_free = st.lists(_chunk, max_size=6).map("".join).map(str.strip)
_RESERVED_START = re.compile(
    r"^(task|query|website|workflow|think|thoughts?|reasoning|action|answer)\b", re.I
)
_OP_AFTER_ARROW = re.compile(r"(->|−>|→)\s*(CLICK|TYPE|SELECT|HOVER|ENTER)", re.I)


def _is_plain(text: str) -> bool:
    """Prose that cannot be mistaken for a header, an action line or a reasoning/think marker."""
    return (
        bool(text)
        and text[0].isalpha()
        and text[0].isupper()
        and not _RESERVED_START.match(text)
        and not _OP_AFTER_ARROW.search(text)
        and not re.search(r"</?(think|action|thought)>", text, re.I)
    )


_prose = st.builds(
    lambda head, tail: (head + tail).strip(), st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), _free
).filter(_is_plain)
_maybe_prose = st.one_of(st.just(""), _prose)
_reasoning = st.lists(_prose, max_size=2).map("\n".join)
_role = st.from_regex(r"[a-z]{1,8}", fullmatch=True)
_label = _free.filter(lambda s: not _OP_AFTER_ARROW.search(s))
_name = _free.filter(bool)


def _unique_names(workflows: list[Workflow]) -> bool:
    return len({w.name for w in workflows}) == len(workflows)


_m2w_step = st.builds(
    lambda reasoning, op, role, label, value: WorkflowStep(
        reasoning=reasoning, action=op, target=TargetDesc(role=role, label=label), value=value
    ),
    _reasoning,
    st.sampled_from(["CLICK", "TYPE", "SELECT", "HOVER", "ENTER"]),
    st.one_of(st.just(""), _role),
    _label,
    _free,
)

_element_target = st.one_of(
    st.just(TargetDesc()),
    st.builds(lambda r, label, row: TargetDesc(role=r, label=label, row=row), _role, _free, st.one_of(st.just(""), _free)),
)
_browser_step = st.one_of(
    st.builds(
        lambda reasoning, name, target, value: WorkflowStep(
            reasoning=reasoning, action=name, target=target, value=value
        ),
        _reasoning,
        st.sampled_from(["fill", "select_option", "press"]),
        _element_target,
        _free,
    ),
    st.builds(
        lambda reasoning, name, target: WorkflowStep(reasoning=reasoning, action=name, target=target),
        _reasoning,
        st.sampled_from(["click", "hover", "clear", "check", "focus"]),
        _element_target,
    ),
    st.builds(
        lambda reasoning, name, value: WorkflowStep(reasoning=reasoning, action=name, value=value),
        _reasoning,
        st.sampled_from(["send_msg_to_user", "goto", "report_infeasible"]),
        _free.filter(bool),
    ),
    st.builds(
        lambda reasoning, dx, dy: WorkflowStep(reasoning=reasoning, action="scroll", value=f"{dx}, {dy}"),
        _reasoning,
        st.integers(-500, 500),
        st.integers(-500, 500),
    ),
    st.builds(lambda reasoning: WorkflowStep(reasoning=reasoning, action="go_back"), _reasoning),
)


def _workflows(step):
    workflow = st.builds(
        lambda name, description, steps: Workflow(name=name, description=description, steps=steps),
        _name,
        _maybe_prose,
        st.lists(step, min_size=1, max_size=4),  # a heading with no action is a section, not a workflow
    )
    return st.lists(workflow, max_size=3).filter(_unique_names).map(_with_derived_parameters)


@settings(max_examples=150, deadline=None)
@given(_workflows(_m2w_step))
def test_mind2web_round_trip_property(workflows):
    text = render_workflows(workflows, "mind2web")
    assert _fields(parse_workflows(text, "mind2web", source="prop")) == _fields(workflows)


@settings(max_examples=150, deadline=None)
@given(_workflows(_browser_step))
def test_webarena_round_trip_property(workflows):
    text = render_workflows(workflows, "webarena")
    assert _fields(parse_workflows(text, "webarena", source="prop")) == _fields(workflows)


def test_placeholders_are_bound_from_a_goal_that_matches_the_template():
    from awm.memory.workflow import Provenance, Workflow, WorkflowStep, bind_parameters, instantiate
    from awm.trajectory import TargetDesc

    workflow = Workflow(
        name="login",
        description='Enter the username "{username}" and the password "{password}" and press login.',
        parameters=["username", "password"],
        steps=[
            WorkflowStep(action="fill", target=TargetDesc(role="textbox", label="Username"), value="{username}"),
            WorkflowStep(action="fill", target=TargetDesc(role="textbox", label="Password"), value="{password}"),
            WorkflowStep(action="click", target=TargetDesc(role="button", label="Login")),
        ],
        provenance=Provenance(mode="rule"),
    )
    goal = 'Enter the username "juan" and the password "J c]"  and press login.'
    values = bind_parameters(workflow, goal)
    assert values == {"username": "juan", "password": "J c]"}
    bound = instantiate(workflow, values)
    assert [s.value for s in bound.steps] == ["juan", "J c]", ""]
    assert bound.parameters == [] and workflow.steps[0].value == "{username}"  # the stored one is untouched
    assert bind_parameters(workflow, "Book a flight to Denver") == {}
    assert instantiate(workflow, {}) is workflow


# A file in the layout AWM's WebArena induction writes (its one-shot prompt and its outputs): a
# "## Concrete Examples" section of "Query:" blocks, a "## Summary Workflows" heading, "Workflow N:"
# blocks of <think>/<action> pairs whose actions name elements by the source page's ids, and the usage
# notes AWM appends to every induced file. The text is ours; the layout is theirs.
AWM_FILE = Path(__file__).parent / "fixtures" / "awm_files" / "shopping_one_shot.txt"


def test_an_awm_file_imports_its_workflows_and_reports_what_it_skipped():
    report = import_workflows(AWM_FILE.read_text(), source=str(AWM_FILE))
    assert [w.name for w in report.workflows] == [
        "Open the order history", "Browse a product category", "Search the store",
    ]  # fmt: skip
    assert report.sections == ["Summary Workflows"]  # the heading is not an empty workflow
    assert report.examples == ["When did I place my latest order?", "Show me the desks in the Office category"]
    assert report.notes == ["click('id') # input string id value for all actions", "select_option('id', 'value') # for dropdown menu"]
    orders, browse, search = report.workflows
    assert [s.target for s in orders.steps] == [
        TargetDesc(role="link", label="My Account"), TargetDesc(role="link", label="My Orders"),
    ]  # fmt: skip
    assert browse.steps[0].target == TargetDesc(role="menuitem", label="{category}")
    assert browse.steps[1].target == TargetDesc(label="the element named in the reasoning")
    assert search.steps[0].target == TargetDesc(label="the field named in the reasoning")
    assert search.steps[1].target == TargetDesc(role="button", label="Search")  # described: kept as written
    assert browse.parameters == ["category"] and search.parameters == ["product"]
    text = render_workflows(report.workflows, "webarena")
    assert not re.search(r"\(\s*'\d+'", text) and "('')" not in text  # no id, no empty target reaches a prompt
    assert [h.describe() for h in report.hints][:1] == ["workflow 'Open the order history', step 1: element id -> [link] My Account"]
    assert len(report.hints) == 5


def test_an_imported_awm_file_exported_again_reimports_to_the_same_workflows():
    first = import_workflows(AWM_FILE.read_text()).workflows
    again = import_workflows(render_workflows(first, "webarena"), "webarena")
    assert _fields(again.workflows) == _fields(first) and again.hints == [] and again.sections == []


WORKFLOWS_DIR = Path(__file__).resolve().parents[1] / "workflows"


@pytest.mark.parametrize("path", sorted(WORKFLOWS_DIR.glob("*/*.txt")), ids=lambda p: p.name)
def test_the_shipped_workflow_files_import_cleanly_and_render_back_as_written(path: Path):
    report = import_workflows(path.read_text(), source=str(path))
    assert report.workflows and not (report.sections or report.examples or report.notes or report.hints)
    assert render_workflows(report.workflows, "webarena") == path.read_text()
