"""The web agent's prompt text: pure functions from (task, memory, history, page) to `PromptParts`.

Why this order and this shape (DESIGN.md §7): the fixed instructions are short and come FIRST, then
the workflow memory, then the goal: all three are identical on every step of an episode, so the
local model's prefix cache skips them after step one. History entries are rendered from their own
step only, so an entry never changes once written and the cached prefix reaches through the history
too; the page, which changes every step, comes last. Examples in the action list use the placeholder
'BID', never an id a real page could have (a small model copies example ids).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any, Literal

from awm.actions import ACTION_SETS, RUN_WORKFLOW, actions_offered, describe_actions
from awm.goal_values import asks_to_drag, asks_to_select_text
from awm.memory.text_format import render_workflow
from awm.memory.workflow import Workflow, bind_parameters, instantiate
from awm.tokens import PromptParts
from awm.trajectory import Step, Task

PromptOrder = Literal["prefix", "page_first"]

SYSTEM_INTRO = (
    "You are a web agent. Each turn you see the goal, your previous steps and the current page, "
    "and you choose the next action.\n"
    "The page lists elements as [id] role 'name'; act only on an id shown on the current page.\n"
)
# What the answer holds: the action alone (the default, `AgentSettings.thought`), or a thought line first.
ANSWER_ACTION = "Reply with exactly one action, nothing else."
ANSWER_THOUGHT = (
    "Reply with one short thought on the first line and exactly one action on the second line, nothing else."
)
# Under the target-first grammar (`awm.actions.target_first_grammar`) the first line names the element.
TARGET_FIRST_INTRO = (
    "You are a web agent. Each turn you see the goal, your previous steps and the current page, "
    "and you choose the next action.\n"
    "The page lists elements as [id] role 'name'.\n"
    "Reply with two lines and nothing else: first 'On: ' and the element you act on, as role 'name' [id] "
    "the way the page lists it ('On: page' for an action on no element); then one action on that element."
)
MEMORY_HEADER = "## Workflows that solved similar tasks (adapt their values to this goal)"
RUNNABLE_HEADER = "## Workflows you can run (one action does all of a workflow's steps)"
HISTORY_HEADER = "## Previous steps"
MAX_HISTORY_FIELD_CHARS = 300


# Actions offered only when the goal asks for what they do (a small model given them on every page uses
# them where they do not belong), each with the test of the goal that offers it.
GOAL_ACTIONS = {"select_text": asks_to_select_text, "drag": asks_to_drag}


def action_names_for(task: Task, goal: str = "", *, tabs: int = 1) -> list[str] | None:
    """The actions offered for a task (the action table says which benchmark gets which), and those of
    `GOAL_ACTIONS` whose goal test holds (`select_text`: the page's text blocks then carry ids); on a live
    page or arena site, the tab actions only while several tabs are open (`tabs`)."""
    names = actions_offered(task.benchmark)
    goal = goal or task.goal
    wanted = [name for name, asks in GOAL_ACTIONS.items() if asks(goal)]
    unwanted = set(GOAL_ACTIONS) - set(wanted)
    if names is not None and tabs > 1:
        names += [n for n in TAB_ACTIONS if n not in names]
    if names is None and not unwanted:
        return None
    return [n for n in (names or ACTION_SETS["browser"]) if n not in unwanted] + (wanted if names else [])


# Switching tabs, offered where the action set is the benchmark's own (a live page, an arena site) only
# while a link or a script has opened a second tab: on one tab they are noise a small model may pick.
TAB_ACTIONS = ("tab_focus", "tab_close")

WORKFLOW_ACTION_TEXT = (
    f"{RUN_WORKFLOW.name}(name, params): {RUN_WORKFLOW.description} (each value exactly as it must be "
    "typed). It does all of the workflow's steps in one action: when a workflow below fits the goal, "
    "call it as your first action instead of doing its steps one by one."
)
CALL_LEAD = "Reply with this action to do it all: "
# A live page has no reward that ends the episode: only the agent does (measured before this rule, on
# ten small pages: the 1.5B model reached the goal on three and ended none, clicking on until stuck).
ENDING_RULES = (
    "## Ending the task\n"
    "Nobody ends the task for you: you end it with send_msg_to_user. If the goal asks a question, read "
    "the answer on the page and send it as the message. If the goal asks you to do something, do it; "
    "when the page shows it is done, send a message saying what you did. Never repeat an action that "
    "already worked. Use report_infeasible only after you have looked and the site has no way to do it."
)


def system_text(
    action_names: Collection[str] | None = None,
    *,
    workflows: bool = False,
    ending: bool = False,
    target_first: bool = False,
    thought: bool = False,
) -> str:
    """Fixed instructions plus the action list (`run_workflow` first when the episode's memory holds
    workflows it can call: listed last, the 1.5B model never chose it); the same string on every step.
    `ending`: the agent must end the episode itself (a live page), so the rules for that come last.
    `target_first`: the answer names the element first (`TARGET_FIRST_INTRO`), as its grammar demands.
    `thought`: a thought line before the action (`ANSWER_THOUGHT`), else the action alone."""
    actions = describe_actions("browser", names=action_names)
    if workflows:
        actions = WORKFLOW_ACTION_TEXT + "\n" + actions
    intro = TARGET_FIRST_INTRO if target_first else SYSTEM_INTRO + (ANSWER_THOUGHT if thought else ANSWER_ACTION)
    text = f"{intro}\n\n## Actions\n{actions}"
    return f"{text}\n\n{ENDING_RULES}" if ending else text


def memory_texts(
    workflows: Sequence[Workflow], goal: str = "", calls: dict[str, str] | None = None
) -> list[str]:
    """Each workflow in AWM's WebArena text format, most relevant first (as retrieved).

    Placeholders whose values can be read off this goal (`bind_parameters`) are filled in: a small
    model copies ``{username}`` literally instead of substituting it. A workflow the agent can call
    (`calls`: name -> the call text) shows its description and the call only. The goal is fixed
    for an episode, so the text stays byte-identical across its steps (prefix cache).
    """
    out = []
    for workflow in workflows:
        filled = instantiate(workflow, bind_parameters(workflow, goal))
        call = (calls or {}).get(workflow.name)
        if call:
            # Only the call: shown the steps as actions, the 1.5B model copied the first one instead of
            # calling the workflow (measured on login-user: it filled the field, then called it).
            out.append(f"## {workflow.name}\n{' '.join(filled.description.split())}\n{CALL_LEAD}{call}")
        else:
            out.append(render_workflow(filled, style="webarena"))
    return out


def goal_text(goal: str) -> str:
    return f"## Goal\n{goal.strip()}"


def _clip(text: str, limit: int = MAX_HISTORY_FIELD_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def history_entry(step: Step) -> str:
    """One past step: thought, action (or the raw output if it did not parse), and what happened.

    Rendered from the step alone, so the text never changes after the step (prefix-cache friendly).
    """
    lines = [f"Step {step.index + 1}:"]
    if step.thought:
        lines.append(f"  Thought: {_clip(step.thought)}")
    if step.action_str:
        lines.append(f"  Action: {step.action_str}")
    elif step.model_output:
        lines.append(f"  Output: {_clip(step.model_output)}")
    result = step.feedback or step.error or ("ok" if step.outcome == "ok" else step.outcome)
    lines.append(f"  Result: {_clip(result)}")
    return "\n".join(lines)


# A server on this machine, as a URL's origin: `http://127.0.0.1:53699`, `http://localhost:8000`.
_LOOPBACK_ORIGIN = re.compile(r"https?://(?:127(?:\.\d{1,3}){3}|localhost|\[::1\])(?::\d{1,5})?(?![\w.-])")
# Benchmarks whose pages are served on a port drawn per run and whose action set has no `goto` (the model
# never types a URL there): an arena site, a live page served here (tests, `bench_live.py`).
STABLE_ORIGIN_BENCHMARKS = frozenset({"sites", "live"})


def stable_origin(task: Task) -> str | None:
    """The name a loopback origin is shown as in this task's prompts (None: shown as it is): the arena
    site's own (`http://trac.arena`), or `http://local.site` for a live page served on this machine."""
    if task.benchmark not in STABLE_ORIGIN_BENCHMARKS:
        return None
    if task.benchmark == "sites":
        site = task.task_id.removeprefix("browsergym/sites.").split(".")[0]
        return f"http://{site}.arena"
    return "http://local.site"


def with_stable_origins(messages: Sequence[dict[str, Any]], task: Task) -> list[dict[str, Any]]:
    """The messages with every loopback origin (a host and the port drawn for this run) shown as the
    task's stable name.

    Why: the port a site is served on is drawn per run, and the embedded model's answers change with any
    byte of its prompt, so two runs of one commit gave different episodes (the shop's change-last-name
    was solved in one run and not the next, their prompts differing only in the port). The model sees
    the same text for the same page wherever it is served; nothing it can act on names a URL (these
    benchmarks offer no `goto`), and records keep the real URL."""
    name = stable_origin(task)
    if name is None:
        return list(messages)
    return [
        {**m, "content": _LOOPBACK_ORIGIN.sub(name, m["content"])} if isinstance(m.get("content"), str) else m
        for m in messages
    ]


def tabs_text(tabs: Sequence[str], in_focus: int) -> str:
    """The open tabs, when there are several: which one this page is, and how to switch or close."""
    if len(tabs) < 2:
        return ""
    listed = "; ".join(f"{i}: {tab}" + (" (this page)" if i == in_focus else "") for i, tab in enumerate(tabs))
    return f"Open tabs ({len(tabs)}; tab_focus(index) switches to one, tab_close() closes this one): {listed}"


def observation_text(
    page_text: str,
    url: str = "",
    *,
    feedback: str = "",
    retry_error: str = "",
    thought: bool = False,
    pending: str = "",
    tabs: str = "",
) -> str:
    """The current page, then (when set) what the goal names that is not done yet (`pending`), what the
    last action did and why the last answer was refused.

    A refused answer is shown with its exact error, last, right before the model answers: at
    temperature 0 the same prompt gives the same answer, so a retry must change the prompt.
    """
    # Only web URLs: a local file:// path says nothing about the page and would make the prompt
    # (and its hash) differ from one machine to the next.
    shown = url if url.startswith(("http://", "https://")) else ""
    parts = ["## Current page" + (f" ({shown})" if shown else ""), *([tabs] if tabs else []), page_text.strip()]
    if pending:
        parts.append(pending)
    if feedback:
        parts.append(f"## Last action result\n{feedback.strip()}")
    if retry_error:
        parts.append(
            "## Your last answer was refused\n"
            f"{retry_error.strip()}\n"
            + ("Answer again: one thought line, then one action" if thought else "Answer again with one action")
            + " using an id from the current page."
        )
    return "\n\n".join(parts)


def build_parts(
    *,
    system: str,
    memory: Sequence[str],
    goal: str,
    history: Sequence[Step],
    page_text: str,
    url: str = "",
    feedback: str = "",
    retry_error: str = "",
    runnable: bool = False,
    thought: bool = False,
    pending: str = "",
    tabs: str = "",
) -> PromptParts:
    """Everything one step wants to say, before `fit_prompt` shrinks it to the context window.
    `runnable`: the memory offers workflows to call (`run_workflow`), not text to adapt; `thought`: the
    answer starts with a thought line (what a refused answer is told to send again); `pending`: the goal's
    controls on this page not done yet (`awm.webarena.goal_progress`)."""
    return PromptParts(
        system=system,
        memory=list(memory),
        goal=goal_text(goal),
        # A workflow's sub-steps stay out: the calling step's result says how far it ran.
        history=[history_entry(s) for s in history if s.called_by is None],
        observation=observation_text(
            page_text, url, feedback=feedback, retry_error=retry_error, thought=thought, pending=pending, tabs=tabs
        ),
        memory_header=RUNNABLE_HEADER if runnable else MEMORY_HEADER,
        history_header=HISTORY_HEADER,
    )


def page_first(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The same content with the page moved to the front (what prefix-unaware agents do).

    Only for `scripts/bench_harness.py`, to measure what the prefix-friendly order saves: the page
    changes every step, so nothing after it can come from the prefix cache.
    """
    system, user = messages[0]["content"], messages[1]["content"]
    cut = user.find("## Current page")
    if cut < 0:
        return messages
    page, rest = user[cut:].strip(), user[:cut].strip()
    return [{"role": "system", "content": f"{page}\n\n{system}"}, {"role": "user", "content": rest}]
