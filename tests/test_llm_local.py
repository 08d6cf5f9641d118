"""The real embedded model (Qwen2.5-Coder-1.5B via llama.cpp's server): plumbing, usage and grammar."""

from __future__ import annotations

import re

import pytest

from awm.llm.base import ChatRequest


@pytest.mark.llm
def test_local_model_chats_and_follows_a_grammar(local_llm) -> None:
    result = local_llm.chat(
        ChatRequest(messages=[{"role": "user", "content": "Say hello in one word."}], max_tokens=8)
    )
    assert result.backend == "local" and result.model == "qwen2.5-coder-1.5b-instruct-q4_k_m"
    assert result.text.strip()
    assert result.usage.prompt_tokens > 5 and 0 < result.usage.completion_tokens <= 8
    assert result.usage.cost_usd == 0.0

    grammar = 'root ::= "click(\'" [0-9]+ "\')"'  # GBNF: root ::= "click('" [0-9]+ "')"
    prompt = "The page has a button with id 12 labelled Submit. Which action submits the form?"
    constrained = local_llm.chat(
        ChatRequest(messages=[{"role": "user", "content": prompt}], max_tokens=12, grammar=grammar)
    )
    assert re.fullmatch(r"click\('[0-9]+'\)", constrained.text), constrained.text
