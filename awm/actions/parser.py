"""The safe parser: model text to exactly one whitelisted, typed `Action` (browser and Mind2Web sets).

Why our own parser: model text never reaches BrowserGym. It is parsed into a typed `Action` by walking the
AST of exactly one candidate call (`awm.actions.calls`: literals only, never eval/exec), checked against
the page's ids, the element's role and the episode's workflows (`awm.actions.binding`), and the string
BrowserGym executes is rendered from that typed value (`awm.actions.render`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Mapping

from awm.actions.binding import check_on_page, check_role
from awm.actions.calls import call_text, candidate_calls, line_bounds, parse_call, shorten
from awm.actions.render import render_example
from awm.actions.table import (
    ACTION_SETS,
    ID_PLACEHOLDER,
    RUN_WORKFLOW,
    Action,
    ActionSetName,
    ActionSpec,
    ArgValue,
    ParsedOutput,
    WorkflowCatalog,
    specs_of,
)
from awm.errors import ActionParseError

# --------------------------------------------------------------------------------------------------
# Parsing: browser set
# --------------------------------------------------------------------------------------------------

_LABEL_TAIL_RE = re.compile(
    r"(?:^[ \t]*```[\w+-]*|`|(?:next\s+)?(?:action|answer)\s*:)\s*\Z", re.IGNORECASE | re.MULTILINE
)
_LABEL_HEAD_RE = re.compile(r"^(?:thought|reasoning)\s*:\s*", re.IGNORECASE)


def _clean_thought(prefix: str) -> str:
    thought = prefix.strip()
    while (stripped := _LABEL_TAIL_RE.sub("", thought).rstrip()) != thought:
        thought = stripped
    return _LABEL_HEAD_RE.sub("", thought).strip()


def _no_action_message(action_set: str) -> str:
    specs = specs_of(action_set)
    spec = next(iter(specs.values()))
    return (
        f"no action found; reply with exactly one action, e.g. {render_example(spec, action_set)}; "
        f"allowed actions: {', '.join(specs)}"
    )


# What a call's parameter holds when the model copied the prompt's pattern instead of a value (measured on
# the arena: `run_workflow(..., {'link': '...'})` three times in one episode, each grounding '...').
_NO_VALUE = frozenset({"", "...", "…", "value", "'...'"})


def _check_workflow_call(args: dict[str, ArgValue], workflows: WorkflowCatalog) -> None:
    """Hold a `run_workflow` call to the episode's workflows: a known name, exactly its open parameters."""
    name = str(args["name"])
    if name not in workflows:
        known = list(workflows)
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ActionParseError(
            "unknown_workflow",
            f"there is no workflow {name!r}{hint}; workflows: {', '.join(repr(k) for k in known)}",
        )
    params = args["params"]
    assert isinstance(params, dict)
    wanted = list(workflows[name])
    unknown = [k for k in params if k not in wanted]
    if unknown:
        takes = ", ".join(repr(w) for w in wanted) if wanted else "no parameters (the goal gives them all)"
        raise ActionParseError(
            "bad_argument", f"workflow {name!r} has no parameter {unknown[0]!r}; it takes {takes}"
        )
    missing = [w for w in wanted if w not in params]
    if missing:
        shown = ", ".join(f"{w!r}: 'value'" for w in wanted)
        raise ActionParseError(
            "wrong_arity",
            f"workflow {name!r} needs parameter(s) {', '.join(repr(m) for m in missing)}: "
            f"run_workflow({name!r}, {{{shown}}})",
        )
    blank = [k for k, v in params.items() if str(v).strip() in _NO_VALUE]
    if blank:
        raise ActionParseError(
            "bad_argument",
            f"workflow {name!r}: {blank[0]!r} is {params[blank[0]]!r}, which is no value; give the text the "
            f"goal names for it (e.g. a quoted name), or act on the page yourself",
        )


def _parse_browser(
    text: str,
    page_ids: Collection[str] | None,
    ids_for: Mapping[str, Collection[str]] | None = None,
    describe: Mapping[str, str] | None = None,
    workflows: WorkflowCatalog | None = None,
) -> ParsedOutput:
    specs = dict(ACTION_SETS["browser"])
    if workflows:
        specs[RUN_WORKFLOW.name] = RUN_WORKFLOW
    calls = candidate_calls(text)
    actions = [c for c in calls if c.name in specs]
    if len(actions) > 1:
        shown = ", ".join(f"`{shorten(call_text(text, c), 40)}`" for c in actions[:4])
        raise ActionParseError(
            "multiple_actions",
            f"found {len(actions)} actions ({shown}); reply with exactly one action",
        )
    if not actions:
        if not calls:
            raise ActionParseError("no_action", _no_action_message("browser"))
        call = calls[0]
        owner = re.search(r"[\w.]*$", text[: call.start]).group(0) if call.attribute else ""  # type: ignore[union-attr]
        name = owner + call.name
        close = difflib.get_close_matches(name.lower(), list(specs), n=1, cutoff=0.75)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ActionParseError(
            "unknown_action", f"'{name}' is not an allowed action{hint}; allowed actions: {', '.join(specs)}"
        )
    call = actions[0]
    spec = specs[call.name]
    args = parse_call(text, call, spec)
    if spec is RUN_WORKFLOW:
        _check_workflow_call(args, workflows or {})
    check_on_page(spec, args, page_ids)
    check_role(spec, args, ids_for, describe, "browser")
    return ParsedOutput(thought=_clean_thought(text[: call.start]), action=Action(name=spec.name, args=args))


