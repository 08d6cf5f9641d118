"""AWM's two workflow text formats: render workflows for prompts and export, parse them back for import.

Why both directions in one module: the prompt text, the exported review files and AWM's published
workflow files are one format family, so render -> parse must be the identity on every field the
format carries (name, description, steps: reasoning, action, target role/label/row, value). Parameters are
not written out; parsing derives them from the ``{placeholders}`` in the steps, in order of first use.
The Mind2Web style has no place for a target's row; it is written in the WebArena style only.

Mind2Web style (one line per field; a blank line right after the header means "no description")::

    ## enter_locations
    Given that you are on a flight search page, this workflow enters the cities.
    I type the departure city first.
    [textbox] From -> TYPE: {departure-city}
    [link] Search flights -> CLICK

WebArena style (steps are reasoning lines followed by one action call, separated by blank lines)::

    ## log_in
    Log in with a user name and password.

    I fill the user name box.
    fill('[textbox] Username', '{username}')

    click('[button] Sign in')

A target's row (`TargetDesc.row`: the text of the table row, list item or card the element sits in)
is the one keyword an element action takes, after its arguments: ``click('[link] edit', row='{author}')``
is the ``edit`` link whose row holds the author's name, where every row has one.

A step that calls another workflow (`awm.memory.composition`) is written as the agent writes the call,
``run_workflow('log in', {'username': '{username}'})``. Actions in WebArena style are literal function calls; they are parsed with `ast` and
`ast.literal_eval` (or `awm.actions.parse_action` where the action set accepts them), never evaluated.
A bare element id (``click('42')``) names an element of the page the workflow was induced on, which
means nothing on another page. It becomes a *hint*: the element the step's reasoning names in quotes
(``clicking on the "My Account" link`` -> ``[link] My Account``), else a description of what to look for
(``the element named in the reasoning``); never the id, which the grammar could accept on another page.

AWM's own files (`import_workflows` reports what was taken and left): a heading that only introduces a
section (``## Summary Workflows``: no action of its own) is not a workflow; a ``## Concrete Examples``
section (``Query:`` blocks of recorded episodes) is skipped and counted; the usage notes AWM appends
(``click('id') # input string id value for all actions``) are skipped.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field

from awm.actions import ACTION_SETS, parse_action
from awm.errors import ActionParseError, WorkflowParseError
from awm.memory.workflow import CALL_ACTION, PLACEHOLDER, Workflow, WorkflowStep
from awm.trajectory import TargetDesc

Style = Literal["mind2web", "webarena"]

MIND2WEB_OPS = ("CLICK", "TYPE", "SELECT", "HOVER", "ENTER")

# From the closed action set: actions whose first argument is an element, and those whose second
# (required) argument is the value.
_BROWSER_SPECS = ACTION_SETS["browser"]
ELEMENT_ACTIONS = frozenset(name for name, spec in _BROWSER_SPECS.items() if spec.id_arg)
VALUE_ACTIONS = frozenset(
    name
    for name, spec in _BROWSER_SPECS.items()
    if spec.id_arg and len(spec.args) > 1 and spec.args[1].required
)
# Actions whose arguments are all numbers (scroll, tab_focus, noop): their value is written unquoted.
NUMERIC_ACTIONS = frozenset(
    name
    for name, spec in _BROWSER_SPECS.items()
    if spec.args and all(arg.type in ("int", "float") for arg in spec.args)
)

# Rendering a workflow in the other benchmark's style maps the actions that both have.
_TO_MIND2WEB = {"click": "CLICK", "fill": "TYPE", "select_option": "SELECT", "hover": "HOVER"}
_TO_BROWSER = {"CLICK": "click", "TYPE": "fill", "SELECT": "select_option", "HOVER": "hover"}

# Placeholders as AWM writes them: {departure-city}, {RepositoryName}, {search_term}.
PARAMETER = PLACEHOLDER  # one definition, in awm.memory.workflow

_ARROW = r"(?:->|−>|→)"
_M2W_ACTION = re.compile(
    r"^\[(?P<role>[^\]]*)\]\s*(?P<label>.*?)\s*" + _ARROW + r"\s*(?P<op>" + "|".join(MIND2WEB_OPS) + r")"
    r"(?::\s?(?P<value>.*))?$",
    re.IGNORECASE,
)
_M2W_ACTION_ATTEMPT = re.compile(r"^\[[^\]]*\].*" + _ARROW)
_CALL_START = re.compile(r"^[a-z_][a-z0-9_]*\s*\(")
_HEADER = re.compile(r"^##\s+(?P<name>.*\S)\s*$")
_SINGLE_HASH_HEADER = re.compile(r"^#\s+(?P<name>.*\S)\s*$")
_EMPTY_HEADER = re.compile(r"^#{1,2}\s*$")
_WORKFLOW_N = re.compile(r"^workflow(?:\s+\d+)?\s*:\s*(?P<name>.*?)\s*$", re.IGNORECASE)
_IGNORED = re.compile(r"^(?:task|query|website)\s*:", re.IGNORECASE)
_ACTION_PREFIX = re.compile(r"^(?:action|answer)\s*:\s*", re.IGNORECASE)
_REASON_PREFIX = re.compile(r"^(?:think|thought|thoughts|reasoning)\s*:\s*", re.IGNORECASE)
_TAG = re.compile(r"</?(?:think|action|thought)>", re.IGNORECASE)
_ELEMENT_ID = re.compile(r"^[A-Za-z]{0,2}\d+$")
# An action-syntax note, not a step: a call on the literal word id/bid followed by a comment.
_USAGE_NOTE = re.compile(r"^[a-z_]+\(\s*['\"](?:id|bid|element_id)['\"].*\)\s*#")
_EXAMPLES_HEADING = re.compile(r"^(?:concrete\s+)?examples?$", re.IGNORECASE)
_QUERY = re.compile(r"^query\s*:", re.IGNORECASE)
# A quoted element name in a step's reasoning, with the role word that may follow it.
_QUOTED_TARGET = re.compile(
    r"[\"“'](?P<label>[^\"”'\n]{1,80})[\"”']\s*(?P<role>link|button|menu item|menu|tab|text ?box|field|search (?:box|bar)"
    r"|box|dropdown|combobox|option|checkbox|radio button|icon|heading|row)?",
    re.IGNORECASE,
)
_ROLE_WORDS = {
    "menu item": "menuitem", "menu": "menuitem", "text box": "textbox", "textbox": "textbox", "field": "textbox",
    "box": "textbox", "search box": "searchbox", "search bar": "searchbox", "dropdown": "combobox",
    "radio button": "radio",
}  # fmt: skip
_HINT_KIND = {"fill": "field", "clear": "field", "select_option": "list", "check": "box", "uncheck": "box"}
_TARGET = re.compile(r"^\[(?P<role>[^\]]*)\]\s*(?P<label>.*)$")
# The one keyword of the language: an element action's row (`TargetDesc.row`), ``row='{author}'``.
ROW_KEYWORD = "row"
_MAX_CONTINUATION_LINES = 8


def _one_line(text: str) -> str:
    """Fields written on one line: newlines become spaces, ends are trimmed."""
    return (
        " ".join(part.strip() for part in text.splitlines() if part.strip())
        if "\n" in text or "\r" in text
        else text.strip()
    )


def _reasoning_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def parameters_of(steps: list[WorkflowStep]) -> list[str]:
    """The placeholders of a workflow's steps, in order of first use, without repeats."""
    seen: dict[str, None] = {}
    for step in steps:
        for name in step.placeholders():  # a call's arguments, not its callee's name
            seen.setdefault(name, None)
    return list(seen)


