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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NamedTuple

from awm.actions import action_grammar, target_first_grammar
from awm.config import GuidanceMode, Settings
from awm.errors import ConfigError
from awm.goal_values import goal_clauses, unseen_objects
from awm.llm.base import ChatRequest, LLMClient
from awm.tokens import TokenCounter, fit_prompt
from awm.trajectory import Task
from awm.webarena import answer_check as answers
from awm.webarena import prompts
from awm.webarena.env import PageState, agent_ends, is_live
from awm.webarena.guidance_filters import FilterContext, Offer, active_filters, narrowed
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


class BuiltRequest(NamedTuple):
    """One step's chat request, its fitted size, the workflows it carries (after budget fitting) and the
    guidance filters that changed what it offers (`Offer.acted`)."""

    request: ChatRequest
    prompt_tokens: int
    workflows: list[str]
    guidance: list[str]


def _with_cost_of(decision: Decision, earlier: Decision) -> Decision:
    """`decision` with the cost of the `earlier` checks of the same step added."""
    return decision.model_copy(
        update={
            "prompt_tokens": decision.prompt_tokens + earlier.prompt_tokens,
            "cached_prompt_tokens": decision.cached_prompt_tokens + earlier.cached_prompt_tokens,
            "completion_tokens": decision.completion_tokens + earlier.completion_tokens,
            "llm_ms": decision.llm_ms + earlier.llm_ms,
            "llm_calls": decision.llm_calls + earlier.llm_calls,
        }
    )


def _fresh_feedback(ctx: DecisionContext) -> str:
    """The last action's result, unless the history's last entry already shows it."""
    if ctx.history and ctx.history[-1].feedback.strip() == ctx.feedback.strip():
        return ""
    return ctx.feedback


