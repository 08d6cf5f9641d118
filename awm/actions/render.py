"""Rendering: a typed `Action` to the exact string BrowserGym executes (or AWM's Mind2Web answer text), and
the action set to the prompt's text.

Why we render: model text never reaches BrowserGym. The parser (`awm.actions.parser`) turns it into a typed
`Action`, and the string BrowserGym executes is rendered here from that typed value.
"""

from __future__ import annotations

from collections.abc import Collection

from awm.actions.binding import bind_args
from awm.actions.table import RUN_WORKFLOW, Action, ActionSetName, ActionSpec, selected_specs, specs_of
from awm.errors import ActionParseError


def render_action(action: Action, action_set: ActionSetName = "browser") -> str:
    """The exact string BrowserGym's HighLevelActionSet executes (browser) or AWM's answer text (mind2web).

    Strings use Python's repr, so render -> parse is the identity for any string; optional arguments equal
    to their default are left out, and the rest are passed by keyword, as BrowserGym's examples do.
    """
    specs = specs_of(action_set)
    spec = (
        RUN_WORKFLOW
        if action.name == RUN_WORKFLOW.name and action_set == "browser"
        else specs.get(action.name)
    )
    if spec is None:
        raise ActionParseError("unknown_action", f"'{action.name}' is not an action of the {action_set} set")
    args = bind_args(spec, [], list(action.args.items()))
    if spec is RUN_WORKFLOW:  # both arguments positional, the dict always shown: what the prompt teaches
        return f"run_workflow({args['name']!r}, {args['params']!r})"
    if action_set == "mind2web":
        text = f"{spec.name} [{args['id']}]"
        if "value" in args:
            value = str(args["value"])
            if "\n" in value or "\r" in value:
                raise ActionParseError(
                    "bad_argument", f"argument 'value' of {spec.name} must be one line; got {value!r}"
                )
            text += f" [{value}]"
        return text
    parts: list[str] = []
    for arg in spec.args:
        value = args[arg.name]
        if arg.required:
            parts.append(repr(value))
        elif not (value == arg.default and type(value) is type(arg.default)):
            parts.append(f"{arg.name}={value!r}")
    return f"{spec.name}({', '.join(parts)})"


# --------------------------------------------------------------------------------------------------
# Prompt text
# --------------------------------------------------------------------------------------------------


def render_example(spec: ActionSpec, action_set: str) -> str:
    """The action's example call as the model should write it (placeholder ids, never a real page's)."""
    return render_action(Action(name=spec.name, args=spec.example), action_set)  # type: ignore[arg-type]


def describe_actions(action_set: ActionSetName = "browser", names: Collection[str] | None = None) -> str:
    """Compact prompt text: one line per action with signature, description and an example.

    Examples use the placeholder 'BID' / ID, never an id a real page could have: a small model copies
    example ids (AgentLab's prompt made 60 of 105 actions hit an example's id).
    """
    lines = []
    for spec in selected_specs(action_set, names):
        if action_set == "mind2web":
            sig = " ".join([spec.name] + [f"[{a.name}]" for a in spec.args])
        else:
            sig = spec.signature()
        # No example without arguments (the signature is one) or for free text: a small model sends an
        # example's sentence as its own answer (measured: "The cheapest flight is $120." on a FAQ page).
        example = f" Example: {render_example(spec, action_set)}" if spec.args and spec.example else ""
        lines.append(f"{sig}: {spec.description}.{example}")
    return "\n".join(lines)