# --- rendering ------------------------------------------------------------------------------------


def _render_mind2web_action(step: WorkflowStep) -> str:
    target = f"[{_one_line(step.target.role)}] {_one_line(step.target.label)}".rstrip()
    value = _one_line(step.value)
    line = f"{target} -> {_TO_MIND2WEB.get(step.action, step.action.upper())}"
    return f"{line}: {value}" if value else line


def _render_call(step: WorkflowStep) -> str:
    if step.is_call:  # a call of another workflow, written as the agent's action writes it
        return f"{CALL_ACTION}({step.value!r}, {step.params!r})"
    name = _TO_BROWSER.get(step.action, step.action)
    value = step.value
    if name in ELEMENT_ACTIONS:
        role, label = _one_line(step.target.role), _one_line(step.target.label)
        target = f"[{role}] {label}".rstrip() if role else label
        args = [repr(target)]
        if name in VALUE_ACTIONS or value:
            args.append(repr(value))
        row = _one_line(step.target.row)
        if row:
            args.append(f"{ROW_KEYWORD}={row!r}")
        return f"{name}({', '.join(args)})"
    if not value:
        return f"{name}()"
    if name in NUMERIC_ACTIONS and _is_literal_argument_list(value):
        return f"{name}({value})"
    return f"{name}({value!r})"


