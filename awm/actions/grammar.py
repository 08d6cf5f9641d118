"""GBNF grammars for llama.cpp's constrained decoding, generated from the action table.

Why from the table: the prompt's description, the parser's whitelist and the grammar must never disagree,
so all three come from the same `ActionSpec`s (`awm.actions.table`). Two shapes: `action_grammar` (an
optional thought line, then one action; both sets) and `target_first_grammar` (the element's line, then an
action it takes; browser set). Element ids are literals of the page, held to each action's roles when
`ids_for` is given (`awm.actions.roles`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

from awm.actions.table import RUN_WORKFLOW, ActionSetName, ActionSpec, WorkflowCatalog, selected_specs
from awm.errors import ConfigError


def _gbnf_literal(text: str) -> str:
    escaped = (
        text.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
        .replace("\x00", "\\x00")
    )
    return f'"{escaped}"'


def _rule_name(name: str) -> str:
    return name.lower().replace("_", "-")  # GBNF rule names allow letters, digits and '-'


_BROWSER_VALUE_RULES = {
    "string": "sq-string | dq-string",
    "sq-string": '"\'" ([^\'\\\\\\n\\r\\x00] | escape)* "\'"',
    "dq-string": '"\\"" ([^"\\\\\\n\\r\\x00] | escape)* "\\""',
    "escape": '"\\\\" (["\'\\\\nrt] | "x" hex hex | "u" (hex-no-d hex hex hex | [dD] [0-7] hex hex))',
    "hex-no-d": "[0-9a-cA-Ce-fE-F]",
    "hex": "[0-9a-fA-F]",
    "string-list": '"[" (string (", " string)*)? "]"',
    "int": '"-"? ("0" | [1-9] [0-9]{0,3})',  # Python refuses leading zeros
    "number": '"-"? ("0" | [1-9] [0-9]{0,5}) ("." [0-9]{1,4})?',
}
_TYPE_RULE = {"str": "string", "int": "int", "float": "number", "str_or_list": "(string | string-list)"}


def _browser_action_rule(spec: ActionSpec, id_rule: str = "bid") -> str:
    pieces: list[str] = [_gbnf_literal(f"{spec.name}(")]
    first = True
    for arg in spec.args:
        if arg.type == "id":
            value = id_rule
        else:
            value = _TYPE_RULE[arg.type]
        if arg.required:
            pieces.append(value if first else f'", " {value}')
        else:
            sep = "" if first else ", "
            pieces.append(f"({_gbnf_literal(f'{sep}{arg.name}=')} {value})?")
        first = False
    pieces.append('")"')
    return " ".join(pieces)


def _mind2web_action_rule(spec: ActionSpec, id_rule: str = "id") -> str:
    rule = f'{_gbnf_literal(spec.name + " [")} {id_rule} "]"'
    if len(spec.args) > 1:
        rule += ' " [" value "]"'
    return rule


def _workflow_rules(workflows: WorkflowCatalog) -> dict[str, str]:
    """``run-workflow ::= "run_workflow(" (wf-1 | wf-2 ...) ")"``: each name, then its keys in order."""
    rules: dict[str, str] = {}
    choices = []
    for n, (name, params) in enumerate(workflows.items(), start=1):
        keys = ' ", " '.join(f"{_gbnf_literal(repr(p) + ': ')} string" for p in params)
        body = (
            f'{_gbnf_literal(repr(name) + ", {")} {keys} "}}"'
            if params
            else _gbnf_literal(repr(name) + ", {}")
        )
        rules[f"wf-{n}"] = body
        choices.append(f"wf-{n}")
    rules["run-workflow"] = f'"run_workflow(" ({" | ".join(choices)}) ")"'
    return rules


def _grammar_ids(action_set: str, ids: Collection[str]) -> list[str]:
    """Ids a grammar can hold as literals: no whitespace (and no brackets in Mind2Web's format)."""
    out = list(dict.fromkeys(str(i) for i in ids))
    if action_set == "mind2web":
        return [i for i in out if i and not any(c.isspace() or c in "[]" for c in i)]
    return [i for i in out if i and not any(c.isspace() for c in i)]


def action_grammar(
    action_set: ActionSetName = "browser",
    page_ids: Collection[str] = (),
    names: Collection[str] | None = None,
    with_thought: bool = True,
    *,
    max_thought_chars: int = 300,
    ids_for: Mapping[str, Collection[str]] | None = None,
    workflows: WorkflowCatalog | None = None,
) -> str:
    """GBNF for llama.cpp: an optional one-line thought, a newline, then exactly one action.

    Every element-id argument is one of `page_ids`; with `ids_for` (action name -> its own ids, e.g. from
    `ids_for_roles`), an action listed there takes only its own ids (those also in `page_ids` when
    `page_ids` is given), so `fill` cannot name a button. An action with no id to take is left out.
    With `workflows` (browser set), `run_workflow` is one more action: one of those names and exactly
    its parameter keys, in order, each with a string value.
    Strings are quoted literals with only the escapes Python and BrowserGym both read. The thought line
    cannot hold '(' (browser) or '[' (mind2web), so it cannot contain a second action.
    """
    specs = selected_specs(action_set, names)
    ids = _grammar_ids(action_set, page_ids)
    id_sets = _ids_per_action(action_set, specs, ids, ids_for)
    usable = _usable_actions(action_set, specs, id_sets, workflows)
    id_rule_of, id_rules = _id_rules(action_set, usable, ids, id_sets)
    return _emit(
        {
            **_answer_rules(action_set, usable, with_thought, max_thought_chars),
            **_action_rules(action_set, usable, id_rule_of, workflows),
            **id_rules,
            **_value_rules(action_set),
        }
    )


def _base_id_rule(action_set: str) -> str:
    """The rule holding every id of the page."""
    return "id" if action_set == "mind2web" else "bid"


def _ids_per_action(
    action_set: str,
    specs: Sequence[ActionSpec],
    ids: list[str],
    ids_for: Mapping[str, Collection[str]] | None,
) -> dict[str, list[str]]:
    """Per action that names an element, the ids it may name: its own from `ids_for` (kept to the page's
    when the page's are given), else all the page's."""
    on_page = set(ids)
    id_sets: dict[str, list[str]] = {}
    for spec in specs:
        if spec.id_arg is None:
            continue
        if ids_for is not None and spec.name in ids_for:
            own = _grammar_ids(action_set, ids_for[spec.name])
            id_sets[spec.name] = [i for i in own if i in on_page] if on_page else own
        else:
            id_sets[spec.name] = ids
    return id_sets


def _usable_actions(
    action_set: str,
    specs: Sequence[ActionSpec],
    id_sets: Mapping[str, list[str]],
    workflows: WorkflowCatalog | None,
) -> list[ActionSpec]:
    """The actions the grammar offers: those with an id to name (or none to need), plus `run_workflow` when
    workflows are given (browser set). None at all is a `ConfigError`: a grammar must allow some answer."""
    usable = [s for s in specs if s.id_arg is None or id_sets[s.name]]
    if workflows and action_set == "browser":
        usable.append(RUN_WORKFLOW)
    if not usable:
        raise ConfigError(
            f"no {action_set} action is possible: the selected actions all need an element id, and no ids were given"
        )
    return usable


def _id_rules(
    action_set: str, usable: Sequence[ActionSpec], ids: list[str], id_sets: Mapping[str, list[str]]
) -> tuple[dict[str, str], dict[str, str]]:
    """One rule per distinct id set: (action name -> the rule its id argument uses, rule name -> body).

    Actions that may name the same ids share a rule; the page's whole list is the base rule (`bid`, or
    `id` for Mind2Web), and an action with its own list gets `bid-<action>`.
    """
    base_rule = _base_id_rule(action_set)
    rule_of_set: dict[tuple[str, ...], str] = {tuple(ids): base_rule} if ids else {}
    rule_of_action: dict[str, str] = {}
    bodies: dict[str, str] = {}
    for spec in usable:
        if spec.id_arg is None:
            continue
        key = tuple(id_sets[spec.name])
        if key not in rule_of_set:
            rule_of_set[key] = f"{base_rule}-{_rule_name(spec.name)}"
        rule_of_action[spec.name] = rule_of_set[key]
        bodies.setdefault(rule_of_set[key], " | ".join(_id_literal(action_set, i) for i in key))
    return rule_of_action, bodies


def _id_literal(action_set: str, element_id: str) -> str:
    """An id as the answer writes it: quoted as in a Python call (browser), bare in brackets (mind2web)."""
    return _gbnf_literal(element_id) if action_set == "mind2web" else _gbnf_literal(repr(element_id))


def _answer_rules(
    action_set: str, usable: Sequence[ActionSpec], with_thought: bool, max_thought_chars: int
) -> dict[str, str]:
    """`root` (an optional thought line, then the action), `thought`, and `action` (one of the usable ones).

    The thought line cannot hold '(' (browser) or '[' (mind2web), so it cannot contain a second action."""
    rules = {"root": '(thought "\\n")? action' if with_thought else "action"}
    if with_thought:
        thought_char = "[^\\n(]" if action_set == "browser" else "[^\\n\\[]"
        rules["thought"] = f"{thought_char}{{1,{max_thought_chars}}}"
    rules["action"] = " | ".join(_rule_name(s.name) for s in usable)
    return rules


def _action_rules(
    action_set: str,
    usable: Sequence[ActionSpec],
    id_rule_of: Mapping[str, str],
    workflows: WorkflowCatalog | None,
) -> dict[str, str]:
    """One rule per usable action, its id argument held to its id rule (`run_workflow`: its workflows)."""
    base_rule = _base_id_rule(action_set)
    rules: dict[str, str] = {}
    for spec in usable:
        id_rule = id_rule_of.get(spec.name, base_rule)
        if spec is RUN_WORKFLOW:
            rules.update(_workflow_rules(workflows or {}))
        elif action_set == "mind2web":
            rules[_rule_name(spec.name)] = _mind2web_action_rule(spec, id_rule)
        else:
            rules[_rule_name(spec.name)] = _browser_action_rule(spec, id_rule)
    return rules


def _value_rules(action_set: str) -> dict[str, str]:
    """The rules for argument values: Mind2Web's bracketed one-line text, or the browser set's literals."""
    if action_set == "mind2web":
        return {"value": "[^\\n\\r\\]]*"}
    return dict(_BROWSER_VALUE_RULES)


def _emit(rules: dict[str, str]) -> str:
    """The grammar text: every rule reachable from `root`, in the order given."""
    reachable = _reachable(rules)
    return "\n".join(f"{name} ::= {body}" for name, body in rules.items() if name in reachable) + "\n"


TARGET_LEAD = "On: "
PAGE_TARGET = "page"


def target_line(bid: str, description: str) -> str:
    """The first line of a target-first answer: ``On: button 'Submit' [12]`` (parentheses dropped, so the
    line can never read as a call to the parser)."""
    shown = " ".join(description.replace("(", "").replace(")", "").split()) or "element"
    return f"{TARGET_LEAD}{shown} [{bid}]"


def target_first_grammar(
    targets: Mapping[str, str],
    names: Collection[str] | None = None,
    *,
    ids_for: Mapping[str, Collection[str]] | None = None,
    workflows: WorkflowCatalog | None = None,
) -> str:
    """GBNF (browser set) for an answer that names the element first and then the action that fits it:

        On: textbox 'To:' [21]
        fill('21', 'SHG')

    `targets` maps each element id on the page to its description (``role 'label'``), in page order. The
    first line is one of the page's elements as the page describes it (or ``On: page`` for an action that
    takes none: scroll, a workflow call); the second is an action that element takes (`ids_for`: the
    role rules and what is spent, as in `action_grammar`) with the id already fixed.

    Why: measured on the development split, the 1.5B model picked ids badly (the first link instead of
    the one named in the goal, the selected tab for another) and, when the action it wanted was not
    allowed for its id, constrained decoding produced noise (dblclick on a filled field). Choosing among
    the page's own lines by their text is what a small model does well (it copies), and once the element
    is chosen only its own actions are left, so no choice leaves it only nonsense.

    Measured, it does worse as it stands (`AgentSettings.target_first`, off by default): the model names
    the element of its last step again, copying its own history, and goes through that element's
    actions instead of moving on.
    """
    specs = selected_specs("browser", names)
    element_specs = [s for s in specs if s.id_arg is not None]
    plain_specs = [s for s in specs if s.id_arg is None]
    rules: dict[str, str] = {}
    choices: list[str] = []
    for n, (bid, description) in enumerate(targets.items(), start=1):
        if not _grammar_ids("browser", [bid]):
            continue
        fitting = [
            s for s in element_specs if ids_for is None or s.name not in ids_for or bid in ids_for[s.name]
        ]
        if not fitting:
            continue
        rules[f"id-{n}"] = _gbnf_literal(repr(bid))
        for spec in fitting:
            rules[f"{_rule_name(spec.name)}-{n}"] = _browser_action_rule(spec, f"id-{n}")
        actions = " | ".join(f"{_rule_name(s.name)}-{n}" for s in fitting)
        rules[f"on-{n}"] = f"{_gbnf_literal(target_line(bid, description) + chr(10))} ({actions})"
        choices.append(f"on-{n}")
    plain = [_rule_name(s.name) for s in plain_specs]
    for spec in plain_specs:
        rules[_rule_name(spec.name)] = _browser_action_rule(spec)
    if workflows:
        rules.update(_workflow_rules(workflows))
        plain.append("run-workflow")
    if plain:
        rules["on-page"] = f"{_gbnf_literal(TARGET_LEAD + PAGE_TARGET + chr(10))} ({' | '.join(plain)})"
        choices.append("on-page")
    if not choices:
        raise ConfigError(
            "no browser action is possible: no element takes any offered action, and none is plain"
        )
    return _emit({"root": " | ".join(choices), **rules, **_BROWSER_VALUE_RULES})


_GBNF_REF_RE = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|([a-zA-Z0-9-]+)')


def _references(body: str) -> set[str]:
    """Rule names used in a GBNF rule body (skipping literals, character classes and repetition counts)."""
    refs = set()
    for m in _GBNF_REF_RE.finditer(body):
        name = m.group(1)
        if name and not name.isdigit():
            refs.add(name)
    return refs


def _reachable(rules: dict[str, str]) -> set[str]:
    seen, todo = set(), ["root"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_references(rules[name]) - seen)
    return seen