class LLMAgent:
    """A `Policy` that asks an LLM for each step.

    `memory` is the immutable view the driver chose for this episode (None: memory off); with mode
    ``topk`` the workflows most similar to the goal are picked from it at the first step (the goal is
    on the page, not known before), then fixed for the episode so the prompt prefix stays stable.
    `use_grammar` defaults to: on for the local backend (llama.cpp reads GBNF), off otherwise.
    `guidance` / `guidance_off`: the named filters that narrow each step's offer
    (`awm.webarena.guidance_filters`): all off, or single ones off. `answer_check`: on a question goal
    the agent ends itself, ask for the answer on each new page that names its subject (`_answer_check`).
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
        guidance: GuidanceMode = "on",
        guidance_off: Sequence[str] = (),
        answer_check: bool = True,
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
        self.guidance = active_filters(guidance, guidance_off, role_aware=role_aware)
        self.answer_check = answer_check  # `_answer_check` (`AgentSettings.answer_check`)
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

    def build_request(self, ctx: DecisionContext) -> BuiltRequest:
        """The chat request for this step, its size, the names of the workflows it carries and the
        guidance filters that acted on it.

        Split from `decide` so tests and the benchmark can inspect prompts without calling a model.
        """
        page = ctx.page
        goal = page.goal or ctx.task.goal
        names = prompts.action_names_for(ctx.task, goal, tabs=len(page.tabs))
        ending = agent_ends(ctx.task)
        workflows = self._workflows_for(goal)
        callables = self._callables_for(goal)
        shown_calls = {w.name: call_text(callables[w.name]) for w in workflows if w.name in callables}
        # What the model may answer, narrowed by each guidance filter in turn (the goal note among them).
        shown_callables = {name: callables[name] for name in shown_calls}
        follows = self.memory.follows if self.memory is not None else {}
        context = FilterContext(
            page, goal, ctx.history, ends_itself=ending, workflows=shown_callables, follows=follows
        )
        bare = Offer(ids_for=page_targets(page).ids_for if self.role_aware else None, names=names)
        offer = narrowed(bare, context, self.guidance)
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
            pending=offer.note,
            tabs=prompts.tabs_text(page.tabs, page.tab_in_focus),
        )
        # PromptTooLargeError propagates: the harness ends the episode as `context_overflow`.
        fitted = fit_prompt(
            parts,
            self.counter,
            context_window=self.settings.llm.context_window,
            completion_tokens=self.settings.llm.max_tokens,
        )
        messages = prompts.with_stable_origins(fitted.messages, ctx.task)
        if self.prompt_order == "page_first":
            messages = prompts.page_first(messages)
        grammar = None
        if self.use_grammar:
            # Keep the grammar on a retry too: the retry changes the prompt (the error is shown),
            # never loosens what may be emitted.
            # Each action takes only the ids it can act on (fill: text fields; check: checkboxes...):
            # a small model that filled a form otherwise fills the Submit button too (`role_aware`).
            kept = {w.name for w in workflows[: fitted.memory_kept]}
            offered = catalog(
                {n: c for n, c in callables.items() if n in kept and n in shown_calls and n not in offer.spent_workflows}
            )
            if self.target_first:
                targets = element_lines(page)
                grammar = target_first_grammar(
                    targets, offer.names, ids_for=offer.ids_for, workflows=offered or None
                )
            else:
                def grammar_for(answers: Offer) -> str:
                    return action_grammar(
                        "browser", page_ids=page.ids, names=answers.names, with_thought=thought,
                        ids_for=answers.ids_for, workflows=offered or None,
                    )  # fmt: skip

                try:
                    grammar = grammar_for(offer)
                except ConfigError:
                    # Nothing is left (a page with no element ids whose scroll did nothing): the filters
                    # that give way are taken back, the others still hold; the repeat count ends it as stuck.
                    grammar = grammar_for(narrowed(bare, context, [f for f in self.guidance if not f.gives_way]))
        request = ChatRequest(
            messages=messages,
            temperature=self.settings.llm.temperature,
            max_tokens=self.settings.llm.max_tokens,
            grammar=grammar,
            purpose="actor",
        )
        return BuiltRequest(
            request, fitted.prompt_tokens, [w.name for w in workflows[: fitted.memory_kept]], list(offer.acted)
        )

    def decide(self, ctx: DecisionContext) -> Decision:
        """One model call, and before it the checks that may end the step without it: the answer check
        (a question on a page that names its subject) and the done check (a live page that reacted).
        `LLMError` and `PromptTooLargeError` propagate: the harness ends the episode as `llm_error` or
        `context_overflow`."""
        checked = Decision(text="", llm_calls=0)  # no check: nothing spent
        for check in (self._answer_check, self._done_check):
            decided = check(ctx)
            if decided is None:
                continue
            checked = _with_cost_of(decided, checked)
            if checked.text:
                return checked
        request, fitted_tokens, shown, acted = self.build_request(ctx)
        result = self.client.chat(request)
        return Decision(
            text=result.text,
            prompt_tokens=(result.usage.prompt_tokens or fitted_tokens) + checked.prompt_tokens,
            cached_prompt_tokens=result.usage.cached_prompt_tokens + checked.cached_prompt_tokens,
            completion_tokens=result.usage.completion_tokens + checked.completion_tokens,
            llm_ms=result.seconds * 1000.0 + checked.llm_ms,
            llm_calls=1 + checked.llm_calls,
            prompt_hash=prompt_hash(request.messages),
            prompt=list(request.messages),
            workflows=shown,
            guidance=acted,
        )

    def _answer_check(self, ctx: DecisionContext) -> Decision | None:
        """Where the agent ends the task itself and the goal is a question: on a page state not asked
        before that names what the question is about, ask in a short separate call for the answer on
        this page; an answer the page bears out is the decision (`send_msg_to_user`), else only the
        call's cost (text empty). Why, and what keeps a wrong answer out: `awm.webarena.answer_check`."""
        if not self.answer_check or not agent_ends(ctx.task) or ctx.retry_error:
            return None
        goal = ctx.page.goal or ctx.task.goal
        page = ctx.page
        if not answers.asks_question(goal) or answers.asked_before(ctx.history, page.fingerprint):
            return None
        if not answers.page_names_subject(goal, page.text):
            return None

        def decided(reply: str) -> str:
            answer = answers.grounded_answer(reply, goal, page.text)
            return f"The page answers the question.\n{finish_action(answer)}" if answer else ""

        return self._ask_check(
            ctx.task, answers.ANSWER_SYSTEM, answers.answer_question(goal, page.text),
            max_tokens=answers.ANSWER_MAX_CHARS // 2, grammar=answers.ANSWER_GRAMMAR, decided=decided,
        )  # fmt: skip

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
        ran = sum(1 for step in ctx.history if step.outcome == "ok" and step.action is not None)
        if ran < len(goal_clauses(goal)):
            # "Turn on dark mode and save the settings": after the switch the page showed "Unsaved
            # changes", the model answered yes, and the run ended unsaved. A goal of two actions is not
            # done by one, whatever the page showed.
            return None
        seen = "\n".join([*(f"{step.observation}\n{step.reaction}" for step in ctx.history), ctx.page.text])
        if unseen_objects(goal, seen):
            # "Turn on two-factor authentication for my account" on an account page with no such
            # setting: after "Save preferences" the page said "Preferences saved", the model answered
            # yes, and the run claimed success. What no page ever named was not changed.
            return None

        def decided(reply: str) -> str:
            done = reply.strip().lower().startswith("yes")
            return f"The page shows the goal is done.\n{finish_action(last.reaction)}" if done else ""

        return self._ask_check(
            ctx.task, DONE_SYSTEM, done_question(goal, last), max_tokens=3, grammar=DONE_GRAMMAR, decided=decided
        )

    def _ask_check(
        self, task: Task, system: str, question: str, *, max_tokens: int, grammar: str, decided: Callable[[str], str]
    ) -> Decision:
        """One short check call (temperature 0, `grammar` under constrained decoding): the decision text
        `decided` makes of the reply (empty: the check decided nothing, only its cost counts), with the
        prompt and its hash kept only when it decided."""
        messages = prompts.with_stable_origins(
            [{"role": "system", "content": system}, {"role": "user", "content": question}], task
        )
        request = ChatRequest(
            messages=messages, temperature=0.0, max_tokens=max_tokens,
            grammar=grammar if self.use_grammar else None, purpose="actor",
        )  # fmt: skip
        result = self.client.chat(request)
        text = decided(result.text)
        return Decision(
            text=text,
            prompt_tokens=result.usage.prompt_tokens, completion_tokens=result.usage.completion_tokens,
            cached_prompt_tokens=result.usage.cached_prompt_tokens, llm_ms=result.seconds * 1000.0, llm_calls=1,
            prompt_hash=prompt_hash(messages) if text else "",
            prompt=messages if text else [],
        )  # fmt: skip