def _is_literal_argument_list(text: str) -> bool:
    """True for values like ``0, 200`` that were written as numeric arguments (scroll, tab_focus, noop).

    Asked only for actions whose arguments are all numbers: a message such as ``0`` is text
    (``send_msg_to_user('0')``), and unquoted it would not parse back. Only numbers qualify: a value such as ``()`` or ``[1]`` is text and gets quoted.
    """
    try:
        call = ast.parse(f"f({text})", mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    if not isinstance(call, ast.Call) or call.keywords or not call.args:
        return False
    if ", ".join(ast.unparse(arg) for arg in call.args) != text:
        return False
    try:
        values = [ast.literal_eval(arg) for arg in call.args]
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False
    return all(isinstance(value, int | float) and not isinstance(value, bool) for value in values)


def render_workflow(workflow: Workflow, style: Style) -> str:
    """One workflow as AWM text (no trailing newline)."""
    lines = [f"## {_one_line(workflow.name)}"]
    description = _one_line(workflow.description)
    lines.append(description)  # an empty line here means: no description
    for i, step in enumerate(workflow.steps):
        if style == "webarena" and (i > 0 or description):
            lines.append("")
        lines.extend(_reasoning_lines(step.reasoning))
        lines.append(_render_mind2web_action(step) if style == "mind2web" else _render_call(step))
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def render_workflows(workflows: list[Workflow], style: Style) -> str:
    """Workflows as AWM text, separated by blank lines, ending with a newline (empty string for none)."""
    if style not in ("mind2web", "webarena"):
        raise ValueError(f"unknown workflow text style {style!r}; expected 'mind2web' or 'webarena'")
    return "".join(render_workflow(w, style) + "\n\n" for w in workflows).rstrip("\n") + (
        "\n" if workflows else ""
    )


# --- parsing --------------------------------------------------------------------------------------


@dataclass
class _Draft:
    name: str
    line: int
    description: str = ""
    steps: list[WorkflowStep] = field(default_factory=list)
    pending: list[tuple[int, str]] = field(default_factory=list)
    body_started: bool = False


def _strip_decoration(line: str) -> str:
    """Remove think/action tags, code fences and backticks around a line."""
    text = _TAG.sub("", line).strip()
    if text.startswith("```") and text.endswith("```") and len(text) > 6:
        text = text[3:-3].strip()
    elif text.startswith("`") and text.endswith("`") and len(text) > 2 and not text.startswith("```"):
        text = text[1:-1].strip()
    return text


def _action_text(line: str) -> str:
    text = _strip_decoration(line)
    stripped = _ACTION_PREFIX.sub("", text, count=1)
    if stripped != text:
        stripped = _strip_decoration(stripped)
    return stripped


def _literal_call(text: str) -> tuple[str, list[object], list[str], str]:
    """Parse ``name(literal, ..., row='...')`` safely: the name, the values and their source text, and
    the row (`ROW_KEYWORD`, "" when not given). Any other keyword is an error naming it."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not a valid function call ({getattr(exc, 'msg', exc)})") from None
    call = tree.body
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ValueError(
            "expected one call like click('[button] Sign in') or fill('[textbox] Name', 'value')"
        )
    name = call.func.id
    values: list[object] = []
    sources: list[str] = []
    for arg in call.args:
        values.append(_literal(arg))
        sources.append(ast.unparse(arg))
    row = ""
    for keyword in call.keywords:
        if keyword.arg != ROW_KEYWORD:
            given = "**" + ast.unparse(keyword.value) if keyword.arg is None else f"{keyword.arg}="
            raise ValueError(
                f"{name}(): unknown keyword {given}; the only keyword is {ROW_KEYWORD}= (the text of the row the "
                f"element sits in, e.g. click('[link] edit', {ROW_KEYWORD}='{{author}}')); "
                "write the other arguments in order, without names"
            )
        if name not in ELEMENT_ACTIONS:
            raise ValueError(f"{name}() acts on no element, so it takes no {ROW_KEYWORD}= keyword")
        value = _literal(keyword.value)
        if not isinstance(value, str):
            raise ValueError(f"{name}(): {ROW_KEYWORD}= must be a string, got {ast.unparse(keyword.value)}")
        row = value.strip()
    if name != CALL_ACTION:  # a call's name and arguments are checked by `_step_from_call`
        _check_against_action_set(ast.Call(func=call.func, args=call.args, keywords=[]))
    return name, values, sources, row


def _literal(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        raise ValueError(f"argument {ast.unparse(node)!r} is not a literal") from None


def _check_against_action_set(call: ast.Call) -> None:
    """Whitelist, arity and argument types as the agent's parser sees them (`awm.actions.parse_action`).

    A workflow's element is a description (``[button] Sign in``) or empty, which the agent's parser
    would reject as an element id, so a placeholder id stands in for it during the check.
    """
    if call.func.id in ELEMENT_ACTIONS and call.args:
        call = ast.Call(func=call.func, args=[ast.Constant("BID"), *call.args[1:]], keywords=[])
    try:
        parse_action(ast.unparse(call), action_set="browser")
    except ActionParseError as exc:
        raise ValueError(str(exc)) from None


def _step_from_call(text: str) -> WorkflowStep:
    """One step from a call. A bare element id leaves the target empty with `_ID_TARGET` as its role,
    for the parser to replace with a hint from the step's reasoning (`hint_target`)."""
    name, values, sources, row = _literal_call(text)
    if name == CALL_ACTION:
        callee, params = (values + [None, None])[:2]
        if len(values) > 2 or not isinstance(callee, str) or not callee.strip() or not isinstance(params, dict):
            raise ValueError(f"expected {CALL_ACTION}('workflow name', {{'parameter': 'value', ...}})")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in params.items()):
            raise ValueError(f"{CALL_ACTION}(): parameter names and values must be strings")
        return WorkflowStep(action=CALL_ACTION, value=callee, params=params)
    if name in ELEMENT_ACTIONS:
        if not values:
            raise ValueError(f"{name}() needs an element as its first argument")
        element = values[0]
        target = TargetDesc()
        if isinstance(element, str):
            match = _TARGET.match(element.strip())
            if match:
                target = TargetDesc(role=match["role"].strip(), label=match["label"].strip())
            elif _ELEMENT_ID.match(element.strip()):
                target = TargetDesc(role=_ID_TARGET)
            elif element.strip():
                target = TargetDesc(label=element.strip())
        elif isinstance(element, int):
            target = TargetDesc(role=_ID_TARGET)
        else:
            raise ValueError(f"{name}(): the element must be a string, got {sources[0]}")
        value = values[1] if len(values) > 1 else ""
        target = target.model_copy(update={"row": row})
        return WorkflowStep(action=name, target=target, value=value if isinstance(value, str) else sources[1])
    if not values:
        return WorkflowStep(action=name)
    if len(values) == 1 and isinstance(values[0], str):
        return WorkflowStep(action=name, value=values[0])
    return WorkflowStep(action=name, value=", ".join(sources))


