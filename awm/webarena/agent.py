"""The LLM web agent: one model call per step, a prompt fitted whole, decoding held to the page's ids.

Why it looks like this (DESIGN.md §7): AgentLab's agent on the same small model failed mostly on
parse errors it could not recover from (temperature 0 repeats itself) and on element ids copied from
its own prompt's examples. So: the prompt's stable parts come first (prefix cache), examples carry no
real-looking ids, the local model decodes under a grammar that admits only ids on the current page
(and, per action, only elements it can act on: fill takes text fields, never the Submit button), and a
retry shows the exact error, so the second prompt differs from the first.

The agent only produces text; the harness parses, executes and records it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from awm.actions import action_grammar
from awm.config import Settings
from awm.llm.base import ChatRequest, LLMClient
from awm.tokens import TokenCounter, fit_prompt
from awm.webarena import prompts
from awm.webarena.harness import Decision, DecisionContext, page_targets

if TYPE_CHECKING:
    from awm.memory.retrieval import RetrievedMemory
    from awm.trajectory import Step


class MemoryUse(BaseModel):
    """Which memory the prompts of an episode carried (recorded on the trajectory)."""

    scope: str | None = None
    version: int | None = None
    workflows: list[str] = Field(default_factory=list)  # names actually sent, in first-sent order


def prompt_hash(messages: list[dict[str, str]]) -> str:
    """sha256 of the final messages: the same prompt gives the same hash, across runs and machines."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


# Actions that set a state (a field's text, a box's tick, a dropdown's choice, focus, hover): right after
# one succeeds, the same action on the same element can change nothing.
STATE_SETTING_ACTIONS = frozenset({"fill", "clear", "check", "uncheck", "select_option", "focus", "hover"})


def _target(step: Step) -> tuple[str, str] | None:
    """(action name, element id) of a step that executed without error, else None."""
    if step.outcome != "ok" or not step.action:
        return None
    args = step.action.get("args")
    bid = args.get("bid") if isinstance(args, dict) else None
    return (str(step.action.get("name", "")), str(bid)) if bid is not None else None


def _shows_value(page_text: str, bid: str) -> bool:
    """Whether the page line of element `bid` shows a current value (`value='...'`)."""
    head = f"[{bid}] "
    return any(line.startswith(head) and " value='" in line for line in page_text.splitlines())


def without_spent_choices(
    ids_for: dict[str, list[str]], page_ids: list[str], history: list[Step], page_text: str, fingerprint: str
) -> dict[str, list[str]]:
    """Per-action ids minus the choices that cannot move the task on; the grammar offers the rest.

    Why: measured on the 1.5B model, once the grammar stopped it filling the Submit button it filled
    the same text field again step after step, or pressed Enter in it and filled it again, until the
    loop stop. Taken out for the next step: the same state-setting action on the element the last step
    just set; `press` on the element the last step pressed when the page did not change; and `fill` on
    a field this episode already filled that still shows a value. What is left (click Submit) moves the
    task on; a real correction stays possible (clear, then fill).
    """
    out = dict(ids_for)

    def drop(name: str, bid: str) -> None:
        out[name] = [i for i in out.get(name, page_ids) if i != bid]

    last = _target(history[-1]) if history else None
    if last is not None:
        name, bid = last
        unchanged = history[-1].fingerprint == fingerprint
        if name in STATE_SETTING_ACTIONS or (name == "press" and unchanged):
            drop(name, bid)
    for step in history:
        done = _target(step)
        if done is not None and done[0] == "fill" and _shows_value(page_text, done[1]):
            drop("fill", done[1])
    return out


def _fresh_feedback(ctx: DecisionContext) -> str:
    """The last action's result, unless the history's last entry already shows it."""
    if ctx.history and ctx.history[-1].feedback.strip() == ctx.feedback.strip():
        return ""
    return ctx.feedback


