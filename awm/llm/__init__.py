"""One LLM client interface and its backends (OpenAI-compatible, Anthropic, embedded llama.cpp)."""

from awm.llm.base import ChatRequest, ChatResult, LLMClient, Usage

__all__ = ["ChatRequest", "ChatResult", "LLMClient", "Usage"]