def parse_step(text: str) -> WorkflowStep:
    """One step written as a WebArena-style call with a ``[role] label`` target (``fill('[textbox]
    Summary', '{summary}')``, ``click('[link] edit', row='{author}')``): what task files' demonstrations
    are made of. A bare element id is refused (it names an element of one page only). Raises ValueError
    saying what is wrong."""
    step = _step_from_call(_action_text(text))
    if step.target.role == _ID_TARGET:
        raise ValueError(f"{text.strip()!r} names an element id; write its target as '[role] label'")
    return step


_ID_TARGET = "\x00id"  # marks a target that was a bare element id, until the parser gives it a hint


def hint_target(action: str, reasoning: str) -> TargetDesc:
    """What a step that named a bare element id acted on, read from its reasoning: the last quoted name
    followed by a role word (``"My Orders" link``), else for a click or hover the last quoted name, else
    a description of what to look for. Never the id: on another page it could name another element."""
    matches = list(_QUOTED_TARGET.finditer(reasoning))
    with_role = [m for m in matches if m["role"]]
    if with_role:
        last = with_role[-1]
        word = last["role"].lower()
        return TargetDesc(role=_ROLE_WORDS.get(word, word.replace(" ", "")), label=last["label"].strip())
    if matches and action not in _HINT_KIND:
        return TargetDesc(label=matches[-1]["label"].strip())
    return TargetDesc(label=f"the {_HINT_KIND.get(action, 'element')} named in the reasoning")


