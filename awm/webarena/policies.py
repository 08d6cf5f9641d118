"""Scripted policies: they read the `PageState` and answer with action TEXT, like a model would.

Why text and not `Action` objects: the scripted runs then exercise the same parse -> execute -> feedback
path as the model, so a harness test that passes with them says something about model runs too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from awm.actions import Action, render_action
from awm.memory.view import MemoryView
from awm.memory.workflow import Workflow, bind_parameters, open_parameters
from awm.webarena.env import PageState
from awm.webarena.fingerprint import shows_masked
from awm.webarena.harness import Decision, DecisionContext

_QUOTED = re.compile(r'"([^"]*)"')


class ScriptedPolicy:
    """Answers each `decide` call with the next text of a fixed list (the last one repeats)."""

    name = "scripted"

    def __init__(self, texts: Sequence[str], memory: MemoryView | None = None) -> None:
        self.memory = memory
        if not texts:
            raise ValueError("ScriptedPolicy needs at least one text")
        self.texts = list(texts)
        self.calls = 0
        self.contexts: list[DecisionContext] = []

    def decide(self, ctx: DecisionContext) -> Decision:
        self.contexts.append(ctx)
        text = self.texts[min(self.calls, len(self.texts) - 1)]
        self.calls += 1
        return Decision(text=text, llm_calls=1)


def _say(thought: str, action: Action) -> Decision:
    return Decision(text=f"Thought: {thought}\nAction: {render_action(action)}", llm_calls=1)


def _find(page: PageState, role: str, label: str | None = None) -> str | None:
    """The first id on the page with this role (and label, compared without case and punctuation)."""
    want = re.sub(r"\W+", "", label or "").lower()
    for bid in page.ids:
        target = page.elements.get(bid)
        if target is None or target.role != role:
            continue
        if label is None or re.sub(r"\W+", "", target.label).lower() == want:
            return bid
    return None


def _value(page: PageState, bid: str) -> str:
    control = page.snapshot.controls.get(bid) if page.snapshot else None
    return (control.value or "") if control else ""


def _fill_then_click(page: PageState, fields: list[tuple[str | None, str]], button: str) -> Decision:
    """Fill each (label, value) field whose value differs, in order, then click the button."""
    for label, value in fields:
        bid = _find(page, "textbox", label) if label else _find(page, "textbox")
        if bid is None:
            return Decision(text=f"report_infeasible('no text field labelled {label or ''}')")
        shown = _value(page, bid)
        if shown != value and not shows_masked(shown, value):
            return _say(
                f"fill the {label or 'text'} field", Action(name="fill", args={"bid": bid, "value": value})
            )
    bid = _find(page, "button", button)
    if bid is None:
        return Decision(text=f"report_infeasible('no {button} button')")
    return _say(f"press {button}", Action(name="click", args={"bid": bid}))


class MiniWobScriptedPolicy:
    """Solves click-test, click-button, enter-text and login-user from the goal and the page alone."""

    name = "scripted-miniwob"
    TASKS = ("click-test", "click-button", "enter-text", "login-user")

    def __init__(self, memory: MemoryView | None = None) -> None:
        self.memory = memory  # recorded like the LLM agent's, so scripted runs exercise memory versioning

    def decide(self, ctx: DecisionContext) -> Decision:
        task = ctx.task.task_id.rsplit(".", 1)[-1]
        page, goal = ctx.page, ctx.task.goal or ctx.page.goal
        quoted = _QUOTED.findall(goal)
        if task == "click-test":
            bid = _find(page, "button")
        elif task == "click-button":
            bid = _find(page, "button", quoted[0] if quoted else None)
        elif task == "enter-text" and quoted:
            return _fill_then_click(page, [(None, quoted[0])], "Submit")
        elif task == "login-user" and len(quoted) >= 2:
            return _fill_then_click(page, [("Username", quoted[0]), ("Password", quoted[1])], "Login")
        else:
            return Decision(text=f"report_infeasible('no script for {task}')")
        if bid is None:
            return Decision(text="report_infeasible('the button is not on the page')")
        return _say("click the button", Action(name="click", args={"bid": bid}))


class ReplayPolicy:
    """Calls one workflow with fixed values, once, and never a model: replay and replay admission.

    The workflow travels in an executable memory view of its own, so the harness runs it exactly as it
    runs a workflow the model calls (same grounding, sub-step traces, checks). After the call it has
    nothing more to do; the episode has one model step (`HarnessConfig.max_steps = 1`).
    """

    name = "replay"
    max_steps = 1  # the one call; the harness asks no more of it

    def __init__(self, workflow: Workflow, params: dict[str, str], *, scope: str = "replay") -> None:
        self.workflow = workflow
        self.params = dict(params)
        self.memory = MemoryView(scope=scope, workflows=(workflow,), use="executable")

    def decide(self, ctx: DecisionContext) -> Decision:
        # What the goal already gives is bound from it when the call runs; the call names only the rest.
        bound = bind_parameters(self.workflow, ctx.task.goal)
        params = {k: v for k, v in self.params.items() if k in open_parameters(self.workflow, bound)}
        call = Action(name="run_workflow", args={"name": self.workflow.name, "params": params})
        return Decision(text=render_action(call), llm_calls=0)
