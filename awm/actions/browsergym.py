"""The BrowserGym side: the action set that executes our rendered strings, and the actions it leaves to us."""

from __future__ import annotations

from typing import Any

# Actions our executor carries out with BrowserGym's own (`awm.webarena.executor`), never rendered to it.
EXECUTED_BY_AWM = frozenset({"select_text", "drag"})


def browsergym_action_set(demo_mode: str = "off") -> Any:
    """BrowserGym's HighLevelActionSet that executes every browser action we render (check/uncheck included).

    Single-action and strict: anything but exactly one of our rendered calls is refused by BrowserGym too.
    Imported lazily so parsing and rendering do not need BrowserGym.
    """
    from browsergym.core.action.functions import check, uncheck
    from browsergym.core.action.highlevel import HighLevelActionSet

    return HighLevelActionSet(
        subsets=["chat", "infeas", "bid", "coord", "nav", "tab", "custom"],  # coord: select_text's drag
        custom_actions=[check, uncheck],
        multiaction=False,
        strict=True,
        demo_mode=demo_mode,  # type: ignore[arg-type]
    )