def _step_from_mind2web(match: re.Match[str]) -> WorkflowStep:
    return WorkflowStep(
        action=match["op"].upper(),
        target=TargetDesc(role=match["role"].strip(), label=match["label"].strip()),
        value=(match["value"] or "").strip(),
    )


def _header_name(line: str, style: Style) -> str | None:
    match = _HEADER.match(line) or _WORKFLOW_N.match(line)
    if match is None and style == "mind2web":
        match = _SINGLE_HASH_HEADER.match(line)
    return None if match is None else match["name"]


def detect_style(text: str) -> Style:
    """Mind2Web when any line is a ``[role] label -> OP`` action, else WebArena when any is a call."""
    has_call = False
    for raw in text.splitlines():
        line = _action_text(raw)
        if _M2W_ACTION.match(line):
            return "mind2web"
        if _CALL_START.match(line):
            has_call = True
    return "webarena" if has_call else "mind2web"


class IdHint(BaseModel):
    """A step whose action named a bare element id of the source page, and the hint that replaced it."""

    workflow: str
    step: int  # 1-based
    target: TargetDesc

    def describe(self) -> str:
        return f"workflow {self.workflow!r}, step {self.step}: element id -> {self.target.render()}"


class ImportReport(BaseModel):
    """What an import took from a file and what it left, with why (printed by `awm memory import`)."""

    workflows: list[Workflow] = Field(default_factory=list)
    sections: list[str] = Field(default_factory=list)  # headings that only introduce a section
    examples: list[str] = Field(default_factory=list)  # the queries of skipped concrete examples
    notes: list[str] = Field(default_factory=list)  # skipped usage notes (action syntax)
    hints: list[IdHint] = Field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"imported {len(self.workflows)} workflow(s): {', '.join(w.name for w in self.workflows) or '-'}"]
        if self.sections:
            out.append(f"skipped {len(self.sections)} section heading(s) with no action of their own: {', '.join(self.sections)}")
        if self.examples:
            out.append(f"skipped {len(self.examples)} concrete example(s) (recorded episodes, not workflows)")
        if self.notes:
            out.append(f"skipped {len(self.notes)} usage note(s): {'; '.join(self.notes)}")
        if self.hints:
            out.append(f"{len(self.hints)} element id(s) of the source page kept as hints from the reasoning:")
            out += [f"  {hint.describe()}" for hint in self.hints]
        return out


def parse_workflows(
    text: str, style: Literal["auto", "mind2web", "webarena"] = "auto", *, source: str = "<text>"
) -> list[Workflow]:
    """The workflows of AWM text (see `import_workflows`, which also says what it skipped)."""
    return import_workflows(text, style, source=source).workflows