# --------------------------------------------------------------------------------------------------
# Parsing: mind2web set
# --------------------------------------------------------------------------------------------------

_M2W_OP_RE = re.compile(r"(?<![A-Za-z0-9_])(click|type|select)[ \t]*\[", re.IGNORECASE)
_M2W_UNKNOWN_RE = re.compile(r"(?<![A-Za-z0-9_])([A-Z]{3,})[ \t]*\[[^\]\n]*\]")


def _m2w_action_at(text: str, m: re.Match[str]) -> tuple[dict[str, ArgValue], ActionSpec, int]:
    """Parse one Mind2Web action starting at an op match; returns args, spec and the end offset."""
    spec = ACTION_SETS["mind2web"][m.group(1).upper()]
    _, line_end = line_bounds(text, m.start())
    close = text.find("]", m.end(), line_end)
    if close < 0:
        raise ActionParseError(
            "syntax", f"`{shorten(text[m.start() : line_end], 60)}`: the id must be closed with ']'"
        )
    ident = text[m.end() : close].strip()
    if not ident or any(c.isspace() or c == "[" for c in ident):
        raise ActionParseError(
            "bad_argument",
            f"{spec.name} needs an element id in brackets like [{ID_PLACEHOLDER}]; got [{ident}]",
        )
    end = close + 1
    rest = text[end:line_end]
    has_value = rest.lstrip(" \t").startswith("[")
    if spec.name == "CLICK":
        if has_value:
            raise ActionParseError(
                "wrong_arity", f"CLICK takes 1 argument [id]; got 2. Write: CLICK [{ident}]"
            )
        return {"id": ident}, spec, end
    if not has_value:
        raise ActionParseError(
            "wrong_arity",
            f"{spec.name} takes 2 arguments [id] [value]; got 1. Write: {spec.name} [{ident}] [value]",
        )
    value_start = end + rest.index("[") + 1
    value_end = text.rfind("]", value_start, line_end)
    if value_end < 0:
        raise ActionParseError(
            "syntax", f"{spec.name} [{ident}]: the value must be closed with ']' on the same line"
        )
    return {"id": ident, "value": text[value_start:value_end]}, spec, value_end + 1


def _parse_mind2web(
    text: str,
    page_ids: Collection[str] | None,
    ids_for: Mapping[str, Collection[str]] | None = None,
    describe: Mapping[str, str] | None = None,
) -> ParsedOutput:
    m = _M2W_OP_RE.search(text)
    if m is None:
        unknown = _M2W_UNKNOWN_RE.search(text)
        allowed = "CLICK [id], TYPE [id] [value], SELECT [id] [value]"
        if unknown:
            raise ActionParseError(
                "unknown_action", f"'{unknown.group(1)}' is not an allowed action; allowed actions: {allowed}"
            )
        raise ActionParseError("no_action", f"no action found; reply with exactly one action: {allowed}")
    args, spec, end = _m2w_action_at(text, m)
    others = list(_M2W_OP_RE.finditer(text, end))
    if others:
        found = [shorten(text[m.start() : end], 40)]
        found += [shorten(text[o.start() : line_bounds(text, o.start())[1]], 40) for o in others[:3]]
        shown = ", ".join(f"`{f}`" for f in found)
        raise ActionParseError(
            "multiple_actions", f"found {1 + len(others)} actions ({shown}); reply with exactly one action"
        )
    check_on_page(spec, args, page_ids)
    check_role(spec, args, ids_for, describe, "mind2web")
    return ParsedOutput(thought=_clean_thought(text[: m.start()]), action=Action(name=spec.name, args=args))


def parse_action(
    text: str,
    *,
    action_set: ActionSetName = "browser",
    page_ids: Collection[str] | None = None,
    ids_for: Mapping[str, Collection[str]] | None = None,
    describe: Mapping[str, str] | None = None,
    workflows: WorkflowCatalog | None = None,
) -> ParsedOutput:
    """Parse model text into exactly one whitelisted action with literal arguments.

    Tolerates prose around the action, "Action:" labels, ``` fences and a trailing comment. Never evaluates
    anything: the candidate call is read with `ast.parse` and only literal nodes are accepted. With
    `page_ids`, the element id must be one of them. With `ids_for` (action name -> the ids it may act on,
    e.g. from `ids_for_roles`), an action listed there must target one of its own ids: `fill` on a button
    is refused (kind ``bad_argument``) with a message that says what the element is (from `describe`,
    id -> "button 'Submit'") and what to do instead. With `workflows` (browser set), `run_workflow(name,
    {param: value})` is allowed too, for those names and exactly their open parameters. Raises
    `ActionParseError(kind, message)`, whose message is written to be shown to the model as is.
    """
    specs_of(action_set)
    if action_set == "mind2web":
        return _parse_mind2web(text, page_ids, ids_for, describe)
    return _parse_browser(text, page_ids, ids_for, describe, workflows)
