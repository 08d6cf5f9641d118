"""The client interface every backend implements: messages in; text, usage and timing out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from awm.tokens import TokenCounter


class ChatRequest(BaseModel):
    """One chat call. `grammar` (GBNF) and `json_schema` are passed to backends that support them."""

    messages: list[dict[str, Any]]  # OpenAI-style; content may be a list of parts (vision)
    temperature: float = 0.0
    max_tokens: int = 256
    stop: list[str] | None = None
    seed: int | None = None
    grammar: str | None = None
    json_schema: dict[str, Any] | None = None
    purpose: str = "actor"  # actor | judge | induction | other: usage is accounted per component

    @property
    def deterministic(self) -> bool:
        """Only deterministic requests are served from the response cache."""
        return self.temperature == 0.0 or self.seed is not None


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Of `prompt_tokens`, those the server reused from its prefix cache instead of processing them again
    # (0: none, or the server does not say). What a step cost in model time is mostly the others.
    cached_prompt_tokens: int = 0
    cost_usd: float = 0.0


class ChatResult(BaseModel):
    text: str
    usage: Usage = Field(default_factory=Usage)
    seconds: float = 0.0
    backend: str = ""
    model: str = ""
    cached: bool = False
    attempts: int = 1
    stripped_tokens: list[str] = Field(default_factory=list)  # chat-template tokens removed from the reply


class LLMClient(Protocol):
    """What the agent, the judge and the inducer call. Backends are small classes behind it."""

    backend: str
    model: str

    def chat(self, request: ChatRequest) -> ChatResult: ...

    def token_counter(self) -> TokenCounter:
        """The counter that measures prompts as this client's model does (used to fit prompts).

        Each backend knows its own tokenizer (tiktoken, the llama.cpp server's, an estimate), so
        callers never look inside a client for an endpoint to build one.
        """
        ...
