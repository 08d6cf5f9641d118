"""The LLM web agent: one model call per step, a prompt fitted whole, decoding held to the page's ids.

Why it looks like this (DESIGN.md §7): AgentLab's agent on the same small model failed mostly on
parse errors it could not recover from (temperature 0 repeats itself) and on element ids copied from
its own prompt's examples. So: the prompt's stable parts come first (prefix cache), examples carry no
real-looking ids, the local model decodes under a grammar that admits only ids on the current page,
and a retry shows the exact error, so the second prompt differs from the first.

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
from awm.errors import LLMError, PromptTooLargeError
from awm.llm.base import ChatRequest, LLMClient
from awm.tokens import LlamaServerCounter, TokenCounter, counter_for, fit_prompt
from awm.webarena import prompts
from awm.webarena.harness import Decision, DecisionContext

if TYPE_CHECKING:
    from awm.memory.retrieval import RetrievedMemory


class MemoryUse(BaseModel):
    """Which memory the prompts of an episode carried (recorded on the trajectory)."""

    scope: str | None = None
    version: int | None = None
    workflows: list[str] = Field(default_factory=list)  # names actually sent, in first-sent order


def prompt_hash(messages: list[dict[str, str]]) -> str:
    """sha256 of the final messages: the same prompt gives the same hash, across runs and machines."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def client_base_url(client: LLMClient, *, start: bool = False) -> str | None:
    """The endpoint behind a client (looking through the response cache wrapper), if it has one.

    The embedded model's client starts its server lazily; with `start=True` it is started (or found
    running) so its URL can be returned.
    """
    seen: object = client
    for _ in range(4):
        url = getattr(seen, "endpoint", None) or getattr(seen, "base_url", None)
        if isinstance(url, str) and url:
            return url
        if start and callable(getattr(seen, "client", None)):
            seen = seen.client()  # type: ignore[attr-defined]
            continue
        inner = getattr(seen, "inner", None)
        if inner is None:
            return None
        seen = inner
    return None


class LocalServerCounter:
    """Exact counts from the embedded model's own tokenizer, found when first needed.

    Why lazy: the local client starts llama.cpp only on its first real call, so a run served from the
    response cache never loads the model just to build a counter. If the server restarts on another
    port, the next count finds the new one.
    """

    exact = True

    def __init__(self, client: LLMClient) -> None:
        self.client = client
        self._counter: LlamaServerCounter | None = None

    def _current(self) -> LlamaServerCounter:
        if self._counter is None:
            url = client_base_url(self.client, start=True)
            if url is None:
                raise LLMError(f"cannot find the llama.cpp server behind the {self.client.backend} client")
            self._counter = LlamaServerCounter(url)
        return self._counter

    def count(self, text: str) -> int:
        try:
            return self._current().count(text)
        except LLMError:
            self._counter = None  # the server may have restarted elsewhere: look it up once more
            return self._current().count(text)


def counter_for_client(client: LLMClient) -> TokenCounter:
    """The token counter that matches a client: the llama.cpp tokenizer for the local model, etc."""
    if client.backend == "local":
        return LocalServerCounter(client)
    return counter_for(client.backend, client.model, client_base_url(client))


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
    ) -> None:
        self.client = client
        self.counter = counter
        self.settings = settings
        self.use_grammar = client.backend == "local" if use_grammar is None else use_grammar
        self.prompt_order = prompt_order
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
            memory=prompts.memory_texts(memory.workflows) if memory else [],
            goal=goal,
            history=ctx.history,
            page_text=page.text,
            url=page.url,
            feedback=_fresh_feedback(ctx),
            retry_error=ctx.retry_error or "",
        )
        try:
            fitted = fit_prompt(
                parts,
                self.counter,
                context_window=self.settings.llm.context_window,
                completion_tokens=self.settings.llm.max_tokens,
            )
        except PromptTooLargeError as exc:
            # The harness ends an episode on LLMError and the run goes on; one oversized page
            # must not stop a whole run.
            raise LLMError(f"context_overflow: {exc}") from exc
        self._note_memory(memory, fitted.memory_kept)
        messages = fitted.messages
        if self.prompt_order == "page_first":
            messages = prompts.page_first(messages)
        grammar = None
        if self.use_grammar:
            # Keep the grammar on a retry too: the retry changes the prompt (the error is shown),
            # never loosens what may be emitted.
            grammar = action_grammar("browser", page_ids=page.ids, names=names, with_thought=True)
        request = ChatRequest(
            messages=messages,
            temperature=self.settings.llm.temperature,
            max_tokens=self.settings.llm.max_tokens,
            grammar=grammar,
            purpose="actor",
        )
        return request, fitted.prompt_tokens, memory

    def decide(self, ctx: DecisionContext) -> Decision:
        """One model call. `LLMError` propagates: the harness ends the episode as `llm_error`."""
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
