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
from typing import TYPE_CHECKING

from awm.actions import ACTION_SETS, TEXT_ENTRY_ROLES, TOGGLE_ROLES, action_grammar, target_first_grammar
from awm.config import Settings
from awm.errors import ConfigError
from awm.llm.base import ChatRequest, LLMClient
from awm.tokens import TokenCounter, fit_prompt
from awm.webarena import prompts
from awm.webarena.env import PageState, agent_ends, is_live
from awm.webarena.fingerprint import ControlState
from awm.webarena.goal_progress import guidance
from awm.webarena.harness import Decision, DecisionContext, finish_action, page_targets
from awm.webarena.workflow_run import CallableWorkflow, call_text, callable_workflows, catalog

if TYPE_CHECKING:
    from awm.memory.embeddings import Embedder
    from awm.memory.view import MemoryView
    from awm.memory.workflow import Workflow
    from awm.trajectory import Step


def prompt_hash(messages: list[dict[str, str]]) -> str:
    """sha256 of the final messages: the same prompt gives the same hash, across runs and machines."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _target(step: Step, *, failed_too: bool = False) -> tuple[str, str] | None:
    """(action name, element id) of a step that executed without error (`failed_too`: or that was
    tried and failed), else None."""
    if not step.action or (step.outcome != "ok" and not failed_too):
        return None
    args = step.action.get("args")
    bid = args.get("bid") if isinstance(args, dict) else None
    return (str(step.action.get("name", "")), str(bid)) if bid is not None else None


def _shows_value(page_text: str, bid: str) -> bool:
    """Whether the page line of element `bid` shows a current value (`value='...'`)."""
    head = f"[{bid}] "
    return any(line.startswith(head) and " value='" in line for line in page_text.splitlines())


def without_spent_choices(
    ids_for: dict[str, list[str]],
    page_ids: list[str],
    history: list[Step],
    page_text: str,
    fingerprint: str,
    *,
    ends_itself: bool = False,
) -> dict[str, list[str]]:
    """Per-action ids minus the choices that cannot move the task on; the grammar offers the rest.

    Why: measured on the 1.5B model, once the grammar stopped it filling the Submit button it filled
    the same text field again step after step, or pressed Enter in it and filled it again, until the
    loop stop. Taken out for the next step: the same state-setting action on the element the last step
    just set, and `fill` on a field this episode already filled that still shows a value (a `press` that
    left the page as it was is taken out by the same-state rule below). What is left (click Submit) moves the
    task on; a real correction stays possible (clear, then fill).

    On every page also each action already tried on this very page state (same fingerprint: same
    structure, values, checks and focus), whether it worked or failed: the page answers an action the
    same way twice, so taking it again from here can only fail again or go round a cycle. Measured on
    the development split before this rule: 58 of 131 failed episodes ended at the loop stop, most of
    them one click repeated, and navigate-tree toggled a folder open and shut (A-B-A-B) until it.

    Where the agent ends the task itself (`ends_itself`: a live page, an arena site) also every click
    already made on this page since its last fill, select or check:
    measured on ten small pages, the model clicked the button that had just worked again and again (the
    mug added to the cart ten times, the open tab clicked until the loop stop), and with only the last
    click taken away it went back and forth between two tabs; with those clicks spent it finishes or
    moves on, and a button clicked too early (Add before typing) comes back once the field is filled.
    """
    out = dict(ids_for)

    def drop(name: str, bid: str) -> None:
        out[name] = [i for i in out.get(name, page_ids) if i != bid]

    last = _target(history[-1]) if history else None
    if last is not None and ACTION_SETS["browser"][last[0]].sets_state:
        drop(*last)
    if ends_itself and history:
        # A click already made on this page (same URL) since the last state-setting action is spent: a
        # button clicked before a field was filled (Add, Search) is offered again once it was filled.
        url = history[-1].url
        for step in reversed(history):
            done = _target(step)
            if step.url != url or (done is not None and ACTION_SETS["browser"][done[0]].sets_state):
                break
            if done is not None and done[0] == "click":
                drop("click", done[1])
    for step in history:
        done = _target(step)
        if done is not None and done[0] == "fill" and _shows_value(page_text, done[1]):
            drop("fill", done[1])
        tried = _target(step, failed_too=True) if step.fingerprint == fingerprint else None
        if tried is not None and tried[0] in ACTION_SETS["browser"]:
            drop(*tried)
    return out


CHOSEN_BY_CLICK_ROLES = frozenset({"option", "tab"})


def _already_chosen(control: ControlState) -> bool:
    """A ticked checkbox or radio button, a selected option or tab: what a click on it chose is chosen."""
    if control.role in TOGGLE_ROLES:
        return "checked" in control.flags
    return control.role in CHOSEN_BY_CLICK_ROLES and "selected" in control.flags


def without_undoing_clicks(ids_for: dict[str, list[str]], page: PageState) -> dict[str, list[str]]:
    """Per-action ids minus clicks on what the page shows already chosen: ticked boxes and radio buttons,
    selected options and tabs (`uncheck` stays offered for a box that must be cleared).

    Why: measured on the development split, the 1.5B model clicked the box it had to tick, then clicked
    it again (unticking it) and again until the loop stop (click-checkboxes); it clicked the radio button
    or the list option it had chosen three and four times (click-option, click-scroll-list). A click on
    what is chosen undoes it or does nothing.
    """
    controls = page.snapshot.controls if page.snapshot else {}
    chosen = {bid for bid, control in controls.items() if _already_chosen(control)}
    if not chosen:
        return ids_for
    return {**ids_for, "click": [i for i in ids_for.get("click", page.ids) if i not in chosen]}


def without_disabled(ids_for: dict[str, list[str]], page: PageState) -> dict[str, list[str]]:
    """Per-action ids minus the elements the page shows disabled, for every action that needs an
    enabled target (the executor refuses it there anyway).

    Why: measured on login-user-popup, a popup disabled the form; the model filled, cleared, clicked and
    pressed Enter on the disabled fields until the step limit, while the popup's own buttons waited.
    """
    disabled = {bid for bid in page.ids if "disabled" in page.flags(bid)}
    if not disabled:
        return ids_for
    # A disabled element takes no focus either (the model focused the disabled password field).
    acting = [name for name, spec in ACTION_SETS["browser"].items() if spec.needs_interactable or name == "focus"]
    return {**ids_for, **{n: [i for i in ids_for.get(n, page.ids) if i not in disabled] for n in acting}}


def spent_plain_actions(history: list[Step], page: PageState) -> set[str]:
    """Names of actions without an element (scroll, noop...) already taken on this page as it is now:
    same fingerprint and the same text, so the page, scrolled or not, showed nothing new.

    Why: measured on click-pie, the model scrolled a page that does not scroll three times, until the loop
    stop; on a long page a scroll that reveals lines changes the text and stays offered.
    """
    return {
        str(step.action.get("name", ""))
        for step in history
        if step.action
        and _target(step, failed_too=True) is None
        and step.fingerprint == page.fingerprint
        and step.observation == page.text
    }


def element_lines(page: PageState, limit: int = 80) -> dict[str, str]:
    """Each element id on the page -> its line as the page lists it, without the ``[id] `` (role, name,
    hint, flags; clipped to `limit` characters): what a target-first answer names first. Why the page's
    line and not the role and name alone: icons are told apart only by their hint (``image (class=trash)``).
    """
    lines: dict[str, str] = {}
    for line in page.text.splitlines():
        head, _, rest = line.partition("] ")
        bid = head[1:] if head.startswith("[") else ""
        if bid in page.elements or bid in page.ids:
            lines.setdefault(bid, rest[:limit].strip())
    return {bid: lines.get(bid, "element") for bid in page.ids}


DONE_SYSTEM = "Answer yes or no."
DONE_GRAMMAR = 'root ::= "yes" | "no"\n'


def done_question(goal: str, step: Step) -> str:
    """The done check's question: the goal, the last action, and what the page showed after it."""
    target = f" on {step.target.render()}" if step.target else ""
    return (
        f"Goal: {goal.strip()}\nLast action: {step.action_str}{target}\n"
        f"The page now shows: {step.reaction}\nIs the goal fully done?"
    )


