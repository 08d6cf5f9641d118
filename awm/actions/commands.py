"""`awm actions`: try the action parser on a piece of model text, and print the action set or its grammar.

Why a command: when a run's trace shows a parse failure, one can replay the model's exact text here and see
the error the model was shown, without starting a browser or a model.
"""

from __future__ import annotations

import json
from typing import Annotated, cast

import typer

from awm.actions import ActionSetName, action_grammar, describe_actions, parse_action, render_action
from awm.errors import ActionParseError, ConfigError

app = typer.Typer(
    help="The closed action set: parse model text, list actions, print the grammar.\n\n"
    "Example: awm actions parse \"click('5')\" --ids 5,6",
    no_args_is_help=True,
    add_completion=False,
)

# `--set` and `--ids` mean the same on every subcommand, so they are written once.
SetOption = Annotated[str, typer.Option("--set", help="Action set: browser or mind2web.")]
IdsHelp = "Comma-separated element ids on the page; an action on any other id is refused."


def _action_set(name: str) -> ActionSetName:
    """Checked here, not by Typer, so a wrong --set is one clear line and exit 2 like every AwmError."""
    if name not in ("browser", "mind2web"):
        raise ConfigError(f"--set must be 'browser' or 'mind2web'; got {name!r}")
    return cast(ActionSetName, name)


def _split_ids(ids: str | None) -> list[str] | None:
    if ids is None:
        return None
    return [i.strip() for i in ids.split(",") if i.strip()]


@app.command("parse")
def parse_command(
    text: Annotated[str, typer.Argument(help="The model's reply text.")],
    set_name: SetOption = "browser",
    ids: Annotated[str | None, typer.Option("--ids", help=IdsHelp)] = None,
) -> None:
    """Parse TEXT into one action and print it as JSON; on failure print the error kind and message, exit 2.

    Example: awm actions parse "I will search. Action: fill('5', 'shoes')" --ids 5,6
    """
    try:
        parsed = parse_action(text, action_set=_action_set(set_name), page_ids=_split_ids(ids))
    except ActionParseError as exc:
        # `awm.cli.main` prints AwmErrors as "error: <message>" and exits 2; the kind goes in the message
        raise ActionParseError(exc.kind, f"[{exc.kind}] {exc}") from None
    payload = {
        "thought": parsed.thought,
        "action": parsed.action.model_dump(mode="json"),
        "rendered": render_action(parsed.action, _action_set(set_name)),
    }
    typer.echo(json.dumps(payload, ensure_ascii=False))


@app.command("list")
def list_command(set_name: SetOption = "browser") -> None:
    """Print the prompt text that describes the action set, one line per action.

    Example: awm actions list --set mind2web
    """
    typer.echo(describe_actions(_action_set(set_name)))


@app.command("grammar")
def grammar_command(
    ids: Annotated[str, typer.Option("--ids", help=IdsHelp)],
    set_name: SetOption = "browser",
    no_thought: Annotated[bool, typer.Option("--no-thought", help="Grammar for the action alone.")] = False,
) -> None:
    """Print the GBNF grammar (llama.cpp) that allows one action on the given element ids.

    Example: awm actions grammar --ids 5,6,a12
    """
    typer.echo(
        action_grammar(_action_set(set_name), _split_ids(ids) or [], with_thought=not no_thought), nl=False
    )
