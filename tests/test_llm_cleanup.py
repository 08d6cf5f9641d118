"""Template-token stripping: leaked chat-template tokens never reach the action parser."""

from __future__ import annotations

import pytest

from awm.llm.cleanup import strip_template_tokens


def test_plain_text_is_unchanged() -> None:
    assert strip_template_tokens("  click('12')\n") == ("  click('12')\n", [])


@pytest.mark.parametrize(
    ("raw", "text", "tokens"),
    [
        ("click('12')<|im_end|>", "click('12')", ["<|im_end|>"]),
        ("<|im_start|>assistant\nfill('3', 'x')<|im_end|>", "fill('3', 'x')", ["<|im_start|>", "<|im_end|>"]),
        ("answer<|eot_id|>", "answer", ["<|eot_id|>"]),
        ("<s>[INST] hi [/INST] yes</s>", "hi  yes", ["<s>", "[INST]", "[/INST]", "</s>"]),
        ("<|assistant|>done<|end|>", "done", ["<|assistant|>", "<|end|>"]),
        ("ok<|endoftext|>", "ok", ["<|endoftext|>"]),
    ],
)
def test_known_tokens_are_removed_and_recorded(raw: str, text: str, tokens: list[str]) -> None:
    assert strip_template_tokens(raw) == (text, tokens)


def test_reply_is_cut_where_the_turn_ended() -> None:
    raw = "click('7')<|im_end|>\n<|im_start|>user\nnow do something else<|im_end|>"
    text, tokens = strip_template_tokens(raw)
    assert text == "click('7')"
    assert tokens == ["<|im_end|>", "<|im_start|>", "<|im_end|>"]


def test_end_token_before_any_content_does_not_empty_the_reply() -> None:
    assert strip_template_tokens("<|im_end|>\nclick('4')") == ("click('4')", ["<|im_end|>"])


def test_lookalike_text_is_kept() -> None:
    raw = "the tag <span> and a|b and <|not a token"
    assert strip_template_tokens(raw) == (raw, [])