def _fresh_feedback(ctx: DecisionContext) -> str:
    """The last action's result, unless the history's last entry already shows it."""
    if ctx.history and ctx.history[-1].feedback.strip() == ctx.feedback.strip():
        return ""
    return ctx.feedback


# Roles that `fill` sets and a click only disturbs (see `LLMAgent.build_request`).
FILLED_NOT_CLICKED = (TEXT_ENTRY_ROLES - {"combobox"}) | {"slider"}


class LLMAgent:
    """A `Policy` that asks an LLM for each step.

    `memory` is the immutable view the driver chose for this episode (None: memory off); with mode
    ``topk`` the workflows most similar to the goal are picked from it at the first step (the goal is
    on the page, not known before), then fixed for the episode so the prompt prefix stays stable.
    `use_grammar` defaults to: on for the local backend (llama.cpp reads GBNF), off otherwise.
    """

    def __init__(
        self,
        client: LLMClient,
        counter: TokenCounter,
        *,
        settings: Settings,
        memory: MemoryView | None = None,
        use_grammar: bool | None = None,
        prompt_order: prompts.PromptOrder = "prefix",
        role_aware: bool = True,
        target_first: bool = False,
        thought: bool = False,
        embedder: Embedder | None = None,
    ) -> None:
        self.client = client
        self.counter = counter
        self.settings = settings
        self.use_grammar = client.backend == "local" if use_grammar is None else use_grammar
        self.prompt_order = prompt_order
        self.role_aware = role_aware
        # The element first, then its action: only under a grammar (the format is the grammar's).
        self.target_first = target_first and self.use_grammar
        self.thought = thought  # a thought line before the action (`AgentSettings.thought`)
        self.name = client.model  # the harness records it as the trajectory's model
        self.memory = memory
        self._embedder = embedder
        self._shown: tuple[str, list[Workflow]] | None = None  # (goal, workflows) picked for it
        self._callables: tuple[str, dict[str, CallableWorkflow]] | None = None  # (goal, bound once)

    def _workflows_for(self, goal: str) -> list[Workflow]:
        if self.memory is None or self.memory.empty:
            return []
        if self._shown is None or self._shown[0] != goal:  # one pick per episode (per goal)
            self._shown = (goal, self.memory.select(goal, self._embedder))
        return self._shown[1]

    def _callables_for(self, goal: str) -> dict[str, CallableWorkflow]:
        """The view's callable workflows with their values bound from `goal`: once per episode (goal)."""
        if self._callables is None or self._callables[0] != goal:
            self._callables = (goal, callable_workflows(self.memory, goal))
        return self._callables[1]

    # -- one step ----------------------------------------------------------------------------------

    def build_request(self, ctx: DecisionContext) -> tuple[ChatRequest, int, list[str]]:
        """The chat request for this step, its size, and the names of the workflows it carries.

        Split from `decide` so tests and the benchmark can inspect prompts without calling a model.
        """
        page = ctx.page
        goal = page.goal or ctx.task.goal
        names = prompts.action_names_for(ctx.task, goal)
        ending = agent_ends(ctx.task)
        workflows = self._workflows_for(goal)
        callables = self._callables_for(goal)
        shown_calls = {w.name: call_text(callables[w.name]) for w in workflows if w.name in callables}
        goal_state = guidance(page, goal, ctx.history)
        # With workflows to call, the thought format: asked for the action alone, the 1.5B model typed a
        # login workflow's steps itself; asked for a thought and an action, it answered the call (probed
        # on login-user with the workflow in memory). Without workflows, the action alone (see __init__).
        thought = self.thought or bool(shown_calls)
        parts = prompts.build_parts(
            system=prompts.system_text(
                names, workflows=bool(shown_calls), ending=ending, target_first=self.target_first, thought=thought
            ),
            memory=prompts.memory_texts(workflows, goal, shown_calls),
            goal=goal,
            history=ctx.history,
            page_text=page.text,
            url=page.url,
            feedback=_fresh_feedback(ctx),
            retry_error=ctx.retry_error or "",
            runnable=bool(shown_calls),
            thought=thought,
            pending=goal_state.note,
        )
        # PromptTooLargeError propagates: the harness ends the episode as `context_overflow`.
        fitted = fit_prompt(
            parts,
            self.counter,
            context_window=self.settings.llm.context_window,
            completion_tokens=self.settings.llm.max_tokens,
        )
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
                    page_targets(page).ids_for, page.ids, ctx.history, page.text, page.fingerprint, ends_itself=ending
                )
                ids_for = without_disabled(without_undoing_clicks(ids_for, page), page)
                # A text field or a slider is filled, not clicked: measured, the model clicked the 'to:'
                # field of email-inbox-forward again and again after filling it, and multi-layouts' fields
                # before filling them, until the step limit (`fill` focuses the field itself; `focus`
                # stays); a click on a slider moves its handle to the box's centre (use-slider).
                # A combobox keeps its click: a custom one opens its list that way.
                filled = {bid for bid, d in page.elements.items() if d.role in FILLED_NOT_CLICKED}
                ids_for = {**ids_for, "click": [i for i in ids_for.get("click", page.ids) if i not in filled]}
                if waiting := goal_state.waiting:
                    # What waits for the goal's own controls (`goal_progress`): Submit early ends the task
                    # half done; another word than the link the goal names ends it wrong.
                    ids_for = {
                        **ids_for,
                        **{
                            n: [i for i in ids_for.get(n, page.ids) if i not in waiting]
                            for n in ("click", "press", "select_text")
                        },
                    }
            kept = {w.name for w in workflows[: fitted.memory_kept]}
            offered = catalog({n: c for n, c in callables.items() if n in kept and n in shown_calls})
            grammar_names = names
            if ending and not ctx.history and names is not None:
                # Not on the first step: measured, the model gave up on a question page before looking.
                grammar_names = [n for n in names if n != "report_infeasible"]
            unspent_names = grammar_names
            if self.role_aware and (spent := spent_plain_actions(ctx.history, page)):
                offered_names = grammar_names if grammar_names is not None else list(ACTION_SETS["browser"])
                grammar_names = [n for n in offered_names if n not in spent]
            if self.target_first:
                targets = element_lines(page)
                grammar = target_first_grammar(
                    targets, grammar_names, ids_for=ids_for, workflows=offered or None
                )
            else:
                def grammar_for(offered_names: list[str] | None) -> str:
                    return action_grammar(
                        "browser", page_ids=page.ids, names=offered_names, with_thought=thought,
                        ids_for=ids_for, workflows=offered or None,
                    )  # fmt: skip

                try:
                    grammar = grammar_for(grammar_names)
                except ConfigError:
                    # Everything is spent (a page with no element ids whose scroll did nothing): the spent
                    # plain actions come back, the role rules still hold; the repeat count ends it as stuck.
                    grammar = grammar_for(unspent_names)
        request = ChatRequest(
            messages=messages,
            temperature=self.settings.llm.temperature,
            max_tokens=self.settings.llm.max_tokens,
            grammar=grammar,
            purpose="actor",
        )
        return request, fitted.prompt_tokens, [w.name for w in workflows[: fitted.memory_kept]]

    def decide(self, ctx: DecisionContext) -> Decision:
        """One model call (two on a live page whose last action made it react: the done check first).
        `LLMError` and `PromptTooLargeError` propagate: the harness ends the episode as `llm_error` or
        `context_overflow`."""
        checked = self._done_check(ctx) or Decision(text="", llm_calls=0)  # no check: nothing spent
        if checked.text:
            return checked
        request, fitted_tokens, shown = self.build_request(ctx)
        result = self.client.chat(request)
        return Decision(
            text=result.text,
            prompt_tokens=(result.usage.prompt_tokens or fitted_tokens) + checked.prompt_tokens,
            completion_tokens=result.usage.completion_tokens + checked.completion_tokens,
            llm_ms=result.seconds * 1000.0 + checked.llm_ms,
            llm_calls=1 + checked.llm_calls,
            prompt_hash=prompt_hash(request.messages),
            prompt=list(request.messages),
            workflows=shown,
        )

    def _done_check(self, ctx: DecisionContext) -> Decision | None:
        """On a live page that reacted to the last action: ask, in a short separate call, whether the goal
        is done; if yes, the decision is the finishing message the feedback wrote out (text set); if no,
        only the call's cost (text empty) and the step is decided as usual.

        Why a separate question: measured on ten small pages, the 1.5B model, shown the page's reaction
        and the finishing action in the feedback, still clicked on or gave up with report_infeasible on
        pages where it had just reached the goal; a yes/no question about the goal is one it answers.
        """
        if not is_live(ctx.task) or not ctx.history:
            return None
        last = ctx.history[-1]
        if not last.reaction or ctx.retry_error:
            return None
        goal = ctx.page.goal or ctx.task.goal
        messages = [{"role": "system", "content": DONE_SYSTEM}, {"role": "user", "content": done_question(goal, last)}]
        request = ChatRequest(
            messages=messages, temperature=0.0, max_tokens=3,
            grammar=DONE_GRAMMAR if self.use_grammar else None, purpose="actor",
        )  # fmt: skip
        result = self.client.chat(request)
        done = result.text.strip().lower().startswith("yes")
        return Decision(
            text=f"The page shows the goal is done.\n{finish_action(last.reaction)}" if done else "",
            prompt_tokens=result.usage.prompt_tokens, completion_tokens=result.usage.completion_tokens,
            llm_ms=result.seconds * 1000.0, llm_calls=1, prompt_hash=prompt_hash(messages) if done else "",
            prompt=messages if done else [],
        )  # fmt: skip
