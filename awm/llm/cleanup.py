"""Strip chat-template tokens that leak into replies (small models and misconfigured servers emit them).

Why: a reply like ``click('12')<|im_end|>`` must reach the action parser as ``click('12')``, and a
reply that runs on into a hallucinated next turn (``...<|im_end|>\\n<|im_start|>user ...``) must stop
where the model's turn ended. Pure functions; the removed tokens are reported so traces can show them.
"""

from __future__ import annotations

import re

# Tokens that end the assistant's turn: everything after the first one (once the reply has content)
# belongs to a turn the model should never have written.
END_OF_TURN = (
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<|eom_id|>",
    "<end_of_turn>",
    "</s>",
    "<|END_OF_TURN_TOKEN|>",
)

# Tokens that open a turn or mark a role; removed wherever they appear. A role word right after
# `<|im_start|>` / `<start_of_turn>` / `<|start_header_id|>` is part of the marker and goes too.
_OPENERS = (
    r"<\|im_start\|>(?:system|user|assistant|tool)?\n?",
    r"<start_of_turn>(?:user|model)?\n?",
    r"<\|start_header_id\|>(?:system|user|assistant|ipython)?<\|end_header_id\|>\n*",
    r"<\|start_header_id\|>",
    r"<\|end_header_id\|>",
    r"<\|begin_of_text\|>",
    r"<\|(?:system|user|assistant)\|>\n?",
    r"<\|im_sep\|>",
    r"<\|fim_(?:prefix|middle|suffix|pad)\|>",
    r"<\|repo_name\|>",
    r"<\|file_sep\|>",
    r"\[/?INST\]",
    r"<</?SYS>>",
    r"<s>",
    r"<\|START_OF_TURN_TOKEN\|>",
    r"<\|(?:CHATBOT|USER|SYSTEM)_TOKEN\|>",
)

_END_RE = re.compile("|".join(re.escape(t) for t in END_OF_TURN))
_OPEN_RE = re.compile("|".join(_OPENERS))
_ANY_RE = re.compile(_OPEN_RE.pattern + "|" + _END_RE.pattern)


def _token_name(marker: str) -> str:
    """The token itself, without the role word or newline removed with it."""
    found = re.match(r"<\|[^|>]+\|>|<[^<>]+>|\[/?INST\]", marker)
    return found.group(0) if found else marker.strip()


def strip_template_tokens(text: str) -> tuple[str, list[str]]:
    """Return the reply without template tokens, and the tokens removed (in order of appearance).

    The reply is cut at the first end-of-turn token that follows some content (the rest is a turn
    the model should not have written); every other template token is removed wherever it occurs.
    Text without template tokens comes back unchanged.
    """
    found = [_token_name(m.group(0)) for m in _ANY_RE.finditer(text)]
    if not found:
        return text, []
    cut = len(text)
    for match in _END_RE.finditer(text):
        if _OPEN_RE.sub("", _END_RE.sub("", text[: match.start()])).strip():
            cut = match.start()
            break
    kept = _END_RE.sub("", _OPEN_RE.sub("", text[:cut]))
    return kept.strip(), found
