"""The closed action set: one definition that yields the prompt text, the safe parser and the GBNF grammar.

Why one definition: the agent's prompt, the parser's whitelist and the constrained-decoding grammar must
never disagree, so all three are generated from the `ActionSpec` tables. Model text never reaches
BrowserGym: it is parsed into a typed `Action`, and the string BrowserGym executes is rendered from that.

Where each part lives:
- `table`: the specs (`ArgSpec`, `ActionSpec`), the ``browser`` and ``mind2web`` sets, `RUN_WORKFLOW`,
  `ACTION_SETS`, and the models `Action` and `ParsedOutput`.
- `roles`: which element roles each action acts on (`TEXT_ENTRY_ROLES`, ..., `ids_for_roles`).
- `binding`: binding call arguments to a signature and checking them (types, page ids, roles).
- `render`: `render_action` (the string BrowserGym executes) and `describe_actions` (the prompt's text).
- `calls`: finding the candidate calls in model text and reading their arguments as literals.
- `parser`: `parse_action`, for both sets.
- `grammar`: the GBNF grammars, `action_grammar` and `target_first_grammar`.
- `browsergym`: BrowserGym's action set that executes what we render.
- `commands`: the `awm actions` command (not imported here, so the package does not need Typer).
"""

from awm.actions.browsergym import EXECUTED_BY_AWM, browsergym_action_set
from awm.actions.grammar import PAGE_TARGET, TARGET_LEAD, action_grammar, target_first_grammar, target_line
from awm.actions.parser import parse_action
from awm.actions.render import describe_actions, render_action
from awm.actions.roles import (
    ACTION_ROLES,
    PRESS_ROLES,
    SELECT_ROLES,
    TEXT_BLOCK_ROLE,
    TEXT_ENTRY_ROLES,
    TOGGLE_ROLES,
    ids_for_roles,
)
from awm.actions.table import (
    ACTION_SETS,
    BID_PLACEHOLDER,
    BROWSER_ACTIONS,
    ID_PLACEHOLDER,
    MIND2WEB_ACTIONS,
    RUN_WORKFLOW,
    Action,
    ActionSetName,
    ActionSpec,
    ArgSpec,
    ArgType,
    ArgValue,
    ParsedOutput,
    WorkflowCatalog,
    actions_offered,
)

__all__ = [
    "ACTION_ROLES",
    "ACTION_SETS",
    "BID_PLACEHOLDER",
    "BROWSER_ACTIONS",
    "EXECUTED_BY_AWM",
    "ID_PLACEHOLDER",
    "MIND2WEB_ACTIONS",
    "PAGE_TARGET",
    "PRESS_ROLES",
    "RUN_WORKFLOW",
    "SELECT_ROLES",
    "TARGET_LEAD",
    "TEXT_BLOCK_ROLE",
    "TEXT_ENTRY_ROLES",
    "TOGGLE_ROLES",
    "Action",
    "ActionSetName",
    "ActionSpec",
    "ArgSpec",
    "ArgType",
    "ArgValue",
    "ParsedOutput",
    "WorkflowCatalog",
    "action_grammar",
    "actions_offered",
    "browsergym_action_set",
    "describe_actions",
    "ids_for_roles",
    "parse_action",
    "render_action",
    "target_first_grammar",
    "target_line",
]