def import_workflows(
    text: str, style: Literal["auto", "mind2web", "webarena"] = "auto", *, source: str = "<text>"
) -> ImportReport:
    """Parse AWM workflow text; raise `WorkflowParseError` naming source, line and reason.

    Accepted beyond what `render_workflows` writes: ``# name`` (Mind2Web) and ``Workflow N: name``
    headers, ``Task:``/``Query:``/``Website:`` lines (ignored), ``think:``/``Thought:``/``Reasoning:``
    prefixes, ``Action:`` prefixes, ``<think>`` tags, code fences, ``# comment`` lines (WebArena) and
    action calls that continue over several lines.
    """
    if style == "auto":
        style = detect_style(text)
    if style not in ("mind2web", "webarena"):
        raise WorkflowParseError(f"{source}: unknown style {style!r}; expected auto, mind2web or webarena")
    lines = text.splitlines()

    def fail(lineno: int, reason: str) -> WorkflowParseError:
        return WorkflowParseError(f"{source}, line {lineno}: {reason}")

    drafts: list[_Draft] = []
    names: dict[str, int] = {}
    current: _Draft | None = None
    just_opened = False
    in_think = False
    in_examples = False
    report = ImportReport()
    i = 0
    while i < len(lines):
        lineno = i + 1
        raw = lines[i]
        i += 1
        stripped = raw.strip()
        if _EMPTY_HEADER.match(stripped):
            raise fail(lineno, "workflow header has no name")
        name = _header_name(stripped, style)
        is_header = name is not None and not (style == "webarena" and stripped.startswith("# "))
        if in_examples and not is_header:
            if _QUERY.match(stripped):
                report.examples.append(stripped.split(":", 1)[1].strip())
            continue  # a recorded example's text and actions: not a workflow's
        if is_header and name is not None and _EXAMPLES_HEADING.match(name):
            if current is not None:
                _close(current, fail)
                current = None
            in_examples = True
            continue
        in_examples = False
        if is_header and name is not None:
            if not name:
                raise fail(lineno, "workflow header has no name")
            if name in names:
                raise fail(
                    lineno, f"workflow name {name!r} is already used at line {names[name]}; rename one"
                )
            if current is not None:
                _close(current, fail)
            names[name] = lineno
            current = _Draft(name=name, line=lineno)
            drafts.append(current)
            just_opened = True
            continue
        opened, just_opened = just_opened, False
        if not stripped or stripped.startswith("```") and not stripped.endswith(")```"):
            if opened and not stripped and current is not None:
                current.body_started = True  # a blank line right after the header: no description
            continue
        if _IGNORED.match(stripped) or (style == "webarena" and stripped.startswith("#")):
            continue
        if current is None:
            raise fail(
                lineno, "expected a workflow header ('## name' or 'Workflow N: name') before any other text"
            )
        action = _action_text(stripped)
        step: WorkflowStep | None = None
        if style == "mind2web":
            match = _M2W_ACTION.match(action)
            if match:
                step = _step_from_mind2web(match)
            elif _M2W_ACTION_ATTEMPT.match(action):
                raise fail(
                    lineno,
                    f"action line {action!r} is not '[role] label -> OP' or '-> OP: value' "
                    f"with OP one of {', '.join(MIND2WEB_OPS)}",
                )
        elif _USAGE_NOTE.match(action):
            report.notes.append(action)
            continue
        elif _CALL_START.match(action):
            step, i = _parse_call_lines(lines, i, action, fail, lineno)
        if step is not None:
            reasoning = "\n".join(text for _, text in current.pending)
            update: dict[str, object] = {"reasoning": reasoning}
            if step.target.role == _ID_TARGET:
                hint = hint_target(step.action, reasoning).model_copy(update={"row": step.target.row})
                update["target"] = hint
                report.hints.append(IdHint(workflow=current.name, step=len(current.steps) + 1, target=hint))
            current.steps.append(step.model_copy(update=update))
            current.pending.clear()
            current.body_started = True
            continue
        opens_think = "<think>" in stripped.lower()
        marked = in_think or opens_think or bool(_REASON_PREFIX.match(_strip_decoration(stripped)))
        in_think = (in_think or opens_think) and "</think>" not in stripped.lower()
        reason = _REASON_PREFIX.sub("", _strip_decoration(stripped), count=1).strip()
        if not reason:
            continue
        if not marked and not current.body_started and not current.description:
            current.description = reason
            current.body_started = True
        else:
            current.pending.append((lineno, reason))
    if current is not None:
        _close(current, fail)
    report.sections = [d.name for d in drafts if not d.steps]
    report.workflows = [
        Workflow(name=d.name, description=d.description, parameters=parameters_of(d.steps), steps=d.steps)
        for d in drafts
        if d.steps
    ]
    return report


def _parse_call_lines(lines: list[str], i: int, first: str, fail, lineno: int) -> tuple[WorkflowStep, int]:
    """Parse an action call that starts on `first`, joining continuation lines when it is cut."""
    text = first
    try:
        return _step_from_call(text), i
    except ValueError as exc:
        error = exc
    j = i
    while j < len(lines) and j - i < _MAX_CONTINUATION_LINES:
        text = text + " " + _action_text(lines[j])
        j += 1
        try:
            return _step_from_call(text), j
        except ValueError:
            continue
    raise fail(lineno, f"cannot parse action {first!r}: {error}")


def _close(draft: _Draft, fail) -> None:
    if draft.pending:
        lineno, text = draft.pending[0]
        raise fail(lineno, f"text {text[:60]!r} in workflow {draft.name!r} is not followed by an action line")