class LLMAgent:
    """A `Policy` that asks an LLM for each step.

    `memory` is a `RetrievedMemory`, a function from the goal to one (resolved at the first step,
    then fixed for the episode so the prompt prefix stays stable), or None. `use_grammar` defaults
    to: on for the local backend (llama.cpp reads GBNF), off otherwise.
    """

    def __init__(
        self,
        client: LLMClient,
        counter: TokenCounter,
        *,
        settings: Settings,
        memory: RetrievedMemory | Callable[[str], RetrievedMemory | None] | None = None,
        use_grammar: bool | None = None,
        prompt_order: prompts.PromptOrder = "prefix",
        role_aware: bool = True,
    ) -> None:
        self.client = client
        self.counter = counter
        self.settings = settings
        self.use_grammar = client.backend == "local" if use_grammar is None else use_grammar
        self.prompt_order = prompt_order
        self.role_aware = role_aware
        self.name = client.model  # the harness records it as the trajectory's model
        self._memory_source = memory
        self._memory: RetrievedMemory | None = None
        self._memory_goal: str | None = None
        self.memory_use = MemoryUse()
        self.last_messages: list[dict[str, str]] = []
        self.last_grammar: str | None = None

    # -- memory ------------------------------------------------------------------------------------

    def _memory_for(self, goal: str) -> RetrievedMemory | None:
        source = self._memory_source
        if source is None:
            return None
        if not callable(source):
            return source
        if self._memory_goal != goal:  # one lookup per episode (per goal), then the prefix is fixed
            self._memory, self._memory_goal = source(goal), goal
        return self._memory

    def _note_memory(self, memory: RetrievedMemory | None, kept: int) -> None:
        if memory is None:
            return
        self.memory_use.scope = memory.scope
        self.memory_use.version = memory.version
        for workflow in memory.workflows[:kept]:
            if workflow.name not in self.memory_use.workflows:
                self.memory_use.workflows.append(workflow.name)

    # -- one step ----------------------------------------------------------------------------------

    def build_request(self, ctx: DecisionContext) -> tuple[ChatRequest, int, RetrievedMemory | None]:
        """The chat request for this step (pure apart from the memory lookup), its size and memory.

        Split from `decide` so tests and the benchmark can inspect prompts without calling a model.
        """
        page = ctx.page
        goal = page.goal or ctx.task.goal
        names = prompts.action_names_for(ctx.task)
        memory = self._memory_for(goal)
        parts = prompts.build_parts(
            system=prompts.system_text(names),
            memory=prompts.memory_texts(memory.workflows, goal) if memory else [],
            goal=goal,
            history=ctx.history,
            page_text=page.text,
            url=page.url,
            feedback=_fresh_feedback(ctx),
            retry_error=ctx.retry_error or "",
        )
        # PromptTooLargeError propagates: the harness ends the episode as `context_overflow`.
        fitted = fit_prompt(
            parts,
            self.counter,
            context_window=self.settings.llm.context_window,
            completion_tokens=self.settings.llm.max_tokens,
        )
        self._note_memory(memory, fitted.memory_kept)
        messages = fitted.messages
        if self.prompt_order == "page_first":
            messages = prompts.page_first(messages)
        grammar = None
        if self.use_grammar:
            # Keep the grammar on a retry too: the retry changes the prompt (the error is shown),
            # never loosens what may be emitted.
            # Each action takes only the ids it can act on (fill: text fields; check: checkboxes...):
            # a small model that filled a form otherwise fills the Submit button too.
            ids_for = None
            if self.role_aware:
                ids_for = without_spent_choices(
                    page_targets(page).ids_for, page.ids, ctx.history, page.text, page.fingerprint
                )
            grammar = action_grammar(
                "browser", page_ids=page.ids, names=names, with_thought=True, ids_for=ids_for
            )
        request = ChatRequest(
            messages=messages,
            temperature=self.settings.llm.temperature,
            max_tokens=self.settings.llm.max_tokens,
            grammar=grammar,
            purpose="actor",
        )
        return request, fitted.prompt_tokens, memory

    def decide(self, ctx: DecisionContext) -> Decision:
        """One model call. `LLMError` and `PromptTooLargeError` propagate: the harness ends the episode
        as `llm_error` or `context_overflow`."""
        request, fitted_tokens, memory = self.build_request(ctx)
        self.last_messages, self.last_grammar = request.messages, request.grammar
        result = self.client.chat(request)
        return Decision(
            text=result.text,
            prompt_tokens=result.usage.prompt_tokens or fitted_tokens,
            completion_tokens=result.usage.completion_tokens,
            llm_ms=result.seconds * 1000.0,
            llm_calls=1,
            prompt_hash=prompt_hash(request.messages),
            memory_version=memory.version if memory else None,
        )
